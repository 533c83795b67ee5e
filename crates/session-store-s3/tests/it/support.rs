//! A key prefix per test in the test bucket, emptied at the end even when the test fails,
//! and the skip rule.

use session_testkit::servers::skip;

use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use session_store_s3::{S3Storage, S3StorageBuilder};

pub(crate) type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The bucket the tests share (`SESSION_TEST_S3_BUCKET`, else `session-test`; `.ci/run`
/// creates it).
pub(crate) fn bucket() -> String {
    std::env::var("SESSION_TEST_S3_BUCKET").unwrap_or_else(|_| "session-test".to_owned())
}

/// A fresh key prefix in the test bucket; every object under it is deleted on drop.
pub(crate) struct TestPrefix {
    pub(crate) prefix: String,
    pub(crate) endpoint: String,
    raw: AmazonS3,
    rt: Runtime,
}

/// A runtime dropped without blocking, so that an async test may drop it.
pub(crate) struct Runtime(Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl TestPrefix {
    /// Returns a new prefix, or `Ok(None)` after printing why the test is skipped (an
    /// error instead when `SESSION_REQUIRE_SERVERS=1`).
    pub(crate) fn create(test: &str) -> Result<Option<TestPrefix>, Box<dyn std::error::Error + Send + Sync>> {
        let Ok(endpoint) = std::env::var("SESSION_TEST_S3") else {
            return skip(test, "SESSION_TEST_S3 is not set (the S3 server's URL, as .ci/run sets it)");
        };
        let prefix = session_testkit::servers::unique_name("sess_test");
        let rt = Runtime(Some(tokio::runtime::Builder::new_current_thread().enable_all().build()?));
        let raw = AmazonS3Builder::from_env()
            .with_bucket_name(bucket())
            .with_endpoint(&endpoint)
            .with_allow_http(true)
            .with_region("us-east-1")
            .build()?;
        let t = TestPrefix { prefix, endpoint, raw, rt };
        if let Err(e) = t.objects("") {
            return skip(test, &format!("cannot list the bucket {} on {}: {e}", bucket(), t.endpoint));
        }
        Ok(Some(t))
    }

    /// Returns a builder of a storage in the bucket under the test's prefix.
    pub(crate) fn builder(&self) -> S3StorageBuilder {
        S3Storage::builder(&bucket()).endpoint(&self.endpoint).allow_http(true).region("us-east-1").prefix(&self.prefix)
    }

    /// Returns a storage in the bucket under the test's prefix.
    pub(crate) fn storage(&self) -> Result<S3Storage, session_store_s3::OpenError> {
        self.builder().build()
    }

    /// Returns the keys (relative to the test's prefix) and sizes of every object below
    /// `below` there, sorted.
    pub(crate) fn objects(&self, below: &str) -> Result<Vec<(String, u64)>, object_store::Error> {
        let p = ObjectPath::from_iter(self.prefix.split('/').chain(below.split('/')).filter(|s| !s.is_empty()));
        let strip = format!("{}/", self.prefix);
        let mut all: Vec<(String, u64)> = block(
            &self.rt,
            self.raw
                .list(Some(&p))
                .map_ok(|m| (m.location.as_ref().strip_prefix(&strip).unwrap_or_default().to_owned(), m.size))
                .try_collect(),
        )?;
        all.sort();
        Ok(all)
    }

    /// Reads one object (a key relative to the test's prefix) as it is stored.
    pub(crate) fn get(&self, key: &str) -> Result<Vec<u8>, object_store::Error> {
        let p = ObjectPath::parse(format!("{}/{key}", self.prefix))?;
        Ok(block(&self.rt, async { self.raw.get(&p).await?.bytes().await })?.to_vec())
    }

    /// Writes one object (a key relative to the test's prefix) as it is.
    pub(crate) fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), object_store::Error> {
        let p = ObjectPath::parse(format!("{}/{key}", self.prefix))?;
        block(&self.rt, self.raw.put(&p, bytes.into())).map(drop)
    }

    /// Deletes one object (a key relative to the test's prefix).
    pub(crate) fn delete(&self, key: &str) -> Result<(), object_store::Error> {
        let p = ObjectPath::parse(format!("{}/{key}", self.prefix))?;
        block(&self.rt, self.raw.delete(&p))
    }
}

impl Drop for TestPrefix {
    fn drop(&mut self) {
        let p = ObjectPath::from(self.prefix.as_str());
        let all: Result<Vec<ObjectPath>, _> =
            block(&self.rt, self.raw.list(Some(&p)).map_ok(|m| m.location).try_collect());
        match all {
            Ok(keys) => {
                for k in keys {
                    if let Err(e) = block(&self.rt, self.raw.delete(&k)) {
                        eprintln!("cannot delete {k}: {e}");
                    }
                }
            }
            Err(e) => eprintln!("cannot list the objects under {}: {e}", self.prefix),
        }
    }
}

/// Runs `f` on `rt`, on a thread of its own when this thread is inside a runtime (a test
/// that is itself async).
fn block<F: std::future::Future + Send>(rt: &Runtime, f: F) -> F::Output
where
    F::Output: Send,
{
    let rt = rt.0.as_ref().expect("the runtime is present until drop");
    if tokio::runtime::Handle::try_current().is_err() {
        return rt.block_on(f);
    }
    std::thread::scope(|s| match s.spawn(|| rt.block_on(f)).join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}
