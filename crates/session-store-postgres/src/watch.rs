//! Watching a file through PostgreSQL's `LISTEN`/`NOTIFY`.
//!
//! Each layout's table carries a trigger that, for every row it inserts, updates or
//! deletes, sends `pg_notify('<table>_changes', '<path>:<size>')` (a deleted or
//! renamed-away path sends `'<path>:'`; a path longer than 7,000 bytes is sent as `''`,
//! which every watcher takes as "look again", since a payload is limited to 8,000
//! bytes). The trigger catches every writer of the table, omp's own included, and a
//! notification is delivered only when its transaction commits.
//!
//! A [`PgWatch`] holds a connection of its own, outside the pool, that `LISTEN`s on the
//! channel and keeps the notifications for its path.

use std::path::Path;
use std::time::{Duration, Instant};

use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;
use session_store::keyed::At;
use session_store::{Change, Op, StoreError, Watch};

use crate::error::db;

/// The first 55 bytes of the (ASCII) table name: with `_changes` or `_notify` it stays
/// within PostgreSQL's 63-byte names (`pg_notify` refuses a longer channel). Tables
/// whose names share those bytes share the channel, which only wakes their watchers
/// for each other's paths.
fn stem(table: &str) -> &str {
    &table[..table.len().min(55)]
}

/// The `NOTIFY` channel of the table `table`, in lower case as PostgreSQL folds the
/// unquoted names of the `LISTEN` and of the table (`pg_notify` takes its string as is).
pub(crate) fn channel(table: &str) -> String {
    format!("{}_changes", stem(table)).to_ascii_lowercase()
}

/// The trigger function and trigger that notify the watchers of `table`, whose rows are
/// keyed by `path` and whose size is the SQL expression `size` over `NEW`. Run inside the
/// transaction that holds the layout's schema lock.
pub(crate) fn trigger_ddl(table: &str, size: &str) -> String {
    let channel = channel(table);
    let f = format!("{}_notify", stem(table));
    format!(
        "CREATE OR REPLACE FUNCTION {f}() RETURNS trigger LANGUAGE plpgsql AS $$ \
         DECLARE p TEXT; s TEXT := ''; BEGIN \
         IF TG_OP = 'DELETE' THEN p := OLD.path; ELSE p := NEW.path; s := ({size})::TEXT; END IF; \
         IF octet_length(p) > 7000 THEN p := ''; END IF; \
         PERFORM pg_notify('{channel}', p || ':' || s); \
         IF TG_OP = 'UPDATE' AND OLD.path <> NEW.path THEN \
         PERFORM pg_notify('{channel}', CASE WHEN octet_length(OLD.path) > 7000 THEN '' ELSE OLD.path END || ':'); \
         END IF; RETURN NULL; END $$; {}",
        create_trigger_if_missing(table, &f, "AFTER INSERT OR UPDATE OR DELETE", &f)
    )
}

/// A statement that creates the row trigger `name` on `table` (running `function` at
/// `when`) unless the table has it: no `CREATE OR REPLACE TRIGGER` (PostgreSQL 14 and
/// later only), and no lock on the table when the trigger is there (every connect runs
/// this, beside omp's writers).
pub(crate) fn create_trigger_if_missing(table: &str, name: &str, when: &str, function: &str) -> String {
    let lower = name.to_ascii_lowercase();
    format!(
        "DO $do$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = '{lower}' AND tgrelid = '{table}'::regclass) \
         THEN CREATE TRIGGER {name} {when} ON {table} FOR EACH ROW EXECUTE FUNCTION {function}(); END IF; END $do$;"
    )
}

/// A [`Watch`] on one path of a PostgreSQL table (see the module docs).
pub(crate) struct PgWatch {
    /// Always present; taken on drop ([`crate::pool::close`]).
    client: Option<Client>,
    key: String,
    path: std::path::PathBuf,
}

impl std::fmt::Debug for PgWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgWatch").field("key", &self.key).finish_non_exhaustive()
    }
}

impl PgWatch {
    /// Listens on `table`'s channel with `client`, for the file keyed `key`.
    pub(crate) fn start(mut client: Client, table: &str, key: String, path: &Path) -> Result<PgWatch, StoreError> {
        client.batch_execute(&format!("LISTEN {}", channel(table))).map_err(db(At::new(Op::Stat, path)))?;
        Ok(PgWatch { client: Some(client), key, path: path.to_path_buf() })
    }
}

impl Drop for PgWatch {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            crate::pool::close(client);
        }
    }
}

impl Watch for PgWatch {
    fn next(&mut self, timeout: Duration) -> Result<Option<Change>, StoreError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let client = self.client.as_mut().unwrap_or_else(|| unreachable!("taken only on drop"));
            let mut notes = client.notifications();
            let next = notes.timeout_iter(left).next().map_err(db(At::new(Op::Stat, &self.path)))?;
            let Some(note) = next else { return Ok(None) };
            match session_store::keyed::parse_change(note.payload()) {
                Some((path, size)) if path == self.key => return Ok(Some(Change { size })),
                // A path too long for a payload: the watcher cannot tell, so it reports.
                Some(("", _)) | None => return Ok(Some(Change { size: None })),
                Some(_) => {}
            }
            if left.is_zero() {
                return Ok(None);
            }
        }
    }
}
