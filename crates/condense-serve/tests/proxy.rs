//! The proxy between a real HTTP client (reqwest) and a scripted upstream on 127.0.0.1 that
//! speaks each provider's exact wire format and records every body it receives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use condense_core::testing::transcript;
use condense_host::{Compactor, Config, SessionState, Sources, SummarizerKind};
use condense_pruner::{FixedClock, MemoryStore};
use condense_serve::testing::{
    ANTHROPIC_REPLY, Frozen, OPENAI_REPLY, RESPONSES_REPLY, anthropic_stream, openai_stream,
    openai_stream_without_usage, replay_ends, responses_stream, settings_for, spawn, upstream,
};
use condense_serve::{DirSessionStore, Proxy, ProxySettings, SessionStore, UpstreamSummaries};
use serde_json::{Value, json};

/// How the scripted upstream's summary opens inside condense's summary message
/// ([`condense_serve::testing::scripted_condense_summary`]).
const SCRIPTED: &str = "<prior-conversation-summary>\\n## Goal\\nFinish the task the person set";

struct Running {
    url: String,
    proxy: Arc<Proxy>,
    store: Arc<DirSessionStore>,
    _dir: tempfile::TempDir,
}

async fn proxy_to(
    upstream: SocketAddr,
    window: usize,
    settings: impl FnOnce(&mut ProxySettings),
) -> Running {
    proxy_with(upstream, window, &[], settings).await
}

async fn proxy_with(
    upstream: SocketAddr,
    window: usize,
    extra: &[(&str, &str)],
    settings: impl FnOnce(&mut ProxySettings),
) -> Running {
    // A variable in `extra` replaces the same one here.
    let mut env: Vec<(String, String)> = vec![
        ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), window.to_string()),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), "4096".into()),
        // A small window needs the protect window and minimum scaled to it.
        ("CONDENSE_PRUNE_ADAPTIVE_THRESHOLDS".into(), "true".into()),
    ];
    env.retain(|(name, _)| extra.iter().all(|(key, _)| key != name));
    env.extend(
        extra
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned())),
    );
    let config = Config::load(&Sources {
        env,
        ..Sources::default()
    })
    .unwrap();
    let compactor = Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(MemoryStore::new()))
        .with_clock(Box::new(FixedClock(1_763_700_000_000)));
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DirSessionStore::new(dir.path().join("sessions")));
    let mut proxy_settings = settings_for(&format!("http://{upstream}"));
    // As `condense serve` does: the request's own upstream summarizes when the configuration
    // says so (a test may put other settings in its place).
    if config.summarizer_kind() == SummarizerKind::Upstream {
        proxy_settings.upstream_summarizer = Some(UpstreamSummaries::from_config(&config));
    }
    settings(&mut proxy_settings);
    let proxy = Arc::new(Proxy::new(proxy_settings, compactor, store.clone()).unwrap());
    let url = spawn(proxy.clone()).await;
    Running {
        url,
        proxy,
        store,
        _dir: dir,
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// `body` sent to the proxy's Messages API in `session`: the answer's status and JSON, once
/// the proxy has recorded what it read of the answer.
async fn messages_through(
    running: &Running,
    session: &str,
    body: &Value,
) -> (reqwest::StatusCode, Value) {
    let (status, text) = messages_text_through(running, session, body).await;
    (status, serde_json::from_str(&text).unwrap())
}

/// [`messages_through`], the answer's body as text (a JSON answer, or a stream of events).
async fn messages_text_through(
    running: &Running,
    session: &str,
    body: &Value,
) -> (reqwest::StatusCode, String) {
    let response = client()
        .post(format!("{}/v1/messages", running.url))
        .header("x-api-key", "sk-ant-test")
        .header("anthropic-version", "2023-06-01")
        .header("x-condense-session", session)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    running.proxy.flushed().await;
    (status, text)
}

/// The messages of a shared transcript as JSON, as a client would send them.
fn messages(name: &str) -> Vec<Value> {
    let value: Value = serde_json::from_slice(&transcript(name).unwrap().bytes).unwrap();
    value["messages"].as_array().unwrap().clone()
}

fn tokens(messages: &[Value]) -> usize {
    let body = json!({"messages": messages});
    let (_, conversation) = condense_formats::read(
        body.to_string().as_bytes(),
        Some(condense_formats::Format::OpenAi),
    )
    .unwrap();
    use condense_tokenizer::TokenCounter;
    condense_tokenizer::Tiktoken::default().count_conversation(&conversation)
}

fn state(running: &Running, session: &str) -> SessionState {
    running.store.load(session).unwrap().state
}

/// A long autonomous run (OpenHands, OpenAI format) replayed request by request through the
/// proxy at a 16K window: every body the upstream receives is under the threshold with its
/// pairs valid, every reply reaches the client exactly as the upstream sent it, decisions once
/// made come back byte for byte, and summaries are few (the frozen head is reused).
#[tokio::test]
async fn a_long_session_replayed_request_by_request_stays_under_the_window() {
    let (upstream, received) = upstream().await;
    let running = proxy_to(upstream, 16_000, |_| {}).await;
    let all = messages("openai/openhands-ponylang__ponyc-4588");
    let mut requests = 0;
    let mut frozen = Frozen::default();
    let mut received_tokens = 0;
    for end in 2..=all.len() {
        if all[end - 1]["role"] != "assistant" {
            continue;
        }
        let body = json!({"model": "m", "messages": &all[..end - 1]});
        received_tokens += tokens(&all[..end - 1]);
        let response = client()
            .post(format!("{}/v1/chat/completions", running.url))
            .header("authorization", "Bearer sk-test-secret")
            .header("x-condense-session", "replay")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-upstream"], "scripted");
        assert_eq!(
            response.text().await.unwrap(),
            OPENAI_REPLY,
            "relayed unchanged"
        );
        requests += 1;

        let (path, headers, sent) = received.lock().unwrap().last().cloned().unwrap();
        assert_eq!(path, "/v1/chat/completions");
        assert_eq!(headers["authorization"], "Bearer sk-test-secret");
        assert!(!headers.contains_key("x-condense-session"));
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(sent["model"], "m");
        let sent_messages = sent["messages"].as_array().unwrap();
        assert!(tokens(sent_messages) < 16_000 - 4_096, "request {requests}");
        frozen.check_body(requests, condense_formats::Format::OpenAi, &sent);
    }
    assert!(requests > 30, "{requests}");
    let metrics = running.proxy.metrics.render();
    let summaries = metric(&metrics, "condense_compactions_total{phase=\"summary\"}");
    let reused = metric(
        &metrics,
        "condense_compactions_total{phase=\"frozen_summary\"}",
    );
    assert!(
        summaries >= 1 && summaries * 3 < reused,
        "{summaries} summaries, {reused} reused"
    );
    assert_eq!(metric(&metrics, "condense_failed_open_total"), 0);
    assert_eq!(metric(&metrics, "condense_over_threshold_total"), 0);
    // The tokens before are the requests as the client sent them, not after the frozen
    // summary stood in for their heads (which showed 65 % savings as 4 %).
    assert_eq!(
        metric(&metrics, "condense_tokens_total{stage=\"before\"}"),
        received_tokens as u64
    );
    // The provider's usage of the last reply is in the state for the next trigger; the
    // credentials are nowhere in it (saved after forwarding: waited for).
    running.proxy.flushed().await;
    let saved = state(&running, "replay");
    assert_eq!(saved.reported_usage.map(|usage| usage.tokens), Some(903));
    let files = std::fs::read_dir(running._dir.path().join("sessions")).unwrap();
    for file in files {
        let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
        assert!(!text.contains("sk-test-secret"));
    }
}

/// Replays `runs` (each a whole conversation, OpenAI format) through one proxy at a 16K window,
/// their requests interleaved (the first request of each run, then the second of each, …),
/// with no session header; gives the proxy's metrics.
async fn interleaved(runs: &[Vec<Value>]) -> String {
    let (upstream, _received) = upstream().await;
    let running = proxy_to(upstream, 16_000, |_| {}).await;
    let ends: Vec<Vec<usize>> = runs
        .iter()
        .map(|run| {
            (1..run.len())
                .filter(|&end| run[end]["role"] == "assistant")
                .collect()
        })
        .collect();
    let longest = ends.iter().map(Vec::len).max().unwrap_or(0);
    for step in 0..longest {
        for (run, ends) in runs.iter().zip(&ends) {
            let Some(&end) = ends.get(step) else { continue };
            let response = client()
                .post(format!("{}/v1/chat/completions", running.url))
                .json(&json!({"model": "m", "messages": &run[..end]}))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
        }
    }
    running.proxy.flushed().await;
    running.proxy.metrics.render()
}

/// Agents are often run several times on one task at once (pass@k): the runs share their system
/// prompt and task, and differ from their first reply on. Without a session header each run
/// still keeps its own state: interleaved, two runs make exactly the summaries that each makes
/// alone, and no request finds its history diverged from what the other run left.
#[tokio::test]
async fn two_runs_of_one_task_at_once_keep_a_state_each() {
    let first = messages("openai/openhands-ponylang__ponyc-4588");
    let mut second = first.clone();
    let reply = second
        .iter_mut()
        .find(|message| message["role"] == "assistant")
        .unwrap();
    reply["content"] = json!("Let me look at the repository first.");

    let alone = interleaved(std::slice::from_ref(&first)).await;
    let summaries_alone = metric(&alone, "condense_compactions_total{phase=\"summary\"}");
    assert!(summaries_alone >= 1, "the run is long enough to summarize");

    let together = interleaved(&[first, second]).await;
    assert_eq!(
        metric(&together, "condense_compactions_total{phase=\"summary\"}"),
        2 * summaries_alone
    );
    assert_eq!(metric(&together, "condense_diverged_histories_total"), 0);
    assert_eq!(metric(&together, "condense_failed_open_total"), 0);
}

/// A Claude Code session as Anthropic request bodies, replayed request by request at the
/// default 200K window: the walk prunes (superseded reads, then old outputs) and every pruned
/// result comes back byte for byte on every later request; each body is valid.
#[tokio::test]
async fn pruned_outputs_stay_frozen_across_an_anthropic_replay() {
    let (upstream, received) = upstream().await;
    // A minimum the growing prefixes reach early, so that decisions made on early requests
    // have many later requests to stay frozen through.
    let running = proxy_with(
        upstream,
        200_000,
        &[
            ("CONDENSE_PRUNE_MINIMUM_TOKENS", "2000"),
            ("CONDENSE_PRUNE_WALK_WHEN", "always"),
            // Pruning is what is tested: no summary early, which would take the head away.
            ("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0"),
        ],
        |_| {},
    )
    .await;
    let value: Value =
        serde_json::from_slice(&transcript("anthropic/claude-code-5f8cbb78").unwrap().bytes)
            .unwrap();
    let all = value["messages"].as_array().unwrap().clone();
    let mut frozen = Frozen::default();
    let mut requests = 0;
    // Every fourth assistant step, to keep the test quick in a debug build.
    let ends = replay_ends(&all, 4);
    for end in ends {
        let mut body = value.clone();
        body["messages"] = Value::Array(all[..end].to_vec());
        let response = client()
            .post(format!("{}/v1/messages", running.url))
            .header("x-api-key", "sk-ant-test")
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), ANTHROPIC_REPLY);
        requests += 1;
        let (_, headers, sent) = received.lock().unwrap().last().cloned().unwrap();
        assert_eq!(headers["x-api-key"], "sk-ant-test");
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(sent["system"], value["system"]);
        frozen.check_body(requests, condense_formats::Format::Anthropic, &sent);
    }
    assert!(
        frozen.replaced.len() >= 18,
        "{} outputs replaced over {requests} requests",
        frozen.replaced.len()
    );
    let metrics = running.proxy.metrics.render();
    assert_eq!(metric(&metrics, "condense_failed_open_total"), 0);
    assert!(metric(&metrics, "condense_compactions_total{phase=\"prune\"}") > 0);
}

