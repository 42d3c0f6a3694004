//! `condense`: the engine itself, request by request, as a harness or the proxy runs it.
//!
//! Each request goes through [`Compactor::prepare`] with one [`SessionState`] for the whole
//! session, so everything the engine freezes (decisions, a summary standing in for the head)
//! persists as it does in production. The clock is the request's recorded time, so time-based
//! microcompact sees the real idle gaps. Originals go to a store in memory (a replay writes
//! nothing to disk), and summaries come from the extractive summarizer, offline. With the
//! extractive summarizer configured (the default) that is the whole story: no request is made,
//! and none is billed. A configuration that names a remote summarizer has each summary priced as
//! the request that summarizer would have made: the head flattened into
//! one prompt of its own (each tool output cut to `summarizer.tool_output_chars`, as condense's
//! remote summarizers send it), the summary as its output; or, for a configuration that forks
//! (`summarizer.kind = "upstream"` with `summarizer.fork`, as `condense serve` runs it), the
//! agent's own request with the summary prompt after it, where the proxy would have made it
//! (room left in the window, and cheaper than the separate prompt), which reads the agent's
//! cached prefix.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use condense_core::{Conversation, Message};
use condense_host::{
    Clock, CompactionOutcome, Compactor, Config, MemoryStore, Reason, SessionState, SummarizerKind,
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

/// The request a remote summarizer sends for a summary.
#[derive(Debug, Clone)]
enum Noted {
    /// The agent's own request with the summary prompt after it.
    Forked(Vec<Message>),
    /// A prompt of its own, this many condense tokens.
    Separate(usize),
}

/// The configured summarizer, noting the request a remote summarizer with `requests` would
/// have sent for each summary (see [`Fork::request`] and [`Fork::separate_tokens`]): the same
/// decision and the same size as the proxy's.
struct Noting<'s> {
    inner: &'s dyn Summarizer,
    counter: &'s dyn TokenCounter,
    requests: SummaryRequests,
    noted: Mutex<Option<Noted>>,
}

#[async_trait::async_trait]
impl Summarizer for Noting<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// As the configured summarizer would: the replay writes every summary locally, but prices
    /// (and so times) them as the configuration asks them.
    fn runs_locally(&self) -> bool {
        self.requests.local
    }

    /// The configured summarizer's, where it writes summaries here: a remote one's would be
    /// another size than the local summary the replay writes in its place.
    fn local_summary(&self, head: &[Message], carried: &[Message]) -> Option<String> {
        if self.requests.local {
            self.inner.local_summary(head, carried)
        } else {
            None
        }
    }

    async fn summarize(&self, head: &[Message], prompt: &str) -> Result<String, SummarizeError> {
        self.inner.summarize(head, prompt).await
    }

    async fn summarize_forked(
        &self,
        fork: Fork<'_>,
        prompt: &str,
    ) -> Result<String, SummarizeError> {
        let requests = &self.requests;
        let forked = requests.fork.then(|| {
            fork.request(
                prompt,
                self.counter,
                requests.max_summary_tokens,
                requests.tool_output_chars,
            )
        });
        let noted = match forked.flatten() {
            Some((request, _)) => Noted::Forked(request.messages),
            None => Noted::Separate(fork.separate_tokens(
                prompt,
                self.counter,
                requests.tool_output_chars,
            )),
        };
        if let Ok(mut slot) = self.noted.lock() {
            *slot = Some(noted);
        }
        self.inner.summarize_forked(fork, prompt).await
    }
}

/// How the configuration's remote summarizer would ask for summaries (`[summarizer]`): what the
/// replay prices each summary as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryRequests {
    /// Written where condense runs, without a request (`summarizer.kind = "extractive"`): the
    /// provider bills nothing for it.
    pub local: bool,
    /// Inside the agent's own request where that is cheaper, as `condense serve` asks them
    /// ([`Config::forks_summaries`]).
    pub fork: bool,
    /// `max_summary_tokens`: the longest summary asked for.
    pub max_summary_tokens: usize,
    /// `tool_output_chars`: how much of each output a separate prompt carries.
    pub tool_output_chars: usize,
}

