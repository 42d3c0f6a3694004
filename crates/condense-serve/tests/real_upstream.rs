//! The proxy in front of a real OpenAI-compatible server: llama.cpp's SmolLM2-135M with its
//! 8,192-token window, started by `../shared/llm/serve.sh` (`.ci/run` starts it and requires
//! it; elsewhere the test says it was skipped). A session the server alone refuses as too long
//! gets a real completion through the proxy.
#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use condense_host::{Compactor, Config, Sources};
use condense_pruner::MemoryStore;
use condense_serve::testing::{settings_for, spawn};
use condense_serve::{DirSessionStore, Proxy, UpstreamSummaries};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_too_long_for_the_real_server_succeeds_through_the_proxy() {
    through_the_proxy(
        "a_session_too_long_for_the_real_server_succeeds_through_the_proxy",
        false,
    )
    .await;
}

/// The same with `summarizer.kind = "upstream"`: the real server writes the summary too, asked
/// with the request's own model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_server_writes_the_summary_when_the_summarizer_is_the_upstream() {
    through_the_proxy(
        "the_real_server_writes_the_summary_when_the_summarizer_is_the_upstream",
        true,
    )
    .await;
}

/// The one server the tests share. llama-cpp-python's server interrupts a stream when another
/// request arrives (`interrupt_requests`), so the test that streams has it to itself: it takes
/// this for writing, every other test for reading.
static SERVER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The real server's origin (its URL without `/v1`), or `None` when the test is skipped.
fn real_origin(test: &str) -> Option<String> {
    let base_url =
        condense_core::testing::required_url(test, "CONDENSE_LLM_URL", "CONDENSE_REQUIRE_LLM")?;
    Some(
        base_url
            .trim_end_matches('/')
            .trim_end_matches("/v1")
            .to_owned(),
    )
}

/// A client patient enough for a small model on two shared cores.
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .unwrap()
}

/// The messages of the mini-swe-agent run on sympy-13091, in Chat Completions' shape.
fn sympy_run() -> Vec<Value> {
    let transcript =
        condense_core::testing::transcript("openai/mini-swe-agent-sympy__sympy-13091").unwrap();
    let session: Value = serde_json::from_slice(&transcript.bytes).unwrap();
    session["messages"].as_array().unwrap().clone()
}

/// A chat request to the small model: `messages`, a short reply.
fn chat(messages: &Value) -> Value {
    json!({
        "model": "smollm2",
        "max_tokens": 16,
        "temperature": 0,
        "messages": messages,
    })
}

/// A proxy in front of `origin`, configured by `env`; `summaries` picks how summaries are
/// asked of the upstream (`None`: the configured extractive summarizer). Its URL, the proxy,
/// and the state directory to keep alive.
async fn proxy_before(
    origin: &str,
    env: &[(&str, &str)],
    summaries: impl FnOnce(&Config) -> Option<UpstreamSummaries>,
) -> (String, Arc<Proxy>, tempfile::TempDir) {
    let config = Config::load(&Sources {
        env: env
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect(),
        ..Sources::default()
    })
    .unwrap();
    let compactor = Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(MemoryStore::new()));
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings_for(origin);
    settings.upstream_timeout = Duration::from_secs(600);
    settings.upstream_summarizer = summaries(&config);
    let proxy = Arc::new(
        Proxy::new(
            settings,
            compactor,
            Arc::new(DirSessionStore::new(dir.path())),
        )
        .unwrap(),
    );
    let url = spawn(proxy.clone()).await;
    (url, proxy, dir)
}

/// The proxy's settings for a session the small model's window cannot hold: condense counts
/// with o200k, and SmolLM2's tokenizer makes about twice as many tokens of the same code, so the
/// configured window is half the model's; a small tail and summary.
const HALF_WINDOW: [(&str, &str); 7] = [
    ("CONDENSE_MODEL_CONTEXT_WINDOW", "4096"),
    ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "256"),
    ("CONDENSE_COMPACTION_MIN_TAIL_TOKENS", "500"),
    ("CONDENSE_COMPACTION_MAX_TAIL_TOKENS", "1000"),
    ("CONDENSE_COMPACTION_MIN_TAIL_TURNS", "0"),
    ("CONDENSE_SUMMARIZER_BUDGET_TOKENS", "1200"),
    ("CONDENSE_PRUNE_ADAPTIVE_THRESHOLDS", "true"),
];

