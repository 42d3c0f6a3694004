//! Reading sessions: the largest transcript, and one huge tool output at two sizes to show that
//! the time grows linearly with the input (throughput should be the same at both sizes).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use condense_core::testing::transcript;
use condense_formats::{Format, read};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn largest_transcript(c: &mut Criterion) {
    let transcript = transcript("claude-code/5f8cbb78").unwrap();
    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Bytes(transcript.bytes.len() as u64));
    group.bench_function("claude-code/5f8cbb78", |b| {
        b.iter(|| read(black_box(&transcript.bytes), None).unwrap())
    });
    group.finish();
}

fn session_with_output(bytes: usize) -> Vec<u8> {
    let output: String = "line of tool output 0123456789\n".repeat(bytes / 31);
    serde_json::to_vec(&serde_json::json!([
        {"role": "user", "content": "dump it"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]))
    .unwrap()
}

fn huge_tool_output(c: &mut Criterion) {
    let mut group = c.benchmark_group("read one tool output");
    group.sample_size(10);
    for megabytes in [12, 25, 50, 100] {
        let input = session_with_output(megabytes * 1024 * 1024);
        group.throughput(Throughput::Bytes(input.len() as u64));
        group.bench_function(format!("{megabytes} MB"), |b| {
            b.iter(|| read(black_box(&input), None).unwrap())
        });
    }
    group.finish();
}

/// The same OpenHands run as a Chat Completions body and as the Responses body Codex would send
/// for it (every call and output an item of its own): the baseline and the new reader in one
/// run.
fn chat_and_responses(c: &mut Criterion) {
    let chat = transcript("openai/openhands-ponylang__ponyc-4595")
        .unwrap()
        .bytes;
    let value: serde_json::Value = serde_json::from_slice(&chat).unwrap();
    let responses =
        serde_json::to_vec(&condense_core::testing::responses_from_chat(&value)).unwrap();
    let mut group = c.benchmark_group("read openhands-4595 as");
    group.bench_function("chat completions", |b| {
        b.iter(|| read(black_box(&chat), Some(Format::OpenAi)).unwrap())
    });
    group.bench_function("responses", |b| {
        b.iter(|| read(black_box(&responses), Some(Format::Responses)).unwrap())
    });
    group.finish();
}

/// The log Codex 0.169 wrote (tests/data) and the Responses body of the same conversation: what
/// reading the log adds (its other lines kept beside, each item's key order kept) over reading
/// its items.
fn codex_log_and_responses(c: &mut Criterion) {
    let log = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/codex-0.169.0.jsonl"
    ))
    .unwrap();
    let (_, conversation) = read(&log, Some(Format::Codex)).unwrap();
    let mut body = conversation.clone();
    body.side.clear();
    for message in &mut body.messages {
        for record in &mut message.wire {
            let item = record.fields.get("payload").cloned();
            record.fields = match item {
                Some(serde_json::Value::Object(item)) => item,
                _ => condense_core::JsonMap::new(),
            };
        }
    }
    let body = condense_formats::write(Format::Responses, &body).unwrap();
    let mut group = c.benchmark_group("read codex-0.169.0 as");
    group.bench_function("codex log", |b| {
        b.iter(|| read(black_box(&log), Some(Format::Codex)).unwrap())
    });
    group.bench_function("responses body", |b| {
        b.iter(|| read(black_box(&body), Some(Format::Responses)).unwrap())
    });
    group.finish();
}

criterion_group!(
    benches,
    largest_transcript,
    huge_tool_output,
    chat_and_responses,
    codex_log_and_responses
);
criterion_main!(benches);
