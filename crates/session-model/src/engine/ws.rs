//! JSON whitespace: space, tab, line feed and carriage return, as `JSON.parse` skips
//! them between tokens. The one definition of the crate: the scanner, the lenient
//! splitter, both dialects' line readers and the record's compact form all ask here.
//! A leaf: it names no other module of the crate.

/// Returns whether `b` is JSON whitespace.
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Skips JSON whitespace from `pos`.
pub fn skip_ws(b: &[u8], mut pos: usize) -> usize {
    while pos < b.len() && is_ws(b[pos]) {
        pos += 1;
    }
    pos
}

/// Returns `s` without JSON whitespace at either end.
pub(crate) fn trim_ws(s: &str) -> &str {
    s.trim_matches(|c: char| u8::try_from(c).is_ok_and(is_ws))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_four_json_whitespace_bytes() {
        let ws: Vec<u8> = (0..=u8::MAX).filter(|&b| is_ws(b)).collect();
        assert_eq!(ws, b"\t\n\r ");
        assert_eq!(skip_ws(b" \t\r\n\x0cx", 0), 4);
        assert_eq!(trim_ws("\r\n \t{}\u{a0}\x0c \n"), "{}\u{a0}\x0c");
    }
}
