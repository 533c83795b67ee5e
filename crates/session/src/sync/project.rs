//! Which project a session belongs to on every machine: the git origin of its folder,
//! else an explicit mapping, else the folder itself; the slug that names the project's
//! folder on the remote; and the folder a project has on this machine.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use session_store::{BlobRef, Storage};

use crate::error::unless_missing;

/// How many folders up from a session's `cwd` a git repository is looked for.
const MAX_UP: usize = 64;

/// How many bytes of a readable project id a slug keeps.
const SLUG_READABLE: usize = 60;

/// Explicit project ids for folders of this machine (`--map ID=PATH`, and the `map`
/// object of `$XDG_CONFIG_HOME/session/sync.json`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectMap {
    /// Each id with its folder here (absolute, `.` and `..` resolved as text).
    entries: BTreeMap<String, PathBuf>,
}

impl ProjectMap {
    /// Returns an empty map.
    pub fn new() -> ProjectMap {
        ProjectMap::default()
    }

    /// Adds (or replaces) the folder of `id`. A git URL is normalized
    /// ([`normalize_git_url`]), so `git@host:a/b.git` and `https://host/a/b` name one
    /// project.
    pub fn insert(&mut self, id: &str, path: &Path) {
        self.entries.insert(normalize_id(id), lexical(path));
    }

    /// Parses one `ID=PATH` argument (the path absolute) and adds it.
    ///
    /// # Errors
    ///
    /// A message naming the argument when it has no `=`, an empty id or a relative path.
    pub fn insert_arg(&mut self, arg: &str) -> Result<(), String> {
        let Some((id, path)) = arg.split_once('=') else {
            return Err(format!("--map {arg}: expected ID=PATH"));
        };
        if id.trim().is_empty() || !Path::new(path).is_absolute() {
            return Err(format!("--map {arg}: expected a non-empty ID and an absolute PATH"));
        }
        self.insert(id.trim(), Path::new(path));
        Ok(())
    }

    /// Reads the `map` object (`{"map": {"ID": "PATH", …}}`) of the configuration file at
    /// `file` into this map; a missing file adds nothing.
    ///
    /// # Errors
    ///
    /// A message naming the file when it cannot be read or is not such an object.
    pub fn read_config(&mut self, storage: &dyn Storage, file: &Path) -> Result<(), String> {
        let read = unless_missing(storage.read(file)).map_err(|e| format!("{}: {e}", file.display()))?;
        let Some(bytes) = read else { return Ok(()) };
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("{}: not JSON ({e})", file.display()))?;
        let Some(map) = value.get("map") else { return Ok(()) };
        let Some(map) = map.as_object() else {
            return Err(format!("{}: \"map\" is not an object of ID: PATH", file.display()));
        };
        for (id, path) in map {
            match path.as_str() {
                Some(p) if Path::new(p).is_absolute() && !id.trim().is_empty() => self.insert(id, Path::new(p)),
                _ => return Err(format!("{}: map {id:?}: expected an absolute path", file.display())),
            }
        }
        Ok(())
    }

    /// Returns the configuration file of the map: `$XDG_CONFIG_HOME/session/sync.json`,
    /// else `~/.config/session/sync.json` (a relative `XDG_CONFIG_HOME` is ignored, as the
    /// XDG rule says).
    pub fn config_file(env: &session_discovery::ProcessEnv) -> PathBuf {
        let base = env
            .var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| env.home.join(".config"));
        base.join("session").join("sync.json")
    }

    /// Returns the folder mapped to `id`.
    pub fn folder(&self, id: &str) -> Option<&Path> {
        self.entries.get(id).map(PathBuf::as_path)
    }

    /// Returns the id and folder of the mapping that holds `cwd` (the deepest), and the
    /// rest of `cwd` below that folder.
    pub fn find(&self, cwd: &Path) -> Option<(&str, &Path, PathBuf)> {
        self.entries
            .iter()
            .filter_map(|(id, dir)| Some((id.as_str(), dir.as_path(), below(cwd, dir)?)))
            .max_by_key(|(_, dir, _)| dir.components().count())
    }
}

