//! A scripted upstream for tests (the `testing` feature): it speaks both providers' exact wire
//! formats, JSON and server-sent events, and records every request it receives. Not for
//! production use.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::Value;

use crate::{Proxy, ProxySettings};

/// Settings that send both providers to `upstream` (an origin), with a 32 MiB body limit, a
/// 30-second silence limit and 5 seconds for a state store call (a loaded test machine).
pub fn settings_for(upstream: &str) -> ProxySettings {
    ProxySettings {
        openai_upstream: upstream.to_owned(),
        anthropic_upstream: upstream.to_owned(),
        body_limit_bytes: 32 << 20,
        upstream_timeout: Duration::from_secs(30),
        upstream_summarizer: None,
        originals: None,
        state_timeout: Duration::from_secs(5),
        auth_token: None,
        native_compaction: crate::NativeMode::Auto,
        ask_stream_usage: true,
    }
}

/// A proxy to `upstream` with the built-in configuration and `env`'s `CONDENSE_*` settings on
/// top, its originals in memory, its clock fixed, its sessions' state under `state`: what the
/// real-client tests put between a client and the scripted model.
pub fn proxy_to(upstream: &str, env: &[(&str, &str)], state: &std::path::Path) -> Arc<Proxy> {
    Arc::new(
        Proxy::new(
            settings_for(upstream),
            compactor(env),
            Arc::new(crate::DirSessionStore::new(state)),
        )
        .unwrap(),
    )
}

/// The compactor the proxy tests use: the built-in configuration with `env`'s `CONDENSE_*`
/// settings on top, its originals in memory, its clock fixed.
pub fn compactor(env: &[(&str, &str)]) -> condense_host::Compactor {
    let config = condense_host::Config::load(&condense_host::Sources {
        env: env
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect(),
        ..condense_host::Sources::default()
    })
    .unwrap();
    condense_host::Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(condense_host::MemoryStore::new()))
        .with_clock(Box::new(condense_host::FixedClock(1_763_700_000_000)))
}

/// A 16,000-token window with 4,096 reserved for the reply: the window the proxy tests compact
/// long sessions at.
pub const WINDOW_16K: [(&str, &str); 2] = [
    ("CONDENSE_MODEL_CONTEXT_WINDOW", "16000"),
    ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "4096"),
];

/// Every file under `dir`, at any depth, whose name ends in `.EXTENSION`: where an agent left
/// its session log.
pub fn files_under(dir: &std::path::Path, extension: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == extension) {
                found.push(path);
            }
        }
    }
    found
}

/// A session state whose decisions replaced one output per handle in `handles`, each
/// placeholder naming its original as the pruner's do.
pub fn state_naming(handles: &[&str]) -> condense_host::SessionState {
    let decisions: serde_json::Map<String, serde_json::Value> = handles
        .iter()
        .enumerate()
        .map(|(index, handle)| {
            let decision = serde_json::json!({
                "fate": "replaced",
                "content": format!("[output pruned; original: condense recall {handle}]"),
                "marker": {
                    "at_ms": 1_763_700_000_000u64,
                    "phase": "prune",
                    "original_tokens": 100,
                    "original_chars": 400,
                    "handle": handle,
                },
            });
            (format!("call_{index}"), decision)
        })
        .collect();
    let log = serde_json::json!({"version": 1, "decisions": decisions});
    condense_host::SessionState {
        log: condense_host::DecisionLog::from_json(&log.to_string()).unwrap(),
        ..condense_host::SessionState::default()
    }
}

/// Serves `proxy` on a free 127.0.0.1 port for as long as the runtime lives; its base URL.
pub async fn spawn(proxy: Arc<Proxy>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(crate::run(listener, proxy, std::future::pending()));
    url
}

/// The request ends of a recorded session replayed every `step`-th assistant step: each
/// request is the messages before that step; the whole session is the last.
pub fn replay_ends(messages: &[Value], step: usize) -> Vec<usize> {
    let mut ends: Vec<usize> = (1..messages.len())
        .filter(|&end| messages[end]["role"] == "assistant")
        .step_by(step)
        .collect();
    ends.push(messages.len());
    ends
}

/// What the scripted upstream received: path (and query), headers, body.
pub type Received = Arc<Mutex<Vec<(String, HeaderMap, Bytes)>>>;

/// The scripted upstream's Chat Completions answer.
pub const OPENAI_REPLY: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":900,"completion_tokens":3,"total_tokens":903}}"#;
/// The scripted upstream's Messages answer.
pub const ANTHROPIC_REPLY: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":800,"output_tokens":2}}"#;

