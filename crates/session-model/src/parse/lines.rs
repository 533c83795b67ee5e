//! Line numbers: the one line counter of the parse. A diagnostic carries the 1-based
//! line of its byte offset, 1 + the `\n` bytes before it, counted once however many
//! diagnostics a text has.

/// Counts the `\n` bytes of `bytes`.
pub(super) fn newlines(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', bytes).count()
}

/// Line numbers of increasing offsets in bytes, counted once over the bytes (an
/// offset before the last one counts again from the start).
#[derive(Default)]
pub(super) struct LineCounter {
    pos: usize,
    newlines: usize,
}

impl LineCounter {
    /// Returns the 1-based line of byte `offset` of `bytes` (at most their end).
    pub(super) fn line_at(&mut self, bytes: &[u8], offset: usize) -> usize {
        let offset = offset.min(bytes.len());
        if offset < self.pos {
            *self = LineCounter::default();
        }
        self.newlines += newlines(&bytes[self.pos..offset]);
        self.pos = offset;
        self.newlines + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_plus_the_newlines_before() {
        let text = b"a\nbc\n\nd";
        let mut lines = LineCounter::default();
        let got: Vec<usize> = [0, 1, 2, 5, 6, 7, 99, 3, 0].iter().map(|&o| lines.line_at(text, o)).collect();
        assert_eq!(got, [1, 1, 2, 3, 4, 4, 4, 2, 1]);
        assert_eq!(newlines(text), 3);
    }
}
