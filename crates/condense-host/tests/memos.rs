//! A proxy reads each request through a message cache and hands the pipeline each message's
//! memo (its content hash and tokens, computed once): the result must be exactly what reading
//! the body afresh and preparing it without memos gives, request after request, while pruning,
//! summaries and the frozen head all fire (a 32K window, pruning from 4K tokens back).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use condense_core::testing::transcript;
use condense_formats::{Format, MessageCache, Request};
use condense_host::{CompactionOutcome, HeadOutcome, SessionState};
use serde_json::Value;

/// Replays `name` request by request both ways; returns how many requests reused a frozen head,
/// pruned, and summarized.
async fn replay(name: &str, format: Format) -> (usize, usize, usize) {
    let value: Value = serde_json::from_slice(&transcript(name).unwrap().bytes).unwrap();
    let all = value["messages"].as_array().unwrap();
    // Pruning fires long before the summary does (on every request, not only when one is
    // due), and its decisions are then frozen. Summaries come only when the window is full: an
    // early one, its tail the last ten calls the pruner never touches, would leave pruning
    // nothing to do.
    let env = [
        ("CONDENSE_PRUNE_PROTECT_TOKENS", "4000"),
        ("CONDENSE_PRUNE_MINIMUM_TOKENS", "2000"),
        ("CONDENSE_PRUNE_WALK_WHEN", "always"),
        ("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0"),
    ];
    let (plain, memoized) = (common::compactor(&env), common::compactor(&env));
    let (mut plain_state, mut memoized_state) = (SessionState::default(), SessionState::default());
    let cache = MessageCache::default();
    let (mut reused, mut pruned, mut summarized) = (0, 0, 0);
    for end in (1..all.len()).filter(|&end| all[end]["role"] == "assistant") {
        let mut body = value.clone();
        body["messages"] = Value::Array(all[..end].to_vec());
        let text = body.to_string();
        let expected = plain
            .prepare(
                condense_formats::read_json(format, body).unwrap(),
                &mut plain_state,
            )
            .await
            .unwrap();
        let (conversation, memos) = Request::parse(&text)
            .unwrap()
            .read_memoized(format, &cache)
            .unwrap();
        let mut got = memoized
            .prepare_memoized(conversation, &memos, &mut memoized_state, None)
            .await
            .unwrap();
        got.report.elapsed_ms = expected.report.elapsed_ms;
        assert_eq!(
            got.conversation, expected.conversation,
            "{name}: request {end}"
        );
        assert_eq!(got.report, expected.report, "{name}: request {end}");
        assert_eq!(
            serde_json::to_value(&memoized_state).unwrap(),
            serde_json::to_value(&plain_state).unwrap(),
            "{name}: state after request {end}"
        );
        let report = &expected.report;
        reused += usize::from(matches!(report.head, Some(HeadOutcome::Reused { .. })));
        pruned += usize::from(report.prune.replaced() > 0);
        summarized += usize::from(matches!(
            report.compaction,
            CompactionOutcome::Summarized { .. }
        ));
    }
    (reused, pruned, summarized)
}

#[tokio::test]
async fn memos_change_nothing_on_an_anthropic_session() {
    let (reused, pruned, summarized) =
        replay("anthropic/claude-code-5f8cbb78", Format::Anthropic).await;
    assert!(
        reused > 0 && pruned > 0 && summarized > 0,
        "reused {reused}, pruned {pruned}, summarized {summarized}: the replay must exercise every rule"
    );
}

#[tokio::test]
async fn memos_change_nothing_on_an_openai_session_with_tool_calls() {
    let (_, pruned, _) = replay("openai/openhands-ponylang__ponyc-4588", Format::OpenAi).await;
    assert!(pruned > 0, "pruned {pruned}");
}

/// Tool calls written in text are linked to their neighbours after reading: such messages have
/// no memo, and the result is still the same.
#[tokio::test]
async fn memos_change_nothing_when_tool_calls_are_written_in_text() {
    let (_, pruned, _) = replay(
        "openai/mini-swe-agent-astropy__astropy-12907",
        Format::OpenAi,
    )
    .await;
    assert!(pruned > 0, "pruned {pruned}");
}
