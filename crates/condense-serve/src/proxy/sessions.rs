//! Each session's state between requests: read and saved within `serve.state_timeout_ms`,
//! saved by compare-and-set (or, on a store no other replica writes, after the request is on
//! its way), and one lock per session on this replica.

use super::*;

impl Proxy {
    /// The session's state, and whether it may be saved. A store that cannot be read in time
    /// does not cost the request its compaction: it is prepared on a fresh state (a request
    /// past the window still gets under it), and that state is not saved over one that may be
    /// fine.
    pub(super) async fn load_or_fresh(&self, session: &str) -> (crate::state::Versioned, bool) {
        match self.load(session).await {
            Ok(versioned) => {
                if let Some(why) = &versioned.discarded {
                    Metrics::add(&self.metrics.state_discarded, 1);
                    tracing::warn!(%session, %why, "the session state was set aside; judged afresh, and replaced on save");
                }
                (versioned, true)
            }
            Err(error) => {
                Metrics::add(&self.metrics.state_unavailable, 1);
                tracing::warn!(%session, %error, "the session state could not be read; prepared on a fresh state, not saved");
                (crate::state::Versioned::default(), false)
            }
        }
    }

    /// The save of a store replicas share, made before anything is sent: a lost
    /// compare-and-set is prepared again on the latest state, up to `SAVE_ATTEMPTS` times.
    /// What becomes of a prepared state before the request is sent: nothing when it may not be
    /// saved; on a store no other replica writes, a save once the request is on its way (it
    /// cannot lose the compare-and-set; the session stays locked until then); on any other
    /// store, a save now, which decides whether this preparation stands.
    pub(super) async fn settle(
        &self,
        session: &str,
        state: SessionState,
        version: u64,
        saving: bool,
        attempt: usize,
    ) -> Result<Option<DeferredSave>, Retry> {
        if !saving {
            return Ok(None);
        }
        if self.store.exclusive() {
            return Ok(Some(DeferredSave { state, version }));
        }
        match self
            .save_before_sending(session, state, version, attempt)
            .await
        {
            Settled::Retry => Err(Retry),
            Settled::Done => Ok(None),
        }
    }

    pub(super) async fn save_before_sending(
        &self,
        session: &str,
        state: SessionState,
        version: u64,
        attempt: usize,
    ) -> Settled {
        match self.save(session, state, version).await {
            Ok(Saved::Conflict) if attempt < SAVE_ATTEMPTS => return Settled::Retry,
            // Lost every time: what was prepared on the latest state is still the right body
            // to send (never the whole history, which may be past the window); only its
            // decisions are not kept.
            Ok(Saved::Conflict) => {
                Metrics::add(&self.metrics.state_conflicts, 1);
                tracing::warn!(%session, attempts = SAVE_ATTEMPTS, "lost the session state's compare-and-set every time; sent as prepared on the latest state, not saved");
            }
            Ok(Saved::Stored(_)) => {}
            // The compacted body is right; only the next request loses its frozen form.
            Err(error) => {
                Metrics::add(&self.metrics.state_unsaved, 1);
                tracing::warn!(%session, %error, "the session state was not saved");
            }
        }
        Settled::Done
    }

    /// The session's state. The embedded store reads one small local file (about 10 µs), less
    /// than handing the read to tokio's blocking pool costs on a busy machine, so it is read
    /// here; a store behind a network round trip is read on the blocking pool.
    pub(super) async fn load(&self, session: &str) -> Result<crate::state::Versioned, String> {
        if self.store.local() {
            return self.store.load(session).map_err(|error| error.to_string());
        }
        let store = self.store.clone();
        let key = session.to_owned();
        self.bounded(tokio::task::spawn_blocking(move || store.load(&key)))
            .await
    }

    /// A blocking store call, given up after `serve.state_timeout_ms` (the call itself ends
    /// on its own, bounded by the store's own timeouts).
    pub(super) async fn bounded<T>(
        &self,
        call: tokio::task::JoinHandle<Result<T, crate::state::StateStoreError>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(self.settings.state_timeout, call).await {
            Ok(Ok(done)) => done.map_err(|error| error.to_string()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!(
                "{} did not answer within {} ms (serve.state_timeout_ms)",
                self.store.location(),
                self.settings.state_timeout.as_millis()
            )),
        }
    }

    /// The session's [`SessionSlot`] on this replica, made on first use.
    pub(super) fn session_slot(&self, session: &str) -> Arc<SessionSlot> {
        let mut slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Forget the sessions nobody holds (no request prepared, no answer recorded), so the
        // map does not grow with every session ever seen.
        if slots.len() > 1_024 {
            slots.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        slots.entry(session.to_owned()).or_default().clone()
    }

    /// Returns once what the session's answers already given told is recorded, or after
    /// `serve.state_timeout_ms` (a store that slow fails the recording anyway, and the request
    /// is prepared on what it can read).
    pub(super) async fn learned(&self, slot: &SessionSlot) {
        let _ = tokio::time::timeout(self.settings.state_timeout, slot.learning.idle()).await;
    }

    /// Counts a recording of what an answer told of `session` from now, before the answer
    /// reaches the client, and runs it in the background: the session's next request is
    /// prepared once it is done ([`Proxy::learned`]).
    pub(super) fn learn_in_background(
        &self,
        session: &str,
        recording: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let slot = self.session_slot(session);
        slot.learning.begin();
        self.in_background(async move {
            recording.await;
            slot.learning.end();
        });
    }

    pub(super) async fn save(
        &self,
        session: &str,
        state: SessionState,
        version: u64,
    ) -> Result<Saved, String> {
        let store = self.store.clone();
        let key = session.to_owned();
        self.bounded(tokio::task::spawn_blocking(move || {
            store.save(&key, &state, version)
        }))
        .await
    }

    /// Records the provider's count of a request in its session, for the next trigger.
    pub(super) async fn record_usage(&self, session: String, usage: ReportedUsage) {
        self.learn(session, |state| state.reported_usage = Some(usage))
            .await;
    }

    /// Records what the provider's answer told of the session (`learn`, applied to its latest
    /// state, again where a concurrent save won): its count of the request, a reply cut short.
    pub(super) async fn learn(&self, session: String, learn: impl Fn(&mut SessionState)) {
        let slot = self.session_slot(&session);
        let _guard = slot.lock.lock().await;
        for _ in 0..SAVE_ATTEMPTS {
            let mut versioned = match self.load(&session).await {
                Ok(versioned) => versioned,
                Err(error) => {
                    tracing::warn!(%session, %error, "the provider's usage was not saved");
                    return;
                }
            };
            learn(&mut versioned.state);
            match self
                .save(&session, versioned.state, versioned.version)
                .await
            {
                Ok(Saved::Conflict) => continue,
                Ok(Saved::Stored(_)) => return,
                Err(error) => {
                    tracing::warn!(%session, %error, "the provider's usage was not saved");
                    return;
                }
            }
        }
    }
}

/// How many times a save that lost a compare-and-set is prepared again on the winner's state.
pub(super) const SAVE_ATTEMPTS: usize = 3;

/// A preparation lost the compare-and-set: it is made again on the latest state.
pub(super) struct Retry;

/// Whether a preparation stands once its save was tried.
pub(super) enum Settled {
    /// Lost the compare-and-set: prepare again on the latest state.
    Retry,
    /// Send it (saved, or not and said so).
    Done,
}

/// A state an exclusive store saves after the request is forwarded.
pub(super) struct DeferredSave {
    pub(super) state: SessionState,
    pub(super) version: u64,
}