/// A summarizer that cannot be reached: each request still goes upstream (pruned, over the
/// threshold, and counted so), and after `compaction.max_failures` failures in a row the
/// session's breaker opens, so later requests stop paying for a summary that will not come; the
/// metrics and the state say so.
#[tokio::test]
async fn a_failing_summarizer_opens_the_breaker_and_every_request_still_goes_upstream() {
    let (upstream, received) = upstream().await;
    // A port nothing listens on: bind one, then let it go.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let running = proxy_with(
        upstream,
        16_000,
        &[
            ("CONDENSE_SUMMARIZER_KIND", "openai"),
            (
                "CONDENSE_SUMMARIZER_BASE_URL",
                &format!("http://{closed}/v1"),
            ),
            ("CONDENSE_SUMMARIZER_MAX_ATTEMPTS", "1"),
            (
                "CONDENSE_SUMMARIZER_API_KEY_ENV",
                "CONDENSE_TEST_NO_SUCH_KEY",
            ),
        ],
        |_| {},
    )
    .await;
    let all = messages("openai/openhands-ponylang__ponyc-4588");
    let mut requests = 0;
    for end in replay_ends(&all, 1) {
        let body = json!({"model": "m", "messages": &all[..end]});
        let response = client()
            .post(format!("{}/v1/chat/completions", running.url))
            .header("x-condense-session", "no-summarizer")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), OPENAI_REPLY);
        requests += 1;
    }
    assert_eq!(
        received.lock().unwrap().len(),
        requests,
        "every request went upstream"
    );
    running.proxy.flushed().await;
    let metrics = running.proxy.metrics.render();
    let failures = metric(&metrics, "condense_summarizer_failures_total");
    let over = metric(&metrics, "condense_over_threshold_total");
    assert_eq!(failures, 3, "the breaker opened after 3 failures");
    assert!(
        over > failures,
        "{over} over the threshold, {failures} failures"
    );
    assert_eq!(
        metric(&metrics, "condense_compactions_total{phase=\"summary\"}"),
        0
    );
    assert_eq!(metric(&metrics, "condense_failed_open_total"), 0);
    assert_eq!(state(&running, "no-summarizer").consecutive_failures, 3);
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// Streams are relayed chunk by chunk and byte for byte, in both formats, and the usage in the
/// closing events is recorded.
#[tokio::test]
async fn streams_are_relayed_as_they_arrive_and_their_usage_recorded() {
    let (upstream, received) = upstream().await;
    let running = proxy_to(upstream, 200_000, |_| {}).await;

    let body = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hello"}]});
    let mut response = client()
        .post(format!("{}/v1/chat/completions", running.url))
        .header("x-condense-session", "s-openai")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut chunks = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        chunks.push(chunk);
    }
    assert!(
        chunks.len() >= 3,
        "{} chunks: not buffered whole",
        chunks.len()
    );
    // Nothing to compact: the client's own bytes went upstream.
    let (_, _, forwarded) = received.lock().unwrap().last().cloned().unwrap();
    assert_eq!(forwarded, serde_json::to_vec(&body).unwrap());
    assert_eq!(chunks.concat(), openai_stream().concat().into_bytes());

    let body = json!({"model": "m", "max_tokens": 100, "stream": true,
        "messages": [{"role": "user", "content": "hello"}]});
    let response = client()
        .post(format!("{}/v1/messages", running.url))
        .header("x-api-key", "sk-ant-secret")
        .header("anthropic-version", "2023-06-01")
        .header("x-condense-session", "s-anthropic")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.bytes().await.unwrap(),
        anthropic_stream().concat().into_bytes()
    );
    running.proxy.flushed().await;
    assert_eq!(
        state(&running, "s-openai")
            .reported_usage
            .map(|u| (u.message, u.tokens)),
        Some((1, 701))
    );
    assert_eq!(
        state(&running, "s-anthropic")
            .reported_usage
            .map(|u| (u.message, u.tokens)),
        Some((1, 517))
    );
}

/// A Chat Completions stream the client sent without `stream_options` is asked for its usage
/// on the client's behalf: the session records the provider's count, and the client reads the
/// stream as the upstream sends it unasked. A client's own `stream_options` is left alone, and
/// an upstream that refuses the option is asked again without it, then never with it.
#[tokio::test]
async fn a_stream_is_asked_for_its_usage_for_the_session_and_relayed_without_it() {
    let unasked = json!({"model": "m", "stream": true,
        "messages": [{"role": "user", "content": "hello"}]});
    let (upstream, received) = upstream().await;
    let running = proxy_to(upstream, 200_000, |_| {}).await;
    unasked_stream_relayed(&running, "s-unasked", &unasked, "").await;
    let (_, _, forwarded) = received.lock().unwrap().last().cloned().unwrap();
    let forwarded: Value = serde_json::from_slice(&forwarded).unwrap();
    assert_eq!(forwarded["stream_options"], json!({"include_usage": true}));
    assert_eq!(forwarded["messages"], unasked["messages"]);
    running.proxy.flushed().await;
    assert_eq!(
        state(&running, "s-unasked")
            .reported_usage
            .map(|u| (u.message, u.tokens)),
        Some((1, 701)),
        "the provider's count, read from the chunk the client never saw"
    );

    // The client's own choice goes as it came, byte for byte.
    let declined = json!({"model": "m", "stream": true, "stream_options": {"include_usage": false},
        "messages": [{"role": "user", "content": "hello"}]});
    unasked_stream_relayed(&running, "s-declined", &declined, "").await;
    let (_, _, forwarded) = received.lock().unwrap().last().cloned().unwrap();
    assert_eq!(forwarded, serde_json::to_vec(&declined).unwrap());
    running.proxy.flushed().await;
    assert_eq!(state(&running, "s-declined").reported_usage, None);

    // An upstream that refuses the option, in words that name it or not: the request goes again
    // as the client sent it, and the next is not asked.
    for refusing in ["no-stream-options", "unknown-fields"] {
        let (strict, strict_received) = condense_serve::testing::upstream().await;
        let running = proxy_to(strict, 200_000, |_| {}).await;
        for session in ["s-strict-1", "s-strict-2"] {
            unasked_stream_relayed(&running, session, &unasked, refusing).await;
        }
        let bodies = bodies_of(&strict_received);
        assert_eq!(
            bodies.len(),
            3,
            "{refusing}: asked, sent again without, then never asked"
        );
        assert!(bodies[0].get("stream_options").is_some(), "{refusing}");
        assert_eq!(bodies[1], unasked, "{refusing}");
        assert_eq!(bodies[2], unasked, "{refusing}");
    }

    // A request the upstream refuses for a fault of its own: the client gets the answer its own
    // request gets, and the option, not the cause, is asked for again on the next stream.
    let (refusing, refusing_received) = condense_serve::testing::upstream().await;
    let running = proxy_to(refusing, 200_000, |_| {}).await;
    let response = chat_through(&running, "s-refused", &unasked, "refuse").await;
    assert_eq!(response.status(), 400);
    let refusal: Value = response.json().await.unwrap();
    assert_eq!(
        refusal["error"]["message"],
        "Invalid value for 'temperature': must be at most 2."
    );
    unasked_stream_relayed(&running, "s-after", &unasked, "").await;
    let bodies = bodies_of(&refusing_received);
    assert_eq!(bodies.len(), 3, "asked, sent again without, asked again");
    assert!(bodies[0].get("stream_options").is_some());
    assert_eq!(bodies[1], unasked);
    assert_eq!(bodies[2]["stream_options"], json!({"include_usage": true}));

    // `serve.ask_stream_usage = false`: the client's request goes as it came.
    let (plain, plain_received) = condense_serve::testing::upstream().await;
    let running = proxy_to(plain, 200_000, |settings| settings.ask_stream_usage = false).await;
    unasked_stream_relayed(&running, "s-off", &unasked, "").await;
    let (_, _, forwarded) = plain_received.lock().unwrap().last().cloned().unwrap();
    assert_eq!(forwarded, serde_json::to_vec(&unasked).unwrap());
}

/// An upstream that counts every Chat Completions request at `prompt` tokens and answers it
/// "ok", as a stream or whole as asked; a stream's body ends `hold` after its last event
/// (`[DONE]`), as a server may keep it open. Returns its address and every body it received.
async fn holding_upstream(
    prompt: u64,
    hold: Duration,
) -> (SocketAddr, Arc<std::sync::Mutex<Vec<Value>>>) {
    use futures_util::StreamExt;
    let received: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let bodies = received.clone();
    let answer = move |body: axum::body::Bytes| {
        let bodies = bodies.clone();
        async move {
            let body: Value = serde_json::from_slice(&body).unwrap();
            bodies.lock().unwrap().push(body.clone());
            let usage = json!({"prompt_tokens": prompt, "completion_tokens": 1,
                "total_tokens": prompt + 1});
            if body["stream"] != true {
                let answer = json!({"id": "c", "object": "chat.completion", "created": 1,
                    "model": "m", "usage": usage, "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "ok"}}]});
                return axum::response::Response::builder()
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(answer.to_string()))
                    .unwrap();
            }
            let events = [
                json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop"}]}),
                json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                    "choices": [], "usage": usage}),
            ];
            let text: String = events
                .iter()
                .map(|event| format!("data: {event}\n\n"))
                .chain(["data: [DONE]\n\n".to_owned()])
                .collect();
            let chunks = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(
                axum::body::Bytes::from(text),
            )])
            .chain(futures_util::stream::once(async move {
                tokio::time::sleep(hold).await;
                Ok(axum::body::Bytes::new())
            }));
            axum::response::Response::builder()
                .header("content-type", "text/event-stream")
                .body(axum::body::Body::from_stream(chunks))
                .unwrap()
        }
    };
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(answer));
    (serving(app).await, received)
}

