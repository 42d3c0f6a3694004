//! What the proxy needs to know of each provider's wire: its request format, its error shape,
//! where it reports usage, and how a session is recognised without a header.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use condense_core::{Conversation, Role};
use condense_formats::Format;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The APIs the proxy compacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions (`POST …/chat/completions`), and every server that speaks it.
    OpenAi,
    /// OpenAI Responses (`POST …/responses`): Codex, and clients of the Responses API. Sent to
    /// the OpenAI upstream.
    Responses,
    /// Anthropic Messages (`POST …/v1/messages`).
    Anthropic,
}

impl Api {
    /// Every API, in the order metrics list them.
    pub const ALL: [Api; 3] = [Api::OpenAi, Api::Responses, Api::Anthropic];

    /// What a client appends to its base URL to send a chat request: `/chat/completions` (the
    /// OpenAI SDKs' base ends in `/v1`, Azure's in `/openai/deployments/NAME`), `/responses`
    /// or `/v1/messages`. The Responses API's other routes (`/responses/{id}`,
    /// `/responses/compact`, `/responses/input_tokens`) end otherwise, and pass through.
    pub fn endpoint(self) -> &'static str {
        match self {
            Api::OpenAi => "/chat/completions",
            Api::Responses => "/responses",
            Api::Anthropic => "/v1/messages",
        }
    }

    /// The API a request is a chat request of: a POST to a path ending in its
    /// [`Api::endpoint`], whatever the prefix (`/v1`, Azure's deployments, a gateway's
    /// route). Anything else is the upstream's to answer.
    pub fn of_request(method: &axum::http::Method, path: &str) -> Option<Api> {
        if method != axum::http::Method::POST {
            return None;
        }
        Api::ALL
            .into_iter()
            .find(|provider| path.ends_with(provider.endpoint()))
    }

    /// The wire format of its request bodies.
    pub fn format(self) -> Format {
        match self {
            Api::OpenAi => Format::OpenAi,
            Api::Responses => Format::Responses,
            Api::Anthropic => Format::Anthropic,
        }
    }

    /// The name logs and metrics use.
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Responses => "openai-responses",
            Api::Anthropic => "anthropic",
        }
    }

    /// An error of condense's own, in this provider's shape, so a client's SDK raises it as it
    /// would the provider's.
    pub fn error(self, status: StatusCode, message: &str) -> Response {
        let body = match self {
            Api::OpenAi | Api::Responses => json!({
                "error": {
                    "message": message,
                    "type": openai_type(status),
                    "param": null,
                    "code": null,
                }
            }),
            Api::Anthropic => json!({
                "type": "error",
                "error": {"type": anthropic_type(status), "message": message},
            }),
        };
        (
            status,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

fn openai_type(status: StatusCode) -> &'static str {
    if status.is_server_error() {
        "server_error"
    } else if status == StatusCode::UNAUTHORIZED {
        "authentication_error"
    } else {
        "invalid_request_error"
    }
}

fn anthropic_type(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED => "authentication_error",
        StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
        StatusCode::GATEWAY_TIMEOUT => "timeout_error",
        status if status.is_server_error() => "api_error",
        _ => "invalid_request_error",
    }
}

