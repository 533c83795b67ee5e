//! The command line: clap's derive, one variant per command, each with its own help and
//! an example.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use session::Dialect;

const AFTER_HELP: &str = "\
Inspecting commands never write: every file keeps its bytes, mode and mtime, and a missing
file is an error. They answer as the agent would after opening the file (a migration or a
repaired last line happens in memory only). --as-agent opens files as the agent itself
does instead.

Exit status: 0 ok; 1 failure, not found, or damage found by `check`; 2 usage.
See docs/cli.md for every command's output.";

/// List, inspect, search, repair and move the sessions of pi and omp.
#[derive(Debug, Parser)]
#[command(name = "session", version, about, after_help = AFTER_HELP, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    /// The command; none on a terminal opens the picker (`session pick`).
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
}

/// Options every command takes, before or after its own arguments.
#[derive(Clone, Debug, Args)]
pub(crate) struct Global {
    /// Whose rules apply. Default: the file's own (a title slot means omp), else pi; pi
    /// for `ls` and `resume`, omp for `history`.
    #[arg(long, global = true, value_enum)]
    pub(crate) dialect: Option<DialectArg>,
    /// omp's blob store (default: `<omp agent dir>/blobs`).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) blob_dir: Option<PathBuf>,
    /// omp's home: `~/.omp` (omp's own) or `~/.musepi` (the design documents' name).
    #[arg(long, global = true, value_enum, default_value_t = OmpHomeArg::Omp)]
    pub(crate) omp_home: OmpHomeArg,
    /// Print JSON (the documented contract shapes) even on a terminal.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Print for a person (aligned fields, trees, transcripts, tables) even when the
    /// output is not a terminal (a pager, a file).
    #[arg(long = "text", id = "text_output", global = true, conflicts_with = "json")]
    pub(crate) text: bool,
    /// Open files as the agent does: write back a migration or a repaired last line,
    /// write a header into an empty file, start a new session at a missing path.
    #[arg(long, global = true)]
    pub(crate) as_agent: bool,
    /// Where sessions are: `postgres://…` (omp's table), `postgres+native://…` (one row
    /// per line), `redis://…` (omp's keys), `mysql://…`, `sqlite:///DB`,
    /// `s3://bucket/prefix?endpoint=…` (object storage), or absent / a directory for files.
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// Write to object storage (`s3://`) that ignores conditional writes (Garage), each
    /// head update under a lock object: safe only while one writer at a time writes a
    /// session.
    #[arg(long, global = true)]
    pub(crate) allow_unconditional: bool,
}

/// `--agent`: whose sessions a listing or a search reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum AgentArg {
    /// pi.
    Pi,
    /// omp (oh-my-pi).
    Omp,
    /// Claude Code (read only: `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`).
    Claude,
    /// Codex (read only: `$CODEX_HOME`, else `~/.codex`).
    Codex,
}

/// `--dialect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum DialectArg {
    /// pi 1.6.
    Pi,
    /// omp (oh-my-pi) 18.3.4.
    Omp,
}

impl From<DialectArg> for Dialect {
    fn from(d: DialectArg) -> Dialect {
        match d {
            DialectArg::Pi => Dialect::Pi,
            DialectArg::Omp => Dialect::Omp,
        }
    }
}

/// `--omp-home`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum OmpHomeArg {
    /// `~/.omp`, where omp keeps its sessions.
    Omp,
    /// `~/.musepi`.
    Musepi,
}

impl From<OmpHomeArg> for session::discovery::OmpHome {
    fn from(h: OmpHomeArg) -> session::discovery::OmpHome {
        match h {
            OmpHomeArg::Omp => session::discovery::OmpHome::Omp,
            OmpHomeArg::Musepi => session::discovery::OmpHome::MusePi,
        }
    }
}

