//! `condense`: the engine itself, request by request, as a harness or the proxy runs it.
//!
//! Each request goes through [`Compactor::prepare`] with one [`SessionState`] for the whole
//! session, so everything the engine freezes (decisions, a summary standing in for the head)
//! persists as it does in production. The clock is the request's recorded time, so time-based
//! microcompact sees the real idle gaps. Originals go to a store in memory (a replay writes
//! nothing to disk), and summaries come from the extractive summarizer, offline: the call is
//! priced as the request a remote summarizer would have made. That is the head flattened into
//! one prompt of its own, the summary as its output; or, for a configuration that forks
//! (`summarizer.kind = "upstream"` with `summarizer.fork`, as `condense serve` runs it), the
//! agent's own request with the summary prompt after it, where the proxy would have made it
//! (room left in the window, and cheaper than the separate prompt), which reads the agent's
//! cached prefix.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use condense_core::{Conversation, Message};
use condense_host::{
    Clock, CompactionOutcome, Compactor, MemoryStore, Reason, ReportedUsage, SessionState,
};
use condense_summarize::{Fork, SummarizeError, Summarizer};
use condense_tokenizer::TokenCounter;

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

/// The configured summarizer, noting the forked request a forking summarizer would have sent
/// (see [`Fork::request`]): the same decision, the same messages, with the summary's length
/// limit of the configuration.
struct Forking<'s> {
    inner: &'s dyn Summarizer,
    counter: &'s dyn TokenCounter,
    reply_tokens: usize,
    tool_output_chars: usize,
    request: Mutex<Option<Vec<Message>>>,
}

#[async_trait::async_trait]
impl Summarizer for Forking<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn summarize(&self, head: &[Message], prompt: &str) -> Result<String, SummarizeError> {
        self.inner.summarize(head, prompt).await
    }

    async fn summarize_forked(
        &self,
        fork: Fork<'_>,
        prompt: &str,
    ) -> Result<String, SummarizeError> {
        let request = fork.request(
            prompt,
            self.counter,
            self.reply_tokens,
            self.tool_output_chars,
        );
        if let Ok(mut noted) = self.request.lock() {
            *noted = request.map(|(request, _)| request.messages);
        }
        self.inner.summarize(fork.head(), prompt).await
    }
}

/// How a configuration that forks its summaries sizes them (`[summarizer]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForkLimits {
    /// `max_summary_tokens`: the longest summary asked for.
    pub max_summary_tokens: usize,
    /// `tool_output_chars`: how much of each output a separate prompt carries.
    pub tool_output_chars: usize,
}

/// condense with one configuration.
pub struct Condense {
    name: String,
    compactor: Compactor,
    /// `Some` when summaries are asked inside the agent's request.
    fork: Option<ForkLimits>,
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
    /// extractive summarizer); its store and clock are replaced by the replay's. `fork`: the
    /// configuration asks summaries inside the agent's request, sized so.
    pub fn new(
        name: impl Into<String>,
        compactor: Compactor,
        fork: Option<ForkLimits>,
    ) -> Result<Self, ReplayError> {
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
            fork,
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
        let forking = self.fork.map(|limits| Forking {
            inner: self.compactor.summarizer(),
            counter: self.compactor.counter(),
            reply_tokens: limits.max_summary_tokens,
            tool_output_chars: limits.tool_output_chars,
            request: Mutex::new(None),
        });
        let prepared = match &forking {
            Some(forking) => self.runtime.block_on(self.compactor.prepare_with(
                conversation,
                &mut self.state,
                forking,
            )),
            None => self
                .runtime
                .block_on(self.compactor.prepare(conversation, &mut self.state)),
        };
        let compaction = prepared.map_err(|error| ReplayError::Policy {
            policy: self.name.clone(),
            message: error.to_string(),
        })?;
        let forked = forking.and_then(|forking| forking.request.into_inner().ok().flatten());
        let report = &compaction.report;
        let summarizer = match &report.compaction {
            CompactionOutcome::Summarized {
                split,
                summary_tokens,
                ..
            } => Some(SummarizerCall {
                input: match forked {
                    Some(request) => SummarizerInput::Forked(request),
                    None => SummarizerInput::Separate(split.head_tokens),
                },
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
