//! Watching a file through the storage's change channel.
//!
//! Every script of this crate that writes a body publishes `<path>:<size>` (`<path>:` for
//! a body deleted or renamed away) on `<prefix>changes` in the same atomic call. omp's
//! own scripts publish nothing, so a watcher does not hear omp's writes; keyspace
//! notifications would, but they are a server-wide setting
//! (`notify-keyspace-events`) this crate does not change.
//!
//! A [`RedisWatch`] subscribes on a connection of its own, read by a thread of its own
//! that hands the messages for its path over a channel; dropping the watch stops the
//! thread within [`POLL`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use session_store::keyed::At;
use session_store::{Change, Op, StoreError, Watch};

use crate::error::rd;

/// How often the reading thread looks whether its watch was dropped.
const POLL: Duration = Duration::from_millis(500);

/// A [`Watch`] on one path of a Redis storage (see the module docs).
pub(crate) struct RedisWatch {
    changes: Receiver<Result<Change, StoreError>>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for RedisWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisWatch").finish_non_exhaustive()
    }
}

impl RedisWatch {
    /// Subscribes to `channel` on a new connection of `client` and keeps the messages
    /// about the key `key` (the file `path`). Returns once the subscription is in place.
    pub(crate) fn start(
        client: &redis::Client,
        channel: String,
        key: String,
        path: &Path,
    ) -> Result<RedisWatch, StoreError> {
        let op = Op::Stat;
        let mut conn = client.get_connection().map_err(rd(At::new(op, path)))?;
        let (tx, changes) = mpsc::channel();
        let (ready_tx, ready) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let path: PathBuf = path.to_path_buf();
        let thread_path = path.clone();
        std::thread::Builder::new()
            .name("session-redis-watch".into())
            .spawn(move || {
                let path = thread_path;
                let mut pubsub = conn.as_pubsub();
                let subscribed = pubsub.subscribe(&channel).and_then(|()| pubsub.set_read_timeout(Some(POLL)));
                let failed = subscribed.is_err();
                let _ = ready_tx.send(subscribed.map_err(rd(At::new(op, &path))));
                if failed {
                    return;
                }
                while !stopped.load(Ordering::Relaxed) {
                    let msg = match pubsub.get_message() {
                        Ok(msg) => msg,
                        Err(e) if e.is_timeout() => continue,
                        Err(e) => {
                            let _ = tx.send(Err(rd(At::new(op, &path))(e)));
                            return;
                        }
                    };
                    let Ok(payload) = msg.get_payload::<String>() else { continue };
                    let change = match session_store::keyed::parse_change(&payload) {
                        Some((p, size)) if p == key => Change { size },
                        Some(_) => continue,
                        None => Change { size: None },
                    };
                    if tx.send(Ok(change)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| StoreError::io(op, &path, e))?;
        match ready.recv() {
            Ok(Ok(())) => Ok(RedisWatch { changes, stop }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(StoreError::io(op, &path, std::io::Error::other("the watch thread ended"))),
        }
    }
}

impl Watch for RedisWatch {
    fn next(&mut self, timeout: Duration) -> Result<Option<Change>, StoreError> {
        match self.changes.recv_timeout(timeout) {
            Ok(change) => change.map(Some),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(StoreError::io(
                Op::Stat,
                Path::new(""),
                std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "the watch's connection ended"),
            )),
        }
    }
}

impl Drop for RedisWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
