//! Whole-file writes: (omp: the title slot,) the header and every entry, published
//! atomically and streamed, so no copy of a large session is built in memory.

use std::borrow::Cow;
use std::io::{IoSlice, Write};
use std::path::Path;

use session_model::{Dialect, Record, TitleSlot};
use session_store::{Durability, ExpectedSize};

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
        let mut failure = None;
        let written =
            self.env.storage.write_atomic_stream(path, expected, durability, &mut |w| self.write(w, &mut failure));
        match (written, failure) {
            (_, Some(e)) => Err(e),
            (Ok(n), None) => Ok(n),
            (Err(e), None) => Err(e.into()),
        }
    }

    /// Writes the whole file as the dialect writes it: (omp: title slot,) header,
    /// every entry, each line ending in `\n`.
    fn write(&self, w: &mut dyn Write, failure: &mut Option<SessionError>) -> std::io::Result<()> {
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
        // Lines go out in batches of borrowed slices (one `writev` each: at most 1,024
        // slices, a line and its newline), not copied. The texts of a batch's records
        // still in the session's file are read for it in few reads, into `texts`.
        const BATCH: usize = 512;
        let fail = |failure: &mut Option<SessionError>, e: SessionError| {
            let message = e.to_string();
            *failure = Some(e);
            std::io::Error::other(message)
        };
        let header = self.persisted(self.header.line()).map_err(|e| fail(failure, e))?;
        write_lines(w, &[header])?;
        let mut texts = Vec::new();
        for chunk in self.entries.chunks(BATCH) {
            let lines = session_model::span::lines(chunk, &mut texts).map_err(|e| {
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

/// Returns the line omp persists for a record line: images moved to the blob store,
/// huge strings truncated (unchanged lines are returned as they are). Without a blob
/// store, and for pi, nothing is transformed (images stay inline).
pub(crate) fn persist_line<'l>(dialect: Dialect, env: &Env, line: &'l str) -> Result<Cow<'l, str>> {
    let Some(blobs) = env.blobs.as_ref().filter(|_| dialect == Dialect::Omp) else {
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
fn write_lines(w: &mut dyn Write, lines: &[Cow<'_, str>]) -> std::io::Result<()> {
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