/// A client sends its next request the moment it has read an answer: as OpenAI's SDK does on
/// `[DONE]`, while the upstream's stream has yet to end, and after a whole answer. That request
/// is judged on the provider's count of the one before, as if the client had waited: here a
/// count that leaves the reply less than its 4,096 tokens, so the limit goes upstream lowered.
/// Recorded when the stream's body ended, the count came too late (here ten seconds, or never
/// where the client let go of the stream first): the next request went out on condense's own
/// count (a few dozen tokens) with the client's limit.
#[tokio::test]
async fn an_answers_count_is_recorded_before_the_sessions_next_request_is_judged() {
    use futures_util::StreamExt;
    const WINDOW: usize = 16_000;
    // The provider's count of every request: it leaves the reply less than the client asks.
    const COUNTED: u64 = 13_500;
    // Long enough that no busy machine reaches the stream's end first; the test does not wait
    // for it (the client lets go of the stream).
    const HOLD: Duration = Duration::from_secs(10);
    let (upstream, received) = holding_upstream(COUNTED, HOLD).await;
    let running = proxy_to(upstream, WINDOW, |_| {}).await;
    for stream in [true, false] {
        let session = format!("at-once-{stream}");
        let mut messages = vec![
            json!({"role": "system", "content": "You are a careful agent."}),
            json!({"role": "user", "content": "fix the parser"}),
        ];
        let send = |messages: &Vec<Value>| {
            client()
                .post(format!("{}/v1/chat/completions", running.url))
                .header("authorization", "Bearer sk-test")
                .header("x-condense-session", &session)
                .json(
                    &json!({"model": "gpt-4.1", "max_tokens": 4_096, "stream": stream,
                    "messages": messages}),
                )
                .send()
        };
        let first = send(&messages).await.unwrap();
        assert_eq!(first.status(), 200);
        let started = std::time::Instant::now();
        // Read up to the answer's last event, and no further: the body may still be open.
        let mut read = Vec::new();
        let mut body = first.bytes_stream();
        while !(String::from_utf8_lossy(&read).contains("[DONE]")
            || (!stream && serde_json::from_slice::<Value>(&read).is_ok()))
        {
            read.extend_from_slice(&body.next().await.unwrap().unwrap());
        }
        messages.push(json!({"role": "assistant", "content": "ok"}));
        messages.push(json!({"role": "user", "content": "go on"}));
        let second = send(&messages).await.unwrap();
        assert_eq!(second.status(), 200);
        if stream {
            assert!(
                started.elapsed() < HOLD,
                "the next request was answered before the first stream's body ended"
            );
        }
        drop(body);
        running.proxy.flushed().await;
        let bodies = received.lock().unwrap().clone();
        let limit = bodies.last().unwrap()["max_tokens"].as_u64().unwrap();
        let room = WINDOW as u64 - COUNTED;
        assert!(
            limit < room,
            "stream {stream}: the next request went out with max_tokens {limit}, past the {room} the provider's count leaves"
        );
    }
}

/// The JSON bodies the scripted upstream received, in order.
fn bodies_of(received: &condense_serve::testing::Received) -> Vec<Value> {
    received
        .lock()
        .unwrap()
        .iter()
        .map(|(_, _, body)| serde_json::from_slice(body).unwrap())
        .collect()
}

/// `body` sent to `running`'s Chat Completions in `session`, the scripted upstream playing `test`.
async fn chat_through(
    running: &Running,
    session: &str,
    body: &Value,
    test: &str,
) -> reqwest::Response {
    client()
        .post(format!("{}/v1/chat/completions", running.url))
        .header("x-condense-session", session)
        .header("x-test", test)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Streams `body` through `running` (the scripted upstream playing `test`) and checks that the
/// client reads the stream OpenAI sends a request that did not ask for its usage.
async fn unasked_stream_relayed(running: &Running, session: &str, body: &Value, test: &str) {
    let response = chat_through(running, session, body, test).await;
    assert_eq!(response.status(), 200, "{session}");
    assert_eq!(
        response.bytes().await.unwrap(),
        openai_stream_without_usage().concat().into_bytes(),
        "{session}"
    );
}

/// A reply that stops at a limit condense lowered is counted and logged, JSON or streamed, in
/// the Messages API, Chat Completions and the Responses API alike; one the client's own limit
/// stopped is not condense's doing and is not counted. A whole (JSON) answer so cut is asked
/// once more before the client gets one; this upstream cuts every reply, so that one is cut
/// too, counted, and given.
#[tokio::test]
async fn a_reply_stopped_at_a_limit_condense_lowered_is_counted() {
    let (upstream, received) = upstream().await;
    let running = proxy_to(upstream, 8_000, |_| {}).await;
    let send = |path: &'static str, session: &'static str, max_tokens: u64, stream: bool| {
        let said = "write it all out";
        let body = if path == "/v1/responses" {
            json!({"model": "m", "max_output_tokens": max_tokens, "stream": stream,
                "input": [{"role": "user", "content": said}]})
        } else {
            json!({"model": "m", "max_tokens": max_tokens, "stream": stream,
                "messages": [{"role": "user", "content": said}]})
        };
        client()
            .post(format!("{}{path}", running.url))
            .header("x-api-key", "sk-ant-test")
            .header("anthropic-version", "2023-06-01")
            .header("x-condense-session", session)
            .header("x-test", "at-limit")
            .json(&body)
            .send()
    };
    let cut = |running: &Running| {
        metric(
            &running.proxy.metrics.render(),
            "condense_replies_cut_at_lowered_limit_total",
        )
    };
    // The whole window asked for the reply: lowered to the room the input leaves.
    for (path, session, stream) in [
        ("/v1/messages", "json", false),
        ("/v1/messages", "stream", true),
        ("/v1/chat/completions", "chat", true),
        ("/v1/chat/completions", "chat-json", false),
        ("/v1/responses", "responses-json", false),
    ] {
        let before = received.lock().unwrap().len();
        let response = send(path, session, 8_000, stream).await.unwrap();
        assert_eq!(response.status(), 200, "{session}");
        response.bytes().await.unwrap();
        let forwarded: Vec<u64> = received.lock().unwrap()[before..]
            .iter()
            .map(|(_, _, body)| {
                let body: Value = serde_json::from_slice(body).unwrap();
                (body.get("max_tokens").or(body.get("max_output_tokens")))
                    .and_then(Value::as_u64)
                    .unwrap()
            })
            .collect();
        let times = if stream { 1 } else { 2 };
        assert_eq!(forwarded.len(), times, "{session}: {forwarded:?}");
        assert!(
            forwarded.iter().all(|limit| *limit < 8_000),
            "{session}: {forwarded:?}"
        );
    }
    running.proxy.flushed().await;
    assert_eq!(cut(&running), 8);
    let metrics = running.proxy.metrics.render();
    assert_eq!(metric(&metrics, "condense_cut_replies_sent_again_total"), 3);
    // The client's own limit, which fits: the reply it cut is not counted, nor asked again.
    let response = send("/v1/messages", "own-limit", 100, false).await.unwrap();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["stop_reason"], "max_tokens");
    running.proxy.flushed().await;
    assert_eq!(cut(&running), 8);
    let metrics = running.proxy.metrics.render();
    assert_eq!(metric(&metrics, "condense_reply_limits_lowered_total"), 8);
    assert_eq!(metric(&metrics, "condense_cut_replies_sent_again_total"), 3);
}

/// Bad input over HTTP gets condense's answer in the provider's error shape, the upstream's own
/// failures are told apart (unreachable, silent, cut mid-stream), and the proxy keeps serving.
#[tokio::test]
async fn bad_requests_and_failing_upstreams_get_the_documented_answers() {
    let (upstream, received) = upstream().await;
    let running = proxy_to(upstream, 200_000, |settings| {
        settings.body_limit_bytes = 4_096;
        settings.upstream_timeout = Duration::from_secs(1);
    })
    .await;
    let post = |path: &str, body: String| {
        client()
            .post(format!("{}{path}", running.url))
            .header("content-type", "application/json")
            .body(body)
    };

    let response = post("/v1/chat/completions", "{not json".into())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );

    let response = post("/v1/messages", "[1, 2]".into()).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a chat request")
    );

    let huge = json!({"messages": [{"role": "user", "content": "x".repeat(10_000)}]});
    let response = post("/v1/messages", huge.to_string()).send().await.unwrap();
    assert_eq!(response.status(), 413);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["type"], "request_too_large");

    let small = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let response = post("/v1/chat/completions", small.to_string())
        .header("x-test", "slow")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 504);

    let stream =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let mut response = post("/v1/chat/completions", stream.to_string())
        .header("x-test", "cut")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut got = Vec::new();
    let ended = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => got.extend_from_slice(&chunk),
            Ok(None) => break "clean",
            Err(_) => break "cut",
        }
    };
    assert_eq!(
        ended, "cut",
        "a stream the upstream cut is cut for the client too"
    );
    // The proxy asked the stream for its usage (the client did not): the chunk comes to the
    // client as the upstream would have sent it unasked.
    assert_eq!(got, openai_stream_without_usage()[0].as_bytes());

    // Nothing listens there: 502.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_address = dead.local_addr().unwrap();
    drop(dead);
    let gone = proxy_to(dead_address, 200_000, |_| {}).await;
    let response = client()
        .post(format!("{}/v1/chat/completions", gone.url))
        .json(&small)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    let error: Value = response.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not be reached")
    );

    // Still serving, and nothing bad reached the upstream.
    let health = client()
        .get(format!("{}/healthz", running.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.text().await.unwrap(), "ok\n");
    let paths: Vec<String> = received
        .lock()
        .unwrap()
        .iter()
        .map(|(p, _, _)| p.clone())
        .collect();
    assert_eq!(
        paths,
        ["/v1/chat/completions", "/v1/chat/completions"],
        "the slow and the cut"
    );
    let metrics = running.proxy.metrics.render();
    assert_eq!(metric(&metrics, "condense_refused_total"), 3);
    assert_eq!(metric(&metrics, "condense_upstream_errors_total"), 1);
}