/// The scripted upstream's Chat Completions answer to a request that forces a tool call
/// (`tool_choice: "required"`): a tool call and no text, as a real server gives.
pub const OPENAI_TOOL_CALL_REPLY: &str = r#"{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":900,"completion_tokens":9,"total_tokens":909}}"#;
/// The scripted upstream's Messages answer to a request that forces a tool call
/// (`tool_choice: {"type": "any"}`): a `tool_use` block and no text.
pub const ANTHROPIC_TOOL_CALL_REPLY: &str = r#"{"id":"msg_2","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":800,"output_tokens":9}}"#;

/// The scripted upstream's answer to `POST /v1/responses/compact` when it compacts natively:
/// a `response.compaction` whose one `compaction` item is the provider's own, opaque.
pub const NATIVE_COMPACT_REPLY: &str = r#"{"id":"cmp_1","object":"response.compaction","created_at":1,"output":[{"id":"cmp_item_1","type":"compaction","encrypted_content":"gAAAABprovider-opaque"}],"usage":{"input_tokens":5000,"input_tokens_details":{"cached_tokens":0},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":5300}}"#;

/// The scripted upstream's Responses answer: the whole response object, as OpenAI sends it.
pub const RESPONSES_REPLY: &str = r#"{"id":"resp_1","object":"response","created_at":1,"status":"completed","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"m","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":false,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":880,"input_tokens_details":{"cached_tokens":512},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":884},"user":null,"metadata":{}}"#;
/// The scripted upstream's Responses answer to a request that forces a tool call
/// (`tool_choice: "required"`): a function call and no text.
pub const RESPONSES_TOOL_CALL_REPLY: &str = r#"{"id":"resp_2","object":"response","created_at":1,"status":"completed","error":null,"incomplete_details":null,"model":"m","output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"shell","arguments":"{\"command\":[\"ls\"]}","status":"completed"}],"parallel_tool_calls":true,"tool_choice":"required","tools":[],"usage":{"input_tokens":880,"input_tokens_details":{"cached_tokens":0},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":889},"metadata":{}}"#;

