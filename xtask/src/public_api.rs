//! `cargo xtask public-api [--check] [CRATE...]`: the public API of every library crate
//! of the workspace, one item per line, in `docs/public-api/<package>.txt`.
//!
//! The listing is read from rustdoc's JSON output (`--output-format json`, unstable, so
//! run with `RUSTC_BOOTSTRAP=1` on the pinned toolchain) by walking each crate from its
//! root the way a user reaches it: public modules, re-exports (`pub use`, globs
//! included) and the items they name, with each function's signature, each public
//! field and variant, inherent methods, trait implementations (auto traits such as
//! `Send` and `Sync` included: losing one breaks callers) and `#[non_exhaustive]`.
//! `--check` compares with the committed files and fails naming each line that
//! appeared or went, so a change of the public API is always a visible change of the
//! listing in review; without it the files are rewritten.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::repo_root;

/// The library crates whose API is listed: every publishable library of the workspace,
/// with the features whose API is listed too (the default ones always; not the features
/// for tests and fuzzing, which are not API).
const CRATES: &[(&str, &str, &str)] = &[
    ("session-model", "session_model", ""),
    ("session-migrate", "session_migrate", ""),
    ("session-tree", "session_tree", ""),
    ("session-store", "session_store", ""),
    ("session-store-postgres", "session_store_postgres", ""),
    ("session-store-redis", "session_store_redis", ""),
    ("session-store-sqlite", "session_store_sqlite", ""),
    ("session-store-mysql", "session_store_mysql", ""),
    ("session-store-s3", "session_store_s3", ""),
    ("session-discovery", "session_discovery", ""),
    ("session-history", "session_history", ""),
    ("session-import", "session_import", ""),
    ("agent-session-store", "session", "tokio"),
];

/// Runs the task.
pub(crate) fn run(args: &[String], usage: &str) -> Result<(), String> {
    let mut check = false;
    let mut only = Vec::new();
    for a in args {
        match a.as_str() {
            "--check" => check = true,
            s if s.starts_with('-') => return Err(format!("public-api: unknown flag {s}\n{usage}")),
            s => only.push(s.to_owned()),
        }
    }
    let root = repo_root();
    let out_dir = root.join("docs").join("public-api");
    let mut problems = Vec::new();
    let mut total = 0;
    for (package, lib, features) in CRATES {
        if !only.is_empty() && !only.iter().any(|o| o == package) {
            continue;
        }
        let lines = listing(&root, package, lib, features)?;
        total += lines.len();
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let path = out_dir.join(format!("{package}.txt"));
        if check {
            let have = fs_err::read_to_string(&path).unwrap_or_default();
            if have != text {
                let old: BTreeSet<&str> = have.lines().collect();
                let new: BTreeSet<&str> = text.lines().collect();
                let mut diff = String::new();
                for l in old.difference(&new) {
                    diff.push_str(&format!("\n    - {l}"));
                }
                for l in new.difference(&old) {
                    diff.push_str(&format!("\n    + {l}"));
                }
                problems.push(format!("{package}:{diff}"));
            }
        } else {
            fs_err::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
            fs_err::write(&path, text).map_err(|e| e.to_string())?;
            println!("{package}: {} public items -> {}", lines.len(), path.display());
        }
    }
    if problems.is_empty() {
        if check {
            println!("public API unchanged ({total} items in {} crates)", CRATES.len());
        }
        Ok(())
    } else {
        Err(format!(
            "the public API differs from docs/public-api/:\n  {}\nif the change is meant, run `cargo xtask public-api` and commit the listing \
             (a line that went is a breaking change: say so in CHANGELOG.md)",
            problems.join("\n  ")
        ))
    }
}

/// Builds `package`'s rustdoc JSON (with `features`) and returns its listing, sorted.
fn listing(root: &Path, package: &str, lib: &str, features: &str) -> Result<Vec<String>, String> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root).env("RUSTC_BOOTSTRAP", "1").args(["rustdoc", "--quiet", "--lib", "-p", package]);
    if !features.is_empty() {
        cmd.args(["--features", features]);
    }
    let status = cmd
        .args(["--", "-Z", "unstable-options", "--output-format", "json"])
        .status()
        .map_err(|e| format!("cannot run cargo rustdoc: {e}"))?;
    if !status.success() {
        return Err(format!("cargo rustdoc -p {package} failed"));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), Into::into);
    let path = target.join("doc").join(format!("{lib}.json"));
    let text = fs_err::read_to_string(&path).map_err(|e| e.to_string())?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = Walker { doc: &doc, lines: BTreeSet::new(), seen: HashSet::new() };
    let root_id = doc["root"].clone();
    w.module(&root_id, lib);
    Ok(w.lines.into_iter().collect())
}