/// Other paths go upstream untouched, credentials and all; a state that cannot be read fails
/// open: the client's own request goes upstream.
#[tokio::test]
async fn other_paths_pass_through_and_a_damaged_state_is_judged_afresh() {
    let (upstream, received) = upstream().await;
    let running = proxy_to(upstream, 200_000, |_| {}).await;
    let response = client()
        .get(format!("{}/v1/models", running.url))
        .header("authorization", "Bearer sk-pass")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.text().await.unwrap(),
        "{\"object\":\"list\",\"data\":[],\"auth\":\"Bearer sk-pass\"}"
    );
    // Another method on a compacted path is the upstream's to answer: OpenAI lists stored chat
    // completions at GET /v1/chat/completions.
    let response = client()
        .get(format!("{}/v1/chat/completions", running.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.text().await.unwrap(),
        r#"{"object":"list","data":[],"first_id":null,"last_id":null,"has_more":false}"#
    );

    // A state file that is not JSON (damaged, or written by another version): the request is
    // judged afresh, not failed open, and the state is replaced.
    let session = "broken";
    running.proxy.flushed().await;
    running
        .store
        .save(session, &SessionState::default(), 0)
        .unwrap();
    for entry in std::fs::read_dir(running._dir.path().join("sessions")).unwrap() {
        std::fs::write(entry.unwrap().path(), "{damaged").unwrap();
    }
    let body =
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "extra": 1.50});
    let raw = body.to_string();
    let response = client()
        .post(format!("{}/v1/chat/completions", running.url))
        .header("x-condense-session", session)
        .header("content-type", "application/json")
        .body(raw.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    assert_eq!(sent, raw.as_bytes(), "nothing due: forwarded byte for byte");
    let metrics = running.proxy.metrics.render();
    assert_eq!(metric(&metrics, "condense_failed_open_total"), 0);
    assert_eq!(
        metric(
            &metrics,
            "condense_state_store_errors_total{kind=\"discarded\"}"
        ),
        1
    );
    running.proxy.flushed().await;
    let repaired = running.store.load(session).unwrap();
    assert_eq!(repaired.discarded, None, "replaced by the request's state");
    // Saved by the request, then by its usage.
    assert_eq!(repaired.version, 2);

    // A compressed body (gzip's magic bytes, then what condense does not read): not a bad
    // request but one condense cannot read, so it goes upstream as it came, encoding and all.
    let compressed: &[u8] = &[0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe, 0x00, 0x01];
    let response = client()
        .post(format!("{}/v1/chat/completions", running.url))
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(compressed.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (path, headers, sent) = received.lock().unwrap().last().cloned().unwrap();
    assert_eq!(path, "/v1/chat/completions");
    assert_eq!(sent, compressed, "forwarded byte for byte");
    assert_eq!(headers["content-encoding"], "gzip");
    assert_eq!(
        metric(
            &running.proxy.metrics.render(),
            "condense_failed_open_total"
        ),
        1
    );
}

/// A session header of 4 KB (a client's bug, or a hostile one) is answered and kept apart from
/// others like every session, under a bounded name: `named-` and its hash.
#[tokio::test]
async fn a_long_session_header_is_hashed_not_kept_whole() {
    let (upstream, _received) = upstream().await;
    let running = proxy_to(upstream, 200_000, |_| {}).await;
    let long = "x".repeat(4096);
    let response = client()
        .post(format!("{}/v1/chat/completions", running.url))
        .header("x-condense-session", &long)
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    running.proxy.flushed().await;
    let name = condense_serve::named_session(long.as_bytes());
    assert!(name.starts_with("named-") && name.len() < 32, "{name}");
    assert!(
        state(&running, &name).last_request_ms.is_some(),
        "the request was recorded under the hashed name"
    );
}

/// Two requests of one session at once on one replica: both are answered, and the state holds
/// one coherent history (the second prepared on the first's saved state).
#[tokio::test]
async fn concurrent_requests_of_one_session_lose_nothing() {
    let (upstream, _received) = upstream().await;
    let running = proxy_to(upstream, 16_000, |_| {}).await;
    let all = messages("openai/openhands-ponylang__ponyc-4593");
    let mut tasks = Vec::new();
    for end in [all.len() / 2, all.len() - 1] {
        let body = json!({"model": "m", "messages": &all[..end]});
        let url = format!("{}/v1/chat/completions", running.url);
        tasks.push(tokio::spawn(async move {
            client()
                .post(url)
                .header("x-condense-session", "together")
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }
    running.proxy.flushed().await;
    let saved = running.store.load("together").unwrap();
    // Two prepares and two usage recordings, each on the state the one before saved.
    assert_eq!(saved.version, 4);
    assert!(saved.state.last_request_ms.is_some());
    assert_eq!(
        saved.state.reported_usage.map(|usage| usage.tokens),
        Some(903)
    );
}

/// A client that walks away in the middle of a stream: the proxy drops the upstream stream,
/// records no usage for it, keeps serving, and the session's state is intact for its next
/// request.
#[tokio::test]
async fn a_client_that_disconnects_mid_stream_costs_nothing() {
    let (upstream, _received) = upstream().await;
    let running = proxy_to(upstream, 200_000, |_| {}).await;
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let mut response = client()
        .post(format!("{}/v1/chat/completions", running.url))
        .header("x-condense-session", "walks-away")
        .header("x-test", "long")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.chunk().await.unwrap().is_some());
    drop(response);
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.proxy.flushed().await;
    let saved = running.store.load("walks-away").unwrap();
    assert_eq!(
        saved.version, 1,
        "prepared and saved once, no usage recorded"
    );
    assert_eq!(saved.state.reported_usage, None);

    let again = client()
        .post(format!("{}/v1/chat/completions", running.url))
        .header("x-condense-session", "walks-away")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.text().await.unwrap(), OPENAI_REPLY);
    running.proxy.flushed().await;
    assert_eq!(running.store.load("walks-away").unwrap().version, 3);
}

/// A bounded load on loopback: 64 sessions at once, each replaying a shared transcript request
/// by request. No request fails, and no session loses a save: each ends with one version per
/// prepare and one per recorded usage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_sessions_at_once_lose_nothing() {
    let (upstream, _received) = upstream().await;
    let running = Arc::new(proxy_to(upstream, 200_000, |_| {}).await);
    let all = messages("openai/swe-agent-marshmallow-1867");
    let ends: Vec<usize> = (1..all.len())
        .filter(|&end| all[end]["role"] == "assistant")
        .collect();
    let mut sessions = Vec::new();
    for session in 0..64 {
        let running = running.clone();
        let all = all.clone();
        let ends = ends.clone();
        sessions.push(tokio::spawn(async move {
            let client = client();
            for &end in &ends {
                let response = client
                    .post(format!("{}/v1/chat/completions", running.url))
                    .header("x-condense-session", format!("load-{session}"))
                    .json(&json!({"model": "m", "messages": &all[..end]}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200);
                assert_eq!(response.text().await.unwrap(), OPENAI_REPLY);
            }
        }));
    }
    for session in sessions {
        session.await.unwrap();
    }
    running.proxy.flushed().await;
    for session in 0..64 {
        let saved = running.store.load(&format!("load-{session}")).unwrap();
        assert_eq!(saved.version as usize, 2 * ends.len(), "session {session}");
        assert_eq!(saved.state.reported_usage.map(|u| u.tokens), Some(903));
    }
    let metrics = running.proxy.metrics.render();
    assert_eq!(metric(&metrics, "condense_failed_open_total"), 0);
    assert_eq!(metric(&metrics, "condense_upstream_errors_total"), 0);
}

/// `summarizer.fork`: the summary is asked inside the agent's own request, so the provider reads
/// it from the prompt cache. The summary request begins with exactly the messages the proxy
/// forwarded on the previous request (the cached prefix), keeps the request's tools, is not
/// streamed, and ends with the summary prompt naming the kept tail. An answer without text (a
/// forced tool call here) falls back to a separate prompt, and the request still goes on
/// summarized.
#[tokio::test]
async fn a_forked_summary_repeats_the_previous_request_and_falls_back_without_text() {
    let all = messages("openai/openhands-ponylang__ponyc-4588");
    // Age-based pruning stays off at this size (40K protected): the prefix stays as it was.
    let extra = [
        ("CONDENSE_SUMMARIZER_KIND", "upstream"),
        ("CONDENSE_PRUNE_ADAPTIVE_THRESHOLDS", "false"),
    ];
    // The second request is the first over the threshold (16,000 - 4,096); the first is the
    // one before it, ending one assistant step earlier.
    let ends: Vec<usize> = (1..all.len())
        .filter(|&end| all[end]["role"] == "assistant")
        .collect();
    let due = ends
        .iter()
        .position(|&end| tokens(&all[..end]) >= 11_904)
        .unwrap();
    let (first, second) = (ends[due - 1], ends[due]);
    assert!(tokens(&all[..second]) < 13_000, "room left for a reply");
    let tools = json!([{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]);
    for forced in [false, true] {
        let (upstream, received) = upstream().await;
        let running = proxy_with(upstream, 16_000, &extra, |settings| {
            let remote = condense_summarize::RemoteSettings::new("unused", "unused").unwrap();
            settings.upstream_summarizer = Some(UpstreamSummaries { remote, fork: true });
        })
        .await;
        for end in [first, second] {
            let mut body = json!({
                "model": "client-model",
                "messages": &all[..end],
                "tools": tools,
                "stream": true,
                "stream_options": {"include_usage": true},
            });
            if forced {
                body["tool_choice"] = json!("required");
            }
            let response = client()
                .post(format!("{}/v1/chat/completions", running.url))
                .header("authorization", "Bearer sk-client-secret")
                .header("x-condense-session", "fork")
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            response.text().await.unwrap();
        }
        let received = received.lock().unwrap().clone();
        let bodies: Vec<Value> = received
            .iter()
            .map(|(_, _, body)| serde_json::from_slice(body).unwrap())
            .collect();
        // The first request, the forked summary, (the separate one,) the second request.
        assert_eq!(bodies.len(), if forced { 4 } else { 3 }, "forced: {forced}");
        let previous = bodies[0]["messages"].as_array().unwrap();
        let fork = &bodies[1];
        let fork_messages = fork["messages"].as_array().unwrap();
        assert_eq!(fork_messages.len(), second + 1);
        assert_eq!(
            &fork_messages[..previous.len()],
            &previous[..],
            "the cached prefix"
        );
        assert_eq!(fork["tools"], tools);
        assert_eq!(fork["model"], "client-model");
        assert!(fork.get("stream").is_none() && fork.get("stream_options").is_none());
        let limit = fork["max_tokens"].as_u64().unwrap();
        assert!((2_048..=4_096).contains(&limit), "{limit}");
        let prompt = fork_messages.last().unwrap();
        assert_eq!(prompt["role"], "user");
        let text = prompt["content"].as_str().unwrap();
        assert!(
            text.starts_with("CRITICAL: answer with text only"),
            "{text}"
        );
        assert!(text.contains("You are writing the memory"), "{text}");
        if forced {
            let separate = &bodies[2];
            assert!(separate.get("tools").is_none(), "a prompt of its own");
            assert_eq!(separate["max_tokens"], 4_096);
        }
        let sent = bodies.last().unwrap();
        assert!(
            sent.to_string().contains(SCRIPTED),
            "the summary the upstream wrote"
        );
        let metrics = running.proxy.metrics.render();
        let (answered, fell_back) = if forced { (0, 1) } else { (1, 0) };
        assert_eq!(
            metric(
                &metrics,
                "condense_forked_summaries_total{outcome=\"answered\"}"
            ),
            answered
        );
        assert_eq!(
            metric(
                &metrics,
                "condense_forked_summaries_total{outcome=\"fell_back\"}"
            ),
            fell_back
        );
        assert_eq!(
            metric(&metrics, "condense_compactions_total{phase=\"summary\"}"),
            1
        );
    }
}

/// `summarizer.kind = "upstream"`: a due summary is asked of the request's own upstream, with
/// the client's own credentials and model (or `compaction_model`), before the compacted request
/// goes there too; the summary it writes is the one the compacted request carries. Neither the
/// state nor anything else keeps the credentials.
#[tokio::test]
async fn summaries_are_asked_of_the_upstream_with_the_clients_own_credentials() {
    for (provider, compaction_model) in [
        ("openai", None),
        ("anthropic", Some("cheap-model")),
        ("openai-responses", None),
    ] {
        let (upstream, received) = upstream().await;
        let mut env = vec![("CONDENSE_SUMMARIZER_KIND", "upstream")];
        env.extend(compaction_model.map(|model| ("CONDENSE_SUMMARIZER_COMPACTION_MODEL", model)));
        let running = proxy_with(upstream, 16_000, &env, |_| {}).await;
        let (path, body, request) = if provider == "openai" {
            let all = messages("openai/openhands-ponylang__ponyc-4588");
            let body = json!({"model": "client-model", "messages": all});
            let request = client()
                .post(format!("{}/v1/chat/completions", running.url))
                .header("authorization", "Bearer sk-client-secret");
            ("/v1/chat/completions", body, request)
        } else if provider == "openai-responses" {
            let chat = json!({"messages": messages("openai/openhands-ponylang__ponyc-4588")});
            let mut body = condense_core::testing::responses_from_chat(&chat);
            body["model"] = json!("client-model");
            let request = client()
                .post(format!("{}/v1/responses", running.url))
                .header("authorization", "Bearer sk-client-secret");
            ("/v1/responses", body, request)
        } else {
            let mut body: Value = serde_json::from_slice(
                &transcript("anthropic/claude-code-5f8cbb78").unwrap().bytes,
            )
            .unwrap();
            body["model"] = json!("client-model");
            let request = client()
                .post(format!("{}/v1/messages", running.url))
                .header("x-api-key", "sk-client-secret")
                .header("anthropic-version", "2023-06-01");
            ("/v1/messages", body, request)
        };
        let response = request
            .header("x-condense-session", "upstream")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{provider}");

        let received = received.lock().unwrap().clone();
        assert_eq!(
            received.len(),
            2,
            "{provider}: the summary, then the request"
        );
        let (summary_path, headers, summary_body) = &received[0];
        assert_eq!(summary_path, path);
        if provider != "anthropic" {
            assert_eq!(headers["authorization"], "Bearer sk-client-secret");
        } else {
            assert_eq!(headers["x-api-key"], "sk-client-secret");
            assert_eq!(headers["anthropic-version"], "2023-06-01");
        }
        let summary_body: Value = serde_json::from_slice(summary_body).unwrap();
        assert_eq!(
            summary_body["model"],
            compaction_model.unwrap_or("client-model"),
            "{provider}"
        );
        assert!(
            summary_body
                .to_string()
                .contains("You are writing the memory"),
            "{provider}: the summary prompt"
        );
        // The scripted upstream's summary is the summary the request carries.
        let (_, _, sent) = &received[1];
        let sent: Value = serde_json::from_slice(sent).unwrap();
        assert_eq!(sent["model"], "client-model");
        assert!(
            sent.to_string().contains(SCRIPTED),
            "{provider}: {}",
            &sent.to_string()[..400]
        );
        let metrics = running.proxy.metrics.render();
        assert_eq!(
            metric(&metrics, "condense_compactions_total{phase=\"summary\"}"),
            1
        );
        assert_eq!(metric(&metrics, "condense_failed_open_total"), 0);
        // The embedded store saves after forwarding: wait for it, or a temporary file listed
        // here may be renamed before it is read.
        running.proxy.flushed().await;
        for file in std::fs::read_dir(running._dir.path().join("sessions")).unwrap() {
            let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
            assert!(!text.contains("sk-client-secret"));
        }
    }
}

/// A chat request is recognised by the endpoint its path ends in, not by `/v1`: Azure OpenAI's
/// `/openai/deployments/NAME/chat/completions?api-version=…` is compacted like any other, and a
/// summary asked of the upstream goes to the same deployment with the same query and key.
#[tokio::test]
async fn an_azure_deployment_path_is_compacted_and_summarized_there() {
    let (upstream, received) = upstream().await;
    let env = [
        ("CONDENSE_SUMMARIZER_KIND", "upstream"),
        ("CONDENSE_SUMMARIZER_FORK", "false"),
    ];
    let running = proxy_with(upstream, 16_000, &env, |_| {}).await;
    let path = "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21";
    let all = messages("openai/openhands-ponylang__ponyc-4588");
    let response = client()
        .post(format!("{}{path}", running.url))
        .header("api-key", "azure-secret")
        .json(&json!({"messages": all}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), OPENAI_REPLY);

    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 2, "the summary, then the request");
    for (sent_path, headers, _) in &received {
        assert_eq!(sent_path, path);
        assert_eq!(headers["api-key"], "azure-secret");
    }
    let sent: Value = serde_json::from_slice(&received[1].2).unwrap();
    let sent_messages = sent["messages"].as_array().unwrap();
    assert!(tokens(sent_messages) < 16_000 - 4_096);
    assert!(sent.to_string().contains(SCRIPTED));
}

/// Codex's API: a long autonomous run sent as Responses bodies (every call and output an item
/// of its own), request by request at a 16K window. Every body the upstream receives is under
/// the threshold, valid and frozen from one request to the next, the answer reaches the client
/// as the upstream sent it, and the usage of the Responses API is recorded. A request whose
/// conversation the provider holds (`previous_response_id`, a string `input`) and a stream
/// pass through as they came, the stream's usage read from `response.completed`.
#[tokio::test]
async fn a_responses_session_is_compacted_like_a_chat_one() {
    let (upstream, received) = upstream().await;
    // Pruning thresholds the run crosses early, so outputs are replaced as well as summarized.
    let running = proxy_with(
        upstream,
        16_000,
        &[
            ("CONDENSE_PRUNE_MINIMUM_TOKENS", "1000"),
            ("CONDENSE_PRUNE_PROTECT_TOKENS", "3000"),
            ("CONDENSE_PRUNE_ADAPTIVE_THRESHOLDS", "false"),
            // Summarized when the window is full, pruned on the way there: no summary early.
            ("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0"),
        ],
        |_| {},
    )
    .await;
    let chat: Value = serde_json::from_slice(
        &transcript("openai/openhands-ponylang__ponyc-4588")
            .unwrap()
            .bytes,
    )
    .unwrap();
    let session = condense_core::testing::responses_from_chat(&chat);
    let items = session["input"].as_array().unwrap();
    let format = condense_formats::Format::Responses;
    let mut frozen = Frozen::default();
    let mut requests = 0u64;
    // Every third step: the items before each function call the model made.
    let ends: Vec<usize> = (1..items.len())
        .filter(|&end| items[end]["type"] == "function_call")
        .step_by(3)
        .chain([items.len()])
        .collect();
    for end in ends {
        let mut body = session.clone();
        body["model"] = json!("gpt-5-codex");
        body["input"] = json!(&items[..end]);
        let response = client()
            .post(format!("{}/v1/responses", running.url))
            .header("authorization", "Bearer sk-test-secret")
            .header("x-condense-session", "codex")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), RESPONSES_REPLY);
        requests += 1;
        let (path, headers, sent) = received.lock().unwrap().last().cloned().unwrap();
        assert_eq!(path, "/v1/responses");
        assert_eq!(headers["authorization"], "Bearer sk-test-secret");
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(sent["instructions"], session["instructions"]);
        let conversation = condense_formats::read_json(format, sent.clone()).unwrap();
        use condense_tokenizer::TokenCounter;
        let counted = condense_tokenizer::Tiktoken::default().count_conversation(&conversation);
        assert!(counted < 16_000 - 4_096, "request {requests}: {counted}");
        frozen.check_body(requests as usize, format, &sent);
    }
    assert!(requests > 10, "{requests}");
    let metrics = running.proxy.metrics.render();
    assert!(metric(&metrics, "condense_compactions_total{phase=\"prune\"}") > 0);
    assert!(!frozen.replaced.is_empty());
    assert_eq!(
        metric(
            &metrics,
            "condense_requests_total{provider=\"openai-responses\"}"
        ),
        requests
    );
    let summaries = metric(&metrics, "condense_compactions_total{phase=\"summary\"}");
    let reused = metric(
        &metrics,
        "condense_compactions_total{phase=\"frozen_summary\"}",
    );
    assert!(
        summaries >= 1 && summaries < reused,
        "{summaries} summaries, {reused} reused"
    );
    assert_eq!(metric(&metrics, "condense_failed_open_total"), 0);
    running.proxy.flushed().await;
    assert_eq!(
        state(&running, "codex")
            .reported_usage
            .map(|usage| usage.tokens),
        Some(884)
    );

    // The provider holds these conversations: forwarded byte for byte.
    let passed = metric(&metrics, "condense_passthrough_requests_total");
    for body in [
        json!({"model": "m", "previous_response_id": "resp_0", "input": [
            {"type": "function_call_output", "call_id": "call_9", "output": "x".repeat(50_000)}
        ]}),
        json!({"model": "m", "input": "hello"}),
    ] {
        let response = client()
            .post(format!("{}/v1/responses", running.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let (_, _, forwarded) = received.lock().unwrap().last().cloned().unwrap();
        assert_eq!(forwarded, serde_json::to_vec(&body).unwrap());
    }
    let metrics = running.proxy.metrics.render();
    assert_eq!(
        metric(&metrics, "condense_passthrough_requests_total"),
        passed + 2
    );

    let body = json!({"model": "m", "stream": true,
        "input": [{"role": "user", "content": "hello"}]});
    let response = client()
        .post(format!("{}/v1/responses", running.url))
        .header("x-condense-session", "codex-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(
        response.bytes().await.unwrap(),
        responses_stream().concat().into_bytes()
    );
    running.proxy.flushed().await;
    assert_eq!(
        state(&running, "codex-stream")
            .reported_usage
            .map(|u| (u.message, u.tokens)),
        Some((1, 702))
    );
}

/// A shared store whose compare-and-set this replica always loses (other replicas win every
/// race), or that never answers a save.
#[derive(Debug)]
struct Losing {
    inner: DirSessionStore,
    stalled: bool,
}

impl SessionStore for Losing {
    fn location(&self) -> String {
        "a store this replica always loses".into()
    }
    fn load(
        &self,
        session: &str,
    ) -> Result<condense_serve::Versioned, condense_serve::StateStoreError> {
        self.inner.load(session)
    }
    fn named_handles(
        &self,
    ) -> Result<std::collections::HashSet<String>, condense_serve::StateStoreError> {
        self.inner.named_handles()
    }
    fn save(
        &self,
        _: &str,
        _: &SessionState,
        _: u64,
    ) -> Result<condense_serve::Saved, condense_serve::StateStoreError> {
        if self.stalled {
            std::thread::sleep(Duration::from_secs(3));
        }
        Ok(condense_serve::Saved::Conflict)
    }
}

/// A request that loses every compare-and-set still goes upstream compacted, as prepared on
/// the latest state (never the whole history, past the window); a save that does not answer
/// costs it at most `serve.state_timeout_ms`.
#[tokio::test]
async fn a_request_that_loses_every_compare_and_set_is_still_compacted() {
    let (upstream, received) = upstream().await;
    for stalled in [false, true] {
        let compactor = condense_serve::testing::compactor(&condense_serve::testing::WINDOW_16K);
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Losing {
            inner: DirSessionStore::new(dir.path()),
            stalled,
        });
        let mut settings = settings_for(&format!("http://{upstream}"));
        settings.state_timeout = Duration::from_millis(200);
        let proxy = Arc::new(Proxy::new(settings, compactor, store).unwrap());
        let url = spawn(proxy.clone()).await;
        let all = messages("openai/openhands-ponylang__ponyc-4588");
        assert!(tokens(&all) > 16_000);
        let started = std::time::Instant::now();
        let response = client()
            .post(format!("{url}/v1/chat/completions"))
            .header("x-condense-session", "contended")
            .json(&json!({"model": "m", "messages": all}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        // A hang detector, not a timing: a stalled save is given up after 200 ms per attempt.
        assert!(started.elapsed() < Duration::from_secs(30));
        let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        let sent = sent["messages"].as_array().unwrap();
        assert!(tokens(sent) < 16_000 - 4_096, "{} tokens", tokens(sent));
        let metrics = proxy.metrics.render();
        assert_eq!(metric(&metrics, "condense_failed_open_total"), 0);
        let (kind, count) = if stalled {
            ("save", 1)
        } else {
            ("conflict", 1)
        };
        assert_eq!(
            metric(
                &metrics,
                &format!("condense_state_store_errors_total{{kind=\"{kind}\"}}")
            ),
            count,
            "{metrics}"
        );
    }
}

/// A Chat Completions custom tool call (`{"type": "custom", "custom": {"name", "input"}}`,
/// free-text input) in a long session: the session is compacted as it would be without it,
/// and the call goes upstream as it came.
#[tokio::test]
async fn a_custom_tool_call_does_not_stop_compaction() {
    let (upstream, received) = upstream().await;
    let running = proxy_to(upstream, 16_000, |_| {}).await;
    let mut all = messages("openai/openhands-ponylang__ponyc-4588");
    let last = all.len() - 1;
    let call = all[last - 1]["tool_calls"][0].clone();
    let custom = json!({
        "id": call["id"],
        "type": "custom",
        "custom": {"name": "apply_patch", "input": "*** Begin Patch\n*** Update File: a.c\n@@\n-x\n+y\n*** End Patch"},
    });
    assert_eq!(all[last]["role"], "tool");
    all[last - 1]["tool_calls"][0] = custom.clone();
    let response = client()
        .post(format!("{}/v1/chat/completions", running.url))
        .json(&json!({"model": "m", "messages": all}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    let sent = sent["messages"].as_array().unwrap();
    assert!(tokens(sent) < 16_000 - 4_096, "{}", tokens(sent));
    assert!(
        sent.iter().any(|message| message["tool_calls"]
            .as_array()
            .is_some_and(|calls| calls.contains(&custom))),
        "the custom call is in the kept tail, as it came"
    );
    let metrics = running.proxy.metrics.render();
    assert_eq!(metric(&metrics, "condense_failed_open_total"), 0);
}

/// An upstream given as OpenAI-compatible servers document their base URL, with `/v1`: the
/// upstream receives `/v1/chat/completions`, not `/v1/v1/chat/completions`.
#[tokio::test]
async fn an_upstream_given_with_v1_is_not_sent_v1_twice() {
    let (upstream, received) = upstream().await;
    let mut settings = settings_for(&format!("http://{upstream}/v1"));
    settings.anthropic_upstream = format!("http://{upstream}/v1/");
    let dir = tempfile::tempdir().unwrap();
    let proxy = Arc::new(
        Proxy::new(
            settings,
            condense_serve::testing::compactor(&[]),
            Arc::new(DirSessionStore::new(dir.path())),
        )
        .unwrap(),
    );
    let url = spawn(proxy).await;
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            "/v1/messages",
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}),
        ),
    ] {
        let response = client()
            .post(format!("{url}{path}"))
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let (sent_to, _, _) = received.lock().unwrap().last().cloned().unwrap();
        assert_eq!(sent_to, path);
    }
}

/// With `serve.auth_token_env` set, a request without the proxy's key in `x-condense-key` gets
/// 401 in its provider's error shape (and nothing reaches the upstream); with it, the request
/// goes on without that header. `/healthz` and `/readyz` stay open to load balancers.
#[tokio::test]
async fn a_proxy_with_a_key_refuses_requests_without_it() {
    let (upstream, received) = upstream().await;
    let running = proxy_to(upstream, 200_000, |settings| {
        settings.auth_token = Some("team-secret".into());
    })
    .await;
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let cases = [
        ("/v1/chat/completions", None),
        ("/v1/messages", Some("wrong")),
        ("/v1/models", Some("team-secre")),
    ];
    for (path, key) in cases {
        let mut request = client().post(format!("{}{path}", running.url)).json(&chat);
        if let Some(key) = key {
            request = request.header("x-condense-key", key);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            body["error"]["type"], "authentication_error",
            "{path}: {body}"
        );
        if path == "/v1/messages" {
            assert_eq!(body["type"], "error", "Anthropic's shape");
        }
    }
    assert!(received.lock().unwrap().is_empty(), "nothing went upstream");
    let metrics = client()
        .get(format!("{}/metrics", running.url))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 401);
    for open in ["/healthz", "/readyz"] {
        let response = client()
            .get(format!("{}{open}", running.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{open}");
    }

    let response = client()
        .post(format!("{}/v1/chat/completions", running.url))
        .header("x-condense-key", "team-secret")
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (_, headers, _) = received.lock().unwrap().last().cloned().unwrap();
    assert!(
        !headers.contains_key("x-condense-key"),
        "the key stays here"
    );
}

/// One proxy in front of two models: each request is sized for the model it names
/// (`[models]`), so the same long session is compacted for the small model's window and
/// forwarded whole to the large one (compaction only when the window needs it: the cost model
/// would compact this session early even in the large window).
#[tokio::test]
async fn each_request_is_sized_for_its_model() {
    let (upstream, received) = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("models.toml");
    std::fs::write(
        &file,
        "[model]\ncontext_window = 200000\n\n[compaction]\ncache_rewrite_cost = 0\n\n[models.\"small-*\"]\ncontext_window = 16000\nmax_output_tokens = 4096\n",
    )
    .unwrap();
    let config = Config::load(&Sources {
        explicit: Some(file),
        ..Sources::default()
    })
    .unwrap();
    let compactor = Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(MemoryStore::new()))
        .with_model_windows(config.model_windows().clone());
    let store = Arc::new(DirSessionStore::new(dir.path().join("sessions")));
    let settings = settings_for(&format!("http://{upstream}"));
    let proxy = Arc::new(Proxy::new(settings, compactor, store).unwrap());
    let url = spawn(proxy).await;
    let all = messages("openai/openhands-ponylang__ponyc-4588");
    let whole = tokens(&all);
    assert!((16_000..150_000).contains(&whole), "{whole}");
    for (model, window) in [("small-1", 16_000), ("big-1", 200_000)] {
        let response = client()
            .post(format!("{url}/v1/chat/completions"))
            .header("x-condense-session", model)
            .json(&json!({"model": model, "messages": all}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        let sent = tokens(sent["messages"].as_array().unwrap());
        assert!(sent < window - 4_096, "{model}: {sent}");
        if window == 200_000 {
            assert_eq!(sent, whole, "{model}: nothing needed");
        } else {
            assert!(sent < whole / 2, "{model}: {sent} of {whole}");
        }
    }
}

/// An upstream that answers the requests with `replies` in turn (assistant messages in Chat
/// Completions' shape), each with the usage a provider reports: its count of the request
/// (condense's tokenizer) plus `prefix` (tools and a system prompt the messages do not show),
/// and of the answer. Returns its address and every body it received.
async fn counting_upstream(
    replies: Vec<Value>,
    prefix: usize,
) -> (SocketAddr, Arc<std::sync::Mutex<Vec<Value>>>) {
    let received: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let bodies = received.clone();
    let answer = move |body: axum::body::Bytes| {
        let bodies = bodies.clone();
        let replies = replies.clone();
        async move {
            let body: Value = serde_json::from_slice(&body).unwrap();
            let turn = {
                let mut bodies = bodies.lock().unwrap();
                bodies.push(body.clone());
                bodies.len() - 1
            };
            let reply = replies[turn.min(replies.len() - 1)].clone();
            let prompt = tokens(body["messages"].as_array().unwrap()) + prefix;
            let completion = tokens(std::slice::from_ref(&reply));
            let answer = json!({
                "id": format!("chatcmpl-{turn}"), "object": "chat.completion", "created": 1,
                "model": "gpt-4.1",
                "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion},
            });
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                answer.to_string(),
            )
        }
    };
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(answer));
    let address = serving(app).await;
    (address, received)
}

/// Through the proxy, an agent whose tools and system prompt take 15K of a 32K window writes a
/// whole file: that request is compacted with the file's text cut to a preview, and the
/// provider reports its count of it. The client then sends its history with the file whole
/// again, twice more: each request the upstream receives fits the window, and each carries the
/// same cut, byte for byte (the one judged by the provider's count of the cut request went
/// out with the file whole, over the window, before the cut was frozen).
#[tokio::test]
async fn the_requests_after_an_input_cut_carry_the_same_cut() {
    const PREFIX: usize = 15_000;
    const WINDOW: usize = 32_000;
    let content: String = (0..1_800)
        .map(|n| format!("line {n}: let x{n} = parse({n});\n"))
        .collect();
    let call = |id: &str, name: &str, input: Value| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": name, "arguments": input.to_string()}}]})
    };
    let write = call(
        "write",
        "Write",
        json!({"file_path": "/src/parser.rs", "content": content}),
    );
    let check = call("check", "bash", json!({"command": "cargo check"}));
    let (upstream, received) = counting_upstream(
        vec![
            write.clone(),
            check.clone(),
            json!({"role": "assistant", "content": "Done."}),
        ],
        PREFIX,
    )
    .await;
    let running = proxy_to(upstream, WINDOW, |_| {}).await;
    let mut messages = vec![
        json!({"role": "system", "content": "You are a careful agent."}),
        json!({"role": "user", "content": "write the parser module"}),
    ];
    for step in 0..3 {
        let output: String = (0..30)
            .map(|line| format!("step {step} line {line} passed ok\n"))
            .collect();
        messages.push(call(
            &format!("c{step}"),
            "bash",
            json!({"command": format!("run check {step}")}),
        ));
        messages
            .push(json!({"role": "tool", "tool_call_id": format!("c{step}"), "content": output}));
    }
    let results = [
        ("write", "File created successfully at: /src/parser.rs"),
        ("check", "Finished `dev` profile"),
        ("", ""),
    ];
    for (turn, (id, result)) in results.into_iter().enumerate() {
        let response = client()
            .post(format!("{}/v1/chat/completions", running.url))
            .header("authorization", "Bearer sk-test")
            .header("x-condense-session", "writer")
            .json(&json!({"model": "gpt-4.1", "messages": messages}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "request {turn}");
        let answer: Value = response.json().await.unwrap();
        // The usage is recorded after the answer, in the background.
        running.proxy.flushed().await;
        messages.push(answer["choices"][0]["message"].clone());
        if !id.is_empty() {
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
        }
    }
    let bodies = received.lock().unwrap().clone();
    assert_eq!(bodies.len(), 3);
    for (turn, body) in bodies.iter().enumerate() {
        let sent = tokens(body["messages"].as_array().unwrap());
        assert!(
            sent + PREFIX <= WINDOW,
            "request {turn}: {sent} tokens and the prefix, over the window"
        );
    }
    let written = |body: &Value| {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|message| message["tool_calls"][0]["id"] == "write")
            .map(|message| message["tool_calls"][0]["function"]["arguments"].clone())
    };
    let cut = written(&bodies[1]).unwrap();
    assert!(
        cut.as_str()
            .unwrap()
            .contains("[condense: this input to Write cut to its first"),
        "{cut}"
    );
    assert_eq!(written(&bodies[2]), Some(cut));
}

