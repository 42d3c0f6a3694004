//! Request bodies read message by message, skipping the messages read before.
//!
//! Clients resend their whole history with every request, so a proxy reads the same messages
//! again and again: building a JSON tree of a long session's body, and the conversation model
//! from it, was most of what the proxy added to a request. [`Request::parse`] checks the whole body
//! and finds each message's bytes without building anything; [`Request::read`] then builds only
//! the messages a [`MessageCache`] does not know, by the hash of their bytes, and copies the rest.
//! The result is the conversation [`crate::read_json`] gives for the same body.
//! [`Request::read_memoized`] also hands out each cached message's memo (its content hash and
//! token count once computed), so that the pipeline does not compute them again either.

use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use condense_core::{Conversation, JsonMap, Memos, Message, MessageMemo, Prehashed};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::{Format, FormatError, Location, anthropic, openai, responses};

/// A request body, checked as JSON, with each top-level entry still unread.
#[derive(Debug)]
pub struct Request<'a> {
    entries: Vec<(String, Entry<'a>)>,
    /// The entry that holds the conversation: `messages`, or the Responses API's `input`.
    list: &'static str,
}

/// A top-level entry: the `messages` list split into its messages' bytes in the same pass
/// that checks the body (scanning the list again to split it was half of `Request::read`'s
/// instructions), any other entry as its bytes.
#[derive(Debug)]
enum Entry<'a> {
    /// `messages`, when it is a list.
    Messages(Vec<&'a RawValue>),
    /// `messages` when it is not a list, which makes the body no chat request.
    NotMessages,
    /// Any other entry.
    Raw(&'a RawValue),
}

impl<'a> Request<'a> {
    /// Checks that `body` is a JSON object and finds its entries, its `messages` split (a Chat
    /// Completions or Anthropic body).
    pub fn parse(body: &'a str) -> Result<Request<'a>, FormatError> {
        Request::parse_for(Format::OpenAi, body)
    }

    /// [`Request::parse`] for a body of `format`: a Responses body's `input` is split instead.
    pub fn parse_for(format: Format, body: &'a str) -> Result<Request<'a>, FormatError> {
        let list = match format {
            Format::Responses => "input",
            _ => "messages",
        };
        let mut deserializer = serde_json::Deserializer::from_str(body);
        let entries = deserializer
            .deserialize_any(EntriesVisitor { list })
            .and_then(|entries| deserializer.end().map(|()| entries))
            .map_err(|error| {
                if error.is_data() {
                    FormatError::malformed(Location::TopLevel, "a request body is a JSON object")
                } else {
                    FormatError::json(&error)
                }
            })?;
        Ok(Request { entries, list })
    }

    /// Whether the body has its `messages` (or `input`) list: what makes it a chat request.
    pub fn has_messages(&self) -> bool {
        self.messages().is_some()
    }

    /// The JSON text of the top-level entry `key` (the last, when repeated), other than the
    /// conversation's list; `None` when the body has no such entry.
    pub fn entry(&self, key: &str) -> Option<&'a str> {
        match self.entries.iter().rev().find(|(name, _)| name == key) {
            Some((_, Entry::Raw(raw))) => Some(raw.get()),
            _ => None,
        }
    }

    /// Whether the body has a top-level entry `key`, whatever its value.
    pub fn has_entry(&self, key: &str) -> bool {
        self.entries.iter().any(|(name, _)| name == key)
    }

    fn messages(&self) -> Option<&[&'a RawValue]> {
        // A repeated key: the last one counts, as when the body is read into a JSON value.
        match self.entries.iter().rev().find(|(key, _)| key == self.list) {
            Some((_, Entry::Messages(messages))) => Some(messages),
            _ => None,
        }
    }

    /// The conversation, as [`crate::read_json`] reads it from the same body, with the messages
    /// `cache` knows copied instead of read. `format` is OpenAI's or Anthropic's (Claude Code
    /// logs are not request bodies).
    pub fn read(&self, format: Format, cache: &MessageCache) -> Result<Conversation, FormatError> {
        self.read_memoized(format, cache)
            .map(|(conversation, _)| conversation)
    }

    /// [`Request::read`], with each message's memo: what was computed about a message on an
    /// earlier request that held it (its content hash, its tokens) serves this one (see
    /// [`condense_core::Memos`]). A message that reading changes after the cache gave it (an
    /// OpenAI session whose tool calls are written in text, linked to their neighbours; condense's
    /// summary taken out of the person's message it was written into) or that
    /// the body does not hold as a message (Anthropic's `system`) has none.
    pub fn read_memoized(
        &self,
        format: Format,
        cache: &MessageCache,
    ) -> Result<(Conversation, Memos), FormatError> {
        let raw_messages = match self.messages() {
            Some(messages) => messages,
            None => {
                return Err(FormatError::malformed(
                    Location::TopLevel,
                    format!("a request body needs a `{}` list", self.list),
                ));
            }
        };
        let mut envelope = JsonMap::new();
        for (key, entry) in &self.entries {
            if let Entry::Raw(raw) = entry {
                envelope.insert(key.clone(), parse(raw, Location::TopLevel, Some(key))?);
            }
        }
        let read_one = match format {
            Format::OpenAi => openai::message_from_value,
            Format::Responses => responses::message_from_value,
            Format::Anthropic => anthropic::message_from_value,
            Format::ClaudeCode | Format::Codex => {
                return Err(FormatError::Unrecognized(format!(
                    "a {format} session is JSONL, not a request body"
                )));
            }
        };
        let mut read = Vec::with_capacity(raw_messages.len());
        let mut memos = Vec::with_capacity(raw_messages.len());
        // The same bytes read as another format are another message (OpenAI's keeps `role` among
        // its wire fields, Anthropic's does not): the format seeds the key.
        let seed = match format {
            Format::OpenAi => 1,
            Format::Responses => 3,
            _ => 2,
        };
        for (index, raw) in raw_messages.iter().enumerate() {
            let key = xxhash_rust::xxh3::xxh3_128_with_seed(raw.get().as_bytes(), seed);
            let (message, memo) = match cache.get(key) {
                Some(cached) => (cached.message.clone(), cached.memo.clone()),
                None => {
                    let message = read_one(index, parse(raw, Location::Message(index), None)?)?;
                    let memo = cache.put(key, raw.get().len(), &message);
                    (message, memo)
                }
            };
            read.push(message);
            memos.push(Some(memo));
        }
        let mut memos = Memos::new(memos);
        let (conversation, changed) = match format {
            Format::OpenAi => openai::assemble_linked(Some(envelope), read),
            Format::Responses => responses::assemble(envelope, read),
            _ => anthropic::assemble(envelope, read)?,
        };
        // Messages reading changed after the cache gave them (linked to their neighbours, or
        // condense's summary taken out of the person's message) have no memo of their own.
        if changed {
            memos = Memos::new(vec![None; conversation.messages.len()]);
        }
        // Messages the envelope added before the body's own (Anthropic's `system`).
        for index in 0..conversation.messages.len().saturating_sub(memos.len()) {
            memos.insert_unknown(index);
        }
        Ok((conversation, memos))
    }
}

/// Reads one part of a body already checked whole as JSON. What can still fail here is what the
/// first pass skips over without reading: a number out of range, nesting past the parser's depth
/// limit. The position is within the part, so the error names the part instead.
fn parse(raw: &RawValue, at: Location, key: Option<&str>) -> Result<Value, FormatError> {
    serde_json::from_str(raw.get()).map_err(|error| {
        let problem = crate::error::strip_position(&error);
        FormatError::malformed(
            at,
            match key {
                Some(key) => format!("`{key}`: {problem}"),
                None => problem,
            },
        )
    })
}

/// A JSON object's entries in their order, each value left unread (the `list` entry split into
/// its messages, each unread).
struct EntriesVisitor {
    list: &'static str,
}

impl<'de> Visitor<'de> for EntriesVisitor {
    type Value = Vec<(String, Entry<'de>)>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let entry = if key == self.list {
                map.next_value_seed(MessagesSeed)?
            } else {
                Entry::Raw(map.next_value()?)
            };
            entries.push((key, entry));
        }
        Ok(entries)
    }
}