/// A session key for a client that sends no `x-condense-session`: the same for every request
/// of one conversation, different for another. It hashes what a conversation starts with and
/// never changes once the conversation has its first reply: the provider, the request's
/// `prompt_cache_key` when it has one, the system prompt, the first user message and the first
/// assistant message (their text and the ids and names of the
/// calls, not their bytes, so a client that re-serializes them differently still lands in the
/// same session).
///
/// The first reply is part of the key because agents are often run several times on one task
/// at once (pass@k, retries in parallel): those runs share their system prompt and task, and
/// would otherwise share one state, each request judging afresh what the other run's request
/// left and summarizing again every time. Their first replies differ (the call ids at least),
/// so from the second request on each run has its own state. The first request, which has no
/// reply yet, has a key of its own: all it leaves behind is its time and the provider's usage.
pub fn derived_session(provider: Api, conversation: &Conversation) -> String {
    let mut hasher = Sha256::new();
    let first = |role: Role| {
        conversation
            .messages
            .iter()
            .find(|message| message.role == role && !message.plain_text().is_empty())
            .map(|message| message.plain_text())
            .unwrap_or_default()
    };
    hasher.update(provider.name().as_bytes());
    // A client that names its conversation for the provider's cache (Codex sends its session
    // id as `prompt_cache_key`) tells its sessions apart from their first request.
    if let Some(key) = conversation
        .envelope
        .as_ref()
        .and_then(|envelope| envelope.get("prompt_cache_key"))
        .and_then(Value::as_str)
    {
        hasher.update([2]);
        hasher.update(key.as_bytes());
    }
    hasher.update([0]);
    hasher.update(first(Role::System).as_bytes());
    hasher.update([0]);
    hasher.update(first(Role::User).as_bytes());
    let reply = conversation
        .messages
        .iter()
        .find(|message| message.role == Role::Assistant);
    if let Some(reply) = reply {
        hasher.update([1]);
        hasher.update(reply.plain_text().as_bytes());
        for call in reply.parts.iter().filter_map(|part| match part {
            condense_core::Part::ToolCall(call) => Some(call),
            _ => None,
        }) {
            hasher.update([0]);
            hasher.update(call.id.as_bytes());
            hasher.update([0]);
            hasher.update(call.name.as_bytes());
        }
    }
    format!("auto-{}", short_hex(&hasher.finalize()))
}

/// The longest `x-condense-session` value used as it came.
pub const SESSION_NAME_LIMIT: usize = 128;

/// The session key for an `x-condense-session` value. A name of printable ASCII up to
/// [`SESSION_NAME_LIMIT`] bytes is the key as it came, so that logs and Redis keys show what the
/// client chose; anything else (a header can carry 8 KB, tabs and bytes above ASCII) becomes
/// `named-` and a hash of it: still stable and distinct, but bounded in every log line and key.
pub fn named_session(value: &[u8]) -> String {
    let readable = value.len() <= SESSION_NAME_LIMIT && value.iter().all(u8::is_ascii_graphic);
    if readable {
        return String::from_utf8_lossy(value).into_owned();
    }
    format!("named-{}", short_hex(&Sha256::digest(value)))
}

/// The first 64 bits of a digest in hex: the part of a session key that names it.
fn short_hex(digest: &[u8]) -> String {
    digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Reads the provider's usage out of a response as it streams by: JSON bodies whole (kept up
/// to a limit), server-sent events line by line. The total is the request's whole input (cached
/// or not) plus its output: what the next request's input starts from. It also notes whether
/// the reply stopped at its limit (`max_tokens`), for the proxy to tell when a limit it lowered
/// cut a reply short.
#[derive(Debug)]
pub struct UsageScanner {
    provider: Api,
    sse: bool,
    /// A JSON body so far, or the unfinished last line of an event stream.
    buffer: Vec<u8>,
    /// Input tokens reported (Anthropic reports them at the start of a stream).
    input: Option<u64>,
    /// Output tokens reported (cumulative in Anthropic's stream).
    output: Option<u64>,
    /// The reply stopped at its limit: Anthropic's `stop_reason: "max_tokens"`, a Chat
    /// Completions `finish_reason: "length"`, a response `incomplete` for `max_output_tokens`.
    at_limit: bool,
    /// The stream's last event was read: Chat Completions' `[DONE]`, Anthropic's
    /// `message_stop`, the Responses API's `response.completed` (or `incomplete`, `failed`).
    ended: bool,
}

/// What [`UsageScanner::finish_answer`] read of a whole answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScannedAnswer {
    /// The request's whole input plus its output, where the provider reported them.
    pub tokens: Option<u64>,
    /// The request's whole input alone, where the provider reported it.
    pub input: Option<u64>,
    /// Whether the reply stopped because it reached its limit.
    pub at_limit: bool,
}

