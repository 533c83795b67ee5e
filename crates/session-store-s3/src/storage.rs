//! [`S3Storage`]: the [`Storage`] trait on an S3-compatible bucket, as heads over
//! content-addressed segments.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::future::try_join_all;
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{
    GetOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, PutResult, UpdateVersion,
};
use rand::Rng;
use session_store::clock::SystemClock;
use session_store::keyed::{self, AppendingWriter, Cause, LocalDirs, Mtimes, child_entries};
use session_store::{
    AppendWriter, DirEntry, Durability, ExpectedSize, FileStat, LockWait, Op, PollWatch, SessionLock, Storage,
    StoreError, Watch, is_backup_of,
};
use sha2::{Digest, Sha256};

use crate::error::{MAX_SEGMENT_BYTES, OpenError, S3Error, backend};
use crate::layout::{FILE_MARK, Head, Layout, Segment, decode_dir, decode_file, hex};

/// A head holds at most this many segments: the write that would add one more writes the
/// whole file as one segment instead (a compaction).
pub const MAX_SEGMENTS: usize = 32;

/// How long a lock object lives without renewal unless the builder says otherwise; its
/// holder renews it every third of that.
pub const DEFAULT_LOCK_TTL: Duration = Duration::from_secs(30);

/// [`S3Storage::gc_segments`] deletes an unreferenced segment only when it is older than
/// this: a writer uploads its segment before it replaces the head that names it.
pub const GC_MIN_AGE: Duration = Duration::from_secs(3600);

/// A write reuses an existing segment of the bytes it needs only while the segment is
/// younger than this; an older one may be on [`S3Storage::gc_segments`]'s list, so the
/// write uploads a copy under a fresh name. Half of [`GC_MIN_AGE`]: a writer has that
/// long between finding the segment and naming it in a head.
const REFRESH_AFTER: Duration = Duration::from_secs(1800);

/// A read that wants part of a segment this long or shorter fetches it whole, so that
/// its hash is checked; a longer segment's part is fetched as a range.
const WHOLE_SEGMENT_READ: u64 = 1 << 20;

/// How many listings of the heads [`S3Storage::gc_segments`] makes at most while heads
/// keep appearing or changing under it, before it gives up without deleting.
const GC_HEAD_ROUNDS: usize = 8;

/// The longest object key S3 accepts, in bytes.
const MAX_OBJECT_KEY_BYTES: usize = 1024;

/// How long a waiting [`Storage::lock`] sleeps between attempts.
const LOCK_POLL: Duration = Duration::from_millis(50);

/// How often a write with no precondition starts over after losing a race for the head.
const MAX_ATTEMPTS: usize = 16;

/// How long a write on a store without conditional writes waits for the lock object.
const WRITE_LOCK_WAIT: Duration = Duration::from_secs(30);

/// The largest head or lock object read: a head of [`MAX_SEGMENTS`] segments is a few
/// kilobytes, so a larger object is damaged or hostile and is not fetched.
const MAX_SMALL_OBJECT: u64 = 1 << 20;

/// Returns the body of a head or lock object, refusing one larger than
/// [`MAX_SMALL_OBJECT`] before fetching it (the size a store reports must not size an
/// allocation).
async fn small(r: object_store::GetResult) -> Result<Vec<u8>, object_store::Error> {
    if r.meta.size > MAX_SMALL_OBJECT {
        let why = format!("{} bytes where a head or lock object holds at most {MAX_SMALL_OBJECT}", r.meta.size);
        return Err(object_store::Error::Generic { store: "S3", source: why.into() });
    }
    Ok(r.bytes().await?.to_vec())
}

/// How many head objects [`Storage::list_stats`] fetches at once.
const LIST_STATS_CONCURRENCY: usize = 32;

/// Builds an [`S3Storage`]: the bucket, where below it, how to reach it.
///
/// Settings not given here come from the usual AWS environment variables
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
/// `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, …), read by `object_store`'s
/// `AmazonS3Builder::from_env`.
#[derive(Debug)]
pub struct S3StorageBuilder {
    s3: AmazonS3Builder,
    prefix: String,
    allow_unconditional: bool,
    lock_ttl: Duration,
}

impl S3StorageBuilder {
    /// Starts a storage in `bucket`, configured from the environment.
    pub fn new(bucket: &str) -> S3StorageBuilder {
        S3StorageBuilder {
            s3: AmazonS3Builder::from_env().with_bucket_name(bucket),
            prefix: String::new(),
            allow_unconditional: false,
            lock_ttl: DEFAULT_LOCK_TTL,
        }
    }

    /// Keeps every object below `prefix` in the bucket (default: the bucket's root).
    pub fn prefix(mut self, prefix: &str) -> S3StorageBuilder {
        prefix.clone_into(&mut self.prefix);
        self
    }

    /// Sends requests to `endpoint` (`http://127.0.0.1:9000` for MinIO, R2's account
    /// URL, …) instead of AWS, with path-style requests.
    pub fn endpoint(mut self, endpoint: &str) -> S3StorageBuilder {
        self.s3 = self.s3.with_endpoint(endpoint).with_virtual_hosted_style_request(false);
        self
    }

    /// Sets the region (signatures name it; most other stores accept `us-east-1`).
    pub fn region(mut self, region: &str) -> S3StorageBuilder {
        self.s3 = self.s3.with_region(region);
        self
    }

    /// Allows plain `http://` endpoints (off by default).
    pub fn allow_http(mut self, allow: bool) -> S3StorageBuilder {
        self.s3 = self.s3.with_allow_http(allow);
        self
    }

    /// Sets the access key and secret (else the environment's).
    pub fn credentials(mut self, access_key_id: &str, secret_access_key: &str) -> S3StorageBuilder {
        self.s3 = self.s3.with_access_key_id(access_key_id).with_secret_access_key(secret_access_key);
        self
    }

    /// Retries a failed request at most `max_retries` times within `timeout` (default:
    /// `object_store`'s, 10 times within 3 minutes, with exponential backoff).
    pub fn retries(mut self, max_retries: usize, timeout: Duration) -> S3StorageBuilder {
        let retry = object_store::RetryConfig { max_retries, retry_timeout: timeout, ..Default::default() };
        self.s3 = self.s3.with_retry(retry);
        self
    }

    /// Sets any `object_store` S3 option by name (`region`, `endpoint`, `allow_http`,
    /// `conditional_put`, `skip_signature`, …: the names of `AmazonS3ConfigKey`).
    pub fn option(mut self, name: &str, value: &str) -> Result<S3StorageBuilder, OpenError> {
        let key: AmazonS3ConfigKey =
            name.parse().map_err(|_| OpenError::BadUrl { reason: format!("unknown option `{name}`") })?;
        if key == AmazonS3ConfigKey::Endpoint {
            self.s3 = self.s3.with_virtual_hosted_style_request(false);
        }
        self.s3 = self.s3.with_config(key, value);
        Ok(self)
    }

    /// On a store that ignores conditional writes, writes anyway, each head update under
    /// the file's lock object (see the crate docs); off by default, when such a store
    /// refuses every write with [`S3Error::Unconditional`].
    pub fn allow_unconditional(mut self, allow: bool) -> S3StorageBuilder {
        self.allow_unconditional = allow;
        self
    }

    /// Sets how long a lock object stays valid without renewal (default
    /// [`DEFAULT_LOCK_TTL`]); a holder that dies frees its locks after this long.
    pub fn lock_ttl(mut self, ttl: Duration) -> S3StorageBuilder {
        self.lock_ttl = ttl.max(Duration::from_millis(100));
        self
    }

    /// Builds the storage. Nothing is sent to the store yet.
    pub fn build(self) -> Result<S3Storage, OpenError> {
        let store = self.s3.build().map_err(OpenError::Config)?;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(OpenError::Runtime)?;
        let inner = Inner {
            store,
            rt: Some(rt),
            layout: Layout::new(&self.prefix),
            allow_unconditional: self.allow_unconditional,
            lock_ttl: self.lock_ttl,
            conditional: Mutex::new(None),
            held: Mutex::new(HashSet::new()),
            dirs: LocalDirs::new(),
            times: Mtimes::new(Arc::new(SystemClock)),
            lists_etags: AtomicU8::new(LISTS_UNKNOWN),
            #[cfg(feature = "testing")]
            before_head_put: Mutex::new(None),
            #[cfg(feature = "testing")]
            after_gc_lists_heads: Mutex::new(None),
            #[cfg(feature = "testing")]
            reuse_age: Mutex::new(None),
        };
        Ok(S3Storage { inner: Arc::new(inner) })
    }
}