impl SummaryRequests {
    /// As `config` (before the replay puts the extractive summarizer in its place) asks them.
    pub fn from_config(config: &Config) -> Self {
        let summarizer = &config.settings().summarizer;
        SummaryRequests {
            local: summarizer.kind == SummarizerKind::Extractive,
            fork: config.forks_summaries(),
            max_summary_tokens: config.settings().remote.max_summary_tokens,
            tool_output_chars: config.settings().remote.tool_output_chars,
        }
    }
}

/// condense with one configuration.
pub struct Condense {
    name: String,
    compactor: Compactor,
    /// How summaries are asked, and so priced.
    requests: SummaryRequests,
    state: SessionState,
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
    /// extractive summarizer); its store and clock are replaced by the replay's. Each summary
    /// is priced as `requests` would have asked it.
    pub fn new(
        name: impl Into<String>,
        compactor: Compactor,
        requests: SummaryRequests,
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
            requests,
            state: SessionState::default(),
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
    /// out), not in condense's own; and a reply cut short at a limit condense lowered, so that
    /// the next requests leave the reply more room ([`SessionState::record_cut_short`]).
    fn observe(&mut self, input_tokens: u64, output_tokens: u64) {
        let count = |tokens: u64| usize::try_from(tokens).unwrap_or(usize::MAX);
        // A reply longer than the limit condense lowered stops at it, which the proxy reads in
        // the provider's answer (`max_tokens`): no answer the client can go on from, the
        // input's count stands at the request's last message.
        if output_tokens > self.state.sent_reply_limit as u64
            && self.state.record_cut_short(Some(count(input_tokens)))
        {
            return;
        }
        // At the answer, as the proxy records it: where the log holds the answer as several
        // messages, the trigger takes the figure to cover them all (`host::usage`).
        self.state
            .record_answer(count(input_tokens + output_tokens));
    }

    /// As `condense serve` does: the provider's count, from its refusal, recorded as a refused
    /// request's at the last message sent, and the request prepared again with it, once (the
    /// replay asks again only for the first refusal of a request).
    fn refused(&mut self, input_tokens: u64) -> bool {
        self.state
            .record_refusal(usize::try_from(input_tokens).unwrap_or(usize::MAX))
    }

    fn prepare<'h>(
        &mut self,
        history: &'h [Message],
        now_ms: Option<u64>,
        model: &Model<'_>,
    ) -> Result<Prepared<'h>, ReplayError> {
        self.compactor.price_as(model.prices);
        self.compactor.cache_lives(model.cache_lifetime_minutes);
        if let Some(now) = now_ms {
            self.clock.0.store(now, Ordering::Relaxed);
        }
        let mut conversation = Conversation::new(history.to_vec());
        // As the harness's request names them: the compactor reads the cache it goes to from
        // its model, and fits the reply's limit to the window.
        let mut envelope = condense_core::JsonMap::new();
        if let Some(name) = model.answering {
            envelope.insert("model".to_owned(), name.into());
        }
        envelope.insert("max_tokens".to_owned(), model.max_output_tokens.into());
        conversation.envelope = Some(envelope);
        let noting = Noting {
            inner: self.compactor.summarizer(),
            counter: self.compactor.counter(),
            requests: self.requests,
            noted: Mutex::new(None),
        };
        let compaction = self
            .runtime
            .block_on(
                self.compactor
                    .prepare_with(conversation, &mut self.state, &noting),
            )
            .map_err(|error| ReplayError::Policy {
                policy: self.name.clone(),
                message: error.to_string(),
            })?;
        let noted = noting.noted.into_inner().ok().flatten();
        let report = &compaction.report;
        let summarizer = match &report.compaction {
            CompactionOutcome::Summarized {
                split,
                summary_tokens,
                ..
            } => Some(SummarizerCall {
                input: match noted {
                    _ if self.requests.local => SummarizerInput::Local,
                    Some(Noted::Forked(request)) => SummarizerInput::Forked(request),
                    Some(Noted::Separate(tokens)) => SummarizerInput::Separate(tokens),
                    // A summary made without the summarizer's hook: its head, as it stands.
                    None => SummarizerInput::Separate(split.head_tokens),
                },
                output_tokens: *summary_tokens,
            }),
            _ => None,
        };
        Ok(Prepared {
            reply_limit: report.reply_limit.map(|limit| limit.sent as usize),
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