/// The scripted upstream's Responses stream, event by event: the events OpenAI sends for one
/// text answer, the usage in `response.completed`.
pub fn responses_stream() -> Vec<String> {
    let response = |status: &str, output: &str, usage: &str| {
        format!(
            r#"{{"id":"resp_1","object":"response","created_at":1,"status":"{status}","error":null,"incomplete_details":null,"model":"m","output":[{output}],"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"text":{{"format":{{"type":"text"}}}},"usage":{usage},"metadata":{{}}}}"#
        )
    };
    let message = |status: &str, text: &str| {
        format!(
            r#"{{"type":"message","id":"msg_1","status":"{status}","role":"assistant","content":[{text}]}}"#
        )
    };
    let part = r#"{"type":"output_text","text":"ok","annotations":[]}"#;
    let events = [
        ("response.created", format!(r#""response":{}"#, response("in_progress", "", "null"))),
        ("response.in_progress", format!(r#""response":{}"#, response("in_progress", "", "null"))),
        ("response.output_item.added", format!(r#""output_index":0,"item":{}"#, message("in_progress", ""))),
        ("response.content_part.added", r#""item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}"#.to_owned()),
        ("response.output_text.delta", r#""item_id":"msg_1","output_index":0,"content_index":0,"delta":"ok","logprobs":[]"#.to_owned()),
        ("response.output_text.done", r#""item_id":"msg_1","output_index":0,"content_index":0,"text":"ok","logprobs":[]"#.to_owned()),
        ("response.content_part.done", format!(r#""item_id":"msg_1","output_index":0,"content_index":0,"part":{part}"#)),
        ("response.output_item.done", format!(r#""output_index":0,"item":{}"#, message("completed", part))),
        ("response.completed", format!(r#""response":{}"#, response("completed", &message("completed", part), r#"{"input_tokens":700,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":702}"#))),
    ];
    events
        .iter()
        .enumerate()
        .map(|(sequence, (kind, fields))| {
            format!(
                "event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":{sequence},{fields}}}\n\n"
            )
        })
        .collect()
}

/// The scripted upstream's Chat Completions stream, event by event.
pub fn openai_stream() -> Vec<String> {
    vec![
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n".into(),
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":null}],\"usage\":null}\n\n".into(),
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n".into(),
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":700,\"completion_tokens\":1,\"total_tokens\":701}}\n\n".into(),
        "data: [DONE]\n\n".into(),
    ]
}

/// The scripted upstream's Chat Completions stream for a request that did not ask for its usage
/// (`stream_options.include_usage`), as OpenAI sends it: no `usage` on any chunk, and no
/// closing chunk of usage.
pub fn openai_stream_without_usage() -> Vec<String> {
    openai_stream()
        .into_iter()
        .filter(|event| !event.contains("\"choices\":[]"))
        .map(|event| event.replace(",\"usage\":null", ""))
        .collect()
}

/// The scripted upstream's Messages stream, event by event.
pub fn anthropic_stream() -> Vec<String> {
    vec![
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":500,\"output_tokens\":1}}}\n\n".into(),
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".into(),
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n".into(),
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n".into(),
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}\n\n".into(),
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into(),
    ]
}

/// `answer` (a whole answer or one event) as the scripted upstream sends it for `behaviour`:
/// with `x-test: at-limit`, the reply stopped at its limit (Anthropic's `max_tokens`, Chat
/// Completions' `length`, a response `incomplete` for `max_output_tokens`), as a model whose
/// reply is longer than the request's limit.
fn stopped(answer: &str, behaviour: &str) -> String {
    if behaviour != "at-limit" {
        return answer.to_owned();
    }
    answer
        .replace(
            r#""stop_reason":"end_turn""#,
            r#""stop_reason":"max_tokens""#,
        )
        .replace(r#""finish_reason":"stop""#, r#""finish_reason":"length""#)
        .replace(
            r#""status":"completed","error":null,"incomplete_details":null"#,
            r#""status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"}"#,
        )
}

/// How condense's summary prompt opens (`templates/preamble.md`): what tells a scripted
/// upstream that condense is asking for a summary.
const SUMMARY_PROMPT_OPENING: &str = "You are writing the memory of an AI coding agent";

/// The summary a scripted model writes when `body` (any API's request) is condense asking for
/// one: the structured template's five sections, naming every file path the request holds, and
/// long enough for the gate; `None` for any other request.
pub fn scripted_condense_summary(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    if !text.contains(SUMMARY_PROMPT_OPENING) {
        return None;
    }
    let mut files: Vec<&str> = text
        .split(|c: char| {
            c.is_whitespace() || matches!(c, '"' | '\\' | '\'' | '(' | ')' | ',' | '`')
        })
        .filter(|word| {
            word.contains('/')
                && word.rsplit_once('.').is_some_and(|(_, extension)| {
                    (1..=4).contains(&extension.len())
                        && extension.chars().all(|c| c.is_ascii_alphanumeric())
                })
        })
        .collect();
    files.sort_unstable();
    files.dedup();
    files.truncate(40);
    let mut summary = String::from(
        "## Goal\nFinish the task the person set at the start of the session.\n## Instructions\nKeep to the person's constraints.\n## Discoveries\n",
    );
    for step in 1..=40 {
        summary.push_str(&format!(
            "- Step {step} of the session was read and its result kept in mind.\n"
        ));
    }
    summary
        .push_str("## Accomplished\nThe steps above are done.\n## Relevant files / directories\n");
    for file in files {
        summary.push_str(&format!("- {file}\n"));
    }
    Some(summary)
}

/// `reply` (a scripted answer) with the string at `path` replaced by `text`.
fn json_reply_with(reply: &str, path: &[&str], text: &str) -> String {
    let mut value: Value = serde_json::from_str(reply).unwrap_or(Value::Null);
    let mut at = &mut value;
    for key in path {
        at = match key.parse::<usize>() {
            Ok(index) => &mut at[index],
            Err(_) => &mut at[*key],
        };
    }
    *at = Value::String(text.to_owned());
    value.to_string()
}

/// Starts the scripted upstream on a free 127.0.0.1 port. `x-test` on a request picks a misbehaviour: `slow` answers after
/// three seconds, `cut` closes a stream after its first event, `long` streams for about a
/// second, `no-stream-options` and `unknown-fields` refuse `stream_options` (naming it or not),
/// `refuse` refuses every request. A request that forces a tool call (`tool_choice` `"required"` or `{"type": "any"}`)
/// gets one, without text.
pub async fn upstream() -> (SocketAddr, Received) {
    let received: Received = Arc::default();
    let record = |received: Received| {
        move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
            let received = received.clone();
            async move {
                received.lock().unwrap().push((
                    uri.path_and_query()
                        .map_or(uri.path(), |path| path.as_str())
                        .to_owned(),
                    headers.clone(),
                    body.clone(),
                ));
                let behaviour = headers
                    .get("x-test")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                if behaviour == "slow" {
                    tokio::time::sleep(Duration::from_secs(3)).await;
                }
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let anthropic = uri.path().ends_with("/v1/messages");
                // An Anthropic-compatible server of another vendor refuses the field and the
                // block it does not know; `x-test: native` plays Anthropic's own, which accepts
                // them.
                let compaction_block = request["messages"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|message| message["content"].as_array())
                    .flatten()
                    .any(|block| block["type"] == "compaction");
                if anthropic
                    && (request.get("context_management").is_some() || compaction_block)
                    && behaviour != "native"
                {
                    let what = if compaction_block {
                        "messages: Input tag 'compaction' found using 'type' does not match any of the expected tags"
                    } else {
                        "context_management: Extra inputs are not permitted"
                    };
                    return Response::builder()
                        .status(400)
                        .header("content-type", "application/json")
                        .body(Body::from(
                            serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": what}}).to_string(),
                        ))
                        .unwrap();
                }
                let responses = uri.path().ends_with("/responses");
                let stream = request["stream"] == true;
                // `x-test: no-stream-options` plays a server that refuses the field, as Azure's
                // older API versions do.
                if behaviour == "no-stream-options" && request.get("stream_options").is_some() {
                    return Response::builder()
                        .status(400)
                        .header("content-type", "application/json")
                        .body(Body::from(
                            serde_json::json!({"error": {"message": "Unrecognized request argument supplied: stream_options", "type": "invalid_request_error", "param": null, "code": null}}).to_string(),
                        ))
                        .unwrap();
                }
                // `x-test: unknown-fields` plays one that refuses it without naming it (a
                // gateway that validates bodies against a schema of its own); `x-test: refuse`
                // refuses every request, as a request the client got wrong is refused.
                let refused = match behaviour.as_str() {
                    "unknown-fields" if request.get("stream_options").is_some() => {
                        Some("Invalid request body: unexpected field")
                    }
                    "refuse" => Some("Invalid value for 'temperature': must be at most 2."),
                    _ => None,
                };
                if let Some(message) = refused {
                    return Response::builder()
                        .status(400)
                        .header("content-type", "application/json")
                        .body(Body::from(
                            serde_json::json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}).to_string(),
                        ))
                        .unwrap();
                }
                let forced =
                    request["tool_choice"] == "required" || request["tool_choice"]["type"] == "any";
                // condense asking for a summary: one a model would write, so the gate lets it
                // through (a bare "ok" is rejected, as it should be).
                if let Some(summary) =
                    scripted_condense_summary(&body).filter(|_| !stream && !forced)
                {
                    let reply = if anthropic {
                        json_reply_with(ANTHROPIC_REPLY, &["content", "0", "text"], &summary)
                    } else if responses {
                        json_reply_with(
                            RESPONSES_REPLY,
                            &["output", "0", "content", "0", "text"],
                            &summary,
                        )
                    } else {
                        json_reply_with(
                            OPENAI_REPLY,
                            &["choices", "0", "message", "content"],
                            &summary,
                        )
                    };
                    return Response::builder()
                        .header("content-type", "application/json")
                        .header("x-upstream", "scripted")
                        .body(Body::from(reply))
                        .unwrap();
                }
                if !stream {
                    let reply = match (anthropic, responses, forced) {
                        (true, _, false) => ANTHROPIC_REPLY,
                        (true, _, true) => ANTHROPIC_TOOL_CALL_REPLY,
                        (false, true, false) => RESPONSES_REPLY,
                        (false, true, true) => RESPONSES_TOOL_CALL_REPLY,
                        (false, false, false) => OPENAI_REPLY,
                        (false, false, true) => OPENAI_TOOL_CALL_REPLY,
                    };
                    return Response::builder()
                        .header("content-type", "application/json")
                        .header("x-upstream", "scripted")
                        .body(Body::from(stopped(reply, &behaviour)))
                        .unwrap();
                }
                let events = if anthropic {
                    anthropic_stream()
                } else if responses {
                    responses_stream()
                } else if request["stream_options"]["include_usage"] == true {
                    openai_stream()
                } else {
                    openai_stream_without_usage()
                };
                let mut events: Vec<String> = events
                    .iter()
                    .map(|event| stopped(event, &behaviour))
                    .collect();
                let cut = behaviour == "cut";
                if cut {
                    events.truncate(1);
                }
                if behaviour == "long" {
                    // Two hundred more content events before the end: a stream to walk away from.
                    let delta = events[1].clone();
                    for _ in 0..200 {
                        events.insert(1, delta.clone());
                    }
                }
                let chunks = futures_util::stream::unfold(
                    (events.into_iter(), cut),
                    |(mut events, cut)| async move {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        match events.next() {
                            Some(event) => Some((Ok(Bytes::from(event)), (events, cut))),
                            None if cut => Some((
                                Err(std::io::Error::other("upstream closed mid-stream")),
                                (events, false),
                            )),
                            None => None,
                        }
                    },
                );
                Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(Body::from_stream(chunks))
                    .unwrap()
            }
        }
    };
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            // OpenAI's list of stored chat completions, empty.
            post(record(received.clone())).get(|| async {
                r#"{"object":"list","data":[],"first_id":null,"last_id":null,"has_more":false}"#
            }),
        )
        .route("/v1/messages", post(record(received.clone())))
        // A server without OpenAI's compaction endpoint (llama.cpp, vLLM) answers 404; with
        // `x-test: native` it compacts as OpenAI does, with a provider item of its own.
        .route(
            "/v1/responses/compact",
            post({
                let received = received.clone();
                move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
                    let received = received.clone();
                    async move {
                        received
                            .lock()
                            .unwrap()
                            .push((uri.path().to_owned(), headers.clone(), body));
                        let native = headers.get("x-test").is_some_and(|value| value == "native");
                        let (status, reply) = if native {
                            (200, NATIVE_COMPACT_REPLY)
                        } else {
                            (404, r#"{"error":{"message":"Not Found","type":"invalid_request_error","param":null,"code":null}}"#)
                        };
                        Response::builder()
                            .status(status)
                            .header("content-type", "application/json")
                            .body(Body::from(reply))
                            .unwrap()
                    }
                }
            }),
        )
        // Any other path a chat request may take (Azure's deployments, a gateway's route).
        .fallback(post(record(received.clone())))
        .route(
            "/v1/models",
            get(|headers: HeaderMap| async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                format!("{{\"object\":\"list\",\"data\":[],\"auth\":\"{auth}\"}}")
            }),
        );
    (serve(app).await, received)
}

/// Serves `app` on a free 127.0.0.1 port for as long as the runtime lives; its address.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

/// Every tool result of a request body, by call id: OpenAI's `tool` messages, the Responses
/// API's output items and Anthropic's `tool_result` blocks.
pub fn tool_results(messages: &[Value]) -> Vec<(String, Value)> {
    let mut results = Vec::new();
    for message in messages {
        if message["type"] == "function_call_output" || message["type"] == "custom_tool_call_output"
        {
            let id = message["call_id"].as_str().unwrap_or_default().to_owned();
            results.push((id, message["output"].clone()));
            continue;
        }
        if let (Some(id), Some(content)) =
            (message["tool_call_id"].as_str(), message.get("content"))
        {
            results.push((id.to_owned(), content.clone()));
        }
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                let id = block["tool_use_id"].as_str().unwrap_or_default().to_owned();
                results.push((id, block["content"].clone()));
            }
        }
    }
    results
}

/// Replacements seen so far: a tool result replaced on an earlier request must be the same
/// bytes on every later one, for as long as it is sent (a summary may absorb it).
#[derive(Debug, Default)]
pub struct Frozen {
    /// Each replaced result's content, by call id.
    pub replaced: std::collections::BTreeMap<String, Value>,
}

impl Frozen {
    /// Checks one forwarded body: it reads as `format` with every tool call and result paired,
    /// and its replacements are those of earlier requests.
    pub fn check_body(&mut self, request: usize, format: condense_formats::Format, body: &Value) {
        let conversation = condense_formats::read_json(format, body.clone()).unwrap();
        let findings = conversation.validate();
        assert!(findings.is_empty(), "request {request}: {findings:?}");
        let list = match format {
            condense_formats::Format::Responses => &body["input"],
            _ => &body["messages"],
        };
        self.check(request, tool_results(list.as_array().unwrap()));
    }

    /// Checks one request's results and remembers its replacements.
    pub fn check(&mut self, request: usize, results: Vec<(String, Value)>) {
        for (id, content) in results {
            if let Some(before) = self.replaced.get(&id) {
                assert_eq!(before, &content, "request {request}: {id} changed");
            }
            if content.to_string().contains("condense recall") {
                self.replaced.insert(id, content);
            }
        }
    }
}

/// The scripted model's commands in the agent-client tests: `count` of them, each printing a
/// few thousand numbers (about 5K tokens), a different count each time.
pub fn counting_commands(count: usize) -> Vec<String> {
    (0..count)
        .map(|turn| format!("seq 1 {}", 1500 + 100 * turn))
        .collect()
}

/// The proxy's settings in the agent-client tests: a `context_window` the session outgrows
/// after a few commands (beside the agent's own prompt and tools), a skip boundary of two calls
/// (ten by default, more than such a short run makes), and a protect window and minimum small
/// enough for outputs of that size, and the walk on every request (not only when one is due),
/// so that such a short run is pruned.
pub fn agent_proxy_settings(context_window: &'static str) -> [(&'static str, &'static str); 6] {
    [
        ("CONDENSE_PRUNE_WALK_WHEN", "always"),
        ("CONDENSE_PRUNE_SKIP_TOOL_CALLS", "2"),
        ("CONDENSE_MODEL_CONTEXT_WINDOW", context_window),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "4096"),
        ("CONDENSE_PRUNE_MINIMUM_TOKENS", "2000"),
        ("CONDENSE_PRUNE_PROTECT_TOKENS", "5000"),
    ]
}

/// The requests an agent made through the proxy, as the upstream received them: the bodies
/// POSTed to a path starting with `path` that offer tools (a title or a token count is not the
/// agent's turn).
pub fn agent_bodies(received: &Received, path: &str) -> Vec<Value> {
    received
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _, _)| at.starts_with(path) && !at.contains("count_tokens"))
        .map(|(_, _, body)| serde_json::from_slice::<Value>(body).unwrap())
        .filter(|body| {
            body["tools"]
                .as_array()
                .is_some_and(|tools| !tools.is_empty())
        })
        .collect()
}

/// Checks what a real agent sent through the proxy to a scripted agent model, request by
/// request: each body valid and its replacements frozen ([`Frozen::check_body`]); from the
/// second on, its newest tool result the one of the call the model asked for last (`call_id`
/// of the previous request's index) and whole (the last exchange is kept); and the working
/// directory the first request names ([`condense_formats::working_directory`]) the one the
/// agent ran in; and that the later requests were compacted (at least two outputs replaced,
/// `who`'s requests as the message says). Returns what was replaced.
// The test's log says how much each client's requests were compacted.
#[allow(clippy::print_stderr)]
pub fn check_agent_bodies(
    who: &str,
    format: condense_formats::Format,
    bodies: &[Value],
    work: &std::path::Path,
    call_id: impl Fn(usize) -> String,
) -> Frozen {
    let first = condense_formats::read_json(format, bodies[0].clone()).unwrap();
    let named = first
        .messages
        .iter()
        .filter_map(condense_formats::working_directory)
        .next_back();
    assert_eq!(
        named,
        work.to_str(),
        "the working directory the agent names"
    );
    let mut frozen = Frozen::default();
    for (request, body) in bodies.iter().enumerate() {
        frozen.check_body(request, format, body);
        if request > 0 {
            let list = match format {
                condense_formats::Format::Responses => &body["input"],
                _ => &body["messages"],
            };
            let results = tool_results(list.as_array().unwrap());
            let (id, content) = results.last().unwrap();
            assert_eq!(id, &call_id(request - 1));
            assert!(
                !content.to_string().contains("condense recall"),
                "request {request}: the newest output was replaced"
            );
        }
    }
    eprintln!(
        "{} {who} requests, {} outputs replaced",
        bodies.len(),
        frozen.replaced.len()
    );
    assert!(
        frozen.replaced.len() >= 2,
        "{who}'s later requests were compacted: {:?}",
        frozen.replaced.keys()
    );
    frozen
}

/// A scripted model that works like an agent, for a real agent (Codex) to talk to over the
/// Responses API, on a free 127.0.0.1 port: its origin and what it received. The `n`-th request
/// (counted from 0 over the upstream's life) gets a call to the shell tool the request offers
/// (Codex's `exec_command`, or its older `shell`) running `commands[n]`; every later one gets
/// `answer` as text. Each answer streams the events OpenAI sends, usage in `response.completed`.
pub async fn responses_agent_upstream(
    commands: Vec<String>,
    answer: &'static str,
) -> (String, Received) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let received: Received = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let commands = Arc::new(commands);
    let record = received.clone();
    let reply = move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
        let received = record.clone();
        let count = count.clone();
        let commands = commands.clone();
        async move {
            received
                .lock()
                .unwrap()
                .push((uri.path().to_owned(), headers, body.clone()));
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let turn = count.fetch_add(1, Ordering::SeqCst);
            let item = match commands.get(turn) {
                Some(command) => shell_call(&request, turn, command),
                None => serde_json::json!({
                    "type": "message", "id": format!("msg_{turn}"), "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": answer, "annotations": []}],
                }),
            };
            let response = |status: &str, output: Value, usage: Value| {
                serde_json::json!({
                    "id": format!("resp_{turn}"), "object": "response", "created_at": 1,
                    "status": status, "model": request["model"], "output": output,
                    "usage": usage,
                })
            };
            // About what a provider would count (four bytes a token), so that an agent that
            // compacts by the usage it is told (Codex) sees its history grow.
            let input_tokens = body.len() / 4;
            let usage = serde_json::json!({
                "input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input_tokens + 9,
            });
            let events = [
                (
                    "response.created",
                    serde_json::json!({"response": response("in_progress", Value::Array(vec![]), Value::Null)}),
                ),
                (
                    "response.output_item.added",
                    serde_json::json!({"output_index": 0, "item": item}),
                ),
                (
                    "response.output_item.done",
                    serde_json::json!({"output_index": 0, "item": item}),
                ),
                (
                    "response.completed",
                    serde_json::json!({"response": response("completed", Value::Array(vec![item.clone()]), usage)}),
                ),
            ];
            let stream: String = events
                .into_iter()
                .enumerate()
                .map(|(sequence, (kind, mut fields))| {
                    fields["type"] = kind.into();
                    fields["sequence_number"] = sequence.into();
                    format!("event: {kind}\ndata: {fields}\n\n")
                })
                .collect();
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(stream))
                .unwrap()
        }
    };
    let app = Router::new().fallback(post(reply));
    (format!("http://{}", serve(app).await), received)
}

