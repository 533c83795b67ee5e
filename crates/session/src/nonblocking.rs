//! The library inside asynchronous programs (feature `tokio`): futures that never block
//! a runtime worker.
//!
//! Everything this workspace does is blocking IO: file reads and `fsync`, and the server
//! storages' clients (the `postgres` client even drives a runtime of its own, and panics
//! when called on a tokio worker). Called straight from an `async fn`, an open of a large
//! session or a PostgreSQL round trip stalls the worker and every task queued on it. The
//! types here run each call on tokio's blocking pool ([`tokio::task::spawn_blocking`])
//! and await it, so a worker is never held:
//!
//! * [`AsyncSession`] holds one [`SessionManager`] and runs the calls given to
//!   [`AsyncSession::with`] (or its shortcuts) one at a time, in the order they were
//!   awaited, on the blocking pool;
//! * [`blocking`] runs any other call of the library (a listing, a job of
//!   [`crate::maintenance`], a search) the same way.
//!
//! There is one implementation of each behaviour, the blocking one; this module only
//! moves it off the worker. A panic inside a call is raised again in the awaiting task.
//!
//! ```
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), session::SessionError> {
//! use session::nonblocking::AsyncSession;
//! use session::{Dialect, Env};
//!
//! let dir = std::env::temp_dir().join(format!("nonblocking-doc-{}", std::process::id()));
//! let s = AsyncSession::create(Dialect::Pi, "/work", &dir, Env::files()).await?;
//! s.append_message(session::model::typed::UserMessage::new("hi", 1.0)).await?;
//! let context = s.with(|m| m.context()).await?;
//! assert_eq!(context.messages.len(), 1);
//! s.close().await?;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use session_model::Dialect;

use crate::{Context, Env, Session, SessionError, SessionManager};

/// Runs `f` on tokio's blocking pool and returns what it returns, without holding the
/// calling task's worker. A panic in `f` is raised again here.
///
/// # Panics
///
/// Outside a tokio runtime (as [`tokio::task::spawn_blocking`] does).
pub async fn blocking<R, F>(f: F) -> R
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => match e.try_into_panic() {
            Ok(payload) => std::panic::resume_unwind(payload),
            // The blocking pool is shut down only with its runtime, which is running this task.
            Err(e) => unreachable!("a blocking task was cancelled while its runtime runs: {e}"),
        },
    }
}

/// Runs `f` on what `lock` guards; a panic of an earlier call does not poison it (that
/// call's session is as far as it got, see [`AsyncSession::with`]).
fn with_lock<T, R>(lock: &Mutex<T>, f: impl FnOnce(&mut T) -> R) -> R {
    f(&mut lock.lock().unwrap_or_else(PoisonError::into_inner))
}

/// One session, used from asynchronous code: each call runs on tokio's blocking pool
/// (see the [module docs](self)). Cheap to clone; clones share the session and their
/// calls run one at a time.
#[derive(Clone)]
pub struct AsyncSession {
    inner: Arc<Shared>,
}

/// The session behind every clone. The last clone dropped without
/// [`AsyncSession::close`] hands it to the blocking pool (its drop closes the writer,
/// which may write), so even that never runs on a worker.
struct Shared(Option<Mutex<SessionManager>>);

impl Shared {
    fn session(&self) -> &Mutex<SessionManager> {
        self.0.as_ref().unwrap_or_else(|| unreachable!("taken only on drop and close, which own the last clone"))
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(move || drop(m))),
                Err(_) => drop(m),
            }
        }
    }
}

impl std::fmt::Debug for AsyncSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncSession").finish_non_exhaustive()
    }
}

impl AsyncSession {
    /// Wraps a session opened or created by the blocking API.
    pub fn new(manager: SessionManager) -> AsyncSession {
        AsyncSession { inner: Arc::new(Shared(Some(Mutex::new(manager)))) }
    }

    /// [`SessionManager::open`] on the blocking pool.
    ///
    /// # Errors
    ///
    /// As [`SessionManager::open`].
    pub async fn open(dialect: Dialect, path: impl Into<PathBuf>, env: Env) -> Result<AsyncSession, SessionError> {
        let path = path.into();
        blocking(move || SessionManager::open(dialect, &path, env)).await.map(AsyncSession::new)
    }

    /// [`Session::open`] on the blocking pool: a session for reading only, which has no
    /// method that writes.
    ///
    /// # Errors
    ///
    /// As [`Session::open`].
    pub async fn open_read_only(
        dialect: Dialect,
        path: impl Into<PathBuf>,
        env: Env,
    ) -> Result<AsyncReadSession, SessionError> {
        AsyncReadSession::open(dialect, path, env).await
    }

