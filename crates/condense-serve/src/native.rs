//! Native compaction where the upstream has none: condense answers `POST …/responses/compact`
//! itself, and later requests that carry its compaction item reach the upstream with its
//! summary in the item's place (`serve.native_compaction`).
//!
//! Codex's remote compaction (`remote_compaction_v2`) asks the same on an ordinary
//! `POST …/responses` whose `input` ends with a `{"type": "compaction_trigger"}` item, and takes
//! exactly one `compaction` item back in place of everything it sent: condense answers that too,
//! streamed or not as asked, and since nothing but the item stays, the item carries the turns
//! condense would have kept after its summary.
//!
//! The item's `encrypted_content` is condense's own envelope, `condense.v1.PAYLOAD.TAG`: the
//! payload (base64url JSON: the summary, the model, the items kept after it when the answer
//! has no room for them) and an HMAC-SHA256 tag over it with a key
//! the state store keeps ([`crate::SessionStore::secret`]), so every replica verifies what any
//! of them made and no client can forge or alter one. The summary is authenticated, not
//! hidden: it is what the client's own history said.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use condense_core::{Conversation, Message, Part, Role};
use ring::hmac;
use serde_json::{Value, json};
use sha2::Digest as _;

/// How condense's envelopes start; a provider's own (`gAAAA…`) never does.
pub const ENVELOPE_PREFIX: &str = "condense.v1.";

pub use condense_host::NativeMode;

/// Whether condense answers compaction for `upstream` (an origin) under `mode`, the
/// provider's own host being `provider_host`: `auto` passes to the provider's own host only.
pub fn emulates(mode: NativeMode, upstream: &str, provider_host: &str) -> bool {
    match mode {
        NativeMode::Pass => false,
        NativeMode::Emulate => true,
        // Auto, and whatever a later version adds: judged by the host.
        _ => reqwest::Url::parse(upstream)
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
            .is_none_or(|host| host != provider_host),
    }
}

/// Why an item condense should have made cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// Not `condense.v1.PAYLOAD.TAG`.
    #[error("it is not a condense compaction envelope (condense.v1.PAYLOAD.TAG)")]
    Malformed,
    /// The tag does not verify: made with another key, or changed since.
    #[error("its signature does not verify: it was changed, or made by a proxy with another key")]
    Forged,
}

/// What an envelope carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The summary that stands for everything before the item.
    pub summary: String,
    /// The Responses items condense kept after its summary, when the answer that made the
    /// envelope could not return them beside it (a `compaction_trigger`'s); empty otherwise.
    pub kept: Vec<Value>,
}

/// Seals `summary`, and the Responses items `kept` after it, with `key`.
pub fn seal(key: &[u8], summary: &str, kept: &[Value], model: Option<&str>) -> String {
    let mut payload = json!({"v": 1, "summary": summary, "model": model});
    if !kept.is_empty() {
        payload["kept"] = Value::Array(kept.to_vec());
    }
    let payload = payload.to_string();
    let payload = URL_SAFE_NO_PAD.encode(payload);
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), payload.as_bytes());
    format!(
        "{ENVELOPE_PREFIX}{payload}.{}",
        URL_SAFE_NO_PAD.encode(tag.as_ref())
    )
}

/// Opens an envelope made with `key`, checking its tag in constant time.
pub fn open(key: &[u8], envelope: &str) -> Result<Sealed, EnvelopeError> {
    let rest = envelope
        .strip_prefix(ENVELOPE_PREFIX)
        .ok_or(EnvelopeError::Malformed)?;
    let (payload, tag) = rest.split_once('.').ok_or(EnvelopeError::Malformed)?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| EnvelopeError::Malformed)?;
    hmac::verify(
        &hmac::Key::new(hmac::HMAC_SHA256, key),
        payload.as_bytes(),
        &tag,
    )
    .map_err(|_| EnvelopeError::Forged)?;
    let payload: Value = URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or(EnvelopeError::Malformed)?;
    let summary = payload["summary"]
        .as_str()
        .ok_or(EnvelopeError::Malformed)?
        .to_owned();
    let kept = match payload.get("kept") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(EnvelopeError::Malformed),
    };
    Ok(Sealed { summary, kept })
}

