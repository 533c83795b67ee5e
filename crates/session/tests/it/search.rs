//! `session::search`: the catalog follows the files incrementally (unchanged files are
//! not read, grown files only for their tail, rewritten files whole, deleted files
//! dropped), ranks better matches first, and takes any text as a query.

use std::path::PathBuf;
use std::sync::Arc;

use session::Dialect;
use session::history::Catalog;
use session::search::{SearchIndex, SessionFile, UpdateReport};
use session::store::FileStorage;

use proptest::strategy::Strategy;
use session_testkit::TempDir;

use crate::common::{Result, append};

const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#;

fn user(id: &str, parent: Option<&str>, text: &str) -> String {
    let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
    let text = serde_json::to_string(text).expect("a string serializes");
    format!(
        r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":{text},"timestamp":1}}}}"#
    ) + "\n"
}

fn session(lines: &[String]) -> String {
    format!("{HEADER}\n{}", lines.concat())
}

struct Fixture {
    dir: TempDir,
    index: SearchIndex,
}

impl Fixture {
    fn new(tag: &str) -> Result<Fixture> {
        let dir = TempDir::new(tag);
        let index = SearchIndex::new(Catalog::open_in_memory()?, Arc::new(FileStorage::new()));
        Ok(Fixture { dir, index })
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn update(&mut self, names: &[&str]) -> Result<UpdateReport> {
        let files: Vec<SessionFile> = names.iter().map(|n| SessionFile::session(self.file(n), Dialect::Pi)).collect();
        Ok(self.index.update(&files, &[self.dir.path().to_path_buf()], &mut |_, _| {})?)
    }

    /// Writes the session holding `lines` as the file `name`.
    fn put(&self, name: &str, lines: &[String]) -> Result<()> {
        Ok(fs_err::write(self.file(name), session(lines))?)
    }

    fn ids(&self, query: &str) -> Result<Vec<(PathBuf, String)>> {
        Ok(self
            .index
            .search(query, 20, &[])?
            .into_iter()
            .map(|h| (h.hit.path, h.hit.entry_id.unwrap_or_default()))
            .collect())
    }
}

#[test]
fn unchanged_files_are_not_read_and_grown_files_only_for_their_tail() -> Result<()> {
    let mut fx = Fixture::new("search-tail")?;
    fx.put("a.jsonl", &[user("a1", None, "the parser drops a line")])?;
    fx.put("b.jsonl", &[user("b1", None, "unrelated words")])?;
    let first = fx.update(&["a.jsonl", "b.jsonl"])?;
    assert_eq!((first.files_whole, first.files_tail, first.files_unchanged), (2, 0, 0));

    let again = fx.update(&["a.jsonl", "b.jsonl"])?;
    assert_eq!((again.files_unchanged, again.bytes_read, again.entries_indexed), (2, 0, 0));

    let tail = user("a2", Some("a1"), "zebracorn appended later");
    append(&fx.file("a.jsonl"), &tail)?;
    let grown = fx.update(&["a.jsonl", "b.jsonl"])?;
    assert_eq!((grown.files_tail, grown.files_unchanged, grown.files_whole), (1, 1, 0));
    assert_eq!(grown.entries_indexed, 1);
    assert_eq!(grown.bytes_read, tail.len() as u64, "only the new line is read");
    assert_eq!(fx.ids("zebracorn")?, vec![(fx.file("a.jsonl"), "a2".to_owned())]);
    assert_eq!(fx.ids("parser")?, vec![(fx.file("a.jsonl"), "a1".to_owned())], "the old entries stay");
    Ok(())
}

#[test]
fn a_rewritten_file_is_indexed_whole_and_a_deleted_one_is_dropped() -> Result<()> {
    let mut fx = Fixture::new("search-rewrite")?;
    fx.put("a.jsonl", &[user("a1", None, "original wombat text")])?;
    fx.put("b.jsonl", &[user("b1", None, "another wombat")])?;
    fx.update(&["a.jsonl", "b.jsonl"])?;
    assert_eq!(fx.ids("wombat")?.len(), 2);

    // Longer than before, but not an append: the old bytes changed.
    fx.put("a.jsonl", &[user("a9", None, "replacement narwhal text, longer than it was")])?;
    let rewritten = fx.update(&["a.jsonl", "b.jsonl"])?;
    assert_eq!((rewritten.files_whole, rewritten.files_tail), (1, 0));
    assert_eq!(fx.ids("narwhal")?, vec![(fx.file("a.jsonl"), "a9".to_owned())]);
    assert_eq!(fx.ids("wombat")?, vec![(fx.file("b.jsonl"), "b1".to_owned())], "the old text is gone");

    fs_err::remove_file(fx.file("b.jsonl"))?;
    let removed = fx.update(&["a.jsonl"])?;
    assert_eq!(removed.files_removed, 1);
    assert!(fx.ids("wombat")?.is_empty());
    Ok(())
}

#[test]
fn better_matches_rank_first_and_any_query_text_is_taken() -> Result<()> {
    let mut fx = Fixture::new("search-rank")?;
    fx.put(
        "a.jsonl",
        &[
            user("weak", None, "a long message that mentions quokka once among many other unrelated words here"),
            user("strong", Some("weak"), "quokka quokka quokka"),
            user("odd", Some("strong"), "ünïcödé \"quoted\" AND star* minus-sign 日本語"),
        ],
    )?;
    fx.update(&["a.jsonl"])?;
    let ranked: Vec<String> = fx.ids("quokka")?.into_iter().map(|(_, id)| id).collect();
    assert_eq!(ranked, ["strong", "weak"]);

    for query in ["\"", "*", "-", "AND", "OR NOT", "(", "quoted\" AND", "star*", "minus-sign", "", "   "] {
        fx.index.search(query, 5, &[])?;
    }
    assert_eq!(fx.ids("\"quoted\"")?.len(), 1);
    assert_eq!(fx.ids("unicode")?.len(), 1, "accents are folded");
    let hit = fx.index.search("minus-sign", 5, &[])?;
    assert_eq!(hit.len(), 1);
    assert!(hit[0].snippet.contains("minus-sign"), "snippet: {}", hit[0].snippet);
    Ok(())
}

/// Scripts written without spaces (Chinese, Japanese, Korean) are found by a word in
/// the middle of a run, as a phrase of its characters; the characters must be
/// consecutive, and a query still needs every word.
#[test]
fn words_inside_runs_of_unspaced_scripts_are_found() -> Result<()> {
    let mut fx = Fixture::new("search-cjk")?;
    let lines = [
        user("zh", None, "我们在讨论会话存储的实现方法"),
        user("ja", Some("zh"), "セッションを保存する前に確認してください"),
        user("ko", Some("ja"), "세션을저장합니다 today"),
        user("mixed", Some("ko"), "parser日本語テスト"),
    ];
    fx.put("a.jsonl", &lines)?;
    fx.update(&["a.jsonl"])?;
    let found =
        |fx: &Fixture, q: &str| -> Result<Vec<String>> { Ok(fx.ids(q)?.into_iter().map(|(_, id)| id).collect()) };
    assert_eq!(found(&fx, "会话")?, ["zh"]);
    assert_eq!(found(&fx, "存储的实现")?, ["zh"]);
    assert_eq!(found(&fx, "保存")?, ["ja"]);
    assert_eq!(found(&fx, "저장")?, ["ko"]);
    assert_eq!(found(&fx, "저장 today")?, ["ko"]);
    assert_eq!(found(&fx, "日本")?, ["mixed"]);
    assert_eq!(found(&fx, "parser日本")?, ["mixed"]);
    // Not consecutive, or a word that is not there.
    assert!(found(&fx, "会存")?.is_empty());
    assert!(found(&fx, "会话 tomorrow")?.is_empty());
    Ok(())
}

/// A query of thousands of words (a pasted page) asks for each distinct word once and
/// for the first `MAX_QUERY_WORDS` of them: repeated words find what the words alone
/// find, and words past the cap do not narrow the result.
#[test]
fn long_queries_take_each_word_once_and_the_first_words_only() -> Result<()> {
    let mut fx = Fixture::new("search-long")?;
    let first: Vec<String> = (0..session::history::MAX_QUERY_WORDS).map(|i| format!("w{i}x")).collect();
    let needle = format!("needle haystack {}", first.join(" "));
    fx.put("a.jsonl", &[user("a1", None, &needle), user("a2", Some("a1"), "other")])?;
    fx.update(&["a.jsonl"])?;
    let a1 = vec![(fx.file("a.jsonl"), "a1".to_owned())];
    assert_eq!(fx.ids(&"needle haystack ".repeat(4_000))?, a1);
    let hits = fx.index.search(&"Needle ".repeat(4_000), 5, &[])?;
    assert!(
        hits.len() == 1 && hits[0].snippet.starts_with("needle haystack"),
        "{:?}",
        hits.first().map(|h| &h.snippet)
    );
    // The cap's worth of words all match; the words after them are not in the text.
    let long = format!("{} absent1 absent2", first.join(" "));
    assert_eq!(session::history::query_words(&long).left_out, 2);
    assert_eq!(fx.ids(&long)?, a1);
    Ok(())
}

/// What happens to one file before an update.
#[derive(Clone, Debug)]
enum Step {
    /// Left as it is.
    Keep,
    /// These entries appended (the file made with them when missing).
    Append(Vec<usize>),
    /// Written again with these entries, as a new file renamed over it.
    Rewrite(Vec<usize>),
    /// Deleted, and no longer listed.
    Remove,
}

const WORDS: [&str; 6] = ["wombat", "narwhal", "parser", "日本語", "zebra", "okapi"];

/// The text of entry kind `k`: two of [`WORDS`].
fn words(k: usize) -> String {
    format!("{} said {}", WORDS[k % WORDS.len()], WORDS[k / WORDS.len() % WORDS.len()])
}

/// Every hit of every word of [`WORDS`] (and of a query of two), in order.
fn answers(index: &SearchIndex) -> Result<Vec<Vec<session::search::SearchHit>>> {
    let mut out = Vec::new();
    for query in WORDS.iter().map(|w| (*w).to_owned()).chain(["wombat zebra".to_owned()]) {
        out.push(index.search(&query, 1000, &[])?);
    }
    Ok(out)
}

/// Each answer's hits as a sorted list of where they are.
fn found(answers: &[Vec<session::search::SearchHit>]) -> Vec<Vec<(PathBuf, Option<String>)>> {
    answers
        .iter()
        .map(|hits| {
            let mut at: Vec<_> = hits.iter().map(|h| (h.hit.path.clone(), h.hit.entry_id.clone())).collect();
            at.sort();
            at
        })
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// However the files change between updates, a catalog kept up to date on several
    /// threads holds exactly what one kept up to date on one thread holds (the same
    /// hits in the same order, with the same scores and snippets, and the same
    /// reports), and finds the entries a catalog indexed from nothing finds.
    #[test]
    fn an_update_on_many_threads_writes_what_one_thread_writes(
        rounds in proptest::collection::vec(
            proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(Step::Keep),
                    proptest::collection::vec(0usize..36, 0..4).prop_map(Step::Append),
                    proptest::collection::vec(0usize..36, 0..4).prop_map(Step::Rewrite),
                    proptest::strategy::Just(Step::Remove),
                ],
                1..10,
            ),
            1..4,
        ),
    ) {
        use proptest::prelude::*;
        let fail = |e: Box<dyn std::error::Error>| TestCaseError::fail(e.to_string());
        let dir = TempDir::new("search-threads");
        let root = dir.path().to_path_buf();
        let open = |threads: usize| -> Result<SearchIndex> {
            Ok(SearchIndex::new(Catalog::open_in_memory()?, Arc::new(FileStorage::new()))
                .with_parallelism(session::Parallelism::new(threads)))
        };
        let mut many = open(4).map_err(fail)?;
        let mut one = open(1).map_err(fail)?;
        let mut listed = std::collections::BTreeSet::new();
        for (round, steps) in rounds.iter().enumerate() {
            for (n, step) in steps.iter().enumerate() {
                let path = root.join(format!("f{n}.jsonl"));
                let lines = |ks: &[usize]| -> Vec<String> {
                    ks.iter().enumerate().map(|(i, k)| user(&format!("r{round}e{i}"), None, &words(*k))).collect()
                };
                let io = |e: std::io::Error| TestCaseError::fail(e.to_string());
                match step {
                    Step::Keep => {}
                    Step::Append(ks) if listed.contains(&n) => append(&path, &lines(ks.as_slice()).concat()).map_err(io)?,
                    Step::Append(ks) | Step::Rewrite(ks) => {
                        let new = root.join("new.tmp");
                        fs_err::write(&new, session(&lines(ks.as_slice()))).map_err(io)?;
                        fs_err::rename(&new, &path).map_err(io)?;
                        listed.insert(n);
                    }
                    Step::Remove => {
                        if listed.remove(&n) {
                            fs_err::remove_file(&path).map_err(io)?;
                        }
                    }
                }
            }
            let files: Vec<SessionFile> =
                listed.iter().map(|n| SessionFile::session(root.join(format!("f{n}.jsonl")), Dialect::Pi)).collect();
            let scopes = [root.clone()];
            let a = many.update(&files, &scopes, &mut |_, _| {}).map_err(|e| fail(e.into()))?;
            let b = one.update(&files, &scopes, &mut |_, _| {}).map_err(|e| fail(e.into()))?;
            prop_assert_eq!(a, b);
            let mut fresh = open(1).map_err(fail)?;
            fresh.update(&files, &scopes, &mut |_, _| {}).map_err(|e| fail(e.into()))?;
            let (a, b, c) = (answers(&many).map_err(fail)?, answers(&one).map_err(fail)?, answers(&fresh).map_err(fail)?);
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(found(&a), found(&c));
        }
    }
}
