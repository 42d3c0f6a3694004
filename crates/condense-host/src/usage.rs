//! What the conversation costs, as the trigger should see it.
//!
//! Another model family tokenizes differently: on one real Claude Code session o200k counts 79K
//! tokens of text where Anthropic reported 119K of input. When the provider's usage is known, the
//! trigger uses the last reported total plus the exact count of what came after it (as opencode,
//! pi and Codex do); otherwise the tokenizer's count. A reported figure that our count of the same
//! messages contradicts by more than a factor of two is stale and ignored.

use condense_core::{Conversation, Role};
use condense_tokenizer::TokenCounter;
use serde::Serialize;

use crate::state::{Counted, ReportedUsage, Sample};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
/// How the trigger measured the conversation.
pub enum Measure {
    /// With condense's tokenizer.
    Tokenizer {
        /// The count: the messages, and the tool definitions the request carries beside them.
        tokens: usize,
        /// Of that count, the tool definitions' (the envelope's `tools`, or `functions`, as the
        /// JSON they are sent as): until the provider reports a figure, the only part of its
        /// fixed prefix condense can see.
        #[serde(default, skip_serializing_if = "is_zero")]
        tools: usize,
    },
    /// With the provider's own count from the session's last reported usage.
    ProviderUsage {
        /// The provider's count plus condense's count of what came after.
        tokens: usize,
        /// What the provider reported.
        reported: usize,
        /// The message that carried it.
        at_message: usize,
        /// Condense's count of the messages after it.
        counted_after: usize,
    },
}

/// Whether a count is nothing, for the report to leave it out.
fn is_zero(count: &usize) -> bool {
    *count == 0
}

impl Measure {
    /// The count the trigger uses.
    pub fn tokens(&self) -> usize {
        match self {
            Measure::Tokenizer { tokens, .. } | Measure::ProviderUsage { tokens, .. } => *tokens,
        }
    }
}

/// condense's count of the tool definitions `conversation`'s request carries beside its
/// messages (its envelope's `tools`, or Chat Completions' older `functions`), as the JSON they
/// are sent as. The provider counts them in every request (Claude Code's take 12K-28K tokens),
/// and before its first figure the trigger has no other account of them: a resumed session's
/// first request, measured without them, went out over the window. Providers render the
/// definitions their own way (OpenAI's in fewer tokens than the JSON, Anthropic's in more,
/// with a preamble); the JSON is what condense can count.
pub fn tools_tokens(conversation: &Conversation, counter: &dyn TokenCounter) -> usize {
    let Some(envelope) = conversation.envelope.as_ref() else {
        return 0;
    };
    ["tools", "functions"]
        .into_iter()
        .filter_map(|key| envelope.get(key))
        .filter(|tools| tools.as_array().is_some_and(|tools| !tools.is_empty()))
        // Looked up by the value's structure: a harness sends the same definitions on every
        // request, and they are not written out and counted again.
        .map(|tools| counter.count_json(tools))
        .sum()
}

/// The provider's count of a session's requests as a line in condense's count of their
/// messages: `provider = fixed + scale × ours`. `fixed` is what every request carries beyond its
/// messages (tool definitions, a system prompt sent apart), `scale` the provider's tokenizer
/// against condense's. One request alone cannot tell the two apart; two of different sizes can.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Line {
    /// Tokens every request carries beyond its messages.
    pub fixed: f64,
    /// The provider's tokens per condense token.
    pub scale: f64,
    /// The longest reply the agent wrote in the session, in the provider's tokens
    /// ([`Line::with_reply`]): the least [`Line::limit`] leaves the reply.
    pub reply: f64,
}

impl Line {
    /// The line through `sample` (this request's, whose system prompt and tools hash to
    /// `prefix`) and whichever of the session's counted requests of the same prefix is farther
    /// from it; where that one is too close in size for the slope to mean anything (within a
    /// quarter of the larger, or [`MIN_SPREAD`] tokens), the line through the session's
    /// smallest and largest, the farthest apart of its requests. (A session that compacts
    /// often sends requests of much the same size: its line was lost on every request between
    /// two far apart.) `None` when no two are apart, when the slope is not a tokenizer's
    /// ([`SCALES`]), or when the line puts less than nothing beyond the messages: then the
    /// request is sized by its own figure ([`Line::of_one`]).
    pub fn through(counted: Option<&Counted>, sample: Sample, prefix: u64) -> Option<Line> {
        let counted = counted.filter(|counted| counted.prefix == prefix)?;
        let other = [counted.smallest, counted.largest]
            .into_iter()
            .max_by_key(|other| other.ours.abs_diff(sample.ours))?;
        if apart(other, sample) {
            Line::between(other, sample)
        } else if apart(counted.smallest, counted.largest) {
            Line::between(counted.smallest, counted.largest)
        } else {
            None
        }
    }

