use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{JsonMap, Part};

/// How a compaction summary opens: phase 2 writes the summary as one System message wrapped in
/// this tag and its closing [`SUMMARY_CLOSE`], and every phase recognises it by that.
pub const SUMMARY_OPEN: &str = "<prior-conversation-summary>";
/// How a compaction summary closes; see [`SUMMARY_OPEN`].
pub const SUMMARY_CLOSE: &str = "</prior-conversation-summary>";

/// The agents whose own compactions leave a summary on the user's side of the history, and the
/// words each opens it with: the summary is all that is left of what came before it, so a
/// compaction after theirs must carry it whole, not quote it as the person's request. Claude
/// Code (1.x: "…ran out of context. The conversation is summarized below:", 2.1.197: "…The
/// summary below covers the earlier portion of the conversation.") and Codex (its summary
/// prefix, `templates/compact/summary_prefix.md`).
pub const HARNESS_SUMMARY_OPENINGS: [(&str, &str); 2] = [
    (
        "Claude Code",
        "This session is being continued from a previous conversation",
    ),
    (
        "Codex",
        "Another language model started to solve this problem and produced a summary",
    ),
];

/// opencode's compaction leaves its summary on the assistant's side instead: the summary is the
/// answer to a user message of exactly these words, which is how opencode renders the
/// `compaction` part of its own request (`message-v2.ts`, `toModelMessages`). On Anthropic's wire
/// (opencode 1.18) the answer and the agent's next step arrive as one assistant message: the
/// summary's text, then the step's tool calls.
pub const OPENCODE_SUMMARY_REQUEST: &str = "What did we do so far?";

/// A summary an agent's own compaction left in a history ([`harness_summary_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HarnessSummary {
    /// The agent that wrote it.
    pub agent: &'static str,
    /// How many leading parts of its message it is: the whole message for a summary on the
    /// user's side; for opencode's, the answer up to the first call of the next step merged in
    /// (its text, after any thinking).
    pub parts: usize,
}

impl HarnessSummary {
    /// The summary's text: its text parts, one per line.
    pub fn text(&self, message: &Message) -> String {
        crate::part::plain_text(&message.parts[..self.parts.min(message.parts.len())])
    }
}

/// Whether `messages` (what follows the system prompt) open with the person's request and then a
/// summary condense wrote for this request: an autonomous run's task kept in front of its
/// summary. The Anthropic writer marks that task for the provider's cache, and the replay's
/// model of a request marks it where the writer does, by this same test.
pub fn task_leads_a_summary_written_here(messages: &[Message]) -> bool {
    matches!(messages, [task, summary, ..] if task.is_user_turn() && summary.is_summary_written_here())
}

/// The summary an agent's own compaction left as `messages[index]`: a user message opening with
/// one of [`HARNESS_SUMMARY_OPENINGS`], or opencode's assistant answer to
/// [`OPENCODE_SUMMARY_REQUEST`] (its leading text). `None` for any other message, and past the
/// end.
pub fn harness_summary_at(messages: &[Message], index: usize) -> Option<HarnessSummary> {
    let message = messages.get(index)?;
    if message.role == Role::User {
        let agent = message.harness_summary()?;
        return Some(HarnessSummary {
            agent,
            parts: message.parts.len(),
        });
    }
    let asked = index
        .checked_sub(1)
        .and_then(|before| messages.get(before))?;
    if message.role != Role::Assistant || !asked.is_summary_request() {
        return None;
    }
    let parts = message
        .parts
        .iter()
        .take_while(|part| !matches!(part, Part::ToolCall(_)))
        .count();
    let summary = HarnessSummary {
        agent: "opencode",
        parts,
    };
    (!summary.text(message).trim().is_empty()).then_some(summary)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
/// Who wrote a message. Tool results that a wire format carries in `user` messages keep the
/// role of their message; [`Message::is_user_turn`] tells a person's message apart.
pub enum Role {
    /// The agent's instructions.
    System,
    /// The person, or the harness speaking for the user side (tool results, notes).
    User,
    /// The model.
    Assistant,
    /// A tool result as its own message (OpenAI `role: tool`).
    Tool,
}

impl Role {
    /// The lowercase name, as the wire formats write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a wire record laid out its `content`, so a writer can reproduce it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentShape {
    /// A list of typed blocks (the general case, and the default for messages condense makes).
    #[default]
    Blocks,
    /// A single string.
    String,
    /// `null`, as OpenAI sends for an assistant message that only calls tools.
    Null,
    /// No `content` key at all.
    Absent,
}

/// One object on the wire that some of a message's parts came from.
///
/// Most formats have one record per message. Claude Code splits one assistant reply over several
/// JSONL lines, so its messages can have several; writing a message back emits one object per
/// record, each with its share of the parts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WireRecord {
    /// The record's fields that the model does not interpret, kept in their original order.
    pub fields: JsonMap,
    /// How many of the message's parts, in order, this record holds.
    pub parts: usize,
    /// How the record laid out its `content`.
    pub shape: ContentShape,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// One message of a conversation: a role and its parts, and how it looked on the wire.
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What it holds, in order.
    pub parts: Vec<Part>,
    /// True for a User message whose text a program wrote rather than a person: a harness's
    /// format-error feedback, Claude Code's meta notes. Such a message is never a user turn.
    #[serde(default)]
    pub generated: bool,
    /// How the message looked on the wire. Empty for messages condense creates; writers then use
    /// the format's plain layout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wire: Vec<WireRecord>,
}

