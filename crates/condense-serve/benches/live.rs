//! The live path's added latency where it used to hang or spin, each next to its baseline
//! measured in the same run on the same machine:
//!
//! - a request when the state store (a Redis of the bench's own) is healthy, and when it is
//!   stopped with SIGSTOP (the request waits at most `serve.state_timeout_ms` per call);
//! - the same requests on two replicas sharing one Redis, each step sent six times at once
//!   (compare-and-set contention), against one copy per step;
//! - `POST /v1/responses/compact` answered by condense against a plain `/v1/responses`
//!   request of the same body;
//! - a Chat Completions stream of 205 events the client sent without `stream_options` (the
//!   proxy asks for its usage and takes it out of every event again) against the same stream
//!   the client asked the usage of itself (relayed unedited), in turn.
//!
//! `cargo bench -p condense-serve --bench live` (needs `redis-server` on the PATH:
//! `scripts/redis.sh start` installs it). Prints one line per figure, medians in milliseconds.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use condense_host::Config;
use condense_serve::testing::{settings_for, spawn, upstream};
use condense_serve::{NativeMode, Proxy, ProxySettings, RedisSessionStore, SessionStore};
use serde_json::{Value, json};

fn median(mut values: Vec<Duration>) -> f64 {
    values.sort();
    values[values.len() / 2].as_secs_f64() * 1_000.0
}

struct Redis {
    child: std::process::Child,
    url: String,
}

impl Redis {
    fn start() -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server on the PATH (scripts/redis.sh start installs it)");
        let redis = Redis {
            child,
            url: format!("redis://127.0.0.1:{port}/0"),
        };
        for _ in 0..100 {
            if RedisSessionStore::new(&redis.url).unwrap().check().is_ok() {
                return redis;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not answer");
    }

    fn signal(&self, signal: &str) {
        std::process::Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.signal("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn proxy(upstream: std::net::SocketAddr, store: Arc<dyn SessionStore>) -> String {
    let compactor = condense_serve::testing::compactor(&condense_serve::testing::WINDOW_16K);
    let mut settings = settings_for(&format!("http://{upstream}"));
    // The built-in state_timeout_ms, as `condense serve` has it.
    settings.state_timeout =
        ProxySettings::from_config(&Config::built_in().unwrap().settings().serve).state_timeout;
    settings.native_compaction = NativeMode::Auto;
    spawn(Arc::new(Proxy::new(settings, compactor, store).unwrap())).await
}

/// A long session's requests (Chat Completions), every third step.
fn requests() -> Vec<Value> {
    let chat: Value = serde_json::from_slice(
        &condense_core::testing::transcript("openai/openhands-ponylang__ponyc-4588")
            .unwrap()
            .bytes,
    )
    .unwrap();
    let all = chat["messages"].as_array().unwrap().clone();
    (2..=all.len())
        .filter(|&end| all[end - 1]["role"] == "assistant")
        .step_by(3)
        .map(|end| json!({"model": "m", "messages": &all[..end - 1]}))
        .collect()
}

/// Each request sent `copies` times at once, alternating over `urls`; every latency.
async fn replay(urls: &[String], session: &str, copies: usize) -> Vec<Duration> {
    let client = reqwest::Client::new();
    let mut latencies = Vec::new();
    for body in requests() {
        let sends = (0..copies).map(|copy| {
            let client = client.clone();
            let url = format!("{}/v1/chat/completions", urls[copy % urls.len()]);
            let body = body.clone();
            async move {
                let sent = Instant::now();
                let response = client
                    .post(url)
                    .header("x-condense-session", session)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200);
                response.bytes().await.unwrap();
                sent.elapsed()
            }
        });
        latencies.extend(futures_util::future::join_all(sends).await);
    }
    latencies
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (upstream, _) = upstream().await;
        let redis = Redis::start();
        let store = || Arc::new(RedisSessionStore::new(&redis.url).unwrap()) as Arc<dyn SessionStore>;
        let first = proxy(upstream, store()).await;
        let second = proxy(upstream, store()).await;
        let pid = std::process::id();

        let healthy = replay(std::slice::from_ref(&first), &format!("healthy-{pid}"), 1).await;
        redis.signal("-STOP");
        let stalled = replay(std::slice::from_ref(&first), &format!("stalled-{pid}"), 1).await;
        redis.signal("-CONT");
        println!(
            "redis stopped (SIGSTOP): median request {:.1} ms, healthy {:.1} ms ({} requests each)",
            median(stalled),
            median(healthy.clone()),
            healthy.len()
        );

        let urls = [first.clone(), second.clone()];
        let contended = replay(&urls, &format!("contended-{pid}"), 6).await;
        let alone = replay(&urls, &format!("alone-{pid}"), 1).await;
        println!(
            "two replicas, six copies of each step at once: median request {:.1} ms; one copy: {:.1} ms",
            median(contended),
            median(alone)
        );

        let chat: Value = serde_json::from_slice(
            &condense_core::testing::transcript("openai/openhands-ponylang__ponyc-4588")
                .unwrap()
                .bytes,
        )
        .unwrap();
        let body = condense_core::testing::responses_from_chat(&chat);
        let client = reqwest::Client::new();
        let time = |path: &'static str| {
            let client = client.clone();
            let url = format!("{first}{path}");
            let body = body.clone();
            async move {
                let mut latencies = Vec::new();
                for round in 0..20 {
                    let sent = Instant::now();
                    let response = client
                        .post(&url)
                        .header("x-condense-session", format!("compact-{pid}-{path}-{round}"))
                        .json(&body)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), 200);
                    response.bytes().await.unwrap();
                    latencies.push(sent.elapsed());
                }
                latencies
            }
        };
        let plain = time("/v1/responses").await;
        let compact = time("/v1/responses/compact").await;
        println!(
            "POST /v1/responses/compact answered by condense: median {:.1} ms; the same body to /v1/responses: {:.1} ms (22K-token session, 20 rounds each)",
            median(compact),
            median(plain)
        );

        let stream = |asked_by_client: bool, round: usize| {
            let client = client.clone();
            let url = format!("{first}/v1/chat/completions");
            let mut body = json!({"model": "m", "stream": true,
                "messages": [{"role": "user", "content": "hello"}]});
            if asked_by_client {
                body["stream_options"] = json!({"include_usage": true});
            }
            async move {
                let sent = Instant::now();
                let response = client
                    .post(&url)
                    .header("x-condense-session", format!("stream-{pid}-{asked_by_client}-{round}"))
                    .header("x-test", "long")
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200);
                let text = response.text().await.unwrap();
                assert_eq!(text.contains("\"usage\""), asked_by_client);
                sent.elapsed()
            }
        };
        let (mut edited, mut unedited) = (Vec::new(), Vec::new());
        for round in 0..20 {
            edited.push(stream(false, round).await);
            unedited.push(stream(true, round).await);
        }
        println!(
            "a Chat Completions stream of 205 events, its usage asked by the proxy and taken out: median {:.1} ms; the client asking itself (unedited): {:.1} ms (20 rounds each, in turn)",
            median(edited),
            median(unedited)
        );
    });
}
