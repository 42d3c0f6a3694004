//! Agent-directed trimming: the agent, not a background rule, says a tool result is consumed and
//! replaces it with its own short summary (the `trim_tool_result` proposal in the seeds). The
//! original stays in the store; only the model-facing context changes.
//!
//! The agent calls [`TRIM_TOOL`] with a `summary` and, optionally, the `tool_call_id` of the
//! result to trim (by default the most recent result before the call). Wherever a conversation
//! holds such a call, the target is replaced by `[trimmed by the agent: SUMMARY — original:
//! condense recall HANDLE]`; the call and its own result stay (they are small, and the pair stays
//! valid). Only the most recent result may be trimmed unless `[trim] allow_older = true`: trimming
//! an older one rewrites the cached prefix from there on. A target that is unknown, protected,
//! already replaced or older than allowed changes nothing and is reported with the reason.

use serde::Serialize;
use serde_json::{Value, json};

/// How a trimmed result starts: a result that does is never trimmed or replaced again.
pub(crate) const TRIMMED_PREFIX: &str = "[trimmed by the agent: ";

/// The tool's name, as the agent calls it.
pub const TRIM_TOOL: &str = "trim_tool_result";

/// What the model reads about the tool: when to use it, and what it costs to misuse.
pub const TRIM_TOOL_DESCRIPTION: &str = "Replace a tool result you have finished using with your own short summary of what mattered in it, to keep the conversation small. Use it right after you have acted on a long output (a file read, a test run, a search) whose details you will not need again; write down every fact you still need (paths, line numbers, error messages, values), because the original text will no longer be in your context. By default it trims the most recent tool result. The original is kept and can be recalled by a person with `condense recall`.";

/// The arguments' JSON schema.
pub fn trim_tool_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "summary": {
                "type": "string",
                "description": "What you still need from the result: facts, paths, numbers, errors. It replaces the result."
            },
            "tool_call_id": {
                "type": "string",
                "description": "The id of the tool call whose result to trim. Leave it out to trim the most recent result."
            }
        },
        "required": ["summary"],
        "additionalProperties": false
    })
}

/// What happened to one `trim_tool_result` call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrimReport {
    /// The id of the `trim_tool_result` call.
    pub call_id: String,
    /// The call id of the result it targets, when one could be found.
    pub target: Option<String>,
    /// What was done.
    #[serde(flatten)]
    pub outcome: TrimOutcome,
}

/// The fate of one trim request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TrimOutcome {
    /// The target was replaced by the agent's summary in this call.
    Trimmed,
    /// The target was replaced on an earlier request; the same replacement is repeated.
    Frozen,
    /// Nothing changed, for this reason.
    Refused {
        /// Why.
        reason: TrimRefusal,
    },
}

/// Why a trim request changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TrimRefusal {
    /// The call has no `summary` string.
    NoSummary,
    /// `tool_call_id` names no result before the call (or there is no result before it).
    UnknownTarget,
    /// The target's tool is protected.
    Protected,
    /// The target was already replaced (trimmed, pruned or previewed).
    AlreadyReplaced,
    /// The target is not the most recent result and `[trim] allow_older` is off.
    NotMostRecent,
}

/// One trim request read off a call's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub summary: Option<String>,
    pub target: Option<String>,
}

pub(crate) fn request(input: &Value) -> Request {
    let text = |key: &str| {
        input
            .get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
    };
    Request {
        summary: text("summary"),
        target: text("tool_call_id"),
    }
}

/// The replacement text.
pub(crate) fn replacement(summary: &str, handle: &str) -> String {
    format!("{TRIMMED_PREFIX}{summary} — original: condense recall {handle}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_leniently() {
        assert_eq!(
            request(&json!({"summary": " ok ", "tool_call_id": "c1"})),
            Request {
                summary: Some("ok".into()),
                target: Some("c1".into())
            }
        );
        assert_eq!(
            request(&json!({"summary": ""})),
            Request {
                summary: None,
                target: None
            }
        );
        assert_eq!(request(&json!("not an object")).summary, None);
    }
}