/// Reads a `messages` value: a list into its elements' bytes, anything else checked and dropped.
struct MessagesSeed;

impl<'de> DeserializeSeed<'de> for MessagesSeed {
    type Value = Entry<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MessagesSeed {
    type Value = Entry<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
        let mut messages = Vec::new();
        while let Some(message) = seq.next_element::<&'de RawValue>()? {
            messages.push(message);
        }
        Ok(Entry::Messages(messages))
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Entry::NotMessages)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Entry::NotMessages)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Entry::NotMessages)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Entry::NotMessages)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Entry::NotMessages)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Entry::NotMessages)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Entry::NotMessages)
    }
}

/// Messages read before, by the 128-bit xxh3 hash of their JSON bytes (at that width a
/// collision between two messages is not a practical concern). Shared by every session of a
/// process: the same bytes are the same message whoever sends them. Bounded by the bytes of JSON
/// it stands for, evicting what is least likely to be sent again (quick_cache's S3-FIFO) one
/// entry at a time: emptying it whole when full made every session's next request count from
/// scratch at once, a latency cliff.
pub struct MessageCache {
    entries: Entries,
    capacity_bytes: usize,
}

/// A message read before, and what has been computed about it since.
struct Cached {
    message: Message,
    memo: Arc<MessageMemo>,
    /// The JSON bytes it was read from: its weight in the cache.
    bytes: usize,
}

