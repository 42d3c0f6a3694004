//! A head as plain text turns for a remote model.
//!
//! The head is sent as text, not as the provider's tool-call objects: a server would want the
//! tool definitions to accept those, and some (llama.cpp, Ollama) handle them poorly. Tool outputs
//! are cut to a configurable size with a marker; most of their bulk says little about the work.

use condense_core::{Message, Part, Role, ToolPairs};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Speaker {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Turn {
    pub speaker: Speaker,
    pub text: String,
}

impl Turn {
    pub(crate) fn user(text: impl Into<String>) -> Turn {
        Turn {
            speaker: Speaker::User,
            text: text.into(),
        }
    }
}

/// One turn per message that says anything.
pub(crate) fn flatten(head: &[Message], tool_output_chars: usize) -> Vec<Turn> {
    let pairs = ToolPairs::index(head);
    let mut turns = Vec::with_capacity(head.len());
    for message in head {
        let mut pieces = Vec::new();
        for part in &message.parts {
            match part {
                Part::Text(text) if !text.text.trim().is_empty() => pieces.push(text.text.clone()),
                Part::Image(_) => pieces.push("[image]".to_owned()),
                Part::ToolCall(call) if !call.embedded => {
                    let input = call
                        .raw_input
                        .clone()
                        .unwrap_or_else(|| call.input.to_string());
                    pieces.push(format!("[called {} with {}]", call.name, cut(&input, 500)));
                }
                Part::ToolResult(result) => {
                    let tool = pairs.tool_name(head, result).unwrap_or("a tool");
                    let failed = if result.is_error == Some(true) {
                        ", failed"
                    } else {
                        ""
                    };
                    pieces.push(format!(
                        "[output of {tool}{failed}]\n{}",
                        cut(&result.content.text(), tool_output_chars)
                    ));
                }
                _ => {}
            }
        }
        if pieces.is_empty() {
            continue;
        }
        let speaker = if message.role == Role::Assistant {
            Speaker::Assistant
        } else {
            Speaker::User
        };
        turns.push(Turn {
            speaker,
            text: pieces.join("\n\n"),
        });
    }
    turns
}

/// Consecutive turns of one speaker joined, and a user turn first, as Anthropic requires (and
/// every chat model handles best).
pub(crate) fn alternate(turns: Vec<Turn>) -> Vec<Turn> {
    let mut out: Vec<Turn> = Vec::with_capacity(turns.len());
    for turn in turns {
        match out.last_mut() {
            Some(last) if last.speaker == turn.speaker => {
                last.text.push_str("\n\n");
                last.text.push_str(&turn.text);
            }
            None if turn.speaker == Speaker::Assistant => {
                out.push(Turn::user("(The conversation so far:)"));
                out.push(turn);
            }
            _ => out.push(turn),
        }
    }
    out
}

/// At most `limit` characters of `text`; a cut one ends with a marker saying how much went.
pub(crate) fn cut(text: &str, limit: usize) -> String {
    condense_text::cut(
        text,
        condense_text::Limit::Chars(limit),
        condense_text::Marker::Count(|left| format!("\n[… {left} more characters cut]")),
    )
    .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_outputs_are_cut_with_a_marker() {
        assert_eq!(cut("abcdef", 4), "abcd\n[… 2 more characters cut]");
        assert_eq!(cut("abc", 4), "abc");
    }

    #[test]
    fn turns_alternate_and_start_with_the_user() {
        let turns = alternate(vec![
            Turn {
                speaker: Speaker::Assistant,
                text: "a".into(),
            },
            Turn::user("b"),
            Turn::user("c"),
        ]);
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[0].speaker, Speaker::User);
        assert_eq!(turns[2].text, "b\n\nc");
    }
}