struct Walker<'d> {
    doc: &'d Value,
    lines: BTreeSet<String>,
    /// (item id, path) pairs already listed: a re-export cycle ends here.
    seen: HashSet<(String, String)>,
}

impl<'d> Walker<'d> {
    fn item(&self, id: &Value) -> Option<&'d Value> {
        self.doc["index"].get(id_key(id))
    }

    fn module(&mut self, id: &Value, path: &str) {
        let Some(item) = self.item(id) else { return };
        let Some(items) = item["inner"]["module"]["items"].as_array() else { return };
        for child in items {
            self.member(child, path);
        }
    }

    /// One member of a module at `path`.
    fn member(&mut self, id: &Value, path: &str) {
        let Some(item) = self.item(id) else { return };
        if !is_public(item) {
            return;
        }
        let inner = &item["inner"];
        if let Some(u) = inner.get("use") {
            let name = u["name"].as_str().unwrap_or("?");
            let target = &u["id"];
            let local = !target.is_null() && self.item(target).is_some();
            if u["is_glob"].as_bool() == Some(true) {
                if local {
                    // `pub use module::*`: its members appear here.
                    if let Some(t) = self.item(target)
                        && t["inner"].get("module").is_some()
                    {
                        self.module(target, path);
                        return;
                    }
                }
                self.lines.insert(format!("pub use {path}::* = {}", u["source"].as_str().unwrap_or("?")));
                return;
            }
            if local {
                self.named(target, &format!("{path}::{name}"));
            } else {
                let source =
                    self.external_path(target).unwrap_or_else(|| u["source"].as_str().unwrap_or("?").to_owned());
                self.lines.insert(format!("pub use {path}::{name} = {source}"));
            }
            return;
        }
        let name = item["name"].as_str().unwrap_or("?").to_owned();
        self.named(id, &format!("{path}::{name}"));
    }

    /// Returns the full path of an item of another crate.
    fn external_path(&self, id: &Value) -> Option<String> {
        let p = self.doc["paths"].get(id_key(id))?;
        let parts: Vec<&str> = p["path"].as_array()?.iter().filter_map(Value::as_str).collect();
        Some(parts.join("::"))
    }

    /// Lists the item `id` as reachable at `path`.
    fn named(&mut self, id: &Value, path: &str) {
        if !self.seen.insert((id_key(id), path.to_owned())) {
            return;
        }
        let Some(item) = self.item(id) else { return };
        let inner = &item["inner"];
        let attrs = attrs_of(item);
        let Some((kind, body)) = inner.as_object().and_then(|o| o.iter().next()) else { return };
        match kind.as_str() {
            "module" => {
                self.lines.insert(format!("mod {path}"));
                self.module(id, path);
            }
            "function" => {
                self.lines.insert(format!("{attrs}{}", self.function(path, body)));
            }
            "struct" => {
                let g = generics(&body["generics"]);
                match &body["kind"] {
                    Value::String(s) if s == "unit" => {
                        self.lines.insert(format!("{attrs}struct {path}{g};"));
                    }
                    k if k.get("tuple").is_some() => {
                        let fields: Vec<String> = k["tuple"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|f| match self.item(f) {
                                Some(fi) if is_public(fi) => ty(&fi["inner"]["struct_field"]),
                                _ => "_".to_owned(),
                            })
                            .collect();
                        self.lines.insert(format!("{attrs}struct {path}{g}({})", fields.join(", ")));
                    }
                    k => {
                        self.lines.insert(format!("{attrs}struct {path}{g}"));
                        for f in k["plain"]["fields"].as_array().into_iter().flatten() {
                            if let Some(fi) = self.item(f)
                                && is_public(fi)
                            {
                                let name = fi["name"].as_str().unwrap_or("?");
                                self.lines.insert(format!("field {path}.{name}: {}", ty(&fi["inner"]["struct_field"])));
                            }
                        }
                    }
                }
                self.impls(&body["impls"], path);
            }
            "enum" => {
                self.lines.insert(format!("{attrs}enum {path}{}", generics(&body["generics"])));
                for v in body["variants"].as_array().into_iter().flatten() {
                    if let Some(vi) = self.item(v) {
                        let name = vi["name"].as_str().unwrap_or("?");
                        let shape = self.variant(&vi["inner"]["variant"]["kind"]);
                        self.lines.insert(format!("{}variant {path}::{name}{shape}", attrs_of(vi)));
                    }
                }
                self.impls(&body["impls"], path);
            }
            "union" => {
                self.lines.insert(format!("{attrs}union {path}"));
                self.impls(&body["impls"], path);
            }
            "trait" => {
                let unsafe_ = if body["is_unsafe"].as_bool() == Some(true) { "unsafe " } else { "" };
                let bounds = bounds(&body["bounds"]);
                let bounds = if bounds.is_empty() { String::new() } else { format!(": {bounds}") };
                self.lines.insert(format!("{attrs}{unsafe_}trait {path}{}{bounds}", generics(&body["generics"])));
                for m in body["items"].as_array().into_iter().flatten() {
                    self.assoc(m, path);
                }
            }
            "type_alias" => {
                self.lines.insert(format!("{attrs}type {path}{} = {}", generics(&body["generics"]), ty(&body["type"])));
            }
            "constant" => {
                self.lines.insert(format!("{attrs}const {path}: {}", ty(&body["type"])));
            }
            "static" => {
                let m = if body["is_mutable"].as_bool() == Some(true) { "mut " } else { "" };
                self.lines.insert(format!("{attrs}static {m}{path}: {}", ty(&body["type"])));
            }
            "macro" | "proc_macro" => {
                self.lines.insert(format!("macro {path}!"));
            }
            "trait_alias" => {
                self.lines.insert(format!("trait alias {path}"));
            }
            other => {
                self.lines.insert(format!("{other} {path}"));
            }
        }
    }

    fn variant(&self, kind: &Value) -> String {
        match kind {
            Value::String(_) => String::new(),
            k if k.get("tuple").is_some() => {
                let fields: Vec<String> = k["tuple"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|f| self.item(f).map_or_else(|| "_".to_owned(), |fi| ty(&fi["inner"]["struct_field"])))
                    .collect();
                format!("({})", fields.join(", "))
            }
            k => {
                let fields: Vec<String> = k["struct"]["fields"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|f| self.item(f))
                    .map(|fi| format!("{}: {}", fi["name"].as_str().unwrap_or("?"), ty(&fi["inner"]["struct_field"])))
                    .collect();
                format!(" {{ {} }}", fields.join(", "))
            }
        }
    }

    /// The inherent methods and the trait implementations of a type at `path`.
    fn impls(&mut self, impls: &Value, path: &str) {
        for i in impls.as_array().into_iter().flatten() {
            let Some(item) = self.item(i) else { continue };
            let imp = &item["inner"]["impl"];
            // Blanket implementations of the standard library's traits (`From<T> for T`,
            // `Any`) say nothing of the type; those of the workspace's own traits do
            // (`impl<B: KeyedBackend> Storage for B` makes each driver a `Storage`).
            if !imp["blanket_impl"].is_null() && !self.is_workspace_trait(&imp["trait"]) {
                continue;
            }
            match imp.get("trait").filter(|t| !t.is_null()) {
                Some(t) => {
                    let neg = if imp["is_negative"].as_bool() == Some(true) { "!" } else { "" };
                    // A blanket implementation's parameters are its own, not the type's.
                    let params = if imp["blanket_impl"].is_null() { generics(&imp["generics"]) } else { String::new() };
                    self.lines.insert(format!("impl{params} {neg}{} for {path}", path_ty(t)));
                }
                None => {
                    for m in imp["items"].as_array().into_iter().flatten() {
                        if let Some(mi) = self.item(m)
                            && is_public(mi)
                        {
                            self.assoc(m, path);
                        }
                    }
                }
            }
        }
    }

    /// Whether the trait `t` names is one of the workspace's crates' (per rustdoc's
    /// `paths` and `external_crates`).
    fn is_workspace_trait(&self, t: &Value) -> bool {
        let Some(id) = t["id"].as_u64() else { return false };
        let Some(crate_id) = self.doc["paths"][id.to_string()]["crate_id"].as_u64() else { return false };
        let name = if crate_id == 0 {
            self.doc["index"][self.doc["root"].to_string()]["name"].as_str()
        } else {
            self.doc["external_crates"][crate_id.to_string()]["name"].as_str()
        };
        name.is_some_and(|n| n.starts_with("session_") || n == "agent_session_store")
    }

    /// An associated item (a method, constant or type) of the type or trait at `path`.
    fn assoc(&mut self, id: &Value, path: &str) {
        let Some(item) = self.item(id) else { return };
        let name = item["name"].as_str().unwrap_or("?");
        let inner = &item["inner"];
        let full = format!("{path}::{name}");
        let attrs = attrs_of(item);
        if let Some(f) = inner.get("function") {
            let line = self.function(&full, f);
            self.lines.insert(format!("{attrs}{line}"));
        } else if let Some(c) = inner.get("assoc_const") {
            self.lines.insert(format!("const {full}: {}", ty(&c["type"])));
        } else if let Some(t) = inner.get("assoc_type") {
            let b = bounds(&t["bounds"]);
            self.lines.insert(format!("type {full}{}", if b.is_empty() { String::new() } else { format!(": {b}") }));
        }
    }

    fn function(&self, path: &str, f: &Value) -> String {
        let h = &f["header"];
        let mut prefix = String::new();
        for (flag, word) in [("is_const", "const "), ("is_async", "async "), ("is_unsafe", "unsafe ")] {
            if h[flag].as_bool() == Some(true) {
                prefix.push_str(word);
            }
        }
        let inputs: Vec<String> = f["sig"]["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let name = p[0].as_str().unwrap_or("_");
                let t = ty(&p[1]);
                if name == "self" { self_param(&p[1], &t) } else { format!("{name}: {t}") }
            })
            .collect();
        let out = match &f["sig"]["output"] {
            Value::Null => String::new(),
            t => format!(" -> {}", ty(t)),
        };
        format!("{prefix}fn {path}{}({}){out}{}", generics(&f["generics"]), inputs.join(", "), wheres(&f["generics"]))
    }
}