/// A resumed session whose first request through the proxy is longer than the window by the
/// provider's count (its tokenizer counts 40 % more than condense's, and the tools and system
/// prompt are not among the messages condense counts), though not by condense's own: the
/// provider refuses it, saying how long it counted it; condense records that count, prepares
/// the request again with it (a compaction now) and sends it once more, and the client gets the
/// answer. A refusal of another kind reaches the client as the provider gave it, sent once.
#[tokio::test]
async fn a_request_the_provider_refuses_as_too_long_is_sent_again_compacted_by_its_count() {
    const WINDOW: usize = 32_000;
    const PREFIX: usize = 6_000;
    let (upstream, received) = anthropic_window(WINDOW, PREFIX, 1.4).await;
    // Compacting only where the window makes it necessary: not early, as condense would a
    // request the provider has nothing of in its cache.
    let only_when_due = [("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0")];
    let running = proxy_with(upstream, WINDOW, &only_when_due, |_| {}).await;
    let mut messages = vec![json!({"role": "user", "content": "read every part of the log"})];
    for turn in 0..40 {
        let id = format!("toolu_{turn}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash",
             "input": {"command": format!("cat part_{turn}.log")}}]}));
        let output: String = (0..40)
            .map(|line| format!("part {turn} line {line}: request served in {line} ms\n"))
            .collect();
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": output}]}));
    }
    let body = json!({"model": "claude-sonnet-4", "max_tokens": 4_096, "messages": messages});
    let ours = anthropic_tokens(&body);
    let theirs = (ours as f64 * 1.4).round() as usize + PREFIX;
    assert!(
        ours < WINDOW - 4_096 && theirs > WINDOW,
        "condense's count {ours} under the window, the provider's {theirs} over it"
    );
    let (status, answer) = messages_through(&running, "resumed", &body).await;
    assert_eq!(status, 200, "{answer}");
    let sent = received.lock().unwrap().clone();
    let refusals: Vec<bool> = sent.iter().map(|(_, refused)| *refused).collect();
    assert_eq!(refusals, [true, false], "refused once, then taken");
    let input = (anthropic_tokens(&sent[1].0) as f64 * 1.4).round() as usize + PREFIX;
    assert!(input <= WINDOW - 4_096, "sent again at {input}");
    let metrics = running.proxy.metrics.render();
    assert_eq!(metric(&metrics, "condense_refused_as_too_long_total"), 1);
    assert_eq!(
        metric(&metrics, "condense_compactions_total{phase=\"summary\"}"),
        1
    );

    // Another refusal (a request the provider finds malformed) is the provider's to give: sent
    // once, its status and body relayed as they came.
    let other = |body: axum::body::Bytes| async move {
        let _ = body;
        let error = json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after"}});
        (
            axum::http::StatusCode::BAD_REQUEST,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            error.to_string(),
        )
    };
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let app = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(move |body: axum::body::Bytes| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            other(body)
        }),
    );
    let address = serving(app).await;
    let running = proxy_to(address, WINDOW, |_| {}).await;
    let response = client()
        .post(format!("{}/v1/messages", running.url))
        .header("x-api-key", "sk-ant-test")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(
        response.headers()[axum::http::header::CONTENT_TYPE],
        "application/json"
    );
    let refusal: Value = response.json().await.unwrap();
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("messages.1: `tool_use` ids"),
        "{refusal}"
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    let metrics = running.proxy.metrics.render();
    assert_eq!(metric(&metrics, "condense_refused_as_too_long_total"), 0);
}

