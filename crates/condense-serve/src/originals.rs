//! Originals the proxy no longer needs (`serve.originals_ttl_hours`).
//!
//! Every output the proxy prunes is kept in the store of originals, so a proxy that runs for
//! months keeps an original of every output it ever pruned. Session states expire
//! (`serve.state_ttl_hours`); the originals their placeholders named do not, since the store
//! cannot tell on its own which of them something still points at. A sweep can, in two steps:
//! first every handle a saved state names ([`SessionStore::named_handles`]), then every original
//! not written for the period and not among them is removed ([`DirStore::sweep`]). A session
//! whose state expired is judged afresh when it comes back, and its client resends the outputs,
//! so pruning them again stores them again: what a sweep removes, nobody's next request needs.
//!
//! Originals that CLI runs kept in the same directory are named by no state: a store a sweep
//! runs on must be the proxy's own (the README says so where the key is described).

use std::sync::Arc;
use std::time::Duration;

use condense_host::{DirStore, StoreError, Swept};

use crate::Proxy;
use crate::metrics::Metrics;
use crate::state::{SWEEP_EVERY, SessionStore, StateStoreError};

/// Which store of originals the proxy sweeps, and after how long unused.
#[derive(Debug, Clone)]
pub struct OriginalsExpiry {
    store: SweptStore,
    unused_for: Duration,
}

/// A store a sweep runs on.
#[derive(Debug, Clone)]
enum SweptStore {
    Dir(DirStore),
    Redis(Arc<crate::RedisOriginals>),
}

/// Why a sweep did not run; it removed nothing then.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SweepError {
    /// The states could not all be read, so which originals they name is not known.
    #[error("the session states could not be read: {0}")]
    States(#[from] StateStoreError),
    /// The store of originals could not be listed.
    #[error("the store of originals could not be listed: {0}")]
    Store(#[from] StoreError),
    /// The sweep's thread ended without an answer (it panicked).
    #[error("the sweep stopped: {0}")]
    Stopped(String),
}

impl OriginalsExpiry {
    /// Originals in `store` not written for `unused_for`, and named by no saved state, go.
    pub fn new(store: DirStore, unused_for: Duration) -> Self {
        OriginalsExpiry {
            store: SweptStore::Dir(store),
            unused_for,
        }
    }

    /// Originals in Redis not read or written for `unused_for`, and named by no saved state, go.
    pub fn in_redis(store: Arc<crate::RedisOriginals>, unused_for: Duration) -> Self {
        OriginalsExpiry {
            store: SweptStore::Redis(store),
            unused_for,
        }
    }

    /// How long an original goes unused before a sweep may remove it.
    pub fn unused_for(&self) -> Duration {
        self.unused_for
    }

    /// One sweep, keeping what `sessions` name. Blocking: a proxy runs it off its async
    /// threads.
    pub fn sweep(&self, sessions: &dyn SessionStore) -> Result<Swept, SweepError> {
        // The names are read first: an original a state comes to name after this was either
        // just written or stored again (which renews it), so it is too young to go.
        let named = sessions.named_handles()?;
        match &self.store {
            SweptStore::Dir(store) => {
                Ok(store.sweep(self.unused_for, &|handle| named.contains(handle))?)
            }
            SweptStore::Redis(store) => Ok(store.sweep(self.unused_for, &named)?),
        }
    }
}

/// Sweeps now and then every [`SWEEP_EVERY`] while the proxy serves; returns at once when the
/// proxy sweeps nothing.
pub(crate) async fn sweep_every_hour(proxy: Arc<Proxy>) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if proxy.sweep_originals().await.is_none() {
            return;
        }
    }
}

/// Counts and logs one sweep's outcome.
pub(crate) fn record(metrics: &Metrics, swept: &Result<Swept, SweepError>) {
    match swept {
        Ok(swept) => {
            Metrics::add(&metrics.originals_removed, swept.removed as u64);
            Metrics::add(&metrics.originals_removed_bytes, swept.removed_bytes);
            tracing::info!(
                removed = swept.removed,
                removed_bytes = swept.removed_bytes,
                kept_named = swept.kept_named,
                failed = swept.failed,
                "originals swept"
            );
        }
        Err(error) => tracing::warn!(%error, "originals not swept; nothing was removed"),
    }
}
