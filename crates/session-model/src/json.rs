//! JSON text exactly as JavaScript's `JSON.stringify` writes it.
//!
//! Both reference agents serialise every record with `JSON.stringify(value)`. A record
//! we create must be byte-identical to what they would write, so this module
//! reproduces the three places where a generic JSON writer differs:
//!
//! * **key order**: insertion order, except that integer-like keys (`"0"`, `"42"`)
//!   come first in ascending numeric order, as in every JavaScript object;
//! * **numbers**: the ECMAScript `Number::toString` algorithm (`1e+21`, `1e-7`,
//!   `0.000001`, `-0` as `0`, integers beyond 2^53 rounded through `f64`);
//! * **strings**: only `"`, `\` and C0 controls are escaped, with the short forms
//!   `\b \f \n \r \t` and lowercase `\u00XX` otherwise.

//!
//! It also reads JSON as `JSON.parse` does ([`parse`]: lone surrogates as their
//! stand-ins, [`lone_surrogate_char`]; numbers beyond a double as `null`) and says
//! whether a text's numbers survive that ([`numbers_exact`], [`js_exact`]). The code is
//! the JSON engine's (`engine/`: `write.rs`, `read.rs`, `number.rs`, `surrogate.rs`);
//! this module is its public face.

pub use crate::engine::number::{js_number, write_js_number};
pub use crate::engine::read::{js_exact, numbers_exact, parse};
pub use crate::engine::surrogate::{display_str, lone_surrogate_char, stand_in_surrogate};
pub use crate::engine::write::{array_index, to_js_string, write_js_str, write_js_value};
