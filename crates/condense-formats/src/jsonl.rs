//! What the JSONL session logs (Claude Code's, Codex's) share: one JSON object per line, read
//! with the line named when one is not, and written one compact object per line.

use condense_core::{Conversation, JsonMap, Message, SideKind, SideRecord};
use serde_json::Value;

use crate::blocks::kind_of;
use crate::error::strip_position;
use crate::{FormatError, Location};

/// Each non-empty line of `input` as an object, with where it is; a line that is not JSON, or
/// not an object, is an error that names it.
pub(crate) fn records(
    input: &str,
) -> impl Iterator<Item = Result<(Location, JsonMap), FormatError>> + '_ {
    input
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            let line_number = index + 1;
            let value: Value =
                serde_json::from_str(line).map_err(|error| FormatError::JsonLine {
                    line: line_number,
                    column: error.column(),
                    message: strip_position(&error),
                })?;
            let at = Location::Line(line_number);
            match value {
                Value::Object(record) => Ok((at, record)),
                other => Err(FormatError::malformed(
                    at,
                    format!("a session line is an object, not {}", kind_of(&other)),
                )),
            }
        })
}

/// `value` as one line of a log.
pub(crate) fn push_line(out: &mut Vec<u8>, value: &Value) -> Result<(), FormatError> {
    serde_json::to_writer(&mut *out, value)
        .map_err(|error| FormatError::Write(error.to_string()))?;
    out.push(b'\n');
    Ok(())
}

/// Sets aside what was read before an agent's own compaction: each message goes beside the
/// conversation as the lines it came as (`lines`), among the side records already there, in
/// their order, and the conversation starts again. The model no longer sees any of it; the
/// log keeps it, and so does writing.
pub(crate) fn set_aside(
    conversation: &mut Conversation,
    mut lines: impl FnMut(&Message) -> Vec<Value>,
) {
    let messages = std::mem::take(&mut conversation.messages);
    let mut earlier = std::mem::take(&mut conversation.side)
        .into_iter()
        .peekable();
    let mut side = Vec::with_capacity(earlier.len() + messages.len() + 1);
    let beside = |value| SideRecord {
        kind: SideKind::Other,
        before_message: 0,
        value,
    };
    for (index, message) in messages.iter().enumerate() {
        while let Some(record) = earlier.next_if(|record| record.before_message <= index) {
            side.push(SideRecord {
                before_message: 0,
                ..record
            });
        }
        side.extend(lines(message).into_iter().map(beside));
    }
    side.extend(earlier.map(|record| SideRecord {
        before_message: 0,
        ..record
    }));
    conversation.side = side;
}
