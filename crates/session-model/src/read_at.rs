//! Files read by position: the one way the crate reads a file, whose IO is the caller's.

/// A file read by position: what [`crate::parse_session_at`] reads from, and what the
/// texts of records read by position are read from ([`crate::Bodies`]).
pub trait ReadAt: Sync {
    /// Reads bytes from `offset` into `buf`; returns how many were read (0 at the
    /// end of the file). May read fewer than asked for.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;

    /// Reads into `buf` from `offset` until it is full or the file ends (retrying
    /// interrupted reads); returns how many bytes were read.
    fn read_full_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Returns a stamp of the bytes' state: two calls give the same stamp only if no
    /// byte changed in between, as far as the reader can tell (a file's size, times
    /// and identity; any constant for bytes that never change). `None` (the default)
    /// when it cannot tell: every text read again is then checked in full.
    fn stamp(&self) -> Option<u128> {
        None
    }

    /// Returns the open file descriptor the bytes are read from, when they are a file's:
    /// a whole-file write may then have the kernel copy a run of them
    /// (`session_store::Sink::copy_from`) instead of reading and writing them. `None`
    /// (the default) for bytes that are not an open file; they are read then.
    #[cfg(unix)]
    fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let start = usize::try_from(offset).map_or(self.len(), |o| o.min(self.len()));
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }

    fn stamp(&self) -> Option<u128> {
        Some(0) // Bytes in memory never change behind the reader.
    }
}

impl ReadAt for Vec<u8> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.as_slice().read_at(buf, offset)
    }

    fn stamp(&self) -> Option<u128> {
        Some(0)
    }
}