/// Weighs an entry by the JSON bytes its message came from.
#[derive(Debug, Clone, Copy, Default)]
struct ByBytes;

impl quick_cache::Weighter<u128, Arc<Cached>> for ByBytes {
    fn weight(&self, _: &u128, cached: &Arc<Cached>) -> u64 {
        // At least one, so every entry counts against the bound.
        u64::try_from(cached.bytes).unwrap_or(u64::MAX).max(1)
    }
}

type Entries = quick_cache::sync::Cache<u128, Arc<Cached>, ByBytes, BuildHasherDefault<Prehashed>>;

impl fmt::Debug for MessageCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageCache")
            .field("messages", &self.entries.len())
            .field("bytes", &self.entries.weight())
            .field("capacity_bytes", &self.capacity_bytes)
            .finish()
    }
}

impl MessageCache {
    /// The default bound: 256 MiB of request JSON (the model's copy takes about as much).
    pub const DEFAULT_CAPACITY_BYTES: usize = 256 << 20;

    /// A cache of the messages read from at most `capacity_bytes` of JSON.
    pub fn new(capacity_bytes: usize) -> Self {
        let capacity = u64::try_from(capacity_bytes).unwrap_or(u64::MAX);
        MessageCache {
            // About 2 KB of JSON a message, on the shared sessions.
            entries: Entries::with(
                (capacity_bytes / 2_048).max(16),
                capacity,
                ByBytes,
                BuildHasherDefault::default(),
                Default::default(),
            ),
            capacity_bytes,
        }
    }

    /// How many messages it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The JSON bytes the messages it holds came from: never more than its capacity.
    pub fn bytes(&self) -> usize {
        usize::try_from(self.entries.weight()).unwrap_or(usize::MAX)
    }

    /// Shared, so the copy the caller makes is made without holding anything.
    fn get(&self, key: u128) -> Option<Arc<Cached>> {
        self.entries.get(&key)
    }

    /// Keeps `message` (when it fits) and gives its memo, new.
    fn put(&self, key: u128, bytes: usize, message: &Message) -> Arc<MessageMemo> {
        let memo = Arc::new(MessageMemo::default());
        if bytes <= self.capacity_bytes {
            self.entries.insert(
                key,
                Arc::new(Cached {
                    message: message.clone(),
                    memo: memo.clone(),
                    bytes,
                }),
            );
        }
        memo
    }
}

