//! Deterministic generator of realistic pi and omp session files.
//!
//! The line shapes follow the conformance corpus' benchmark generator
//! (`bench-ref/mkbig.mjs`): user prompts, assistant turns with thinking, text and tool
//! calls, tool results, model and thinking-level changes, compactions and branches.
//! The [`Profile::Rich`] profile adds every other entry type of the dialect (labels,
//! custom entries, branch summaries, names, …) with short texts, for fixtures.
//!
//! Every record is built with `session_model::entries`, so each line is byte for byte
//! what the reference would write for the same call. Randomness comes from a seeded
//! SplitMix64 ([`Rng`]) and time from a synthetic clock: the same options always give
//! the same bytes.
//!
//! `cargo xtask` (fixtures, `bench`) and every bench that needs sessions use it.

use std::collections::HashSet;

use serde_json::{Value, json};
use session_model::entries::{Base, omp, pi};
use session_model::{Dialect, Record, TitleSlot, timestamp};

/// A small seeded pseudo-random generator (SplitMix64): deterministic on every platform.
pub struct Rng {
    state: u64,
}

impl Rng {
    /// Creates a generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed ^ 0x5851_f42d_4c95_7f2d }
    }

    /// Returns the next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Returns a number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Returns a number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Returns `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Returns one element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next_u64() % items.len() as u64) as usize]
    }

    /// Returns one of the `(value, weight)` pairs, chosen by weight.
    fn weighted<T: Copy>(&mut self, table: &[(T, f64)]) -> T {
        let total: f64 = table.iter().map(|(_, w)| w).sum();
        let mut x = self.unit() * total;
        for &(v, w) in table {
            x -= w;
            if x < 0.0 {
                return v;
            }
        }
        table[table.len() - 1].0
    }
}

/// Which mix of entries to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// The benchmark mix: long conversation turns, few other entries.
    Bench,
    /// Every entry type of the dialect, branches and labels included, short texts.
    Rich,
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct Options {
    /// pi or omp line shapes (omp files start with a title slot).
    pub dialect: Dialect,
    /// Number of entries after the header.
    pub entries: usize,
    /// PRNG seed.
    pub seed: u64,
    /// The entry mix.
    pub profile: Profile,
    /// Nominal text budget per entry in bytes (the average line is a little larger).
    pub avg_bytes: usize,
    /// The header's `cwd`.
    pub cwd: String,
}

impl Options {
    /// Returns the benchmark profile's options (about 2.4 KB per entry).
    pub fn bench(dialect: Dialect, entries: usize, seed: u64) -> Options {
        Options { dialect, entries, seed, profile: Profile::Bench, avg_bytes: 3400, cwd: "/tmp".into() }
    }
}

const WORDS: &[&str] = &[
    "the",
    "session",
    "tree",
    "leaf",
    "branch",
    "entry",
    "compaction",
    "summary",
    "model",
    "tool",
    "result",
    "file",
    "read",
    "edit",
    "write",
    "grep",
    "find",
    "bash",
    "test",
    "build",
    "error",
    "fix",
    "refactor",
    "module",
    "function",
    "value",
    "string",
    "number",
    "array",
    "object",
    "context",
    "token",
    "cache",
    "prompt",
    "user",
    "assistant",
    "thinking",
    "label",
    "fork",
    "append",
    "parent",
    "child",
    "root",
    "path",
    "unicode",
    "naïve",
    "café",
    "日本語",
    "emoji",
    "🚀",
    "tab\tquote\"",
    "backslash\\",
    "newline",
];

const TINY_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

const MODELS: &[(&str, &str, &str)] = &[
    ("anthropic", "claude-sonnet-4-5", "anthropic-messages"),
    ("anthropic", "claude-opus-4-1", "anthropic-messages"),
    ("openai", "gpt-5", "openai-responses"),
    ("google", "gemini-2.5-pro", "google-generative-ai"),
];

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Epoch milliseconds of 2026-01-01T00:00:00.000Z, the synthetic clock's start.
const T0: i64 = 1_767_225_600_000;

/// Returns `min..=max` words, some followed by a newline.
fn words(r: &mut Rng, min: u64, max: u64) -> String {
    let n = r.range(min, max);
    let mut out = String::new();
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        let word: &&str = r.pick(WORDS);
        out.push_str(word);
        if r.chance(0.03) {
            out.push('\n');
        }
    }
    out
}