impl Message {
    /// A message condense makes (no wire record): the writers use the plain layout.
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Message {
            role,
            parts,
            generated: false,
            wire: Vec::new(),
        }
    }

    /// A message holding one text part.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message::new(role, vec![Part::text(text)])
    }

    /// A user turn is a User message with something a person wrote in it. Tool results are never
    /// user turns, whatever the wire format put them in, and neither is generated text nor an
    /// earlier compaction's summary (which formats without a place for it carry as user text).
    pub fn is_user_turn(&self) -> bool {
        self.role == Role::User
            && !self.generated
            && !self.is_compaction_summary()
            && self
                .parts
                .iter()
                .any(|part| matches!(part, Part::Text(_) | Part::Image(_)))
    }

    /// A summary condense wrote for the request it is building, not one the client sent back
    /// (it has no wire record yet). The system prompt is the client's: such a summary goes out
    /// after it, as the first user message, and a model of the provider's cache prices it there.
    pub fn is_summary_written_here(&self) -> bool {
        self.is_compaction_summary() && self.wire.is_empty()
    }

    /// A summary that an earlier compaction left (see [`SUMMARY_OPEN`]). The pruner's walk stops
    /// there: what came before it was already dealt with.
    pub fn is_compaction_summary(&self) -> bool {
        self.parts.iter().any(|part| {
            matches!(part, Part::Text(text) if text.text.trim_start().starts_with(SUMMARY_OPEN))
        })
    }

    /// The agent whose own compaction left this user message, its summary
    /// ([`HARNESS_SUMMARY_OPENINGS`]); `None` for any other message.
    pub fn harness_summary(&self) -> Option<&'static str> {
        if self.role != Role::User {
            return None;
        }
        let text = self.parts.iter().find_map(|part| match part {
            Part::Text(text) if !text.text.trim().is_empty() => Some(text.text.trim_start()),
            _ => None,
        })?;
        HARNESS_SUMMARY_OPENINGS
            .iter()
            .find(|(_, opening)| text.starts_with(opening))
            .map(|(agent, _)| *agent)
    }

    /// opencode's request for its own summary ([`OPENCODE_SUMMARY_REQUEST`]): a user message
    /// holding those words and nothing else. It is still a user turn (as an agent's summary is);
    /// only what summarizes the head tells it from the person's requests.
    pub fn is_summary_request(&self) -> bool {
        let texts = || {
            self.parts.iter().map(|part| match part {
                Part::Text(text) => Some(text.text.trim()),
                _ => None,
            })
        };
        self.role == Role::User
            && texts().all(|text| text.is_some())
            && texts()
                .flatten()
                .filter(|text| !text.is_empty())
                .eq([OPENCODE_SUMMARY_REQUEST])
    }

    /// When the message was written, where its format records it (Claude Code's `timestamp` on
    /// every line; the latest of its lines when a reply spans several), in milliseconds since the
    /// epoch. `None` when no record carries a readable one.
    pub fn timestamp_ms(&self) -> Option<u64> {
        self.wire
            .iter()
            .rev()
            .filter_map(|record| record.fields.get("timestamp")?.as_str())
            .find_map(|text| crate::time::parse_rfc3339(text).ok())
    }

    /// The message's own text parts joined by newlines (tool calls and results left out).
    pub fn plain_text(&self) -> String {
        crate::part::plain_text(&self.parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ToolOutput, ToolResult};

    fn tool_result_in(role: Role) -> Message {
        Message::new(
            role,
            vec![Part::ToolResult(ToolResult {
                call_id: "c1".into(),
                content: ToolOutput::Text("file contents".into()),
                is_error: None,
                embedded: false,
                compacted: None,
                extra: JsonMap::new(),
            })],
        )
    }

    #[test]
    fn a_tool_result_is_never_a_user_turn_whatever_the_role() {
        assert!(!tool_result_in(Role::User).is_user_turn());
        assert!(!tool_result_in(Role::Tool).is_user_turn());
    }

    #[test]
    fn a_person_text_is_a_user_turn_even_beside_tool_results() {
        let mut message = tool_result_in(Role::User);
        message.parts.push(Part::text("now run the tests"));
        assert!(message.is_user_turn());
    }

    #[test]
    fn generated_text_and_other_roles_are_not_user_turns() {
        let mut feedback = Message::text(Role::User, "Please provide exactly one action");
        feedback.generated = true;
        assert!(!feedback.is_user_turn());
        assert!(!Message::text(Role::Assistant, "done").is_user_turn());
        assert!(!Message::text(Role::System, "be brief").is_user_turn());
        assert!(Message::text(Role::User, "fix the bug").is_user_turn());
        let summary = Message::text(
            Role::User,
            "<prior-conversation-summary>\n## Goal\n</prior-conversation-summary>",
        );
        assert!(!summary.is_user_turn());
    }

    #[test]
    fn an_agents_own_summary_is_known_by_its_opening_words() {
        for (text, agent) in [
            (
                "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\nSummary: …",
                Some("Claude Code"),
            ),
            (
                "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.",
                Some("Claude Code"),
            ),
            (
                "Another language model started to solve this problem and produced a summary of its thinking process.\nSUMMARY: …",
                Some("Codex"),
            ),
            ("Please summarize this session.", None),
        ] {
            assert_eq!(Message::text(Role::User, text).harness_summary(), agent);
            assert_eq!(Message::text(Role::Assistant, text).harness_summary(), None);
        }
    }

    #[test]
    fn opencodes_summary_is_the_answer_to_its_question() {
        let asked = Message::text(Role::User, OPENCODE_SUMMARY_REQUEST);
        let answer = "## Goal\nFix the parser.";
        // The answer with the agent's next step merged in, as opencode 1.18 sends it.
        let summary = Message::new(
            Role::Assistant,
            vec![
                Part::text(answer),
                Part::ToolCall(crate::ToolCall {
                    id: "toolu_1".into(),
                    name: "bash".into(),
                    input: serde_json::json!({"command": "cargo test"}),
                    raw_input: None,
                    embedded: false,
                    extra: crate::JsonMap::new(),
                }),
            ],
        );
        let history = [
            asked.clone(),
            summary.clone(),
            Message::text(Role::User, "Continue if you have next steps"),
        ];
        let found: Vec<_> = (0..=history.len())
            .map(|index| harness_summary_at(&history, index))
            .collect();
        let opencode = HarnessSummary {
            agent: "opencode",
            parts: 1,
        };
        assert_eq!(found, [None, Some(opencode), None, None]);
        assert_eq!(opencode.text(&summary), answer);
        assert!(history[0].is_summary_request() && !history[2].is_summary_request());
        let blank_beside = Message::new(
            Role::User,
            vec![Part::text(" "), Part::text(OPENCODE_SUMMARY_REQUEST)],
        );
        assert!(blank_beside.is_summary_request());
        let twice = Message::new(
            Role::User,
            vec![
                Part::text(OPENCODE_SUMMARY_REQUEST),
                Part::text(OPENCODE_SUMMARY_REQUEST),
            ],
        );
        assert!(!twice.is_summary_request());

        // Thinking before the answer is no part of its text.
        let thought = Message::new(
            Role::Assistant,
            vec![
                Part::Thinking(crate::Thinking {
                    text: "Summarize.".into(),
                    signature: None,
                    extra: crate::JsonMap::new(),
                }),
                summary.parts[0].clone(),
            ],
        );
        let found = harness_summary_at(&[asked.clone(), thought.clone()], 1).unwrap();
        assert_eq!(found.text(&thought), answer);

        // The same words inside a longer request, an answer that starts with a call or has no
        // text, or an answer at the start of the history are no summary.
        let longer = Message::text(Role::User, "What did we do so far? And what is left?");
        let calling = Message::new(Role::Assistant, summary.parts[1..].to_vec());
        for pair in [
            [longer, summary.clone()],
            [asked.clone(), calling],
            [asked, Message::text(Role::Assistant, " ")],
        ] {
            assert_eq!(harness_summary_at(&pair, 1), None, "{pair:?}");
        }
        assert_eq!(harness_summary_at(&[summary], 0), None);

        // A summary on the user's side is its whole message.
        let codex = Message::text(Role::User, HARNESS_SUMMARY_OPENINGS[1].1);
        assert_eq!(
            harness_summary_at(&[codex], 0),
            Some(HarnessSummary {
                agent: "Codex",
                parts: 1
            })
        );
    }
}
