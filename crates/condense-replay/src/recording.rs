//! The requests a harness made, read back from its saved session.
//!
//! Every assistant message (or run of them: a Responses answer is several items) is the answer
//! to one request, and that request's input was everything before it. Claude Code logs add the time of every line and the provider's own accounting of
//! every request (`message.usage`, one per `message.id`: the reader merges the lines of one reply
//! that follow each other into one message, and a reply whose calls' results Claude Code 2
//! wrote between its lines is one request over its messages, [`condense_formats::reply_id`]);
//! Codex logs the time of every line and a usage record after each answer.

use std::collections::HashMap;

use condense_core::{Conversation, Message, Role};
use condense_formats::HarnessCompaction;
use serde::Serialize;

/// The wire fields of a record that the replay and its policies read (`cwd`: condense's
/// superseded-read rule resolves relative paths with it), beside those that mark a harness's
/// own compaction ([`condense_formats::HARNESS_COMPACTION_FIELDS`]).
const KEPT_FIELDS: &[&str] = &[
    "type",
    "timestamp",
    "cwd",
    "message",
    "isMeta",
    "isSidechain",
];

fn kept(field: &str) -> bool {
    KEPT_FIELDS.contains(&field) || condense_formats::HARNESS_COMPACTION_FIELDS.contains(&field)
}

/// One request of the recorded session: the assistant message (or messages) it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The index of the assistant message that answered it; its input was the messages before.
    pub answer: usize,
    /// The index of the same message in the session as if the harness had never compacted on
    /// its own ([`Recording::history`]): `answer` less the messages it wrote when it did.
    pub uncompacted_answer: usize,
    /// Whether the request was the harness's own summarizer call (its answer is Claude Code's
    /// summary line, or the item Codex logs as its summarizer's answer): only the policy that
    /// follows the harness made it.
    pub harness_summarizer: bool,
    /// The end (exclusive) of its answer: one message, or the run of assistant messages one
    /// answer became (a Responses answer is a list of items: reasoning, a message, calls, each
    /// read as a message of its own), or the messages of one Claude Code reply with the results
    /// its calls got between them (only its assistant messages are its answer).
    pub answer_end: usize,
    /// When it was sent, in milliseconds since the epoch: the time of the last message of its
    /// input (the tool result or the person's message that prompted it), else of the answer.
    /// `None` when the format records no time (the cache then never expires between requests).
    pub time_ms: Option<u64>,
    /// What the provider reported for it, where the log has it.
    pub recorded: Option<RecordedUsage>,
    /// The model that answered, where the log names it (`message.model`). A provider keeps one
    /// cache per model, so a switch (Claude Code falls back from Opus to Sonnet) starts cold.
    pub model: Option<String>,
}

/// The provider's accounting of one request (Anthropic's `usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RecordedUsage {
    /// `input_tokens`: input after the last cache breakpoint, at the full price.
    pub uncached: u64,
    /// `cache_creation_input_tokens`.
    pub cache_write: u64,
    /// `cache_read_input_tokens`.
    pub cache_read: u64,
    /// `output_tokens`.
    pub output: u64,
}

impl RecordedUsage {
    /// All the input the provider counted.
    pub fn input(&self) -> u64 {
        self.uncached + self.cache_write + self.cache_read
    }
}

/// The provider's accounting of each request that the log keeps
/// ([`condense_formats::logged_usage`]), by the index of the first message of the answer it
/// accounts for, in Anthropic's terms (OpenAI counts cached tokens inside its input; here they
/// are taken out).
fn logged_usage(conversation: &Conversation) -> HashMap<usize, RecordedUsage> {
    let mut usage = HashMap::new();
    for logged in condense_formats::logged_usage(conversation) {
        usage.entry(logged.first).or_insert(RecordedUsage {
            uncached: logged.uncached(),
            cache_write: logged.cache_write,
            cache_read: logged.cache_read,
            output: logged.output,
        });
    }
    usage
}

/// A saved session and the requests that made it.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The session as read.
    pub conversation: Conversation,
    /// Its requests, in order.
    pub steps: Vec<Step>,
    /// The session as if the harness had never compacted on its own: the messages without
    /// those it wrote when it did. `None` when it never did.
    uncompacted: Option<Vec<Message>>,
    /// Each summary the harness wrote when it compacted on its own: how many messages of
    /// `uncompacted` came before it, and its index in `conversation`.
    harness_summaries: Vec<(usize, usize)>,
}

