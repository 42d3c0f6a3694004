//! Where the proxy's time goes on one request, stage by stage, without HTTP: the longest shared
//! session (or `CONDENSE_BENCH_SESSION`) replayed request by request through the steps `Proxy`
//! takes for each (check the body, read the conversation, load the session's state, prepare,
//! write the body, save the state), each on a fresh message cache, compactor and state
//! directory per run (cold caches, as the load bench's single session). Prints each stage's
//! mean per request. Deterministic in what it does, so it also runs under
//! `valgrind --tool=callgrind` for instruction counts that a shared machine's load does not
//! move, on one thread and for the requests alone:
//! `STAGES_RUNS=1 RAYON_NUM_THREADS=1 valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect='stages::one_request' target/release/deps/stages-*`.
//! Run with `cargo bench -p condense-serve --bench stages`.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::time::{Duration, Instant};

use condense_formats::{Format, MessageCache, Request};
use condense_host::{CompactionOutcome, Compactor, Config, HeadOutcome, Sources};
use condense_pruner::MemoryStore;
use condense_serve::{DirSessionStore, SessionStore};

mod common;

/// The `condense` binary's allocator, so that the bench measures what users run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const STAGES: [&str; 6] = [
    "check the body (Request::parse)",
    "read the conversation (cached messages)",
    "load the session's state",
    "prepare (count, prune, freeze)",
    "write the body (when changed)",
    "save the session's state",
];

/// One request's stages, the time each took, and whether the body was written again (only
/// when something changed; otherwise the client's own bytes are forwarded). Not inlined, so that callgrind can count this
/// alone: `--collect-atstart=no --toggle-collect='stages::one_request'`.
#[inline(never)]
fn one_request(
    body: &[u8],
    cache: &MessageCache,
    compactor: &Compactor,
    store: &DirSessionStore,
    session: &str,
    runtime: &tokio::runtime::Runtime,
) -> ([Duration; STAGES.len()], bool) {
    let mut marks = [Duration::ZERO; STAGES.len()];
    let mut stage = 0;
    let mut clock = Instant::now();
    let mut mark = |marks: &mut [Duration; STAGES.len()]| {
        marks[stage] = clock.elapsed();
        stage += 1;
        clock = Instant::now();
    };
    let text = std::str::from_utf8(body).unwrap();
    let request = Request::parse(text).unwrap();
    mark(&mut marks);
    let (conversation, memos) = request.read_memoized(Format::Anthropic, cache).unwrap();
    mark(&mut marks);
    let versioned = store.load(session).unwrap();
    let mut state = versioned.state;
    mark(&mut marks);
    let compaction = runtime
        .block_on(compactor.prepare_memoized(conversation, &memos, &mut state, None))
        .unwrap();
    mark(&mut marks);
    let report = &compaction.report;
    let unchanged = !matches!(report.head, Some(HeadOutcome::Reused { .. }))
        && report.prune.replaced() == 0
        && !matches!(report.compaction, CompactionOutcome::Summarized { .. });
    if !unchanged {
        condense_formats::write_compact(Format::Anthropic, &compaction.conversation).unwrap();
    }
    mark(&mut marks);
    store.save(session, &state, versioned.version).unwrap();
    mark(&mut marks);
    (marks, !unchanged)
}

fn main() {
    let runs: usize = std::env::var("STAGES_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(5);
    let (name, bodies) = common::bodies();
    println!("{name}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let config = Config::load(&Sources::default()).unwrap();
    let mut totals = [Duration::ZERO; STAGES.len()];
    let mut per_request = Vec::new();
    let mut written = 0;
    for run in 0..runs {
        let cache = MessageCache::new(256 << 20);
        let compactor = Compactor::from_config(&config)
            .unwrap()
            .with_store(Box::new(MemoryStore::new()));
        let dir = tempfile::tempdir().unwrap();
        let store = DirSessionStore::new(dir.path());
        let session = format!("stages-{run}");
        for body in &bodies {
            let (marks, rewritten) =
                one_request(body, &cache, &compactor, &store, &session, &runtime);
            written += usize::from(rewritten);
            for (total, spent) in totals.iter_mut().zip(marks) {
                *total += spent;
            }
            per_request.push(marks[..5].iter().sum::<Duration>());
        }
    }
    let requests = per_request.len() as f64;
    println!(
        "{} requests ({} runs of {}; {written} bodies written again), mean per request:",
        per_request.len(),
        runs,
        bodies.len()
    );
    for (name, total) in STAGES.iter().zip(totals) {
        println!(
            "  {name:<42} {:>8.1} µs",
            total.as_secs_f64() * 1e6 / requests
        );
    }
    per_request.sort();
    let under = per_request
        .iter()
        .filter(|spent| **spent < Duration::from_millis(2))
        .count();
    println!(
        "  before forwarding (all but the save): p50 {:.2} ms, {:.0} % under 2 ms",
        per_request[per_request.len() / 2].as_secs_f64() * 1e3,
        100.0 * under as f64 / requests
    );
}
