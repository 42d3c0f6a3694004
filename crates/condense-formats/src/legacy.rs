//! Chat Completions' function calling before `tools` (deprecated, still accepted, still in the
//! sessions of older harnesses): an assistant message calls one function with `function_call`
//! (`name`, `arguments`, no id), and a `role: "function"` message with the function's `name`
//! answers the call before it. Neither side names the other, so the pair is linked by place:
//! the call gets an id from its message's position (as mini-swe-agent's calls in text do), and
//! the answer after it takes that id. Both are written back as they came, with no id.

use condense_core::{JsonMap, Message, Part, Role};
use serde_json::Value;

/// The key, among a call's extra fields, that marks a call read from `function_call`: it is
/// written back there, not in `tool_calls`.
pub(crate) const FUNCTION_CALL: &str = "condense_function_call";

/// The role string of a function's answer.
pub(crate) const FUNCTION_ROLE: &str = "function";

/// Whether `call_extra` belongs to a call read from `function_call`.
pub(crate) fn is_function_call(call_extra: &JsonMap) -> bool {
    call_extra.get(FUNCTION_CALL) == Some(&Value::Bool(true))
}

/// Whether a message's wire fields are those of a function's answer.
pub(crate) fn is_function_answer(fields: &JsonMap) -> bool {
    fields.get("role").and_then(Value::as_str) == Some(FUNCTION_ROLE)
}

/// Gives each `function_call` its id and each function's answer the id of the call it
/// answers: the unanswered call before it, else an id of its own (an answer with no call,
/// which validation reports). Returns whether any message changed.
pub(crate) fn link(messages: &mut [Message]) -> bool {
    let mut changed = false;
    let mut pending: Option<String> = None;
    for (index, message) in messages.iter_mut().enumerate() {
        let answers = message.role == Role::Tool
            && message
                .wire
                .first()
                .is_some_and(|record| is_function_answer(&record.fields));
        for part in &mut message.parts {
            match part {
                Part::ToolCall(call) if is_function_call(&call.extra) => {
                    call.id = format!("function-call-{index}");
                    pending = Some(call.id.clone());
                    changed = true;
                }
                Part::ToolResult(result) if answers => {
                    result.call_id = pending
                        .take()
                        .unwrap_or_else(|| format!("function-answer-{index}"));
                    changed = true;
                }
                _ => {}
            }
        }
    }
    changed
}