struct Inner {
    store: AmazonS3,
    /// Drives `store`'s futures; taken out only on drop.
    rt: Option<tokio::runtime::Runtime>,
    layout: Layout,
    allow_unconditional: bool,
    lock_ttl: Duration,
    /// What [`S3Storage::probe_conditional_writes`] found, once it found it.
    conditional: Mutex<Option<bool>>,
    /// The keys whose lock objects this storage (and its clones) holds.
    held: Mutex<HashSet<String>>,
    dirs: LocalDirs,
    times: Mtimes,
    /// Whether the store's listings carry ETags, as the last listing of a head showed
    /// ([`LISTS_UNKNOWN`], [`LISTS_ETAGS`], [`LISTS_NO_ETAGS`]).
    lists_etags: AtomicU8,
    /// Runs once before the next put of a head object, after its read: a write's head
    /// or a rename's tombstone (tests only).
    #[cfg(feature = "testing")]
    before_head_put: Mutex<Option<FailPoint>>,
    /// Runs once after a segment collection lists the heads, before it reads them (tests only).
    #[cfg(feature = "testing")]
    after_gc_lists_heads: Mutex<Option<FailPoint>>,
    /// Replaces [`REFRESH_AFTER`] (tests only).
    #[cfg(feature = "testing")]
    reuse_age: Mutex<Option<Duration>>,
}

/// A fail point's action ([`S3Storage::before_head_put`], [`S3Storage::after_gc_lists_heads`]).
#[cfg(feature = "testing")]
type FailPoint = Box<dyn FnMut() + Send>;

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics inside another runtime; this does not.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Session files in an S3-compatible bucket: one head object per file naming its
/// content-addressed segments, replaced only conditionally. See the crate docs for the
/// layout, the guarantees and the errors.
///
/// Clones share the client, the runtime and the locks held.
#[derive(Clone)]
pub struct S3Storage {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for S3Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Storage")
            .field("store", &self.inner.store.to_string())
            .field("prefix", &self.inner.layout.prefix())
            .finish_non_exhaustive()
    }
}

/// What [`S3Storage::gc_segments`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GcReport {
    /// Heads read.
    pub heads: usize,
    /// Segments listed.
    pub segments: usize,
    /// Segments some head names (kept).
    pub referenced: usize,
    /// Unreferenced segments kept because they are younger than the minimum age.
    pub young: usize,
    /// Unreferenced segments deleted (or, in a dry run, that would be), by object name
    /// ([`Segment::object_name`]).
    pub deleted: Vec<String>,
    /// Their bytes.
    pub deleted_bytes: u64,
}

/// The stat and version of what a write made, where the store named its version.
type Made = Option<(FileStat, String)>;

/// The version ([`Storage::list_versions`]) of a head object whose ETag is `etag`.
fn etag_version(etag: &str) -> String {
    format!("etag:{etag}")
}

/// The version of the head object `m` as a listing gives it: its ETag where listings
/// carry one (`etags`), which changes with every write (the head holds the file's mtime
/// and segment hashes); else its size and time.
fn listed_version(e_tag: Option<&str>, size: u64, mtime_ms: i64) -> String {
    match e_tag {
        Some(tag) => etag_version(tag),
        None => format!("{size}:{mtime_ms}"),
    }
}

/// [`Inner::lists_etags`]: no listing seen yet, listings with ETags, listings without.
const LISTS_UNKNOWN: u8 = 0;
const LISTS_ETAGS: u8 = 1;
const LISTS_NO_ETAGS: u8 = 2;

/// A head as read, with the version that replaces it conditionally.
struct Current {
    head: Head,
    version: UpdateVersion,
}

/// A head object's key as read: the file's head, if there is a file, and the version of
/// whatever object is there (a head, or the empty object a rename leaves, which reads as
/// no file), that a conditional write replaces; `None` when there is no object.
struct Slot {
    head: Option<Head>,
    version: Option<UpdateVersion>,
}

impl Slot {
    /// The file's head with its version, or `None` when there is no file.
    fn current(self) -> Option<Current> {
        match (self.head, self.version) {
            (Some(head), Some(version)) => Some(Current { head, version }),
            _ => None,
        }
    }
}

/// What a write decided after reading the head.
enum Step {
    /// Nothing to write.
    Done,
    /// Replace the head with this one.
    Write(Head),
}

/// What a write does with the head it read ([`S3Storage::transact`]).
type Decide<'a> = dyn FnMut(Option<&Head>, Mode) -> Result<Step, StoreError> + 'a;

/// A directory's key prefix, its files (name, mtime of the head, version) and its
/// directories.
type Children = (String, Vec<(String, i64, String)>, Vec<String>);

/// How head updates are made safe against a concurrent writer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `If-Match` / `If-None-Match` on the head.
    Conditional,
    /// Plain puts under the file's lock object.
    Locked,
}

/// A lock object's content.
struct LockBody {
    token: String,
    expires_ms: i64,
}

impl LockBody {
    fn to_json(&self) -> String {
        format!(
            "{{\"v\":1,\"token\":\"{}\",\"expires\":{},\"pid\":{}}}",
            self.token,
            self.expires_ms,
            std::process::id()
        )
    }

    /// Parses a lock object; one that cannot be read counts as expired.
    fn parse(bytes: &[u8]) -> LockBody {
        let v: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
        LockBody {
            token: v.get("token").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned(),
            expires_ms: v.get("expires").and_then(serde_json::Value::as_i64).unwrap_or(0),
        }
    }
}

impl S3Storage {
    /// Opens the storage an `s3://bucket/prefix?option=value&…` URL names.
    ///
    /// The options are `object_store`'s S3 option names (`endpoint`, `region`,
    /// `allow_http`, `access_key_id`, `secret_access_key`, `conditional_put`, …), plus
    /// this crate's `allow_unconditional=true` and `lock_ttl_ms=N`. Anything not in the URL
    /// comes from the AWS environment variables. Nothing is sent to the store yet.
    pub fn from_url(url: &str) -> Result<S3Storage, OpenError> {
        let parsed = url::Url::parse(url).map_err(|e| OpenError::BadUrl { reason: e.to_string() })?;
        if !matches!(parsed.scheme(), "s3" | "s3a") {
            return Err(OpenError::BadUrl { reason: format!("scheme {}:// is not s3://", parsed.scheme()) });
        }
        let bucket = parsed
            .host_str()
            .filter(|b| !b.is_empty())
            .ok_or_else(|| OpenError::BadUrl { reason: "no bucket".to_owned() })?;
        let prefix = url_decode(parsed.path());
        let mut b = S3StorageBuilder::new(bucket).prefix(&prefix);
        for (k, v) in parsed.query_pairs() {
            b = match k.as_ref() {
                "allow_unconditional" => b.allow_unconditional(parse_bool(&k, &v)?),
                "lock_ttl_ms" => {
                    let ms: u64 = v.parse().map_err(|_| OpenError::BadUrl {
                        reason: format!("lock_ttl_ms={v} is not a number of milliseconds"),
                    })?;
                    b.lock_ttl(Duration::from_millis(ms))
                }
                _ => b.option(&k, &v)?,
            };
        }
        b.build()
    }

    /// Returns a builder for a storage in `bucket` ([`S3StorageBuilder::new`]).
    pub fn builder(bucket: &str) -> S3StorageBuilder {
        S3StorageBuilder::new(bucket)
    }

    /// Returns the prefix every object of this storage is below (empty: the bucket's root).
    pub fn prefix(&self) -> &str {
        self.inner.layout.prefix()
    }

    /// Returns whether the store honours conditional writes: writes a probe object twice
    /// with `If-None-Match: *` and sees whether the second is refused, then deletes it.
    /// The answer is kept; later calls return it without asking again. A store that
    /// ignores them (Garage), or a client told not to send them
    /// (`conditional_put=disabled`), answers `false`.
    pub fn probe_conditional_writes(&self) -> Result<bool, StoreError> {
        if let Some(known) = *guard(&self.inner.conditional) {
            return Ok(known);
        }
        let name = format!("{:016x}", rand::rng().next_u64());
        let probe = self.inner.layout.probe(&name);
        let path = Path::new(probe.as_ref());
        let op = Op::WriteNew;
        let store = &self.inner.store;
        let create = || PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        let answer = self.run(async {
            match store.put_opts(&probe, PutPayload::from_static(b"probe"), create()).await {
                Ok(_) => {}
                Err(object_store::Error::NotImplemented { .. }) => return Ok(false),
                Err(e) => return Err(backend(op, path)(e)),
            }
            let second = store.put_opts(&probe, PutPayload::from_static(b"probe"), create()).await;
            let answer = match second {
                Ok(_) => Ok(false),
                Err(object_store::Error::AlreadyExists { .. }) => Ok(true),
                Err(e) => Err(backend(op, path)(e)),
            };
            let _ = store.delete(&probe).await;
            answer
        })?;
        *guard(&self.inner.conditional) = Some(answer);
        Ok(answer)
    }