/// `self`, `&self`, `&mut self` or `self: T`.
fn self_param(t: &Value, rendered: &str) -> String {
    match rendered {
        "Self" => "self".to_owned(),
        "&Self" => "&self".to_owned(),
        "&mut Self" => "&mut self".to_owned(),
        _ if t.get("generic").is_some() => "self".to_owned(),
        other => format!("self: {other}"),
    }
}

fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn is_public(item: &Value) -> bool {
    matches!(item["visibility"].as_str(), Some("public" | "default"))
}

/// The attributes that change what a user may do: `#[non_exhaustive]`.
fn attrs_of(item: &Value) -> String {
    let text = item["attrs"].to_string();
    if text.contains("non_exhaustive") { "#[non_exhaustive] ".to_owned() } else { String::new() }
}

fn generics(g: &Value) -> String {
    let params: Vec<String> = g["params"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let name = p["name"].as_str()?;
            let kind = &p["kind"];
            if let Some(t) = kind.get("type") {
                if t["is_synthetic"].as_bool() == Some(true) {
                    return None;
                }
                let b = bounds(&t["bounds"]);
                return Some(if b.is_empty() { name.to_owned() } else { format!("{name}: {b}") });
            }
            if let Some(c) = kind.get("const") {
                return Some(format!("const {name}: {}", ty(&c["type"])));
            }
            Some(name.to_owned())
        })
        .collect();
    if params.is_empty() { String::new() } else { format!("<{}>", params.join(", ")) }
}

