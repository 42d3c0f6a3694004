//! Native compaction where the upstream has none: condense answers `POST …/responses/compact`
//! itself, and later requests that carry its compaction item reach the upstream with its
//! summary in the item's place (`serve.native_compaction`).
//!
//! The item's `encrypted_content` is condense's own envelope, `condense.v1.PAYLOAD.TAG`: the
//! payload (base64url JSON: the summary, the model) and an HMAC-SHA256 tag over it with a key
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

/// Whether condense answers compaction for an upstream, or passes it on
/// (`serve.native_compaction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NativeMode {
    /// Pass to the providers' own hosts (`api.openai.com`, `api.anthropic.com`), emulate for
    /// any other upstream.
    #[default]
    Auto,
    /// Always pass: the upstream compacts (or refuses).
    Pass,
    /// Always answer here.
    Emulate,
}

impl NativeMode {
    /// The setting's value by name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(NativeMode::Auto),
            "pass" => Some(NativeMode::Pass),
            "emulate" => Some(NativeMode::Emulate),
            _ => None,
        }
    }

    /// Whether condense answers for `upstream` (an origin), whose provider's own host is
    /// `provider_host`.
    pub fn emulates(self, upstream: &str, provider_host: &str) -> bool {
        match self {
            NativeMode::Pass => false,
            NativeMode::Emulate => true,
            NativeMode::Auto => reqwest::Url::parse(upstream)
                .ok()
                .and_then(|url| url.host_str().map(str::to_owned))
                .is_none_or(|host| host != provider_host),
        }
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
}

/// Seals `summary` with `key`.
pub fn seal(key: &[u8], summary: &str, model: Option<&str>) -> String {
    let payload = json!({"v": 1, "summary": summary, "model": model}).to_string();
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
    Ok(Sealed { summary })
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
    let summary = condense_compact::summary_message(&sealed.summary);
    conversation.messages.splice(lead..=at, [summary]);
    // Records beside the messages are a log's, not a request's: a Responses body has none.
    conversation.side.clear();
    Ok(true)
}

/// The answer to `POST /responses/compact` for `compacted` (condense's compaction of the
/// request `model` asked for), sealed with `key`: the compaction item first, then what
/// condense kept after its summary (the request's own System items and the tail), as
/// Responses items. `None` when the compaction holds no summary.
pub fn compact_answer(
    compacted: &Conversation,
    key: &[u8],
    model: Option<&str>,
    tokens: (usize, usize),
    created_at: u64,
) -> Option<Value> {
    let at = compacted
        .messages
        .iter()
        .position(Message::is_compaction_summary)?;
    let summary = condense_compact::previous_summary(&compacted.messages[at..])?;
    let envelope = seal(key, &summary, model);
    let digest = sha2::Sha256::digest(envelope.as_bytes());
    let id: String = digest[..12]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .fold(String::from("cmp_"), |id, byte| id + &byte);
    // The items that stay: the input's own System items before the summary (not the
    // `instructions`, read with a record of no fields, which stay the request's own field),
    // then the tail.
    let input_item = |message: &Message| {
        message
            .wire
            .first()
            .is_some_and(|record| !record.fields.is_empty())
    };
    let kept: Vec<Message> = compacted
        .messages
        .iter()
        .enumerate()
        .filter(|(index, message)| *index > at || input_item(message))
        .map(|(_, message)| message.clone())
        .collect();
    let mut items = vec![json!({"id": id, "type": "compaction", "encrypted_content": envelope})];
    let written = condense_formats::write_compact(
        condense_formats::Format::Responses,
        &Conversation::new(kept),
    )
    .ok()
    .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())?;
    items.extend(written["input"].as_array().cloned().unwrap_or_default());
    Some(json!({
        "id": id,
        "object": "response.compaction",
        "created_at": created_at,
        "model": model,
        "output": items,
        "usage": {
            "input_tokens": tokens.0,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens.1,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens.0 + tokens.1,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_opens_with_its_key_only_and_unchanged() {
        let key = [7u8; 32];
        let sealed = seal(&key, "## Goal\nship it", Some("m"));
        assert!(sealed.starts_with(ENVELOPE_PREFIX));
        assert_eq!(open(&key, &sealed).unwrap().summary, "## Goal\nship it");
        assert_eq!(open(&[8u8; 32], &sealed), Err(EnvelopeError::Forged));
        // Another payload under the same tag.
        let (head, tag) = sealed.rsplit_once('.').unwrap();
        let other = seal(&key, "## Goal\nsomething else", None);
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
        assert!(!auto.emulates("https://api.openai.com", "api.openai.com"));
        assert!(auto.emulates("http://127.0.0.1:8080/v1", "api.openai.com"));
        assert!(auto.emulates("https://gateway.example", "api.openai.com"));
        assert!(!NativeMode::Pass.emulates("http://127.0.0.1", "api.openai.com"));
        assert!(NativeMode::Emulate.emulates("https://api.openai.com", "api.openai.com"));
    }
}
