//! Agent sessions on the wire, read into and written from condense's conversation model.
//!
//! Five formats: OpenAI Chat Completions (a bare array of messages, or an object with
//! `messages`), OpenAI Responses request bodies (`input` items, what Codex sends), Anthropic
//! Messages request bodies, and the JSONL session logs of Claude Code and of Codex. The format
//! is detected from the content unless the caller names it. Reading keeps what the model
//! does not interpret (unknown keys, block types, string-or-list content), so an OpenAI or
//! Anthropic file read and written back is the same JSON value.

#![warn(missing_docs)]
mod anthropic;
mod blocks;
mod claude_code;
mod codex;
mod detect;
mod embedded;
mod error;
mod harness;
mod image;
mod jsonl;
mod legacy;
mod lifetime;
mod openai;
mod order;
mod placement;
mod reading;
mod request;
mod responses;
mod text;
mod usage;
mod workdir;

use std::fmt;
use std::str::FromStr;

use condense_core::Conversation;

pub use detect::{detect, detect_confidently};
pub use error::{FormatError, Location};
pub use harness::{HARNESS_COMPACTION_FIELDS, HarnessCompaction, harness_compaction};
pub use lifetime::cache_lifetime_minutes;
use reading::Reading;
pub use request::{MessageCache, Request};
pub use usage::{LoggedUsage, SideThread, logged_usage, side_usage};
pub use workdir::working_directory;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
/// The wire formats condense reads and writes.
pub enum Format {
    /// OpenAI Chat Completions: a list of messages, or a request body with `messages`.
    OpenAi,
    /// An OpenAI Responses request body: `instructions` and a list of `input` items.
    Responses,
    /// An Anthropic Messages request body.
    Anthropic,
    /// Claude Code's JSONL session log.
    ClaudeCode,
    /// Codex CLI's JSONL session log (a "rollout": `response_item` lines hold Responses API
    /// items).
    Codex,
}

impl Format {
    /// Every format, in the order detection tries them.
    pub const ALL: [Format; 5] = [
        Format::OpenAi,
        Format::Responses,
        Format::Anthropic,
        Format::ClaudeCode,
        Format::Codex,
    ];

    /// The name flags and reports use: `openai`, `openai-responses`, `anthropic`,
    /// `claude-code`, `codex`.
    pub fn name(self) -> &'static str {
        match self {
            Format::OpenAi => "openai",
            Format::Responses => "openai-responses",
            Format::Anthropic => "anthropic",
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
        }
    }

    /// Whether the format is a session log of JSON lines (Claude Code's, Codex's) rather than
    /// one JSON document.
    pub fn is_jsonl(self) -> bool {
        matches!(self, Format::ClaudeCode | Format::Codex)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown format `{0}` (expected openai, openai-responses, anthropic, claude-code or codex)"
)]
/// A format name that is none of the five.
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|format| format.name() == name)
            .ok_or_else(|| UnknownFormat(name.to_owned()))
    }
}

/// A tool as `format`'s request lists it: Chat Completions nests it in a `function` object, the
/// Responses API (and Codex) keeps it flat, Anthropic calls the schema `input_schema`.
pub fn tool_definition(
    format: Format,
    name: &str,
    description: &str,
    parameters: serde_json::Value,
) -> serde_json::Value {
    match format {
        Format::OpenAi => serde_json::json!({
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        }),
        Format::Responses | Format::Codex => serde_json::json!({
            "type": "function", "name": name, "description": description, "parameters": parameters,
        }),
        Format::Anthropic | Format::ClaudeCode => serde_json::json!({
            "name": name, "description": description, "input_schema": parameters,
        }),
    }
}

/// Reads a session, detecting its format unless `format` names it. Returns the format used, so
/// the caller can write the result back the same way.
pub fn read(bytes: &[u8], format: Option<Format>) -> Result<(Format, Conversation), FormatError> {
    let input = text::utf8(bytes)?;
    if input.trim().is_empty() {
        return Err(FormatError::Empty);
    }
    match format {
        Some(format) if format.is_jsonl() => Ok((format, read_jsonl(format, bytes)?)),
        Some(format) => Ok((format, from_value(format, parse_document(input)?)?)),
        None => match detect::jsonl_format(input) {
            Some(format) => Ok((format, read_jsonl(format, bytes)?)),
            None => {
                let value = parse_document(input)?;
                let format = detect::detect_value(&value)?;
                // A log of one line is also one JSON document: read as the log it is.
                if format.is_jsonl() {
                    return Ok((format, read_jsonl(format, bytes)?));
                }
                Ok((format, from_value(format, value)?))
            }
        },
    }
}

/// Reads a session whole, as it happened, for a replay rather than for compacting: a log whose
/// agent compacted it on its own (Claude Code, Codex) is read with every message it ever
/// logged, in the log's order, what the agent wrote when it compacted flagged (see
/// [`harness_compaction`]); [`read`] gives what the model sees now instead. A branch a person
/// left in a Claude Code log stays beside the history in both. Other formats are read as
/// [`read`] reads them. Not for writing back.
pub fn read_whole(bytes: &[u8], format: Format) -> Result<Conversation, FormatError> {
    if !format.is_jsonl() {
        return Ok(read(bytes, Some(format))?.1);
    }
    let input = text::utf8(bytes)?;
    if input.trim().is_empty() {
        return Err(FormatError::Empty);
    }
    match format {
        Format::Codex => codex::read_as(bytes, Reading::Whole),
        _ => claude_code::read_as(bytes, Reading::Whole),
    }
}

