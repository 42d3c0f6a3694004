//! What condense adds to an Anthropic answer when it stood in for the upstream's context
//! management (`serve.native_compaction`): `context_management.applied_edits` for the edits it
//! applied, and the `compaction` block of a `compact_20260112` it ran, first in the content as
//! Anthropic puts it. Both go into a JSON answer and into a stream of server-sent events alike
//! (the block's three events right after `message_start`, every later block's `index` one
//! further, `context_management` on `message_delta`), so a streaming client such as Claude Code
//! reads the same as one that is not.
//!
//! And what it takes out of a Chat Completions stream whose usage it asked for on the client's
//! behalf (`stream_options.include_usage`, so that the session learns the provider's count):
//! the closing chunk of usage alone and the `"usage": null` of every other, which a client
//! that did not ask never sees from the provider either.

use bytes::Bytes;
use serde_json::{Map, Value, json};

/// What to add to an answer, and what to take out of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnswerEdits {
    /// The `context_management` object (`{"applied_edits": [...]}`).
    pub context_management: Option<Value>,
    /// The `content` of the `compaction` block to put first.
    pub compaction: Option<String>,
    /// The proxy asked this Chat Completions stream for its usage, the client did not: the
    /// usage comes out again before the client reads it.
    pub usage_asked: bool,
}

impl AnswerEdits {
    /// Whether there is nothing to add or take out.
    pub fn is_empty(&self) -> bool {
        self.context_management.is_none() && self.compaction.is_none() && !self.usage_asked
    }

    /// `answer` (a whole JSON answer) with the additions; anything but a JSON object as it came.
    pub fn apply_json(&self, answer: &[u8]) -> Bytes {
        match serde_json::from_slice::<Value>(answer) {
            Ok(Value::Object(mut answer)) => {
                self.apply_message(&mut answer);
                Bytes::from(Value::Object(answer).to_string())
            }
            _ => Bytes::copy_from_slice(answer),
        }
    }

    fn apply_message(&self, answer: &mut Map<String, Value>) {
        if let Some(compaction) = &self.compaction
            && let Some(Value::Array(content)) = answer.get_mut("content")
        {
            content.insert(0, block(compaction));
        }
        if let Some(context_management) = &self.context_management {
            answer.insert("context_management".into(), context_management.clone());
        }
    }

    /// An editor for the answer's event stream.
    pub fn stream(self) -> StreamEditor {
        StreamEditor {
            edits: self,
            pending: Vec::new(),
        }
    }
}

/// The `compaction` block holding `content`.
fn block(content: &str) -> Value {
    json!({"type": "compaction", "content": content})
}

/// The answer to a request whose `compact_20260112` edit asked to pause after compacting:
/// the block alone, `stop_reason: "compaction"`, as JSON or as the events of a stream.
pub fn paused(content: &str, model: Option<&str>, input_tokens: usize, stream: bool) -> String {
    let id = format!("msg_condense_{:016x}", fxhash(content));
    let usage = json!({"input_tokens": input_tokens, "output_tokens": 0});
    if !stream {
        return json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [block(content)], "stop_reason": "compaction", "stop_sequence": null,
            "usage": usage,
        })
        .to_string();
    }
    let events = [
        json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": usage}}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "compaction", "content": null}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "compaction_delta", "content": content}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "compaction", "stop_sequence": null},
               "usage": {"output_tokens": 0}}),
        json!({"type": "message_stop"}),
    ];
    events.iter().map(event).collect()
}

/// A stable id from the block's content, so the same request gets the same answer.
fn fxhash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One server-sent event for `data`, named by its `type`.
fn event(data: &Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap_or_default()
    )
}

/// Edits an event stream (Anthropic's, or Chat Completions' whose usage condense asked for)
/// chunk by chunk: whole events are edited and passed on, a partial one waits for the rest.
#[derive(Debug)]
pub struct StreamEditor {
    edits: AnswerEdits,
    pending: Vec<u8>,
}

impl StreamEditor {
    /// The edited events `chunk` completes.
    pub fn feed(&mut self, chunk: &[u8]) -> Bytes {
        self.pending.extend_from_slice(chunk);
        let mut out = String::new();
        while let Some(end) = find_event_end(&self.pending) {
            let raw: Vec<u8> = self.pending.drain(..end.0 + end.1).collect();
            out.push_str(&self.edit(&raw[..end.0]));
        }
        Bytes::from(out)
    }