/// Where the leaf goes before a query: an entry, or before the first entry.
#[derive(Debug, Args)]
#[group(multiple = false)]
pub(crate) struct LeafArgs {
    /// Move the leaf to this entry first (the reference's `branch(id)`).
    #[arg(long, value_name = "ID")]
    pub(crate) leaf: Option<String>,
    /// Reset the leaf to before the first entry (`resetLeaf()`).
    #[arg(long)]
    pub(crate) leaf_null: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show the header, the current leaf and the session name.
    #[command(after_help = "Example: session info ~/.pi/agent/sessions/--home-me-proj--/2026-…jsonl")]
    Info {
        /// The session file.
        file: PathBuf,
    },
    /// List the entries in file order (their ids, or with --full the entries).
    #[command(after_help = "Example: session entries FILE --full")]
    Entries {
        /// The session file.
        file: PathBuf,
        /// Print whole entries instead of ids.
        #[arg(long)]
        full: bool,
    },
    /// Print the last entries of a session; with --follow, print each new one as it is written.
    #[command(after_help = "Example: session tail FILE -n 20 --follow\n\n\
        --follow waits on the storage's change feed (files: the file's stat, looked at every 50 ms; \
        PostgreSQL: LISTEN/NOTIFY; Redis: a channel) and stops with exit status 1 when the file is removed. \
        With --json (or piped) each entry is printed as its JSON line.")]
    Tail {
        /// The session file.
        file: PathBuf,
        /// How many of the last entries to print first.
        #[arg(short = 'n', long, default_value_t = 10, value_name = "N")]
        lines: usize,
        /// Keep waiting for new entries, until interrupted.
        #[arg(short, long)]
        follow: bool,
    },
    /// Show the entry tree with labels and the active branch.
    #[command(after_help = "Example: session tree FILE")]
    Tree {
        /// The session file.
        file: PathBuf,
    },
    /// Show what the model sees at the leaf (a transcript on a terminal).
    #[command(after_help = "Example: session context FILE --leaf 1a2b3c4d")]
    Context {
        /// The session file.
        file: PathBuf,
        #[command(flatten)]
        leaf: LeafArgs,
        /// omp: the transcript variant of the context.
        #[arg(long)]
        transcript: bool,
    },
    /// pi: each entry on the path with the messages it produces.
    #[command(after_help = "Example: session --dialect pi projection FILE")]
    Projection {
        /// The session file.
        file: PathBuf,
        #[command(flatten)]
        leaf: LeafArgs,
    },
    /// List the entry ids from the root to the leaf.
    #[command(after_help = "Example: session branch FILE --leaf 1a2b3c4d")]
    Branch {
        /// The session file.
        file: PathBuf,
        /// The leaf to walk up from (default: the current leaf).
        #[arg(long, value_name = "ID")]
        leaf: Option<String>,
    },
    /// Report what the loader skipped or repaired, by line; exit 1 if anything.
    #[command(after_help = "Example: session check FILE || echo damaged")]
    Check {
        /// The session file.
        file: PathBuf,
    },
    /// Append a custom entry.
    #[command(after_help = "Example: session append FILE --custom-type note --data '{\"text\":\"hi\"}'")]
    Append {
        /// The session file (it must exist; with --as-agent a missing one starts a session).
        file: PathBuf,
        /// The entry's `customType`.
        #[arg(long, value_name = "T")]
        custom_type: String,
        /// The entry's `data`, as JSON.
        #[arg(long, value_name = "JSON")]
        data: Option<String>,
    },
    /// Write the path from the root to an entry as a new session next to the file.
    #[command(after_help = "Example: session extract FILE --leaf 1a2b3c4d")]
    Extract {
        /// The session file.
        file: PathBuf,
        /// The last entry of the new session.
        #[arg(long, value_name = "ID")]
        leaf: String,
    },
    /// Copy the whole session for another working directory.
    #[command(after_help = "Example: session fork FILE --cwd /home/me/other --session-dir /tmp/forks")]
    Fork {
        /// The session file (left as it is).
        file: PathBuf,
        /// The working directory of the copy.
        #[arg(long, value_name = "CWD")]
        cwd: String,
        /// Where the copy is written.
        #[arg(long, value_name = "DIR")]
        session_dir: PathBuf,
    },
    /// Name the session as a person does in the agent (pi: session_info; omp: title).
    #[command(after_help = "Example: session rename FILE 'Fix the config loader'")]
    Rename {
        /// The session file.
        file: PathBuf,
        /// The new name.
        name: String,
    },
    /// Move a session to another project: into the bucket of --cwd (or --session-dir),
    /// its artifacts with it; the header takes the new cwd.
    #[command(after_help = "Example: session move FILE --cwd ~/src/renamed-project")]
    Move {
        /// The session file.
        file: PathBuf,
        /// The project the session belongs to from now on.
        #[arg(long, value_name = "DIR")]
        cwd: String,
        /// A session directory to move into instead of --cwd's bucket.
        #[arg(long, value_name = "DIR")]
        session_dir: Option<PathBuf>,
    },
    /// Label an entry (an empty label clears it).
    #[command(after_help = "Example: session label FILE 1a2b3c4d 'before the refactor'")]
    Label {
        /// The session file.
        file: PathBuf,
        /// The entry to label.
        id: String,
        /// The label (empty or absent: clear it).
        text: Option<String>,
    },
    /// Upgrade the file to format version 3 in place, keeping the original as a backup.
    #[command(after_help = "Example: session migrate FILE   # keeps FILE.<time>.bak")]
    Migrate {
        /// The session file.
        file: PathBuf,
        /// Do not keep the original.
        #[arg(long)]
        no_backup: bool,
    },
    /// Write the session as the loader reads it (damage dropped, old versions migrated),
    /// keeping the original as a backup.
    #[command(after_help = "Example: session repair FILE   # keeps FILE.<time>.bak")]
    Repair {
        /// The session file (never written when it does not load).
        file: PathBuf,
        /// Do not keep the original.
        #[arg(long)]
        no_backup: bool,
    },
    /// Move a session with its artifacts directory and backups to the trash (asks first).
    #[command(after_help = "Example: session rm FILE --yes\n\n\
