//! Feeding what a message holds into a hasher, field by field.
//!
//! A proxy recognises the head a summary replaced by its messages' content hashes, and the token
//! counter recognises a tool call's arguments it has counted before: both run on every message of
//! every request. Serializing to JSON to hash it spends most of its time escaping strings; this
//! walks the model and feeds each string's bytes as they are, several times faster.
//!
//! This is not [`std::hash::Hash`]: JSON objects are fed in their order, so two messages that
//! compare equal with their keys in another order hash differently (the wire bytes differ too),
//! which `Hash` would not allow. Every struct is taken apart exhaustively, so a field added to the
//! model does not compile until it is hashed.

use std::hash::Hasher;

use serde_json::Value;

use crate::{Compacted, ContentShape, JsonMap, Message, Part, ToolOutput, WireRecord};

/// The hasher for maps keyed by a 128-bit content hash (xxh3): the key is already uniform, so
/// hashing it again would only cost time. Use it as `BuildHasherDefault<Prehashed>`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 << 8) | u64::from(byte);
        }
    }

    fn write_u128(&mut self, value: u128) {
        self.0 = value as u64;
    }
}

/// Feeds `value` into `state`: its kind, then its contents, object keys in their order.
pub fn hash_value<H: Hasher>(value: &Value, state: &mut H) {
    match value {
        Value::Null => state.write_u8(0),
        Value::Bool(flag) => {
            state.write_u8(1);
            state.write_u8(u8::from(*flag));
        }
        Value::Number(number) => {
            if let Some(unsigned) = number.as_u64() {
                state.write_u8(2);
                state.write_u64(unsigned);
            } else if let Some(signed) = number.as_i64() {
                state.write_u8(3);
                state.write_i64(signed);
            } else {
                state.write_u8(4);
                state.write_u64(number.as_f64().unwrap_or(f64::NAN).to_bits());
            }
        }
        Value::String(text) => {
            state.write_u8(5);
            hash_str(text, state);
        }
        Value::Array(items) => {
            state.write_u8(6);
            write_len(items.len(), state);
            for item in items {
                hash_value(item, state);
            }
        }
        Value::Object(map) => {
            state.write_u8(7);
            hash_map(map, state);
        }
    }
}

/// Lengths as 64 bits whatever the platform: message hashes are kept in session states that
/// replicas on other machines read.
fn write_len<H: Hasher>(len: usize, state: &mut H) {
    state.write_u64(len as u64);
}

/// Feeds a string: its length, then its bytes (so `"ab","c"` and `"a","bc"` differ).
fn hash_str<H: Hasher>(text: &str, state: &mut H) {
    write_len(text.len(), state);
    state.write(text.as_bytes());
}

fn hash_map<H: Hasher>(map: &JsonMap, state: &mut H) {
    write_len(map.len(), state);
    for (key, value) in map {
        hash_str(key, state);
        hash_value(value, state);
    }
}

fn hash_option_str<H: Hasher>(text: Option<&str>, state: &mut H) {
    match text {
        None => state.write_u8(0),
        Some(text) => {
            state.write_u8(1);
            hash_str(text, state);
        }
    }
}

impl Message {
    /// Feeds everything the message holds and everything its wire records keep into `state`, so
    /// that any edit a client makes to it changes the hash.
    pub fn hash_content<H: Hasher>(&self, state: &mut H) {
        let Message {
            role,
            parts,
            generated,
            wire,
        } = self;
        hash_str(role.as_str(), state);
        write_len(parts.len(), state);
        for part in parts {
            part.hash_content(state);
        }
        state.write_u8(u8::from(*generated));
        write_len(wire.len(), state);
        for WireRecord {
            fields,
            parts,
            shape,
        } in wire
        {
            hash_map(fields, state);
            write_len(*parts, state);
            state.write_u8(match shape {
                ContentShape::Blocks => 0,
                ContentShape::String => 1,
                ContentShape::Null => 2,
                ContentShape::Absent => 3,
            });
        }
    }
}

