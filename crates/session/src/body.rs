//! Whole-file writes: (omp: the title slot,) the header and every entry, published
//! atomically and streamed, so no copy of a large session is built in memory.

use std::borrow::Cow;
use std::io::IoSlice;
use std::path::Path;

use session_model::{Dialect, Record, TitleSlot};
use session_store::{Durability, ExpectedSize, Sink};

use crate::{Env, SessionError};

type Result<T, E = SessionError> = std::result::Result<T, E>;

/// What a whole-file write needs, borrowed apart from the manager (so that it can run
/// on another thread while the manager builds its index).
pub(crate) struct Body<'a> {
    pub(crate) dialect: Dialect,
    pub(crate) env: &'a Env,
    pub(crate) header: &'a Record,
    /// omp's title slot (`None`: an empty slot dated like the header).
    pub(crate) slot: Option<&'a TitleSlot>,
    pub(crate) entries: &'a [Record],
    /// The session file records still read by position read their text from (for the
    /// error when that fails).
    pub(crate) source: Option<&'a Path>,
}

impl Body<'_> {
    /// Publishes the whole file at `path` atomically (checking `expected` first) and
    /// returns its size in bytes.
    ///
    /// A new file (`expected` is [`ExpectedSize::Missing`]) is synced as the session's
    /// durability says: losing it to a power cut loses nothing else. A file that replaces
    /// one on disk is always synced before the rename, so a power cut never leaves less
    /// than the old file.
    pub(crate) fn publish(&self, path: &Path, expected: ExpectedSize) -> Result<u64> {
        let durability = match expected {
            ExpectedSize::Missing => self.env.durability,
            _ => Durability::Fsync,
        };
        // Lines that are their source file's bytes are copied by the kernel where they
        // can be (pi's lines, and omp's when no blob store transforms them). A copy that
        // fails, or whose source changed while it was copied, is thrown away with the
        // temporary file, and the write is made again with every line read and checked.
        let mut copy = transforming_store(self.dialect, self.env).is_none();
        loop {
            let mut failure = None;
            let mut copy_failed = false;
            let written = self.env.storage.write_atomic_stream(path, expected, durability, &mut |w| {
                self.write(w, copy, &mut failure, &mut copy_failed)
            });
            match (written, failure) {
                _ if copy_failed && copy => copy = false,
                (_, Some(e)) => return Err(e),
                (Ok(n), None) => return Ok(n),
                (Err(e), None) => return Err(e.into()),
            }
        }
    }

    /// Writes the whole file as the dialect writes it: (omp: title slot,) header,
    /// every entry, each line ending in `\n`; with `copy`, the runs of entries that are
    /// their file's bytes ([`session_model::span::copy_runs`]) copied from it.
    fn write(
        &self,
        w: &mut dyn Sink,
        copy: bool,
        failure: &mut Option<SessionError>,
        copy_failed: &mut bool,
    ) -> std::io::Result<()> {
        /// Runs shorter than this are read and written with the lines around them.
        const COPY_FROM: u64 = 64 << 10;
        if self.dialect == Dialect::Omp {
            let slot = self.slot.cloned().unwrap_or_else(|| TitleSlot {
                title: String::new(),
                source: None,
                updated_at: self.header.get_str("timestamp").unwrap_or_default().to_owned(),
            });
            match slot.to_line() {
                Ok(l) => w.write_all(l.as_bytes())?,
                Err(e) => {
                    *failure = Some(e.into());
                    return Err(std::io::Error::other("title slot too long"));
                }
            }
        }
        let header = self.persisted(self.header.line()).map_err(|e| fail(failure, e))?;
        write_lines(w, &[header])?;
        let runs = if copy { session_model::span::copy_runs(self.entries, COPY_FROM) } else { Vec::new() };
        let mut texts = Vec::new();
        let mut next = 0;
        for run in &runs {
            self.write_entries(w, &self.entries[next..run.records.start], &mut texts, failure)?;
            let copied = w.copy_from(run.source(), run.at, run.len).and_then(|()| w.write_all(b"\n"));
            if let Err(e) = copied.and_then(|()| {
                if run.unchanged() { Ok(()) } else { Err(std::io::Error::other("the source changed while copied")) }
            }) {
                *copy_failed = true;
                return Err(e);
            }
            next = run.records.end;
        }
        self.write_entries(w, &self.entries[next..], &mut texts, failure)
    }

    /// Writes the lines of `entries`, each ending in `\n`: in batches of borrowed slices
    /// (one `writev` each: at most 1,024 slices, a line and its newline), not copied. The
    /// texts of a batch's records still in the session's file are read for it in few
    /// reads, into `texts`.
    fn write_entries(
        &self,
        w: &mut dyn Sink,
        entries: &[Record],
        texts: &mut Vec<u8>,
        failure: &mut Option<SessionError>,
    ) -> std::io::Result<()> {
        const BATCH: usize = 512;
        for chunk in entries.chunks(BATCH) {
            let lines = session_model::span::lines(chunk, texts).map_err(|e| {
                let path = self.source.unwrap_or(Path::new(""));
                fail(failure, SessionError::Store(session_store::StoreError::io(session_store::Op::Read, path, e)))
            })?;
            let mut batch: Vec<Cow<'_, str>> = Vec::with_capacity(lines.len());
            for line in lines {
                batch.push(self.persisted(line).map_err(|e| fail(failure, e))?);
            }
            write_lines(w, &batch)?;
        }
        Ok(())
    }

    /// [`persist_line`] for a line that may be borrowed from its record.
    fn persisted<'a>(&self, line: Cow<'a, str>) -> Result<Cow<'a, str>> {
        match line {
            Cow::Borrowed(l) => persist_line(self.dialect, self.env, l),
            Cow::Owned(l) => Ok(Cow::Owned(persist_line(self.dialect, self.env, &l)?.into_owned())),
        }
    }
}

