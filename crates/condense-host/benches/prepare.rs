//! `prepare` on the largest shared session condense compacts at 32K (mini-swe-agent
//! django-11138, a Chat Completions body; a new session each time, originals in a directory): the body's
//! bytes read, prepared and written back, as the Python binding does with what it is given. And
//! on the README's Claude Code session, where microcompact clears old outputs and the summary
//! reads their originals back from the store.
//! `crates/condense-python/bench/prepare.py` times the same call from Python; BENCHMARKS.md
//! puts the two side by side.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use condense_core::testing::transcript;
use condense_formats::Format;
use condense_host::{Compactor, Config, SessionState, Sources};
use criterion::{Criterion, criterion_group, criterion_main};

fn prepare(c: &mut Criterion) {
    bench_session(
        c,
        "openai/mini-swe-agent-django__django-11138",
        Format::OpenAi,
        "read + prepare + write, openai/mini-swe-agent-django__django-11138 at 32K, new session",
    );
    // The README's session: its log is long past the cache's life, so microcompact clears 50
    // old outputs (originals stored) and the summary reads them back from the store.
    bench_session(
        c,
        "claude-code/d7d349f9",
        Format::ClaudeCode,
        "read + prepare + write, claude-code/d7d349f9 at 32K, new session, 50 outputs cleared and read back",
    );
}

/// `prepare` on the shared session `name` in `format` at 32K, a new session each call.
fn bench_session(c: &mut Criterion, name: &str, format: Format, label: &str) {
    let body = transcript(name).unwrap().bytes;
    let store = tempfile::tempdir().unwrap();
    let config = Config::load(&Sources {
        env: vec![
            ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), "32000".into()),
            ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), "4096".into()),
        ],
        ..Sources::default()
    })
    .unwrap();
    let compactor = Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(condense_host::DirStore::new(store.path())));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let once = || {
        let (_, conversation) = condense_formats::read(&body, Some(format)).unwrap();
        let mut state = SessionState::default();
        let prepared = runtime
            .block_on(compactor.prepare(conversation, &mut state))
            .unwrap();
        condense_formats::write(format, &prepared.conversation).unwrap()
    };
    once();
    c.bench_function(label, |b| b.iter(|| black_box(once())));
}

criterion_group!(benches, prepare);
criterion_main!(benches);
