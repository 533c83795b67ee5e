//! A raw JSON value as JavaScript sees it without parsing it: its kind (from its first
//! byte), its truthiness and its number. The one truthiness rule of the workspace. A
//! leaf: it names no other module of the crate.

/// The kind of a JSON value, from its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `null`.
    Null,
    /// `false`.
    False,
    /// `true`.
    True,
    /// A number.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

/// Returns the kind of a validated raw value.
pub fn kind(raw: &str) -> Kind {
    match raw.as_bytes().first() {
        Some(b'n') => Kind::Null,
        Some(b'f') => Kind::False,
        Some(b't') => Kind::True,
        Some(b'"') => Kind::String,
        Some(b'[') => Kind::Array,
        Some(b'{') => Kind::Object,
        _ => Kind::Number,
    }
}

/// Returns whether a validated raw value is truthy in JavaScript: everything but
/// `null`, `false`, `""` and a number that reads as zero (`0`, `-0`, `0.0`, `0e5`,
/// `1e-400`). A number beyond a double (`1e400`) is `Infinity`, which is truthy, though
/// it is written back as `null`: the rule reads the text, never the value it becomes.
///
/// ```
/// use session_model::scan::truthy;
/// assert!(truthy("1e400") && truthy("-1e400") && truthy("\"0\"") && truthy("[]") && truthy("{}"));
/// assert!(!truthy("0") && !truthy("-0") && !truthy("\"\"") && !truthy("null") && !truthy("false"));
/// ```
pub fn truthy(raw: &str) -> bool {
    match kind(raw) {
        Kind::Null | Kind::False => false,
        Kind::True | Kind::Array | Kind::Object => true,
        // Every escape decodes to at least one character: a string is empty only as `""`.
        Kind::String => raw.len() > 2,
        Kind::Number => raw.parse::<f64>().map(|f| f != 0.0 && !f.is_nan()).unwrap_or(true),
    }
}

/// Parses a raw number as JavaScript does.
pub fn number(raw: &str) -> Option<f64> {
    if kind(raw) != Kind::Number {
        return None;
    }
    raw.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// JavaScript's `Boolean(JSON.parse(raw))` for each text.
    #[test]
    fn truthiness_is_javascripts() {
        for (raw, js) in [
            ("1e400", true),
            ("-1e400", true),
            ("0", false),
            ("-0", false),
            ("0.0", false),
            ("0e5", false),
            ("-0.0e-7", false),
            ("1e-400", false),
            ("0.5", true),
            ("\"\"", false),
            ("\"0\"", true),
            ("\"\\u0000\"", true),
            ("null", false),
            ("false", false),
            ("true", true),
            ("[]", true),
            ("{}", true),
        ] {
            assert_eq!(truthy(raw), js, "{raw}");
        }
    }

    #[test]
    fn numbers_read_as_javascript_reads_them() {
        assert_eq!(number("1e400"), Some(f64::INFINITY));
        assert_eq!(number("-0").map(f64::is_sign_negative), Some(true));
        assert_eq!(number("\"1\""), None);
    }
}