The file must hold a session (a valid header) and not be a symbolic link; its artifacts
directory (the file name without .jsonl) goes only when that is a real directory. The
session goes to the trash of its sessions folder (<agent dir>/session-trash, on the same
file system), where neither agent lists it: see `session trash`. With --purge it is
deleted for good. Outside the agents' session folders nothing is touched without --force,
and there is no trash there: a forced rm deletes for good. Backups go first and the
session last, so an interrupted rm leaves the session to remove again.")]
    Rm {
        /// The session file.
        file: PathBuf,
        /// Do not ask.
        #[arg(long, short)]
        yes: bool,
        /// Delete a session outside the agents' session folders too (for good).
        #[arg(long)]
        force: bool,
        /// Delete for good instead of moving to the trash.
        #[arg(long)]
        purge: bool,
    },
    /// Where the bytes go: by project, and the largest sessions split by what they hold.
    #[command(after_help = "Example: session du --all --top 20\n\n\
A session's bytes are its file's: text (messages and every other entry), tool output (tool
results and command runs), inline images (base64 image data) and other (omp's title slot,
lines that are no record), which add up to the file's size; its artifacts directory and
the blobs it names are counted beside them.")]
    Du {
        /// Every project's sessions (default: the working directory's project).
        #[arg(long)]
        all: bool,
        /// How many of the largest sessions to show.
        #[arg(long, default_value_t = 10)]
        top: usize,
    },
    /// Tokens and cost by day, week, month, project, model or session.
    #[command(after_help = "Example: session usage --by month --since 2026-01-01\n         \
session usage --agent claude,codex --by model\n\n\
Counts the usage records of every agent's sessions: assistant messages (and tool results
that carry usage), pi's usage entries, omp's model_usage entries, compactions and branch
summaries. Claude Code's and Codex's sessions count as the pi sessions `session import`
makes of them: one record per API response (Claude Code repeats a response's usage on
each of its lines; it counts once), Codex's from its token_count events. An entry a fork
or an extract repeats counts once (known by its id and time).
What each session file holds is kept in the usage cache (usage.bin in
${XDG_CACHE_HOME:-~/.cache}/session-store): a file whose size, times, inode and device are
unchanged is not read again.")]
    Usage {
        /// The grouping: day, week, month, project, model or session.
        #[arg(long, default_value = "day", value_name = "BY")]
        by: session::maintenance::UsageBy,
        /// Only entries at or after this UTC date (YYYY-MM-DD).
        #[arg(long, value_name = "DATE", value_parser = crate::jobs::parse_date)]
        since: Option<String>,
        /// Read every session instead of the usage cache (also SESSION_NO_CACHE=1).
        #[arg(long)]
        no_cache: bool,
        /// Only these agents' sessions (default: all four).
        #[arg(long, value_enum, value_delimiter = ',', value_name = "AGENT")]
        agent: Vec<AgentArg>,
    },
    /// Merge another copy of a session (one that went on elsewhere) into this one.
    #[command(after_help = "Example: session merge FILE FILE.sync-conflict-20261204.jsonl\n\n\
