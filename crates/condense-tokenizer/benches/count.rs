//! Counting the tokens of real sessions: cold (empty cache) against tiktoken-rs's own
//! `encode_ordinary` over the same texts, on one thread and two; and a warm recount of an
//! unchanged 500-message conversation against the cold count of the same messages.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use condense_core::testing::transcript;
use condense_core::{Conversation, Message, Part, ToolOutput};
use condense_tokenizer::{Parallelism, Tiktoken, TokenCounter};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

fn load(name: &str) -> Conversation {
    let transcript = transcript(name).unwrap();
    condense_formats::read(&transcript.bytes, None).unwrap().1
}

/// The texts the counter tokenizes, in the same order, for the baseline.
fn texts(messages: &[Message]) -> Vec<String> {
    fn part_texts(part: &Part, out: &mut Vec<String>) {
        match part {
            Part::Text(text) => out.push(text.text.clone()),
            Part::Thinking(thinking) => out.push(thinking.text.clone()),
            Part::ToolCall(call) => {
                out.push(call.name.clone());
                out.push(
                    call.raw_input
                        .clone()
                        .unwrap_or_else(|| call.input.to_string()),
                );
            }
            Part::ToolResult(result) => match &result.content {
                ToolOutput::Text(text) => out.push(text.clone()),
                ToolOutput::Parts(parts) => parts.iter().for_each(|p| part_texts(p, out)),
            },
            Part::Opaque { value } => out.push(value.to_string()),
            Part::Image(_) => {}
        }
    }
    let mut out = Vec::new();
    for message in messages {
        out.push(message.role.as_str().to_owned());
        message
            .parts
            .iter()
            .for_each(|part| part_texts(part, &mut out));
    }
    out
}

fn cold_count(c: &mut Criterion) {
    let conversation = load("claude-code/5f8cbb78");
    let texts = texts(&conversation.messages);
    let bpe = tiktoken_rs::o200k_base_singleton();
    let two_threads = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();

    let mut group = c.benchmark_group("cold count, claude-code/5f8cbb78");
    group.sample_size(20);
    group.bench_function("baseline: encode_ordinary, 1 thread", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| bpe.encode_ordinary(black_box(t)).len())
                .sum::<usize>()
        })
    });
    group.bench_function("condense, 1 thread", |b| {
        b.iter_batched(
            || Tiktoken::default().with_parallelism(Parallelism::Off),
            |counter| counter.count_conversation(black_box(&conversation)),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("condense, 2 threads", |b| {
        b.iter_batched(
            Tiktoken::default,
            |counter| two_threads.install(|| counter.count_conversation(black_box(&conversation))),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

/// 500 messages from the longest OpenAI-format sessions, one after the other.
fn five_hundred_messages() -> Conversation {
    let mut messages = Vec::new();
    for name in [
        "openai/mini-swe-agent-sympy__sympy-13091",
        "openai/mini-swe-agent-django__django-11138",
        "openai/mini-swe-agent-sphinx-doc__sphinx-9258",
    ] {
        messages.extend(load(name).messages);
    }
    messages.truncate(500);
    assert_eq!(messages.len(), 500);
    Conversation::new(messages)
}

fn warm_recount(c: &mut Criterion) {
    let conversation = five_hundred_messages();
    let mut group = c.benchmark_group("recount of 500 messages");
    group.sample_size(20);
    group.bench_function("cold", |b| {
        b.iter_batched(
            Tiktoken::default,
            |counter| counter.count_conversation(black_box(&conversation)),
            BatchSize::PerIteration,
        )
    });
    let warm = Tiktoken::default();
    let expected = warm.count_conversation(&conversation);
    group.bench_function("warm", |b| {
        b.iter(|| assert_eq!(warm.count_conversation(black_box(&conversation)), expected))
    });
    group.finish();
}

criterion_group!(benches, cold_count, warm_recount);
criterion_main!(benches);