/// OpenAI's Responses API refuses a request longer than the window without saying how long
/// it counted it (`context_length_exceeded`, "Your input exceeds the context window of this
/// model"): the proxy takes it as just over the window, prepares the request again with that
/// count, and the compacted request is answered. Here the upstream counts as condense does
/// (OpenAI's models and condense share o200k) plus 14,500 tokens of tools and instructions
/// condense does not count.
#[tokio::test]
async fn a_responses_request_refused_as_too_long_without_a_count_is_sent_again_compacted() {
    const WINDOW: usize = 32_000;
    const TOOLS: usize = 14_500;
    let sent: Arc<std::sync::Mutex<Vec<(usize, bool)>>> = Arc::default();
    let seen = sent.clone();
    let answer = move |body: axum::body::Bytes| {
        let seen = seen.clone();
        async move {
            use condense_tokenizer::TokenCounter;
            let (_, conversation) =
                condense_formats::read(&body, Some(condense_formats::Format::Responses)).unwrap();
            let input =
                condense_tokenizer::Tiktoken::default().count_conversation(&conversation) + TOOLS;
            let refused = input > WINDOW;
            seen.lock().unwrap().push((input, refused));
            if refused {
                let error = json!({"error": {
                    "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
                    "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}});
                return (axum::http::StatusCode::BAD_REQUEST, error.to_string());
            }
            let reply = json!({
                "id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
                "model": "gpt-5",
                "output": [{"type": "message", "id": "msg_1", "status": "completed",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": "done", "annotations": []}]}],
                "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": input + 1},
            });
            (axum::http::StatusCode::OK, reply.to_string())
        }
    };
    let app = axum::Router::new().route("/v1/responses", axum::routing::post(answer));
    let address = serving(app).await;
    let only_when_due = [("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0")];
    let running = proxy_with(address, WINDOW, &only_when_due, |_| {}).await;
    let input = reading_the_log("read every part of the log", 40);
    let response = client()
        .post(format!("{}/v1/responses", running.url))
        .header("authorization", "Bearer sk-test")
        .header("x-condense-session", "resumed-codex")
        .json(&json!({"model": "gpt-5", "input": input}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{answer}");
    running.proxy.flushed().await;
    let sent = sent.lock().unwrap().clone();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent[0].1 && !sent[1].1,
        "refused once, then taken: {sent:?}"
    );
    assert!(
        sent[0].0 - TOOLS < WINDOW - 4_096,
        "under the window by condense's own count: {sent:?}"
    );
    let metrics = running.proxy.metrics.render();
    assert_eq!(metric(&metrics, "condense_refused_as_too_long_total"), 1);
}

/// A Responses API answer comes back as several output items (a reasoning item, then a
/// function call carrying a whole patch), which the next request holds as several assistant
/// messages: the answer's usage, which counted the patch as output, covers all of them, and the
/// next request is measured as the provider's figure plus the tool's short result. Counted from
/// the reasoning item, the patch was counted twice and the request compacted at 24K of a 32K
/// window.
#[tokio::test]
async fn a_responses_answer_of_several_items_is_counted_once() {
    const WINDOW: usize = 32_000;
    let patch: String = (0..1_000)
        .map(|line| format!("+    let value_{line} = compute({line});\n"))
        .collect();
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_patch",
                      "name": "apply_patch", "status": "completed",
                      "arguments": json!({"input": patch}).to_string()});
    let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": [],
                           "encrypted_content": "gAAAAB"});
    let received: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let seen = received.clone();
    let (first_output, counted_call) = (vec![reasoning.clone(), call.clone()], call.clone());
    let answer = move |body: axum::body::Bytes| {
        let seen = seen.clone();
        let (first_output, counted_call) = (first_output.clone(), counted_call.clone());
        async move {
            use condense_tokenizer::TokenCounter;
            let (_, conversation) =
                condense_formats::read(&body, Some(condense_formats::Format::Responses)).unwrap();
            let counter = condense_tokenizer::Tiktoken::default();
            let input = counter.count_conversation(&conversation);
            let first = seen.lock().unwrap().is_empty();
            seen.lock()
                .unwrap()
                .push(serde_json::from_slice::<Value>(&body).unwrap());
            let (output, output_tokens) = if first {
                let (_, answered) = condense_formats::read(
                    json!({"input": [counted_call]}).to_string().as_bytes(),
                    Some(condense_formats::Format::Responses),
                )
                .unwrap();
                (first_output, counter.count_conversation(&answered))
            } else {
                let text = json!({"type": "message", "id": "msg_1", "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "patched", "annotations": []}]});
                (vec![text], 2)
            };
            json!({
                "id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
                "model": "gpt-5", "output": output,
                "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": output_tokens,
                          "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": input + output_tokens},
            })
            .to_string()
        }
    };
    let app = axum::Router::new().route("/v1/responses", axum::routing::post(answer));
    let address = serving(app).await;
    let only_when_due = [("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0")];
    let running = proxy_with(address, WINDOW, &only_when_due, |_| {}).await;
    let mut input = reading_the_log("read the log, then patch the parser", 20);
    let post = |input: &Vec<Value>| {
        client()
            .post(format!("{}/v1/responses", running.url))
            .header("authorization", "Bearer sk-test")
            .header("x-condense-session", "codex-patch")
            .json(&json!({"model": "gpt-5", "input": input}))
            .send()
    };
    let response = post(&input).await.unwrap();
    assert_eq!(response.status(), 200);
    let _: Value = response.json().await.unwrap();
    running.proxy.flushed().await;
    // The provider's figure for the first request and its answer, by the upstream's own count:
    // under the window less the reply's reserve, and under it by less than the patch.
    let usage = state(&running, "codex-patch").reported_usage.unwrap();
    assert!(
        usage.tokens + 4_096 < WINDOW && usage.tokens + 4_096 + 8_000 > WINDOW,
        "{usage:?}"
    );

    input.extend([reasoning, call]);
    input.push(
        json!({"type": "function_call_output", "call_id": "call_patch",
                      "output": "Success. Updated the following files:\nM src/parser.rs"}),
    );
    let response = post(&input).await.unwrap();
    assert_eq!(response.status(), 200);
    let _: Value = response.json().await.unwrap();
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 2);
    // Nothing was due: the client's items went upstream as they were.
    assert_eq!(received[1]["input"], json!(input));
}

/// A Responses API `input`: the person's `task`, then `parts` shell calls, each reading one
/// part of a log of 50 lines (about 700 tokens).
fn reading_the_log(task: &str, parts: usize) -> Vec<Value> {
    let mut input = vec![json!({"type": "message", "role": "user", "content": task})];
    for turn in 0..parts {
        let id = format!("call_{turn}");
        input.push(json!({"type": "function_call", "call_id": id, "name": "shell",
                          "arguments": json!({"command": ["cat", format!("part_{turn}.log")]}).to_string()}));
        let output: String = (0..50)
            .map(|line| format!("part {turn} line {line}: request served in {line} ms\n"))
            .collect();
        input.push(json!({"type": "function_call_output", "call_id": id, "output": output}));
    }
    input
}

/// `app` served on a free port of 127.0.0.1: its address.
async fn serving(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

/// condense's count of an Anthropic Messages body's messages.
fn anthropic_tokens(body: &Value) -> usize {
    let (_, conversation) = condense_formats::read(
        body.to_string().as_bytes(),
        Some(condense_formats::Format::Anthropic),
    )
    .unwrap();
    use condense_tokenizer::TokenCounter;
    condense_tokenizer::Tiktoken::default().count_conversation(&conversation)
}

/// An upstream that checks each Messages request as Anthropic's API does and answers it with
/// a tool call: its input is condense's count of the messages times `scale` (a tokenizer that
/// counts more) plus `prefix` (tools and a system prompt); an input over `window`, or input and
/// `max_tokens` together over it, are refused with Anthropic's own errors. Returns its address and, per request, the
/// body and whether it was refused.
async fn anthropic_window(
    window: usize,
    prefix: usize,
    scale: f64,
) -> (SocketAddr, Arc<std::sync::Mutex<Vec<(Value, bool)>>>) {
    anthropic_writing(window, prefix, scale, 0).await
}

/// [`anthropic_window`]'s upstream, for an agent told to write the whole report (its last
/// message says so) with a reply that takes `needs` tokens: a `Write` of the report, or, where
/// `max_tokens` is less, the text so far stopped at the limit, as Anthropic's reply does
/// (`stop_reason: "max_tokens"`).
async fn anthropic_writing(
    window: usize,
    prefix: usize,
    scale: f64,
    needs: usize,
) -> (SocketAddr, Arc<std::sync::Mutex<Vec<(Value, bool)>>>) {
    let received: Arc<std::sync::Mutex<Vec<(Value, bool)>>> = Arc::default();
    let bodies = received.clone();
    let answer = move |body: axum::body::Bytes| {
        let bodies = bodies.clone();
        async move {
            let body: Value = serde_json::from_slice(&body).unwrap();
            let input = (anthropic_tokens(&body) as f64 * scale).round() as usize + prefix;
            let limit = body["max_tokens"].as_u64().unwrap() as usize;
            let refused = input + limit > window;
            let writes = body["messages"]
                .as_array()
                .and_then(|messages| messages.last())
                .is_some_and(|last| last.to_string().contains(WRITE_THE_REPORT));
            let turn = {
                let mut bodies = bodies.lock().unwrap();
                bodies.push((body, refused));
                bodies.len()
            };
            if refused {
                let message = if input > window {
                    format!("prompt is too long: {input} tokens > {window} maximum")
                } else {
                    format!(
                        "input length and `max_tokens` exceed context limit: {input} + {limit} > {window}, decrease input length or `max_tokens` and try again"
                    )
                };
                let error = json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
                let json = [(axum::http::header::CONTENT_TYPE, "application/json")];
                return (axum::http::StatusCode::BAD_REQUEST, json, error.to_string());
            }
            let reply = if writes && limit < needs {
                json!({
                    "id": format!("msg_{turn}"), "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4",
                    "content": [{"type": "text", "text": "Here is the report on every part"}],
                    "stop_reason": "max_tokens", "stop_sequence": null,
                    "usage": {"input_tokens": 3, "cache_read_input_tokens": input - 3,
                              "cache_creation_input_tokens": 0, "output_tokens": limit},
                })
            } else if writes {
                let report = "part served ok. ".repeat(needs / 4);
                json!({
                    "id": format!("msg_{turn}"), "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4",
                    "content": [{"type": "tool_use", "id": format!("toolu_{turn}"), "name": "Write",
                                 "input": {"file_path": "report.md", "content": report}}],
                    "stop_reason": "tool_use", "stop_sequence": null,
                    "usage": {"input_tokens": 3, "cache_read_input_tokens": input - 3,
                              "cache_creation_input_tokens": 0, "output_tokens": needs},
                })
            } else {
                json!({
                    "id": format!("msg_{turn}"), "type": "message", "role": "assistant",
                    "model": "claude-sonnet-4",
                    "content": [{"type": "tool_use", "id": format!("toolu_{turn}"), "name": "Bash",
                                 "input": {"command": format!("cat part_{turn}.log")}}],
                    "stop_reason": "tool_use", "stop_sequence": null,
                    "usage": {"input_tokens": 3, "cache_read_input_tokens": input - 3,
                              "cache_creation_input_tokens": 0, "output_tokens": 40},
                })
            };
            let streamed = bodies.lock().unwrap()[turn - 1].0["stream"] == true;
            if streamed {
                let event_stream = [(axum::http::header::CONTENT_TYPE, "text/event-stream")];
                return (axum::http::StatusCode::OK, event_stream, events_of(&reply));
            }
            let json = [(axum::http::header::CONTENT_TYPE, "application/json")];
            (axum::http::StatusCode::OK, json, reply.to_string())
        }
    };
    let app = axum::Router::new().route("/v1/messages", axum::routing::post(answer));
    let address = serving(app).await;
    (address, received)
}

/// A Messages answer as Anthropic streams it: `message_start` with the input's usage, each
/// block opened empty, filled by its deltas (a text's `text_delta`, a tool call's input as
/// `input_json_delta`) and closed, then `message_delta` with the stop reason and the output's
/// usage, and `message_stop`.
fn events_of(message: &Value) -> String {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    let mut events = event(
        "message_start",
        json!({"type": "message_start", "message": start}),
    );
    for (index, block) in message["content"].as_array().unwrap().iter().enumerate() {
        let (opened, delta) = match block["type"].as_str().unwrap() {
            "text" => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            ),
            _ => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            ),
        };
        events += &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": opened}),
        );
        events += &event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
        events += &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    events += &event(
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
               "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
    );
    events + &event("message_stop", json!({"type": "message_stop"}))
}

