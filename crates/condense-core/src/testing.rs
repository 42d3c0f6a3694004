//! Where the workspace's tests find the recorded agent sessions.
//!
//! They live in `../shared/transcripts` beside the checkout (not copied in: see that folder's
//! README for their provenance and licence). `CONDENSE_TRANSCRIPTS` points elsewhere.

use std::path::{Path, PathBuf};

/// One recorded session.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// A short stable name for snapshots: folder and file stem, Claude Code ids cut to 8 characters
    /// (`claude-code/5f8cbb78`, `openai/swe-agent-marshmallow-1867`).
    pub name: String,
    /// Where it is.
    pub path: PathBuf,
    /// Its content.
    pub bytes: Vec<u8>,
}

/// `../shared/transcripts` beside the checkout, or `CONDENSE_TRANSCRIPTS`.
pub fn transcripts_dir() -> PathBuf {
    match std::env::var_os("CONDENSE_TRANSCRIPTS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts"),
    }
}

/// Every transcript, sorted by name. An error names the folder it could not read.
pub fn transcripts() -> std::io::Result<Vec<Transcript>> {
    let root = transcripts_dir();
    let mut found = Vec::new();
    for folder in ["anthropic", "claude-code", "openai"] {
        let dir = root.join(folder);
        let entries = std::fs::read_dir(&dir).map_err(|error| {
            std::io::Error::new(error.kind(), format!("{}: {error}", dir.display()))
        })?;
        for entry in entries {
            let path = entry?.path();
            let Some(stem) = path.file_stem().and_then(|stem| stem.to_str()) else {
                continue;
            };
            if !matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("json" | "jsonl")
            ) {
                continue;
            }
            let short = if folder == "claude-code" {
                &stem[..stem.len().min(8)]
            } else {
                stem
            };
            found.push(Transcript {
                name: format!("{folder}/{short}"),
                bytes: std::fs::read(&path)?,
                path,
            });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// The transcript with this name.
pub fn transcript(name: &str) -> std::io::Result<Transcript> {
    transcripts()?
        .into_iter()
        .find(|t| t.name == name)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no transcript named {name}"),
            )
        })
}

/// Says on the terminal that a test did not run and why, then lets it return.
///
/// libtest captures `eprintln!` and shows it only for failing tests, so a skipped test would
/// look like a pass. This writes to the process's stderr handle directly, which is not captured:
/// the line appears in `cargo test`'s output whatever the outcome. Tests call it when a real
/// component they need (the model server, Redis) is absent and the project's own
/// `CONDENSE_REQUIRE_*` variable does not demand it.
pub fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {reason}");
}

/// The URL of a real component a test needs, from `url_var`; `None` (after [`skip`]) when it is
/// not set and `require_var` is not set either. With `require_var` set to anything but `0` or
/// empty, a missing URL panics: `.ci/run` sets it after starting the component, so CI can never
/// pass by skipping.
pub fn required_url(test: &str, url_var: &str, require_var: &str) -> Option<String> {
    if let Some(url) = std::env::var(url_var).ok().filter(|url| !url.is_empty()) {
        return Some(url);
    }
    let required = std::env::var(require_var).is_ok_and(|value| !value.is_empty() && value != "0");
    assert!(
        !required,
        "{require_var} is set, so {test} must run, but {url_var} is not set"
    );
    skip(
        test,
        &format!("{url_var} is not set (set {require_var}=1 to require it)"),
    );
    None
}

/// Sets `path`'s modification time `age` into the past, as if last written then: how tests
/// reach what expires (session states, originals) without waiting.
pub fn backdate(path: &Path, age: std::time::Duration) {
    std::fs::File::options()
        .append(true)
        .open(path)
        .and_then(|file| file.set_modified(std::time::SystemTime::now() - age))
        .unwrap_or_else(|error| panic!("cannot backdate {}: {error}", path.display()));
}

/// A tool call part: `id`, tool `name`, JSON `input`, nothing else set.
pub fn tool_call(id: impl Into<String>, name: &str, input: serde_json::Value) -> crate::Part {
    crate::Part::ToolCall(crate::ToolCall {
        id: id.into(),
        name: name.into(),
        input,
        raw_input: None,
        embedded: false,
        extra: Default::default(),
    })
}

/// A tool result part answering `call_id` with a text `output`, nothing else set.
pub fn tool_result(call_id: impl Into<String>, output: impl Into<String>) -> crate::Part {
    crate::Part::ToolResult(crate::ToolResult {
        call_id: call_id.into(),
        content: crate::ToolOutput::Text(output.into()),
        is_error: None,
        embedded: false,
        compacted: None,
        extra: Default::default(),
    })
}

/// One step of an agent: an assistant message holding a call of `name` with `input`, then the
/// tool message answering it with `output` (the OpenAI shape; Anthropic's puts results in a
/// user message).
pub fn tool_step(
    id: &str,
    name: &str,
    input: serde_json::Value,
    output: impl Into<String>,
) -> [crate::Message; 2] {
    [
        crate::Message::new(crate::Role::Assistant, vec![tool_call(id, name, input)]),
        crate::Message::new(crate::Role::Tool, vec![tool_result(id, output)]),
    ]
}

/// A Chat Completions request body (`{"messages": …}`) as the Responses API request a client
/// such as Codex would send for the same conversation: the leading system message becomes
/// `instructions`; other messages become `message` items with `input_text` / `output_text`
/// parts; each tool call a `function_call` item, each tool message a `function_call_output`.
/// The shared transcripts hold no Responses session, so tests reach real ones this way.
pub fn responses_from_chat(chat: &serde_json::Value) -> serde_json::Value {
    use serde_json::{Value, json};
    let mut body = chat.as_object().cloned().unwrap_or_default();
    let messages = match body.shift_remove("messages") {
        Some(Value::Array(messages)) => messages,
        _ => Vec::new(),
    };
    let text_of = |content: &Value| match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let mut input = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or("user");
        let text = text_of(&message["content"]);
        match role {
            "system" if index == 0 => {
                body.insert("instructions".into(), text.into());
            }
            "tool" => input.push(json!({
                "type": "function_call_output",
                "call_id": message["tool_call_id"],
                "output": text,
            })),
            "assistant" => {
                if !text.is_empty() {
                    input.push(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text}],
                    }));
                }
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    input.push(json!({
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"],
                    }));
                }
            }
            role => input.push(json!({
                "type": "message",
                "role": role,
                "content": [{"type": "input_text", "text": text}],
            })),
        }
    }
    body.insert("input".into(), Value::Array(input));
    Value::Object(body)
}

/// A Claude Code log (JSON lines) with its text redacted as log-sharing tools do it: every
/// tool output and every text block one short mark, the rest (the calls, the usage) as
/// recorded. What is left is not what the model read, which a replay must notice.
pub fn with_text_redacted(log: &str) -> String {
    let mut redacted = String::new();
    for line in log.lines() {
        let Ok(mut record) = serde_json::from_str::<serde_json::Value>(line) else {
            redacted.push_str(line);
            redacted.push('\n');
            continue;
        };
        if let Some(blocks) = record["message"]["content"].as_array_mut() {
            for block in blocks {
                match block["type"].as_str() {
                    Some("tool_result") => block["content"] = "[REDACTED]".into(),
                    Some("text") => block["text"] = "[REDACTED]".into(),
                    _ => {}
                }
            }
        }
        redacted.push_str(&record.to_string());
        redacted.push('\n');
    }
    redacted
}