/// The envelope of a message that is one of condense's compaction items.
fn own_envelope(message: &Message) -> Option<&str> {
    message.parts.iter().find_map(|part| match part {
        Part::Opaque { value } if value["type"] == "compaction" => value["encrypted_content"]
            .as_str()
            .filter(|content| content.starts_with(ENVELOPE_PREFIX)),
        _ => None,
    })
}

/// Whether `conversation` carries one of condense's own compaction items.
pub fn carries_own(conversation: &Conversation) -> bool {
    conversation
        .messages
        .iter()
        .any(|message| own_envelope(message).is_some())
}

/// Puts condense's summary in place of the last of its own compaction items in
/// `conversation`, and drops what came before the item (after the leading System messages),
/// as the provider drops what comes before its own: the request then reads as condense's
/// compacted conversation, which the pipeline knows how to go on from. `Ok(false)`: no such
/// item. An item that does not verify is an error naming it, never sent on.
pub fn expand_own(conversation: &mut Conversation, key: &[u8]) -> Result<bool, String> {
    let Some(at) = conversation
        .messages
        .iter()
        .rposition(|message| own_envelope(message).is_some())
    else {
        return Ok(false);
    };
    let envelope = own_envelope(&conversation.messages[at]).unwrap_or_default();
    let sealed = open(key, envelope).map_err(|error| {
        format!("condense: the compaction item at input[{at}] cannot be used: {error}")
    })?;
    let lead = conversation
        .messages
        .iter()
        .take_while(|message| message.role == Role::System)
        .count()
        .min(at);
    let mut stands_in = vec![condense_compact::summary_message(&sealed.summary)];
    if !sealed.kept.is_empty() {
        let kept = condense_formats::read_json(
            condense_formats::Format::Responses,
            json!({"input": sealed.kept}),
        )
        .map_err(|error| {
            format!("condense: the compaction item at input[{at}] holds unreadable turns: {error}")
        })?;
        stands_in.extend(kept.messages);
    }
    conversation.messages.splice(lead..=at, stands_in);
    // Records beside the messages are a log's, not a request's: a Responses body has none.
    conversation.side.clear();
    Ok(true)
}

/// How condense answers a request for compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// `POST …/responses/compact`: the `response.compaction` object, the compaction item
    /// followed by the items kept after it.
    Endpoint,
    /// A `compaction_trigger` item on `POST …/responses`: a `response` whose only output is
    /// the compaction item (which then carries the kept items), as a stream of events when
    /// `stream` was asked.
    Trigger {
        /// The request asked for server-sent events.
        stream: bool,
    },
}

