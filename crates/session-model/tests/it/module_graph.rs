//! session-model's modules form a directed acyclic graph: no two top-level modules
//! name each other, directly or around a circle, and neither do the files of one
//! folder module; the JSON engine (`src/engine/`) names nothing outside itself.
//!
//! The graph is read from the sources: each file's code before its test module, doc
//! comments and comments left out, and in it every path through `crate::`, `super::`
//! or `self::` (and a `use` of a child module). A name is followed through the `use`
//! declarations that re-export it to the module that defines it, so a public module
//! that only re-exports (`json`, `scan`, `span`) is an edge to the code's home, and
//! `crate::Dialect` an edge to `dialect`, not to the crate root. Modules declared
//! under `#[cfg(test)]` are test code and left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path below the crate root (`["engine", "scan"]`; the root is empty).
type ModPath = Vec<String>;

/// Code as tokens, each with its 1-based line.
type Tokens = Vec<(String, usize)>;

/// The leaves of a use tree or a path: each a path as written and the name it binds.
type Leaves = Vec<(Vec<String>, String)>;

/// Where an edge was seen: the file, the line and the path as written.
type Seen = (String, usize, String);

/// The modules of a crate and what each one names.
struct Graph {
    /// Each module's path, its file (relative to `src/`, for messages) and its tokens.
    modules: Vec<(ModPath, String, Tokens)>,
    /// Every known module path.
    known: BTreeSet<ModPath>,
    /// For each module, the names its `use` declarations bring in: name → full path.
    imports: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
}

/// Splits the code of a file before its test module (`#[cfg(test)] mod tests`, the end
/// of every file, see `tests_go_last`) into identifiers, `::` and single punctuation
/// characters; comments, doc comments and the contents of string literals are left out.
fn tokens(text: &str) -> Tokens {
    let mut rest = text.find("\n#[cfg(test)]\nmod tests").map_or(text, |at| &text[..at]);
    let (mut out, mut line) = (Vec::new(), 1);
    while let Some(c) = rest.chars().next() {
        let word = rest.find(|d: char| !d.is_alphanumeric() && d != '_').unwrap_or(rest.len());
        let len = if rest.starts_with("//") {
            rest.find('\n').unwrap_or(rest.len())
        } else if let Some(comment) = rest.strip_prefix("/*") {
            comment.find("*/").map_or(rest.len(), |k| k + 4)
        } else if c == '"' {
            // A string literal, up to the first quote that no backslash escapes.
            let mut escaped = false;
            let end = rest[1..].find(|d| {
                let end = d == '"' && !escaped;
                escaped = d == '\\' && !escaped;
                end
            });
            end.map_or(rest.len(), |k| k + 2)
        } else if word > 0 {
            out.push((rest[..word].to_owned(), line));
            word
        } else if rest.starts_with("::") {
            out.push(("::".to_owned(), line));
            2
        } else {
            if !c.is_whitespace() {
                out.push((c.to_string(), line));
            }
            c.len_utf8()
        };
        line += rest[..len].matches('\n').count();
        rest = &rest[len..];
    }
    out
}

/// Reads a use tree or a path at `tokens[at..]` (after `use`, or at `crate`, `super`
/// or `self`) into its leaves. Returns the leaves and the index after the tree.
fn path_tree(tokens: &Tokens, mut at: usize, prefix: &[String]) -> (Leaves, usize) {
    let tok = |k: usize| tokens.get(k).map_or("", |(t, _)| t.as_str());
    let mut path = prefix.to_vec();
    let mut leaves = Vec::new();
    loop {
        match tok(at) {
            "{" => {
                at += 1;
                while tok(at) != "}" && at < tokens.len() {
                    let (inner, next) = path_tree(tokens, at, &path);
                    leaves.extend(inner);
                    at = next + usize::from(tok(next) == ",");
                }
                return (leaves, at + 1);
            }
            "*" => return (leaves, at + 1),
            t if t.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_') => {
                if t == "self" && !path.is_empty() && tok(at + 1) != "::" {
                    // `{self, ..}`: the module the group is in.
                    let name = path.last().cloned().unwrap_or_default();
                    return (vec![(path, name)], at + 1);
                }
                path.push(t.to_owned());
                at += 1;
                if tok(at) == "::" {
                    at += 1;
                    continue;
                }
                let renamed = tok(at) == "as";
                leaves.push((path, if renamed { tok(at + 1) } else { t }.to_owned()));
                return (leaves, at + 2 * usize::from(renamed));
            }
            _ => return (leaves, at),
        }
    }
}