/// The message a client reads out of [`events_of`]'s stream: its blocks filled by their
/// deltas, and its stop reason.
fn message_of(events: &str) -> Value {
    let mut message = Value::Null;
    let mut inputs: Vec<String> = Vec::new();
    for data in events
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
    {
        let event: Value = serde_json::from_str(data).unwrap();
        match event["type"].as_str().unwrap() {
            "message_start" => message = event["message"].clone(),
            "content_block_start" => {
                message["content"]
                    .as_array_mut()
                    .unwrap()
                    .push(event["content_block"].clone());
                inputs.push(String::new());
            }
            "content_block_delta" => {
                let index = event["index"].as_u64().unwrap() as usize;
                let delta = &event["delta"];
                match delta["type"].as_str().unwrap() {
                    "text_delta" => {
                        let text = message["content"][index]["text"]
                            .as_str()
                            .unwrap()
                            .to_owned();
                        message["content"][index]["text"] =
                            json!(text + delta["text"].as_str().unwrap());
                    }
                    _ => inputs[index].push_str(delta["partial_json"].as_str().unwrap()),
                }
            }
            "content_block_stop" => {
                let index = event["index"].as_u64().unwrap() as usize;
                if !inputs[index].is_empty() {
                    message["content"][index]["input"] =
                        serde_json::from_str(&inputs[index]).unwrap();
                }
            }
            "message_delta" => message["stop_reason"] = event["delta"]["stop_reason"].clone(),
            _ => {}
        }
    }
    message
}

