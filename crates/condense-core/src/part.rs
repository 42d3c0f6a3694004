use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Compacted, JsonMap};

/// One piece of a message's content.
///
/// Every variant but [`Part::Opaque`] keeps the wire fields it does not interpret in `extra`, so a
/// provider field such as `cache_control` survives a round trip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Part {
    /// Text the model or a person wrote.
    Text(Text),
    /// A request to run a tool.
    ToolCall(ToolCall),
    /// A tool's answer.
    ToolResult(ToolResult),
    /// An image, kept as the wire described it.
    Image(Image),
    /// The model's visible reasoning.
    Thinking(Thinking),
    /// A block that no phase understands (a new block type, `redacted_thinking`, …), kept as it came
    /// and written back unchanged.
    Opaque {
        /// The block as it came.
        value: Value,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
/// Plain text, with the wire fields condense does not interpret.
pub struct Text {
    /// The text.
    pub text: String,
    #[serde(default, skip_serializing_if = "JsonMap::is_empty")]
    /// Wire fields kept for the round trip (`cache_control`, …).
    pub extra: JsonMap,
}

/// A request by the assistant to run a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the result refers to.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON. When the wire carried them as a string that is not valid JSON, this
    /// is that string as a JSON string.
    pub input: Value,
    /// The arguments exactly as the wire encoded them, when it encoded them as text (OpenAI's
    /// `arguments`). Written back verbatim so that re-serialising never changes a byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<String>,
    /// The call is written inside the assistant's text rather than as a wire object of its own
    /// (mini-swe-agent's fenced bash blocks). Writers skip it: the text already holds it.
    #[serde(default)]
    pub embedded: bool,
    #[serde(default, skip_serializing_if = "JsonMap::is_empty")]
    /// Wire fields kept for the round trip.
    pub extra: JsonMap,
}

/// The answer to a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// What the tool returned, or condense's placeholder for it.
    pub content: ToolOutput,
    /// `None` when the wire said nothing, which is not the same as saying `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// The result came back as the plain text of a user message (mini-swe-agent's
    /// `<returncode>`/`<output>` observations); writers put it back there.
    #[serde(default)]
    pub embedded: bool,
    /// Set when condense replaced the original output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted: Option<Compacted>,
    #[serde(default, skip_serializing_if = "JsonMap::is_empty")]
    /// Wire fields kept for the round trip.
    pub extra: JsonMap,
}

/// A tool's output: a plain string, or a list of blocks (text and images) as Anthropic allows.
/// The two are kept apart because the wire tells them apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "form", content = "value", rename_all = "snake_case")]
pub enum ToolOutput {
    /// One string.
    Text(String),
    /// A list of blocks (text and images).
    Parts(Vec<Part>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// An image in a message or a tool's output.
pub struct Image {
    /// The wire's description of the image (`source` for Anthropic, `image_url` for OpenAI), kept
    /// as it came: condense never decodes or re-encodes an image.
    pub source: Value,
    #[serde(default, skip_serializing_if = "JsonMap::is_empty")]
    /// Wire fields kept for the round trip.
    pub extra: JsonMap,
}

/// The model's visible reasoning. The signature, when present, must go back byte for byte or the
/// provider rejects the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thinking {
    /// The reasoning text.
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The provider's signature over it, sent back byte for byte.
    pub signature: Option<String>,
    #[serde(default, skip_serializing_if = "JsonMap::is_empty")]
    /// Wire fields kept for the round trip.
    pub extra: JsonMap,
}

impl Part {
    /// A plain text part with no wire extras.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text(Text {
            text: text.into(),
            extra: JsonMap::new(),
        })
    }

    /// The id by which the wire links an opaque part to others, which must then stay together as
    /// a call and its result do: the Responses API's built-in tools that condense keeps whole (a
    /// `computer_call` and its `computer_call_output`, …) share a `call_id`; an MCP tool's `mcp_approval_request` is
    /// answered by the `approval_request_id` of an `mcp_approval_response` (and of the
    /// `mcp_call` it approved). `None` for any other part.
    pub fn opaque_link(&self) -> Option<&str> {
        let Part::Opaque { value } = self else {
            return None;
        };
        let field = |key: &str| value.get(key).and_then(Value::as_str);
        field("call_id")
            .or_else(|| field("approval_request_id"))
            .or_else(|| {
                (field("type") == Some("mcp_approval_request"))
                    .then(|| field("id"))
                    .flatten()
            })
    }

    /// The call, if this part is one.
    pub fn as_tool_call(&self) -> Option<&ToolCall> {
        match self {
            Part::ToolCall(call) => Some(call),
            _ => None,
        }
    }

    /// The result, if this part is one.
    pub fn as_tool_result(&self) -> Option<&ToolResult> {
        match self {
            Part::ToolResult(result) => Some(result),
            _ => None,
        }
    }
}

impl ToolOutput {
    /// The output's text, images left out, blocks joined by newlines. This is what the pruner
    /// measures and what a placeholder describes. Borrowed when the output is one string, which
    /// it almost always is, so hot paths do not copy megabytes.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            ToolOutput::Text(text) => std::borrow::Cow::Borrowed(text),
            ToolOutput::Parts(parts) => std::borrow::Cow::Owned(plain_text(parts)),
        }
    }
}

/// The text parts of `parts`, one per line: what a reader of the message sees of it.
pub fn plain_text(parts: &[Part]) -> String {
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|part| match part {
            Part::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opaque_items_are_linked_by_the_ids_the_wire_pairs_them_by() {
        let link = |value: Value| Part::Opaque { value }.opaque_link().map(str::to_owned);
        let linked = [
            (
                serde_json::json!({"type": "computer_call", "id": "cu_1", "call_id": "call_1"}),
                "call_1",
            ),
            (
                serde_json::json!({"type": "computer_call_output", "call_id": "call_1"}),
                "call_1",
            ),
            (
                serde_json::json!({"type": "mcp_approval_request", "id": "mcpr_1", "name": "x"}),
                "mcpr_1",
            ),
            (
                serde_json::json!({"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": true}),
                "mcpr_1",
            ),
        ];
        for (value, id) in linked {
            assert_eq!(link(value), Some(id.to_owned()));
        }
        // An item's own id links nothing; nor does a part that is not opaque.
        assert_eq!(
            link(serde_json::json!({"type": "reasoning", "id": "rs_1"})),
            None
        );
        assert_eq!(Part::text("call_id").opaque_link(), None);
    }
}