Both files must be copies of one session (the same header id). Every entry of either is
kept once, parents before children; the chosen leaf is written last, where both agents
resume (auto: the other copy's leaf when it went on from this one's, else this one's).
Entries both hold with other bytes but the same type and parent keep this copy's bytes.
FILE is rewritten only if it is still as read; THEIRS is only read (remove it yourself
once the merge is done). Artifact files whose names are free are copied.")]
    Merge {
        /// The session file to merge into.
        file: PathBuf,
        /// The other copy.
        theirs: PathBuf,
        /// The merged session's leaf: auto, ours, theirs, or an entry id.
        #[arg(long, default_value = "auto", value_name = "LEAF")]
        leaf: String,
    },
    /// Move a project's sessions after its folder moved (a dry run unless --yes).
    #[command(after_help = "Example: session relocate ~/src/old-name ~/src/new-name --yes\n\n\
Every session of both agents whose cwd is OLD or a folder below it goes to the bucket of
the same place below NEW (as `session move` moves one: the header's cwd rewritten, the
artifacts directory and omp's breadcrumb along). OLD need not exist any more. An
interrupted run is finished by running it again: a moved session's cwd is no longer
below OLD.")]
    Relocate {
        /// The folder the project was in.
        old: PathBuf,
        /// The folder it is in now.
        new: PathBuf,
        /// Move instead of listing.
        #[arg(long, short)]
        yes: bool,
    },
    /// Pin a session: `ls` lists it first (omp: in omp's own list, which its /resume reads).
    #[command(
        after_help = "Example: session pin 019a2b3c\n         session pin ~/.pi/agent/sessions/--home-me-proj--/2026-…jsonl\n\n\
SESSION is a session file, or what `session resume` takes: an id prefix, a file-name
prefix, a name or a first message. An omp session's pin goes to omp's own list,
<omp agent dir>/session-pins.json, which omp's /resume reads too; a pi session's to
${XDG_STATE_HOME:-~/.local/state}/session-store/marks.json. Both are keyed by the
session's id, so a pin follows the session through `move` and `relocate`; the session
file itself is never written."
    )]
    Pin {
        /// The session: a file, an id prefix, a file-name prefix or a name.
        session: String,
    },
    /// Unpin a session (see `pin`).
    #[command(after_help = "Example: session unpin 019a2b3c")]
    Unpin {
        /// The session: a file, an id prefix, a file-name prefix or a name.
        session: String,
    },
    /// Archive a session: `ls` leaves it out unless --archived (nothing is deleted).
    #[command(after_help = "Example: session archive 019a2b3c\n         session ls --archived\n\n\
The mark is kept in ${XDG_STATE_HOME:-~/.local/state}/session-store/marks.json, keyed by
the session's id (it follows the session through `move` and `relocate`); the session file
is never written and both agents still list and open it.")]
    Archive {
        /// The session: a file, an id prefix, a file-name prefix or a name.
        session: String,
    },
    /// Take a session out of the archive (see `archive`).
    #[command(after_help = "Example: session unarchive 019a2b3c")]
    Unarchive {
        /// The session: a file, an id prefix, a file-name prefix or a name.
        session: String,
    },
    /// Move old sessions to the trash (a dry run unless --yes).
    #[command(after_help = "Example: session prune --older-than 90d --keep-named --yes\n\n\
A session's age is its last activity as the agents list it (pi: the last message, omp:
the file's time); one without a valid time is never chosen. The dry run and the run with
--yes choose the same sessions; each goes to the trash as `rm` moves it (see `session
trash`).")]
    Prune {
        /// Sessions whose last activity is older than this (s, m, h, d, w).
        #[arg(long, value_name = "AGE", value_parser = crate::jobs::parse_duration)]
        older_than: std::time::Duration,
        /// Keep sessions with a name (pi) or a title (omp).
        #[arg(long)]
        keep_named: bool,
        /// Keep pinned sessions (see `session pin`).
        #[arg(long)]
        keep_pinned: bool,
        /// Only the sessions of this project (its folder and the folders below it).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// Move them to the trash instead of listing them.
        #[arg(long, short)]
        yes: bool,
    },
    /// List, restore or empty the trash of sessions removed by `rm`.
    #[command(after_help = "Example: session trash list\n\n\
