//! Token counts remembered by content.
//!
//! The key is the 128-bit xxh3 hash of the text: hashing runs at memory speed, far faster than
//! tokenizing, and at 128 bits a collision between two texts of one session is not a practical
//! concern. The map is split into shards so the parallel count rarely waits on a lock.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use condense_core::Prehashed;

const SHARDS: usize = 16;

type Shard = HashMap<u128, u32, BuildHasherDefault<Prehashed>>;

pub(crate) struct TokenCache {
    shards: Vec<Mutex<Shard>>,
    /// Entries per shard before the shard is emptied; bounds memory in a long-lived harness.
    shard_capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// How the cache has been used, for tests and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Counts served from the cache.
    pub hits: u64,
    /// Counts computed.
    pub misses: u64,
    /// Texts cached.
    pub entries: usize,
}

impl TokenCache {
    pub(crate) fn new(capacity: usize) -> Self {
        TokenCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_capacity: capacity.div_ceil(SHARDS).max(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The count for `text`, computed by `count` only when it is not known yet.
    pub(crate) fn get_or_count(&self, text: &str, count: impl FnOnce(&str) -> usize) -> usize {
        let key = xxhash_rust::xxh3::xxh3_128(text.as_bytes());
        self.get_or_count_keyed(key, || count(text))
    }

    /// The count remembered under `key` (a 128-bit hash of what was counted), computed by
    /// `count` only when it is not known yet.
    pub(crate) fn get_or_count_keyed(&self, key: u128, count: impl FnOnce() -> usize) -> usize {
        let shard = &self.shards[(key >> 124) as usize % SHARDS];
        if let Some(&known) = lock(shard).get(&key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return known as usize;
        }
        // Tokenize outside the lock: other threads keep using the shard meanwhile.
        let counted = count();
        self.misses.fetch_add(1, Ordering::Relaxed);
        let mut entries = lock(shard);
        if entries.len() >= self.shard_capacity {
            entries.clear();
        }
        entries.insert(key, u32::try_from(counted).unwrap_or(u32::MAX));
        counted
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.shards.iter().map(|shard| lock(shard).len()).sum(),
        }
    }
}

/// A poisoned shard only means another thread panicked mid-insert; the map itself is still a
/// valid map of correct counts, so keep using it.
fn lock(shard: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
    shard
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
