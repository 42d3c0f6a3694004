//! Compaction policies: what a harness does to its history before each request.
//!
//! A policy sees the history as the harness recorded it up to a request and returns that
//! request's input as the policy would have sent it. It keeps its own state from one request to
//! the next, as the harness it models does: outputs once cleared stay cleared, a summary stands
//! in for the head from the request it was made for onwards.

mod claude_code;
mod condense;
mod hermes;
mod none;
mod opencode;
mod recorded;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use condense_core::{Message, Part, Role, ToolOutput, ToolPairs};
use condense_summarize::{Extractive, ExtractiveSettings};
use condense_template::Template;
use condense_tokenizer::TokenCounter;

use crate::ReplayError;
use crate::prompt::Calibration;

#[cfg(test)]
pub(crate) use claude_code::SUMMARY_INTRO;
pub use claude_code::{
    ClaudeCode, FILES_TO_RESTORE, RESTORE_BUDGET, TOKENS_PER_FILE, restored_files,
};
pub use condense::{Condense, SummaryRequests};
pub use hermes::Hermes;
pub use none::NoCompaction;
pub use opencode::OpenCode;
pub use recorded::Recorded;

/// The policies `condense replay` knows by name, in the order it shows them. `condense` (and a
/// second configuration, `condense-b`) needs a configured [`condense_host::Compactor`]: see
/// [`Condense::new`].
pub const NAMES: [&str; 6] = [
    "recorded",
    "none",
    "claude-code",
    "opencode",
    "hermes",
    "condense",
];

/// The policy called `name`, other than condense's own; `None` for an unknown name.
pub fn named(name: &str, counter: Arc<dyn TokenCounter>) -> Option<Box<dyn Policy>> {
    Some(match name {
        "recorded" => Box::new(Recorded),
        "none" => Box::new(NoCompaction),
        "claude-code" => Box::new(ClaudeCode::new(counter)),
        "opencode" => Box::new(OpenCode::new(counter)),
        "hermes" => Box::new(Hermes::new(counter)),
        _ => return None,
    })
}

/// What a policy knows of the model it prepares requests for.
#[derive(Clone, Copy)]
pub struct Model<'a> {
    /// Counts messages (with its cache: policies count the same messages again and again).
    pub counter: &'a dyn TokenCounter,
    /// The context window, in the provider's tokens.
    pub context_window: usize,
    /// The most the model writes in one reply.
    pub max_output_tokens: usize,
    /// condense's counts in the provider's tokens, with the prompt the log does not show.
    pub calibration: &'a Calibration,
    /// The prices the replay bills at, in cache reads a token
    /// ([`crate::PriceTable::cache_prices`]): condense weighs its early compactions with them.
    pub prices: condense_host::CachePrices,
    /// How long the replay's cache keeps a prompt after its last use (`--ttl`), in minutes:
    /// condense compacts at a cache it knows has expired.
    pub cache_lifetime_minutes: u64,
    /// The model the request goes to, where the log names the one that answered it: the
    /// provider keeps a cache per model, and the request names its model on the wire.
    pub answering: Option<&'a str>,
    /// How long a model's summary runs in this session, where the log holds the harness's own
    /// ([`crate::SummaryLength`]): the policies whose summary a model writes size their
    /// stand-ins by it.
    pub summary_length: Option<&'a crate::SummaryLength>,
}

impl std::fmt::Debug for Model<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("context_window", &self.context_window)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("calibration", &self.calibration)
            .finish_non_exhaustive()
    }
}

impl Model<'_> {
    /// What the provider would count for a request of `messages`: the thresholds of every
    /// harness are measured on the provider's usage, which this stands for.
    pub fn tokens(&self, messages: &[Message]) -> usize {
        let counted: usize = self.counter.count_each(messages).iter().sum();
        (self.calibration.hidden_prefix + self.calibration.scaled(counted)) as usize
    }
}

/// One request's input, as a policy would send it.
#[derive(Debug, Clone, Default)]
pub struct Prepared<'h> {
    /// The messages sent: borrowed from the history when the policy changed nothing.
    pub input: Cow<'h, [Message]>,
    /// The summarizer call made before it, when the policy summarized for this request.
    pub summarizer: Option<SummarizerCall>,
    /// Outputs the policy cleared or pruned for this request (not counting earlier ones kept
    /// cleared).
    pub pruned_outputs: usize,
    /// The reply's limit the request went out with, where the policy lowered it below the
    /// model's [`Model::max_output_tokens`] for the request to fit the window (condense's,
    /// [`condense_host::ReplyLimit`]); `None`: the model's, as every harness asks.
    pub reply_limit: Option<usize>,
}