/// A JSON body larger than this is relayed but not scanned for usage.
const JSON_SCAN_LIMIT: usize = 8 << 20;

impl UsageScanner {
    /// A scanner for a response of this provider; `sse` when its content type is
    /// `text/event-stream`.
    pub fn new(provider: Api, sse: bool) -> Self {
        UsageScanner {
            provider,
            sse,
            buffer: Vec::new(),
            input: None,
            output: None,
            at_limit: false,
            ended: false,
        }
    }

    /// Feeds the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        if !self.sse {
            if self.buffer.len() + chunk.len() <= JSON_SCAN_LIMIT {
                self.buffer.extend_from_slice(chunk);
            }
            return;
        }
        self.buffer.extend_from_slice(chunk);
        while let Some(end) = self.buffer.iter().position(|&byte| byte == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            self.line(&line);
        }
    }

    /// Whether a stream's last event has been fed: all its usage is read, and its client may
    /// act on the answer before the body itself ends.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The total once the body has ended, if the provider reported one.
    pub fn finish(self) -> Option<u64> {
        self.finish_answer().tokens
    }

    /// The total and whether the reply stopped at its limit, once the body has ended.
    pub fn finish_answer(mut self) -> ScannedAnswer {
        if self.sse {
            let rest = std::mem::take(&mut self.buffer);
            self.line(&rest);
        } else if let Ok(value) = serde_json::from_slice::<Value>(&self.buffer) {
            self.read(&value);
        }
        let tokens = match (self.input, self.output) {
            (None, None) => None,
            (input, output) => Some(input.unwrap_or(0) + output.unwrap_or(0)),
        };
        ScannedAnswer {
            tokens,
            input: self.input,
            at_limit: self.at_limit,
        }
    }

    fn line(&mut self, line: &[u8]) {
        let Some(data) = std::str::from_utf8(line)
            .ok()
            .and_then(|line| line.trim().strip_prefix("data:"))
        else {
            return;
        };
        if data.trim() == "[DONE]" {
            self.ended = true;
        } else if let Ok(value) = serde_json::from_str::<Value>(data.trim()) {
            self.ended |= matches!(
                value.get("type").and_then(Value::as_str),
                Some(
                    "message_stop"
                        | "response.completed"
                        | "response.incomplete"
                        | "response.failed"
                )
            );
            self.read(&value);
        }
    }

    fn read(&mut self, value: &Value) {
        let number = |value: &Value, key: &str| value.get(key).and_then(Value::as_u64);
        match self.provider {
            Api::OpenAi => {
                let choices = value.get("choices").and_then(Value::as_array);
                self.at_limit |= choices.into_iter().flatten().any(|choice| {
                    choice.get("finish_reason").and_then(Value::as_str) == Some("length")
                });
                if let Some(usage) = value.get("usage").filter(|usage| usage.is_object()) {
                    self.input = number(usage, "prompt_tokens").or(self.input);
                    self.output = number(usage, "completion_tokens").or(self.output);
                }
            }
            // A whole response, or a stream's `response.completed` event, which nests it.
            Api::Responses => {
                let response = value.get("response").unwrap_or(value);
                self.at_limit |= response
                    .get("incomplete_details")
                    .and_then(|details| details.get("reason"))
                    .and_then(Value::as_str)
                    == Some("max_output_tokens");
                let usage = value
                    .get("usage")
                    .or_else(|| value.get("response").and_then(|r| r.get("usage")));
                if let Some(usage) = usage.filter(|usage| usage.is_object()) {
                    self.input = number(usage, "input_tokens").or(self.input);
                    self.output = number(usage, "output_tokens").or(self.output);
                }
            }
            Api::Anthropic => {
                // A whole message's `stop_reason`, or a stream's on `message_delta`'s `delta`.
                let stop = value.get("stop_reason").or_else(|| {
                    value
                        .get("delta")
                        .and_then(|delta| delta.get("stop_reason"))
                });
                self.at_limit |= stop.and_then(Value::as_str) == Some("max_tokens");
                // A whole message, or a stream's `message_start` (which nests it) and
                // `message_delta` (which carries the output so far).
                let usage = value
                    .get("usage")
                    .or_else(|| value.get("message").and_then(|m| m.get("usage")));
                if let Some(usage) = usage.filter(|usage| usage.is_object()) {
                    let input: u64 = [
                        "input_tokens",
                        "cache_creation_input_tokens",
                        "cache_read_input_tokens",
                    ]
                    .iter()
                    .filter_map(|key| number(usage, key))
                    .sum();
                    if usage.get("input_tokens").is_some() {
                        self.input = Some(input);
                    }
                    self.output = number(usage, "output_tokens").or(self.output);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(provider: Api, sse: bool, chunks: &[&str]) -> Option<u64> {
        let mut scanner = UsageScanner::new(provider, sse);
        for chunk in chunks {
            scanner.feed(chunk.as_bytes());
        }
        scanner.finish()
    }

    #[test]
    fn session_names_are_kept_when_short_and_readable_and_hashed_otherwise() {
        assert_eq!(named_session(b"team-a/run-7"), "team-a/run-7");
        let long = vec![b'a'; SESSION_NAME_LIMIT + 1];
        let hashed = named_session(&long);
        assert!(
            hashed.starts_with("named-") && hashed.len() == 22,
            "{hashed}"
        );
        assert_eq!(named_session(&long), hashed, "stable");
        assert_ne!(named_session(&long[1..]), named_session(b"a"), "distinct");
        assert!(named_session(b"with space").starts_with("named-"));
        assert!(named_session("caf\u{e9}".as_bytes()).starts_with("named-"));
        assert_eq!(
            named_session(&[b'b'; SESSION_NAME_LIMIT]).len(),
            SESSION_NAME_LIMIT
        );
    }

    #[test]
    fn usage_is_read_from_json_and_from_streams_split_anywhere() {
        assert_eq!(
            scan(
                Api::OpenAi,
                false,
                &[
                    r#"{"id":"x","usage":{"prompt_tokens":10"#,
                    r#","completion_tokens":5}}"#
                ]
            ),
            Some(15)
        );
        assert_eq!(
            scan(
                Api::OpenAi,
                true,
                &[
                    "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n",
                    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,",
                    "\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"
                ]
            ),
            Some(9)
        );
        let anthropic = [
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":12}}\n\n",
        ];
        assert_eq!(scan(Api::Anthropic, true, &anthropic), Some(115));
        assert_eq!(
            scan(
                Api::Anthropic,
                false,
                &[r#"{"usage":{"input_tokens":20,"output_tokens":4}}"#]
            ),
            Some(24)
        );
        // The Responses API: the whole response, or the stream's `response.completed`, which
        // nests it (`response.created` carries `usage: null`).
        assert_eq!(
            scan(
                Api::Responses,
                false,
                &[
                    r#"{"id":"resp_1","object":"response","usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":20},"output_tokens":6,"total_tokens":36}}"#
                ]
            ),
            Some(36)
        );
        let responses = [
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"usage\":null}}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":40,\"output_tokens\":2}}}\n\n",
        ];
        assert_eq!(scan(Api::Responses, true, &responses), Some(42));
        assert_eq!(scan(Api::OpenAi, false, &["not json"]), None);
        assert_eq!(scan(Api::OpenAi, true, &["data: [DONE]\n"]), None);
    }

    /// A stream's last event is noticed as it is fed, in every API, and nothing before it
    /// counts as the end: the proxy records the answer there, before the client reads it.
    #[test]
    fn a_streams_last_event_is_noticed_when_it_is_fed() {
        let streams = [
            (Api::OpenAi, crate::testing::openai_stream()),
            (Api::Anthropic, crate::testing::anthropic_stream()),
            (Api::Responses, crate::testing::responses_stream()),
        ];
        for (provider, events) in streams {
            let mut scanner = UsageScanner::new(provider, true);
            let (last, before) = events.split_last().unwrap();
            for event in before {
                scanner.feed(event.as_bytes());
                assert!(!scanner.ended(), "{provider:?} ended at {event}");
            }
            scanner.feed(last.as_bytes());
            assert!(scanner.ended(), "{provider:?}: {last}");
            assert!(scanner.finish().is_some(), "{provider:?}");
        }
        let mut whole = UsageScanner::new(Api::Anthropic, false);
        whole.feed(br#"{"type":"message_stop"}"#);
        assert!(!whole.ended(), "only a stream's events end it");
    }

    #[test]
    fn a_reply_stopped_at_its_limit_is_noted_in_every_api() {
        let at_limit = |provider: Api, sse: bool, body: &str| {
            let mut scanner = UsageScanner::new(provider, sse);
            // Split anywhere: a stream's events arrive in pieces.
            for piece in body.as_bytes().chunks(7) {
                scanner.feed(piece);
            }
            scanner.finish_answer().at_limit
        };
        let anthropic_json = |stop: &str| {
            format!(
                r#"{{"type":"message","content":[],"stop_reason":"{stop}","usage":{{"input_tokens":5,"output_tokens":9}}}}"#
            )
        };
        assert!(at_limit(
            Api::Anthropic,
            false,
            &anthropic_json("max_tokens")
        ));
        assert!(!at_limit(
            Api::Anthropic,
            false,
            &anthropic_json("end_turn")
        ));
        let anthropic_stream = |stop: &str| {
            format!(
                "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"stop_reason\":null,\"usage\":{{\"input_tokens\":5}}}}}}\n\nevent: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{stop}\"}},\"usage\":{{\"output_tokens\":9}}}}\n\n"
            )
        };
        assert!(at_limit(
            Api::Anthropic,
            true,
            &anthropic_stream("max_tokens")
        ));
        assert!(!at_limit(
            Api::Anthropic,
            true,
            &anthropic_stream("tool_use")
        ));
        let chat = |finish: &str| {
            format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"{finish}\"}}]}}\n\ndata: [DONE]\n\n"
            )
        };
        assert!(at_limit(Api::OpenAi, true, &chat("length")));
        assert!(!at_limit(Api::OpenAi, true, &chat("stop")));
        assert!(at_limit(
            Api::OpenAi,
            false,
            r#"{"choices":[{"index":0,"message":{"content":"a"},"finish_reason":"length"}]}"#
        ));
        let responses = |reason: &str| {
            format!(
                "event: response.incomplete\ndata: {{\"type\":\"response.incomplete\",\"response\":{{\"status\":\"incomplete\",\"incomplete_details\":{{\"reason\":\"{reason}\"}}}}}}\n\n"
            )
        };
        assert!(at_limit(
            Api::Responses,
            true,
            &responses("max_output_tokens")
        ));
        assert!(!at_limit(
            Api::Responses,
            true,
            &responses("content_filter")
        ));
        assert!(at_limit(
            Api::Responses,
            false,
            r#"{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}"#
        ));
    }

    #[test]
    fn the_derived_session_is_fixed_from_the_first_reply_and_tells_parallel_runs_apart() {
        let conversation = |replies: &[&str]| {
            let mut messages = vec![
                condense_core::Message::text(Role::System, "be brief"),
                condense_core::Message::text(Role::User, "fix the bug"),
            ];
            for text in replies {
                messages.push(condense_core::Message::text(Role::Assistant, *text));
                messages.push(condense_core::Message::text(Role::User, "go on"));
            }
            Conversation::new(messages)
        };
        let key = |conversation: &Conversation| derived_session(Api::OpenAi, conversation);
        // One run: the key is set by its first reply and stays as the run grows.
        assert_eq!(
            key(&conversation(&["a"])),
            key(&conversation(&["a", "b", "c"]))
        );
        // The first request has no reply yet: a key of its own.
        assert_ne!(key(&conversation(&[])), key(&conversation(&["a"])));
        // Two runs of one task: their first replies differ, so do their keys.
        assert_ne!(
            key(&conversation(&["a", "b"])),
            key(&conversation(&["x", "b"]))
        );
        // A reply that is only a tool call is told apart by the call's id.
        let with_call = |id: &str| {
            let mut conversation = conversation(&[]);
            conversation.messages.push(condense_core::Message::new(
                Role::Assistant,
                vec![condense_core::testing::tool_call(id, "bash", Value::Null)],
            ));
            conversation
        };
        assert_ne!(key(&with_call("call_1")), key(&with_call("call_2")));
        assert_eq!(key(&with_call("call_1")), key(&with_call("call_1")));
        // Another task, or the same text sent to the other provider: another session.
        let mut other = conversation(&["a"]);
        other.messages[1] = condense_core::Message::text(Role::User, "write docs");
        assert_ne!(key(&other), key(&conversation(&["a"])));
        assert_ne!(
            derived_session(Api::Anthropic, &conversation(&["a"])),
            key(&conversation(&["a"]))
        );
        assert!(key(&other).starts_with("auto-"));
        // Two first requests alike but for the cache key the client gave them (Codex's session
        // id): two sessions. Without one, the key is what it was.
        let keyed = |cache_key: &str| {
            let mut conversation = conversation(&[]);
            let mut envelope = condense_core::JsonMap::new();
            envelope.insert("prompt_cache_key".into(), cache_key.into());
            conversation.envelope = Some(envelope);
            key(&conversation)
        };
        assert_ne!(keyed("0199-a"), keyed("0199-b"));
        assert_eq!(keyed("0199-a"), keyed("0199-a"));
        assert_ne!(keyed("0199-a"), key(&conversation(&[])));
    }

    #[test]
    fn a_chat_request_is_a_post_to_a_path_ending_in_the_endpoint() {
        use axum::http::Method;
        let of = |method: &Method, path: &str| Api::of_request(method, path);
        assert_eq!(of(&Method::POST, "/v1/chat/completions"), Some(Api::OpenAi));
        assert_eq!(
            of(&Method::POST, "/openai/deployments/gpt-4o/chat/completions"),
            Some(Api::OpenAi)
        );
        assert_eq!(
            of(&Method::POST, "/api/v1/chat/completions"),
            Some(Api::OpenAi)
        );
        assert_eq!(of(&Method::POST, "/v1/messages"), Some(Api::Anthropic));
        assert_eq!(
            of(&Method::POST, "/gw/anthropic/v1/messages"),
            Some(Api::Anthropic)
        );
        assert_eq!(of(&Method::POST, "/v1/messages/count_tokens"), None);
        assert_eq!(of(&Method::POST, "/v1/responses"), Some(Api::Responses));
        assert_eq!(
            of(&Method::POST, "/openai/v1/responses"),
            Some(Api::Responses)
        );
        // The Responses API's other routes are the upstream's: retrieve, cancel, Codex's
        // server-side compaction, token counting.
        for path in [
            "/v1/responses/resp_1/cancel",
            "/v1/responses/compact",
            "/v1/responses/input_tokens",
        ] {
            assert_eq!(of(&Method::POST, path), None, "{path}");
        }
        assert_eq!(of(&Method::GET, "/v1/responses/resp_1"), None);
        assert_eq!(of(&Method::GET, "/v1/chat/completions"), None);
    }
}
