//! The workspace's one worker pool: a slice of items worked on by up to
//! [`Parallelism::threads`] scoped threads, the calling one included, each result
//! handed back on the calling thread as soon as it is done. The piecewise parse of a
//! large file, a listing's scan of many files and the search catalog's index all run on
//! it; each names once how many items a thread should have at least before one more is
//! started ([`Pool::per_thread`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use crate::Parallelism;

/// How a piece of work is spread over threads.
///
/// ```
/// use session_model::Parallelism;
/// use session_model::pool::Pool;
///
/// let items: Vec<u64> = (1..=100).collect();
/// let mut sum = 0;
/// Pool::new(Parallelism::new(4)).per_thread(8).run(&items, || (), |_, _, n| n * n, &mut |_, sq| sum += sq);
/// assert_eq!(sum, 338_350);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Pool {
    parallelism: Parallelism,
    per_thread: usize,
    chunk: usize,
}

impl Pool {
    /// A pool of up to `parallelism` threads, one more for every item, claiming one item
    /// at a time.
    pub fn new(parallelism: Parallelism) -> Pool {
        Pool { parallelism, per_thread: 1, chunk: 1 }
    }

    /// Starts a thread only for every `n` items at least (fewer are not worth one).
    #[must_use]
    pub fn per_thread(mut self, n: usize) -> Pool {
        self.per_thread = n.max(1);
        self
    }

    /// Lets each thread claim `n` items at once (fewer claims, and results handed back
    /// in batches of `n`).
    #[must_use]
    pub fn chunk(mut self, n: usize) -> Pool {
        self.chunk = n.max(1);
        self
    }

    /// Returns how many threads, the calling one included, work on `items` items.
    pub fn threads_for(&self, items: usize) -> usize {
        self.parallelism.threads().min(items / self.per_thread + 1).min(items.max(1))
    }

    /// Runs `work(state, index, item)` for each of `items` and hands each result, with
    /// its item's index, to `on_result` on the calling thread, in completion order.
    /// `state` is each thread's own scratch space, made by `init` (a reused buffer).
    /// With one thread everything runs on the calling thread, in order.
    ///
    /// A panic in `work` on another thread is raised again on the calling thread once
    /// the others are done.
    pub fn run<I: Sync, T: Send, S>(
        &self,
        items: &[I],
        init: impl Fn() -> S + Sync,
        work: impl Fn(&mut S, usize, &I) -> T + Sync,
        on_result: &mut dyn FnMut(usize, T),
    ) {
        let threads = self.threads_for(items.len());
        if threads <= 1 {
            let mut state = init();
            for (i, item) in items.iter().enumerate() {
                on_result(i, work(&mut state, i, item));
            }
            return;
        }
        let chunk = self.chunk;
        let next = AtomicUsize::new(0);
        let claim = || {
            let start = next.fetch_add(chunk, Ordering::Relaxed);
            items.get(start..items.len().min(start + chunk)).filter(|c| !c.is_empty()).map(|c| (start, c))
        };
        // The other threads hand their results over in batches; this one reports its
        // own and whatever has arrived between its claims, so no thread sits waiting
        // while items remain.
        let (tx, rx) = mpsc::channel::<Vec<(usize, T)>>();
        std::thread::scope(|s| {
            for _ in 1..threads {
                let tx = tx.clone();
                let (init, work, claim) = (&init, &work, &claim);
                s.spawn(move || {
                    let mut state = init();
                    while let Some((start, items)) = claim() {
                        let batch =
                            items.iter().enumerate().map(|(k, item)| (start + k, work(&mut state, start + k, item)));
                        if tx.send(batch.collect()).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            let mut state = init();
            while let Some((start, items)) = claim() {
                for (k, item) in items.iter().enumerate() {
                    on_result(start + k, work(&mut state, start + k, item));
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
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Every item is worked on once, with its own index, whatever the threads, the
        /// chunk and the threshold; each thread's state is its own.
        #[test]
        fn every_item_is_done_once_with_its_index(
            n in 0usize..300,
            threads in 0usize..9,
            chunk in 0usize..20,
            per_thread in 0usize..40,
        ) {
            let items: Vec<usize> = (0..n).map(|i| i * 3).collect();
            let pool = Pool::new(Parallelism::new(threads)).chunk(chunk).per_thread(per_thread);
            prop_assert!(pool.threads_for(n) >= 1 && pool.threads_for(n) <= threads.max(1));
            let mut seen = vec![0u32; n];
            let mut states = std::collections::HashSet::new();
            pool.run(
                &items,
                || std::thread::current().id(),
                |owner, i, item| {
                    assert_eq!(*owner, std::thread::current().id(), "a thread's state stays on it");
                    (*owner, i, *item)
                },
                &mut |i, (owner, j, item)| {
                    assert_eq!((i, item), (j, j * 3));
                    seen[i] += 1;
                    states.insert(owner);
                },
            );
            prop_assert!(seen.iter().all(|&c| c == 1), "{:?}", seen);
            prop_assert!(states.len() <= pool.threads_for(n));
        }
    }

    /// One thread: in order, on the calling thread.
    #[test]
    fn one_thread_runs_in_order_here() {
        let here = std::thread::current().id();
        let mut order = Vec::new();
        Pool::new(Parallelism::SERIAL).run(
            &[10, 20, 30],
            || (),
            |_, _, x| (std::thread::current().id(), *x),
            &mut |i, (id, x)| {
                assert_eq!(id, here);
                order.push((i, x));
            },
        );
        assert_eq!(order, [(0, 10), (1, 20), (2, 30)]);
    }
}