impl Message {
    /// Feeds the message's outline into `state`: what [`Message::hash_content`] feeds, except
    /// what a tool result holds (only the call it answers) and the wire records. Pruning, on
    /// either side of a proxy, changes results and nothing else: a harness that clears its old
    /// results itself (Claude Code after an idle hour, opencode's prune) resends the same
    /// outline, an edited or branched conversation does not.
    pub fn hash_outline<H: Hasher>(&self, state: &mut H) {
        hash_str(self.role.as_str(), state);
        write_len(self.parts.len(), state);
        for part in &self.parts {
            match part {
                Part::ToolResult(result) => {
                    state.write_u8(2);
                    hash_str(&result.call_id, state);
                }
                other => other.hash_content(state),
            }
        }
        state.write_u8(u8::from(self.generated));
    }
}

impl Part {
    /// Feeds the part's kind and every field it holds into `state`.
    pub fn hash_content<H: Hasher>(&self, state: &mut H) {
        match self {
            Part::Text(crate::Text { text, extra }) => {
                state.write_u8(0);
                hash_str(text, state);
                hash_map(extra, state);
            }
            Part::ToolCall(crate::ToolCall {
                id,
                name,
                input,
                raw_input,
                embedded,
                extra,
            }) => {
                state.write_u8(1);
                hash_str(id, state);
                hash_str(name, state);
                hash_value(input, state);
                hash_option_str(raw_input.as_deref(), state);
                state.write_u8(u8::from(*embedded));
                hash_map(extra, state);
            }
            Part::ToolResult(result) => hash_tool_result(result, state),
            Part::Image(crate::Image { source, extra }) => {
                state.write_u8(3);
                hash_value(source, state);
                hash_map(extra, state);
            }
            Part::Thinking(crate::Thinking {
                text,
                signature,
                extra,
            }) => {
                state.write_u8(4);
                hash_str(text, state);
                hash_option_str(signature.as_deref(), state);
                hash_map(extra, state);
            }
            Part::Opaque { value } => {
                state.write_u8(5);
                hash_value(value, state);
            }
        }
    }
}

