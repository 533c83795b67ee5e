//! A small pool of synchronous connections: idle clients are kept for reuse, a closed one is
//! dropped, and a client taken out stays out (a held session lock keeps its own).

use std::sync::{Arc, Mutex};

use postgres::{Client, Config, NoTls};

pub(crate) struct Pool {
    config: Config,
    idle: Mutex<Vec<Client>>,
    max_idle: usize,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("max_idle", &self.max_idle).finish_non_exhaustive()
    }
}

impl Pool {
    pub(crate) fn new(config: Config, max_idle: usize) -> Arc<Pool> {
        Arc::new(Pool { config, idle: Mutex::new(Vec::new()), max_idle })
    }

    /// Returns an idle open client or a new connection.
    pub(crate) fn get(self: &Arc<Pool>) -> Result<Pooled, postgres::Error> {
        loop {
            let next = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match next {
                Some(c) if c.is_closed() => continue,
                Some(c) => return Ok(Pooled { client: Some(c), pool: self.clone() }),
                None => break,
            }
        }
        let client = self.config.connect(NoTls)?;
        Ok(Pooled { client: Some(client), pool: self.clone() })
    }

    fn put(&self, client: Client) {
        if client.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < self.max_idle {
            idle.push(client);
        }
    }
}

/// A client on loan from the pool, given back on drop (unless its connection closed).
pub(crate) struct Pooled {
    client: Option<Client>,
    pool: Arc<Pool>,
}

impl Pooled {
    pub(crate) fn client(&mut self) -> &mut Client {
        self.client.as_mut().expect("a pooled client is present until drop")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            self.pool.put(c);
        }
    }
}

impl Pooled {
    /// Closes the connection instead of giving it back.
    pub(crate) fn discard(&mut self) {
        self.client.take();
    }
}
