//! S3-compatible object storage for session files (AWS S3, Cloudflare R2, MinIO, Ceph,
//! Garage), through the `object_store` crate.
//!
//! [`S3Storage`] implements [`session_store::Storage`] and passes the whole storage
//! contract (`session_store::contract::run_contract` and `run_byte_contract`). A path, as
//! a `/`-separated key, names a file; directories are key prefixes, listed with a
//! delimiter. Object storage cannot append to an object, so a file is a small **head**
//! object naming immutable, content-addressed **segments**: an append uploads only the
//! new bytes as one segment and replaces the head, conditionally on the head it read.
//! [`S3StorageBuilder`] configures the client (endpoint, region, credentials; the rest
//! from the AWS environment variables); [`S3Storage::from_url`] reads the same from an
//! `s3://bucket/prefix?…` URL. The API is blocking: the storage owns a current-thread
//! tokio runtime and runs each call on it, on a thread of its own when the caller is
//! inside another tokio runtime.
//!
//! It does not keep omp's or pi's layout of any server (neither reads object storage), it
//! deletes no segment on its own ([`S3Storage::gc_segments`] does, when asked), and it
//! publishes no plain copy of a file.
//!
//! # Layout
//!
//! Below the storage's prefix `<p>` (`docs/format.md`, "Object storage layout"), for a
//! file whose key is `K` (each component percent-encoded where S3 keys need it, the last
//! one of a head or lock marked with `!` so that a file's object is never a directory's
//! prefix, which stores keeping objects as files, MinIO and s3s-fs, cannot hold):
//!
//! | object | holds | written |
//! |---|---|---|
//! | `<p>/heads/K!` | JSON `{"v":1,"size":N,"mtime":MS,"segments":[{"sha256":"…","len":N},…]}`; empty once the file is renamed away (a tombstone: no file) | replaced with `If-Match` on its ETag, created with `If-None-Match: *` |
//! | `<p>/segments/<sha256>` | bytes of one write, named by their SHA-256 | once, with `If-None-Match: *`; an existing one is reused while younger than half an hour |
//! | `<p>/segments/<sha256>.<copy>` | the same bytes again, when their segment was older (`"copy"` in the head names it) | once, under a fresh random name |
//! | `<p>/locks/K!` | JSON `{"v":1,"token":"…","expires":MS,"pid":N}` while [`Storage::lock`] is held | created with `If-None-Match: *`, renewed with `If-Match`, released (`expires` 0) with `If-Match` |
//! | `<p>/probe/<random>` | a moment's probe of conditional writes | created twice, deleted |
//!
//! # Operations
//!
//! * A read fetches the head, then its segments concurrently, each checked against its
//!   length and hash; a head-and-tail read ([`Storage::read_slices`]) fetches only the
//!   byte ranges of the segments it needs.
//! * [`Storage::append`] and [`Storage::append_expected`] upload the tail as one segment
//!   and replace the head with `If-Match`. A head holds at most [`MAX_SEGMENTS`] (32)
//!   segments: the write that would add a 33rd uploads the whole file as one segment
//!   instead (a compaction).
//! * Whole writes ([`Storage::write_atomic`] and the others) upload one segment and
//!   replace the head. A size check (`ExpectedSize`) is made against the head read, and the
//!   replace is conditional on that head: a writer that loses the race gets
//!   [`StoreError::Conflict`] and changes nothing but an unreferenced segment. A write
//!   without a precondition (`append`, `write`, `truncate`) reads the head again and
//!   starts over.
//! * [`Storage::overwrite_prefix`] (omp's title slot) replaces only the segments that
//!   hold the bytes it writes, by one segment; the rest of the file is not sent again.
//! * [`Storage::rename`] writes the head at the new key, then replaces the old one by a
//!   tombstone with `If-Match` on the head it copied: an append in between makes it copy
//!   again, so no write is lost. Not atomic: a crash between the two leaves both names,
//!   sharing their segments.
//! * [`Storage::lock`] creates `<p>/locks/K!` with an expiry [`DEFAULT_LOCK_TTL`] (30 s,
//!   [`S3StorageBuilder::lock_ttl`]) ahead; a thread renews it every third of that while
//!   it is held, so a holder that dies frees it when it expires, and the next taker
//!   replaces the expired object conditionally. Release replaces it by an expired one
//!   with `If-Match` on the holder's last write, so a lock another taker holds stays.
//! * [`Storage::ensure_dir`] remembers an empty directory in this storage only; a
//!   directory with files exists for everyone. [`Storage::watch`] polls the head.
//!
//! Every write first asks, once per storage, whether the store honours conditional writes
//! ([`S3Storage::probe_conditional_writes`]). One that does not (Garage ignores
//! `If-None-Match`) would let concurrent writers overwrite each other, so every write
//! fails with [`S3Error::Unconditional`], unless the storage was built with
//! [`S3StorageBuilder::allow_unconditional`] (`--allow-unconditional`): each head update
//! then happens under the file's lock object, taken by looking, writing and reading back,
//! which excludes writers that do not start within the same moment, not all of them.
//!
//! # Durability and space
//!
//! An acknowledged write is a completed `PUT`: as durable as the store makes objects.
//! Every [`Durability`](session_store::Durability) level is the same here. Writes never
//! delete segments: a rewrite or a compaction leaves the old ones for
//! [`S3Storage::gc_segments`], which deletes those no head names once they are an hour
//! old ([`GC_MIN_AGE`]). A write reuses an existing segment only while it is younger than
//! half an hour and otherwise uploads a copy under a fresh name, so a collection never
//! deletes a segment a write has just chosen (unless the writer stalls for half an hour
//! before replacing its head). A read checks the hash of every segment it fetches whole,
//! and fetches whole every segment up to 1 MiB it needs a part of; a part of a larger
//! segment is checked against its length only.
//!
//! # Errors
//!
//! Every error is a [`StoreError`] naming the path. Causes of this crate are
//! [`StoreError::Io`] with an [`S3Error`] inside ([`S3Error::find`]) and an
//! [`std::io::ErrorKind`]:
//!
//! | problem | returned |
//! |---|---|
//! | one write past 5 GiB ([`MAX_SEGMENT_BYTES`], S3's limit on one `PUT`) | `FileTooLarge`, [`S3Error::TooLarge`]; nothing written |
//! | a head or segment of another shape, hash or length, or a missing segment | `InvalidData`, [`S3Error::InvalidContent`] |
//! | a path that is not UTF-8, holds NUL or `..`, or is longer than [`MAX_KEY_BYTES`], or whose head object's key would pass S3's 1,024 bytes | `InvalidInput`, [`S3Error::BadPath`] |
//! | a store that ignores conditional writes | `Unsupported`, [`S3Error::Unconditional`] |
//! | anything the store or the network refuses | the IO error's kind, or `PermissionDenied`, or `Other`; [`S3Error::Backend`] |
//!
//! ```no_run
//! use std::path::Path;
//! use session_store::{ExpectedSize, Storage};
//! use session_store_s3::S3Storage;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let storage =
//!     S3Storage::from_url("s3://sessions/team?endpoint=http://127.0.0.1:9000&region=us-east-1&allow_http=true")?;
//! let path = Path::new("/sessions/--work--/s.jsonl");
//! storage.write_atomic(path, b"{\"type\":\"session\"}\n", ExpectedSize::Missing)?;
//! storage.append_expected(path, b"{\"type\":\"message\"}\n", ExpectedSize::Bytes(19))?;
//! assert_eq!(storage.list(Path::new("/sessions/--work--"))?, ["s.jsonl"]);
//! assert_eq!(storage.segments(path)?.map(|s| s.len()), Some(2));
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod error;
mod layout;
mod storage;

pub use error::{MAX_KEY_BYTES, MAX_SEGMENT_BYTES, OpenError, S3Error};
pub use layout::Segment;
pub use storage::{DEFAULT_LOCK_TTL, GC_MIN_AGE, GcReport, MAX_SEGMENTS, S3Storage, S3StorageBuilder};

#[cfg(doc)]
use session_store::{Storage, StoreError};

// The README's example runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
