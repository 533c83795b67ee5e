//! The worker pool a listing scans files on.
//!
//! Work is claimed a few items at a time by every thread, the calling one included;
//! results reach the caller on the calling thread, as soon as they are done, so that
//! it can report progress while the other threads work.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// How many items a thread claims at once.
const CHUNK: usize = 8;

/// Runs `work` on each of `items` on `threads` threads (the calling one included; one
/// or fewer: on the calling thread alone) and hands each result, with its item's
/// index, to `on_result` on the calling thread, in completion order.
pub(super) fn run<I: Sync, T: Send>(
    items: &[I],
    threads: usize,
    work: impl Fn(&I) -> T + Sync,
    on_result: &mut dyn FnMut(usize, T),
) {
    if threads <= 1 {
        for (i, item) in items.iter().enumerate() {
            on_result(i, work(item));
        }
        return;
    }
    // The other threads hand their results over in batches; this one reports its own
    // and whatever has arrived between its batches, so no thread sits waiting while
    // items remain.
    let next = AtomicUsize::new(0);
    let claim = || {
        let start = next.fetch_add(CHUNK, Ordering::Relaxed);
        items.get(start..items.len().min(start + CHUNK)).filter(|c| !c.is_empty()).map(|c| (start, c))
    };
    let (tx, rx) = mpsc::channel::<Vec<(usize, T)>>();
    std::thread::scope(|s| {
        for _ in 1..threads {
            let tx = tx.clone();
            let (work, claim) = (&work, &claim);
            s.spawn(move || {
                while let Some((start, chunk)) = claim() {
                    let batch = chunk.iter().enumerate().map(|(k, item)| (start + k, work(item))).collect();
                    if tx.send(batch).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        while let Some((start, chunk)) = claim() {
            for (k, item) in chunk.iter().enumerate() {
                on_result(start + k, work(item));
            }
            for batch in rx.try_iter() {
                for (i, result) in batch {
                    on_result(i, result);
                }
            }
        }
        for batch in rx {
            for (i, result) in batch {
                on_result(i, result);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every item is worked on once, whatever the number of threads, and each result
    /// comes with its item's index.
    #[test]
    fn every_item_is_done_once_with_its_index() {
        let items: Vec<usize> = (0..100).collect();
        for threads in [0, 1, 2, 5, 16] {
            let mut seen = vec![0; items.len()];
            run(&items, threads, |&i| i * 2, &mut |i, r| {
                assert_eq!(r, i * 2);
                seen[i] += 1;
            });
            assert!(seen.iter().all(|&n| n == 1), "{threads} threads: {seen:?}");
        }
    }
}
