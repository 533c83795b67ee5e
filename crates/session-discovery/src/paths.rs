//! Path arithmetic as Node's `path` module does it, and the cwd → bucket encodings.
//!
//! Both references name a project's session directory ("bucket") after its working
//! directory. The encodings are textual and lossy (`/a-b` and `/a/b` collide); they
//! are reproduced exactly, including Windows-style inputs (`C:\x`), which are
//! recognised by their drive letter whatever the host.

use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

/// Returns whether `p` looks like a Windows path (`C:\…`, `C:/…`, `\\server\…`).
fn is_windows_style(p: &str) -> bool {
    let b = p.as_bytes();
    (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':') || p.starts_with("\\\\")
}

/// Expands `~` and `~/…` (and `~\…`) with `home`, and a `file://` URL to its path,
/// as the references normalise user-supplied paths.
pub fn expand_user_path(p: &str, home: &str) -> String {
    if p == "~" {
        return home.to_string();
    }
    if let Some(rest) = p.strip_prefix("~/").or_else(|| p.strip_prefix("~\\")) {
        return format!("{}/{}", home.trim_end_matches('/'), rest);
    }
    if let Some(rest) = p.strip_prefix("file://") {
        // file:///x → /x; percent-escapes decoded.
        let rest = rest.strip_prefix("localhost").unwrap_or(rest);
        return percent_decode(rest);
    }
    p.to_string()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(h) = b.get(i + 1..i + 3)
            && let Ok(h) = std::str::from_utf8(h)
            && let Ok(v) = u8::from_str_radix(h, 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Resolves `p` against `base` as Node's `path.resolve(base, p)` does: absolute
/// result, `.`/`..`/empty segments removed, no trailing separator, symlinks not
/// followed. POSIX paths use `/` only (a `\` is an ordinary character); a
/// Windows-style path (drive letter) uses both separators and is written with `\`.
pub fn resolve(base: &str, p: &str) -> String {
    if is_windows_style(p) || (!p.starts_with('/') && is_windows_style(base)) {
        return resolve_windows(base, p);
    }
    let joined = if p.starts_with('/') { p.to_string() } else { format!("{base}/{p}") };
    format!("/{}", segments(joined.split('/')).join("/"))
}

/// [`resolve`] for paths, the one form the library resolves file paths with: `p`
/// against `base`, always absolute, `.`, `..` and empty segments taken out as text,
/// links not followed. Names that are not UTF-8 are kept byte for byte (no lossy
/// conversion), and a backslash or a drive letter is an ordinary character, as on
/// POSIX.
///
/// ```
/// use std::path::{Path, PathBuf};
/// use session_discovery::resolve_path;
/// assert_eq!(resolve_path(Path::new("/work/a"), Path::new("../b/./c.jsonl")), PathBuf::from("/work/b/c.jsonl"));
/// assert_eq!(resolve_path(Path::new("/work"), Path::new("/etc//x/..")), PathBuf::from("/etc"));
/// assert_eq!(resolve_path(Path::new("/"), Path::new("../..")), PathBuf::from("/"));
/// ```
pub fn resolve_path(base: &Path, p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in base.components().chain(p.components()) {
        match c {
            Component::Prefix(_) | Component::RootDir => out = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

fn resolve_windows(base: &str, p: &str) -> String {
    let full = if is_windows_style(p)
        && (p.len() == 2 || p.as_bytes().get(2).is_some_and(|c| *c == b'\\' || *c == b'/'))
        || p.starts_with("\\\\")
    {
        p.to_string()
    } else {
        format!("{base}\\{p}")
    };
    let (root, rest) = if let Some(rest) = full.strip_prefix("\\\\") {
        ("\\\\".to_string(), rest)
    } else {
        (format!("{}\\", &full[..2]), &full[2..])
    };
    format!("{root}{}", segments(rest.split(['/', '\\'])).join("\\"))
}

/// The segments of a path left once `.` and empty ones are dropped and each `..`
/// takes away the one before it.
fn segments<'a>(segs: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut parts = Vec::new();
    for seg in segs {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    parts
}

/// Replaces every `/`, `\` and `:` with `-` after removing one leading separator.
fn dashify(resolved: &str) -> String {
    let s = resolved.strip_prefix(['/', '\\']).unwrap_or(resolved);
    s.replace(['/', '\\', ':'], "-")
}

/// Returns pi's bucket name for an absolute, resolved cwd: `--<cwd with one leading
/// separator removed and / \ : turned into ->--`.
///
/// `cwd` is passed through [`resolve`] first (against `/`), so `//double//slash`
/// and trailing separators collapse as in pi.
///
/// ```
/// use session_discovery::encode_cwd_pi;
/// assert_eq!(encode_cwd_pi("/home/user/project"), "--home-user-project--");
/// assert_eq!(encode_cwd_pi("/"), "----");
/// assert_eq!(encode_cwd_pi("C:\\Users\\me\\proj"), "--C--Users-me-proj--");
/// ```
pub fn encode_cwd_pi(cwd: &str) -> String {
    format!("--{}--", dashify(&resolve("/", cwd)))
}

/// Where a canonical cwd lies for omp's bucket naming.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OmpScope {
    /// Under (or equal to) the home directory: `-<rel>`.
    Home,
    /// Under (or equal to) the temp root: `-tmp-<rel>`.
    Tmp,
    /// Anywhere else: `--<abs>--`.
    Absolute,
}

/// Returns `path.relative(from, to)` when `to` is `from` or below it, the way omp
/// tests it: the relative path must not start with `..` (a plain prefix test, so a
/// child named `..foo` counts as outside) and must not be absolute.
fn inside(from: &str, to: &str) -> Option<String> {
    let sep_win = is_windows_style(from) || is_windows_style(to);
    let split = |s: &str| -> Vec<String> {
        if sep_win {
            s.split(['/', '\\']).filter(|x| !x.is_empty()).map(str::to_string).collect()
        } else {
            s.split('/').filter(|x| !x.is_empty()).map(str::to_string).collect()
        }
    };
    let a = split(from);
    let b = split(to);
    let eq = |x: &String, y: &String| if sep_win { x.eq_ignore_ascii_case(y) } else { x == y };
    let common = a.iter().zip(&b).take_while(|(x, y)| eq(x, y)).count();
    let mut rel: Vec<String> = std::iter::repeat_n("..".to_string(), a.len() - common).collect();
    rel.extend(b[common..].iter().cloned());
    let rel = rel.join(if sep_win { "\\" } else { "/" });
    if rel.starts_with("..") { None } else { Some(rel) }
}

/// Classifies a canonical cwd against canonical home and temp roots (home first).
pub fn omp_scope(canonical_cwd: &str, canonical_home: &str, canonical_tmp: &str) -> (OmpScope, String) {
    if let Some(rel) = inside(canonical_home, canonical_cwd) {
        return (OmpScope::Home, rel);
    }
    if let Some(rel) = inside(canonical_tmp, canonical_cwd) {
        return (OmpScope::Tmp, rel);
    }
    (OmpScope::Absolute, canonical_cwd.to_string())
}

/// Returns omp's bucket name for already canonical paths (no file-system access):
/// `-` + home-relative path, `-tmp-` + temp-relative path (`-tmp` for the temp
/// root), else `--<abs>--`, with `/`, `\`, `:` turned into `-`.
///
/// ```
/// use session_discovery::encode_cwd_omp_canonical;
/// assert_eq!(encode_cwd_omp_canonical("/home/u", "/home/u", "/tmp"), "-");
/// assert_eq!(encode_cwd_omp_canonical("/home/u/a/b", "/home/u", "/tmp"), "-a-b");
/// assert_eq!(encode_cwd_omp_canonical("/tmp/x", "/home/u", "/tmp"), "-tmp-x");
/// assert_eq!(encode_cwd_omp_canonical("/srv/p", "/home/u", "/tmp"), "--srv-p--");
/// ```
pub fn encode_cwd_omp_canonical(canonical_cwd: &str, canonical_home: &str, canonical_tmp: &str) -> String {
    match omp_scope(canonical_cwd, canonical_home, canonical_tmp) {
        (OmpScope::Home, rel) => format!("-{}", rel.replace(['/', '\\', ':'], "-")),
        (OmpScope::Tmp, rel) if rel.is_empty() => "-tmp".to_string(),
        (OmpScope::Tmp, rel) => format!("-tmp-{}", rel.replace(['/', '\\', ':'], "-")),
        (OmpScope::Absolute, abs) => format!("--{}--", dashify(&abs)),
    }
}

/// Canonicalises a resolved path (`realpath`), falling back to the path itself when
/// it does not exist.
pub fn canonicalize_best_effort(resolved: &str) -> String {
    if is_windows_style(resolved) {
        return resolved.to_string();
    }
    crate::io::realpath(std::path::Path::new(resolved))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| resolved.to_string())
}

/// Returns omp's bucket name for `cwd`: resolves it (against `/`), then
/// canonicalises cwd, home and temp root through symlinks (best effort) and
/// encodes with [`encode_cwd_omp_canonical`].
pub fn encode_cwd_omp(cwd: &str, home: &str, tmp: &str) -> String {
    let c = canonicalize_best_effort(&resolve("/", cwd));
    let h = canonicalize_best_effort(&resolve("/", home));
    let t = canonicalize_best_effort(&resolve("/", tmp));
    encode_cwd_omp_canonical(&c, &h, &t)
}

/// Returns the legacy absolute bucket name (`--<resolved cwd>--`, not canonicalised)
/// that older omp used for every cwd.
pub fn legacy_absolute_bucket(resolved_cwd: &str) -> String {
    format!("--{}--", dashify(resolved_cwd))
}

/// Returns the hashed bucket name of omp 17.2.5–17.2.8:
/// `<home|tmp|abs>-<readable basename>-<sha256 of the canonical cwd>`.
pub fn hashed_bucket_name(canonical_cwd: &str, canonical_home: &str, canonical_tmp: &str) -> String {
    let scope = match omp_scope(canonical_cwd, canonical_home, canonical_tmp).0 {
        OmpScope::Home => "home",
        OmpScope::Tmp => "tmp",
        OmpScope::Absolute => "abs",
    };
    let base = canonical_cwd.rsplit(['/', '\\']).find(|s| !s.is_empty()).unwrap_or("");
    let mut readable = String::new();
    let mut in_run = false;
    for c in base.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            readable.push(c);
            in_run = false;
        } else if !in_run {
            readable.push('-');
            in_run = true;
        }
    }
    let trimmed = readable.trim_matches('-');
    let chars: Vec<char> = trimmed.chars().collect();
    let tail: String = chars[chars.len().saturating_sub(80)..].iter().collect();
    let readable = if tail.is_empty() { "project".to_string() } else { tail };
    let digest = Sha256::digest(canonical_cwd.replace('\\', "/").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{scope}-{readable}-{hex}")
}

/// Returns the session file name `<fileSafe(timestamp)>_<id>.jsonl`.
///
/// ```
/// assert_eq!(
///     session_discovery::session_file_name("2026-11-29T19:11:36.572Z", "abc"),
///     "2026-11-29T19-11-36-572Z_abc.jsonl"
/// );
/// ```
pub fn session_file_name(iso_timestamp: &str, session_id: &str) -> String {
    format!("{}_{}.jsonl", session_model::timestamp::file_safe(iso_timestamp), session_id)
}

/// Returns the session id embedded in a `<ts>_<id>.jsonl` file name: the text after
/// the last `_` (which must not be the first character) and before `.jsonl`.
pub fn session_id_from_file_name(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(".jsonl")?;
    let sep = stem.rfind('_')?;
    if sep == 0 {
        return None;
    }
    let id = &stem[sep + 1..];
    (!id.is_empty()).then_some(id)
}