    /// The line through two requests apart in size ([`apart`]), where its slope is a
    /// tokenizer's and it puts something beyond the messages.
    fn between(other: Sample, sample: Sample) -> Option<Line> {
        let scale = (sample.provider as f64 - other.provider as f64)
            / (sample.ours as f64 - other.ours as f64);
        if !SCALES.contains(&scale) {
            return None;
        }
        let fixed = sample.provider as f64 - scale * sample.ours as f64;
        (fixed > 0.0).then_some(Line {
            fixed,
            scale,
            reply: 0.0,
        })
    }

    /// The line through one request's `sample`, until two of the session's are far enough
    /// apart to give the slope ([`Line::through`]): everything the provider counted beyond
    /// condense's count of the same messages is the fixed part (a system prompt, tool
    /// definitions), at condense's scale. Taken as scaled with the conversation instead, a
    /// prefix that fills most of the window seemed to shrink with it: a compaction judged to
    /// fit left the reply less than its reserve, and a reply cut short there was cut again
    /// when the client sent the request once more. Where the provider's tokenizer counts more,
    /// the fixed part holds that excess of the messages counted, and a compaction keeps less,
    /// not more, than fits. `None` where the provider counted no more than condense.
    pub fn of_one(sample: Sample) -> Option<Line> {
        let fixed = sample.provider as f64 - sample.ours as f64;
        (fixed > 0.0).then_some(Line {
            fixed,
            scale: 1.0,
            reply: 0.0,
        })
    }

    /// The line before the provider has reported anything: condense's own count, beside the
    /// tool definitions the request carries (`tools`, [`tools_tokens`]), the one fixed part
    /// condense can count. `None` where there are none: the request is its messages.
    pub fn of_tools(tools: usize) -> Option<Line> {
        (tools > 0).then_some(Line {
            fixed: tools as f64,
            scale: 1.0,
            reply: 0.0,
        })
    }

    /// The line, with the longest of the agent's replies in the session: `tokens`, condense's
    /// count, taken to the provider's.
    pub fn with_reply(self, tokens: usize) -> Line {
        Line {
            reply: self.scale * tokens as f64,
            ..self
        }
    }

    /// The line, the reply given at least `floor` tokens ([`crate::SessionState::reply_floor`]).
    pub fn with_reply_floor(self, floor: usize) -> Line {
        Line {
            reply: self.reply.max(floor as f64),
            ..self
        }
    }

    /// The provider's count at which a request is due for compaction: `usable`, the window less
    /// the reply's reserve, unless the fixed part leaves the conversation less than
    /// [`CONVERSATION_SHARE`] of what it leaves of the `window`; then that share, or less where
    /// the rest would not hold the longest reply the agent has written ([`Line::reply`]). The
    /// provider takes a request its window holds; one that reserves the whole reply where the
    /// system prompt and tools leave little more than it can hold no conversation at all, while
    /// the agent's replies take a few hundred tokens. Where one took more (a whole file written in
    /// one call), the next may as well, and a reply cut short is an answer the agent never got.
    pub fn limit(&self, usable: usize, window: usize) -> usize {
        let left = window as f64 - self.fixed;
        if left <= 0.0 {
            return usable;
        }
        let reply = (left * (1.0 - CONVERSATION_SHARE)).max(self.reply);
        let shared = (window as f64 - reply).floor().max(0.0) as usize;
        usable.max(shared)
    }
}

/// The share of what the fixed part leaves of the window that a request's conversation may
/// take before compaction is due, where the reply's full reserve would leave it less
/// ([`Line::limit`]); the rest is the reply's, a few hundred tokens where the window is that
/// tight. A trade between requests lost and what the others keep, measured on the shared
/// sessions at 16K-24K windows and on Claude Code 2.1 logs at 32K (BENCHMARKS.md, "A system
/// prompt that fills the window"): the reply's whole reserve loses the fewest requests there
/// (at 16K-24K 5 against 19, on the replay before it sent a cut answer's request again, which
/// brought three quarters to 10, and before a request sent again after a cut made the reply
/// its room where nothing was new, which brought it to 6) and keeps the least (88.4 % against
/// 93.9 %), a half lies between. Since that last change three quarters fails no request where
/// another policy finishes, on the shared sessions or the unseen ones. Three quarters
/// takes effect only where the prefix leaves less than four times the reply's reserve: a
/// Claude Code 1.0 session's 12K-15K at 32K is untouched, Claude Code 2.1's 26K is not.
pub(crate) const CONVERSATION_SHARE: f64 = 0.75;

