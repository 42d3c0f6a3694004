//! Tool use carried in plain text, as mini-swe-agent does it: the assistant writes exactly one
//! fenced ```` ```bash ```` block, and the harness answers with a `user` message holding
//! `<returncode>…</returncode>` and the output. Such observations are tool output, not a person's
//! words, so they become tool pairs in the model (the call marked `embedded`, so writers leave
//! the assistant's text alone, and the result written back as the user message's text).
//!
//! The convention is applied only with evidence for it: the envelope names a mini-swe-agent
//! trajectory, or an observation starting with `<returncode>` follows a bash block. An ordinary
//! chat in which a person answers an assistant's shell snippet is left alone.

use condense_core::{ContentShape, JsonMap, Message, Part, Role, ToolCall, ToolOutput, ToolResult};
use serde_json::{Value, json};

const RETURNCODE_OPEN: &str = "<returncode>";
const RETURNCODE_CLOSE: &str = "</returncode>";

/// Returns whether the convention applied (then messages may have changed: a call added to an
/// assistant step, an observation made its result, feedback marked generated).
pub(crate) fn link(messages: &mut [Message], envelope: Option<&JsonMap>) -> bool {
    if !uses_text_tools(messages, envelope) {
        return false;
    }
    for index in 1..messages.len() {
        let (before, after) = messages.split_at_mut(index);
        let previous = &mut before[index - 1];
        let message = &mut after[0];
        if previous.role != Role::Assistant || message.role != Role::User {
            continue;
        }
        let Some(observation) = single_string(message) else {
            continue;
        };
        match single_bash_block(&previous.plain_text()) {
            Some(command) => {
                let call_id = format!("text-call-{}", index - 1);
                previous.parts.push(Part::ToolCall(ToolCall {
                    id: call_id.clone(),
                    name: "bash".into(),
                    input: json!({ "command": command }),
                    raw_input: None,
                    embedded: true,
                    extra: JsonMap::new(),
                }));
                let is_error = return_code(&observation).map(|code| code != 0);
                message.parts = vec![Part::ToolResult(ToolResult {
                    call_id,
                    content: ToolOutput::Text(observation),
                    is_error,
                    embedded: true,
                    compacted: None,
                    extra: JsonMap::new(),
                })];
                sync_part_counts(previous);
                sync_part_counts(message);
            }
            // The harness's feedback on a malformed action ("provide exactly one action"): a
            // program wrote it, so it is not a user turn.
            None => message.generated = true,
        }
    }
    true
}

fn uses_text_tools(messages: &[Message], envelope: Option<&JsonMap>) -> bool {
    let declared = envelope
        .and_then(|envelope| envelope.get("trajectory_format"))
        .and_then(Value::as_str)
        .is_some_and(|format| format.starts_with("mini-swe-agent"));
    declared
        || messages.windows(2).any(|pair| {
            pair[0].role == Role::Assistant
                && pair[1].role == Role::User
                && single_string(&pair[1]).is_some_and(|text| text.starts_with(RETURNCODE_OPEN))
                && single_bash_block(&pair[0].plain_text()).is_some()
        })
}

/// The message's text when it is one plain string on the wire.
fn single_string(message: &Message) -> Option<String> {
    let shape = message.wire.first().map(|record| record.shape);
    match (shape, message.parts.as_slice()) {
        (Some(ContentShape::String), [Part::Text(text)]) => Some(text.text.clone()),
        _ => None,
    }
}

fn sync_part_counts(message: &mut Message) {
    if let [record] = message.wire.as_mut_slice() {
        record.parts = message.parts.len();
    }
}

/// The command in the text's only ```` ```bash ```` block; `None` when there are none or several
/// (mini-swe-agent rejects both).
pub(crate) fn single_bash_block(text: &str) -> Option<String> {
    const FENCE: &str = "```bash";
    let mut commands = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(FENCE) {
        let body = &rest[start + FENCE.len()..];
        let Some(newline) = body.find('\n') else {
            break;
        };
        if !body[..newline].trim().is_empty() {
            rest = &body[newline..];
            continue;
        }
        let body = &body[newline + 1..];
        let Some(end) = body.find("```") else { break };
        commands.push(body[..end].trim_end_matches('\n').to_owned());
        rest = &body[end + 3..];
    }
    match commands.as_slice() {
        [command] => Some(command.clone()),
        _ => None,
    }
}

fn return_code(observation: &str) -> Option<i64> {
    let start = observation.find(RETURNCODE_OPEN)? + RETURNCODE_OPEN.len();
    let end = observation[start..].find(RETURNCODE_CLOSE)? + start;
    observation[start..end].trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bash_block_is_a_command() {
        let text = "THOUGHT: look\n\n```bash\nls -la\n```\n";
        assert_eq!(single_bash_block(text).as_deref(), Some("ls -la"));
    }

    #[test]
    fn none_or_two_blocks_are_no_command() {
        assert_eq!(single_bash_block("no code here"), None);
        assert_eq!(
            single_bash_block("```bash\nls\n```\n```bash\npwd\n```"),
            None
        );
        assert_eq!(single_bash_block("```python\nprint(1)\n```"), None);
    }

    #[test]
    fn return_codes_are_read() {
        assert_eq!(
            return_code("<returncode>0</returncode>\n<output>\n</output>"),
            Some(0)
        );
        assert_eq!(return_code("<returncode>127</returncode>"), Some(127));
        assert_eq!(return_code("The last command timed out"), None);
    }
}
