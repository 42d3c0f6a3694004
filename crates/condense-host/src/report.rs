use condense_compact::Split;
use condense_pruner::PruneReport;
use serde::Serialize;

use crate::usage::Measure;

/// What phase 2 did, or why it did not run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CompactionOutcome {
    /// Only phase 1 was asked for.
    PruneOnly,
    /// After pruning the conversation is under the threshold.
    NotDue,
    /// Due, but the tail is everything after the pinned messages: there is no head.
    NothingToCompact {
        /// What was cut, the request being over the window with nothing to summarize: calls'
        /// inputs, protected tools' outputs and inputs, the person's messages, as a compaction
        /// still over the window cuts them (the person's first message, a pasted report and a
        /// screenshot, more than a window its system prompt nearly fills holds).
        #[serde(default, skip_serializing_if = "is_zero")]
        cut_to_fit: usize,
    },
    /// Due, but the head is only an earlier summary and the messages it carries (protected
    /// outputs, recent user turns): a new summary would fold the old one into itself and change
    /// the bytes of every request after it for nothing.
    NothingNew {
        /// Outputs of the tail cut to previews for it to fit its budget, as a summary's tail
        /// would have them ([`Split::previews`]); the earlier summary stands.
        previewed_outputs: usize,
        /// What was cut besides, the request being over the window even so: as
        /// [`CompactionOutcome::NothingToCompact`]'s `cut_to_fit`.
        #[serde(default, skip_serializing_if = "is_zero")]
        cut_to_fit: usize,
    },
    /// Due, but automatic compaction stopped for this session after repeated failures.
    CircuitOpen {
        /// Failures in a row.
        consecutive_failures: u32,
    },
    /// The summarizer failed; the conversation is the pruned one.
    Failed {
        /// The summarizer.
        summarizer: String,
        /// What kind of failure, to match on.
        kind: FailureKind,
        /// Why it failed, in words.
        error: String,
        /// Failures in a row, this one included.
        consecutive_failures: u32,
    },
    /// The head was summarized.
    Summarized {
        /// The summarizer.
        summarizer: String,
        /// Where the conversation was cut.
        split: Split,
        /// Protected outputs and recent user turns from the head, kept verbatim after the summary.
        carried_messages: usize,
        /// Protected tools' calls of the head left to the summary: more than the room the tail
        /// leaves, the newest were carried and these, the oldest, were not (a request the
        /// provider refuses keeps nothing; [`condense_compact::newest_within`]).
        #[serde(default, skip_serializing_if = "is_zero")]
        protected_summarized: usize,
        /// Outputs of the tail cut to previews for it to fit its budget ([`Split::previews`]):
        /// the last exchange's, each alone over the budget (the tail always holds the last
        /// exchange), or the recent calls' over their share ([`condense_compact::TailRule`]).
        #[serde(skip_serializing_if = "is_zero")]
        previewed_outputs: usize,
        /// Tool calls of the tail before its last exchange whose inputs were cut to previews
        /// for the tail to fit its budget, before any output was: what the agent wrote (a Write's
        /// file, an Edit's strings) is on disk and stored, what it read is not
        /// ([`condense_pruner::Pruner::preview_inputs`]).
        #[serde(default, skip_serializing_if = "is_zero")]
        tail_inputs: usize,
        /// Tool calls of the tail whose inputs were cut to previews, the summary shrunk and the
        /// outputs cut, for the request to fit the window at all
        /// ([`condense_pruner::Pruner::preview_inputs`]): what the agent itself sent in its last
        /// exchange (a whole file given to a Write) in a window its system prompt and tools
        /// nearly fill.
        #[serde(default, skip_serializing_if = "is_zero")]
        previewed_inputs: usize,
        /// Outputs of protected tools in the tail, and then their calls' inputs, cut to previews,
        /// everything else that may be cut cut, for the request to fit the window at all
        /// ([`condense_pruner::Pruner::preview_protected_to_fit`],
        /// [`condense_pruner::Pruner::preview_protected_inputs`]).
        #[serde(default, skip_serializing_if = "is_zero")]
        previewed_protected: usize,
        /// Messages of the person's in the tail cut, with everything else cut, for the request
        /// to fit the window at all: their images left out, then their longest texts cut to
        /// previews, the whole message stored ([`condense_pruner::Pruner::preview_person_to_fit`]).
        #[serde(default, skip_serializing_if = "is_zero")]
        cut_person: usize,
        /// The summary's tokens.
        summary_tokens: usize,
        /// Template sections the summary lacked.
        missing_sections: Vec<String>,
        /// Why the model's answer was rejected (twice), when it was: the extractive summary
        /// stood in for it (`summarizer.on_bad_answer = "extractive"`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rejected: Option<String>,
        /// Made before the window needed it, because it costs less than carrying the head
        /// ([`condense_compact::pays_to_compact`]).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        early: bool,
        /// Made early where the provider's cache held nothing of the request: it had expired
        /// since the previous request (`compaction.cache_lifetime_minutes`), or the request
        /// went to a model or with a system prompt or tools none of the session's requests
        /// within that lifetime had. The request was to be written to the cache whole anyway,
        /// so the compaction rewrote nothing a warm cache held
        /// ([`condense_compact::pays_at_a_cold_cache`]).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cache_cold: bool,
    },
}