impl Recording {
    /// The requests of `conversation`: one per run of assistant messages that has something
    /// before it. A run is one answer, unless a later message in it carries the provider's own
    /// accounting of another request (Claude Code logs one usage per request).
    ///
    /// Each message's wire records keep only what a policy reads (the time, the provider's
    /// usage and model, the harness's own flags): every policy copies the history for every
    /// request, and a Claude Code line's other fields (a second copy of each tool result in
    /// `toolUseResult`, ids, paths) would be copied hundreds of times for nothing.
    ///
    /// A harness that compacted on its own left what it wrote then in its log beside what that
    /// replaced (Claude Code's summary line; Codex's summarizer answer and replacement history,
    /// in a log read with [`condense_formats::read_whole`]): the policies that do not follow
    /// the harness never see them ([`Recording::history`]), and a summarizer answer is the
    /// answer of a request of the harness's own ([`Step::harness_summarizer`]).
    pub fn of(mut conversation: Conversation) -> Recording {
        for message in &mut conversation.messages {
            for record in &mut message.wire {
                record.fields.retain(|key, _| kept(key));
            }
        }
        let logged = logged_usage(&conversation);
        let messages = &conversation.messages;
        let made: Vec<Option<HarnessCompaction>> = messages
            .iter()
            .map(condense_formats::harness_compaction)
            .collect();
        let mut steps: Vec<Step> = Vec::new();
        let mut harness_summaries = Vec::new();
        let mut made_before = 0;
        // The reply id of the last step's answer, where its log names one.
        let mut open_reply: Option<&str> = None;
        for (answer, message) in messages.iter().enumerate() {
            let uncompacted_answer = answer - made_before;
            if made[answer].is_some() {
                made_before += 1;
            }
            if matches!(
                made[answer],
                Some(HarnessCompaction::SummarizerAnswer | HarnessCompaction::Summary)
            ) {
                harness_summaries.push((uncompacted_answer, answer));
            }
            // The answer of the harness's own summarizer: Codex logs it as an item; Claude
            // Code's summary is the answer of its compaction request (the history before it,
            // then its prompt).
            let summarizer = match made[answer] {
                None => false,
                Some(HarnessCompaction::SummarizerAnswer | HarnessCompaction::Summary) => true,
                Some(_) => continue,
            };
            if answer == 0 || (!summarizer && message.role != Role::Assistant) {
                continue;
            }
            // The agent's own words in the assistant's place: no request answered them.
            if condense_formats::is_synthetic_reply(message) {
                continue;
            }
            // The rest of a reply whose first calls' results came before it: the same request.
            let reply = condense_formats::reply_id(message);
            if let Some(last) = steps.last_mut()
                && !summarizer
                && !last.harness_summarizer
                && reply.is_some()
                && reply == open_reply
            {
                last.answer_end = answer + 1;
                continue;
            }
            open_reply = reply;
            let model = condense_formats::answering_model(message);
            let recorded = logged.get(&answer).copied();
            if let Some(last) = steps.last_mut()
                && last.answer_end == answer
                && last.harness_summarizer == summarizer
                && recorded.is_none()
            {
                last.answer_end = answer + 1;
                continue;
            }
            steps.push(Step {
                answer,
                uncompacted_answer,
                answer_end: answer + 1,
                harness_summarizer: summarizer,
                time_ms: messages[answer - 1]
                    .timestamp_ms()
                    .or_else(|| message.timestamp_ms()),
                recorded,
                // A summary line names no model: the harness asked the one it was using, whose
                // cache it reads.
                model: model.map(str::to_owned).or_else(|| {
                    summarizer
                        .then(|| steps.last().and_then(|step| step.model.clone()))
                        .flatten()
                }),
            });
        }
        let uncompacted = made.iter().any(Option::is_some).then(|| {
            messages
                .iter()
                .zip(&made)
                .filter(|(_, made)| made.is_none())
                .map(|(message, _)| message.clone())
                .collect()
        });
        Recording {
            conversation,
            steps,
            uncompacted,
            harness_summaries,
        }
    }

    /// The summaries the harness wrote when it compacted on its own (Claude Code's summary
    /// line, Codex's summarizer answer), each after the session it summarized, as if the
    /// harness had never compacted before it: what its model writes when asked for a summary,
    /// at the point it was asked.
    pub fn harness_summaries(&self) -> impl Iterator<Item = (&[Message], &Message)> {
        self.harness_summaries.iter().map(|&(before, index)| {
            let session = match &self.uncompacted {
                Some(uncompacted) => &uncompacted[..before],
                None => &self.conversation.messages[..before],
            };
            (session, &self.conversation.messages[index])
        })
    }

