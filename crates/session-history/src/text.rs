//! Prompt normalization and query tokenization, exactly as omp 18.3.4 does them in
//! JavaScript (`normalizePrompt`, `#tokenize`, the FTS query builder and the LIKE
//! escaper), so a prompt stored by either program lands on the same row and a query
//! finds the same rows.

/// Returns whether `c` is whitespace for a JavaScript regular expression (`\s`) and
/// for `String.prototype.trim`: the ECMAScript WhiteSpace and LineTerminator sets.
///
/// This differs from [`char::is_whitespace`]: U+FEFF counts, U+0085 (NEL) does not.
pub(crate) fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}' | '\u{2028}' | '\u{2029}' | '\u{202F}' | '\u{205F}' | '\u{3000}' | '\u{FEFF}'
    )
}

/// Returns the canonical stored form of a prompt.
///
/// CRLF and lone CR become LF, the whitespace run before every LF is removed (terminal
/// copies pad lines with spaces to the screen width) and whitespace at both ends is
/// trimmed. Whitespace is JavaScript's (see the crate docs), so the result is
/// byte-identical to what omp stores. An empty result means "nothing to store".
///
/// The function is idempotent: normalizing a normalized prompt changes nothing.
pub fn normalize_prompt(prompt: &str) -> String {
    // Pass 1: fold CRLF / CR to LF.
    let mut folded = String::with_capacity(prompt.len());
    let mut chars = prompt.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' {
            if chars.peek() == Some(&'\n') {
                chars.next();
            }
            folded.push('\n');
        } else {
            folded.push(c);
        }
    }
    // Pass 2: drop every run of non-LF whitespace that ends right before an LF.
    let mut out = String::with_capacity(folded.len());
    let mut pending_start: Option<usize> = None;
    for (i, c) in folded.char_indices() {
        if c == '\n' {
            if let Some(start) = pending_start.take() {
                out.truncate(out.len() - (i - start));
            }
            out.push('\n');
        } else {
            if is_js_whitespace(c) {
                pending_start.get_or_insert(i);
            } else {
                pending_start = None;
            }
            out.push(c);
        }
    }
    out.trim_matches(is_js_whitespace).to_owned()
}

/// Returns whether `c` continues a search token: a letter or a digit.
///
/// omp splits on `[^\p{L}\p{N}]+`. The standard library has no General_Category
/// query, so letters are [`char::is_alphabetic`], which also counts the combining
/// vowel signs of some scripts (Other_Alphabetic) as part of a word; digits are
/// [`char::is_numeric`], exactly `\p{N}`.
fn is_token_char(c: char) -> bool {
    c.is_alphabetic() || c.is_numeric()
}

/// Splits a query into lowercase search tokens: runs of letters and digits.
///
/// `"Git-Commit  fix_2"` gives `["git", "commit", "fix", "2"]`; a query without a
/// letter or digit gives no tokens (and a search finds nothing).
pub fn tokenize(query: &str) -> Vec<String> {
    query.to_lowercase().split(|c: char| !is_token_char(c)).filter(|t| !t.is_empty()).map(str::to_owned).collect()
}

/// The most distinct words a search takes from its query ([`query_words`]): each word
/// is one more condition on every candidate and one more scan of every snippet's text,
/// so a pasted page of text would otherwise cost time in proportion to its length
/// squared.
pub const MAX_QUERY_WORDS: usize = 32;

/// The words a search looks for ([`query_words`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueryWords {
    /// The query's distinct tokens ([`tokenize`]) in the order they first appear, at
    /// most [`MAX_QUERY_WORDS`].
    pub words: Vec<String>,
    /// How many distinct tokens after the first [`MAX_QUERY_WORDS`] were left out.
    pub left_out: usize,
}

/// Returns the words every search (the session catalog's, the prompt history's, the
/// snippets') looks for in `query`: its tokens, each once, the first
/// [`MAX_QUERY_WORDS`] of them. A repeated word asks nothing more (every word must
/// match), so only the cap changes what is found, and [`QueryWords::left_out`] says
/// when it did.
///
/// ```
/// let q = session_history::query_words("fix the fix, then FIX");
/// assert_eq!(q.words, ["fix", "the", "then"]);
/// assert_eq!(q.left_out, 0);
/// ```
pub fn query_words(query: &str) -> QueryWords {
    let mut seen = std::collections::HashSet::new();
    let mut q = QueryWords::default();
    for token in tokenize(query) {
        if seen.contains(&token) {
            continue;
        }
        if q.words.len() == MAX_QUERY_WORDS {
            q.left_out += 1;
        } else {
            q.words.push(token.clone());
        }
        seen.insert(token);
    }
    q
}

/// Builds the FTS5 MATCH expression: every token double-quoted (inner quotes
/// doubled) with a `*` prefix wildcard, space-joined (implicit AND).
pub(crate) fn fts_query(tokens: &[String]) -> String {
    let mut out = String::new();
    for (i, token) in tokens.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push('"');
        out.push_str(&token.replace('"', "\"\""));
        out.push_str("\"*");
    }
    out
}

