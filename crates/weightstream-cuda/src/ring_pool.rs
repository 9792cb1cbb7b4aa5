//! The process's staging rings, kept between loads.
//!
//! Pinning is the dearest part of a small load: the first GPU round
//! measured about 0.5 s per GiB of `cuMemHostAlloc` on an H200 host, and
//! each Loader pinned its own ring (32 MiB by default), so every process
//! and every Loader paid about 12 ms before its first byte (issue 56, item
//! 3). A ring is the same whatever checkpoint it stages, so when an
//! executor is dropped its ring goes back here, and the next executor of
//! the same device and geometry in this process takes it instead of
//! pinning again. A few idle rings per geometry are kept ([`KEEP`]); more
//! are freed. [`release_rings`] frees every idle one (their pinned host
//! memory and device scratch) for a process that loads no more.
//!
//! A kept ring holds its own references to the device's primary context
//! (its buffers and streams do), so it stays valid after every executor of
//! that device is gone.

use std::sync::Mutex;

use crate::error::Result;
use crate::gpu::Gpu;
use crate::pipeline::{StagingConfig, StagingRing};

/// Idle rings kept per (device, geometry): one per Loader that a process
/// keeps open on a device at once, which is rarely more than two.
pub const KEEP: usize = 2;

/// Idle items by key, at most `keep` per key. Generic so its rules are
/// tested without a GPU.
pub struct Pool<K, T> {
    idle: Mutex<Vec<(K, T)>>,
    keep: usize,
}

impl<K: PartialEq, T> Pool<K, T> {
    pub const fn new(keep: usize) -> Self {
        Pool { idle: Mutex::new(Vec::new()), keep }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(K, T)>> {
        // A panic while holding the lock leaves a valid list.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle item of `key`, the most recently returned one.
    pub fn take(&self, key: &K) -> Option<T> {
        let mut idle = self.idle();
        let at = idle.iter().rposition(|(k, _)| k == key)?;
        Some(idle.remove(at).1)
    }

    /// Keep `item` for the next `take` of `key`; returns it when `keep` of
    /// that key are already idle (the caller drops it, outside the lock).
    pub fn put(&self, key: K, item: T) -> Option<T> {
        let mut idle = self.idle();
        if idle.iter().filter(|(k, _)| *k == key).count() >= self.keep {
            return Some(item);
        }
        idle.push((key, item));
        None
    }

    /// How many items of `key` are idle.
    pub fn idle_count(&self, key: &K) -> usize {
        self.idle().iter().filter(|(k, _)| k == key).count()
    }

    /// Every idle item, removed.
    pub fn drain(&self) -> Vec<T> {
        self.idle().drain(..).map(|(_, t)| t).collect()
    }
}

/// (device ordinal, ring geometry) -> idle rings.
static RINGS: Pool<(usize, StagingConfig), StagingRing> = Pool::new(KEEP);

/// A ring for `gpu` of geometry `cfg`: a kept one when there is one, else
/// a newly pinned one.
pub fn take_ring(gpu: &Gpu, cfg: StagingConfig) -> Result<StagingRing> {
    match RINGS.take(&(gpu.info().ordinal, cfg)) {
        Some(r) => Ok(r),
        None => StagingRing::new(gpu, cfg),
    }
}

/// Give a ring back for later loads in this process. Every run leaves its
/// ring drained (pipeline::run), so it is ready for the next.
pub fn keep_ring(ordinal: usize, ring: StagingRing) {
    let cfg = ring.config();
    // Dropped here, after the pool's lock is released, when the pool is full.
    drop(RINGS.put((ordinal, cfg), ring));
}

/// Idle rings of device `ordinal` and geometry `cfg`, for reports and tests.
pub fn idle_rings(ordinal: usize, cfg: StagingConfig) -> usize {
    RINGS.idle_count(&(ordinal, cfg))
}

/// Free every idle ring; returns how many there were.
pub fn release_rings() -> usize {
    RINGS.drain().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_what_was_put_by_key() {
        let p: Pool<(usize, u32), &str> = Pool::new(2);
        assert_eq!(p.take(&(0, 1)), None);
        assert_eq!(p.put((0, 1), "a"), None);
        assert_eq!(p.put((1, 1), "b"), None);
        assert_eq!(p.take(&(0, 2)), None, "another geometry");
        assert_eq!(p.take(&(0, 1)), Some("a"));
        assert_eq!(p.take(&(0, 1)), None, "taken once");
        assert_eq!(p.take(&(1, 1)), Some("b"));
    }

    #[test]
    fn keeps_at_most_keep_per_key() {
        let p: Pool<u8, u32> = Pool::new(2);
        assert_eq!(p.put(7, 1), None);
        assert_eq!(p.put(7, 2), None);
        assert_eq!(p.put(7, 3), Some(3), "the third is handed back to be freed");
        assert_eq!(p.put(8, 4), None, "other keys have their own room");
        assert_eq!((p.idle_count(&7), p.idle_count(&8), p.idle_count(&9)), (2, 1, 0));
        assert_eq!(p.take(&7), Some(2), "the most recent first");
        let mut rest = p.drain();
        rest.sort();
        assert_eq!(rest, vec![1, 4]);
        assert_eq!(p.take(&7), None);
    }
}