/// Why phase 2 failed, as data: a harness tells a missing key from a server that refused or a
/// request over the summarizing model's window without parsing the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// The summarizer failed.
    Summarizer(condense_summarize::SummarizeErrorKind),
    /// The summary came back but does not fit the template.
    BadSummary,
}

/// Everything one call did, with the tokens before and after each phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactReport {
    /// Whether an earlier summary's head was put back in place, or dropped because the client's
    /// history no longer starts with it; absent when the session has none.
    #[serde(flatten)]
    pub head: Option<crate::HeadOutcome>,
    /// The trigger's count before anything was done, and where it came from.
    pub measured: Measure,
    /// Compaction is due at this many tokens (`context_window - reserved`, or more where the
    /// session's usage shows a system prompt and tools that leave the reply's reserve little
    /// else: then a share of what they leave, the rest the reply's).
    pub usable: usize,
    /// Tokens of the request as received, before anything was done (a frozen summary put back
    /// included), by the tokenizer.
    pub tokens_before: usize,
    /// Phase 1's report.
    pub prune: PruneReport,
    /// Tokens after phase 1.
    pub tokens_after_prune: usize,
    /// What phase 2 did.
    pub compaction: CompactionOutcome,
    /// Tokens of the result.
    pub tokens_after: usize,
    /// The result as the trigger measures it (`measured`'s source): the provider's count
    /// scaled by what condense's count went down by, or condense's count. `under_threshold`
    /// is judged on this, so a request is never called over the threshold on one measure
    /// and left alone on another.
    pub due_after: usize,
    /// Whether the result is under the threshold; when it is not, `note` says why. A compaction
    /// that does not get under is reported, never retried in a loop.
    pub under_threshold: bool,
    /// Why the result is still over the threshold, when it is.
    pub note: Option<String>,
    /// How long the call took.
    pub elapsed_ms: u64,
    /// The provider's own compaction the history carries, when it does: the messages before it
    /// were left as they came, neither counted nor touched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeCompaction>,
    /// The reply's limit the request named, lowered to the room its input leaves in the
    /// window, where it named more ([`crate::ReplyLimit`]): a provider refuses a request whose
    /// input and reply limit together exceed its window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_limit: Option<crate::ReplyLimit>,
}

/// A provider's compaction item or block in the history ([`condense_core::LiveView`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NativeCompaction {
    /// The message that carries it, in the client's history.
    pub at_message: usize,
    /// The messages before it, which the provider ignores and condense passes on unchanged.
    pub ignored_messages: usize,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}
