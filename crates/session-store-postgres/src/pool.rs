//! A small pool of synchronous connections: idle clients are kept for reuse, a closed one is
//! dropped, one idle for a while is checked first (a server restart or an idle timeout kills
//! connections silently), and a client taken out stays out (a held session lock keeps its
//! own).

use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::{Client, Config, NoTls};

/// A connection idle this long is checked with a round trip before it is reused.
const CHECK_AFTER: Duration = Duration::from_secs(2);

/// How long that check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct Pool {
    config: Config,
    idle: Mutex<Vec<(Client, Instant)>>,
    max_idle: usize,
}

/// Drops `client` where that cannot panic. The blocking client closes its connection
/// by driving a runtime of its own, which panics on a thread that is driving a tokio
/// runtime ("Cannot start a runtime from within a runtime"): a storage, a watch or a
/// session lock is often dropped at the end of an `async` block. On such a thread the
/// client is closed on a thread of its own; elsewhere, in place.
pub(crate) fn close(client: Client) {
    if tokio::runtime::Handle::try_current().is_ok() {
        let spawned = std::thread::Builder::new().name("postgres-close".into()).spawn(move || drop(client));
        // No thread to be had: the connection is left open rather than a panic raised
        // in a destructor (the server ends it when this process exits).
        if let Err(e) = spawned {
            eprintln!("session-store-postgres: cannot close a connection off the runtime: {e}");
        }
    } else {
        drop(client);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let idle = std::mem::take(self.idle.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (client, _) in idle {
            close(client);
        }
    }
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
                Some((c, _)) if c.is_closed() => close(c),
                Some((mut c, since)) if since.elapsed() >= CHECK_AFTER => {
                    if c.is_valid(CHECK_TIMEOUT).is_ok() {
                        return Ok(Pooled { client: Some(c), pool: self.clone() });
                    }
                    close(c);
                }
                Some((c, _)) => return Ok(Pooled { client: Some(c), pool: self.clone() }),
                None => break,
            }
        }
        let client = self.config.connect(NoTls)?;
        Ok(Pooled { client: Some(client), pool: self.clone() })
    }

    /// Opens a connection of its own, never pooled (a `LISTEN`ing watcher keeps it).
    pub(crate) fn connect_unpooled(&self) -> Result<Client, postgres::Error> {
        self.config.connect(NoTls)
    }

    fn put(&self, client: Client) {
        if client.is_closed() {
            return close(client);
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < self.max_idle {
            idle.push((client, Instant::now()));
        } else {
            drop(idle);
            close(client);
        }
    }
}

thread_local! {
    /// Set when an error of this thread said the connection in use broke: the client
    /// dropped next on this thread is closed rather than given back. A client whose
    /// socket failed may not report `is_closed` yet, and reusing it fails again.
    static BROKEN: Cell<bool> = const { Cell::new(false) };
}

/// Notes that the connection this thread is using broke (see [`BROKEN`]).
pub(crate) fn note_broken() {
    BROKEN.with(|b| b.set(true));
}

/// A client on loan from the pool, given back on drop (unless its connection closed or
/// broke).
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
        let broken = BROKEN.with(|b| b.replace(false));
        if let Some(c) = self.client.take() {
            if broken { close(c) } else { self.pool.put(c) }
        }
    }
}

impl Pooled {
    /// Closes the connection instead of giving it back.
    pub(crate) fn discard(&mut self) {
        if let Some(c) = self.client.take() {
            close(c);
        }
    }
}
