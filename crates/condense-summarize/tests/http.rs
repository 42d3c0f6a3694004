//! The HTTP summarizers against a server started by the test on 127.0.0.1 that answers as each
//! protocol would: success, a 429 then success, 500 three times, a time-out, a malformed body, an
//! empty summary, a context-length refusal, and a head that needs chunking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::testing::{tool_call, tool_result};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use condense_core::{Message, Part, Role};
use condense_summarize::{
    Anthropic, OpenAi, RemoteSettings, Responses, SummarizeError, Summarizer,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Clone)]
struct Reply {
    status: u16,
    body: String,
    delay: Duration,
}

fn reply(status: u16, body: impl Into<String>) -> Reply {
    Reply {
        status,
        body: body.into(),
        delay: Duration::ZERO,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Protocol {
    OpenAi,
    Responses,
    Anthropic,
}

impl Protocol {
    fn success(self, text: &str) -> Reply {
        match self {
            Protocol::OpenAi => reply(
                200,
                json!({"choices": [{"message": {"role": "assistant", "content": text}}]})
                    .to_string(),
            ),
            // Reasoning first, as a reasoning model answers: only the message's text counts.
            Protocol::Responses => reply(
                200,
                json!({"object": "response", "status": "completed", "output": [
                    {"type": "reasoning", "id": "rs_1", "summary": []},
                    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": text, "annotations": []}]}
                ]})
                .to_string(),
            ),
            Protocol::Anthropic => reply(
                200,
                json!({"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"})
                    .to_string(),
            ),
        }
    }

    /// The request's turns: `messages`, or the Responses API's `input`.
    fn turns(self, body: &Value) -> &Vec<Value> {
        let key = match self {
            Protocol::Responses => "input",
            _ => "messages",
        };
        body[key].as_array().unwrap()
    }

    fn summarizer(self, settings: RemoteSettings) -> Box<dyn Summarizer> {
        match self {
            Protocol::OpenAi => Box::new(OpenAi::new(settings).unwrap()),
            Protocol::Responses => Box::new(Responses::new(settings).unwrap()),
            Protocol::Anthropic => Box::new(Anthropic::new(settings).unwrap()),
        }
    }

    fn path(self) -> &'static str {
        match self {
            Protocol::OpenAi => "/v1/chat/completions",
            Protocol::Responses => "/v1/responses",
            Protocol::Anthropic => "/v1/messages",
        }
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: String,
    body: Value,
}

/// Serves `replies` in order (the last one again when they run out), one request per connection.
async fn serve(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let mut index = 0;
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let reply = replies[index.min(replies.len() - 1)].clone();
            index += 1;
            let log = log.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head_end, length) = loop {
                    let read = socket.read(&mut chunk).await.unwrap_or(0);
                    if read == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..read]);
                    if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
                        let length = head
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .and_then(|value| value.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (end + 4, length);
                    }
                };
                while buffer.len() < head_end + length {
                    let read = socket.read(&mut chunk).await.unwrap_or(0);
                    if read == 0 {
                        break;
                    }
                    buffer.extend_from_slice(&chunk[..read]);
                }
                let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
                let path = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned();
                let body = serde_json::from_slice(&buffer[head_end..]).unwrap_or(Value::Null);
                log.lock().unwrap().push(Seen {
                    path,
                    headers: head.to_lowercase(),
                    body,
                });
                tokio::time::sleep(reply.delay).await;
                let response = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                    reply.status,
                    reply.body.len(),
                    reply.body
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (format!("http://{address}"), seen)
}

fn settings(protocol: Protocol, base: &str) -> RemoteSettings {
    let base_url = match protocol {
        Protocol::OpenAi | Protocol::Responses => format!("{base}/v1"),
        Protocol::Anthropic => base.to_owned(),
    };
    let mut settings = RemoteSettings::new(base_url, "big-model").unwrap();
    settings.api_key_env = None;
    settings.compaction_model = Some("small-model".into());
    settings.backoff = Duration::from_millis(10);
    settings.timeout = Duration::from_millis(500);
    settings
}

fn head() -> Vec<Message> {
    vec![
        Message::text(Role::User, "Fix the failing test in parser.rs"),
        Message::new(
            Role::Assistant,
            vec![
                Part::text("Reading the file."),
                tool_call("c1", "read_file", json!({"path": "src/parser.rs"})),
            ],
        ),
        Message::new(
            Role::Tool,
            vec![tool_result("c1", "fn parse() {}\n".repeat(500))],
        ),
    ]
}

