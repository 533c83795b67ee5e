//! Model-based property test: random appends of every entry kind, branches, resets,
//! labels, compactions and context edits applied to the real [`SessionTree`] and to
//! a deliberately naive model (a `Vec` and linear scans). Branch, tree and context
//! must agree after every step.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use serde_json::{Value, json};
use session_model::{Dialect, Record};
use session_tree::{Leaf, SessionTree, omp, pi, tree_to_json};

use crate::support::entry;

#[derive(Clone, Debug)]
enum Op {
    /// kind, target index (for labels, edits, compactions, summaries), flag, time jitter
    Append(u8, usize, bool, u8),
    Branch(usize),
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..12, any::<usize>(), any::<bool>(), 0u8..4).prop_map(|(k, t, f, j)| Op::Append(k, t, f, j)),
        2 => any::<usize>().prop_map(Op::Branch),
        1 => Just(Op::Reset),
    ]
}

/// The naive model: every answer by scanning a vector.
struct Naive {
    entries: Vec<Value>,
    leaf: Option<String>,
}

fn s(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_owned)
}

fn ms(v: &Value) -> Value {
    s(v, "timestamp").and_then(|t| session_model::timestamp::parse_iso_millis(&t)).map_or(Value::Null, Value::from)
}

impl Naive {
    fn get(&self, id: &str) -> Option<&Value> {
        self.entries.iter().rev().find(|e| s(e, "id").as_deref() == Some(id))
    }