/// Returns about `bytes` bytes of text (cut at a character boundary).
fn big_text(r: &mut Rng, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 64);
    while s.len() < bytes {
        s.push_str(&words(r, 20, 60));
        s.push('\n');
    }
    let mut cut = bytes.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s
}

fn hex_id(r: &mut Rng) -> String {
    format!("{:08x}", r.next_u64() as u32)
}

fn uuid7ish(r: &mut Rng, ms: i64) -> String {
    let rand = r.next_u64();
    let more = r.next_u64();
    format!(
        "{:08x}-{:04x}-7{:03x}-{:x}{:03x}-{:012x}",
        (ms >> 16) as u32,
        (ms & 0xffff) as u16,
        rand & 0xfff,
        8 + ((rand >> 12) & 3),
        (rand >> 14) & 0xfff,
        more & 0xffff_ffff_ffff
    )
}

fn signature(r: &mut Rng) -> String {
    let mut s: String = (0..27).map(|_| BASE64[(r.next_u64() % 64) as usize] as char).collect();
    s.push('=');
    s
}

fn usage(r: &mut Rng) -> Value {
    let (input, output, cache_read, cache_write) =
        (r.range(1000, 150_000), r.range(10, 4000), r.range(0, 100_000), r.range(0, 5000));
    // Costs in millionths, as the references round them.
    let cost = |tokens: u64, per_mtok: u64| (tokens * per_mtok) as f64 / 1e6;
    let c = [cost(input, 3), cost(output, 15), cost(cache_read, 0), cost(cache_write, 4)];
    let total = (c.iter().sum::<f64>() * 1e6).round() / 1e6;
    json!({
        "input": input, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write,
        "totalTokens": input + output + cache_read + cache_write,
        "cost": {"input": c[0], "output": c[1], "cacheRead": c[2], "cacheWrite": c[3], "total": total}
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    User,
    Assistant,
    Tool,
    Model,
    Thinking,
    Compaction,
    Branch,
    Label,
    Custom,
    CustomMessage,
    Name,
    ContextEdit,
    Usage,
    ServiceTier,
    Ttsr,
    Mode,
    Reset,
    ModelUsage,
}

struct State {
    r: Rng,
    clock: i64,
    ids: Vec<String>,
    message_ids: Vec<String>,
    used: HashSet<String>,
    parent: Option<String>,
    pending_call: Option<(String, String)>,
    title: Option<String>,
}

impl State {
    fn iso(&self) -> String {
        timestamp::format_iso_millis(self.clock)
    }

    fn fresh_id(&mut self) -> String {
        loop {
            let id = hex_id(&mut self.r);
            if self.used.insert(id.clone()) {
                return id;
            }
        }
    }

    fn recent_id(&mut self, window: usize) -> Option<String> {
        if self.ids.is_empty() {
            return None;
        }
        let lo = self.ids.len().saturating_sub(window) as u64;
        let i = self.r.range(lo, self.ids.len() as u64 - 1) as usize;
        Some(self.ids[i].clone())
    }
}

fn pick_kind(s: &mut State, opts: &Options, i: usize) -> Kind {
    if i == 0 {
        return Kind::User;
    }
    if s.pending_call.is_some() {
        return Kind::Tool;
    }
    let compaction = match opts.profile {
        Profile::Bench if opts.entries > 1000 => 0.002,
        Profile::Bench => 0.0,
        Profile::Rich => 0.15,
    };
    let mut table = vec![
        (Kind::User, 2.0),
        (Kind::Assistant, 5.0),
        (Kind::Model, 0.05),
        (Kind::Thinking, 0.05),
        (Kind::Compaction, compaction),
        (Kind::Branch, 0.02),
    ];
    if opts.profile == Profile::Rich {
        table.extend([
            (Kind::Model, 0.2),
            (Kind::Thinking, 0.2),
            (Kind::Branch, 0.5),
            (Kind::Label, 0.4),
            (Kind::Custom, 0.2),
            (Kind::CustomMessage, 0.2),
            (Kind::Name, 0.1),
        ]);
        match opts.dialect {
            Dialect::Pi => table.extend([(Kind::ContextEdit, 0.1), (Kind::Usage, 0.1)]),
            Dialect::Omp => table.extend([
                (Kind::ServiceTier, 0.1),
                (Kind::Ttsr, 0.05),
                (Kind::Mode, 0.05),
                (Kind::Reset, 0.03),
                (Kind::ModelUsage, 0.1),
            ]),
        }
    }
    s.r.weighted(&table)
}

fn user_message(s: &mut State, avg: f64) -> Value {
    let len = (avg * 0.25 * (0.5 + s.r.unit())) as usize;
    json!({"role": "user", "content": big_text(&mut s.r, len.max(20)), "timestamp": s.clock})
}

fn assistant_message(s: &mut State, id: &str, avg: f64, rich: bool) -> Value {
    let mut content = Vec::new();
    if s.r.chance(0.5) {
        let len = (avg * 0.3 * s.r.unit()) as usize;
        content.push(
            json!({"type": "thinking", "thinking": big_text(&mut s.r, len), "thinkingSignature": signature(&mut s.r)}),
        );
    }
    let len = (avg * 0.5 * (0.5 + s.r.unit())) as usize;
    content.push(json!({"type": "text", "text": big_text(&mut s.r, len)}));
    if s.r.chance(0.5) {
        let call_id = format!("toolu_{id}{}", hex_id(&mut s.r));
        let name = *s.r.pick(&["read", "bash", "edit", "grep"]);
        let command = words(&mut s.r, 2, 6);
        content.push(json!({"type": "toolCall", "id": call_id, "name": name, "arguments": {"path": "/tmp/src/file.ts", "command": command}}));
        s.pending_call = Some((call_id, name.to_owned()));
    }
    let (provider, model, api) = if rich { *s.r.pick(MODELS) } else { MODELS[0] };
    let stop = if s.pending_call.is_some() { "toolUse" } else { "stop" };
    json!({
        "role": "assistant", "content": content, "api": api, "provider": provider, "model": model,
        "usage": usage(&mut s.r), "stopReason": stop, "timestamp": s.clock
    })
}

fn tool_result(s: &mut State, avg: f64, rich: bool) -> Value {
    let (call_id, name) = s.pending_call.take().unwrap_or_else(|| ("toolu_none".into(), "read".into()));
    let len = (avg * 1.6 * s.r.unit()) as usize;
    let mut content = vec![json!({"type": "text", "text": big_text(&mut s.r, len)})];
    if rich && s.r.chance(0.15) {
        content.push(json!({"type": "image", "data": TINY_PNG, "mimeType": "image/png"}));
    }
    json!({
        "role": "toolResult", "toolCallId": call_id, "toolName": name, "content": content,
        "isError": false, "timestamp": s.clock
    })
}

fn entry(s: &mut State, opts: &Options, kind: Kind, b: &Base) -> Record {
    let avg = opts.avg_bytes as f64;
    let rich = opts.profile == Profile::Rich;
    let d = opts.dialect;
    match kind {
        Kind::User | Kind::Branch => {
            let m = user_message(s, avg);
            pi::message(b, m)
        }
        Kind::Assistant => {
            let m = assistant_message(s, &b.id, avg, rich);
            pi::message(b, m)
        }
        Kind::Tool => {
            let m = tool_result(s, avg, rich);
            pi::message(b, m)
        }
        Kind::Model => {
            let (provider, model, _) = *s.r.pick(MODELS);
            match d {
                Dialect::Pi => pi::model_change(b, provider, model),
                Dialect::Omp => omp::model_change(b, &format!("{provider}/{model}"), Some("default"), false),
            }
        }
        Kind::Thinking => {
            let level = *s.r.pick(&["off", "low", "medium", "high"]);
            match d {
                Dialect::Pi => pi::thinking_level_change(b, level),
                Dialect::Omp => omp::thinking_level_change(b, Some(level), rich.then_some(level)),
            }
        }
        Kind::Compaction => {
            let keep_back = s.r.range(5, 50) as usize;
            let first_kept = s.ids[s.ids.len().saturating_sub(keep_back)].clone();
            let summary = big_text(&mut s.r, if rich { 300 } else { 2000 });
            let tokens = json!(s.r.range(50_000, 190_000));
            match d {
                Dialect::Pi => pi::compaction(b, &summary, &first_kept, tokens, pi::CompactionExtra::default()),
                Dialect::Omp => {
                    let extra = omp::CompactionExtra {
                        short_summary: rich.then(|| words(&mut s.r, 3, 8)),
                        tokens_after: rich.then(|| json!(s.r.range(2000, 20_000))),
                        ..omp::CompactionExtra::default()
                    };
                    omp::compaction(b, &summary, &first_kept, tokens, extra)
                }
            }
        }
        Kind::Label => {
            let target = s.recent_id(30).unwrap_or_else(|| b.id.clone());
            let label = if s.r.chance(0.8) { Some(words(&mut s.r, 1, 3).replace('\n', " ")) } else { None };
            pi::label(b, &target, label.as_deref())
        }
        Kind::Custom => {
            let data = json!({"counter": s.ids.len(), "note": words(&mut s.r, 2, 8), "ratio": s.r.unit()});
            pi::custom(b, "ext-state", Some(data))
        }
        Kind::CustomMessage => {
            let content = json!(words(&mut s.r, 4, 20));
            let display = s.r.chance(0.7);
            match d {
                Dialect::Pi => pi::custom_message(b, "notice", content, display, None),
                Dialect::Omp => {
                    omp::custom_message(b, "notice", content, display, Some(json!({"source": "ext"})), Some("agent"))
                }
            }
        }
        Kind::Name => {
            let name = words(&mut s.r, 2, 5);
            match d {
                Dialect::Pi => pi::session_info(b, &pi::sanitize_session_name(&name)),
                Dialect::Omp => {
                    let title = omp::sanitize_title(&name);
                    let previous = s.title.replace(title.clone());
                    omp::title_change(b, &title, "user", previous.as_deref(), Some("rename"))
                }
            }
        }
        Kind::ContextEdit => {
            let target = s.message_ids.last().cloned().unwrap_or_else(|| b.id.clone());
            let replacement = if s.r.chance(0.5) { Value::Null } else { json!({"content": words(&mut s.r, 2, 10)}) };
            pi::context_edit(b, &target, replacement)
        }
        Kind::Usage => {
            let u = usage(&mut s.r);
            pi::usage(b, "cache_warm", "anthropic", "claude-sonnet-4-5", u, None)
        }
        Kind::ServiceTier => {
            let tier = *s.r.pick(&["priority", "flex", "auto"]);
            omp::service_tier_change(b, json!({"openai": tier}))
        }
        Kind::Ttsr => omp::ttsr_injection(b, &["no-console-log".to_owned(), "prefer-const".to_owned()]),
        Kind::Mode => omp::mode_change(b, "plan", Some(json!({"step": s.ids.len()}))),
        Kind::Reset => omp::reset_boundary(b),
        Kind::ModelUsage => {
            let u = usage(&mut s.r);
            omp::model_usage(
                b,
                json!({"purpose": "title", "api": "anthropic-messages", "provider": "anthropic",
                       "model": "claude-haiku-4-5", "usage": u, "stopReason": "stop"}),
            )
        }
    }
}

/// Returns the bytes of one generated session file (title slot for omp, header, entries).
pub fn session(opts: &Options) -> String {
    let mut s = State {
        r: Rng::new(opts.seed),
        clock: T0,
        ids: Vec::with_capacity(opts.entries),
        message_ids: Vec::new(),
        used: HashSet::with_capacity(opts.entries),
        parent: None,
        pending_call: None,
        title: None,
    };
    let created = s.iso();
    let sid = uuid7ish(&mut s.r, s.clock);
    let header = match opts.dialect {
        Dialect::Pi => pi::header(&sid, &created, &opts.cwd, None),
        Dialect::Omp => omp::header(&sid, &created, &opts.cwd, omp::HeaderExtra::default()),
    };
    let mut body = String::with_capacity(opts.entries * (opts.avg_bytes + 400));
    body.push_str(header.text());
    body.push('\n');
    for i in 0..opts.entries {
        s.clock += s.r.range(1, 4000) as i64;
        let kind = pick_kind(&mut s, opts, i);
        if kind == Kind::Branch && s.ids.len() > 10 {
            s.parent = s.recent_id(200);
        }
        let id = s.fresh_id();
        let b = Base::new(id.clone(), s.parent.as_deref(), s.iso());
        let record = entry(&mut s, opts, kind, &b);
        body.push_str(record.text());
        body.push('\n');
        if record.entry_type() == session_model::EntryType::Message {
            s.message_ids.push(id.clone());
        }
        s.ids.push(id.clone());
        s.parent = Some(id);
    }
    match opts.dialect {
        Dialect::Pi => body,
        Dialect::Omp => {
            let slot = TitleSlot {
                source: s.title.as_ref().map(|_| "user".to_owned()),
                title: s.title.unwrap_or_default(),
                updated_at: timestamp::format_iso_millis(s.clock),
            };
            let mut out = slot.to_line().expect("a title of a few words fits the 256-byte slot");
            out.push_str(&body);
            out
        }
    }
}