/// A subagent's thread of a session: its own context (its own system prompt, tools and
/// history), started by the session's agent (Claude Code's Task tool).
#[derive(Debug, Clone)]
pub struct Subagent {
    /// The subagent's `agentId` as `agent-ID` (the name of its own log in Claude Code 2), or
    /// where its thread starts in the log.
    pub name: String,
    /// Its conversation, read whole (see [`read_whole`]).
    pub conversation: Conversation,
}

/// The subagent threads a session log keeps among its own lines (Claude Code before 2.0), each
/// read whole as a conversation of its own, in the order they start; a replay prices them
/// beside the main thread. Empty for other formats, and for logs that keep none (Claude Code 2
/// writes each subagent's to a log of its own, `SESSION/subagents/agent-ID.jsonl`).
pub fn subagents(bytes: &[u8], format: Format) -> Result<Vec<Subagent>, FormatError> {
    match format {
        Format::ClaudeCode => claude_code::subagents(bytes),
        _ => Ok(Vec::new()),
    }
}

/// The model that wrote an assistant message, where its log names it (Claude Code's
/// `message.model`): a provider keeps one prompt cache per model.
pub fn answering_model(message: &condense_core::Message) -> Option<&str> {
    claude_code::model_of(message)
}

/// The id of the reply an assistant message is part of, where its log names it (Claude Code's
/// `message.id`): Claude Code 2 writes the calls of one reply on lines of their own, each
/// followed by its result, so one reply (one request) can be read as several assistant
/// messages with results between them. They share this id.
pub fn reply_id(message: &condense_core::Message) -> Option<&str> {
    claude_code::reply_id_of(message)
}

/// Whether the agent wrote an assistant message itself, with no request behind it (Claude
/// Code's `<synthetic>` replies: an API error, "No response requested." after a local command).
pub fn is_synthetic_reply(message: &condense_core::Message) -> bool {
    claude_code::is_synthetic(message)
}

fn read_jsonl(format: Format, bytes: &[u8]) -> Result<Conversation, FormatError> {
    match format {
        Format::Codex => codex::read(bytes),
        _ => claude_code::read(bytes),
    }
}

/// Reads a JSON document already parsed, as `format`: what a proxy does with a request body it
/// has parsed once to check it. A Claude Code or Codex value is read as a one-line log.
pub fn read_json(format: Format, value: serde_json::Value) -> Result<Conversation, FormatError> {
    match format {
        format if format.is_jsonl() => read_jsonl(format, value.to_string().as_bytes()),
        format => from_value(format, value),
    }
}

/// `conversation` as the JSON value of a request body in `format` (what [`write()`] prints):
/// for a library that hands the value on as objects of its own language rather than as text.
/// `None` for the log formats, which are lines rather than one value.
pub fn to_value(format: Format, conversation: &Conversation) -> Option<serde_json::Value> {
    match format {
        Format::ClaudeCode | Format::Codex => None,
        Format::OpenAi => Some(openai::to_value(conversation)),
        Format::Responses => Some(responses::to_value(conversation)),
        Format::Anthropic => Some(anthropic::to_value(conversation)),
    }
}

/// Writes `conversation` in `format` compactly, with no whitespace: a request body for a
/// provider rather than a file for a person (Claude Code's JSONL is compact already).
pub fn write_compact(format: Format, conversation: &Conversation) -> Result<Vec<u8>, FormatError> {
    let value = match format {
        Format::ClaudeCode => return claude_code::write(conversation),
        Format::Codex => return codex::write(conversation),
        Format::OpenAi => openai::to_value(conversation),
        Format::Responses => responses::to_value(conversation),
        Format::Anthropic => anthropic::to_value(conversation),
    };
    serde_json::to_vec(&value).map_err(|error| FormatError::Write(error.to_string()))
}

/// Writes `conversation` in `format`: JSON documents pretty-printed, JSONL one record a line.
pub fn write(format: Format, conversation: &Conversation) -> Result<Vec<u8>, FormatError> {
    let value = match format {
        Format::ClaudeCode => return claude_code::write(conversation),
        Format::Codex => return codex::write(conversation),
        Format::OpenAi => openai::to_value(conversation),
        Format::Responses => responses::to_value(conversation),
        Format::Anthropic => anthropic::to_value(conversation),
    };
    let mut out =
        serde_json::to_vec_pretty(&value).map_err(|error| FormatError::Write(error.to_string()))?;
    out.push(b'\n');
    Ok(out)
}

/// A tool's output of several blocks as `format` puts them on the wire: Anthropic content blocks
/// (also Claude Code's), or OpenAI content parts (Chat Completions' or the Responses API's, also
/// Codex's). `condense recall` prints a stored original this
/// way, so that what comes back is what the tool returned, not condense's internal form.
pub fn output_blocks(format: Format, parts: &[condense_core::Part]) -> serde_json::Value {
    serde_json::Value::Array(
        parts
            .iter()
            .map(|part| match format {
                Format::OpenAi => openai::part_value(part),
                Format::Responses | Format::Codex => {
                    responses::part_value(condense_core::Role::Tool, part)
                }
                Format::Anthropic | Format::ClaudeCode => blocks::block_from_part(part),
            })
            .collect(),
    )
}

fn parse_document(input: &str) -> Result<serde_json::Value, FormatError> {
    serde_json::from_str(input).map_err(|error| FormatError::json(&error))
}

fn from_value(format: Format, value: serde_json::Value) -> Result<Conversation, FormatError> {
    match format {
        Format::OpenAi => openai::from_value(value),
        Format::Responses => responses::from_value(value),
        Format::Anthropic => anthropic::from_value(value),
        Format::ClaudeCode | Format::Codex => Err(FormatError::Unrecognized(format!(
            "a {format} session is JSONL, not one JSON document"
        ))),
    }
}