fn wheres(g: &Value) -> String {
    let preds: Vec<String> = g["where_predicates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let b = p.get("bound_predicate")?;
            Some(format!("{}: {}", ty(&b["type"]), bounds(&b["bounds"])))
        })
        .collect();
    if preds.is_empty() { String::new() } else { format!(" where {}", preds.join(", ")) }
}

fn bounds(b: &Value) -> String {
    let parts: Vec<String> = b
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            if let Some(t) = b.get("trait_bound") {
                let m = if t["modifier"].as_str() == Some("maybe") { "?" } else { "" };
                format!("{m}{}", path_ty(&t["trait"]))
            } else if let Some(l) = b.get("outlives") {
                l.as_str().unwrap_or("'_").to_owned()
            } else {
                "use<..>".to_owned()
            }
        })
        .collect();
    parts.join(" + ")
}

/// A path with its generic arguments (`Vec<u8>`, `FnMut() -> String`).
fn path_ty(p: &Value) -> String {
    let name = p["path"].as_str().or_else(|| p["name"].as_str()).unwrap_or("?");
    let name = name.rsplit("::").next().unwrap_or(name);
    format!("{name}{}", args(&p["args"]))
}

fn args(a: &Value) -> String {
    if let Some(ab) = a.get("angle_bracketed") {
        let mut parts: Vec<String> = ab["args"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| {
                if let Some(t) = x.get("type") {
                    ty(t)
                } else if let Some(l) = x.get("lifetime") {
                    l.as_str().unwrap_or("'_").to_owned()
                } else if let Some(c) = x.get("const") {
                    c["expr"].as_str().unwrap_or("_").to_owned()
                } else {
                    "_".to_owned()
                }
            })
            .collect();
        for c in ab["constraints"].as_array().into_iter().flatten() {
            let name = c["name"].as_str().unwrap_or("?");
            if let Some(t) = c["binding"].get("equality") {
                let t = t.get("type").map_or_else(|| "_".to_owned(), ty);
                parts.push(format!("{name} = {t}"));
            } else {
                parts.push(format!("{name}: {}", bounds(&c["binding"]["constraint"])));
            }
        }
        if parts.is_empty() { String::new() } else { format!("<{}>", parts.join(", ")) }
    } else if let Some(p) = a.get("parenthesized") {
        let inputs: Vec<String> = p["inputs"].as_array().into_iter().flatten().map(ty).collect();
        let out = match &p["output"] {
            Value::Null => String::new(),
            t => format!(" -> {}", ty(t)),
        };
        format!("({}){out}", inputs.join(", "))
    } else {
        String::new()
    }
}

