use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{JsonMap, Message, ToolPairs};

/// What a wire record that is not part of the main thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideKind {
    /// A subagent's line (Claude Code's `isSidechain: true`): never mixed into the main thread.
    Sidechain,
    /// A session title line (Claude Code's `type: summary`).
    Summary,
    /// A notice from the client (Claude Code's `type: system`).
    System,
    /// Anything else the reader did not recognise.
    Other,
}

/// A wire record kept beside the conversation so that writing the session back loses nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideRecord {
    /// What kind of record it is.
    pub kind: SideKind,
    /// How many main-thread messages came before this record on the wire; a writer puts it back
    /// at that point.
    pub before_message: usize,
    /// The record as it came, written back unchanged.
    pub value: Value,
}

/// A session: the main thread as messages, plus what a writer needs to put it back on the wire.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Conversation {
    /// The messages, in order.
    pub messages: Vec<Message>,
    /// The top-level object the messages were found in, without them (OpenAI's other keys,
    /// Anthropic's `model` and `max_tokens`). `None` when the file was a bare array of messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<JsonMap>,
    /// Records that are not main-thread messages: sidechains, titles, client notices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side: Vec<SideRecord>,
}

impl Conversation {
    /// A conversation of these messages, with no envelope or side records.
    pub fn new(messages: Vec<Message>) -> Self {
        Conversation {
            messages,
            envelope: None,
            side: Vec::new(),
        }
    }

    /// The model the request names (its envelope's `model`), if it names one: what sizes it
    /// (`[models]`) and whom an upstream summarizer asks.
    pub fn model(&self) -> Option<&str> {
        self.envelope.as_ref()?.get("model")?.as_str()
    }

    /// How many messages it has.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether it has no message.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Indices of the messages that are user turns, oldest first.
    pub fn user_turns(&self) -> Vec<usize> {
        crate::user_turns(&self.messages)
    }

    /// The index of calls and results by id.
    pub fn tool_pairs(&self) -> ToolPairs<'_> {
        ToolPairs::index(&self.messages)
    }

    /// Every problem with the conversation's tool pairs, each with the message it is in.
    pub fn validate(&self) -> Vec<crate::Finding> {
        crate::validate(&self.messages)
    }
}