/// Keeps `e` as the write's failure and returns the IO error that stops the write.
fn fail(failure: &mut Option<SessionError>, e: SessionError) -> std::io::Error {
    let message = e.to_string();
    *failure = Some(e);
    std::io::Error::other(message)
}

/// Returns the blob store that [`persist_line`] moves images into and truncates strings
/// for: omp's, when it has one. Without it every line is persisted as it is, so a
/// whole-file write may copy unchanged lines from their file.
fn transforming_store(dialect: Dialect, env: &Env) -> Option<&session_store::blob::BlobStore> {
    env.blobs.as_ref().filter(|_| dialect == Dialect::Omp)
}

/// Returns the line omp persists for a record line: images moved to the blob store,
/// huge strings truncated (unchanged lines are returned as they are). Without a blob
/// store, and for pi, nothing is transformed (images stay inline).
pub(crate) fn persist_line<'l>(dialect: Dialect, env: &Env, line: &'l str) -> Result<Cow<'l, str>> {
    let Some(blobs) = transforming_store(dialect, env) else {
        return Ok(Cow::Borrowed(line));
    };
    if !crate::persist::may_change(line) {
        return Ok(Cow::Borrowed(line));
    }
    let Ok(record) = Record::parse(line) else {
        return Ok(Cow::Borrowed(line));
    };
    Ok(match crate::persist::prepare_entry_with(record.value(), blobs)? {
        Some(v) => Cow::Owned(session_model::json::to_js_string(&v)),
        None => Cow::Borrowed(line),
    })
}

/// Writes `lines`, each followed by `\n`, with as few vectored writes as the writer takes.
fn write_lines(w: &mut dyn Sink, lines: &[Cow<'_, str>]) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> =
        lines.iter().flat_map(|l| [IoSlice::new(l.as_bytes()), IoSlice::new(b"\n")]).collect();
    let mut bufs = &mut slices[..];
    while !bufs.is_empty() {
        match w.write_vectored(bufs) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