/// A session's project: its id on every machine, its folder here, and where the
/// session's `cwd` is below that folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Project {
    /// The id: a normalized git origin (`host/owner/repo`), a mapped id, or the
    /// absolute folder.
    pub id: String,
    /// The project's folder on this machine.
    pub root: PathBuf,
    /// The session's `cwd` relative to `root` (empty when it is `root`).
    pub rel: PathBuf,
}

/// Returns the project of a session whose `cwd` is `cwd`: the git origin of the
/// repository holding it (its `.git/config` read through `storage`), else the mapping
/// in `map` holding it, else `cwd` itself.
pub fn project_of(storage: &dyn Storage, map: &ProjectMap, cwd: &str) -> Project {
    let cwd = lexical(Path::new(cwd));
    let mut at = Some(cwd.as_path());
    for _ in 0..MAX_UP {
        let Some(dir) = at else { break };
        if let Some(url) = git_origin(storage, dir) {
            let rel = below(&cwd, dir).unwrap_or_default();
            return Project { id: normalize_git_url(&url), root: dir.to_path_buf(), rel };
        }
        at = dir.parent();
    }
    if let Some((id, root, rel)) = map.find(&cwd) {
        return Project { id: id.to_owned(), root: root.to_path_buf(), rel };
    }
    Project { id: cwd.to_string_lossy().into_owned(), root: cwd, rel: PathBuf::new() }
}

/// Returns the `url` of the `origin` remote of the repository whose work tree is `dir`
/// (`dir/.git` a folder, or a file `gitdir: …` as in a linked work tree), if any.
fn git_origin(storage: &dyn Storage, dir: &Path) -> Option<String> {
    let dot_git = dir.join(".git");
    let stat = storage.stat(&dot_git).ok()??;
    let config = if stat.is_file {
        let text = String::from_utf8(storage.read(&dot_git).ok()?).ok()?;
        let gitdir = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
        let gitdir = dir.join(gitdir);
        // A linked work tree's config is its main repository's (`commondir`).
        let common = storage
            .read(&gitdir.join("commondir"))
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .map(|c| lexical(&gitdir.join(c.trim())));
        common.unwrap_or(gitdir).join("config")
    } else {
        dot_git.join("config")
    };
    let text = String::from_utf8(storage.read(&config).ok()?).ok()?;
    origin_url(&text)
}

/// Returns the `url` of `[remote "origin"]` in the text of a git config file.
fn origin_url(config: &str) -> Option<String> {
    let mut in_origin = false;
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            let inner = line.trim_start_matches('[').split(']').next().unwrap_or("");
            let mut parts = inner.splitn(2, char::is_whitespace);
            let section = parts.next().unwrap_or("").to_ascii_lowercase();
            let name = parts.next().unwrap_or("").trim().trim_matches('"');
            in_origin = section == "remote" && name == "origin";
            continue;
        }
        if !in_origin {
            continue;
        }
        if let Some((key, value)) = line.split_once('=')
            && key.trim().eq_ignore_ascii_case("url")
        {
            let value = value.trim().trim_matches('"').trim();
            if !value.is_empty() {
                return Some(value.to_owned());
            }
        }
    }
    None
}

