//! Integration tests of session-discovery; modules mirror `src/`.

mod breadcrumb;
mod cache;
mod env;
mod info;
mod list;
mod paths;
mod storage;
mod support;