    fn path(&self, leaf: &str) -> Vec<&Value> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = self.get(leaf);
        while let Some(e) = cur {
            if !seen.insert(s(e, "id")) {
                break;
            }
            out.push(e);
            cur = s(e, "parentId").and_then(|p| self.get(&p));
        }
        out.reverse();
        out
    }

    fn label(&self, id: &str) -> Option<(String, String)> {
        let mut cur = None;
        for e in &self.entries {
            if s(e, "type").as_deref() == Some("label") && s(e, "targetId").as_deref() == Some(id) {
                cur = s(e, "label").filter(|l| !l.is_empty()).map(|l| (l, s(e, "timestamp").unwrap_or_default()));
            }
        }
        cur
    }

    fn tree_json(&self, with_ts: bool) -> Value {
        let known: HashSet<String> = self.entries.iter().filter_map(|e| s(e, "id")).collect();
        let roots: Vec<&Value> =
            self.entries.iter().filter(|e| s(e, "parentId").is_none_or(|p| !known.contains(&p))).collect();
        Value::Array(roots.into_iter().map(|e| self.node(e, with_ts)).collect())
    }

    fn node(&self, e: &Value, with_ts: bool) -> Value {
        let id = s(e, "id").unwrap_or_default();
        let mut kids: Vec<&Value> =
            self.entries.iter().filter(|c| s(c, "parentId").as_deref() == Some(id.as_str())).collect();
        kids.sort_by_key(|c| ms(c).as_i64());
        let mut o = serde_json::Map::new();
        o.insert("id".into(), json!(id));
        if let Some((l, t)) = self.label(&id) {
            o.insert("label".into(), json!(l));
            if with_ts {
                o.insert("labelTimestamp".into(), json!(t));
            }
        }
        o.insert("children".into(), Value::Array(kids.into_iter().map(|c| self.node(c, with_ts)).collect()));
        Value::Object(o)
    }

    fn messages_of(e: &Value) -> Vec<Value> {
        match s(e, "type").as_deref() {
            Some("message") => vec![e["message"].clone()],
            Some("custom_message") => vec![
                json!({"role": "custom", "customType": e["customType"], "content": e["content"], "display": e["display"], "timestamp": ms(e)}),
            ],
            Some("branch_summary") if s(e, "summary").is_some_and(|x| !x.is_empty()) => {
                vec![
                    json!({"role": "branchSummary", "summary": e["summary"], "fromId": e["fromId"], "timestamp": ms(e)}),
                ]
            }
            _ => Vec::new(),
        }
    }

    fn pi_context(&self) -> Value {
        let path = self.leaf.as_deref().map(|l| self.path(l)).unwrap_or_default();
        let (mut thinking, mut model) = (json!("off"), Value::Null);
        for e in &path {
            match s(e, "type").as_deref() {
                Some("thinking_level_change") => thinking = e["thinkingLevel"].clone(),
                Some("model_change") => model = json!({"provider": e["provider"], "modelId": e["modelId"]}),
                Some("message") if e["message"]["role"] == "assistant" => {
                    model = json!({"provider": e["message"]["provider"], "modelId": e["message"]["model"]});
                }
                _ => {}
            }
        }
        let selected: Vec<&Value> = match path.iter().rposition(|e| e["type"] == "compaction") {
            None => path.clone(),
            Some(ci) => {
                let c = path[ci];
                let mut sel = vec![c];
                let start = path[..ci].iter().position(|e| e["id"] == c["firstKeptEntryId"]);
                if let Some(st) = start {
                    sel.extend(
                        path[st..ci].iter().filter(|e| !(e["type"] == "message" && e["message"]["role"] == "system")),
                    );
                }
                sel.extend(&path[ci + 1..]);
                sel
            }
        };
        let mut edits: HashMap<String, &Value> = HashMap::new();
        for e in &selected {
            if e["type"] == "context_edit" {
                edits.insert(s(e, "targetId").unwrap_or_default(), e);
            }
        }
        let mut messages = Vec::new();
        for (i, e) in selected.iter().enumerate() {
            let mut msgs = if e["type"] == "compaction" {
                if i > 0 {
                    Vec::new()
                } else {
                    vec![
                        json!({"role": "compactionSummary", "summary": e["summary"], "tokensBefore": e["tokensBefore"], "timestamp": ms(e)}),
                    ]
                }
            } else {
                Self::messages_of(e)
            };
            if let Some(edit) = s(e, "id").and_then(|id| edits.get(&id)) {
                let r = &edit["replacement"];
                if r.is_null() {
                    msgs.clear();
                }
                for m in &mut msgs {
                    let role = m["role"].as_str().unwrap_or("").to_owned();
                    if ["user", "assistant", "toolResult", "custom"].contains(&role.as_str()) {
                        m["content"] = if role == "assistant" || role == "toolResult" {
                            json!([{"type": "text", "text": r["content"]}])
                        } else {
                            r["content"].clone()
                        };
                    }
                }
            }
            messages.extend(msgs);
        }
        json!({"messages": messages, "thinkingLevel": thinking, "model": model})
    }

    fn omp_context(&self, transcript: bool) -> Value {
        let Some(leaf) = self.leaf.as_deref() else {
            return json!({"messages": [], "thinkingLevel": "off", "models": {}, "injectedTtsrRules": [], "mode": "none"});
        };
        let path = self.path(leaf);
        let mut thinking = json!("off");
        let mut configured = None;
        let mut models = serde_json::Map::new();
        let mut explicit = false;
        for e in &path {
            match s(e, "type").as_deref() {
                Some("thinking_level_change") => {
                    thinking = e["thinkingLevel"].clone();
                    configured = Some(e["thinkingLevel"].clone());
                }
                Some("model_change") => {
                    models.insert("default".into(), e["model"].clone());
                    explicit = true;
                }
                Some("message") if e["message"]["role"] == "assistant" && !explicit => {
                    models.insert("default".into(), json!("anthropic/claude-test"));
                }
                _ => {}
            }
        }
        let comp = path.iter().rposition(|e| e["type"] == "compaction");
        let reset = path.iter().rposition(|e| e["type"] == "reset_boundary");
        let summary = |e: &Value, active: bool| {
            if active {
                json!({"role": "compactionSummary", "summary": e["summary"], "tokensBefore": e["tokensBefore"], "timestamp": ms(e)})
            } else {
                json!({"role": "compactionSummary", "summary": "[Superseded compaction summary elided after a newer compaction]", "shortSummary": "Superseded compaction elided", "tokensBefore": e["tokensBefore"], "timestamp": ms(e)})
            }
        };
        let mut messages = Vec::new();
        let mut flags = Vec::new();
        if transcript {
            let mut pending = false;
            for (i, e) in path.iter().enumerate() {
                if e["type"] == "compaction" || e["type"] == "model_change" {
                    pending = true;
                }
                let msgs =
                    if e["type"] == "compaction" { vec![summary(e, Some(i) == comp)] } else { Self::messages_of(e) };
                for m in msgs {
                    if m["role"] == "assistant" {
                        flags.push(pending);
                        pending = false;
                    } else {
                        flags.push(false);
                    }
                    messages.push(m);
                }
            }
        } else if let Some(r) = reset.filter(|&r| comp.is_none_or(|c| r > c)) {
            messages.extend(path[r + 1..].iter().flat_map(|e| Self::messages_of(e)));
        } else if let Some(ci) = comp {
            messages.push(summary(path[ci], true));
            if let Some(st) = path[..ci].iter().position(|e| e["id"] == path[ci]["firstKeptEntryId"]) {
                messages.extend(path[st..ci].iter().flat_map(|e| Self::messages_of(e)));
            }
            messages.extend(path[ci + 1..].iter().flat_map(|e| Self::messages_of(e)));
        } else {
            messages.extend(path.iter().flat_map(|e| Self::messages_of(e)));
        }
        let mut out = json!({"messages": messages, "thinkingLevel": thinking, "models": models, "injectedTtsrRules": [], "mode": "none"});
        if let Some(c) = configured {
            out["configuredThinkingLevel"] = c;
        }
        if transcript {
            out["cacheMissExplainedAt"] = json!(flags);
        }
        out
    }
}

