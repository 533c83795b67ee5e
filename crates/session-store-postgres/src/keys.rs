//! The check that content can be PostgreSQL `text`; keys come from
//! [`session_store::keyed`] through [`ServerError`]'s [`Cause`](session_store::keyed::Cause).

use std::path::Path;

use session_store::{Op, StoreError};

use crate::error::ServerError;

/// Checks that `bytes` can be stored as text: valid UTF-8 without NUL bytes.
pub(crate) fn text<'a>(op: Op, path: &Path, bytes: &'a [u8]) -> Result<&'a str, StoreError> {
    session_store::keyed::text_content(bytes).map_err(|reason| ServerError::InvalidContent { reason }.at(op, path))
}