Each sessions folder <agent dir>/sessions has its trash <agent dir>/session-trash: one
folder per removed session, holding trash.json (where it was, whose, when) and the
session's file, artifacts directory and backups under their own names. gc keeps the blobs
trashed sessions name; only `trash empty --yes` deletes them.")]
    Trash {
        #[command(subcommand)]
        command: TrashCommand,
    },
    /// Write the branch to the leaf as a readable document (Markdown or one HTML file).
    #[command(after_help = "Example: session export FILE --format html > session.html")]
    Export {
        /// The session file.
        file: PathBuf,
        /// The leaf whose branch to export (default: the current leaf).
        #[arg(long, value_name = "ID")]
        leaf: Option<String>,
        /// The document's format.
        #[arg(long, value_enum, default_value_t = ExportFormat::Md)]
        format: ExportFormat,
    },
    /// Check every session and the blob store; exit 1 when anything is wrong.
    #[command(after_help = "Example: session fsck            # both agents' homes\n         session fsck DIR --repair")]
    Fsck {
        /// Folders to check instead of both agents' sessions roots.
        dirs: Vec<PathBuf>,
        /// Rewrite damaged sessions that load, keeping backups (never one that does not load).
        #[arg(long)]
        repair: bool,
    },
    /// Delete the blobs no session refers to (a dry run unless --yes).
    #[command(after_help = "Example: session gc --yes --grace 7d\n\n\