/// A call to whichever shell tool `request` offers, running `command`.
fn shell_call(request: &Value, turn: usize, command: &str) -> Value {
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    let (name, arguments) = if tools.contains(&"exec_command") {
        ("exec_command", serde_json::json!({"cmd": command}))
    } else if tools.contains(&"shell") {
        (
            "shell",
            serde_json::json!({"command": ["bash", "-lc", command]}),
        )
    } else {
        panic!("the request offers no shell tool: {tools:?}");
    };
    serde_json::json!({
        "type": "function_call", "id": format!("fc_{turn}"), "call_id": format!("call_{turn}"),
        "name": name, "arguments": arguments.to_string(), "status": "completed",
    })
}

/// The JSON events an agent printed one per line (`codex exec --json`, `opencode run --format
/// json`); other lines (progress, warnings) are left out.
pub fn json_events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Runs `command` to its end, or kills it after `limit` and panics (a hung client fails the
/// test instead of hanging it). Its output is captured.
pub fn run_bounded(mut command: std::process::Command, limit: Duration) -> std::process::Output {
    let child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let id = child.id();
    let deadline = std::time::Instant::now() + limit;
    let (done, waited) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    loop {
        match waited.recv_timeout(Duration::from_millis(200)) {
            Ok(output) => return output.unwrap(),
            Err(_) if std::time::Instant::now() < deadline => {}
            Err(_) => {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &id.to_string()])
                    .status();
                panic!("{command:?} did not finish within {limit:?}");
            }
        }
    }
}

