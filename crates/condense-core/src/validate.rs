use std::collections::HashMap;
use std::fmt;

use serde::Serialize;

use crate::{Message, Part};

/// One problem with a conversation's tool pairs. Validation reports; it never panics or repairs,
/// because real sessions carry these defects (an interrupted call has no result) and the phases
/// must work around them rather than refuse the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The message the problem is in.
    pub message: usize,
    #[serde(flatten)]
    /// What is wrong.
    pub kind: FindingKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
/// The ways tool calls and results can fail to pair up.
pub enum FindingKind {
    /// A result whose call is nowhere in the conversation.
    ResultWithoutCall {
        /// The call id.
        call_id: String,
    },
    /// A call that no result answers.
    CallWithoutResult {
        /// The call id.
        call_id: String,
    },
    /// A second call with an id already used by the call in `first`.
    DuplicateCallId {
        /// The call id.
        call_id: String,
        /// The message of the first one.
        first: usize,
    },
    /// A second result for a call already answered in `first`.
    DuplicateResult {
        /// The call id.
        call_id: String,
        /// The message of the first one.
        first: usize,
    },
    /// A result that comes before its call (in message `call`).
    ResultBeforeCall {
        /// The call id.
        call_id: String,
        /// The message holding the call.
        call: usize,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.message;
        match &self.kind {
            FindingKind::ResultWithoutCall { call_id } => {
                write!(f, "message {m}: tool result for `{call_id}` has no call")
            }
            FindingKind::CallWithoutResult { call_id } => {
                write!(f, "message {m}: tool call `{call_id}` has no result")
            }
            FindingKind::DuplicateCallId { call_id, first } => write!(
                f,
                "message {m}: tool call id `{call_id}` is already used in message {first}"
            ),
            FindingKind::DuplicateResult { call_id, first } => write!(
                f,
                "message {m}: tool call `{call_id}` was already answered in message {first}"
            ),
            FindingKind::ResultBeforeCall { call_id, call } => write!(
                f,
                "message {m}: tool result for `{call_id}` comes before its call in message {call}"
            ),
        }
    }
}

/// Every problem with the tool pairs of `messages`, ordered by message index.
pub fn validate(messages: &[Message]) -> Vec<Finding> {
    let mut calls: HashMap<&str, usize> = HashMap::new();
    let mut results: HashMap<&str, usize> = HashMap::new();
    let mut findings = Vec::new();

    for (index, message) in messages.iter().enumerate() {
        for part in &message.parts {
            if let Part::ToolCall(call) = part {
                match calls.get(call.id.as_str()) {
                    Some(&first) => findings.push(Finding {
                        message: index,
                        kind: FindingKind::DuplicateCallId {
                            call_id: call.id.clone(),
                            first,
                        },
                    }),
                    None => {
                        calls.insert(&call.id, index);
                    }
                }
            }
        }
    }

    for (index, message) in messages.iter().enumerate() {
        for part in &message.parts {
            let Part::ToolResult(result) = part else {
                continue;
            };
            let id = result.call_id.as_str();
            if let Some(&first) = results.get(id) {
                findings.push(Finding {
                    message: index,
                    kind: FindingKind::DuplicateResult {
                        call_id: id.to_owned(),
                        first,
                    },
                });
                continue;
            }
            results.insert(id, index);
            match calls.get(id) {
                None => findings.push(Finding {
                    message: index,
                    kind: FindingKind::ResultWithoutCall {
                        call_id: id.to_owned(),
                    },
                }),
                Some(&call) if call > index => findings.push(Finding {
                    message: index,
                    kind: FindingKind::ResultBeforeCall {
                        call_id: id.to_owned(),
                        call,
                    },
                }),
                Some(_) => {}
            }
        }
    }

    let mut unanswered_reported = std::collections::HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        for part in &message.parts {
            if let Part::ToolCall(call) = part
                && !results.contains_key(call.id.as_str())
                && unanswered_reported.insert(call.id.as_str())
            {
                findings.push(Finding {
                    message: index,
                    kind: FindingKind::CallWithoutResult {
                        call_id: call.id.clone(),
                    },
                });
            }
        }
    }

    findings.sort_by_key(|finding| finding.message);
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;
    use crate::test_parts::{call, result};

    fn assistant(parts: Vec<Part>) -> Message {
        Message::new(Role::Assistant, parts)
    }

    fn tool(parts: Vec<Part>) -> Message {
        Message::new(Role::Tool, parts)
    }

    #[test]
    fn a_well_formed_conversation_has_no_findings() {
        let messages = vec![
            Message::text(Role::User, "hi"),
            assistant(vec![call("a"), call("b")]),
            tool(vec![result("a")]),
            tool(vec![result("b")]),
        ];
        assert_eq!(validate(&messages), vec![]);
    }

    #[test]
    fn each_defect_is_reported_with_its_message_index() {
        let messages = vec![
            tool(vec![result("early")]),
            assistant(vec![call("early"), call("dup"), call("lonely")]),
            tool(vec![result("dup"), result("orphan")]),
            assistant(vec![call("dup")]),
            tool(vec![result("dup")]),
        ];
        let found: Vec<String> = validate(&messages)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            vec![
                "message 0: tool result for `early` comes before its call in message 1",
                "message 1: tool call `lonely` has no result",
                "message 2: tool result for `orphan` has no call",
                "message 3: tool call id `dup` is already used in message 1",
                "message 4: tool call `dup` was already answered in message 2",
            ]
        );
    }

    #[test]
    fn a_call_without_result_is_reported_once_even_when_its_id_repeats() {
        let messages = vec![assistant(vec![call("x"), call("x")])];
        let kinds: Vec<FindingKind> = validate(&messages).into_iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            vec![
                FindingKind::DuplicateCallId {
                    call_id: "x".into(),
                    first: 0
                },
                FindingKind::CallWithoutResult {
                    call_id: "x".into()
                },
            ]
        );
    }
}
