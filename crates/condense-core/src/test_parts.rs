//! The parts the crate's own unit tests build conversations from: a shell call and its output,
//! linked by `id`, nothing else set.

use crate::{Part, ToolCall, ToolOutput, ToolResult};

/// A `bash` call of `ls` with `id`.
pub(crate) fn call(id: &str) -> Part {
    Part::ToolCall(ToolCall {
        id: id.into(),
        name: "bash".into(),
        input: serde_json::json!({"command": "ls"}),
        raw_input: None,
        embedded: false,
        extra: Default::default(),
    })
}

/// The output `ok` answering the call `id`.
pub(crate) fn result(id: &str) -> Part {
    Part::ToolResult(ToolResult {
        call_id: id.into(),
        content: ToolOutput::Text("ok".into()),
        is_error: None,
        embedded: false,
        compacted: None,
        extra: Default::default(),
    })
}
