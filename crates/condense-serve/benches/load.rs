//! The proxy under load on loopback: 64 sessions at once, each replaying the largest shared
//! session (Claude Code 5f8cbb78 as Anthropic request bodies, every second step) request by
//! request against the scripted upstream. The same requests sent straight to the upstream are
//! the baseline, measured in the same run. Run with
//! `cargo bench -p condense-serve --bench load` (set `CONDENSE_REDIS_URL` to add Redis).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use condense_host::{Compactor, Config, Sources};
use condense_pruner::MemoryStore;
use condense_serve::testing::{settings_for, spawn, upstream};
use condense_serve::{DirSessionStore, Proxy, RedisSessionStore, SessionStore};
use serde_json::Value;

const SESSIONS: usize = 64;

fn bodies() -> Vec<Vec<u8>> {
    let value: Value = serde_json::from_slice(
        &condense_core::testing::transcript("anthropic/claude-code-5f8cbb78")
            .unwrap()
            .bytes,
    )
    .unwrap();
    let all = value["messages"].as_array().unwrap();
    (1..all.len())
        .filter(|&end| all[end]["role"] == "assistant")
        .step_by(2)
        .map(|end| {
            let mut body = value.clone();
            body["messages"] = Value::Array(all[..end].to_vec());
            body["max_tokens"] = 1024.into();
            serde_json::to_vec(&body).unwrap()
        })
        .collect()
}

/// Every session's requests in order, all sessions at once; each request's latency.
async fn load(
    url: &str,
    bodies: Arc<Vec<Vec<u8>>>,
    tag: &str,
    sessions: usize,
) -> (Vec<Duration>, Duration) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for session in 0..sessions {
        let url = format!("{url}/v1/messages");
        let bodies = bodies.clone();
        let tag = format!("{tag}-{session}-{}", std::process::id());
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut latencies = Vec::new();
            for body in bodies.iter() {
                let sent = Instant::now();
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("anthropic-version", "2023-06-01")
                    .header("x-condense-session", &tag)
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200);
                response.bytes().await.unwrap();
                latencies.push(sent.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    (all, started.elapsed())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(
    name: &str,
    mut latencies: Vec<Duration>,
    wall: Duration,
    baseline: Option<(Duration, Duration)>,
) -> (Duration, Duration) {
    latencies.sort();
    let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
    let rps = latencies.len() as f64 / wall.as_secs_f64();
    let added = baseline
        .map(|(b50, b99)| {
            format!(
                "; over the baseline: p50 +{:.2} ms, p99 +{:.2} ms",
                (p50.as_secs_f64() - b50.as_secs_f64()) * 1e3,
                (p99.as_secs_f64() - b99.as_secs_f64()) * 1e3
            )
        })
        .unwrap_or_default();
    println!(
        "{name:<28} {} requests in {:.1} s: {rps:.0} req/s; latency p50 {:.2} ms, p99 {:.2} ms{added}",
        latencies.len(),
        wall.as_secs_f64(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    (p50, p99)
}

/// The proxy's own measure of what it adds (from reading the body to forwarding it), from its
/// histogram: the share of requests under 2 ms and 5 ms, and the mean.
fn added(proxy: &Proxy) -> String {
    let text = proxy.metrics.render();
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let count = value("condense_added_latency_seconds_count");
    format!(
        "added by condense (its histogram): {:.0} % under 2 ms, {:.0} % under 5 ms, {:.0} % under 10 ms, mean {:.2} ms",
        100.0 * value("condense_added_latency_seconds_bucket{le=\"0.002\"}") / count,
        100.0 * value("condense_added_latency_seconds_bucket{le=\"0.005\"}") / count,
        100.0 * value("condense_added_latency_seconds_bucket{le=\"0.01\"}") / count,
        1e3 * value("condense_added_latency_seconds_sum") / count
    )
}

async fn proxy(upstream: &str, store: Arc<dyn SessionStore>) -> (String, Arc<Proxy>) {
    let config = Config::load(&Sources::default()).unwrap();
    let compactor = Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(MemoryStore::new()));
    let proxy = Arc::new(Proxy::new(settings_for(upstream), compactor, store).unwrap());
    let url = spawn(proxy.clone()).await;
    (url, proxy)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let bodies = Arc::new(bodies());
        let (address, received) = upstream().await;
        let upstream = format!("http://{address}");
        println!(
            "one session alone, {} requests (largest shared session, every second step): what one request costs",
            bodies.len()
        );
        let (latencies, wall) = load(&upstream, bodies.clone(), "direct-1", 1).await;
        let alone = report("baseline: straight upstream", latencies, wall, None);
        let dir = tempfile::tempdir().unwrap();
        let (url, single) = proxy(&upstream, Arc::new(DirSessionStore::new(dir.path()))).await;
        let (latencies, wall) = load(&url, bodies.clone(), "embedded-1", 1).await;
        report("proxy, embedded state", latencies, wall, Some(alone));
        println!("  {}", added(&single));
        received.lock().unwrap().clear();

        println!("{SESSIONS} sessions at once, each the same {} requests", bodies.len());
        let (latencies, wall) = load(&upstream, bodies.clone(), "direct", SESSIONS).await;
        received.lock().unwrap().clear();
        let baseline = report("baseline: straight upstream", latencies, wall, None);

        let (url, embedded) = proxy(&upstream, Arc::new(DirSessionStore::new(dir.path()))).await;
        let (latencies, wall) = load(&url, bodies.clone(), "embedded", SESSIONS).await;
        received.lock().unwrap().clear();
        report("proxy, embedded state", latencies, wall, Some(baseline));
        println!("  {}", added(&embedded));

        match std::env::var("CONDENSE_REDIS_URL") {
            Ok(redis) if !redis.is_empty() => {
                let store = Arc::new(RedisSessionStore::new(&redis).unwrap());
                let (url, shared) = proxy(&upstream, store).await;
                let (latencies, wall) = load(&url, bodies.clone(), "redis", SESSIONS).await;
                report("proxy, Redis state", latencies, wall, Some(baseline));
                println!("  {}", added(&shared));
            }
            _ => println!("proxy, Redis state: skipped (CONDENSE_REDIS_URL is not set)"),
        }
    });
}
