//! Integration tests of session-store.