References are read from every file in every folder either agent may keep sessions in
(both homes, PI_CODING_AGENT_DIR, PI_CONFIG_DIR, the XDG data folders whether or not
XDG_DATA_HOME is set now, omp's registry of sessions kept elsewhere), backups and
artifacts included. gc deletes nothing when a folder cannot be read or when no session is
found while blobs exist, and never a blob changed within the grace period.")]
    Gc {
        /// More folders of sessions to read (the agents' folders are always read).
        dirs: Vec<PathBuf>,
        /// Delete instead of listing.
        #[arg(long, short)]
        yes: bool,
        /// Keep unused blobs changed less than this long ago (s, m, h, d, w; `0`: none).
        #[arg(long, value_name = "DURATION", default_value = "1d", value_parser = crate::jobs::parse_duration)]
        grace: std::time::Duration,
    },
    /// Count sessions, bytes, entries by type, tokens and cost.
    #[command(after_help = "Example: session stats\n         session stats --agent codex\n\n\
Every agent's sessions unless --agent or DIR says otherwise (with DIR, or --store, only pi's
and omp's). Claude Code's and Codex's sessions count as the pi sessions `session import`
makes of them (their entries by the types of the import); their bytes are the source's.")]
    Stats {
        /// A sessions root or folder instead of the agents' homes.
        dir: Option<PathBuf>,
        /// Only these agents' sessions (default: all four).
        #[arg(long, value_enum, value_delimiter = ',', value_name = "AGENT")]
        agent: Vec<AgentArg>,
    },
    /// List sessions: the current directory's, of every agent (or --agent's, or --dialect's).
    #[command(after_help = "Example: session ls --all\n         session ls --archived\n         \
session ls --agent claude,codex --all\n\n\
Pinned sessions come first (marked * in the table, `pinned` in JSON); archived ones are
left out unless --archived, which lists only them. Without --dialect each JSON object
carries `agent`, `pinned` and `archived`; with --dialect the JSON is the reference's own.
Claude Code's and Codex's sessions are read where those agents keep them (never written)
and shown as pi lists the session `session import` makes of each; they are listed unless
--agent leaves them out, a DIR or --store is given, or --dialect asks for one reference.")]
    Ls {
        /// A session directory to list instead of the working directory's.
        dir: Option<PathBuf>,
        /// Whose sessions (default: the process's working directory).
        #[arg(long, value_name = "CWD")]
        cwd: Option<String>,
        /// Every project's sessions.
        #[arg(long)]
        all: bool,
        /// Read every file instead of the listing cache (also SESSION_NO_CACHE=1).
        #[arg(long)]
        no_cache: bool,
        /// One JSON object a line (each with its `agent`).
        #[arg(long)]
        jsonl: bool,
        /// Only the archived sessions (which are left out otherwise).
        #[arg(long)]
        archived: bool,
        /// Only the pinned sessions.
        #[arg(long)]
        pinned: bool,
        /// Only these agents' sessions (default: all four).
        #[arg(long, value_enum, value_delimiter = ',', value_name = "AGENT")]
        agent: Vec<AgentArg>,
    },
    /// Print the session an id prefix, a file-name prefix, a name or a first message names.
    #[command(after_help = "Example: session resume 01a2\n         session resume 'config loader'")]
    Resume {
        /// An id prefix, a file-name prefix or a path.
        query: String,
        /// Whose sessions to search first (default: the process's working directory).
        #[arg(long, value_name = "CWD")]
        cwd: Option<String>,
        /// A session directory to search instead of the default one.
        #[arg(long, value_name = "DIR")]
        session_dir: Option<PathBuf>,
        /// Read every file instead of the listing cache.
        #[arg(long)]
        no_cache: bool,
    },
    /// Search what was said in sessions (every agent's, or --agent's or --dialect's), best match first.
    #[command(after_help = "Example: session search 'config loader' --all --limit 5\n         \
session search 'flaky test' --agent claude,codex --all\n\n\
The catalog is kept in ${XDG_CACHE_HOME:-~/.cache}/session-store/search.db and updated on
each search (only new tails of grown files are read; another agent's changed file is read
again whole); it is derived data: deleting it costs only time. Sessions are never written.
Claude Code's and Codex's sessions are searched as `session import` reads them; a hit's
entryId is the imported entry's.")]
    Search {
        /// The words to find (every word, as a word prefix; punctuation and FTS5
        /// operators are separators, not syntax).
        query: String,
        /// Every project's sessions instead of the working directory's.
        #[arg(long)]
        all: bool,
        /// Whose sessions (default: the process's working directory).
        #[arg(long, value_name = "CWD", conflicts_with = "all")]
        cwd: Option<String>,
        /// Start the catalog over.
        #[arg(long, conflicts_with = "no_update")]
        rebuild: bool,
        /// Answer from the catalog as it is, without looking for sessions written or
        /// changed since it was last brought up to date (fastest; may miss them).
        #[arg(long)]
        no_update: bool,
        /// At most this many hits.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// One JSON object a line.
        #[arg(long)]
        jsonl: bool,
        /// Only these agents' sessions (default: all four).
        #[arg(long, value_enum, value_delimiter = ',', value_name = "AGENT")]
        agent: Vec<AgentArg>,
    },
    /// Print the session the agent's own --continue would open here (writes nothing).
    #[command(after_help = "Example: session continue --dialect omp")]
    Continue {
        /// Whose sessions (default: the process's working directory).
        #[arg(long, value_name = "CWD")]
        cwd: Option<String>,
        /// Read every file instead of the listing cache.
        #[arg(long)]
        no_cache: bool,
    },
    /// Copy a session file and its artifacts directory to a storage, at the same path.
    #[command(
        after_help = "Example: session push ~/.omp/agent/sessions/--p--/s.jsonl --to postgres://db.example/sessions"
    )]
    Push {
        /// The session file on this machine.
        file: PathBuf,
        /// The storage URL (`postgres://…`, `postgres+native://…`, `redis://…`).
        #[arg(long, value_name = "URL")]
        to: String,
        /// Replace a different session already at that path.
        #[arg(long)]
        force: bool,
    },
    /// Copy a session and its artifacts directory from a storage into a directory.
    #[command(
        after_help = "Example: session pull redis://127.0.0.1:6379/0/home/me/.omp/agent/sessions/--p--/s.jsonl --to ."
    )]
    Pull {
        /// `URL/DATABASE/PATH` (the database: PostgreSQL's name, Redis' number), or a path
        /// in the `--store` storage.
        source: String,
        /// The directory the session file goes to (its artifacts directory beside it).
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
        /// Replace a different file already there.
        #[arg(long)]
        force: bool,
    },
    /// Sync every session of this machine both ways with a remote copy in a folder or a storage.
    #[command(after_help = "Example: session sync --to /mnt/nas/sessions --map github.com/me/app=$HOME/src/app\n\n\
