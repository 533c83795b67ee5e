//! [`SessionManager::continue_recent`]: reopen the session a user was last working on.

use std::path::Path;

use session_discovery::{ContinueDecision, Discovery, cwd_identity, write_breadcrumb};
use session_model::Dialect;

use crate::{Env, SessionError, SessionManager};

impl SessionManager {
    /// Continues the most recent session of `cwd` (`continueRecent`), or starts a new
    /// one when there is none.
    ///
    /// * pi: the newest `.jsonl` of `session_dir` (default: the cwd's directory) whose
    ///   header parses; in an explicit directory that is not the cwd's default, only
    ///   sessions recorded for `cwd`. The manager's cwd is the caller's `cwd`.
    /// * omp: this terminal's breadcrumb first (see
    ///   [`Discovery::continue_recent`]), else the newest non-empty session of the
    ///   bucket. The breadcrumb is written for the session chosen. A session whose old
    ///   directory was renamed to `cwd` is opened as it is (moving it is left to the
    ///   caller).
    ///
    /// ```
    /// use session::{AgentDirs, Dialect, Discovery, Env, ProcessEnv, SessionManager, UserMessage};
    ///
    /// let env = Env::memory();
    /// let discovery = Discovery::new(AgentDirs::pi(&ProcessEnv::new("/home/me", "/work", "/tmp")))
    ///     .with_storage(env.storage().clone());
    /// // Nothing to continue yet: a new session starts (written with its first turn).
    /// let mut first = SessionManager::continue_recent(&discovery, "/work", None, env.clone())?;
    /// first.append_message(UserMessage::new("hello", 1.0))?;
    /// first.append_message(session::AssistantMessage::new(vec![session::ContentBlock::text("hi")], 2.0))?;
    /// let file = first.session_file().map(std::path::Path::to_path_buf);
    /// first.close()?;
    /// // The next call reopens it.
    /// let again = SessionManager::continue_recent(&discovery, "/work", None, env)?;
    /// assert_eq!(again.session_file().map(std::path::Path::to_path_buf), file);
    /// assert_eq!(again.context()?.messages.len(), 2);
    /// # Ok::<(), session::SessionError>(())
    /// ```
    pub fn continue_recent(
        discovery: &Discovery,
        cwd: &str,
        session_dir: Option<&Path>,
        env: Env,
    ) -> Result<SessionManager, SessionError> {
        let dialect = discovery.dialect();
        let dirs = discovery.dirs();
        let storage = env.storage.clone();
        let default_dir = dirs.ensure_default_session_dir(&*storage, cwd)?;
        let dir = session_dir.map_or_else(|| default_dir.clone(), Path::to_path_buf);
        let manager = match dialect {
            Dialect::Pi => {
                let filter = session_dir.is_some() && !dirs.is_default_dir(&dir, cwd);
                match discovery.find_most_recent(&dir, filter.then_some(cwd)) {
                    Some(file) => {
                        let mut m = SessionManager::open(dialect, &file, env)?;
                        m.set_cwd(cwd);
                        m
                    }
                    None => SessionManager::create(dialect, cwd, &dir, env)?,
                }
            }
            Dialect::Omp => {
                let terminal = dirs.env.terminal_id();
                let m = match discovery.continue_recent(cwd, session_dir, terminal.as_deref())? {
                    ContinueDecision::Open(info) => SessionManager::open(dialect, &info.path, env)?,
                    ContinueDecision::Reroot { session_file, .. } => SessionManager::open(dialect, &session_file, env)?,
                    ContinueDecision::New => SessionManager::create(dialect, cwd, &dir, env)?,
                };
                if let (Some(t), Some(file)) = (terminal, m.session_file()) {
                    // Best effort, as in omp: a breadcrumb that cannot be written only
                    // costs the next `--continue` its shortcut.
                    let fresh = !storage.exists(file).unwrap_or(false);
                    let _ = write_breadcrumb(dirs, &t, cwd, file, fresh, cwd_identity(Path::new(cwd)));
                }
                m
            }
        };
        Ok(manager)
    }
}
