//! The check that content can be PostgreSQL `text`; keys come from
//! [`session_store::keyed`] through [`ServerError`]'s [`Cause`](session_store::keyed::Cause).

use std::path::Path;

use session_store::{Op, StoreError};

use crate::error::ServerError;

/// Checks that `bytes` can be stored as text: valid UTF-8 without NUL bytes.
pub(crate) fn text<'a>(op: Op, path: &Path, bytes: &'a [u8]) -> Result<&'a str, StoreError> {
    let s = std::str::from_utf8(bytes).map_err(|e| {
        ServerError::InvalidContent { reason: format!("invalid UTF-8 at byte {}", e.valid_up_to()) }.at(op, path)
    })?;
    if let Some(at) = s.find('\0') {
        return Err(ServerError::InvalidContent { reason: format!("NUL byte at byte {at}") }.at(op, path));
    }
    Ok(s)
}