/// Sends `body` through the proxy at `url`; the completion, which must be a real one.
async fn complete(client: &reqwest::Client, url: &str, body: &Value) -> Value {
    let response = client
        .post(format!("{url}/v1/chat/completions"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let answer: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "chat.completion");
    assert!(
        answer["choices"][0]["message"]["content"].is_string(),
        "{answer}"
    );
    answer
}

async fn through_the_proxy(test: &str, upstream_summarizer: bool) {
    let Some(origin) = real_origin(test) else {
        return;
    };
    let _shared = SERVER.read().await;
    let transcript =
        condense_core::testing::transcript("openai/openhands-ponylang__ponyc-4595").unwrap();
    let session: Value = serde_json::from_slice(&transcript.bytes).unwrap();
    let body = chat(&session["messages"]);
    let client = client();

    // The server alone refuses it.
    let direct = client
        .post(format!("{origin}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 400);
    let refusal: Value = direct.json().await.unwrap();
    assert_eq!(
        refusal["error"]["code"], "context_length_exceeded",
        "{refusal}"
    );

    // Through the proxy, with half the model's window (`HALF_WINDOW`).
    let (url, proxy, _dir) = proxy_before(&origin, &HALF_WINDOW, |config| {
        // The head in chunks the small model can read, each summary short: a summary, not a
        // good one, is what this checks.
        upstream_summarizer.then(|| {
            let mut template = config.remote_settings();
            template.context_window = 3_000;
            template.max_summary_tokens = 128;
            template.tool_output_chars = 300;
            template.max_attempts = 1;
            UpstreamSummaries {
                remote: template,
                fork: true,
            }
        })
    })
    .await;
    let answer = complete(&client, &url, &body).await;
    let prompt_tokens = answer["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt_tokens < 8_192, "{prompt_tokens}");
    eprintln!(
        "through the proxy: {prompt_tokens} prompt tokens (the server counted 36K+ alone); reply {:?}",
        answer["choices"][0]["message"]["content"]
    );
    let metrics = proxy.metrics.render();
    assert!(
        metrics.contains("condense_compactions_total{phase=\"summary\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("condense_failed_open_total 0"),
        "{metrics}"
    );
}

/// The proxy configured with the model's own window (8,192), where SmolLM2's tokenizer counts
/// more than condense's does: a session's first request, under the window by condense's
/// count (about 7,800 tokens) and not compacted, is over it by the server's, which
/// refuses it as too long, giving its count in its error (`context_length_exceeded`); the
/// proxy prepares the request again with that count and the client gets a real completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_real_server_refuses_as_too_long_is_compacted_by_its_count() {
    use condense_tokenizer::TokenCounter;
    let test = "a_request_the_real_server_refuses_as_too_long_is_compacted_by_its_count";
    let Some(origin) = real_origin(test) else {
        return;
    };
    let _shared = SERVER.read().await;
    let messages = sympy_run();
    // The longest run of its messages, ending with the person's or a tool's, that condense
    // counts under 7,800 tokens.
    let counter = condense_tokenizer::Tiktoken::default();
    let ours = |end: usize| {
        let (_, conversation) = condense_formats::read(
            chat(&json!(messages[..end])).to_string().as_bytes(),
            Some(condense_formats::Format::OpenAi),
        )
        .unwrap();
        counter.count_conversation(&conversation)
    };
    let end = (2..messages.len())
        .filter(|&end| messages[end - 1]["role"] != "assistant")
        .take_while(|&end| ours(end) < 7_800)
        .last()
        .unwrap();
    let body = chat(&json!(messages[..end]));
    let client = client();
    let direct = client
        .post(format!("{origin}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = direct.status();
    let refusal: Value = direct.json().await.unwrap();
    assert_eq!(status, 400, "the server alone refuses it: {refusal}");
    eprintln!(
        "condense counts {} tokens; the server: {refusal}",
        ours(end)
    );
    let env = [
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "8192"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "256"),
        // Only where the window makes it necessary: not early, as condense would compact a
        // request the server has nothing of in its cache.
        ("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0"),
        ("CONDENSE_COMPACTION_MIN_TAIL_TOKENS", "500"),
        ("CONDENSE_COMPACTION_MAX_TAIL_TOKENS", "1000"),
        ("CONDENSE_COMPACTION_MIN_TAIL_TURNS", "0"),
        ("CONDENSE_SUMMARIZER_BUDGET_TOKENS", "1200"),
        ("CONDENSE_PRUNE_ADAPTIVE_THRESHOLDS", "true"),
    ];
    let (url, proxy, _dir) = proxy_before(&origin, &env, |_| None).await;
    let answer = complete(&client, &url, &body).await;
    let prompt_tokens = answer["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt_tokens < 8_192, "{prompt_tokens}");
    let metrics = proxy.metrics.render();
    assert!(
        metrics.contains("condense_refused_as_too_long_total 1"),
        "{metrics}"
    );
    eprintln!("through the proxy after one refusal: {prompt_tokens} prompt tokens");
}

/// `summarizer.fork`: with room left in the window, the real server is asked for the summary
/// inside the agent's own request (the conversation, then the summary prompt), answers it with
/// text, and the compacted request then gets a real completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_server_answers_a_summary_asked_inside_the_agents_request() {
    let test = "the_real_server_answers_a_summary_asked_inside_the_agents_request";
    let Some(origin) = real_origin(test) else {
        return;
    };
    let _shared = SERVER.read().await;
    let messages = sympy_run();
    // The task and three steps: 2,516 tokens by condense's count, just over the 2,500 usable
    // below; the forked request (about 3,300 with the prompt, twice that in SmolLM2's tokens)
    // and its 256-token reply fit the server's 8,192.
    let body = chat(&json!(messages[..8]));
    let env = [
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "3600"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "1100"),
        ("CONDENSE_COMPACTION_MIN_TAIL_TOKENS", "300"),
        ("CONDENSE_COMPACTION_MAX_TAIL_TOKENS", "600"),
        ("CONDENSE_COMPACTION_MIN_TAIL_TURNS", "0"),
        ("CONDENSE_PRUNE_ADAPTIVE_THRESHOLDS", "true"),
    ];
    let (url, proxy, _dir) = proxy_before(&origin, &env, |config| {
        let mut remote = config.remote_settings();
        remote.max_summary_tokens = 256;
        remote.max_attempts = 1;
        Some(UpstreamSummaries { remote, fork: true })
    })
    .await;
    complete(&client(), &url, &body).await;
    let metrics = proxy.metrics.render();
    for line in [
        "condense_compactions_total{phase=\"summary\"} 1",
        "condense_forked_summaries_total{outcome=\"answered\"} 1",
        "condense_forked_summaries_total{outcome=\"fell_back\"} 0",
        "condense_failed_open_total 0",
    ] {
        assert!(metrics.contains(line), "{line}\n{metrics}");
    }
}

/// A stream the client sent without `stream_options`: the proxy asks the real server for its
/// usage (llama.cpp's server takes the option), and the client reads a whole stream of the
/// server's chunks, none carrying a usage it did not ask for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_the_proxy_asks_usage_of_reaches_the_client_from_the_real_server() {
    let test = "a_stream_the_proxy_asks_usage_of_reaches_the_client_from_the_real_server";
    let Some(origin) = real_origin(test) else {
        return;
    };
    let _alone = SERVER.write().await;
    let (url, proxy, _dir) = proxy_before(&origin, &[], |_| None).await;
    let mut body = chat(&json!([{"role": "user", "content": "Say hello."}]));
    body["stream"] = json!(true);
    let response = client()
        .post(format!("{url}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let data: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{text}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|chunk| serde_json::from_str(chunk).unwrap())
        .collect();
    assert!(!chunks.is_empty(), "{text}");
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk", "{chunk}");
        assert!(chunk["usage"].is_null(), "{chunk}");
        assert_eq!(
            chunk["choices"].as_array().map(Vec::len),
            Some(1),
            "{chunk}"
        );
    }
    assert!(
        proxy
            .metrics
            .render()
            .contains("condense_failed_open_total 0"),
        "the request was prepared, and so asked for its usage"
    );
}

/// A server whose chat template wants the roles to alternate (Gemma 3's, as llama.cpp's server
/// renders it: `scripts/strict-template-server.sh`, which `.ci/run` starts and requires) answers
/// a session condense compacted. The template refuses a system message after the
/// conversation's start, where a summary of its own would stand; condense writes its summary
/// into the message before it, the run's task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_template_wants_alternating_roles_answers_a_compacted_session() {
    let test = "a_server_whose_template_wants_alternating_roles_answers_a_compacted_session";
    let Some(base_url) = condense_core::testing::required_url(
        test,
        "CONDENSE_STRICT_LLM_URL",
        "CONDENSE_REQUIRE_STRICT_LLM",
    ) else {
        return;
    };
    let origin = base_url.trim_end_matches('/').trim_end_matches("/v1");
    let messages = sympy_run();
    let client = client();

    // The server refuses a system message after the conversation's start.
    let summary_apart = chat(&json!([messages[0], messages[1],
        {"role": "system", "content": "<prior-conversation-summary>work so far</prior-conversation-summary>"},
        messages[2], messages[3]]));
    let direct = client
        .post(format!("{origin}/v1/chat/completions"))
        .json(&summary_apart)
        .send()
        .await
        .unwrap();
    let status = direct.status();
    let refusal = direct.text().await.unwrap();
    assert!(!status.is_success(), "{refusal}");
    assert!(
        refusal.contains("Conversation roles must alternate"),
        "{refusal}"
    );

    // The whole session through the proxy, compacted.
    let (url, proxy, _dir) = proxy_before(origin, &HALF_WINDOW, |_| None).await;
    let answer = complete(&client, &url, &chat(&json!(messages))).await;
    let prompt_tokens = answer["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt_tokens < 8_192, "{prompt_tokens}");
    let metrics = proxy.metrics.render();
    assert!(
        metrics.contains("condense_compactions_total{phase=\"summary\"} 1"),
        "{metrics}"
    );
}

/// A whole answer the real server stops at a limit condense lowered is asked again, with room,
/// and the client gets that answer. The window configured is 3,500 tokens (of the server's
/// 8,192), the reply's reserve 1,024. The server counts the task and first step at 1,961
/// tokens where condense counts 1,704: with that one figure, the 257 beyond condense's count
/// are the fixed part, which leaves the conversation less than four times the reserve, so
/// compaction is due at three quarters of what it leaves (about 2,690), and the next request
/// (condense's estimate about 2,550; the server's count 2,672) goes out uncompacted with the
/// client's 1,024 lowered to the room left. The server is kept from ending its reply
/// (`logit_bias` on its end tokens), so it writes to whatever limit it gets: the lowered one,
/// where it stops with `finish_reason: "length"`. The proxy reads that, records the cut (the
/// reply then keeps twice that room, which makes the request due), prepares it again, compacted
/// now, and sends it once more: the client's answer runs to its own limit. Before the proxy
/// asked again, the client got the cut answer, shorter than it asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_answer_the_real_server_cut_at_a_lowered_limit_is_asked_again() {
    let test = "a_whole_answer_the_real_server_cut_at_a_lowered_limit_is_asked_again";
    let Some(origin) = real_origin(test) else {
        return;
    };
    let _shared = SERVER.read().await;
    let messages = sympy_run();
    let env = [
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "3500"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "1024"),
        // Only where the window makes it necessary.
        ("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0"),
        ("CONDENSE_COMPACTION_MIN_TAIL_TOKENS", "300"),
        ("CONDENSE_COMPACTION_MAX_TAIL_TOKENS", "600"),
        ("CONDENSE_COMPACTION_MIN_TAIL_TURNS", "0"),
        ("CONDENSE_SUMMARIZER_BUDGET_TOKENS", "400"),
    ];
    let (url, proxy, _dir) = proxy_before(&origin, &env, |_| None).await;
    let client = client();
    let send = |body: Value| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let response = client
                .post(format!("{url}/v1/chat/completions"))
                .header(condense_serve::SESSION_HEADER, "cut-at-a-lowered-limit")
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            let answer: Value = response.json().await.unwrap();
            assert_eq!(status, 200, "{answer}");
            answer
        }
    };
    // The task and its first step: the server's first figure.
    let first = send(chat(&json!(messages[..4]))).await;
    eprintln!("first request: {}", first["usage"]);
    // The next step, the reply asked at the reserve and kept from ending.
    let mut body = chat(&json!(messages[..6]));
    body["max_tokens"] = json!(1_024);
    body["logit_bias"] = json!({"0": -100, "1": -100, "2": -100});
    let answer = send(body).await;
    eprintln!("second request: {}", answer["usage"]);
    let metrics = proxy.metrics.render();
    eprintln!("{metrics}");
    assert_eq!(answer["choices"][0]["finish_reason"], "length", "{answer}");
    assert_eq!(answer["usage"]["completion_tokens"], 1_024, "{answer}");
    for line in [
        "condense_reply_limits_lowered_total 1",
        "condense_replies_cut_at_lowered_limit_total 1",
        "condense_cut_replies_sent_again_total 1",
        "condense_compactions_total{phase=\"summary\"} 1",
        "condense_failed_open_total 0",
    ] {
        assert!(metrics.contains(line), "{line}\n{metrics}");
    }
}