    /// [`SessionManager::create`] on the blocking pool.
    ///
    /// # Errors
    ///
    /// As [`SessionManager::create`].
    pub async fn create(
        dialect: Dialect,
        cwd: &str,
        session_dir: &Path,
        env: Env,
    ) -> Result<AsyncSession, SessionError> {
        let (cwd, dir) = (cwd.to_owned(), session_dir.to_path_buf());
        blocking(move || SessionManager::create(dialect, &cwd, &dir, env)).await.map(AsyncSession::new)
    }

    /// Runs `f` with the session on the blocking pool, after every call awaited before
    /// it, and returns what it returns.
    ///
    /// A call that panicked leaves the session as far as it got (the blocking API
    /// latches a write it could not finish as [`SessionManager::persistence_error`]);
    /// later calls still run.
    pub async fn with<R, F>(&self, f: F) -> R
    where
        F: FnOnce(&mut SessionManager) -> R + Send + 'static,
        R: Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        blocking(move || with_lock(inner.session(), f)).await
    }

    /// [`SessionManager::append_message`]: a typed message; returns the new entry's id.
    ///
    /// # Errors
    ///
    /// As [`SessionManager::append_message`].
    pub async fn append_message(
        &self,
        message: impl Into<session_model::typed::Message>,
    ) -> Result<session_model::ids::EntryId, SessionError> {
        let message = message.into();
        self.with(move |m| m.append_message(message)).await
    }

    /// [`SessionManager::append_message_json`]: any JSON, as given; returns the new
    /// entry's id.
    ///
    /// # Errors
    ///
    /// As [`SessionManager::append_message_json`].
    pub async fn append_message_json(&self, message: Value) -> Result<session_model::ids::EntryId, SessionError> {
        self.with(move |m| m.append_message_json(message)).await
    }

    /// [`SessionManager::context`]: what the model sees at the leaf.
    ///
    /// # Errors
    ///
    /// As [`SessionManager::context`].
    pub async fn context(&self) -> Result<Context, SessionError> {
        self.with(|m| m.context()).await
    }

    /// [`SessionManager::flush`].
    ///
    /// # Errors
    ///
    /// As [`SessionManager::flush`].
    pub async fn flush(&self) -> Result<(), SessionError> {
        self.with(SessionManager::flush).await
    }

    /// Closes the session ([`SessionManager::close`]) once no clone is left; with clones
    /// still alive it flushes ([`SessionManager::flush`]) and the last one closes on drop.
    ///
    /// # Errors
    ///
    /// As [`SessionManager::close`].
    pub async fn close(self) -> Result<(), SessionError> {
        match Arc::try_unwrap(self.inner) {
            Ok(mut shared) => match shared.0.take() {
                Some(m) => {
                    let m = m.into_inner().unwrap_or_else(PoisonError::into_inner);
                    blocking(move || m.close()).await
                }
                None => Ok(()),
            },
            Err(inner) => AsyncSession { inner }.flush().await,
        }
    }
}

/// A session opened for reading only ([`Session`]), used from asynchronous code: each
/// call runs on tokio's blocking pool. Cheap to clone; clones share the session and
/// their calls run one at a time. Nothing it does writes.
#[derive(Clone)]
pub struct AsyncReadSession {
    inner: Arc<Mutex<Session>>,
}

impl std::fmt::Debug for AsyncReadSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncReadSession").finish_non_exhaustive()
    }
}

impl AsyncReadSession {
    /// [`Session::open`] on the blocking pool.
    ///
    /// # Errors
    ///
    /// As [`Session::open`].
    pub async fn open(dialect: Dialect, path: impl Into<PathBuf>, env: Env) -> Result<AsyncReadSession, SessionError> {
        let path = path.into();
        let session = blocking(move || Session::open(dialect, &path, env)).await?;
        Ok(AsyncReadSession { inner: Arc::new(Mutex::new(session)) })
    }

    /// Runs `f` with the session on the blocking pool (moving its leaf is the only change
    /// it can make, in memory) and returns what it returns.
    pub async fn with<R, F>(&self, f: F) -> R
    where
        F: FnOnce(&mut Session) -> R + Send + 'static,
        R: Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        blocking(move || with_lock(&inner, f)).await
    }

    /// [`Session::context`].
    ///
    /// # Errors
    ///
    /// As [`Session::context`].
    pub async fn context(&self) -> Result<Context, SessionError> {
        self.with(|s| s.context()).await
    }
}
