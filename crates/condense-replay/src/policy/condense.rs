//! `condense`: the engine itself, request by request, as a harness or the proxy runs it.
//!
//! Each request goes through [`Compactor::prepare`] with one [`SessionState`] for the whole
//! session, so everything the engine freezes (decisions, a summary standing in for the head)
//! persists as it does in production. The clock is the request's recorded time, so time-based
//! microcompact sees the real idle gaps. Originals go to a store in memory (a replay writes
//! nothing to disk), and summaries come from the extractive summarizer, offline: the call is
//! priced as the request a remote summarizer would have made (the head flattened into one
//! prompt of its own, the summary as its output).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use condense_core::{Conversation, Message};
use condense_host::{
    Clock, CompactionOutcome, Compactor, MemoryStore, Reason, ReportedUsage, SessionState,
};

use super::{Model, Policy, Prepared, SummarizerCall, SummarizerInput};
use crate::ReplayError;

/// A clock the replay sets to each request's time.
#[derive(Debug, Clone, Default)]
struct ReplayClock(Arc<AtomicU64>);

impl Clock for ReplayClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// condense with one configuration.
pub struct Condense {
    name: String,
    compactor: Compactor,
    state: SessionState,
    /// Messages in the last request sent: where its answer stands in the next one.
    sent: usize,
    clock: ReplayClock,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Condense {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condense")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Condense {
    /// The policy `name` running `compactor` (built from the configuration to compare, with the
    /// extractive summarizer); its store and clock are replaced by the replay's.
    pub fn new(name: impl Into<String>, compactor: Compactor) -> Result<Self, ReplayError> {
        let clock = ReplayClock::default();
        let compactor = compactor
            .with_store(Box::new(MemoryStore::new()))
            .with_clock(Box::new(clock.clone()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|error| ReplayError::Policy {
                policy: "condense".to_owned(),
                message: format!("cannot start its runtime: {error}"),
            })?;
        Ok(Condense {
            name: name.into(),
            compactor,
            state: SessionState::default(),
            sent: 0,
            clock,
            runtime,
        })
    }
}

impl Policy for Condense {
    fn name(&self) -> &str {
        &self.name
    }

    /// As `condense serve` does: the provider's count of the request and its answer, so that the
    /// next trigger measures in the provider's tokens (with the system prompt the log leaves
    /// out), not in condense's own.
    fn observe(&mut self, input_tokens: u64, output_tokens: u64) {
        self.state.reported_usage = Some(ReportedUsage {
            message: self.sent,
            tokens: usize::try_from(input_tokens + output_tokens).unwrap_or(usize::MAX),
        });
    }

    fn prepare<'h>(
        &mut self,
        history: &'h [Message],
        now_ms: Option<u64>,
        _model: &Model<'_>,
    ) -> Result<Prepared<'h>, ReplayError> {
        if let Some(now) = now_ms {
            self.clock.0.store(now, Ordering::Relaxed);
        }
        let conversation = Conversation::new(history.to_vec());
        let compaction = self
            .runtime
            .block_on(self.compactor.prepare(conversation, &mut self.state))
            .map_err(|error| ReplayError::Policy {
                policy: self.name.clone(),
                message: error.to_string(),
            })?;
        let report = &compaction.report;
        let summarizer = match &report.compaction {
            CompactionOutcome::Summarized {
                split,
                summary_tokens,
                ..
            } => Some(SummarizerCall {
                input: SummarizerInput::Separate(split.head_tokens),
                output_tokens: *summary_tokens,
            }),
            _ => None,
        };
        self.sent = compaction.conversation.messages.len();
        Ok(Prepared {
            input: compaction.conversation.messages.into(),
            summarizer,
            // Outputs replaced for this request; those only re-applied from the log are not new.
            pruned_outputs: report.prune.replaced()
                - report
                    .prune
                    .outputs
                    .iter()
                    .filter(|output| output.reason == Reason::Frozen)
                    .count(),
        })
    }
}