    /// The history before `step`'s answer: as the harness recorded it, its own compactions
    /// included (for the policy that sends what the harness sent), or as if it had never
    /// compacted on its own (for a policy asked what it would have sent instead).
    pub fn history(&self, step: &Step, with_harness_compactions: bool) -> &[Message] {
        match &self.uncompacted {
            Some(uncompacted) if !with_harness_compactions => {
                &uncompacted[..step.uncompacted_answer]
            }
            _ => &self.conversation.messages[..step.answer],
        }
    }

    /// The steps that carry the provider's accounting.
    pub fn recorded_steps(&self) -> usize {
        self.steps
            .iter()
            .filter(|step| step.recorded.is_some())
            .count()
    }
}

/// Claude Code's summary after it compacted on its own, saying `text`: a user line flagged
/// `isCompactSummary`, as a whole read of its log flags it.
#[cfg(test)]
pub(crate) fn claude_code_summary_line(text: &str) -> Message {
    let mut message = Message::text(Role::User, text);
    let mut fields = condense_core::JsonMap::new();
    fields.insert("type".into(), "user".into());
    fields.insert("isCompactSummary".into(), serde_json::Value::Bool(true));
    fields.insert("condense_restates".into(), serde_json::Value::Bool(true));
    message.wire = vec![condense_core::WireRecord {
        fields,
        parts: 1,
        shape: condense_core::ContentShape::String,
    }];
    message
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::policy::Recorded;

    /// Claude Code's summary after it compacted on its own, after the lines it summarizes.
    fn claude_code_summary() -> Message {
        claude_code_summary_line("This session is being continued.")
    }

    #[test]
    fn a_harness_summary_is_sent_by_the_harness_and_seen_by_no_other_policy() {
        let messages = vec![
            Message::text(Role::System, "You are an agent."),
            Message::text(Role::User, "first task"),
            Message::text(Role::Assistant, "done 1"),
            claude_code_summary(),
            Message::text(Role::Assistant, "done 2"),
            Message::text(Role::User, "next task"),
            Message::text(Role::Assistant, "done 3"),
        ];
        let recording = Recording::of(Conversation::new(messages));
        // The three answers are three requests, and the summary answered Claude Code's own
        // compaction request, which only the policy that follows it makes.
        let answers: Vec<(usize, usize, bool)> = recording
            .steps
            .iter()
            .map(|step| {
                (
                    step.answer,
                    step.uncompacted_answer,
                    step.harness_summarizer,
                )
            })
            .collect();
        assert_eq!(
            answers,
            [(2, 2, false), (3, 3, true), (4, 3, false), (6, 5, false)]
        );
        let last = &recording.steps[3];
        let texts = |history: &[Message]| -> Vec<String> {
            history.iter().map(Message::plain_text).collect()
        };
        // What Claude Code sent: its system prompt, its summary and what followed.
        let sent: Vec<usize> = Recorded::sent(recording.history(last, true)).collect();
        assert_eq!(sent, [0, 3, 4, 5]);
        // What a policy of its own starts from: the session as if Claude Code had not compacted.
        assert_eq!(
            texts(recording.history(last, false)),
            [
                "You are an agent.",
                "first task",
                "done 1",
                "done 2",
                "next task"
            ]
        );
    }

    /// Claude Code 2 writes a reply's calls on lines of their own, each call's result right
    /// after it: the reply reads as several assistant messages with results between them. It
    /// was one request, and its answer is those messages, not the results.
    #[test]
    fn a_reply_whose_results_came_between_its_lines_is_one_request() {
        let log = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../condense-formats/tests/data/claude-code-2.1-parallel-reads.jsonl"),
        )
        .unwrap();
        let (_, conversation) =
            condense_formats::read(&log, Some(condense_formats::Format::ClaudeCode)).unwrap();
        let recording = Recording::of(conversation);
        let steps: Vec<(usize, usize, Option<u64>)> = recording
            .steps
            .iter()
            .map(|step| {
                (
                    step.answer,
                    step.answer_end,
                    step.recorded.map(|usage| usage.output),
                )
            })
            .collect();
        assert_eq!(steps, [(1, 4, Some(40)), (5, 6, Some(5))]);
        assert_eq!(recording.recorded_steps(), 2);
    }

    #[test]
    fn a_session_no_harness_compacted_is_one_history_for_every_policy() {
        let messages = vec![
            Message::text(Role::User, "task"),
            Message::text(Role::Assistant, "done"),
        ];
        let recording = Recording::of(Conversation::new(messages));
        assert!(recording.uncompacted.is_none());
        let step = &recording.steps[0];
        assert_eq!(
            recording.history(step, false).as_ptr(),
            recording.history(step, true).as_ptr()
        );
    }
}