    /// What is left once the upstream's stream ended, as it came.
    pub fn finish(&mut self) -> Bytes {
        Bytes::from(std::mem::take(&mut self.pending))
    }

    /// One event (without its blank line), edited.
    fn edit(&self, raw: &[u8]) -> String {
        let text = String::from_utf8_lossy(raw);
        let data = text
            .lines()
            .find_map(|line| line.strip_prefix("data:"))
            .map(str::trim_start)
            .and_then(|data| serde_json::from_str::<Value>(data).ok());
        let Some(mut data) = data else {
            return format!("{text}\n\n");
        };
        if self.edits.usage_asked
            && let Some(chunk) = data.as_object_mut()
        {
            return match chunk.get("usage") {
                // The chunk OpenAI adds for `include_usage`: no choices, the usage alone.
                Some(Value::Object(_))
                    if chunk
                        .get("choices")
                        .and_then(Value::as_array)
                        .is_some_and(Vec::is_empty) =>
                {
                    String::new()
                }
                Some(Value::Null) => {
                    chunk.remove("usage");
                    with_data(&text, &data)
                }
                _ => format!("{text}\n\n"),
            };
        }
        let kind = data["type"].as_str().unwrap_or_default().to_owned();
        match kind.as_str() {
            "message_start" => {
                let mut out = event(&data);
                if let Some(compaction) = &self.edits.compaction {
                    for added in [
                        json!({"type": "content_block_start", "index": 0,
                               "content_block": {"type": "compaction", "content": null}}),
                        json!({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "compaction_delta", "content": compaction}}),
                        json!({"type": "content_block_stop", "index": 0}),
                    ] {
                        out.push_str(&event(&added));
                    }
                }
                out
            }
            "content_block_start" | "content_block_delta" | "content_block_stop"
                if self.edits.compaction.is_some() =>
            {
                if let Some(index) = data["index"].as_u64() {
                    data["index"] = json!(index + 1);
                }
                event(&data)
            }
            "message_delta" if self.edits.context_management.is_some() => {
                data["context_management"] = self.edits.context_management.clone().into();
                event(&data)
            }
            _ => format!("{text}\n\n"),
        }
    }
}