/// A tool result's fields, every one of them (the pattern is exhaustive: a new field must be
/// hashed or said not to be).
fn hash_tool_result<H: Hasher>(result: &crate::ToolResult, state: &mut H) {
    let crate::ToolResult {
        call_id,
        content,
        is_error,
        embedded,
        compacted,
        extra,
    } = result;
    state.write_u8(2);
    hash_str(call_id, state);
    match content {
        ToolOutput::Text(text) => {
            state.write_u8(0);
            hash_str(text, state);
        }
        ToolOutput::Parts(parts) => {
            state.write_u8(1);
            write_len(parts.len(), state);
            for part in parts {
                part.hash_content(state);
            }
        }
    }
    state.write_u8(match is_error {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    });
    state.write_u8(u8::from(*embedded));
    match compacted {
        None => state.write_u8(0),
        Some(Compacted {
            at_ms,
            phase,
            original_tokens,
            original_chars,
            handle,
        }) => {
            state.write_u8(1);
            state.write_u64(*at_ms);
            // Declaration order: reordering the variants changes stored hashes, and a
            // proxy's saved head is then judged afresh once.
            state.write_u8(*phase as u8);
            write_len(*original_tokens, state);
            write_len(*original_chars, state);
            hash_str(handle, state);
        }
    }
    hash_map(extra, state);
}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;

    use serde_json::json;

    use super::*;
    use crate::{Role, ToolCall, ToolResult};

    fn tool_call(id: &str, name: &str, input: Value) -> Part {
        Part::ToolCall(ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            input,
            raw_input: None,
            embedded: false,
            extra: JsonMap::new(),
        })
    }

    fn tool_result(call_id: &str, output: &str) -> Part {
        Part::ToolResult(ToolResult {
            call_id: call_id.to_owned(),
            content: ToolOutput::Text(output.to_owned()),
            is_error: None,
            embedded: false,
            compacted: None,
            extra: JsonMap::new(),
        })
    }

    fn hash(message: &Message) -> u64 {
        let mut state = DefaultHasher::new();
        message.hash_content(&mut state);
        state.finish()
    }

    fn outline(message: &Message) -> u64 {
        let mut state = DefaultHasher::new();
        message.hash_outline(&mut state);
        state.finish()
    }

    #[test]
    fn the_outline_ignores_what_results_hold_and_nothing_else() {
        let result = Message::new(
            Role::User,
            vec![tool_result("c1", "fn main() {}"), Part::text("and then?")],
        );
        let mut cleared = result.clone();
        if let Part::ToolResult(output) = &mut cleared.parts[0] {
            output.content = ToolOutput::Text("[Old tool result content cleared]".into());
            output.is_error = Some(false);
        }
        cleared.wire.push(WireRecord::default());
        assert_ne!(hash(&result), hash(&cleared));
        assert_eq!(outline(&result), outline(&cleared));
        // What else the message holds still counts: the call answered, the text beside it.
        let mut other = result.clone();
        if let Part::ToolResult(output) = &mut other.parts[0] {
            output.call_id = "c2".into();
        }
        assert_ne!(outline(&result), outline(&other));
        let mut other = result.clone();
        other.parts[1] = Part::text("and now?");
        assert_ne!(outline(&result), outline(&other));
        let call = Message::new(
            Role::Assistant,
            vec![tool_call("c1", "Read", json!({"path": "a.rs"}))],
        );
        let mut other = call.clone();
        if let Part::ToolCall(tool) = &mut other.parts[0] {
            tool.input = json!({"path": "b.rs"});
        }
        assert_ne!(outline(&call), outline(&other));
    }

    fn value_hash(value: &Value) -> u64 {
        let mut state = DefaultHasher::new();
        hash_value(value, &mut state);
        state.finish()
    }

    #[test]
    fn equal_messages_hash_alike_and_every_edit_changes_the_hash() {
        let call = Message::new(
            Role::Assistant,
            vec![
                Part::text("reading"),
                tool_call("c1", "Read", json!({"path": "a.rs"})),
            ],
        );
        let result = Message::new(Role::Tool, vec![tool_result("c1", "fn main() {}")]);
        assert_eq!(hash(&call), hash(&call.clone()));
        assert_ne!(hash(&call), hash(&result));

        let mut edited = call.clone();
        edited.parts[0] = Part::text("Reading");
        assert_ne!(hash(&call), hash(&edited));
        let mut edited = call.clone();
        if let Part::ToolCall(tool) = &mut edited.parts[1] {
            tool.input = json!({"path": "b.rs"});
        }
        assert_ne!(hash(&call), hash(&edited));
        let mut edited = call.clone();
        edited.generated = true;
        assert_ne!(hash(&call), hash(&edited));
        let mut edited = call.clone();
        edited.wire.push(WireRecord::default());
        assert_ne!(hash(&call), hash(&edited));
        let mut edited = result.clone();
        if let Part::ToolResult(output) = &mut edited.parts[0] {
            output.is_error = Some(false);
        }
        assert_ne!(hash(&result), hash(&edited));
    }

    #[test]
    fn values_hash_by_kind_content_and_order() {
        assert_ne!(value_hash(&json!("1")), value_hash(&json!(1)));
        assert_ne!(value_hash(&json!(1)), value_hash(&json!(1.0)));
        assert_ne!(value_hash(&json!(-1)), value_hash(&json!(1)));
        assert_ne!(
            value_hash(&json!(["ab", "c"])),
            value_hash(&json!(["a", "bc"]))
        );
        assert_ne!(value_hash(&json!(null)), value_hash(&json!(false)));
        assert_ne!(value_hash(&json!([])), value_hash(&json!({})));
        let ordered: Value = serde_json::from_str(r#"{"a":1,"b":2}"#).unwrap();
        let reversed: Value = serde_json::from_str(r#"{"b":2,"a":1}"#).unwrap();
        assert_ne!(value_hash(&ordered), value_hash(&reversed));
        assert_eq!(value_hash(&ordered), value_hash(&ordered.clone()));
    }
}
