//! The proxy under load on loopback: 64 sessions at once, each replaying the longest shared
//! session (Claude Code 5f8cbb78 as Anthropic request bodies, every second step; another with
//! `CONDENSE_BENCH_SESSION`) request by request against the scripted upstream. The same
//! requests sent straight to the upstream are the baseline, measured in the same run. Run with
//! `cargo bench -p condense-serve --bench load` (set `CONDENSE_REDIS_URL` to add Redis).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use condense_host::{Compactor, Config, Sources};
use condense_pruner::MemoryStore;
use condense_serve::testing::{settings_for, spawn, upstream};
use condense_serve::{DirSessionStore, Proxy, RedisSessionStore, SessionStore};

mod common;
use common::bodies;

const SESSIONS: usize = 64;
/// How many times the one-session replay runs, each on a fresh proxy.
const ALONE: usize = 5;

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

/// The `condense` binary's allocator, so that the bench measures what users run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    added_of(&[proxy.metrics.render()])
}

/// [`added`] over several proxies' histograms together.
fn added_of(renders: &[String]) -> String {
    let value = |name: &str| -> f64 {
        renders
            .iter()
            .flat_map(|text| text.lines())
            .filter_map(|line| line.strip_prefix(name)?.trim().parse::<f64>().ok())
            .sum()
    };
    let count = value("condense_added_latency_seconds_count");
    format!(
        "added by condense (its histogram): {:.0} % under 1 ms, {:.0} % under 2 ms, {:.0} % under 5 ms, {:.0} % under 10 ms, mean {:.2} ms",
        100.0 * value("condense_added_latency_seconds_bucket{le=\"0.001\"}") / count,
        100.0 * value("condense_added_latency_seconds_bucket{le=\"0.002\"}") / count,
        100.0 * value("condense_added_latency_seconds_bucket{le=\"0.005\"}") / count,
        100.0 * value("condense_added_latency_seconds_bucket{le=\"0.01\"}") / count,
        1e3 * value("condense_added_latency_seconds_sum") / count
    )
}

/// One session alone, [`ALONE`] times, each on a fresh proxy (cold token and message caches)
/// with its state in `store`, alternated with the same requests sent straight upstream. Prints
/// both.
async fn alone(
    upstream: &str,
    bodies: &Arc<Vec<Vec<u8>>>,
    received: &condense_serve::testing::Received,
    name: &str,
    store: impl Fn() -> Arc<dyn SessionStore>,
) {
    let (mut direct, mut direct_wall) = (Vec::new(), Duration::ZERO);
    let (mut through, mut through_wall) = (Vec::new(), Duration::ZERO);
    let mut histograms = Vec::new();
    for run in 0..ALONE {
        // Alternated, so that a slower moment of a shared machine falls on both.
        let tag = format!("{name}-{run}-{}", std::process::id());
        let (latencies, wall) = load(upstream, bodies.clone(), &format!("direct-{tag}"), 1).await;
        direct.extend(latencies);
        direct_wall += wall;
        let (url, single) = proxy(upstream, store()).await;
        let (latencies, wall) = load(&url, bodies.clone(), &tag, 1).await;
        through.extend(latencies);
        through_wall += wall;
        single.flushed().await;
        histograms.push(single.metrics.render());
        received.lock().unwrap().clear();
    }
    let baseline = report("baseline: straight upstream", direct, direct_wall, None);
    report(
        &format!("proxy, {name} state"),
        through,
        through_wall,
        Some(baseline),
    );
    println!("  {}", added_of(&histograms));
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
        let (name, bodies) = bodies();
        let bodies = Arc::new(bodies);
        let (address, received) = upstream().await;
        let upstream = format!("http://{address}");
        println!(
            "one session alone, {} requests ({name}, every second step), {ALONE} times with a fresh proxy (cold caches): what one request costs",
            bodies.len()
        );
        let dir = tempfile::tempdir().unwrap();
        let embedded = || Arc::new(DirSessionStore::new(dir.path())) as Arc<dyn SessionStore>;
        alone(&upstream, &bodies, &received, "embedded", embedded).await;
        let redis_url = std::env::var("CONDENSE_REDIS_URL")
            .ok()
            .filter(|url| !url.is_empty());
        if let Some(redis) = &redis_url {
            let shared =
                || Arc::new(RedisSessionStore::new(redis).unwrap()) as Arc<dyn SessionStore>;
            alone(&upstream, &bodies, &received, "Redis", shared).await;
        }

        println!("{SESSIONS} sessions at once, each the same {} requests", bodies.len());
        let (latencies, wall) = load(&upstream, bodies.clone(), "direct", SESSIONS).await;
        received.lock().unwrap().clear();
        let baseline = report("baseline: straight upstream", latencies, wall, None);

        let (url, embedded) = proxy(&upstream, embedded()).await;
        let (latencies, wall) = load(&url, bodies.clone(), "embedded", SESSIONS).await;
        received.lock().unwrap().clear();
        report("proxy, embedded state", latencies, wall, Some(baseline));
        println!("  {}", added(&embedded));

        match &redis_url {
            Some(redis) => {
                let store = Arc::new(RedisSessionStore::new(redis).unwrap());
                let (url, shared) = proxy(&upstream, store).await;
                let (latencies, wall) = load(&url, bodies.clone(), "redis", SESSIONS).await;
                report("proxy, Redis state", latencies, wall, Some(baseline));
                println!("  {}", added(&shared));
            }
            _ => println!("proxy, Redis state: skipped (CONDENSE_REDIS_URL is not set)"),
        }
    });
}