/// A summarizer call: a request of its own.
#[derive(Debug, Clone)]
pub struct SummarizerCall {
    /// What it sent.
    pub input: SummarizerInput,
    /// The summary's tokens (condense's count).
    pub output_tokens: usize,
}

/// How a summarizer call's input relates to the agent's requests.
#[derive(Debug, Clone)]
pub enum SummarizerInput {
    /// The agent's own messages with the summary prompt after them (Claude Code's cache-sharing
    /// fork): it reads the agent's cached prefix.
    Forked(Vec<Message>),
    /// A prompt of its own (the head flattened into one text, another system prompt): this many
    /// condense tokens, sharing nothing with the cache.
    Separate(usize),
    /// No request at all: the summary was written where the policy runs (condense's extractive
    /// summarizer), so the provider bills nothing for it.
    Local,
}

/// A compaction policy, replayed request by request.
pub trait Policy {
    /// Its name in reports (`recorded`, `claude-code`, …).
    fn name(&self) -> &str;

    /// The input of the request whose recorded history is `history` (everything before the
    /// answer), sent at `now_ms` when the log records times.
    fn prepare<'h>(
        &mut self,
        history: &'h [Message],
        now_ms: Option<u64>,
        model: &Model<'_>,
    ) -> Result<Prepared<'h>, ReplayError>;

    /// Whether it sends what the harness sent, the harness's own compactions included: only
    /// `recorded` does. Every other policy is asked what it would have sent had the harness
    /// never compacted on its own, and is given the history without what the harness wrote
    /// when it did ([`crate::Recording::history`]).
    fn follows_the_harness(&self) -> bool {
        false
    }

    /// What the provider reported for the request just prepared: its input and output tokens.
    /// A harness that reads the provider's usage (condense's proxy does) calibrates its next
    /// trigger with it; the others ignore it.
    fn observe(&mut self, _input_tokens: u64, _output_tokens: u64) {}

    /// The provider refused the request just prepared as longer than the window, counting its
    /// input at `input_tokens`: whether the policy prepares it again, with that count, and
    /// sends it once more (condense's proxy does, once: a harness meets the refusal). A policy
    /// that does not leaves the request failed.
    fn refused(&mut self, _input_tokens: u64) -> bool {
        false
    }
}

/// The part of the history a harness still sends: copies of the messages it made or froze
/// (`front`: the system prompt, a summary), then the recorded history from `from` on, with the
/// outputs it cleared replaced by their placeholders.
#[derive(Debug, Clone, Default)]
pub(crate) struct Live {
    pub front: Vec<Message>,
    pub from: usize,
    /// Cleared outputs by call id, and what stands in for each.
    pub cleared: HashMap<String, String>,
}

impl Live {
    /// A view that sends the history as it is: nothing made, frozen or cleared yet.
    pub fn new() -> Self {
        Live::default()
    }

    /// What is sent now: the history itself while the policy has changed nothing.
    pub fn input<'h>(&self, history: &'h [Message]) -> Cow<'h, [Message]> {
        let from = self.from.min(history.len());
        if self.front.is_empty() && self.cleared.is_empty() {
            return Cow::Borrowed(&history[from..]);
        }
        let mut input = self.front.clone();
        input.extend(
            history[self.from.min(history.len())..]
                .iter()
                .map(|message| {
                    let mut message = message.clone();
                    if !self.cleared.is_empty() {
                        for part in &mut message.parts {
                            if let Part::ToolResult(result) = part
                                && let Some(placeholder) = self.cleared.get(&result.call_id)
                            {
                                result.content = ToolOutput::Text(placeholder.clone());
                            }
                        }
                    }
                    message
                }),
        );
        Cow::Owned(input)
    }

    /// After a summary of everything sent so far: the leading System messages, then `summary`.
    pub fn summarized(&mut self, history: &[Message], summary: Vec<Message>) {
        let system: Vec<Message> = self
            .input(history)
            .iter()
            .take_while(|message| message.role == Role::System)
            .cloned()
            .collect();
        self.front = system;
        self.front.extend(summary);
        self.from = history.len();
    }
}

/// One tool output of a request's input.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    /// The message that holds it.
    pub message: usize,
    /// Its call's id.
    pub call_id: String,
    /// The tool that produced it ("" when its call is not in the input).
    pub tool: String,
    /// Characters of its text.
    pub chars: usize,
}