/// The answer condense gives for `compacted` (its compaction of the request `model` asked
/// for), sealed with `key`, in the shape `asked` wants: a JSON value, or for a streamed trigger
/// the text of the event stream. `None` when the compaction holds no summary.
pub fn compaction_answer(
    compacted: &Conversation,
    key: &[u8],
    model: Option<&str>,
    tokens: (usize, usize),
    created_at: u64,
    asked: Asked,
) -> Option<String> {
    let (summary, kept) = summary_and_kept(compacted, condense_formats::Format::Responses)?;

    let (sealed_kept, returned_kept) = match asked {
        Asked::Endpoint => (Vec::new(), kept),
        Asked::Trigger { .. } => (kept, Vec::new()),
    };
    let envelope = seal(key, &summary, &sealed_kept, model);
    let digest = sha2::Sha256::digest(envelope.as_bytes());
    let id: String = digest[..12]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .fold(String::from("cmp_"), |id, byte| id + &byte);
    let item = json!({"id": id, "type": "compaction", "encrypted_content": envelope});
    let usage = json!({
        "input_tokens": tokens.0,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": tokens.1,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens.0 + tokens.1,
    });
    let response_id = format!("resp_{}", id.trim_start_matches("cmp_"));
    let response = |status: &str, output: Vec<Value>, usage: Value| {
        json!({
            "id": response_id, "object": "response", "created_at": created_at,
            "status": status, "model": model, "output": output, "usage": usage,
        })
    };
    let answer = match asked {
        Asked::Endpoint => {
            let mut output = vec![item];
            output.extend(returned_kept);
            json!({
                "id": id, "object": "response.compaction", "created_at": created_at,
                "model": model, "output": output, "usage": usage,
            })
        }
        Asked::Trigger { stream: false } => response("completed", vec![item], usage),
        Asked::Trigger { stream: true } => {
            let events = [
                json!({"type": "response.created",
                       "response": response("in_progress", Vec::new(), Value::Null)}),
                json!({"type": "response.output_item.added", "output_index": 0,
                       "item": {"id": id, "type": "compaction"}}),
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
                json!({"type": "response.completed",
                       "response": response("completed", vec![item.clone()], usage)}),
            ];
            let text = events
                .into_iter()
                .enumerate()
                .map(|(sequence, mut event)| {
                    event["sequence_number"] = sequence.into();
                    format!(
                        "event: {}\ndata: {event}\n\n",
                        event["type"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            return Some(text);
        }
    };
    Some(answer.to_string())
}

/// The summary of `compacted` (condense's compaction of a request) and what it kept beside it
/// (the input's own System items before the summary, not the request's `instructions` or
/// `system`, which stay its own field; an autonomous run's task, which the compaction kept in
/// front of the summary; then the tail), as the items of `format`, to follow the one item that
/// stands for the summary.
fn summary_and_kept(
    compacted: &Conversation,
    format: condense_formats::Format,
) -> Option<(String, Vec<Value>)> {
    let at = compacted
        .messages
        .iter()
        .position(Message::is_compaction_summary)?;
    let summary = condense_compact::previous_summary(&compacted.messages[at..])?;
    // A System message read from a field of the request (`instructions`, `system`) has a wire
    // record of no fields.
    let input_item = |message: &Message| {
        message.role == Role::System
            && message
                .wire
                .first()
                .is_some_and(|record| !record.fields.is_empty())
    };
    let kept: Vec<Message> = compacted
        .messages
        .iter()
        .enumerate()
        .filter(|(index, message)| {
            *index > at || input_item(message) || (*index + 1 == at && message.is_user_turn())
        })
        .map(|(_, message)| message.clone())
        .collect();
    let written = condense_formats::write_compact(format, &Conversation::new(kept))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())?;
    let list = match format {
        condense_formats::Format::Responses => "input",
        _ => "messages",
    };
    Some((
        summary,
        written[list].as_array().cloned().unwrap_or_default(),
    ))
}

/// Where condense's sealed turns start in the `content` of an Anthropic `compaction` block it
/// made, after the summary.
const KEPT_OPEN: &str = "<condense-kept>";
const KEPT_CLOSE: &str = "</condense-kept>";

/// The `content` of the Anthropic `compaction` block condense makes for `compacted` (its
/// compaction of a request with the `compact_20260112` edit), and the summary it holds.
/// Anthropic's block stands for everything before it and the client resends nothing else
/// from then, so the turns condense kept after its summary ride in the block, sealed with
/// `key` after the readable summary. `None` when the compaction holds no summary.
pub fn block_content(compacted: &Conversation, key: &[u8], model: Option<&str>) -> Option<String> {
    let (summary, kept) = summary_and_kept(compacted, condense_formats::Format::Anthropic)?;
    if kept.is_empty() {
        return Some(summary);
    }
    let sealed = seal(key, &summary, &kept, model);
    Some(format!("{summary}\n\n{KEPT_OPEN}{sealed}{KEPT_CLOSE}"))
}

/// Puts the last Anthropic `compaction` block of `conversation` out of the way of an upstream
/// that has none, as Anthropic reads it: everything before the block (after the leading System
/// messages) dropped, the block's summary in its place, and the turns condense sealed into it
/// after that. A block of `null` content (a failed compaction, a no-op for Anthropic) is only
/// removed. `Ok(false)`: no block. Turns sealed with another key are an error naming the block.
pub fn expand_blocks(conversation: &mut Conversation, key: &[u8]) -> Result<bool, String> {
    let Some((at, part)) = condense_core::last_native_compaction(&conversation.messages) else {
        return Ok(false);
    };
    let content = match &conversation.messages[at].parts[part] {
        Part::Opaque { value } => value
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    };
    let Some(content) = content else {
        conversation.messages[at].parts.remove(part);
        return Ok(true);
    };
    let (summary, kept) = match content.find(KEPT_OPEN) {
        Some(start) => {
            let sealed = content[start + KEPT_OPEN.len()..]
                .strip_suffix(KEPT_CLOSE)
                .unwrap_or(&content[start + KEPT_OPEN.len()..]);
            let opened = open(key, sealed).map_err(|error| {
                format!("condense: the compaction block of messages[{at}] cannot be used: {error}")
            })?;
            (opened.summary, opened.kept)
        }
        None => (content, Vec::new()),
    };
    let mut stands_in = vec![condense_compact::summary_message(&summary)];
    if !kept.is_empty() {
        let kept = condense_formats::read_json(
            condense_formats::Format::Anthropic,
            json!({"messages": kept}),
        )
        .map_err(|error| {
            format!(
                "condense: the compaction block of messages[{at}] holds unreadable turns: {error}"
            )
        })?;
        stands_in.extend(kept.messages);
    }
    let mut rest = conversation.messages[at].clone();
    rest.parts.drain(..=part);
    rest.wire.clear();
    if !rest.parts.is_empty() {
        stands_in.push(rest);
    }
    let lead = conversation
        .messages
        .iter()
        .take_while(|message| message.role == Role::System)
        .count()
        .min(at);
    conversation.messages.splice(lead..=at, stands_in);
    conversation.side.clear();
    Ok(true)
}

/// Takes the `compaction` entries off a Responses request's `context_management` (OpenAI's
/// server-side compaction, `[{"type": "compaction", "compact_threshold": N}]`), and the field
/// when nothing else is left in it. Whether anything was taken.
pub fn take_compaction_request(conversation: &mut Conversation) -> bool {
    let Some(envelope) = conversation.envelope.as_mut() else {
        return false;
    };
    let Some(Value::Array(entries)) = envelope.get_mut("context_management") else {
        return false;
    };
    let before = entries.len();
    entries.retain(|entry| entry["type"] != "compaction");
    let taken = entries.len() < before;
    if entries.is_empty() {
        envelope.shift_remove("context_management");
    }
    taken
}

/// Whether a Responses body asks for compaction with a trailing `compaction_trigger` item
/// (Codex's `remote_compaction_v2`); the body is read only when it names the item at all.
pub fn asks_trigger(bytes: &[u8]) -> Option<Value> {
    memchr::memmem::find(bytes, b"compaction_trigger")?;
    let value: Value = serde_json::from_slice(bytes).ok()?;
    let last = value.get("input")?.as_array()?.last()?;
    (last.get("type").and_then(Value::as_str) == Some("compaction_trigger")).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_opens_with_its_key_only_and_unchanged() {
        let key = [7u8; 32];
        let kept = [json!({"type": "message", "role": "user", "content": "next"})];
        let sealed = seal(&key, "## Goal\nship it", &kept, Some("m"));
        assert!(sealed.starts_with(ENVELOPE_PREFIX));
        let opened = open(&key, &sealed).unwrap();
        assert_eq!(opened.summary, "## Goal\nship it");
        assert_eq!(opened.kept, kept);
        assert_eq!(open(&[8u8; 32], &sealed), Err(EnvelopeError::Forged));
        // Another payload under the same tag.
        let (head, tag) = sealed.rsplit_once('.').unwrap();
        let other = seal(&key, "## Goal\nsomething else", &[], None);
        let (other_head, _) = other.rsplit_once('.').unwrap();
        assert_eq!(
            open(&key, &format!("{other_head}.{tag}")),
            Err(EnvelopeError::Forged)
        );
        assert!(open(&key, head).is_err());
        assert_eq!(open(&key, "gAAAAB"), Err(EnvelopeError::Malformed));
    }

    #[test]
    fn auto_passes_to_the_providers_own_hosts_only() {
        let auto = NativeMode::Auto;
        assert!(!emulates(auto, "https://api.openai.com", "api.openai.com"));
        assert!(emulates(auto, "http://127.0.0.1:8080/v1", "api.openai.com"));
        assert!(emulates(auto, "https://gateway.example", "api.openai.com"));
        assert!(!emulates(
            NativeMode::Pass,
            "http://127.0.0.1",
            "api.openai.com"
        ));
        assert!(emulates(
            NativeMode::Emulate,
            "https://api.openai.com",
            "api.openai.com"
        ));
    }
}
