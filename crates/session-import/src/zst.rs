//! Codex's compressed rollouts (`rollout-….jsonl.zst`): zstd frames, decoded in memory
//! with a bound on the size they may grow to.

use std::io::Read;

use ruzstd::decoding::StreamingDecoder;

use crate::ImportError;

/// The most a compressed source may decode to (1 GiB): a larger one is refused rather
/// than allowed to fill memory.
pub const MAX_DECOMPRESSED: u64 = 1 << 30;

/// zstd's frame magic number, little-endian.
const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Returns whether `bytes` start as a zstd frame.
pub fn is_zstd(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// Decodes every zstd frame of `bytes` in order, up to `limit` bytes of output.
pub fn decompress(bytes: &[u8], limit: u64) -> Result<Vec<u8>, ImportError> {
    let mut src = bytes;
    let mut out = Vec::new();
    while !src.is_empty() {
        let at = bytes.len() - src.len();
        let bad = |e: &dyn std::fmt::Display| ImportError::Compressed { offset: at as u64, reason: e.to_string() };
        let decoder = StreamingDecoder::new(&mut src).map_err(|e| bad(&e))?;
        let room = limit.saturating_add(1).saturating_sub(out.len() as u64);
        decoder.take(room).read_to_end(&mut out).map_err(|e| bad(&e))?;
        if out.len() as u64 > limit {
            return Err(ImportError::TooLarge { limit });
        }
    }
    Ok(out)
}
