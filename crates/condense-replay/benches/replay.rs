//! The replay of the largest shared session under every policy, against the cost of tokenizing
//! that session's messages once (the same baseline as the pruner's benchmarks, measured in the
//! same run).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use condense_host::{Compactor, Config};
use condense_replay::{PriceTable, Provider, Recording, ReplaySettings, Ttl, policy, replay};
use condense_tokenizer::{Tiktoken, TokenCounter};
use criterion::{Criterion, criterion_group, criterion_main};

fn largest() -> Recording {
    let path = condense_core::testing::transcripts_dir()
        .join("claude-code/5f8cbb78-38d3-47e9-9504-baa93bb166c9.jsonl");
    let bytes = std::fs::read(path).unwrap();
    Recording::of(condense_formats::read(&bytes, None).unwrap().1)
}

fn bench(c: &mut Criterion) {
    let recording = largest();
    let mut group = c.benchmark_group("replay_5f8cbb78");
    group.sample_size(10);
    group.bench_function("tokenize_once (baseline)", |b| {
        b.iter(|| {
            let counter = Tiktoken::default();
            counter.count_each(&recording.conversation.messages)
        })
    });
    let settings = ReplaySettings {
        provider: Provider::Anthropic,
        ttl: Ttl::FiveMinutes,
        prices: PriceTable::built_in().unwrap(),
        context_window: 200_000,
        max_output_tokens: 32_000,
    };
    group.bench_function("all_policies", |b| {
        b.iter(|| {
            let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
            let mut policies: Vec<Box<dyn condense_replay::Policy>> = policy::NAMES
                .iter()
                .filter_map(|name| policy::named(name, counter.clone()))
                .collect();
            let config = Config::built_in().unwrap();
            let requests = policy::SummaryRequests::from_config(&config);
            let compactor = Compactor::from_config(&config).unwrap();
            policies.push(Box::new(
                policy::Condense::new("condense", compactor, requests).unwrap(),
            ));
            replay(&recording, &mut policies, &settings, counter, &mut |_| {}).unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