/// The use trees and paths of some code: for each `use` declaration and each path
/// through `crate::`, `super::` or `self::`, whether it is a `use`, its first token and
/// its leaves.
fn trees(toks: &Tokens) -> Vec<(bool, usize, Leaves)> {
    let mut out = Vec::new();
    let mut k = 0;
    while k < toks.len() {
        let t = toks[k].0.as_str();
        let is_use = t == "use";
        let is_path_start = matches!(t, "crate" | "super" | "self")
            && toks.get(k + 1).is_some_and(|(n, _)| n == "::")
            && (k == 0 || toks[k - 1].0 != "::");
        if !is_path_start && !is_use {
            k += 1;
            continue;
        }
        let (leaves, next) = path_tree(toks, k + usize::from(is_use), &[]);
        out.push((is_use, k, leaves));
        k = next.max(k + 1);
    }
    out
}

impl Graph {
    /// Reads the crate whose files are `files` (paths relative to `src/`, with their
    /// text).
    fn new(files: &[(String, String)]) -> Graph {
        let mut modules: Vec<(ModPath, String, Tokens)> = files
            .iter()
            .map(|(file, text)| {
                let mut path: ModPath = file.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
                if path.last().is_some_and(|l| l == "mod" || l == "lib") {
                    path.pop();
                }
                (path, file.clone(), tokens(text))
            })
            .collect();
        // Modules declared under `#[cfg(test)]`, and everything below them, are tests.
        let mut test_only = BTreeSet::new();
        for (path, _, toks) in &modules {
            let t: Vec<&str> = toks.iter().map(|(t, _)| t.as_str()).collect();
            for k in (0..t.len()).filter(|&k| t[k..].starts_with(&["#", "[", "cfg", "(", "test", ")", "]"])) {
                // `#[cfg(test)] mod name;`, a visibility such as `pub(crate)` skipped.
                let end = (k + 7..t.len().min(k + 14)).find(|&j| matches!(t[j], "mod" | ";" | "{"));
                if let Some(j) = end.filter(|&j| t[j] == "mod") {
                    test_only.insert([&path[..], &[t.get(j + 1).copied().unwrap_or_default().to_owned()]].concat());
                }
            }
        }
        modules.retain(|(path, ..)| !test_only.iter().any(|t| path.starts_with(t)));
        let known = modules.iter().map(|(path, ..)| path.clone()).collect();
        let mut graph = Graph { modules, known, imports: BTreeMap::new() };
        for (path, _, toks) in &graph.modules {
            let leaves = trees(toks).into_iter().filter(|(is_use, ..)| *is_use).flat_map(|(.., leaves)| leaves);
            let names = leaves.filter_map(|(p, name)| Some((name, graph.absolute(path, &p)?))).collect();
            graph.imports.insert(path.clone(), names);
        }
        graph
    }

    /// Returns `path` as written in module `at` as a path from the crate root, or
    /// `None` for a path into another crate.
    fn absolute(&self, at: &ModPath, path: &[String]) -> Option<ModPath> {
        let (mut base, mut rest) = match path.first()?.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (at.clone(), &path[1..]),
            "super" => (at[..at.len().saturating_sub(1)].to_vec(), &path[1..]),
            child if self.known.contains(&[&at[..], &[child.to_owned()]].concat()) => (at.clone(), path),
            _ => return None,
        };
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// Returns the module that defines what `path` (from the crate root) names,
    /// following re-exports.
    fn home(&self, path: &ModPath) -> ModPath {
        let mut path = path.clone();
        for _ in 0..16 {
            let module = (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| self.known.contains(p));
            let module = module.unwrap_or_default();
            let Some(name) = path.get(module.len()) else { return module };
            match self.imports.get(&module).and_then(|names| names.get(name)) {
                Some(target) if *target != path[..=module.len()] => {
                    path = [&target[..], &path[module.len() + 1..]].concat();
                }
                _ => return module,
            }
        }
        path
    }