/// Returns the one form of a git remote URL: `host/path`, the host lowercased, without
/// scheme, user, password, port, trailing `/` or `.git`; so `git@github.com:a/b.git`,
/// `ssh://git@github.com:22/a/b` and `https://github.com/a/b` all give `github.com/a/b`.
///
/// ```
/// use session::sync::normalize_git_url;
/// assert_eq!(normalize_git_url("git@github.com:a/b.git"), "github.com/a/b");
/// assert_eq!(normalize_git_url("https://user:pw@GitHub.com/a/b/"), "github.com/a/b");
/// assert_eq!(normalize_git_url("ssh://git@github.com:22/a/b.git"), "github.com/a/b");
/// ```
pub fn normalize_git_url(url: &str) -> String {
    let url = url.trim();
    let (rest, scp) = match url.split_once("://") {
        Some((_, rest)) => (rest, false),
        None => (url, true),
    };
    let (authority, path) = if scp {
        // `user@host:path`: the first `:` before any `/` ends the host.
        match rest.split_once(':') {
            Some((a, p)) if !a.contains('/') => (a, p),
            _ => ("", rest),
        }
    } else {
        rest.split_once('/').unwrap_or((rest, ""))
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if scp {
        host
    } else {
        host.rsplit_once(':').filter(|(_, p)| p.chars().all(|c| c.is_ascii_digit())).map_or(host, |(h, _)| h)
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).trim_end_matches('/');
    if host.is_empty() {
        return path.to_owned();
    }
    format!("{}/{path}", host.to_ascii_lowercase())
}

/// Returns a mapped id in the form it is compared in: a git URL normalized, anything
/// else as written.
fn normalize_id(id: &str) -> String {
    let id = id.trim();
    if id.contains("://") || (id.contains('@') && id.contains(':')) || id.ends_with(".git") {
        normalize_git_url(id)
    } else {
        id.to_owned()
    }
}

/// Returns the name of a project's folder on the remote: the id's letters, digits, `.`,
/// `_` and `-` (every other run of characters one `-`, trimmed, at most 60 bytes kept
/// from the end), then `-` and the first 16 hex digits of the SHA-256 of the id.
///
/// ```
/// assert_eq!(session::sync::project_slug("github.com/a/b"), format!("github.com-a-b-{}", &session::store::BlobRef::for_bytes(b"github.com/a/b").hash()[..16]));
/// ```
pub fn project_slug(id: &str) -> String {
    let mut readable = String::new();
    for c in id.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            readable.push(c);
        } else if !readable.ends_with('-') {
            readable.push('-');
        }
    }
    let readable = readable.trim_matches(|c| c == '-' || c == '.');
    let cut = readable.len().saturating_sub(SLUG_READABLE);
    let readable = readable[cut..].trim_start_matches(['-', '.']);
    let hash = BlobRef::for_bytes(id.as_bytes());
    let hash = &hash.hash()[..16];
    if readable.is_empty() { hash.to_owned() } else { format!("{readable}-{hash}") }
}

/// Returns the rest of `path` below `dir` (empty for `dir` itself), compared component
/// by component.
pub(super) fn below(path: &Path, dir: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(dir).ok()?;
    rest.components().all(|c| matches!(c, Component::Normal(_))).then(|| rest.to_path_buf())
}

/// Returns `path` with `.` and `..` resolved as text.
pub(super) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_urls_have_one_form() {
        for url in [
            "git@github.com:a/b.git",
            "https://github.com/a/b",
            "https://github.com/a/b.git/",
            "ssh://git@GitHub.com:22/a/b",
            "https://x:secret@github.com/a/b",
        ] {
            assert_eq!(normalize_git_url(url), "github.com/a/b", "{url}");
        }
    }

    #[test]
    fn origin_is_read_from_its_section() {
        let config =
            "[core]\n\turl = nope\n[remote \"upstream\"]\n\turl = x\n[remote \"origin\"]\n\turl = git@h:a/b.git\n";
        assert_eq!(origin_url(config).as_deref(), Some("git@h:a/b.git"));
        assert_eq!(origin_url("[core]\n"), None);
    }

    #[test]
    fn slugs_are_plain_names() {
        let slug = project_slug("/home/me/../x y");
        assert!(slug.starts_with("home-me-..-x-y-"), "{slug}");
        assert!(session_store::is_plain_name(&project_slug("..")));
        assert_eq!(project_slug("").len(), 16);
    }
}