impl Default for MessageCache {
    fn default() -> Self {
        MessageCache::new(MessageCache::DEFAULT_CAPACITY_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::{Part, Role};

    fn both(format: Format, body: &str) -> (Conversation, Conversation) {
        let cache = MessageCache::default();
        let expected = crate::read_json(format, serde_json::from_str(body).unwrap()).unwrap();
        let request = Request::parse(body).unwrap();
        let cold = request.read(format, &cache).unwrap();
        assert_eq!(cold, expected);
        let warm = request.read(format, &cache).unwrap();
        (warm, expected)
    }

    #[test]
    fn every_shared_transcript_reads_as_read_json_reads_it_cold_and_warm() {
        let mut read = 0;
        for transcript in condense_core::testing::transcripts().unwrap() {
            let format = match transcript.name.split('/').next() {
                Some("openai") => Format::OpenAi,
                Some("anthropic") => Format::Anthropic,
                _ => continue,
            };
            let body = std::str::from_utf8(&transcript.bytes).unwrap();
            if !body.trim_start().starts_with('{') {
                continue;
            }
            let (warm, expected) = both(format, body);
            assert_eq!(warm, expected, "{}", transcript.name);
            read += 1;
        }
        assert!(
            read >= 10,
            "only {read} request bodies among the shared transcripts"
        );
    }

    /// A memo follows its message from one request to the next (the same memo, whatever else
    /// the body holds); messages reading adds or changes have none.
    #[test]
    fn memos_follow_the_messages_across_requests() {
        let mut with_memos = 0;
        for transcript in condense_core::testing::transcripts().unwrap() {
            let format = match transcript.name.split('/').next() {
                Some("openai") => Format::OpenAi,
                Some("anthropic") => Format::Anthropic,
                _ => continue,
            };
            let mut value: Value = serde_json::from_slice(&transcript.bytes).unwrap();
            let Some(all) = value.get("messages").and_then(Value::as_array).cloned() else {
                continue;
            };
            let cache = MessageCache::default();
            let read = |value: &Value| {
                let body = value.to_string();
                let (conversation, memos) = Request::parse(&body)
                    .unwrap()
                    .read_memoized(format, &cache)
                    .unwrap();
                assert_eq!(
                    memos.len(),
                    conversation.messages.len(),
                    "{}",
                    transcript.name
                );
                (conversation, memos)
            };
            value["messages"] = Value::Array(all[..all.len() / 2].to_vec());
            let (first, first_memos) = read(&value);
            value["messages"] = Value::Array(all.clone());
            let (second, second_memos) = read(&value);
            let system = usize::from(
                first.messages.first().map(|m| m.role) == Some(Role::System)
                    && format == Format::Anthropic,
            );
            let text_tools = second.messages.iter().any(|message| {
                message
                    .parts
                    .iter()
                    .any(|part| matches!(part, Part::ToolCall(call) if call.embedded))
            });
            for index in 0..second.messages.len() {
                let memo = second_memos.get(index);
                if text_tools || index < system {
                    assert!(memo.is_none(), "{} message {index}", transcript.name);
                    continue;
                }
                let memo = memo.unwrap();
                if index < first.messages.len() {
                    assert_eq!(first.messages[index], second.messages[index]);
                    assert!(
                        std::ptr::eq(first_memos.get(index).unwrap(), memo),
                        "{} message {index}: not the first request's memo",
                        transcript.name
                    );
                }
            }
            with_memos += usize::from(!text_tools);
        }
        assert!(with_memos >= 4, "only {with_memos} sessions kept memos");
    }

    /// Every shared Chat Completions transcript, sent as a Responses body (as Codex would send
    /// the same conversation): the split reader gives what `read_json` gives, cold and warm; the
    /// conversation has every call and result the chat had; and written back it is the same
    /// JSON value.
    #[test]
    fn responses_bodies_read_as_read_json_reads_them_and_write_back_unchanged() {
        let mut read = 0;
        for transcript in condense_core::testing::transcripts().unwrap() {
            if !transcript.name.starts_with("openai/") {
                continue;
            }
            let chat: Value = serde_json::from_slice(&transcript.bytes).unwrap();
            let value = condense_core::testing::responses_from_chat(&chat);
            let body = value.to_string();
            assert_eq!(crate::detect(body.as_bytes()).unwrap(), Format::Responses);
            let cache = MessageCache::default();
            let expected = crate::read_json(Format::Responses, value.clone()).unwrap();
            let request = Request::parse_for(Format::Responses, &body).unwrap();
            assert!(request.has_messages());
            let cold = request.read(Format::Responses, &cache).unwrap();
            let warm = request.read(Format::Responses, &cache).unwrap();
            assert_eq!(cold, expected, "{}", transcript.name);
            assert_eq!(warm, expected, "{}", transcript.name);
            let (_, chat_conversation) =
                crate::read(&transcript.bytes, Some(Format::OpenAi)).unwrap();
            let count = |conversation: &Conversation| {
                let parts = conversation.messages.iter().flat_map(|m| &m.parts);
                parts
                    .filter(|part| {
                        matches!(part, Part::ToolCall(call) if !call.embedded)
                            || matches!(part, Part::ToolResult(result) if !result.embedded)
                    })
                    .count()
            };
            assert_eq!(
                count(&expected),
                count(&chat_conversation),
                "{}",
                transcript.name
            );
            let written = crate::write_compact(Format::Responses, &expected).unwrap();
            let written: Value = serde_json::from_slice(&written).unwrap();
            assert_eq!(written, value, "{}", transcript.name);
            read += 1;
        }
        assert!(read >= 10, "only {read} transcripts");
        // A string `input` is one user message: no list to split, nothing a proxy compacts.
        let request =
            Request::parse_for(Format::Responses, r#"{"model": "m", "input": "hi"}"#).unwrap();
        assert!(!request.has_messages());
        assert_eq!(request.entry("model"), Some(r#""m""#));
        assert_eq!(request.entry("previous_response_id"), None);
        assert!(request.has_entry("input") && !request.has_entry("messages"));
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        assert!(matches!(
            Request::parse(r#"{"messages": [}"#),
            Err(FormatError::Json { line: 1, .. })
        ));
        assert!(matches!(
            Request::parse(r#"[{"role": "user", "content": "hi"}]"#),
            Err(FormatError::Malformed { .. })
        ));
        assert!(matches!(
            Request::parse(r#"{"a": 1} trailing"#),
            Err(FormatError::Json { .. })
        ));
        let request = Request::parse(r#"{"model": "m", "messages": {"role": "user"}}"#).unwrap();
        assert!(!request.has_messages());
        assert!(
            request
                .read(Format::OpenAi, &MessageCache::default())
                .is_err()
        );
        for body in [
            r#"{"messages": null}"#,
            r#"{"messages": "hi"}"#,
            r#"{"messages": 3.5}"#,
            r#"{"messages": -2}"#,
            r#"{"messages": true}"#,
            r#"{"messages": {"a": [1, {"b": 2}]}, "model": "m"}"#,
            // A repeated key: the last counts, as in a JSON value.
            r#"{"messages": [{"role": "user", "content": "x"}], "messages": 1}"#,
        ] {
            let request = Request::parse(body).unwrap();
            assert!(!request.has_messages(), "{body}");
        }
        let request = Request::parse(r#"{"messages": 1, "messages": []}"#).unwrap();
        assert!(request.has_messages());
        assert!(matches!(
            Request::parse(r#"{"messages": [{"role": "user"}, ]}"#),
            Err(FormatError::Json { .. })
        ));
        let request = Request::parse(r#"{"messages": [{"role": "narrator"}]}"#).unwrap();
        assert!(matches!(
            request.read(Format::OpenAi, &MessageCache::default()),
            Err(FormatError::UnknownRole { .. })
        ));
    }

    #[test]
    fn what_the_first_pass_skips_is_reported_by_the_part_that_holds_it() {
        // The first pass checks the syntax only; nesting past the parser's depth is found when
        // the part is read, and a position inside the part would point nowhere in the body:
        // the error names the entry or the message. (A number past f64's range is no error: it
        // keeps its digits, like every number; only an exponent's sign is written out.)
        let body =
            r#"{"model": "m", "max_tokens": 1e400, "n": 12345678901234567890123, "messages": []}"#;
        let read = Request::parse(body)
            .unwrap()
            .read(Format::OpenAi, &MessageCache::default())
            .unwrap();
        assert_eq!(
            crate::write_compact(Format::OpenAi, &read).unwrap(),
            br#"{"model":"m","max_tokens":1e+400,"n":12345678901234567890123,"messages":[]}"#
        );
        let deep = format!(
            r#"{{"messages": [{{"role": "user", "content": "a"}}, {{"role": "user", "content": {}{}}}]}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let error = Request::parse(&deep)
            .unwrap()
            .read(Format::OpenAi, &MessageCache::default())
            .unwrap_err();
        assert_eq!(error.to_string(), "message 1: recursion limit exceeded");
        let error = Request::parse(r#"{"messages": [}"#).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid JSON at line 1, column 15: expected value"
        );
    }

    #[test]
    fn one_cache_serves_both_formats_without_confusing_them() {
        let cache = MessageCache::default();
        let body = r#"{"messages": [{"role": "user", "content": "the same bytes"}]}"#;
        let request = Request::parse(body).unwrap();
        for _ in 0..2 {
            for format in [Format::OpenAi, Format::Anthropic] {
                let expected =
                    crate::read_json(format, serde_json::from_str(body).unwrap()).unwrap();
                assert_eq!(request.read(format, &cache).unwrap(), expected, "{format}");
            }
        }
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn a_repeated_key_counts_once_as_its_last_value_as_in_a_json_value() {
        let body = r#"{"model": "a", "messages": [], "model": "b", "messages": [{"role": "user", "content": "hi"}]}"#;
        let (warm, expected) = both(Format::OpenAi, body);
        assert_eq!(warm, expected);
        assert_eq!(warm.messages.len(), 1);
    }

    #[test]
    fn the_cache_evicts_when_full_and_never_holds_more() {
        let cache = MessageCache::new(64);
        let body = r#"{"messages": [{"role": "user", "content": "one two three four five"}, {"role": "assistant", "content": "six seven eight nine ten"}]}"#;
        let request = Request::parse(body).unwrap();
        let first = request.read(Format::OpenAi, &cache).unwrap();
        assert!(cache.bytes() <= 64, "{} bytes held", cache.bytes());
        assert!(
            cache.len() <= 1,
            "two messages of about 50 bytes each do not fit in 64"
        );
        assert_eq!(request.read(Format::OpenAi, &cache).unwrap(), first);
        // A cache with room keeps both, and the next read is served from it.
        let roomy = MessageCache::new(1 << 20);
        request.read(Format::OpenAi, &roomy).unwrap();
        assert_eq!(roomy.len(), 2);
        assert_eq!(request.read(Format::OpenAi, &roomy).unwrap(), first);
    }
}