    /// Every reference of each module to another: (from, to, where).
    fn references(&self) -> Vec<(ModPath, ModPath, Seen)> {
        let mut out = Vec::new();
        for (from, file, toks) in &self.modules {
            for (_, k, leaves) in trees(toks) {
                for (path, _) in leaves {
                    let Some(to) = self.absolute(from, &path).map(|full| self.home(&full)) else { continue };
                    if !to.is_empty() {
                        out.push((from.clone(), to, (file.clone(), toks[k].1, path.join("::"))));
                    }
                }
            }
        }
        out
    }

    /// The edges among the children of module `parent`: a reference from anywhere in
    /// one child's subtree to anywhere in another's, with where it was first seen.
    fn edges_among_children(&self, parent: &ModPath) -> BTreeMap<(String, String), Seen> {
        let child = |p: &ModPath| (p.len() > parent.len() && p.starts_with(parent)).then(|| p[parent.len()].clone());
        let mut edges = BTreeMap::new();
        for (from, to, seen) in self.references() {
            if let (Some(a), Some(b)) = (child(&from), child(&to))
                && a != b
            {
                edges.entry((a, b)).or_insert(seen);
            }
        }
        edges
    }

    /// Returns circles among the children of `parent` (at least one through every group
    /// of children that name each other in a circle), each as its modules in order,
    /// back to the first, with the place each edge was seen.
    fn cycles_among_children(&self, parent: &ModPath) -> Vec<String> {
        let edges = self.edges_among_children(parent);
        let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (a, b) in edges.keys() {
            next.entry(a.as_str()).or_default().push(b.as_str());
        }
        let mut found = BTreeSet::new();
        let mut done = BTreeSet::new();
        for &start in next.keys() {
            // Depth-first, with the path from `start` on a stack.
            let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
            let mut on_path: Vec<&str> = vec![start];
            while let Some((node, i)) = stack.pop() {
                let Some(&succ) = next.get(node).and_then(|s| s.get(i)) else {
                    on_path.pop();
                    done.insert(node);
                    continue;
                };
                stack.push((node, i + 1));
                if let Some(at) = on_path.iter().position(|&n| n == succ) {
                    let mut circle: Vec<&str> = on_path[at..].to_vec();
                    // One spelling per circle: rotated to start at its least module.
                    let least = (0..circle.len()).min_by_key(|&r| circle[r]).unwrap_or(0);
                    circle.rotate_left(least);
                    found.insert(circle.iter().map(|s| s.to_string()).collect::<Vec<_>>());
                } else if !done.contains(succ) {
                    stack.push((succ, 0));
                    on_path.push(succ);
                }
            }
        }
        let name = |m: &str| parent.iter().map(String::as_str).chain([m]).collect::<Vec<_>>().join("::");
        found
            .into_iter()
            .map(|circle| {
                let mut text = name(&circle[0]);
                for (k, m) in circle.iter().enumerate() {
                    let to = &circle[(k + 1) % circle.len()];
                    let (file, line, path) = &edges[&(m.clone(), to.clone())];
                    text.push_str(&format!(" -> {} ({file}:{line}: {path})", name(to)));
                }
                text
            })
            .collect()
    }

    /// The circles among the top-level modules and among the children of any module.
    fn cycles(&self) -> Vec<String> {
        let mut parents: BTreeSet<ModPath> =
            self.known.iter().filter_map(|p| p.split_last().map(|(_, up)| up.to_vec())).collect();
        parents.insert(Vec::new());
        parents.iter().flat_map(|p| self.cycles_among_children(p)).collect()
    }
}