    /// Returns the segments of the file at `path`, in order, or `None` when there is no
    /// such file: what a read fetches.
    pub fn segments(&self, path: &Path) -> Result<Option<Vec<Segment>>, StoreError> {
        let op = Op::Stat;
        let k = self.file_key(op, path)?;
        Ok(self.load(op, path, &k)?.map(|c| c.head.segments))
    }

    /// Deletes the segments no head names that are older than [`GC_MIN_AGE`] (an hour):
    /// writes never delete the segments they stop using. With `dry_run` nothing is
    /// deleted; the report says what would be.
    ///
    /// Safe beside writers: the segments are listed first, then every head is read, and
    /// the heads are listed again (and those new or changed read) until a listing shows
    /// none: a rename, which moves a head's segments to another key, writes the new head
    /// before it empties the old one, so a head found empty has its new name in the next
    /// listing. A write names in its head only segments it uploaded, found younger than
    /// half an hour (an older one is copied under a fresh name, which the listing does
    /// not hold) or took from a head (a rename, a truncation), so a segment an hour old at
    /// the listing and named by no head read after it is one no write will name, unless
    /// a writer stalled for more than half an hour between finding its segments and
    /// replacing its head (its head then names a missing segment, which reads report as
    /// [`S3Error::InvalidContent`]). Heads that keep changing through eight listings make
    /// it delete nothing and return [`StoreError::Locked`].
    pub fn gc_segments(&self, dry_run: bool) -> Result<GcReport, StoreError> {
        self.gc_segments_older_than(dry_run, GC_MIN_AGE)
    }

    /// [`S3Storage::gc_segments`] with another minimum age. An age below an hour narrows
    /// the time a writer has between finding its segments and naming them in a head.
    pub fn gc_segments_older_than(&self, dry_run: bool, min_age: Duration) -> Result<GcReport, StoreError> {
        let op = Op::Unlink;
        let heads_dir = self.inner.layout.heads();
        let segments_dir = self.inner.layout.segments();
        let path = Path::new(segments_dir.as_ref());
        let store = &self.inner.store;
        let mut report = GcReport::default();
        // Segments first, heads after: see the safety argument above.
        let segments: Vec<object_store::ObjectMeta> =
            self.run(store.list(Some(&segments_dir)).try_collect()).map_err(backend(op, path))?;
        let listed_at = now_ms();
        // Every head, then the heads again until a listing shows none new or changed: a
        // rename writes its new head before it empties the old one, so a head read empty
        // (renamed away) has its new name in the next listing.
        let mut referenced = BTreeSet::new();
        let mut read: HashMap<ObjectPath, (Option<String>, i64, u64)> = HashMap::new();
        let mut settled = false;
        for _ in 0..GC_HEAD_ROUNDS {
            let heads: Vec<object_store::ObjectMeta> =
                self.run(store.list(Some(&heads_dir)).try_collect()).map_err(backend(op, path))?;
            #[cfg(feature = "testing")]
            {
                let action = guard(&self.inner.after_gc_lists_heads).take();
                if let Some(mut action) = action {
                    action();
                }
            }
            let mut fresh = false;
            for m in heads.iter().filter(|m| m.location.as_ref().ends_with(FILE_MARK)) {
                let mark = (m.e_tag.clone(), m.last_modified.timestamp_millis(), m.size);
                if read.get(&m.location) == Some(&mark) {
                    continue;
                }
                fresh = true;
                let first = read.insert(m.location.clone(), mark).is_none();
                let hp = Path::new(m.location.as_ref());
                let Some(cur) = self.get_head(op, hp, &m.location)? else { continue };
                if first {
                    report.heads += 1;
                }
                referenced.extend(cur.head.segments.iter().map(Segment::object_name));
            }
            if !fresh {
                settled = true;
                break;
            }
        }
        if !settled {
            // Heads kept moving: nothing is deleted rather than something in use.
            return Err(StoreError::Locked { path: path.to_path_buf() });
        }
        let min_age_ms = i64::try_from(min_age.as_millis()).unwrap_or(i64::MAX);
        for m in segments {
            report.segments += 1;
            let Some(name) = m.location.filename().map(str::to_owned) else { continue };
            if referenced.contains(&name) {
                report.referenced += 1;
            } else if listed_at.saturating_sub(m.last_modified.timestamp_millis()) < min_age_ms {
                report.young += 1;
            } else {
                if !dry_run {
                    let lp = Path::new(m.location.as_ref());
                    match self.run(store.delete(&m.location)) {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                        Err(e) => return Err(backend(op, lp)(e)),
                    }
                }
                report.deleted_bytes += m.size;
                report.deleted.push(name);
            }
        }
        Ok(report)
    }