Each session is compared with its remote copy: one that went further is fast-forwarded \
(only the missing lines are appended), two continuations are merged on both sides (every \
entry of both once), a session on one side only is copied to the other. Downloads are \
filed in this machine's bucket of the project's folder here, their cwd rewritten: a \
project is its git origin, else a --map ID=PATH (also read from \
$XDG_CONFIG_HOME/session/sync.json, {\"map\": {\"ID\": \"PATH\"}}), else its path. \
Nothing is deleted; every remote write is conditional, so a concurrent writer is merged, \
not overwritten. --dry-run writes nothing anywhere.\n\n\
With --watch it keeps going: after a first sync, the agents' session folders here are \
listed every quarter of a second and a session that changed is pushed at once (alone: its \
remote copy is looked up, not the remote listed), and every --interval seconds (30) every \
session is synced both ways, which brings down what other machines pushed. One line is \
printed per sync that moved something (with --json, the object a plain sync prints, one \
per line); a sync that fails is tried again, waiting longer each time, and after 20 \
failures in a row the command gives up (exit status 1). Ctrl-C or SIGTERM ends it once the \
step under way is done (exit status 0; a second one at once). Example: \
session sync --to /mnt/nas/sessions --watch --interval 60")]
    Sync {
        /// The remote: a folder, or a storage URL (`postgres://…`, `redis://…`, …).
        #[arg(long, value_name = "URL|DIR")]
        to: String,
        /// The folder of the layout in the remote (default: the folder itself, or
        /// `/session-sync` in a storage).
        #[arg(long, value_name = "P")]
        prefix: Option<String>,
        /// The project id of a folder of this machine (repeatable).
        #[arg(long, value_name = "ID=PATH")]
        map: Vec<String>,
        /// Only sessions of this project folder (repeatable).
        #[arg(long, value_name = "PATH")]
        project: Vec<PathBuf>,
        /// Say what would be done; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Keep going: push each change here as it lands, and sync every session every
        /// `--interval` seconds.
        #[arg(long, conflicts_with = "dry_run")]
        watch: bool,
        /// With `--watch`: the seconds between syncs of every session, which bring the
        /// remote's changes here.
        #[arg(long, value_name = "SECS", default_value_t = 30, requires = "watch",
              value_parser = clap::value_parser!(u64).range(1..))]
        interval: u64,
    },
    /// Import a Claude Code transcript or a Codex rollout as a new pi or omp session.
    #[command(
        after_help = "Example: session import ~/.claude/projects/-home-me-proj/7f3c2a10-….jsonl --to pi\n         \
session import 7f3c2a10 --to omp\n\n\
SOURCE is a file, or the beginning of a session id: the one session of Claude Code \
($CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects) or Codex ($CODEX_HOME, else ~/.codex: \
sessions/ and archived_sessions/) whose id begins so. The source is read, never written. The session goes into the target agent's bucket for the \
source's working directory (or --cwd), named after the source's start and id, so importing \
the same source again finds it: an unchanged source writes nothing, a source that grew gets \
only its new entries appended. Claude Code's tree stays a tree with the source's last line as \
the leaf; records with no pi counterpart are kept as custom entries `import:<agent>:<kind>`. \
A Codex `.jsonl.zst` is decoded as it is read."
    )]
    Import {
        /// The Claude Code transcript (`~/.claude/projects/…/<uuid>.jsonl`) or Codex
        /// rollout (`~/.codex/sessions/YYYY/MM/DD/rollout-….jsonl`, or `.jsonl.zst`), or
        /// the beginning of its session id.
        #[arg(value_name = "SOURCE")]
        file: PathBuf,
        /// The agent whose session to write.
        #[arg(long, value_enum, value_name = "AGENT")]
        to: DialectArg,
        /// The project the session belongs to (default: the source's working directory).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// A session directory to write into instead of the agent's bucket for the cwd.
        #[arg(long, value_name = "DIR")]
        session_dir: Option<PathBuf>,
    },
    /// Search omp's prompt history.
    History {
        #[command(subcommand)]
        command: HistoryCommand,
    },
    /// Browse sessions full screen: filter, preview, open in the agent, rename, trash, export.
    #[command(after_help = "Example: session pick --all\n\n\