/// Returns session-model's source files (path below `src/`, text), in the order of
/// their paths.
fn sources() -> Result<Vec<(String, String)>, String> {
    fn read_tree(dir: &Path, out: &mut Vec<(String, String)>) -> Result<(), String> {
        for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                read_tree(&path, out)?;
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let rel = path.strip_prefix(SRC).map_err(|e| e.to_string())?.to_string_lossy().replace('\\', "/");
                out.push((rel, text));
            }
        }
        Ok(())
    }
    const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut files = Vec::new();
    read_tree(Path::new(SRC), &mut files)?;
    files.sort();
    Ok(files)
}

fn session_model() -> Result<Graph, String> {
    Ok(Graph::new(&sources()?))
}

/// The test module ends its file, as the house style has it and as the graph's reader
/// assumes (it reads each file's code up to its test module): after the module's
/// first line, nothing starts a line but its closing brace.
#[test]
fn tests_go_last() -> Result<(), String> {
    let files = sources()?;
    if files.len() < 30 {
        return Err(format!("only {} source files found", files.len()));
    }
    let late: Vec<&str> = files
        .iter()
        .filter(|(_, text)| {
            text.split_once("\n#[cfg(test)]\nmod tests {\n")
                .is_some_and(|(_, after)| after.lines().any(|l| !l.is_empty() && !l.starts_with(' ') && l != "}"))
        })
        .map(|(file, _)| file.as_str())
        .collect();
    if late.is_empty() { Ok(()) } else { Err(format!("code after the test module in {late:?}")) }
}

#[test]
fn no_module_circles() -> Result<(), String> {
    let graph = session_model()?;
    let cycles = graph.cycles();
    if !cycles.is_empty() {
        return Err(format!("session-model's modules name each other in a circle:\n{}", cycles.join("\n")));
    }
    // The reader sees the graph: a few edges every layout has.
    let top = graph.edges_among_children(&Vec::new());
    for (from, to) in [("record", "engine"), ("parse", "record"), ("stored", "parse"), ("scan", "engine")] {
        if !top.contains_key(&(from.to_owned(), to.to_owned())) {
            return Err(format!("the edge {from} -> {to} was not found: the reader misses references"));
        }
    }
    Ok(())
}

#[test]
fn the_json_engine_names_nothing_outside_it() -> Result<(), String> {
    let graph = session_model()?;
    let engine = vec!["engine".to_owned()];
    let outside: Vec<String> = graph
        .references()
        .into_iter()
        .filter(|(from, to, _)| from.starts_with(&engine) && !to.starts_with(&engine))
        .map(|(_, to, (file, line, path))| format!("{file}:{line}: {path} (in {})", to.join("::")))
        .collect();
    if outside.is_empty() {
        Ok(())
    } else {
        Err(format!("the JSON engine names modules above it:\n{}", outside.join("\n")))
    }
}

/// The reader catches a circle however it is spelled: through a re-export, a group,
/// `super::` and a root re-export, and only in code (not in tests, not in comments).
#[test]
fn a_circle_is_caught_and_named() -> Result<(), String> {
    let file = |p: &str, t: &str| (p.to_owned(), t.to_owned());
    let files = [
        file("lib.rs", "mod a;\nmod b;\nmod c;\npub use c::Thing;\n"),
        file("a.rs", "//! Uses `crate::c`, in a comment only.\nuse crate::{b::{self, Face}};\npub fn g() {}\n"),
        file("b.rs", "pub use crate::c::inner::Face;\n"),
        file("c.rs", "pub struct Thing;\npub mod inner;\n#[cfg(test)]\nmod tests {\n    use crate::a::X;\n}\n"),
        file("c/inner.rs", "pub struct Face;\nfn f() { let _ = crate::Thing; super::super::a::g(); }\n"),
    ];
    let cycles = Graph::new(&files).cycles();
    // One circle for the three modules that name each other (a -> c -> a is in the
    // same group and not named again).
    let expected =
        ["a -> b (a.rs:2: crate::b) -> c (b.rs:1: crate::c::inner::Face) -> a (c/inner.rs:2: super::super::a::g)"];
    if cycles == expected { Ok(()) } else { Err(format!("expected the circles {expected:#?}, found {cycles:#?}")) }
}