const PROMPT: &str = "Summarize.\n\n## Goal\n## Files";

async fn both(test: impl AsyncFn(Protocol)) {
    test(Protocol::OpenAi).await;
    test(Protocol::Responses).await;
    test(Protocol::Anthropic).await;
}

#[tokio::test]
async fn a_summary_comes_back_and_the_request_is_well_formed() {
    both(async |protocol| {
        let (base, seen) = serve(vec![
            protocol.success("## Goal\nfix it\n## Files\nsrc/parser.rs"),
        ])
        .await;
        let summary = protocol
            .summarizer(settings(protocol, &base))
            .summarize(&head(), PROMPT)
            .await
            .unwrap();
        assert_eq!(summary, "## Goal\nfix it\n## Files\nsrc/parser.rs");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].path, protocol.path());
        assert_eq!(
            seen[0].body["model"], "small-model",
            "the compaction model is used"
        );
        let messages = protocol.turns(&seen[0].body);
        assert_eq!(messages[0]["role"], "user");
        let last = messages.last().unwrap()["content"].as_str().unwrap();
        assert!(last.ends_with(PROMPT), "the prompt comes last");
        assert!(
            last.contains("[… 5000 more characters cut]"),
            "tool outputs are cut to 2,000 characters"
        );
        if protocol == Protocol::Anthropic {
            assert!(seen[0].headers.contains("anthropic-version: 2023-06-01"));
        }
    })
    .await;
}

#[tokio::test]
async fn a_429_is_retried() {
    both(async |protocol| {
        let (base, seen) = serve(vec![
            reply(429, "{\"error\":\"slow down\"}"),
            protocol.success("## Goal\nok"),
        ])
        .await;
        let summary = protocol
            .summarizer(settings(protocol, &base))
            .summarize(&head(), PROMPT)
            .await
            .unwrap();
        assert_eq!(summary, "## Goal\nok");
        assert_eq!(seen.lock().unwrap().len(), 2);
    })
    .await;
}

#[tokio::test]
async fn three_500s_are_an_error() {
    both(async |protocol| {
        let (base, seen) = serve(vec![reply(500, "{\"error\":\"boom\"}")]).await;
        let error = protocol
            .summarizer(settings(protocol, &base))
            .summarize(&head(), PROMPT)
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                SummarizeError::Http {
                    status: 500,
                    attempts: 3,
                    ..
                }
            ),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .contains("HTTP 500 after 3 attempt(s): {\"error\":\"boom\"}"),
            "{error}"
        );
        assert_eq!(seen.lock().unwrap().len(), 3);
    })
    .await;
}