Plain `session` on a terminal opens it too. / (or any letter that is not a key below)
starts a filter: by name and first message at once and, after a pause, by what was said
(the search catalog, as `session search`); esc leaves it. Keys:
enter opens the session in its agent (pi --session PATH, omp --resume PATH, from the
session's directory; SESSION_PI_BIN and SESSION_OMP_BIN name other programs), y or c
copies the path (and prints it on exit), r renames, d moves to the trash after y, e
exports Markdown into the working directory, ? lists every key, q or esc quits. Without a
terminal it exits with status 2.")]
    Pick {
        /// Every project's sessions (this project's first).
        #[arg(long)]
        all: bool,
    },
    /// Serve sessions to an agent over the Model Context Protocol (stdio; read-only).
    #[command(after_help = "Example: claude mcp add sessions -- session mcp\n         \
codex mcp add sessions -- session mcp\n\n\
A Model Context Protocol server on stdin and stdout, for an agent to list, search and read
its own and other agents' past sessions (pi, omp, Claude Code, Codex). Four tools:
list_sessions (filters: agent, cwd, since; paged), search_sessions (snippets with session
and entry ids), read_session (the conversation at a leaf, a page of messages at a time) and
read_entry (one entry whole). Every answer is bounded (a page size, a byte budget). No
session is written; a session read by path must be in one of the agents' session folders.
pi and omp take it in their MCP settings: see docs/cli.md, \"session mcp\".")]
    Mcp,
    /// Print a completion script for a shell.
    #[command(after_help = "Example: session completions bash > ~/.local/share/bash-completion/completions/session")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `export --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// Markdown.
    Md,
    /// One self-contained HTML file, images inlined.
    Html,
}

/// `trash` commands.
#[derive(Debug, Subcommand)]
pub(crate) enum TrashCommand {
    /// The sessions in the trash of every sessions folder, oldest first.
    #[command(after_help = "Example: session trash list --json")]
    List,
    /// Put a session back where it was (never over a file that is there now).
    #[command(after_help = "Example: session trash restore 1764806400000-s.jsonl\n\n\
WHAT is the session's folder in the trash (its name or path), the path the session had,
or its session id; it must name one session.")]
    Restore {
        /// Which session.
        what: String,
    },
    /// Delete sessions in the trash for good (a dry run unless --yes).
    #[command(after_help = "Example: session trash empty --older-than 30d --yes")]
    Empty {
        /// Only sessions moved to the trash longer than this ago (s, m, h, d, w).
        #[arg(long, value_name = "AGE", value_parser = crate::jobs::parse_duration)]
        older_than: Option<std::time::Duration>,
        /// Delete instead of listing.
        #[arg(long, short)]
        yes: bool,
    },
}

/// `history` commands.
#[derive(Debug, Subcommand)]
pub(crate) enum HistoryCommand {
    /// Full-text search over the prompts, newest first.
    #[command(after_help = "Example: session history search 'config loader' --limit 10")]
    Search {
        /// The words to find.
        query: String,
        /// At most this many prompts.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Only prompts given in this directory.
        #[arg(long, value_name = "CWD")]
        cwd: Option<String>,
    },
}

impl Command {
    /// Returns the one session file the command opens, for those that name one.
    pub(crate) fn session_file(&self) -> Option<&std::path::Path> {
        use Command::*;
        match self {
            Info { file, .. }
            | Entries { file, .. }
            | Tail { file, .. }
            | Tree { file, .. }
            | Context { file, .. }
            | Projection { file, .. }
            | Branch { file, .. }
            | Check { file, .. }
            | Append { file, .. }
            | Extract { file, .. }
            | Fork { file, .. }
            | Rename { file, .. }
            | Move { file, .. }
            | Label { file, .. }
            | Migrate { file, .. }
            | Repair { file, .. }
            | Rm { file, .. }
            | Export { file, .. }
            | Push { file, .. } => Some(file),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    /// clap's own checks of the definition (unique names, valid conflicts), and every
    /// subcommand's arguments parsed beside the global flags, whose names they share.
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
        let parsed = Cli::try_parse_from(["session", "--text", "label", "f.jsonl", "1a2b3c4d", "before"]);
        assert!(
            matches!(&parsed, Ok(Cli { command: Some(Command::Label { text: Some(t), .. }), global, .. }) if t == "before" && global.text),
            "{parsed:?}"
        );
        assert!(Cli::try_parse_from(["session", "--json", "--text", "info", "f"]).is_err());
    }
}
