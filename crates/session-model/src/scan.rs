//! The JSON scanner: validates text exactly as `JSON.parse` accepts it and exposes
//! the members of objects as raw text spans, without building value trees.
//!
//! Loading a session and listing sessions read every byte but need only a handful of
//! fields, so this module only checks the grammar (iteratively, so deep nesting cannot
//! exhaust the stack; strings 64 bytes at a time) and hands out borrowed spans;
//! strings are decoded on demand. [`Obj`] splits one object into its members;
//! [`Tape`] records the spans of a whole line's values down to a depth in the same
//! pass that validates it, for readers of nested fields. Unlike `serde_json`, it
//! accepts escaped lone surrogates (`"\udc00"`), as JavaScript does; they decode to
//! their stand-ins ([`crate::json::lone_surrogate_char`]).
//!
//! ```
//! use session_model::scan::{Obj, decode_string};
//! let (obj, raw) = Obj::parse_line(r#" {"type":"label","id":"a\u0062","n":[1,{"x":null}]} "#).unwrap();
//! let obj = obj.unwrap();
//! assert_eq!(obj.get("n"), Some(r#"[1,{"x":null}]"#));
//! assert_eq!(obj.get_str("id").as_deref(), Some("ab"));
//! assert!(raw.starts_with('{') && raw.ends_with('}'));
//! assert!(Obj::parse_line("{\"a\":").is_err());
//! ```
//!
//! The code is the JSON engine's (`engine/`: `scan.rs` the walk and the splitters,
//! `tape.rs`, `decode.rs`, `kind.rs` with the one truthiness rule, `ws.rs`,
//! `strings.rs`, and `lenient.rs`, omp's lenient splitter [`LenientValues`]); this
//! module is its public face.

pub use crate::engine::decode::{decode_string, push_decoded, unescape};
pub use crate::engine::kind::{Kind, kind, number, truthy};
pub use crate::engine::lenient::{Lenient, LenientValues, Skipped};
pub use crate::engine::scan::{
    Obj, RecordFields, array_elements, js_join_string, object_fields, parse_whole, record_fields, skip_value,
};
pub use crate::engine::strings::ScanError;
pub use crate::engine::tape::Tape;
pub use crate::engine::ws::skip_ws;