fn run(dialect: Dialect, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut tree = SessionTree::new(dialect, Vec::new());
    let mut naive = Naive { entries: Vec::new(), leaf: None };
    for (n, op) in ops.iter().enumerate() {
        let ids: Vec<String> = naive.entries.iter().filter_map(|e| s(e, "id")).collect();
        let pick = |i: usize| ids.get(i % ids.len().max(1)).cloned();
        match op {
            Op::Append(kind, target, flag, jitter) => {
                let id = format!("e{n:03}");
                let parent = naive.leaf.clone();
                let secs = if *jitter == 0 { n as i64 } else { i64::from(*jitter) };
                let t = pick(*target).unwrap_or_else(|| id.clone());
                let (k, args): (&str, Vec<String>) = match kind {
                    0 => ("user", vec![format!("u{n}")]),
                    1 => ("assistant", vec![format!("a{n}")]),
                    2 => ("system", vec![format!("s{n}")]),
                    3 => ("thinking", vec![if *flag { "high".into() } else { "low".into() }]),
                    4 => ("model", vec!["openai/gpt-5".into()]),
                    5 => ("custom", vec!["state".into()]),
                    6 => ("custom_message", vec!["note".into(), format!("cm{n}")]),
                    7 => ("compaction", vec![t, format!("sum{n}")]),
                    8 => ("branch_summary", vec![t, if *flag { format!("bs{n}") } else { String::new() }]),
                    9 if dialect == Dialect::Pi => {
                        ("edit", vec![t, if *flag { "null".into() } else { format!("ed{n}") }])
                    }
                    9 | 11 if dialect == Dialect::Omp => ("reset", vec![]),
                    10 => ("label", if *flag { vec![t, format!("L{n}")] } else { vec![t] }),
                    _ => ("info", vec![format!("name{n}")]),
                };
                if k == "branch_summary" && ids.is_empty() {
                    continue;
                }
                let (parent, args) = if k == "branch_summary" {
                    // branchWithSummary: the leaf moves to the target first.
                    let target = args[0].clone();
                    tree.branch(&target).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    naive.leaf = Some(target.clone());
                    (Some(target), vec![parent.unwrap_or_else(|| "root".into()), args[1].clone()])
                } else {
                    (parent, args)
                };
                let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
                let v = entry(&id, parent.as_deref(), secs, k, &arg_refs, dialect);
                tree.append(Record::from_value(v.clone())).map_err(|e| TestCaseError::fail(e.to_string()))?;
                naive.entries.push(v);
                naive.leaf = Some(id);
            }
            Op::Branch(i) => {
                if let Some(id) = pick(*i) {
                    tree.branch(&id).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    naive.leaf = Some(id);
                }
            }
            Op::Reset => {
                tree.reset_leaf();
                naive.leaf = None;
            }
        }
        prop_assert_eq!(tree.leaf_id(), naive.leaf.as_deref());
        let branch: Vec<&str> = tree.get_branch(None).iter().filter_map(|r| r.id()).collect();
        let naive_branch: Vec<String> = naive
            .leaf
            .as_deref()
            .map(|l| naive.path(l))
            .unwrap_or_default()
            .iter()
            .filter_map(|e| s(e, "id"))
            .collect();
        prop_assert_eq!(branch, naive_branch);
        let with_ts = dialect == Dialect::Pi;
        let tree_json: Value = serde_json::from_str(&tree_to_json(&tree.tree(), with_ts))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(tree_json, naive.tree_json(with_ts));
        match dialect {
            Dialect::Pi => {
                let ctx: Value = serde_json::from_str(&pi::build_context(&tree, Leaf::Current).to_json_string())
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(ctx, naive.pi_context());
            }
            Dialect::Omp => {
                for transcript in [false, true] {
                    let out =
                        omp::build_context(&tree, Leaf::Current, omp::ContextOptions { transcript }).to_json_string();
                    let ctx: Value = serde_json::from_str(&out).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(ctx, naive.omp_context(transcript));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn pi_tree_matches_naive_model(ops in prop::collection::vec(op(), 1..40)) {
        run(Dialect::Pi, &ops)?;
    }

    #[test]
    fn omp_tree_matches_naive_model(ops in prop::collection::vec(op(), 1..40)) {
        run(Dialect::Omp, &ops)?;
    }
}
