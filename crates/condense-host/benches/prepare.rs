//! `prepare` on the largest shared session condense compacts at 32K (mini-swe-agent
//! django-11138, a Chat Completions body; a new session each time, originals in a directory): the body's
//! bytes read, prepared and written back, as the Python binding does with what it is given.
//! `crates/condense-python/bench/prepare.py` times the same call from Python; BENCHMARKS.md
//! puts the two side by side.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use condense_core::testing::transcript;
use condense_formats::Format;
use condense_host::{Compactor, Config, SessionState, Sources};
use criterion::{Criterion, criterion_group, criterion_main};

fn prepare(c: &mut Criterion) {
    let body = transcript("openai/mini-swe-agent-django__django-11138")
        .unwrap()
        .bytes;
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
        let (_, conversation) = condense_formats::read(&body, Some(Format::OpenAi)).unwrap();
        let mut state = SessionState::default();
        let prepared = runtime
            .block_on(compactor.prepare(conversation, &mut state))
            .unwrap();
        condense_formats::write(Format::OpenAi, &prepared.conversation).unwrap()
    };
    once();
    c.bench_function(
        "read + prepare + write, openai/mini-swe-agent-django__django-11138 at 32K, new session",
        |b| b.iter(|| black_box(once())),
    );
}

criterion_group!(benches, prepare);
criterion_main!(benches);