/// The event `text` with its `data:` line holding `data` instead, its other lines as they came.
fn with_data(text: &str, data: &Value) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("data:") {
            out.push_str(&format!("data: {data}"));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

/// Where the first event of `pending` ends: its length and the blank line's.
fn find_event_end(pending: &[u8]) -> Option<(usize, usize)> {
    let lf = memchr::memmem::find(pending, b"\n\n").map(|at| (at, 2));
    let crlf = memchr::memmem::find(pending, b"\r\n\r\n").map(|at| (at, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (one, other) => one.or(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(text: &str) -> Vec<Value> {
        text.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .map(|data| serde_json::from_str(data).unwrap())
            .collect()
    }

    #[test]
    fn a_stream_gets_the_block_first_and_every_later_index_moved() {
        let upstream = [
            json!({"type": "message_start", "message": {"id": "m", "content": []}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
            json!({"type": "message_stop"}),
        ]
        .iter()
        .map(event)
        .collect::<String>();
        let mut editor = AnswerEdits {
            context_management: Some(json!({"applied_edits": []})),
            compaction: Some("the summary".into()),
            usage_asked: false,
        }
        .stream();
        // Fed in pieces that cut events in two.
        let mut out = Vec::new();
        for piece in upstream.as_bytes().chunks(7) {
            out.extend_from_slice(&editor.feed(piece));
        }
        out.extend_from_slice(&editor.finish());
        let got = events(std::str::from_utf8(&out).unwrap());
        let kinds: Vec<&str> = got.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(got[1]["content_block"]["type"], "compaction");
        assert_eq!(got[2]["delta"]["content"], "the summary");
        assert_eq!(got[1]["index"], 0);
        assert_eq!(
            got[4]["index"], 1,
            "the upstream's first block is now the second"
        );
        assert_eq!(got[5]["delta"]["text"], "ok");
        assert_eq!(got[7]["context_management"], json!({"applied_edits": []}));
    }

    #[test]
    fn a_json_answer_gets_the_block_first_and_anything_else_passes() {
        let edits = AnswerEdits {
            context_management: None,
            compaction: Some("s".into()),
            usage_asked: false,
        };
        let answer = json!({"content": [{"type": "text", "text": "ok"}]}).to_string();
        let edited: Value = serde_json::from_slice(&edits.apply_json(answer.as_bytes())).unwrap();
        assert_eq!(
            edited["content"][0],
            json!({"type": "compaction", "content": "s"})
        );
        assert_eq!(edited["content"][1]["text"], "ok");
        assert_eq!(&edits.apply_json(b"not json")[..], b"not json");
    }

    #[test]
    fn a_usage_the_client_did_not_ask_for_is_taken_out_of_a_chat_stream() {
        // OpenAI's stream with `include_usage`: `usage: null` on every chunk, then one of usage
        // alone; Azure's opens with a chunk of no choices and no usage, which stays.
        let upstream = [
            "data: {\"id\":\"c\",\"choices\":[],\"prompt_filter_results\":[]}\n\n",
            "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}],\"usage\":null}\n\n",
            "id: 7\r\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null,\"obfuscation\":\"x\"}\r\n\r\n",
            "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":1,\"total_tokens\":8}}\n\n",
            "data: [DONE]\n\n",
        ]
        .concat();
        let mut editor = AnswerEdits {
            usage_asked: true,
            ..AnswerEdits::default()
        }
        .stream();
        let mut out = Vec::new();
        for piece in upstream.as_bytes().chunks(5) {
            out.extend_from_slice(&editor.feed(piece));
        }
        out.extend_from_slice(&editor.finish());
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            [
                "data: {\"id\":\"c\",\"choices\":[],\"prompt_filter_results\":[]}\n\n",
                "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n",
                "id: 7\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"obfuscation\":\"x\"}\n\n",
                "data: [DONE]\n\n",
            ]
            .concat()
        );
        // Asked by the client, there is nothing to edit: the stream is relayed as it came.
        assert!(AnswerEdits::default().is_empty());
    }

    proptest::proptest! {
        /// However the upstream's stream is cut into chunks (inside an event, inside a line
        /// ending), the edited stream is the same: what the client reads depends on the events,
        /// never on how they arrived.
        #[test]
        fn the_edited_stream_does_not_depend_on_where_chunks_end(
            cuts in proptest::collection::vec(0usize..400, 0..12),
            usage_asked in proptest::bool::ANY,
            crlf in proptest::bool::ANY,
        ) {
            let mut upstream = [
                "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}],\"usage\":null}\n\n",
                "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
                "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":1,\"total_tokens\":8}}\n\n",
                "data: [DONE]\n\n",
            ]
            .concat();
            if crlf {
                upstream = upstream.replace('\n', "\r\n");
            }
            let edits = AnswerEdits { usage_asked, ..AnswerEdits::default() };
            let whole = {
                let mut editor = edits.clone().stream();
                let mut out = editor.feed(upstream.as_bytes()).to_vec();
                out.extend_from_slice(&editor.finish());
                out
            };
            let mut cuts: Vec<usize> = cuts.into_iter().map(|cut| cut % (upstream.len() + 1)).collect();
            cuts.sort_unstable();
            let mut editor = edits.stream();
            let (mut out, mut from) = (Vec::new(), 0);
            for cut in cuts.into_iter().chain([upstream.len()]) {
                out.extend_from_slice(&editor.feed(&upstream.as_bytes()[from..cut]));
                from = cut;
            }
            out.extend_from_slice(&editor.finish());
            proptest::prop_assert_eq!(&out, &whole);
            let text = String::from_utf8(out).unwrap();
            proptest::prop_assert_eq!(text.contains("usage"), !usage_asked);
            proptest::prop_assert!(text.contains("[DONE]") && text.contains("\"ok\""));
        }
    }

    #[test]
    fn a_paused_answer_is_the_block_alone() {
        let answer: Value = serde_json::from_str(&paused("s", Some("m"), 9, false)).unwrap();
        assert_eq!(answer["stop_reason"], "compaction");
        assert_eq!(
            answer["content"],
            json!([{"type": "compaction", "content": "s"}])
        );
        let streamed = events(&paused("s", Some("m"), 9, true));
        assert_eq!(streamed[2]["delta"]["content"], "s");
        assert_eq!(streamed[4]["delta"]["stop_reason"], "compaction");
    }
}
