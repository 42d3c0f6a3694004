//! Phase 1 on the largest transcript with a warm token cache, and the incremental call a harness
//! makes after one more turn: that one should cost what the new turn costs, not what the session
//! costs.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use condense_core::testing::{tool_call, tool_result};
use std::cell::Cell;
use std::hint::black_box;

use condense_core::testing::transcript;
use condense_core::{Conversation, Message, Role};
use condense_pruner::{DecisionLog, FixedClock, MemoryStore, PruneRequest, PruneSettings, Pruner};
use condense_tokenizer::{Tiktoken, TokenCounter};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

fn largest() -> Conversation {
    let transcript = transcript("claude-code/5f8cbb78").unwrap();
    condense_formats::read(&transcript.bytes, None).unwrap().1
}

/// One more turn: the person asks, the assistant reads a file, the file comes back (~2K tokens).
/// `nonce` makes its text new to the token cache, as a real new turn is.
fn append_turn(conversation: &mut Conversation, nonce: u64) {
    let id = format!("bench_call_{nonce}");
    let output: String = (0..200)
        .map(|line| format!("{nonce}: line {line} of the new file\n"))
        .collect();
    conversation
        .messages
        .push(Message::text(Role::User, format!("next step {nonce}")));
    conversation.messages.push(Message::new(
        Role::Assistant,
        vec![tool_call(
            id.clone(),
            "Read",
            serde_json::json!({"file_path": format!("/src/new_{nonce}.rs")}),
        )],
    ));
    conversation
        .messages
        .push(Message::new(Role::User, vec![tool_result(id, output)]));
}

fn prune_largest(c: &mut Criterion) {
    let conversation = largest();
    let counter = Tiktoken::default();
    counter.count_conversation(&conversation);
    let store = MemoryStore::new();
    let clock = FixedClock(0);

    let mut group = c.benchmark_group("prune claude-code/5f8cbb78, warm cache");
    for (label, settings, window) in [
        (
            "defaults (18 superseded reads replaced)",
            PruneSettings::built_in().unwrap(),
            None,
        ),
        (
            "defaults, supersede_reads off (batch below minimum)",
            {
                let mut s = PruneSettings::built_in().unwrap();
                s.rules.supersede_reads = false;
                s
            },
            None,
        ),
        (
            "adaptive at 32K (59 outputs replaced)",
            {
                let mut s = PruneSettings::built_in().unwrap();
                s.rules.adaptive_thresholds = true;
                s
            },
            Some(32_000),
        ),
        (
            "adaptive at 32K, supersede_reads off",
            {
                let mut s = PruneSettings::built_in().unwrap();
                s.rules.adaptive_thresholds = true;
                s.rules.supersede_reads = false;
                s
            },
            Some(32_000),
        ),
    ] {
        let pruner = Pruner {
            settings: &settings,
            counter: &counter,
            store: &store,
            clock: &clock,
        };
        group.bench_function(format!("first call, {label}"), |b| {
            b.iter_batched_ref(
                || (conversation.clone(), DecisionLog::new()),
                |(conversation, log)| {
                    pruner
                        .prune(black_box(conversation), log, PruneRequest::window(window))
                        .unwrap()
                },
                BatchSize::LargeInput,
            )
        });
    }

    // Time-based microcompact on a cold cache: the session's last reply is months before the
    // clock, so the rule clears and the budget and the walk do not run.
    let cold_clock = FixedClock(1_767_225_600_000);
    let settings = PruneSettings::built_in().unwrap();
    let pruner = Pruner {
        settings: &settings,
        counter: &counter,
        store: &store,
        clock: &cold_clock,
    };
    group.bench_function(
        "first call, defaults, cache cold (microcompact clears 69)",
        |b| {
            b.iter_batched_ref(
                || (conversation.clone(), DecisionLog::new()),
                |(conversation, log)| {
                    let report = pruner
                        .prune(black_box(conversation), log, PruneRequest::default())
                        .unwrap();
                    assert_eq!(report.microcompact.map(|m| m.cleared), Some(69));
                },
                BatchSize::LargeInput,
            )
        },
    );

    // The harness's loop: prune, then one more turn arrives, then prune again with the same log.
    let settings = {
        let mut s = PruneSettings::built_in().unwrap();
        s.rules.adaptive_thresholds = true;
        s
    };
    let pruner = Pruner {
        settings: &settings,
        counter: &counter,
        store: &store,
        clock: &clock,
    };
    // And the proxy's loop: its client knows nothing of condense's replacements and sends every
    // original again, so each frozen decision meets its original once more on every request.
    // One nonce for every case, so that each case's new turns are new to the token cache.
    let nonce = Cell::new(0u64);
    let whole = conversation.messages.len();
    for (label, length, originals_resent) in [
        ("whole session", whole, false),
        ("first half", whole / 2, false),
        ("originals resent", whole, true),
    ] {
        let original = Conversation::new(conversation.messages[..length].to_vec());
        let mut pruned = original.clone();
        let mut log = DecisionLog::new();
        let frozen = pruner
            .prune(&mut pruned, &mut log, PruneRequest::window(Some(32_000)))
            .unwrap()
            .replaced();
        let base = if originals_resent { original } else { pruned };
        group.bench_function(
            format!("call after one new turn, {label} ({length} messages, {frozen} frozen)"),
            |b| {
                b.iter_batched_ref(
                    || {
                        nonce.set(nonce.get() + 1);
                        let mut grown = base.clone();
                        append_turn(&mut grown, nonce.get());
                        (grown, log.clone())
                    },
                    |(grown, log)| {
                        pruner
                            .prune(black_box(grown), log, PruneRequest::window(Some(32_000)))
                            .unwrap()
                    },
                    BatchSize::LargeInput,
                )
            },
        );
    }

    // The reference for the calls after one new turn above: counting the new turn's tokens,
    // on a cold cache.
    let nonce = Cell::new(1_000_000u64);
    group.bench_function("reference: counting the new turn alone, cold", |b| {
        b.iter_batched_ref(
            || {
                nonce.set(nonce.get() + 1);
                let mut turn = Conversation::default();
                append_turn(&mut turn, nonce.get());
                turn
            },
            |turn| counter.count_conversation(black_box(turn)),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, prune_largest);
criterion_main!(benches);
