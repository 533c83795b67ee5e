//! omp's lenient reading of a text (`parseJsonlLenient`): the JSON values of a text one
//! after another, a damaged stretch skipped to the next line. It stands on the
//! validating walk (`scan.rs`); the public module [`crate::scan`] re-exports it.

use super::scan::skip_value;
use super::strings::ScanError;
use super::ws::{is_ws, skip_ws};

/// One step of omp's lenient reading of a text (`parseJsonlLenient`), as
/// [`LenientValues`] yields them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lenient<T> {
    /// A JSON value at `start..end`. When the value was the whole rest of its line
    /// (a `\r` before the `\n` included) and the line reader accepted it, `parsed` is
    /// what the reader made of it and `end` is the line's end; otherwise `parsed` is
    /// `None`.
    Value {
        /// Where the value starts.
        start: usize,
        /// Where it ends.
        end: usize,
        /// What the line reader made of the whole line, when it accepted it.
        parsed: Option<T>,
        /// Text glued to the value (no whitespace between them): the rest of that line
        /// is lost.
        glued: Option<Skipped>,
    },
    /// Not JSON at `at`: the rest of that line is lost.
    Syntax(Skipped),
    /// A value starting at `at` runs to the end of the text: reading stops (a torn
    /// last line, or garbage that swallowed the lines after it).
    Incomplete {
        /// Where the unfinished value starts.
        at: usize,
    },
}

/// Text [`LenientValues`] skipped to the end of its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Where the skipped text starts.
    pub at: usize,
    /// The start of the next line, where reading resumes (`None`: there is none, and
    /// reading stops).
    pub resume: Option<usize>,
}

/// omp's lenient value reader (`parseJsonlLenient`, Bun's JSONL chunk parser): JSON
/// values each ending its line, a value may span lines; text that breaks the grammar,
/// or follows a value on its line (a second value too, whatever whitespace other than
/// `\n` separates them), loses the rest of its line; an unfinished value ends the
/// reading. The one implementation of the rule, for the session
/// parser and for listings.
///
/// Each value start first offers the rest of its line to `line_reader` (most lines
/// hold exactly one value, and the reader can validate and parse it in one pass);
/// when it declines, the value is found by the scanner alone.
///
/// ```
/// use session_model::scan::{Lenient, LenientValues, Skipped};
/// let text = "{\"a\":1}\nnot json\n{\"b\":\n2}x\n{\"c\":";
/// let steps: Vec<Lenient<()>> = LenientValues::new(text, |_| None).collect();
/// assert_eq!(steps, [
///     Lenient::Value { start: 0, end: 7, parsed: None, glued: None },
///     Lenient::Syntax(Skipped { at: 8, resume: Some(17) }),
///     Lenient::Value { start: 17, end: 25, parsed: None, glued: Some(Skipped { at: 25, resume: Some(27) }) },
///     Lenient::Incomplete { at: 27 },
/// ]);
/// ```
pub struct LenientValues<'a, F> {
    text: &'a str,
    pos: usize,
    line_reader: F,
    done: bool,
}

impl<'a, T, F: FnMut(&'a str) -> Option<T>> LenientValues<'a, F> {
    /// Reads `text` from its start.
    pub fn new(text: &'a str, line_reader: F) -> LenientValues<'a, F> {
        LenientValues::starting_at(text, 0, line_reader)
    }

    /// Reads `text` from byte `pos`.
    pub fn starting_at(text: &'a str, pos: usize, line_reader: F) -> LenientValues<'a, F> {
        LenientValues { text, pos, line_reader, done: false }
    }

    /// Returns where reading resumes: after the last step, whitespace not yet skipped
    /// (the end of the text once reading stopped).
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Skips the rest of the line holding `at`.
    fn skip_line(&mut self, at: usize) -> Skipped {
        let resume = memchr::memchr(b'\n', &self.text.as_bytes()[at..]).map(|i| at + i + 1);
        self.stop_or_resume(resume);
        Skipped { at, resume }
    }

    fn stop_or_resume(&mut self, resume: Option<usize>) {
        match resume {
            Some(r) => self.pos = r,
            None => {
                self.pos = self.text.len();
                self.done = true;
            }
        }
    }
}

impl<'a, T, F: FnMut(&'a str) -> Option<T>> Iterator for LenientValues<'a, F> {
    type Item = Lenient<T>;

    fn next(&mut self) -> Option<Lenient<T>> {
        if self.done {
            return None;
        }
        let bytes = self.text.as_bytes();
        let start = skip_ws(bytes, self.pos);
        if start >= bytes.len() {
            self.pos = bytes.len();
            self.done = true;
            return None;
        }
        let line_end = memchr::memchr(b'\n', &bytes[start..]).map(|i| start + i);
        let end_of_line = line_end.unwrap_or(bytes.len());
        if let Some(parsed) = (self.line_reader)(&self.text[start..end_of_line]) {
            self.stop_or_resume(line_end.map(|e| e + 1));
            return Some(Lenient::Value { start, end: end_of_line, parsed: Some(parsed), glued: None });
        }
        match skip_value(bytes, start) {
            Ok(end) => {
                self.pos = end;
                // A value ends its line: after it only whitespace may come before the
                // `\n`. Anything else (another value too, even after a space or a lone
                // `\r`) loses the rest of that line.
                let after = end + bytes[end..].iter().take_while(|&&b| is_ws(b) && b != b'\n').count();
                let glued = (after < bytes.len() && bytes[after] != b'\n').then(|| self.skip_line(after));
                Some(Lenient::Value { start, end, parsed: None, glued })
            }
            Err(ScanError::Incomplete) => {
                self.pos = bytes.len();
                self.done = true;
                Some(Lenient::Incomplete { at: start })
            }
            Err(ScanError::Syntax) => Some(Lenient::Syntax(self.skip_line(start))),
        }
    }
}