#[tokio::test]
async fn a_server_that_does_not_answer_times_out() {
    both(async |protocol| {
        let slow = Reply {
            delay: Duration::from_secs(5),
            ..protocol.success("late")
        };
        let (base, _) = serve(vec![slow]).await;
        let mut settings = settings(protocol, &base);
        settings.timeout = Duration::from_millis(150);
        settings.max_attempts = 2;
        let error = protocol
            .summarizer(settings)
            .summarize(&head(), PROMPT)
            .await
            .unwrap_err();
        assert!(
            matches!(
                error,
                SummarizeError::Timeout {
                    timeout_ms: 150,
                    attempts: 2,
                    ..
                }
            ),
            "{error}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_malformed_body_is_an_error() {
    both(async |protocol| {
        let (base, _) = serve(vec![reply(200, "<html>gateway</html>")]).await;
        let error = protocol
            .summarizer(settings(protocol, &base))
            .summarize(&head(), PROMPT)
            .await
            .unwrap_err();
        assert!(matches!(error, SummarizeError::Malformed { .. }), "{error}");
        let (base, _) = serve(vec![reply(200, "{\"unexpected\": true}")]).await;
        let error = protocol
            .summarizer(settings(protocol, &base))
            .summarize(&head(), PROMPT)
            .await
            .unwrap_err();
        assert!(matches!(error, SummarizeError::Malformed { .. }), "{error}");
    })
    .await;
}

#[tokio::test]
async fn an_empty_summary_is_an_error() {
    both(async |protocol| {
        let (base, _) = serve(vec![protocol.success("  \n")]).await;
        let error = protocol
            .summarizer(settings(protocol, &base))
            .summarize(&head(), PROMPT)
            .await
            .unwrap_err();
        assert!(matches!(error, SummarizeError::Empty { .. }), "{error}");
    })
    .await;
}

#[tokio::test]
async fn a_missing_key_is_named() {
    let mut settings = settings(Protocol::OpenAi, "http://127.0.0.1:9");
    settings.api_key_env = Some("CONDENSE_TEST_KEY_THAT_IS_NOT_SET".into());
    let error = OpenAi::new(settings)
        .unwrap()
        .summarize(&head(), PROMPT)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the environment variable CONDENSE_TEST_KEY_THAT_IS_NOT_SET that should hold the API key is not set"
    );
}

/// Configured headers (the proxy's client credentials) go with the request and take the place
/// of the key from `api_key_env`, which is then not even read; Anthropic's version header is the
/// client's when it sent one.
#[tokio::test]
async fn configured_headers_are_sent_instead_of_the_configured_key() {
    both(async |protocol| {
        let (base, seen) = serve(vec![protocol.success("## Goal\nfix it")]).await;
        let mut settings = settings(protocol, &base);
        settings.api_key_env = Some("CONDENSE_TEST_KEY_THAT_IS_NOT_SET".into());
        settings.headers = match protocol {
            Protocol::OpenAi | Protocol::Responses => {
                vec![("authorization".into(), "Bearer sk-client".into())]
            }
            Protocol::Anthropic => vec![
                ("x-api-key".into(), "sk-ant-client".into()),
                ("anthropic-version".into(), "2099-01-01".into()),
            ],
        };
        protocol
            .summarizer(settings)
            .summarize(&head(), PROMPT)
            .await
            .unwrap();
        let headers = seen.lock().unwrap()[0].headers.clone();
        match protocol {
            Protocol::OpenAi | Protocol::Responses => {
                assert!(headers.contains("authorization: bearer sk-client"))
            }
            Protocol::Anthropic => {
                assert!(headers.contains("x-api-key: sk-ant-client"));
                assert!(headers.contains("anthropic-version: 2099-01-01"));
                assert!(!headers.contains("2023-06-01"), "{headers}");
            }
        }
    })
    .await;
}

/// A head far larger than the summarizer's window goes in chunks, and the partial summaries are
/// merged in a last request; a context refusal from the server splits the chunk instead of
/// reaching the caller.
#[tokio::test]
async fn a_large_head_is_summarized_in_chunks_and_merged() {
    both(async |protocol| {
        let refusal = reply(
            400,
            json!({"error": {"code": "context_length_exceeded", "message": "too many tokens"}})
                .to_string(),
        );
        let (base, seen) = serve(vec![
            refusal,
            protocol.success("## Goal\npartial or merged"),
        ])
        .await;
        let mut settings = settings(protocol, &base);
        settings.context_window = 3_000;
        settings.max_summary_tokens = 500;
        let mut head = Vec::new();
        for turn in 0..40 {
            head.push(Message::text(
                Role::User,
                format!("request {turn}: ") + &"please handle this detail. ".repeat(40),
            ));
            head.push(Message::text(Role::Assistant, format!("done {turn}")));
        }
        let summary = protocol
            .summarizer(settings)
            .summarize(&head, PROMPT)
            .await
            .unwrap();
        assert_eq!(summary, "## Goal\npartial or merged");
        let seen = seen.lock().unwrap().clone();
        assert!(seen.len() > 4, "{} requests", seen.len());
        let last = protocol.turns(&seen.last().unwrap().body)[0]["content"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            last.contains("<part-1>") && last.contains("<part-2>"),
            "the last request merges partial summaries"
        );
        for request in &seen {
            let text = Value::Array(protocol.turns(&request.body).clone()).to_string();
            assert!(
                text.len() < 3_000 * 4,
                "a request of {} characters does not fit a 3,000-token window",
                text.len()
            );
        }
    })
    .await;
}

/// TLS works with the ring provider the crate installs: a client for an https server builds,
/// and a request to a local port that is not TLS fails as a connection error, not a panic
/// about a missing crypto provider.
#[tokio::test]
async fn an_https_endpoint_gets_a_client_with_a_crypto_provider() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut settings = RemoteSettings::new(format!("https://127.0.0.1:{port}/v1"), "m").unwrap();
    settings.api_key_env = None;
    settings.max_attempts = 1;
    let summarizer = condense_summarize::OpenAi::new(settings).unwrap();
    let error = summarizer
        .summarize(&head(), "summarize")
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        condense_summarize::SummarizeErrorKind::Unreachable,
        "{error}"
    );
}