/// Returns whether `c` belongs to a script written without spaces between words
/// (Han, Hiragana, Katakana, Hangul): text in it is indexed and searched character by
/// character, since a tokenizer that splits on spaces would make a whole sentence
/// one word.
pub(crate) fn is_unspaced(c: char) -> bool {
    matches!(u32::from(c),
        0x1100..=0x11FF // Hangul Jamo
        | 0x2E80..=0x2FDF // CJK radicals
        | 0x3040..=0x30FF // Hiragana, Katakana
        | 0x3100..=0x312F // Bopomofo
        | 0x3130..=0x318F // Hangul compatibility Jamo
        | 0x31F0..=0x31FF // Katakana phonetic extensions
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0xFF66..=0xFF9F // half-width Katakana
        | 0x20000..=0x3134F) // CJK extensions B and later
}

/// Returns `text` with a space before and after each character of a script written
/// without spaces ([`is_unspaced`]), so that the catalog's tokenizer makes each its
/// own word; other text is returned as it is.
pub(crate) fn segment(text: &str) -> std::borrow::Cow<'_, str> {
    // Every such character is encoded from a lead byte of 0xE1 up (U+1100 is E1 84 80),
    // and a lead byte starts a character: only those are decoded, and the text between
    // them is copied a run at a time.
    let mut out = String::new();
    let mut copied = 0;
    for (i, b) in text.bytes().enumerate() {
        if b < 0xE1 {
            continue;
        }
        let Some(c) = text.get(i..).and_then(|t| t.chars().next()).filter(|&c| is_unspaced(c)) else { continue };
        if out.is_empty() {
            out.reserve(text.len() + 64);
        }
        out.push_str(&text[copied..i]);
        out.push(' ');
        out.push(c);
        out.push(' ');
        copied = i + c.len_utf8();
    }
    if out.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

/// Builds the catalog's FTS5 MATCH expression from query tokens: as [`fts_query`],
/// but a token holding characters of a script written without spaces becomes a
/// phrase of its pieces (consecutive in the text, the last one a prefix), so a word
/// is found inside a longer run of such text.
pub(crate) fn segmented_query(tokens: &[String]) -> String {
    let pieces: Vec<String> =
        tokens.iter().map(|t| segment(t).split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    fts_query(&pieces)
}

/// Builds a `LIKE … ESCAPE '\'` pattern matching `token` anywhere: `\`, `%` and `_`
/// are escaped so they match themselves.
pub(crate) fn like_pattern(token: &str) -> String {
    let mut out = String::with_capacity(token.len() + 2);
    out.push('%');
    for c in token.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_folds_line_endings_and_padding() {
        assert_eq!(normalize_prompt("  a  \r\nb\t\rc \u{3000}\n\nd  "), "a\nb\nc\n\nd");
        assert_eq!(normalize_prompt(" \t\r\n "), "");
        // Whitespace inside a line is kept; only the run before a line break goes.
        assert_eq!(normalize_prompt("a  b \n c"), "a  b\n c");
        // NEL is not JavaScript whitespace, BOM is.
        assert_eq!(normalize_prompt("\u{FEFF}x\u{85}"), "x\u{85}");
    }

    #[test]
    fn tokenize_splits_on_non_alphanumerics() {
        assert_eq!(tokenize("Git-Commit  fix_2"), ["git", "commit", "fix", "2"]);
        assert_eq!(tokenize("ÉCOLE/日本語"), ["école", "日本語"]);
        assert!(tokenize(" -*- ").is_empty());
    }

    #[test]
    fn query_words_are_distinct_and_capped() {
        let q = query_words(&"a b a ".repeat(1000));
        assert_eq!((q.words, q.left_out), (vec!["a".to_owned(), "b".to_owned()], 0));
        let many: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        let q = query_words(&many.join(" "));
        assert_eq!(q.words, many[..MAX_QUERY_WORDS]);
        assert_eq!(q.left_out, 40 - MAX_QUERY_WORDS);
    }

    #[test]
    fn fts_query_quotes_each_token() {
        let tokens = vec!["a\"b".to_owned(), "c".to_owned()];
        assert_eq!(fts_query(&tokens), "\"a\"\"b\"* \"c\"*");
    }

    proptest::proptest! {
        /// The text between the pieces is kept as it is; each character of a script
        /// written without spaces, and only those, stands between two spaces.
        #[test]
        fn segment_spaces_out_each_unspaced_character(text in "(?s)[a-z 日本語éİ\u{1100}\u{10FF}\u{20000}…\n]{0,40}") {
            let mut expected = String::new();
            for c in text.chars() {
                if is_unspaced(c) {
                    expected.extend([' ', c, ' ']);
                } else {
                    expected.push(c);
                }
            }
            let got = segment(&text);
            proptest::prop_assert_eq!(&*got, expected.as_str());
            proptest::prop_assert_eq!(matches!(got, std::borrow::Cow::Borrowed(_)), !text.chars().any(is_unspaced));
        }
    }

    #[test]
    fn like_pattern_escapes_wildcards() {
        assert_eq!(like_pattern(r"50%_a\b"), r"%50\%\_a\\b%");
    }
}
