//! Command-line parsing (no dependency: the grammar is small and fixed).

use std::path::PathBuf;

use session::Dialect;

/// The usage text.
pub(crate) const USAGE: &str = "\
usage: session [--dialect pi|omp] [--blob-dir DIR] [--json] [--as-agent] COMMAND ...

Inspecting commands never write: every file keeps its bytes, mode and mtime, and a
missing file is an error. They answer as the agent would after opening the file (a
migration or repair happens in memory only). --as-agent opens files as the agent
itself does instead (writing back a migration or a repaired last line, a header into
an empty file, a new session at a missing path).

Inspect (one JSON value on stdout, as the reference's API returns it):
  info FILE                                  header, leaf id and name
  entries FILE [--full]                      entry ids (or whole entries) in file order
  tree FILE                                  the entry tree with labels
  context FILE [--leaf ID|--leaf-null] [--transcript]
                                             what the model sees at that leaf
  projection FILE [--leaf ID|--leaf-null]    pi: entries with the messages they produce
  branch FILE [--leaf ID]                    entry ids from the root to the leaf
  check FILE                                 what the loader skipped or repaired, line by line

Write:
  append FILE --custom-type T --data JSON    append a custom entry
  extract FILE --leaf ID                     write the path to ID as a new session
  fork FILE --cwd CWD --session-dir DIR      copy the session for another directory
  rename FILE NAME                           name the session (pi: session_info; omp: title)

Find:
  ls [DIR] [--cwd CWD] [--all]               sessions of a directory (default: this one's)
  resume ARG [--cwd CWD]                     path of the session an id or name prefix names
  history search QUERY [--limit N]           search the prompt history

--dialect defaults to the file's own (a title slot means omp), else pi; for ls and
resume it defaults to pi, for history to omp. --omp-home omp|musepi picks omp's home
(~/.omp or ~/.musepi; default musepi). ls, resume and history print a table on a
terminal and JSON otherwise (or with --json). ls and resume keep what they learn
about each session file in ${XDG_CACHE_HOME:-~/.cache}/session-store and read a file
again only when it changed; --no-cache (or SESSION_NO_CACHE=1) scans every file.
";

/// Parsed command line.
#[derive(Debug, Default)]
pub(crate) struct Args {
    pub help: bool,
    pub dialect: Option<Dialect>,
    pub blob_dir: Option<PathBuf>,
    pub json: bool,
    pub as_agent: bool,
    pub command: String,
    pub positional: Vec<String>,
    pub leaf: Option<LeafArg>,
    pub transcript: bool,
    pub full: bool,
    pub all: bool,
    pub no_cache: bool,
    pub custom_type: Option<String>,
    pub data: Option<String>,
    pub cwd: Option<String>,
    pub session_dir: Option<PathBuf>,
    pub limit: Option<usize>,
    pub omp_home: session::discovery::OmpHome,
}

/// `--leaf ID` or `--leaf-null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LeafArg {
    Id(String),
    Null,
}

impl Args {
    pub(crate) fn parse(argv: &[String]) -> Result<Args, String> {
        let mut a = Args::default();
        let mut it = argv.iter();
        let value = |it: &mut std::slice::Iter<'_, String>, k: &str| -> Result<String, String> {
            it.next().cloned().ok_or_else(|| format!("{k} needs a value"))
        };
        while let Some(arg) = it.next() {
            let (key, inline) = match arg.split_once('=') {
                Some((k, v)) if k.starts_with("--") => (k, Some(v.to_owned())),
                _ => (arg.as_str(), None),
            };
            let take = |it: &mut std::slice::Iter<'_, String>| match &inline {
                Some(v) => Ok(v.clone()),
                None => value(it, key),
            };
            match key {
                "-h" | "--help" => a.help = true,
                "--dialect" => a.dialect = Some(take(&mut it)?.parse().map_err(|e| format!("{e}"))?),
                "--blob-dir" => a.blob_dir = Some(PathBuf::from(take(&mut it)?)),
                "--json" => a.json = true,
                "--as-agent" => a.as_agent = true,
                "--leaf" => a.leaf = Some(LeafArg::Id(take(&mut it)?)),
                "--leaf-null" => a.leaf = Some(LeafArg::Null),
                "--transcript" => a.transcript = true,
                "--full" => a.full = true,
                "--all" => a.all = true,
                "--no-cache" => a.no_cache = true,
                "--custom-type" => a.custom_type = Some(take(&mut it)?),
                "--data" => a.data = Some(take(&mut it)?),
                "--cwd" => a.cwd = Some(take(&mut it)?),
                "--session-dir" => a.session_dir = Some(PathBuf::from(take(&mut it)?)),
                "--omp-home" => {
                    a.omp_home = match take(&mut it)?.as_str() {
                        "omp" => session::discovery::OmpHome::Omp,
                        "musepi" => session::discovery::OmpHome::MusePi,
                        other => return Err(format!("--omp-home takes omp or musepi, not {other:?}")),
                    }
                }
                "--limit" => a.limit = Some(take(&mut it)?.parse().map_err(|_| "--limit takes a number".to_owned())?),
                k if k.starts_with("--") => return Err(format!("unknown option {k}")),
                _ if a.command.is_empty() => a.command = arg.clone(),
                _ => a.positional.push(arg.clone()),
            }
        }
        if a.command.is_empty() && !a.help {
            return Err("no command given".into());
        }
        Ok(a)
    }

    /// Returns positional argument `i` or an error naming `what`.
    pub(crate) fn arg(&self, i: usize, what: &str) -> Result<&str, String> {
        self.positional.get(i).map(String::as_str).ok_or_else(|| format!("{} needs {what}", self.command))
    }
}