/// What [`anthropic_agent_upstream`] answers an agent's own summarizer call.
pub const SCRIPTED_SUMMARY: &str =
    "## Goal\nCount to a few thousand, several times.\n## Done\nThe first counts ran.";

/// A scripted model that works like an agent, for Claude Code or opencode to talk to over the
/// Messages API, on a free 127.0.0.1 port: its origin and what it received. The `n`-th request
/// that offers a shell tool (Claude Code's `Bash`, opencode's `bash`; counted from 0 over the
/// upstream's life) gets a `tool_use` of it running
/// `commands[n]` (unless that command is empty: then it ends the turn, which lets a script span
/// several turns); a request that offers no tools and whose system prompt asks for a summary
/// (an agent compacting on its own) gets [`SCRIPTED_SUMMARY`]; every other request gets `answer`
/// as text. Streams when asked, with the events Anthropic sends, usage in `message_start` and
/// `message_delta`, its `input_tokens` a quarter of the body's bytes.
pub async fn anthropic_agent_upstream(
    commands: Vec<String>,
    answer: &'static str,
) -> (String, Received) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let received: Received = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let commands = Arc::new(commands);
    let record = received.clone();
    let reply = move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
        let received = record.clone();
        let count = count.clone();
        let commands = commands.clone();
        async move {
            received.lock().unwrap().push((
                uri.path_and_query()
                    .map_or(uri.path(), |path| path.as_str())
                    .to_owned(),
                headers,
                body.clone(),
            ));
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if uri.path().ends_with("/count_tokens") {
                return Response::builder()
                    .header("content-type", "application/json")
                    .body(Body::from(r#"{"input_tokens":1000}"#))
                    .unwrap();
            }
            let bash = request["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|tool| tool["name"] == "Bash" || tool["name"] == "bash")
                .map(|tool| tool["name"].clone());
            let turn = if bash.is_some() {
                count.fetch_add(1, Ordering::SeqCst)
            } else {
                usize::MAX
            };
            let (block, stop) = match commands.get(turn).filter(|command| !command.is_empty()) {
                Some(command) => (
                    serde_json::json!({"type": "tool_use", "id": format!("toolu_{turn:03}"),
                        "name": bash, "input": {"command": command, "description": "Run it"}}),
                    "tool_use",
                ),
                // An agent's own summarizer call offers no tools and asks for a summary.
                None if bash.is_none() && request["system"].to_string().contains("summar") => (
                    serde_json::json!({"type": "text", "text": SCRIPTED_SUMMARY}),
                    "end_turn",
                ),
                None => (
                    serde_json::json!({"type": "text", "text": answer}),
                    "end_turn",
                ),
            };
            anthropic_reply(&request, format!("msg_{turn}"), block, stop, body.len() / 4)
        }
    };
    let app = Router::new().fallback(post(reply));
    (format!("http://{}", serve(app).await), received)
}

/// A scripted model for Claude Code that delegates to a subagent, on a free 127.0.0.1 port:
/// its origin and what it received. A request that offers the `Agent` tool and holds no answer
/// from it yet gets a `tool_use` of `Agent` (id `toolu_agent`) asking a general-purpose
/// subagent to do `prompt`; the subagent's requests (their first user message is `prompt`) run
/// `commands` with `Bash` one by one (ids `toolu_s000`, …), counted by the tool results each
/// request carries, then get `subagent_answer`; every other request gets `answer`. Stateless:
/// what a request gets follows from the request alone.
pub async fn anthropic_delegating_upstream(
    prompt: &'static str,
    commands: Vec<String>,
    subagent_answer: &'static str,
    answer: &'static str,
) -> (String, Received) {
    let received: Received = Arc::default();
    let commands = Arc::new(commands);
    let record = received.clone();
    let reply = move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
        let received = record.clone();
        let commands = commands.clone();
        async move {
            received
                .lock()
                .unwrap()
                .push((uri.path().to_owned(), headers, body.clone()));
            if uri.path().ends_with("/count_tokens") {
                return Response::builder()
                    .header("content-type", "application/json")
                    .body(Body::from(r#"{"input_tokens":1000}"#))
                    .unwrap();
            }
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let text = |block: &Value| block["text"].as_str().unwrap_or_default().to_owned();
            let first_user = request["messages"]
                .as_array()
                .and_then(|messages| messages.iter().find(|m| m["role"] == "user"))
                .map(|message| match &message["content"] {
                    Value::String(content) => content.clone(),
                    Value::Array(blocks) => blocks.iter().map(text).collect(),
                    _ => String::new(),
                })
                .unwrap_or_default();
            let results: Vec<String> = request["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|message| message["content"].as_array())
                .flatten()
                .filter(|block| block["type"] == "tool_result")
                .map(|block| block["tool_use_id"].as_str().unwrap_or_default().to_owned())
                .collect();
            let offers = |name: &str| {
                request["tools"]
                    .as_array()
                    .is_some_and(|tools| tools.iter().any(|tool| tool["name"] == name))
            };
            let (block, stop) = if first_user.contains(prompt) && offers("Bash") {
                match commands.get(results.len()) {
                    Some(command) => (
                        serde_json::json!({"type": "tool_use",
                            "id": format!("toolu_s{:03}", results.len()), "name": "Bash",
                            "input": {"command": command, "description": "Run it"}}),
                        "tool_use",
                    ),
                    None => (
                        serde_json::json!({"type": "text", "text": subagent_answer}),
                        "end_turn",
                    ),
                }
            } else if offers("Agent") && !results.iter().any(|id| id == "toolu_agent") {
                (
                    serde_json::json!({"type": "tool_use", "id": "toolu_agent", "name": "Agent",
                        "input": {"description": "Run the commands", "prompt": prompt,
                                  "subagent_type": "general-purpose"}}),
                    "tool_use",
                )
            } else {
                (
                    serde_json::json!({"type": "text", "text": answer}),
                    "end_turn",
                )
            };
            let id = format!("msg_{}", received.lock().unwrap().len());
            anthropic_reply(&request, id, block, stop, body.len() / 4)
        }
    };
    let app = Router::new().fallback(post(reply));
    (format!("http://{}", serve(app).await), received)
}

/// The Messages API's answer to `request`: one content `block`, `stop` its stop reason, as JSON,
/// or, when the request asks to stream, as the events Anthropic sends (usage in
/// `message_start` and `message_delta`).
fn anthropic_reply(
    request: &Value,
    id: String,
    block: Value,
    stop: &'static str,
    input_tokens: usize,
) -> Response<Body> {
    let message = |content: Value, stop: Value| {
        serde_json::json!({
            "id": id, "type": "message", "role": "assistant",
            "model": request["model"], "content": content, "stop_reason": stop,
            "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 12},
        })
    };
    if request["stream"] != true {
        return Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(
                message(Value::Array(vec![block]), stop.into()).to_string(),
            ))
            .unwrap();
    }
    let (start, delta) = if block["type"] == "text" {
        (
            serde_json::json!({"type": "text", "text": ""}),
            serde_json::json!({"type": "text_delta", "text": block["text"]}),
        )
    } else {
        let mut start = block.clone();
        start["input"] = serde_json::json!({});
        (
            start,
            serde_json::json!({"type": "input_json_delta",
                               "partial_json": block["input"].to_string()}),
        )
    };
    let events = [
        (
            "message_start",
            serde_json::json!({"type": "message_start", "message": message(Value::Array(vec![]), Value::Null)}),
        ),
        (
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        (
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            serde_json::json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 12}}),
        ),
        ("message_stop", serde_json::json!({"type": "message_stop"})),
    ];
    let stream: String = events
        .into_iter()
        .map(|(kind, data)| format!("event: {kind}\ndata: {data}\n\n"))
        .collect();
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(stream))
        .unwrap()
}