/// The tool outputs of `messages`, in order.
pub(crate) fn outputs(messages: &[Message]) -> Vec<Output> {
    let pairs = ToolPairs::index(messages);
    let mut found = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        for part in &message.parts {
            if let Part::ToolResult(result) = part {
                found.push(Output {
                    message: index,
                    call_id: result.call_id.clone(),
                    tool: pairs
                        .tool_name(messages, result)
                        .unwrap_or_default()
                        .to_owned(),
                    chars: result.content.text().chars().count(),
                });
            }
        }
    }
    found
}

/// The built-in templates the stand-ins for a model's summary are written with: Claude Code's
/// prompt asks for the detailed one's sections, opencode's and hermes-agent's for the
/// structured one's.
pub(crate) const STAND_IN_TEMPLATES: [&str; 2] = ["detailed", "structured"];

/// The extractive summary of `head` with the built-in template `template`; `None` when there is
/// nothing in it to summarize.
pub(crate) fn summary_of(
    head: &[Message],
    template: &str,
    counter: std::sync::Arc<dyn TokenCounter>,
) -> Result<Option<String>, ReplayError> {
    let template = Template::builtin(template).map_err(|error| ReplayError::Policy {
        policy: template.to_owned(),
        message: error.to_string(),
    })?;
    let mut settings = ExtractiveSettings::built_in().map_err(|error| ReplayError::Policy {
        policy: "extractive summary".to_owned(),
        message: error.to_string(),
    })?;
    settings.counter = counter;
    match Extractive::new(template, settings).summary_of(head) {
        Ok(summary) => Ok(Some(summary)),
        Err(condense_summarize::SummarizeError::NothingToSummarize) => Ok(None),
        Err(error) => Err(ReplayError::Policy {
            policy: "extractive summary".to_owned(),
            message: error.to_string(),
        }),
    }
}

/// The numbers of the opencode/hermes pruning walk.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WalkLimits<'a> {
    /// Everything after this many user turns from the end is skipped (0: only the last message).
    pub skip_user_turns: usize,
    /// The newest outputs up to this many estimated tokens stay.
    pub protect: usize,
    /// Older ones are pruned only if together they come to more than this.
    pub minimum: usize,
    /// Tools whose outputs are never pruned.
    pub protected: &'a [&'a str],
}

impl Live {
    /// The opencode/hermes pruning walk: from the newest output back, past the skip boundary,
    /// the newest `protect` tokens of outputs stay (tokens estimated as characters ÷ 4, as both
    /// do) and older ones are candidates; an output already cleared ends the walk (what is older
    /// was dealt with). The candidates are cleared, each with `placeholder(its characters)`, if
    /// together they come to more than the minimum. Returns how many were cleared.
    pub fn prune(
        &mut self,
        history: &[Message],
        walk: WalkLimits<'_>,
        placeholder: impl Fn(usize) -> String,
    ) -> usize {
        let input = self.input(history);
        let found = outputs(&input);
        let mut turns = 0;
        let boundary = input.iter().enumerate().rev().find(|(_, message)| {
            if message.is_user_turn() {
                turns += 1;
            }
            turns >= walk.skip_user_turns
        });
        let Some((boundary, _)) = boundary else {
            return 0;
        };
        let mut kept = 0;
        let mut pruned = 0;
        let mut candidates = Vec::new();
        for output in found.iter().rev().filter(|o| o.message < boundary) {
            if self.cleared.contains_key(&output.call_id) {
                break;
            }
            if walk.protected.contains(&output.tool.as_str()) {
                continue;
            }
            let tokens = output.chars / 4;
            kept += tokens;
            if kept > walk.protect {
                pruned += tokens;
                candidates.push((output.call_id.clone(), output.chars));
            }
        }
        if pruned <= walk.minimum {
            return 0;
        }
        let count = candidates.len();
        for (id, chars) in candidates {
            self.cleared.insert(id, placeholder(chars));
        }
        count
    }
}

/// The latest cut at or before `at` after which every tool result still has its call: a cut
/// between a call and its result moves back to take the call along.
pub(crate) fn pair_safe_start(messages: &[Message], mut at: usize) -> usize {
    let pairs = ToolPairs::index(messages);
    loop {
        let moved = messages[at.min(messages.len())..].iter().any(|message| {
            message.parts.iter().any(|part| {
                part.as_tool_result().is_some_and(|result| {
                    pairs
                        .call_site(&result.call_id)
                        .is_some_and(|call| call.message < at)
                })
            })
        });
        if !moved || at == 0 {
            return at;
        }
        at -= 1;
    }
}