/// Requests closer in size than this are not taken to fit a [`Line`]: one message's tokenizer
/// ratio would be the slope.
const MIN_SPREAD: usize = 500;

/// Whether two requests are far enough apart in size for the line through them to be the
/// provider's: [`MIN_SPREAD`] tokens and a quarter of the larger.
fn apart(one: Sample, other: Sample) -> bool {
    let spread = one.ours.abs_diff(other.ours);
    spread >= MIN_SPREAD && spread.saturating_mul(4) >= one.ours.max(other.ours)
}

/// The most a provider's tokenizer is taken to count per condense token before a session's
/// figures give its [`Line`]: Claude's counts 1.45 of o200k's on the shared sessions (the
/// widest apart of the models condense sizes for), and this leaves a little over it. Used only
/// for the margin a lowered reply limit leaves (`crate::reply`); a wrong guess there cuts a
/// reply or sends a request the provider refuses, as not lowering it would.
pub(crate) const MOST_SCALE: f64 = 1.5;

/// The provider's tokens per condense token a [`Line`] may have: the tokenizers of the models
/// condense sizes for differ by well under twice (o200k against Claude's: 1.45 on the shared
/// sessions); a slope outside this is noise, or a system prompt that changed between them.
const SCALES: std::ops::RangeInclusive<f64> = 0.5..=3.0;

/// A hash of what `conversation`'s request carries beside its conversation: its leading system
/// messages (not condense's summary among them) and its envelope's tool definitions
/// ([`Counted::prefix`]).
pub(crate) fn prefix_of(conversation: &Conversation) -> u64 {
    let mut state = xxhash_rust::xxh3::Xxh3::new();
    conversation
        .messages
        .iter()
        .take_while(|message| message.role == Role::System)
        .filter(|message| !message.is_compaction_summary())
        .for_each(|message| message.hash_content(&mut state));
    if let Some(tools) = conversation
        .envelope
        .as_ref()
        .and_then(|envelope| envelope.get("tools"))
    {
        // Written into the hash as serialized, not collected first: a harness's tool list runs
        // to tens of kilobytes on every request.
        let _ = serde_json::to_writer(Hashing(&mut state), tools);
    }
    std::hash::Hasher::finish(&state)
}

/// The cache a request of `conversation` with `prefix` ([`prefix_of`]) reads: a provider keeps
/// one per model, and a prefix that differs shares none of what follows it.
pub(crate) fn cache_key(conversation: &Conversation, prefix: u64) -> u64 {
    let mut state = xxhash_rust::xxh3::Xxh3::new();
    state.update(conversation.model().unwrap_or_default().as_bytes());
    state.update(&prefix.to_le_bytes());
    std::hash::Hasher::finish(&state)
}

/// The bytes written to it, into the hash.
struct Hashing<'h>(&'h mut xxhash_rust::xxh3::Xxh3);

impl std::io::Write for Hashing<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The request's size as the provider counted it and as condense counts the same messages,
/// from `measured` (a provider's figure) and the trigger's `due` (that figure plus condense's
/// count of what came after) against condense's count `ours` of the whole request: the two
/// differ by what the provider counted beyond condense's count of the messages it covered.
pub(crate) fn sample(measured: &Measure, due: usize, ours: usize) -> Option<Sample> {
    match *measured {
        Measure::ProviderUsage { reported, .. } => Some(Sample {
            ours: (reported + ours).checked_sub(due)?,
            provider: reported,
        }),
        Measure::Tokenizer { .. } => None,
    }
}

