//! The JSON engine: JSON read and written exactly as JavaScript reads and writes it,
//! with nothing of sessions in it. It names no module of the crate outside this
//! folder, and its files read bottom-up, each naming only those listed before it:
//!
//! * leaves: `number` (ECMAScript's `Number::toString`, which number tokens a double
//!   keeps), `surrogate` (the stand-ins for lone surrogates), `ws` (JSON whitespace),
//!   `kind` (a raw value's kind, JavaScript truthiness);
//! * `strings`: where strings end, 64 bytes at a time (`ScanError`);
//! * `decode`: strings decoded, raw keys compared;
//! * `scan`: the validating walk and the splitters of objects and arrays;
//! * `tape`: a line's values down to a depth, recorded in the walk; `lenient`: omp's
//!   lenient splitter of a text into values;
//! * `write`: the serializer (`JSON.stringify`); `read`: text into values
//!   (`JSON.parse`) and whether its numbers survive.
//!
//! The public modules [`crate::json`] and [`crate::scan`] re-export what callers use.

pub(crate) mod decode;
pub(crate) mod kind;
pub(crate) mod lenient;
pub(crate) mod number;
pub(crate) mod read;
pub(crate) mod scan;
pub(crate) mod strings;
pub(crate) mod surrogate;
pub(crate) mod tape;
#[cfg(test)]
mod testing;
pub(crate) mod write;
pub(crate) mod ws;