/// Renders a rustdoc JSON type.
fn ty(t: &Value) -> String {
    let Some((kind, v)) = t.as_object().and_then(|o| o.iter().next()) else {
        return t.as_str().map_or_else(|| "_".to_owned(), |s| if s == "infer" { "_".to_owned() } else { s.to_owned() });
    };
    match kind.as_str() {
        "resolved_path" => path_ty(v),
        "dyn_trait" => {
            let traits: Vec<String> =
                v["traits"].as_array().into_iter().flatten().map(|t| path_ty(&t["trait"])).collect();
            let mut s = format!("dyn {}", traits.join(" + "));
            if let Some(l) = v["lifetime"].as_str() {
                s.push_str(&format!(" + {l}"));
            }
            s
        }
        "generic" | "primitive" => v.as_str().unwrap_or("?").to_owned(),
        "tuple" => {
            let parts: Vec<String> = v.as_array().into_iter().flatten().map(ty).collect();
            if parts.len() == 1 { format!("({},)", parts[0]) } else { format!("({})", parts.join(", ")) }
        }
        "slice" => format!("[{}]", ty(v)),
        "array" => format!("[{}; {}]", ty(&v["type"]), v["len"].as_str().unwrap_or("_")),
        "impl_trait" => format!("impl {}", bounds(v)),
        "raw_pointer" => {
            format!("*{} {}", if v["is_mutable"].as_bool() == Some(true) { "mut" } else { "const" }, ty(&v["type"]))
        }
        "borrowed_ref" => {
            let l = v["lifetime"].as_str().map(|l| format!("{l} ")).unwrap_or_default();
            let m = if v["is_mutable"].as_bool() == Some(true) { "mut " } else { "" };
            format!("&{l}{m}{}", ty(&v["type"]))
        }
        "qualified_path" => {
            let name = v["name"].as_str().unwrap_or("?");
            let self_ty = ty(&v["self_type"]);
            match v.get("trait").filter(|t| !t.is_null()) {
                Some(tr) => format!("<{self_ty} as {}>::{name}", path_ty(tr)),
                None => format!("{self_ty}::{name}"),
            }
        }
        "function_pointer" => {
            let inputs: Vec<String> = v["sig"]["inputs"].as_array().into_iter().flatten().map(|p| ty(&p[1])).collect();
            let out = match &v["sig"]["output"] {
                Value::Null => String::new(),
                t => format!(" -> {}", ty(t)),
            };
            format!("fn({}){out}", inputs.join(", "))
        }
        other => format!("<{other}>"),
    }
}