/// The trigger's measure `due` (the provider's figure for the messages it counted, plus
/// condense's count of those after them, `counts` each message's) with the part condense counted
/// taken to the provider's tokens by the session's `line`, where there is one and it counts
/// more. The messages
/// since the provider's last figure are often a large tool output, and a tokenizer that counts
/// 40 % more than condense's (Claude's against o200k on the shared sessions) put a request the
/// provider counted over its window under condense's threshold.
pub(crate) fn in_providers(
    measured: &Measure,
    due: usize,
    counts: &[usize],
    line: Option<Line>,
) -> usize {
    match (measured, line) {
        (Measure::ProviderUsage { at_message, .. }, Some(line)) => {
            let after: usize = counts
                .get(at_message + 1..)
                .unwrap_or_default()
                .iter()
                .sum();
            // Never fewer than condense's own count: a line that says the provider counts
            // less is as likely a session whose figures confound it (outputs cut between two
            // requests), and a request counted short goes out over the window.
            let more = (line.scale - 1.0).max(0.0) * after as f64;
            (due as f64 + more).round() as usize
        }
        _ => due,
    }
}

/// `counts` are the conversation's messages' counts, in order, before pruning; `replaced_before`
/// gives the tokens of outputs up to a message that earlier requests replaced (frozen
/// decisions), which the harness's figure never counted; `tools` is the tool definitions' count
/// ([`tools_tokens`]), part of the measure where there is no figure. The flag says the figure is the
/// harness's own report (`reported`), not one found in the log.
pub(crate) fn measure(
    conversation: &Conversation,
    reported: Option<ReportedUsage>,
    counts: &[usize],
    replaced_before: impl Fn(usize) -> usize,
    tools: usize,
) -> (Measure, bool) {
    let ours_to = |usage: &ReportedUsage| counts[..=usage.message].iter().sum::<usize>();
    // The harness's figure is for the request it sent, which may carry much the conversation
    // does not (tool definitions, a system prompt): only one far below our count is wrong.
    // The log's own figure may be from before a compaction: stale in both directions.
    let harness = reported
        .and_then(|usage| {
            let last = conversation.messages.len().checked_sub(1)?;
            let message = if usage.unanswered {
                // What the provider refused, or answered with a reply cut short, comes again as
                // the client sent it (or goes on after it): its figure
                // covers every message (and a continuation condense appended, which the
                // client's do not hold). A history shorter than that is another request.
                if usage.message > last + 1 {
                    return None;
                }
                usage.message.min(last)
            } else if usage.message <= last {
                answer_end(conversation, answer_at(conversation, usage.message))
            } else {
                return None;
            };
            Some(ReportedUsage { message, ..usage })
        })
        .filter(|usage| {
            usage.tokens.saturating_mul(2)
                >= ours_to(usage).saturating_sub(replaced_before(usage.message))
        });
    let from_harness = harness.is_some();
    let usage = harness.or_else(|| {
        last_reported(conversation, counts).filter(|usage| plausible(usage.tokens, ours_to(usage)))
    });
    let measure = match usage {
        Some(usage) => {
            let counted_after: usize = counts[usage.message + 1..].iter().sum();
            Measure::ProviderUsage {
                tokens: usage.tokens + counted_after,
                reported: usage.tokens,
                at_message: usage.message,
                counted_after,
            }
        }
        None => Measure::Tokenizer {
            tokens: condense_tokenizer::conversation_total(counts) + tools,
            tools,
        },
    };
    (measure, from_harness)
}

/// Where the answer a harness reported usage for sits in this history. The harness gives the
/// length of the request it sent, where the answer follows it; but a request that made a summary
/// also carried the continuation message condense appended, which the client's next history
/// does not hold, so there the answer is one earlier. Counting from the wrong place left the
/// message after the answer (often a large tool result) out of the trigger's measure.
fn answer_at(conversation: &Conversation, message: usize) -> usize {
    let role = |index: usize| conversation.messages.get(index).map(|m| m.role);
    if role(message) != Some(Role::Assistant)
        && message > 0
        && role(message - 1) == Some(Role::Assistant)
    {
        message - 1
    } else {
        message
    }
}

/// The last message of the answer that starts at `message`. A provider's one answer may come
/// back in the client's next history as several assistant messages in a row (the Responses
/// API's output items: a reasoning item, then each function call), and its figure, input and
/// output, covers them all: counted from the first, the trigger counted the others again (a
/// large `apply_patch` twice). No harness puts an assistant message of its own between an
/// answer and the tool results or the person's message that follow it.
fn answer_end(conversation: &Conversation, message: usize) -> usize {
    let assistant =
        |index: usize| conversation.messages.get(index).map(|m| m.role) == Some(Role::Assistant);
    let mut end = message;
    while assistant(end) && assistant(end + 1) {
        end += 1;
    }
    end
}