/// What the client's last message says when the agent is to write its report in one reply
/// ([`anthropic_writing`]).
const WRITE_THE_REPORT: &str = "now write the whole report";

/// An agent whose replies take a few dozen tokens until it is told to write its report in one
/// reply of 2,500, where a system prompt and tools take 11,000 of a 16K window: condense gives
/// the conversation three quarters of what they leave and lowers the reply's limit to the rest
/// (more than any reply before needed), which cuts the report short. `stream` asks every answer
/// as a stream; otherwise each is a whole answer. Returns the turns at which the client met a
/// reply cut short, the reply limits the upstream received, and the proxy's metrics.
async fn the_report_written(stream: bool) -> (Vec<usize>, Vec<u64>, String) {
    const WINDOW: usize = 16_000;
    const PREFIX: usize = 11_000;
    let (upstream, received) = anthropic_writing(WINDOW, PREFIX, 1.0, REPORT_NEEDS).await;
    let running = proxy_to(upstream, WINDOW, |_| {}).await;
    let session = format!("long-replies-cut-{stream}");
    let mut messages = vec![json!({"role": "user", "content": "report on every part of the log"})];
    let (mut cuts, mut turn) = (Vec::new(), 0);
    while turn < 10 {
        let body = json!({"model": "claude-sonnet-4", "max_tokens": 4_096, "stream": stream,
                          "messages": messages});
        let (status, text) = messages_text_through(&running, &session, &body).await;
        assert_eq!(status, 200, "request {turn}: {text}");
        let answer = if stream {
            message_of(&text)
        } else {
            serde_json::from_str(&text).unwrap()
        };
        if answer["stop_reason"] == "max_tokens" {
            // Sent again as it was, as Claude Code does after a reply stopped at `max_tokens`.
            cuts.push(turn);
            assert!(cuts.len() <= 1, "cut again: {cuts:?}");
            continue;
        }
        let id = answer["content"][0]["id"].clone();
        messages.push(json!({"role": "assistant", "content": answer["content"]}));
        let mut output: String = (0..80)
            .map(|line| format!("part {turn} line {line}: request served in {line} ms\n"))
            .collect();
        if turn == 4 {
            output.push_str(WRITE_THE_REPORT);
        }
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": output}]}));
        turn += 1;
    }
    let bodies = received.lock().unwrap().clone();
    assert!(bodies.iter().all(|(_, refused)| !refused));
    let limits = bodies
        .iter()
        .map(|(body, _)| body["max_tokens"].as_u64().unwrap())
        .collect();
    (cuts, limits, running.proxy.metrics.render())
}

/// The tokens [`the_report_written`]'s report takes.
const REPORT_NEEDS: usize = 2_500;

/// [`the_report_written`], streamed: the stream is relayed as it comes, so the client meets
/// the cut report and sends the request again. condense, having read the cut in the answer,
/// leaves the reply twice that limit, and the report goes through (after which it is the
/// longest reply in the history, and the room that cut asked for is given back). Without
/// that, every retry was cut at the same limit. No request is refused, none cut twice.
#[tokio::test]
async fn a_request_sent_again_after_a_reply_cut_at_a_lowered_limit_leaves_it_room() {
    let (cuts, limits, metrics) = the_report_written(true).await;
    assert_eq!(
        cuts,
        [5],
        "the report was cut once, at the limit condense lowered"
    );
    let cut = limits[5];
    assert!((cut as usize) < REPORT_NEEDS, "{limits:?}");
    // The request sent again: twice the room, and the report went through in it.
    assert!(limits[6] >= (2 * cut).min(4_096), "{limits:?}");
    assert_eq!(
        metric(&metrics, "condense_replies_cut_at_lowered_limit_total"),
        1
    );
    assert_eq!(metric(&metrics, "condense_cut_replies_sent_again_total"), 0);
}

/// [`the_report_written`] with whole answers: the proxy reads a whole answer to a request whose
/// limit it lowered before giving it, finds the report cut at that limit, and sends the request
/// again itself with twice the room. The client never meets the cut: the upstream gets the
/// sixth request twice, and the client one answer, the report whole.
#[tokio::test]
async fn a_whole_answer_cut_at_a_lowered_limit_is_asked_again_with_room() {
    let (cuts, limits, metrics) = the_report_written(false).await;
    assert_eq!(cuts, [] as [usize; 0], "the client met a cut: {limits:?}");
    assert_eq!(limits.len(), 11, "{limits:?}");
    let cut = limits[5];
    assert!((cut as usize) < REPORT_NEEDS, "{limits:?}");
    assert!(limits[6] >= (2 * cut).min(4_096), "{limits:?}");
    assert_eq!(
        metric(&metrics, "condense_replies_cut_at_lowered_limit_total"),
        1
    );
    assert_eq!(metric(&metrics, "condense_cut_replies_sent_again_total"), 1);
}

/// A client that asks Anthropic for replies of up to 12,000 tokens in a 32K window, where
/// condense reserves 4,096 for the reply (`model.max_output_tokens`) and lets the input grow
/// to the rest: through the proxy, no request is refused for input and `max_tokens` over the
/// window. The limit goes out lowered to the room the input leaves, by the provider's count
/// (its tokenizer counting 40 % more than condense's), from the request whose input first
/// leaves less than the client asked; the limit a request fits is sent as it came. The input
/// itself stays under the window less condense's reserve, by the provider's count.
#[tokio::test]
async fn a_reply_limit_past_the_room_the_input_leaves_is_lowered_to_it() {
    const WINDOW: usize = 32_000;
    const PREFIX: usize = 6_000;
    const ASKED: usize = 12_000;
    let (upstream, received) = anthropic_window(WINDOW, PREFIX, 1.4).await;
    let running = proxy_to(upstream, WINDOW, |_| {}).await;
    let mut messages = vec![json!({"role": "user", "content": "read every part of the log"})];
    for turn in 0..14 {
        let body = json!({"model": "claude-sonnet-4", "max_tokens": ASKED, "messages": messages});
        let (status, answer) = messages_through(&running, "long-replies", &body).await;
        assert_eq!(status, 200, "request {turn}: {answer}");
        let id = answer["content"][0]["id"].clone();
        messages.push(json!({"role": "assistant", "content": answer["content"]}));
        let output: String = (0..120)
            .map(|line| format!("part {turn} line {line}: request served in {line} ms\n"))
            .collect();
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": output}]}));
    }
    let bodies = received.lock().unwrap().clone();
    assert!(bodies.iter().all(|(_, refused)| !refused));
    // And the input itself, counted as the provider counts it, leaves the reply condense's
    // reserve: the messages after the provider's last figure are taken at its scale.
    for (turn, (body, _)) in bodies.iter().enumerate() {
        let input = (anthropic_tokens(body) as f64 * 1.4).round() as usize + PREFIX;
        assert!(input <= WINDOW - 4_096, "request {turn}: {input}");
    }
    let limits: Vec<u64> = bodies
        .iter()
        .map(|(body, _)| body["max_tokens"].as_u64().unwrap())
        .collect();
    let lowered = limits.iter().filter(|limit| **limit < ASKED as u64).count();
    assert!(limits[0] == ASKED as u64 && lowered >= 3, "{limits:?}");
    let metrics = running.proxy.metrics.render();
    assert_eq!(
        metric(&metrics, "condense_reply_limits_lowered_total"),
        lowered as u64
    );
}