    /// Runs `f` on the storage's runtime: on this thread, or, when this thread is inside
    /// a tokio runtime already (where blocking on another runtime panics), on a thread of
    /// its own while this one waits.
    fn run<F>(&self, f: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        let rt = self.inner.rt.as_ref().expect("the runtime is present until the storage is dropped");
        if tokio::runtime::Handle::try_current().is_err() {
            return rt.block_on(f);
        }
        std::thread::scope(|s| match s.spawn(|| rt.block_on(f)).join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        })
    }

    /// Runs `action` once, between the next write's read of a head and its conditional
    /// replace (a head, or a rename's tombstone): a test makes another writer win the
    /// race there.
    #[cfg(feature = "testing")]
    pub fn before_head_put(&self, action: impl FnMut() + Send + 'static) {
        *guard(&self.inner.before_head_put) = Some(Box::new(action));
    }

    /// Runs `action` once, after the next segment collection lists the heads and before it
    /// reads them: a test renames a file there.
    #[cfg(feature = "testing")]
    pub fn after_gc_lists_heads(&self, action: impl FnMut() + Send + 'static) {
        *guard(&self.inner.after_gc_lists_heads) = Some(Box::new(action));
    }

    /// Makes writes reuse an existing segment only while it is younger than `age`
    /// (half an hour otherwise): a test makes segments old without waiting.
    #[cfg(feature = "testing")]
    pub fn reuse_segments_younger_than(&self, age: Duration) {
        *guard(&self.inner.reuse_age) = Some(age);
    }

    /// How young an existing segment must be for a write to reuse it.
    fn reuse_age(&self) -> Duration {
        #[cfg(feature = "testing")]
        if let Some(age) = *guard(&self.inner.reuse_age) {
            return age;
        }
        REFRESH_AFTER
    }

    /// Returns the key of the file `path`, refusing one whose head object's key would be
    /// longer than S3 allows ([`MAX_OBJECT_KEY_BYTES`]).
    fn file_key(&self, op: Op, path: &Path) -> Result<String, StoreError> {
        let k = S3Error::file_key(op, path)?;
        let object = self.inner.layout.head(&k);
        let len = object.as_ref().len();
        if len > MAX_OBJECT_KEY_BYTES {
            let reason = format!("its object key would be {len} bytes, more than S3's {MAX_OBJECT_KEY_BYTES}");
            return Err(S3Error::BadPath { reason }.at(op, path));
        }
        Ok(k)
    }

    /// Returns how head updates are made safe, probing the store on the first write.
    fn mode(&self, op: Op, path: &Path) -> Result<Mode, StoreError> {
        if self.probe_conditional_writes()? {
            Ok(Mode::Conditional)
        } else if self.inner.allow_unconditional {
            Ok(Mode::Locked)
        } else {
            Err(S3Error::Unconditional.at(op, path))
        }
    }

    /// Reads the head object at `at`; `None` when there is no file (no object, or an
    /// empty one).
    fn get_head(&self, op: Op, path: &Path, at: &ObjectPath) -> Result<Option<Current>, StoreError> {
        Ok(self.get_slot(op, path, at)?.current())
    }

    /// Reads the head object at `at`, with the version of whatever object is there.
    fn get_slot(&self, op: Op, path: &Path, at: &ObjectPath) -> Result<Slot, StoreError> {
        let store = &self.inner.store;
        let got = self.run(async {
            let r = store.get_opts(at, GetOptions::default()).await?;
            let version = UpdateVersion { e_tag: r.meta.e_tag.clone(), version: r.meta.version.clone() };
            Ok::<_, object_store::Error>((small(r).await?, version))
        });
        let (bytes, version) = match got {
            Ok(v) => v,
            Err(object_store::Error::NotFound { .. }) => return Ok(Slot { head: None, version: None }),
            Err(e) => return Err(backend(op, path)(e)),
        };
        if bytes.is_empty() {
            // A tombstone: the file was renamed away (or deleted conditionally).
            return Ok(Slot { head: None, version: Some(version) });
        }
        let head = Head::parse(&bytes)
            .map_err(|reason| S3Error::InvalidContent { key: at.to_string(), reason }.at(op, path))?;
        Ok(Slot { head: Some(head), version: Some(version) })
    }

    /// Reads the head of the file `k`.
    fn load(&self, op: Op, path: &Path, k: &str) -> Result<Option<Current>, StoreError> {
        self.get_head(op, path, &self.inner.layout.head(k))
    }

    /// Reads the head object of the file `k` with its version.
    fn load_slot(&self, op: Op, path: &Path, k: &str) -> Result<Slot, StoreError> {
        self.get_slot(op, path, &self.inner.layout.head(k))
    }

    /// Reads bytes `start..end` of the file whose head is `head`, fetching the segments
    /// (or the parts of them) that hold them concurrently; a whole segment is checked
    /// against its length and hash.
    fn read_range(&self, op: Op, path: &Path, head: &Head, start: u64, end: u64) -> Result<Vec<u8>, StoreError> {
        let end = end.min(head.size);
        if start >= end {
            return Ok(Vec::new());
        }
        let mut wanted = Vec::new();
        let mut at = 0u64;
        for seg in &head.segments {
            let (lo, hi) = (start.max(at), end.min(at + seg.len));
            if lo < hi {
                wanted.push((seg, lo - at, hi - at));
            }
            at += seg.len;
        }
        let store = &self.inner.store;
        let layout = &self.inner.layout;
        // A segment up to `WHOLE_SEGMENT_READ` is fetched whole and checked against its
        // hash even when a part is wanted; a larger one is fetched as the range wanted,
        // checked against its length only unless wanted whole.
        let pieces = self.run(try_join_all(wanted.iter().map(|(seg, lo, hi)| {
            let loc = layout.segment(&seg.object_name());
            let range = if seg.len <= WHOLE_SEGMENT_READ { 0..seg.len } else { *lo..*hi };
            // A range even for a whole segment: the head's length bounds what is fetched.
            async move { store.get_range(&loc, range.clone()).await.map(|b| (loc, range, b)) }
        })));
        let pieces = pieces.map_err(|e| match e {
            object_store::Error::NotFound { path: key, .. } => {
                S3Error::InvalidContent { key, reason: "a segment the head names is missing".to_owned() }.at(op, path)
            }
            e => backend(op, path)(e),
        })?;
        // The head's sizes are not trusted for an allocation: the bytes fetched are.
        let mut out = Vec::with_capacity(usize::try_from(end - start).unwrap_or(0).min(64 << 20));
        for ((seg, lo, hi), (loc, range, bytes)) in wanted.iter().zip(pieces) {
            let invalid = |reason: String| S3Error::InvalidContent { key: loc.to_string(), reason }.at(op, path);
            if bytes.len() as u64 != range.end - range.start {
                return Err(invalid(format!("{} bytes where the head says {}", bytes.len(), range.end - range.start)));
            }
            if range.start == 0 && range.end == seg.len && hex(&Sha256::digest(&bytes)) != seg.sha256 {
                return Err(invalid("its SHA-256 differs from its name".to_owned()));
            }
            // Both bounds lie within the bytes fetched, whose length was checked above.
            let from = usize::try_from(lo - range.start).unwrap_or(usize::MAX);
            let to = usize::try_from(hi - range.start).unwrap_or(usize::MAX);
            out.extend_from_slice(
                bytes.get(from..to).ok_or_else(|| invalid("a range outside the segment".to_owned()))?,
            );
        }
        Ok(out)
    }

    /// Uploads `bytes` as a segment and returns its record. An existing segment of the
    /// same bytes is reused while it is younger than [`REFRESH_AFTER`]; an older one is
    /// not counted on (a collection that listed it may be about to delete it): the bytes
    /// go to a copy under a fresh name instead, which no earlier listing holds.
    fn put_segment(&self, op: Op, path: &Path, bytes: &[u8], mode: Mode) -> Result<Segment, StoreError> {
        let len = bytes.len() as u64;
        if len > MAX_SEGMENT_BYTES {
            return Err(S3Error::TooLarge { size: len, limit: MAX_SEGMENT_BYTES }.at(op, path));
        }
        let mut seg = Segment::of(bytes);
        let loc = self.inner.layout.segment(&seg.sha256);
        let store = &self.inner.store;
        let payload = || PutPayload::from(bytes.to_vec());
        let create = || PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        let refresh_ms = i64::try_from(self.reuse_age().as_millis()).unwrap_or(i64::MAX);
        let copy = self
            .run(async {
                if mode == Mode::Locked {
                    // No conditional create: look first; two writers of the same bytes
                    // write the same object.
                    match store.head(&loc).await {
                        Err(object_store::Error::NotFound { .. }) => {
                            store.put(&loc, payload()).await?;
                            return Ok(None);
                        }
                        Err(e) => return Err(e),
                        Ok(meta) => {
                            if now_ms().saturating_sub(meta.last_modified.timestamp_millis()) < refresh_ms {
                                return Ok(None);
                            }
                        }
                    }
                } else {
                    match store.put_opts(&loc, payload(), create()).await {
                        Ok(_) => return Ok(None),
                        Err(object_store::Error::AlreadyExists { .. }) => {
                            let meta = store.head(&loc).await?;
                            if now_ms().saturating_sub(meta.last_modified.timestamp_millis()) < refresh_ms {
                                return Ok(None);
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
                let copy = format!("{:016x}", rand::rng().next_u64());
                let copy_loc = self.inner.layout.segment(&format!("{}.{copy}", seg.sha256));
                let opts = if mode == Mode::Locked { PutOptions::default() } else { create() };
                store.put_opts(&copy_loc, payload(), opts).await?;
                Ok(Some(copy))
            })
            .map_err(backend(op, path))?;
        seg.copy = copy;
        Ok(seg)
    }

    /// Replaces the head of `k` by `head`, conditionally on `prev` (the version of the
    /// object read, or `None` for a key that must hold no object); `false` when another
    /// writer got there first.
    fn put_head(
        &self,
        op: Op,
        path: &Path,
        k: &str,
        head: &Head,
        prev: Option<&UpdateVersion>,
        mode: Mode,
    ) -> Result<Option<PutResult>, StoreError> {
        self.put_head_object(op, path, k, PutPayload::from(head.to_json()), prev, mode)
    }

    /// Replaces the head object of `k` by an empty one, a tombstone that reads as no
    /// file, conditionally on `prev`; `false` when another writer changed it first.
    fn put_tombstone(
        &self,
        op: Op,
        path: &Path,
        k: &str,
        prev: &UpdateVersion,
        mode: Mode,
    ) -> Result<bool, StoreError> {
        Ok(self.put_head_object(op, path, k, PutPayload::new(), Some(prev), mode)?.is_some())
    }

    fn put_head_object(
        &self,
        op: Op,
        path: &Path,
        k: &str,
        body: PutPayload,
        prev: Option<&UpdateVersion>,
        mode: Mode,
    ) -> Result<Option<PutResult>, StoreError> {
        #[cfg(feature = "testing")]
        {
            // Taken out first: the action may arm the next one.
            let action = guard(&self.inner.before_head_put).take();
            if let Some(mut action) = action {
                action();
            }
        }
        let loc = self.inner.layout.head(k);
        let put_mode = match (mode, prev) {
            (Mode::Locked, _) => PutMode::Overwrite,
            (Mode::Conditional, Some(v)) => PutMode::Update(v.clone()),
            (Mode::Conditional, None) => PutMode::Create,
        };
        let opts = PutOptions { mode: put_mode, ..PutOptions::default() };
        match self.run(self.inner.store.put_opts(&loc, body, opts)) {
            Ok(put) => Ok(Some(put)),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => Ok(None),
            Err(e) => Err(backend(op, path)(e)),
        }
    }

    /// Reads the head of `k`, lets `decide` turn it into a new head, and replaces it
    /// conditionally. A lost race starts over when `retry` (a write without a
    /// precondition), else is a [`StoreError::Conflict`] reporting the size found.
    /// Returns the stat and version (as [`Storage::list_versions`] gives it) of the head
    /// this call wrote, where the store named it; `None` when nothing was written.
    fn transact(&self, op: Op, path: &Path, k: &str, retry: bool, decide: &mut Decide<'_>) -> Result<Made, StoreError> {
        let mode = self.mode(op, path)?;
        let _guard = match mode {
            Mode::Locked => self.write_lock(path, k)?,
            Mode::Conditional => None,
        };
        for _ in 0..MAX_ATTEMPTS {
            let cur = self.load_slot(op, path, k)?;
            let head = match decide(cur.head.as_ref(), mode)? {
                Step::Done => return Ok(None),
                Step::Write(head) => head,
            };
            if let Some(put) = self.put_head(op, path, k, &head, cur.version.as_ref(), mode)? {
                return Ok(Self::made(&head, put.e_tag, self.inner.lists_etags.load(Ordering::Relaxed)));
            }
            // Refused: another writer won, or this very write landed and its retry (after
            // a lost response) was refused. A head equal to ours (its mtime is this
            // storage's, strictly increasing) is ours: done, and not to be written again.
            let now = self.load(op, path, k)?;
            if let Some(now) = now.as_ref().filter(|c| c.head == head) {
                let lists = self.inner.lists_etags.load(Ordering::Relaxed);
                return Ok(Self::made(&head, now.version.e_tag.clone(), lists));
            }
            if !retry {
                let found = now.map(|c| c.head.size);
                let expected = cur.head.map(|h| h.size);
                return Err(StoreError::Conflict { path: path.to_path_buf(), expected, found });
            }
        }
        // Other writers won every attempt: the file is as busy as a locked one.
        Err(StoreError::Locked { path: path.to_path_buf() })
    }

    /// Returns the stat and listed version of the head `head` this storage just wrote,
    /// whose object has the ETag `etag`: where the store's listings carry ETags (S3's
    /// API says they do), that ETag is the version a listing gives. `None` where the
    /// store named no ETag, before a listing showed which form its listings give, and
    /// where they give a size and a time instead (s3s-fs): a `PUT` does not answer with
    /// the time a listing shows, nor a `HEAD` at its precision.
    fn made(head: &Head, etag: Option<String>, lists_etags: u8) -> Made {
        let etag = etag.filter(|_| lists_etags == LISTS_ETAGS)?;
        Some((FileStat::new(head.size, head.mtime, true), etag_version(&etag)))
    }

    /// Takes the lock object of `k` for one head update on a store without conditional
    /// writes, unless this storage holds it already (the caller's [`Storage::lock`]).
    fn write_lock(&self, path: &Path, k: &str) -> Result<Option<SessionLock>, StoreError> {
        if guard(&self.inner.held).contains(k) {
            return Ok(None);
        }
        self.lock(path, LockWait::Timeout(WRITE_LOCK_WAIT)).map(Some)
    }

    /// Returns the new head of a file that was `cur` and gets `bytes` added, uploading
    /// what it needs: one segment for `bytes`, or, past [`MAX_SEGMENTS`], one for the
    /// whole file.
    fn appended(&self, op: Op, path: &Path, cur: Option<&Head>, bytes: &[u8], mode: Mode) -> Result<Head, StoreError> {
        let mtime = self.inner.times.next();
        let Some(cur) = cur else {
            let segments = if bytes.is_empty() { Vec::new() } else { vec![self.put_segment(op, path, bytes, mode)?] };
            return Ok(Head { size: bytes.len() as u64, mtime, segments });
        };
        let size = cur.size + bytes.len() as u64;
        if bytes.is_empty() {
            return Ok(Head { size, mtime, segments: cur.segments.clone() });
        }
        if cur.segments.len() < MAX_SEGMENTS {
            let mut segments = cur.segments.clone();
            segments.push(self.put_segment(op, path, bytes, mode)?);
            return Ok(Head { size, mtime, segments });
        }
        if size > MAX_SEGMENT_BYTES {
            return Err(S3Error::TooLarge { size, limit: MAX_SEGMENT_BYTES }.at(op, path));
        }
        let mut whole = self.read_range(op, path, cur, 0, cur.size)?;
        whole.extend_from_slice(bytes);
        Ok(Head { size, mtime, segments: vec![self.put_segment(op, path, &whole, mode)?] })
    }

    /// Appends `bytes` if the file is as `expected` says ([`ExpectedSize::Any`]: always).
    fn append_checked(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<Made, StoreError> {
        let op = Op::Append;
        let k = self.file_key(op, path)?;
        let retry = expected == ExpectedSize::Any;
        self.transact(op, path, &k, retry, &mut |cur, mode| {
            expected.check(path, cur.map(|h| h.size))?;
            if cur.is_some() && bytes.is_empty() {
                return Ok(Step::Done);
            }
            Ok(Step::Write(self.appended(op, path, cur, bytes, mode)?))
        })
    }

    /// Reads the whole file and its stat.
    fn read_with_stat(&self, path: &Path) -> Result<(FileStat, Vec<u8>), StoreError> {
        let op = Op::Read;
        let k = self.file_key(op, path)?;
        let cur = self.load(op, path, &k)?.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let bytes = self.read_range(op, path, &cur.head, 0, cur.head.size)?;
        Ok((FileStat::new(cur.head.size, cur.head.mtime, true), bytes))
    }

    /// Reads the head and tail windows and the stat, fetching only the segments they need.
    fn slices_with_stat(
        &self,
        path: &Path,
        prefix: u64,
        suffix: u64,
    ) -> Result<(FileStat, Vec<u8>, Vec<u8>), StoreError> {
        let op = Op::Read;
        let k = self.file_key(op, path)?;
        let cur = self.load(op, path, &k)?.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
        let h = &cur.head;
        let head_len = prefix.min(h.size);
        let head_bytes = self.read_range(op, path, h, 0, head_len)?;
        // The windows of `session_store::slice_windows`: a file the head window covers
        // whole has its tail cut from that window.
        let tail_bytes = if suffix == 0 {
            Vec::new()
        } else if h.size <= head_len {
            let from = head_bytes.len().saturating_sub(usize::try_from(suffix).unwrap_or(usize::MAX));
            head_bytes[from..].to_vec()
        } else {
            let start = h.size.saturating_sub(suffix);
            if start >= head_len {
                self.read_range(op, path, h, start, h.size)?
            } else {
                let mut t = head_bytes[usize::try_from(start).unwrap_or(0)..].to_vec();
                t.extend(self.read_range(op, path, h, head_len, h.size)?);
                t
            }
        };
        Ok((FileStat::new(h.size, h.mtime, true), head_bytes, tail_bytes))
    }

    /// Replaces the whole file, checking `expected`; [`Op::WriteNew`] fails with
    /// [`StoreError::AlreadyExists`] on an existing file.
    fn replace(&self, op: Op, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        self.replace_versioned(op, path, bytes, expected).map(|_| ())
    }

    /// [`S3Storage::replace`], returning what it made (see [`S3Storage::transact`]).
    fn replace_versioned(&self, op: Op, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<Made, StoreError> {
        let k = self.file_key(op, path)?;
        let len = bytes.len() as u64;
        if len > MAX_SEGMENT_BYTES {
            return Err(S3Error::TooLarge { size: len, limit: MAX_SEGMENT_BYTES }.at(op, path));
        }
        let retry = expected == ExpectedSize::Any;
        let got = self.transact(op, path, &k, retry, &mut |cur, mode| {
            if op == Op::WriteNew && cur.is_some() {
                return Err(StoreError::AlreadyExists { path: path.to_path_buf() });
            }
            expected.check(path, cur.map(|h| h.size))?;
            Ok(Step::Write(self.appended(op, path, None, bytes, mode)?))
        });
        match got {
            Err(StoreError::Conflict { .. }) if op == Op::WriteNew => {
                Err(StoreError::AlreadyExists { path: path.to_path_buf() })
            }
            other => other,
        }
    }

    /// Returns the keys of every head below the directory prefix `dir` (recursively).
    fn heads_below(&self, op: Op, path: &Path, dir: &str) -> Result<Vec<ObjectPath>, StoreError> {
        let loc = self.inner.layout.head_dir(dir);
        if dir.trim_matches('/').is_empty() {
            return Err(S3Error::BadPath { reason: "the root is no artifacts directory".to_owned() }.at(op, path));
        }
        self.run(self.inner.store.list(Some(&loc)).map_ok(|m| m.location).try_collect()).map_err(backend(op, path))
    }

    /// Lists the direct children of the directory `dir`: files (heads, not tombstones)
    /// and directories.
    fn children(&self, op: Op, dir: &Path) -> Result<Children, StoreError> {
        let prefix = S3Error::dir_prefix(op, dir)?;
        let loc = self.inner.layout.head_dir(&prefix);
        let listed = self.run(self.inner.store.list_with_delimiter(Some(&loc))).map_err(backend(op, dir))?;
        let files = listed
            .objects
            .iter()
            .filter(|m| m.size > 0)
            .filter_map(|m| {
                let name = decode_file(m.location.filename()?)?;
                // The head's ETag changes with every write (the head holds the file's
                // mtime and segment hashes); without one, its size and time.
                Some((
                    name,
                    m.last_modified.timestamp_millis(),
                    listed_version(m.e_tag.as_deref(), m.size, m.last_modified.timestamp_millis()),
                ))
            })
            .collect();
        if let Some(m) = listed.objects.iter().find(|m| m.size > 0) {
            let seen = if m.e_tag.is_some() { LISTS_ETAGS } else { LISTS_NO_ETAGS };
            self.inner.lists_etags.store(seen, Ordering::Relaxed);
        }
        let dirs = listed.common_prefixes.iter().filter_map(|p| decode_dir(p.filename()?)).collect();
        Ok((prefix, files, dirs))
    }

    /// Deletes the head objects `heads` (missing ones are fine).
    fn delete_heads(&self, op: Op, path: &Path, heads: Vec<ObjectPath>) -> Result<(), StoreError> {
        let store = &self.inner.store;
        self.run(try_join_all(heads.iter().map(|h| async move {
            match store.delete(h).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        })))
        .map(drop)
        .map_err(backend(op, path))
    }

    /// Tries once to take the lock object of `k`: `Some(token)` when taken.
    fn try_lock(&self, op: Op, path: &Path, k: &str, mode: Mode) -> Result<Option<(String, String)>, StoreError> {
        let loc = self.inner.layout.lock(k);
        let store = &self.inner.store;
        let token = format!("{:016x}{:016x}", rand::rng().next_u64(), rand::rng().next_u64());
        let body = || {
            let expires_ms = now_ms() + i64::try_from(self.inner.lock_ttl.as_millis()).unwrap_or(i64::MAX / 2);
            PutPayload::from(LockBody { token: token.clone(), expires_ms }.to_json())
        };
        let put = |m: PutMode| PutOptions { mode: m, ..PutOptions::default() };
        let got = self.run(async {
            let first = if mode == Mode::Conditional { PutMode::Create } else { PutMode::Overwrite };
            if mode == Mode::Locked {
                // No conditional create: look first, write, and read back (best effort).
                match store.get(&loc).await {
                    Ok(r) => {
                        if LockBody::parse(&small(r).await?).expires_ms > now_ms() {
                            return Ok(None);
                        }
                    }
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            match store.put_opts(&loc, body(), put(first)).await {
                Ok(r) => {
                    if mode == Mode::Locked {
                        let back = LockBody::parse(&small(store.get(&loc).await?).await?);
                        if back.token != token {
                            return Ok(None);
                        }
                    }
                    return Ok(Some(r.e_tag.unwrap_or_default()));
                }
                Err(object_store::Error::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
            // Held: break it when it expired, replacing exactly the expired version.
            let r = match store.get(&loc).await {
                Ok(r) => r,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let version = UpdateVersion { e_tag: r.meta.e_tag.clone(), version: r.meta.version.clone() };
            let held = LockBody::parse(&small(r).await?);
            if held.expires_ms > now_ms() {
                return Ok(None);
            }
            match store.put_opts(&loc, body(), put(PutMode::Update(version))).await {
                Ok(r) => Ok(Some(r.e_tag.unwrap_or_default())),
                Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        Ok(got.map_err(backend(op, path))?.map(|etag| (token.clone(), etag)))
    }

    /// Renews the lock object of `k` while `token` holds it; `false` once it is lost.
    fn renew_lock(&self, k: &str, token: &str, etag: &mut String, mode: Mode) -> bool {
        let loc = self.inner.layout.lock(k);
        let store = &self.inner.store;
        let expires_ms = now_ms() + i64::try_from(self.inner.lock_ttl.as_millis()).unwrap_or(i64::MAX / 2);
        let body = PutPayload::from(LockBody { token: token.to_owned(), expires_ms }.to_json());
        let put_mode = match mode {
            Mode::Conditional => PutMode::Update(UpdateVersion { e_tag: Some(etag.clone()), version: None }),
            Mode::Locked => PutMode::Overwrite,
        };
        match self.run(store.put_opts(&loc, body, PutOptions { mode: put_mode, ..PutOptions::default() })) {
            Ok(r) => {
                *etag = r.e_tag.unwrap_or_default();
                true
            }
            Err(_) => false,
        }
    }

    /// Releases the lock object of `k` that `token` took: replaces it by an expired one,
    /// on the condition that it is still the object last written (`etag`), so that a lock
    /// another taker holds (this one expired) is left alone. The expired object stays;
    /// the next taker replaces it as it replaces any expired lock.
    fn release_lock(
        &self,
        op: Op,
        path: &Path,
        k: &str,
        token: &str,
        etag: &str,
        mode: Mode,
    ) -> Result<(), StoreError> {
        let loc = self.inner.layout.lock(k);
        let store = &self.inner.store;
        let released = || PutPayload::from(LockBody { token: token.to_owned(), expires_ms: 0 }.to_json());
        self.run(async {
            let put_mode = match mode {
                Mode::Conditional => PutMode::Update(UpdateVersion { e_tag: Some(etag.to_owned()), version: None }),
                Mode::Locked => {
                    // No conditional writes: look, then write (best effort).
                    let r = match store.get(&loc).await {
                        Ok(r) => r,
                        Err(object_store::Error::NotFound { .. }) => return Ok(()),
                        Err(e) => return Err(e),
                    };
                    if LockBody::parse(&small(r).await?).token != token {
                        return Ok(());
                    }
                    PutMode::Overwrite
                }
            };
            let put = |m: PutMode| PutOptions { mode: m, ..PutOptions::default() };
            match store.put_opts(&loc, released(), put(put_mode)).await {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(object_store::Error::Precondition { .. }) => {
                    // Another write since the last one this holder knows of: its own
                    // renewal whose reply was lost, or another taker's. Ours only if it
                    // still holds our token, and then replaced on the version seen now.
                    let r = match store.get(&loc).await {
                        Ok(r) => r,
                        Err(object_store::Error::NotFound { .. }) => return Ok(()),
                        Err(e) => return Err(e),
                    };
                    let now = UpdateVersion { e_tag: r.meta.e_tag.clone(), version: r.meta.version.clone() };
                    if LockBody::parse(&small(r).await?).token != token {
                        return Ok(());
                    }
                    match store.put_opts(&loc, released(), put(PutMode::Update(now))).await {
                        Ok(_)
                        | Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => {
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            }
        })
        .map_err(backend(op, path))
    }
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Returns the time now in milliseconds since the epoch.
fn now_ms() -> i64 {
    use session_store::clock::Clock;
    SystemClock.now_ms()
}

fn parse_bool(k: &str, v: &str) -> Result<bool, OpenError> {
    match v {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        _ => Err(OpenError::BadUrl { reason: format!("{k}={v} is not true or false") }),
    }
}

/// Decodes the `%XX` escapes of a URL's path.
fn url_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

impl Storage for S3Storage {
    fn exists(&self, path: &Path) -> Result<bool, StoreError> {
        Ok(self.stat(path)?.is_some())
    }

    fn read(&self, path: &Path) -> Result<Vec<u8>, StoreError> {
        Ok(self.read_with_stat(path)?.1)
    }

    fn read_into(&self, path: &Path, buf: &mut Vec<u8>) -> Result<(FileStat, usize), StoreError> {
        Ok(keyed::read_into_buffer(self.read_with_stat(path)?, buf))
    }

    fn read_slices(&self, path: &Path, prefix: u64, suffix: u64) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
        let (_, head, tail) = self.slices_with_stat(path, prefix, suffix)?;
        Ok((head, tail))
    }

    fn read_slices_into(
        &self,
        path: &Path,
        prefix: u64,
        suffix: u64,
        head: &mut Vec<u8>,
        tail: &mut Vec<u8>,
    ) -> Result<(FileStat, usize, usize), StoreError> {
        Ok(keyed::slices_into_buffers(self.slices_with_stat(path, prefix, suffix)?, head, tail))
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        self.replace(Op::Write, path, bytes, ExpectedSize::Any)
    }

    fn write_new(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        self.replace(Op::WriteNew, path, bytes, ExpectedSize::Missing)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        self.replace(Op::Write, path, bytes, expected)
    }

    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let op = Op::EnsureDir;
        let k = S3Error::key(op, dir)?;
        if !k.trim_matches('/').is_empty() && self.load(op, dir, &k)?.is_some() {
            let err = std::io::Error::new(std::io::ErrorKind::AlreadyExists, "a file is in the way");
            return Err(StoreError::io_raw(op, dir, err));
        }
        self.inner.dirs.remember(k, self.inner.times.next());
        Ok(())
    }

    fn stat(&self, path: &Path) -> Result<Option<FileStat>, StoreError> {
        let op = Op::Stat;
        let k = S3Error::key(op, path)?;
        // A store on a file system (s3s-fs) fails a read of a key that is a prefix of
        // other keys with a server error: when the listing shows a directory there, it is one.
        let file = if k.trim_matches('/').is_empty() { Ok(None) } else { self.load(op, path, &k) };
        let failed = match file {
            Ok(Some(cur)) => return Ok(Some(FileStat::new(cur.head.size, cur.head.mtime, true))),
            Ok(None) => None,
            Err(e @ StoreError::Io { .. }) if matches!(S3Error::find(&e), Some(S3Error::Backend(_))) => Some(e),
            Err(e) => return Err(e),
        };
        let (prefix, files, dirs) = self.children(op, path)?;
        if let Some(e) = failed
            && files.is_empty()
            && dirs.is_empty()
        {
            return Err(e);
        }
        if !files.is_empty() || !dirs.is_empty() {
            let now = self.inner.times.now();
            let newest = files.iter().map(|(_, m, _)| *m).max().unwrap_or(now);
            return Ok(Some(FileStat::new(0, newest, false)));
        }
        Ok(self.inner.dirs.mtime(&k, &prefix).map(|mtime_ms| FileStat::new(0, mtime_ms, false)))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>, StoreError> {
        let (_, files, _) = self.children(Op::List, dir)?;
        let mut names: Vec<String> = files.into_iter().map(|(n, _, _)| n).filter(|n| !n.starts_with('.')).collect();
        names.sort();
        Ok(names)
    }

    /// One listing of the folder's heads, then the heads themselves fetched
    /// 32 at a time: a listing gives the size of a head object,
    /// not of the file it describes. A head gone since the listing is left out.
    fn list_stats(&self, dir: &Path) -> Result<Vec<(String, FileStat)>, StoreError> {
        let op = Op::List;
        let (prefix, files, _) = self.children(op, dir)?;
        let mut names: Vec<String> = files.into_iter().map(|(n, _, _)| n).filter(|n| !n.starts_with('.')).collect();
        names.sort();
        let store = &self.inner.store;
        let layout = &self.inner.layout;
        let fetches = names.into_iter().map(|name| {
            let at = layout.head(&format!("{prefix}{name}"));
            async move {
                match store.get(&at).await {
                    Ok(r) => Ok(Some((name, at, small(r).await?))),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        });
        let got: Vec<_> = self
            .run(futures_util::stream::iter(fetches).buffered(LIST_STATS_CONCURRENCY).try_collect::<Vec<_>>())
            .map_err(backend(op, dir))?;
        let mut out = Vec::with_capacity(got.len());
        for (name, at, bytes) in got.into_iter().flatten() {
            if bytes.is_empty() {
                continue; // renamed away since the listing
            }
            let head = Head::parse(&bytes)
                .map_err(|reason| S3Error::InvalidContent { key: at.to_string(), reason }.at(op, &dir.join(&name)))?;
            out.push((name, FileStat::new(head.size, head.mtime, true)));
        }
        Ok(out)
    }

    /// One listing of the folder's heads (as every listing here): a file's version is
    /// its head object's ETag, else the head's size and `Last-Modified` where the store
    /// gives no ETag.
    fn list_versions(&self, dir: &Path) -> Result<Vec<(String, String)>, StoreError> {
        let (_, files, _) = self.children(Op::List, dir)?;
        let mut out: Vec<(String, String)> =
            files.into_iter().filter(|(n, _, _)| !n.starts_with('.')).map(|(n, _, v)| (n, v)).collect();
        out.sort();
        Ok(out)
    }

    /// The version as the folder's listing gives it (stores differ in what a listing
    /// carries: an ETag, or only a size and a time, which a read does not give alike),
    /// then the stat from the head. The listing comes first, so a write in between makes
    /// the version older than the stat, never newer. A dot-file, which listings leave
    /// out, has none.
    fn stat_version(&self, path: &Path) -> Result<Option<(FileStat, String)>, StoreError> {
        let op = Op::Stat;
        let k = self.file_key(op, path)?;
        let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
            return Ok(None);
        };
        let Some(version) = self.list_versions(parent)?.into_iter().find(|(n, _)| n == name).map(|(_, v)| v) else {
            return Ok(None);
        };
        Ok(self.load(op, path, &k)?.map(|cur| (FileStat::new(cur.head.size, cur.head.mtime, true), version)))
    }

    fn read_dir(&self, dir: &Path) -> Result<Vec<DirEntry>, StoreError> {
        let (prefix, files, dirs) = self.children(Op::List, dir)?;
        let keys = files
            .into_iter()
            .map(|(n, _, _)| format!("{prefix}{n}"))
            .chain(dirs.into_iter().map(|d| format!("{prefix}{d}/")));
        Ok(child_entries(&prefix, keys, self.inner.dirs.under(&prefix)))
    }

    fn remove_empty_dir(&self, dir: &Path) -> Result<(), StoreError> {
        let k = S3Error::key(Op::RemoveDir, dir)?;
        self.inner.dirs.forget_if_empty(&k);
        Ok(())
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        self.append_checked(path, bytes, ExpectedSize::Any).map(|_| ())
    }

    fn append_expected(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<(), StoreError> {
        self.append_checked(path, bytes, expected).map(|_| ())
    }

    fn append_expected_versioned(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<Made, StoreError> {
        self.append_checked(path, bytes, expected)
    }

    fn write_atomic_versioned(&self, path: &Path, bytes: &[u8], expected: ExpectedSize) -> Result<Made, StoreError> {
        self.replace_versioned(Op::Write, path, bytes, expected)
    }

    /// Replaces only the segments that hold the first `bytes.len()` bytes, by one segment
    /// (a title slot rename of a large session uploads the start, not the session).
    fn overwrite_prefix(
        &self,
        path: &Path,
        bytes: &[u8],
        expected: ExpectedSize,
        durability: Durability,
    ) -> Result<(), StoreError> {
        let _ = durability; // every replace is one acknowledged PUT
        let op = Op::Overwrite;
        let k = self.file_key(op, path)?;
        let need = bytes.len() as u64;
        self.transact(op, path, &k, expected == ExpectedSize::Any, &mut |cur, mode| {
            expected.check(path, cur.map(|h| h.size))?;
            let cur = cur.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
            if cur.size < need {
                return Err(StoreError::Conflict {
                    path: path.to_path_buf(),
                    expected: Some(need),
                    found: Some(cur.size),
                });
            }
            // The first segments up to the one holding byte `need - 1` become one.
            let (mut end, mut taken) = (0u64, 0usize);
            while end < need {
                // A parsed head's segments add up to its size, which is at least `need`.
                let Some(seg) = cur.segments.get(taken) else { break };
                end += seg.len;
                taken += 1;
            }
            let mut segments = Vec::with_capacity(cur.segments.len());
            if taken > 0 {
                let mut start = self.read_range(op, path, cur, 0, end)?;
                start[..bytes.len()].copy_from_slice(bytes);
                segments.push(self.put_segment(op, path, &start, mode)?);
            }
            segments.extend(cur.segments[taken..].iter().cloned());
            Ok(Step::Write(Head { size: cur.size, mtime: self.inner.times.next(), segments }))
        })
        .map(|_| ())
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<(), StoreError> {
        let op = Op::Truncate;
        let k = self.file_key(op, path)?;
        self.transact(op, path, &k, true, &mut |cur, mode| {
            let cur = cur.ok_or_else(|| StoreError::NotFound { path: path.to_path_buf() })?;
            let mtime = self.inner.times.next();
            if len >= cur.size {
                if len - cur.size > MAX_SEGMENT_BYTES {
                    return Err(S3Error::TooLarge { size: len - cur.size, limit: MAX_SEGMENT_BYTES }.at(op, path));
                }
                let zeros = vec![0u8; usize::try_from(len - cur.size).unwrap_or(usize::MAX)];
                let mut head = self.appended(op, path, Some(cur), &zeros, mode)?;
                head.mtime = mtime;
                return Ok(Step::Write(head));
            }
            // Whole segments below `len` stay; the one it cuts becomes a new segment.
            let mut segments = Vec::new();
            let mut at = 0u64;
            for seg in &cur.segments {
                if at + seg.len <= len {
                    segments.push(seg.clone());
                    at += seg.len;
                } else {
                    break;
                }
            }
            if at < len {
                let rest = self.read_range(op, path, cur, at, len)?;
                segments.push(self.put_segment(op, path, &rest, mode)?);
            }
            Ok(Step::Write(Head { size: len, mtime, segments }))
        })
        .map(|_| ())
    }

    /// Writes the head at `to`, then replaces the head at `from` by a tombstone on the
    /// condition that it is still the head read: an append to `from` in between makes the
    /// rename copy `from` again, so no write to either name is lost.
    fn rename(&self, from: &Path, to: &Path) -> Result<(), StoreError> {
        let op = Op::Rename;
        let src = self.file_key(op, from)?;
        let dst = self.file_key(op, to)?;
        if src == dst {
            return match self.load(op, from, &src)? {
                Some(_) => Ok(()),
                None => Err(StoreError::NotFound { path: from.to_path_buf() }),
            };
        }
        let mode = self.mode(op, from)?;
        let _guard = match mode {
            Mode::Locked => self.write_lock(from, &src)?,
            Mode::Conditional => None,
        };
        // The head this rename last wrote at `to`: a copy again replaces only that.
        let mut written: Option<Head> = None;
        for attempt in 0..MAX_ATTEMPTS {
            let Some(cur) = self.load(op, from, &src)? else {
                if attempt == 0 {
                    return Err(StoreError::NotFound { path: from.to_path_buf() });
                }
                // Renamed or deleted by another after this rename's copy: that came later.
                return Ok(());
            };
            let mut moved = cur.head;
            moved.mtime = self.inner.times.next();
            let ours = written.clone();
            self.transact(op, to, &dst, ours.is_none(), &mut |there, _| match (&ours, there) {
                // Written to since this rename's copy: that write is not replaced.
                (Some(mine), found) if found != Some(mine) => Err(StoreError::Conflict {
                    path: to.to_path_buf(),
                    expected: Some(mine.size),
                    found: found.map(|h| h.size),
                }),
                _ => Ok(Step::Write(moved.clone())),
            })?;
            written = Some(moved);
            if self.put_tombstone(op, from, &src, &cur.version, mode)? {
                return Ok(());
            }
            // `from` changed since it was read (an append): copy it again.
        }
        Err(StoreError::Locked { path: from.to_path_buf() })
    }

    fn unlink(&self, path: &Path) -> Result<(), StoreError> {
        let op = Op::Unlink;
        let k = self.file_key(op, path)?;
        if self.load(op, path, &k)?.is_none() {
            return Err(StoreError::NotFound { path: path.to_path_buf() });
        }
        self.delete_heads(op, path, vec![self.inner.layout.head(&k)])
    }

    fn delete_with_artifacts(&self, path: &Path) -> Result<(), StoreError> {
        let op = Op::Unlink;
        let k = self.file_key(op, path)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if let Some(parent) = path.parent() {
            let (prefix, files, _) = self.children(op, parent)?;
            let backups: Vec<ObjectPath> = files
                .iter()
                .filter(|(n, _, _)| is_backup_of(&name, n))
                .map(|(n, _, _)| self.inner.layout.head(&format!("{prefix}{n}")))
                .collect();
            self.delete_heads(op, path, backups)?;
        }
        if let Some(dir) = session_store::artifacts_dir(path) {
            let prefix = S3Error::dir_prefix(Op::RemoveDir, &dir)?;
            let inside = self.heads_below(Op::RemoveDir, path, &prefix)?;
            self.delete_heads(Op::RemoveDir, path, inside)?;
            self.inner.dirs.forget_under(&prefix);
        }
        self.delete_heads(op, path, vec![self.inner.layout.head(&k)])
    }

    fn open_writer(&self, path: &Path, durability: Durability) -> Result<Box<dyn AppendWriter>, StoreError> {
        let _ = durability; // every append is one acknowledged PUT
        let op = Op::Open;
        let k = self.file_key(op, path)?;
        self.transact(op, path, &k, true, &mut |cur, _| match cur {
            Some(_) => Ok(Step::Done),
            None => Ok(Step::Write(Head { size: 0, mtime: self.inner.times.next(), segments: Vec::new() })),
        })?;
        Ok(Box::new(AppendingWriter::new(self.clone(), path)))
    }

    fn lock(&self, path: &Path, wait: LockWait) -> Result<SessionLock, StoreError> {
        let op = Op::Lock;
        let k = self.file_key(op, path)?;
        let mode = self.mode(op, path)?;
        let deadline = match wait {
            LockWait::NoWait => None,
            LockWait::Timeout(d) => Some(Instant::now() + d),
        };
        let (token, etag) = loop {
            if !guard(&self.inner.held).contains(&k)
                && let Some(got) = self.try_lock(op, path, &k, mode)?
            {
                break got;
            }
            if deadline.is_none_or(|d| Instant::now() >= d) {
                return Err(StoreError::Locked { path: path.to_path_buf() });
            }
            std::thread::sleep(LOCK_POLL);
        };
        guard(&self.inner.held).insert(k.clone());
        // A keeper renews the lock object while it is held; a holder that dies stops
        // renewing and the lock expires after the lock TTL.
        let (stop, stopped) = mpsc::channel::<()>();
        let keeper_storage = self.clone();
        let (keeper_key, keeper_token) = (k.clone(), token.clone());
        let every = self.inner.lock_ttl / 3;
        let keeper = std::thread::spawn(move || {
            let mut etag = etag;
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                if !keeper_storage.renew_lock(&keeper_key, &keeper_token, &mut etag, mode) {
                    break;
                }
            }
            etag
        });
        let storage = self.clone();
        let locked = path.to_path_buf();
        Ok(SessionLock::new(
            path,
            Box::new(move || {
                drop(stop);
                let joined = keeper.join();
                guard(&storage.inner.held).remove(&k);
                let etag = joined.map_err(|_| {
                    StoreError::io_raw(Op::Lock, &locked, std::io::Error::other("the lock keeper thread panicked"))
                })?;
                storage.release_lock(Op::Lock, &locked, &k, &token, &etag, mode)
            }),
        ))
    }

    /// Polls the file's stat ([`PollWatch`]): each poll is one `GET` of the head.
    fn watch(&self, path: &Path) -> Result<Option<Box<dyn Watch>>, StoreError> {
        Ok(Some(Box::new(PollWatch::new(self.clone(), path)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_names_the_version_a_listing_gives_only_where_listings_carry_etags() {
        let head = Head { size: 4, mtime: 1_700_000_000_123, segments: Vec::new() };
        let etag = "\"0123abcd\"".to_owned();
        let (stat, version) = S3Storage::made(&head, Some(etag.clone()), LISTS_ETAGS).expect("a version");
        assert_eq!((stat.size, stat.mtime_ms), (4, 1_700_000_000_123));
        assert_eq!(version, listed_version(Some(&etag), 137, 1_700_000_000_500));
        assert_eq!(S3Storage::made(&head, Some(etag.clone()), LISTS_NO_ETAGS), None);
        assert_eq!(S3Storage::made(&head, Some(etag), LISTS_UNKNOWN), None);
        assert_eq!(S3Storage::made(&head, None, LISTS_ETAGS), None);
        assert_eq!(listed_version(None, 137, 5), "137:5");
    }
}
