//! Integration tests of the import.