/// A count a log recorded more than twice ours (or under half) for the same messages is not a
/// tokenizer difference but a stale figure: the conversation was compacted since the provider
/// counted it (the tail keeps the messages, and their usage, from before).
fn plausible(reported: usize, ours: usize) -> bool {
    reported <= ours.saturating_mul(2) && reported.saturating_mul(2) >= ours
}

/// The last figure the log holds ([`condense_formats::logged_usage`]: Claude Code's on the
/// assistant line, Codex's beside it): the request's whole input, cache reads and writes
/// included, and the reply, which the next request sends too. Where Claude Code 2 wrote the
/// results of a reply's calls between its lines, the reply is several messages with those
/// results among them, which neither figure counts: they are counted here (`counts`, each
/// message's), so that the measure up to the reply's last message holds them.
fn last_reported(conversation: &Conversation, counts: &[usize]) -> Option<ReportedUsage> {
    condense_formats::logged_usage(conversation)
        .last()
        .map(|usage| {
            let between: usize = (usage.first..usage.answer)
                .filter(|&index| {
                    conversation.messages.get(index).map(|m| m.role) != Some(Role::Assistant)
                })
                .filter_map(|index| counts.get(index))
                .sum();
            let reported = usize::try_from(usage.input + usage.output).unwrap_or(usize::MAX);
            ReportedUsage::answered(usage.answer, reported.saturating_add(between))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::Message;
    use condense_tokenizer::{Tiktoken, TokenCounter};

    fn conversation() -> Conversation {
        Conversation::new(vec![
            Message::text(Role::User, "fix the parser ".repeat(200)),
            Message::text(Role::Assistant, "done ".repeat(100)),
            Message::text(Role::User, "thanks"),
        ])
    }

    /// A harness's figure far above our count is the request's tool definitions and system
    /// prompt, not a stale figure: it is used.
    #[test]
    fn a_harness_figure_above_twice_ours_is_the_request_s_overhead_and_is_used() {
        let counter = Tiktoken::default();
        let conversation = conversation();
        let ours: usize = counter.count_each(&conversation.messages)[..=1]
            .iter()
            .sum();
        let reported = ReportedUsage::answered(1, ours * 3 + 15_000);
        let (measured, from_harness) = measure(
            &conversation,
            Some(reported),
            &counter.count_each(&conversation.messages),
            |_| 0,
            0,
        );
        assert!(from_harness);
        assert!(
            matches!(measured, Measure::ProviderUsage { reported: r, .. } if r == reported.tokens),
            "{measured:?}"
        );
        // One far below ours is not a count of these messages.
        let low = ReportedUsage::answered(1, ours / 3);
        assert!(matches!(
            measure(
                &conversation,
                Some(low),
                &counter.count_each(&conversation.messages),
                |_| 0,
                0,
            ),
            (Measure::Tokenizer { .. }, false)
        ));
    }

    /// A refused request's figure covers every message the request carried, the last among
    /// them (an answered one stands at its answer, and a figure after the last message of a
    /// request that ends with the person's is the answer's: one earlier): nothing is counted
    /// after it. Sent with a continuation the client's history does not hold, it still covers
    /// that history; for a history shorter than that, it is another request's.
    #[test]
    fn a_refused_request_s_figure_covers_every_message_it_carried() {
        let counter = Tiktoken::default();
        let conversation = conversation();
        let counts = counter.count_each(&conversation.messages);
        let measured =
            |usage: ReportedUsage| measure(&conversation, Some(usage), &counts, |_| 0, 0).0;
        for message in [2, 3] {
            assert_eq!(
                measured(ReportedUsage::unanswered(message, 40_000)),
                Measure::ProviderUsage {
                    tokens: 40_000,
                    reported: 40_000,
                    at_message: 2,
                    counted_after: 0,
                }
            );
        }
        assert!(matches!(
            measured(ReportedUsage::unanswered(4, 40_000)),
            Measure::Tokenizer { .. }
        ));
        // Taken as an answer's, the figure would stand one earlier and count the last message
        // again.
        assert!(matches!(
            measured(ReportedUsage::answered(2, 40_000)),
            Measure::ProviderUsage { at_message: 1, counted_after, .. } if counted_after == counts[2]
        ));
    }

    /// An answer the client's next history holds as several assistant messages (the Responses
    /// API's reasoning item and two function calls) is one answer: its figure, which counted
    /// them as output, stands at the last of them, and only the tool results after them are
    /// counted. A figure for an answer of one message is where it was.
    #[test]
    fn an_answer_of_several_assistant_messages_is_covered_by_its_figure() {
        let counter = Tiktoken::default();
        let call = |id: &str| {
            Message::new(
                Role::Assistant,
                vec![condense_core::testing::tool_call(
                    id,
                    "apply_patch",
                    serde_json::json!({"input": "+ line\n".repeat(400)}),
                )],
            )
        };
        let result = |id: &str| {
            Message::new(
                Role::Tool,
                vec![condense_core::testing::tool_result(id, "Done!")],
            )
        };
        let answered = Conversation::new(vec![
            Message::text(Role::User, "fix the parser ".repeat(200)),
            Message::text(Role::Assistant, "thinking about the parser"),
            call("call_1"),
            call("call_2"),
            result("call_1"),
            result("call_2"),
        ]);
        let counts = counter.count_each(&answered.messages);
        let (measured, _) = measure(
            &answered,
            Some(ReportedUsage::answered(1, 9_000)),
            &counts,
            |_| 0,
            0,
        );
        assert_eq!(
            measured,
            Measure::ProviderUsage {
                tokens: 9_000 + counts[4] + counts[5],
                reported: 9_000,
                at_message: 3,
                counted_after: counts[4] + counts[5],
            }
        );
        // One assistant message followed by the person's: the figure stands at it.
        let plain = conversation();
        let counts = counter.count_each(&plain.messages);
        assert!(matches!(
            measure(
                &plain,
                Some(ReportedUsage::answered(1, 2_000)),
                &counts,
                |_| 0,
                0,
            )
            .0,
            Measure::ProviderUsage { at_message: 1, .. }
        ));
    }

    /// A Codex log's usage sits beside the messages, after the answer it accounts for; the
    /// trigger counts from there, as from a Claude Code line's.
    #[test]
    fn a_usage_record_beside_the_messages_is_the_providers_count() {
        let counter = Tiktoken::default();
        let mut conversation = conversation();
        let ours: usize = counter.count_each(&conversation.messages)[..=1]
            .iter()
            .sum();
        let input = ours as u64 + 300;
        conversation.side.push(condense_core::SideRecord {
            kind: condense_core::SideKind::Other,
            before_message: 2,
            value: serde_json::json!({"type": "token_usage_record", "payload": {"usage": {
                "input_tokens": input, "cached_input_tokens": 100, "output_tokens": 20,
            }}}),
        });
        let counts = counter.count_each(&conversation.messages);
        let (measured, from_harness) = measure(&conversation, None, &counts, |_| 0, 0);
        assert!(!from_harness);
        assert_eq!(
            measured,
            Measure::ProviderUsage {
                tokens: input as usize + 20 + counts[2],
                reported: input as usize + 20,
                at_message: 1,
                counted_after: counts[2],
            }
        );
    }

    fn at(ours: usize, provider: usize) -> Sample {
        Sample { ours, provider }
    }

    /// A provider that counts 14,000 tokens of system prompt and tools and 1.5 of its tokens
    /// for each of condense's: two requests of different sizes give both back, whichever of the
    /// session's smallest and largest is the farther from this one.
    #[test]
    fn two_requests_part_the_fixed_prefix_from_the_tokenizer_s_scale() {
        let provider = |ours: usize| 14_000 + ours * 3 / 2;
        let counted = Counted::with(None, at(2_000, provider(2_000)), 7);
        let counted = Counted::with(Some(counted), at(10_000, provider(10_000)), 7);
        assert_eq!(counted.smallest, at(2_000, 17_000));
        assert_eq!(counted.largest, at(10_000, 29_000));
        for ours in [1_000, 6_000, 12_000] {
            let line = Line::through(Some(&counted), at(ours, provider(ours)), 7).unwrap();
            assert!((line.fixed - 14_000.0).abs() < 1e-6, "{line:?}");
            assert!((line.scale - 1.5).abs() < 1e-9, "{line:?}");
        }
    }

    /// A request too close in size to both the session's smallest and largest (2,500 between
    /// 2,000 and 3,000, as a session that compacts often sends them) is sized by the line through
    /// those two, which are apart; with them too close as well, by none.
    #[test]
    fn a_request_between_two_apart_is_sized_by_their_line() {
        let provider = |ours: usize| 16_000 + ours * 3 / 2;
        let counted = Counted::with(None, at(2_000, provider(2_000)), 7);
        let counted = Counted::with(Some(counted), at(3_000, provider(3_000)), 7);
        let line = Line::through(Some(&counted), at(2_500, provider(2_500)), 7).unwrap();
        assert!((line.fixed - 16_000.0).abs() < 1e-6, "{line:?}");
        assert!((line.scale - 1.5).abs() < 1e-9, "{line:?}");
        let close = Counted::with(None, at(2_000, provider(2_000)), 7);
        let close = Counted::with(Some(close), at(2_400, provider(2_400)), 7);
        assert_eq!(
            Line::through(Some(&close), at(2_200, provider(2_200)), 7),
            None
        );
    }

    /// No line from one request, from two too close in size for the slope to be the
    /// tokenizer's, from a slope no tokenizer has (a system prompt that changed between them),
    /// or from one that leaves nothing beyond the messages.
    #[test]
    fn a_line_needs_two_requests_apart_and_a_tokenizer_s_slope() {
        let one = Counted::with(None, at(8_000, 26_000), 7);
        assert_eq!(Line::through(None, at(8_000, 26_000), 7), None);
        assert_eq!(Line::through(Some(&one), at(8_000, 26_000), 7), None);
        // 400 tokens apart, and 1,000 apart out of 8,000: too close.
        assert_eq!(Line::through(Some(&one), at(8_400, 26_600), 7), None);
        assert_eq!(Line::through(Some(&one), at(7_000, 24_500), 7), None);
        // 4,000 apart: the line.
        assert!(Line::through(Some(&one), at(4_000, 20_000), 7).is_some());
        // A slope of 5 and one of 0.1.
        assert_eq!(Line::through(Some(&one), at(4_000, 6_000), 7), None);
        assert_eq!(Line::through(Some(&one), at(4_000, 25_600), 7), None);
        // Twice condense's count and nothing else.
        let scaled = Counted::with(None, at(8_000, 16_000), 7);
        assert_eq!(Line::through(Some(&scaled), at(4_000, 8_000), 7), None);
    }

    /// One request's figure alone sizes it by what the provider counted beyond condense's
    /// count, fixed, at condense's scale; a figure no larger than condense's count gives none.
    #[test]
    fn one_figure_is_a_fixed_part_beside_the_messages() {
        let line = Line::of_one(at(8_000, 26_000)).unwrap();
        assert_eq!((line.fixed, line.scale), (18_000.0, 1.0));
        // The prefix leaves 14,000 of a 32,000 window: the conversation may take three
        // quarters of it, beside the 18,000, where the reply's whole reserve would leave less.
        assert_eq!(line.limit(27_904, 32_000), 28_500);
        assert_eq!(Line::of_one(at(8_000, 8_000)), None);
        assert_eq!(Line::of_one(at(8_000, 6_000)), None);
    }

    /// A request whose system prompt or tools changed (another prefix) is not put on a line
    /// with the requests before it: the anchors start again from it.
    #[test]
    fn a_changed_prefix_starts_the_line_afresh() {
        let before = |ours: usize| 14_000 + ours * 3 / 2;
        let after = |ours: usize| 18_000 + ours * 3 / 2;
        let counted = Counted::with(None, at(2_000, before(2_000)), 7);
        let counted = Counted::with(Some(counted), at(10_000, before(10_000)), 7);
        assert!(Line::through(Some(&counted), at(6_000, after(6_000)), 7).is_some());
        assert_eq!(
            Line::through(Some(&counted), at(6_000, after(6_000)), 8),
            None
        );
        let counted = Counted::with(Some(counted), at(6_000, after(6_000)), 8);
        assert_eq!(
            (counted.smallest, counted.largest),
            (at(6_000, 27_000), at(6_000, 27_000))
        );
        let counted = Counted::with(Some(counted), at(12_000, after(12_000)), 8);
        let line = Line::through(Some(&counted), at(1_000, after(1_000)), 8).unwrap();
        assert!((line.fixed - 18_000.0).abs() < 1e-6, "{line:?}");
    }

    /// What came after the provider's last figure is taken to its tokens by the session's line:
    /// 1,000 of condense's tokens after the figure's message, at 1.4 the provider's per token,
    /// are 1,400 of the provider's. Without a line, or without a figure, the measure is as it
    /// came.
    #[test]
    fn what_came_after_the_provider_s_figure_is_counted_at_its_scale() {
        let measured = Measure::ProviderUsage {
            tokens: 21_000,
            reported: 20_000,
            at_message: 1,
            counted_after: 1_000,
        };
        let line = Line {
            fixed: 6_000.0,
            scale: 1.4,
            reply: 0.0,
        };
        let counts = [9_000, 1_000, 600, 400];
        assert_eq!(in_providers(&measured, 21_000, &counts, Some(line)), 21_400);
        // Pruning took 400 of them off: what is left of them is scaled.
        assert_eq!(
            in_providers(&measured, 20_600, &[9_000, 1_000, 600, 0], Some(line)),
            20_840
        );
        assert_eq!(in_providers(&measured, 21_000, &counts, None), 21_000);
        // A line that counts fewer than condense (figures confounded by cuts between requests)
        // leaves condense's own count.
        let fewer = Line {
            scale: 0.85,
            ..line
        };
        assert_eq!(
            in_providers(&measured, 21_000, &counts, Some(fewer)),
            21_000
        );
        let counted = Measure::Tokenizer {
            tokens: 11_000,
            tools: 0,
        };
        assert_eq!(in_providers(&counted, 11_000, &counts, Some(line)), 11_000);
    }

    /// Compaction is due at the window less the reply's reserve, unless the fixed part would
    /// leave the conversation less than three quarters of what it leaves of the window.
    #[test]
    fn the_limit_is_the_usable_window_unless_the_prefix_leaves_the_reply_all_of_it() {
        let line = |fixed| Line {
            fixed,
            scale: 1.4,
            reply: 0.0,
        };
        // 32K, 4,096 reserved: 28,672 usable. A 14K prefix leaves the reserve's worth and more.
        assert_eq!(line(14_000.0).limit(28_672, 32_768), 28_672);
        // A 28K prefix leaves 4,768: three quarters of it, 3,576, is the conversation's.
        assert_eq!(line(28_000.0).limit(28_672, 32_768), 31_576);
        // A prefix the window cannot hold: the usable window still.
        assert_eq!(line(40_000.0).limit(28_672, 32_768), 28_672);
        // An agent that wrote a reply of 2,000 condense tokens (2,800 the provider's) keeps
        // that room for the next: 29,968 of the window, not 31,576, is the conversation's.
        assert_eq!(
            line(28_000.0).with_reply(2_000).limit(28_672, 32_768),
            29_968
        );
        // A reply longer than the reserve changes nothing: the usable window still.
        assert_eq!(
            line(28_000.0).with_reply(4_000).limit(28_672, 32_768),
            28_672
        );
    }

    /// The sample of a request: the provider's figure, and condense's count of what it covered
    /// (the trigger's measure less what came after).
    #[test]
    fn a_sample_is_the_provider_s_figure_against_condense_s_count_of_the_same() {
        let measured = Measure::ProviderUsage {
            tokens: 20_500,
            reported: 20_000,
            at_message: 3,
            counted_after: 500,
        };
        assert_eq!(
            sample(&measured, 20_500, 6_500),
            Some(Sample {
                ours: 6_000,
                provider: 20_000
            })
        );
        assert_eq!(
            sample(
                &Measure::Tokenizer {
                    tokens: 900,
                    tools: 0
                },
                900,
                900
            ),
            None
        );
    }

    /// Claude Code 2 writes each call of a reply on a line of its own with its result right
    /// after it, so a reply of two reads is two assistant messages with the first read's
    /// output between them. The log's figure (the reply's input and output) holds neither
    /// output, so the measure counts both: the one between as well as the one after, which
    /// before was left out of the trigger's measure, however large. (The log as the agent
    /// left it while the reply's calls ran: the shared fixture without its last line.)
    #[test]
    fn a_result_between_the_lines_of_one_reply_is_in_the_measure() {
        let log = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../condense-formats/tests/data/claude-code-2.1-parallel-reads.jsonl"),
        )
        .unwrap();
        let lines: Vec<&str> = log.lines().collect();
        let running = lines[..lines.len() - 1].join("\n");
        let (_, conversation) = condense_formats::read(
            running.as_bytes(),
            Some(condense_formats::Format::ClaudeCode),
        )
        .unwrap();
        let counter = Tiktoken::default();
        let counts = counter.count_each(&conversation.messages);
        let (measured, from_harness) = measure(&conversation, None, &counts, |_| 0, 0);
        assert!(!from_harness);
        let Measure::ProviderUsage {
            tokens, at_message, ..
        } = measured
        else {
            panic!("{measured:?}")
        };
        assert_eq!(at_message, 3);
        // The reply's figure (input 2,503, output 40), then the output between its lines and
        // the one after it.
        assert_eq!(tokens, 2_503 + 40 + counts[2] + counts[4]);
        assert!(counts[2] > 3_000, "{counts:?}");
    }
}
