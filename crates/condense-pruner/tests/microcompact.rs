//! Time-based microcompact on conversations small enough to read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use condense_core::{Conversation, Message, Phase, Role, WireRecord};
use condense_pruner::{
    Decision, DecisionLog, FixedClock, MemoryStore, PreviousRequest, PruneReport, PruneRequest,
    PruneSettings, Pruner, Reason, Store,
};
use condense_tokenizer::Tiktoken;

const NOW: u64 = 1_763_700_000_000;
const MINUTE: u64 = 60_000;

fn run(
    conversation: &mut Conversation,
    settings: &PruneSettings,
    log: &mut DecisionLog,
    store: &dyn Store,
    now: u64,
    previous: Option<u64>,
) -> PruneReport {
    let counter = Tiktoken::default();
    let pruner = Pruner {
        settings,
        counter: &counter,
        store,
        clock: &FixedClock(now),
    };
    let request = PruneRequest {
        context_window: Some(200_000),
        previous_request_ms: previous,
        ..PruneRequest::default()
    };
    pruner.prune(conversation, log, request).unwrap()
}

/// Eight reads, a protected `skill` output, a `memory_store` output (not a tool microcompact
/// clears), then two more user turns with a read each (inside the skip boundary).
fn session() -> Conversation {
    let mut messages = vec![system("agent"), user("task")];
    for index in 0..8 {
        let id = format!("r{index}");
        messages.push(call(&id, "Read"));
        messages.push(result(&id, &words(400, &id)));
    }
    messages.push(call("s", "skill"));
    messages.push(result("s", &words(400, "skill")));
    messages.push(call("m", "memory_store"));
    messages.push(result("m", &words(400, "memory")));
    messages.push(user("second"));
    messages.push(call("late1", "Read"));
    messages.push(result("late1", &words(400, "late1")));
    messages.push(user("third"));
    messages.push(call("late2", "Bash"));
    messages.push(result("late2", &words(400, "late2")));
    Conversation::new(messages)
}

fn reason(report: &PruneReport, id: &str) -> Reason {
    report
        .outputs
        .iter()
        .find(|o| o.call_id == id)
        .map(|o| o.reason.clone())
        .unwrap()
}

/// After an hour and a minute idle the cache is cold: every result of a compactable tool before
/// the boundary is cleared except the most recent five of them (counted over the whole session,
/// so the two inside the boundary are two of the five), originals stored, handle in the text.
/// Protected and other tools' results stay, nothing after the boundary changes, and the walk and
/// the budget do not run (the walk would have pruned nothing here anyway: its minimum).
#[test]
fn a_cold_cache_clears_old_results_of_compactable_tools_and_keeps_the_most_recent() {
    let original = session();
    let mut conversation = original.clone();
    let store = MemoryStore::new();
    let mut log = DecisionLog::new();
    let settings = PruneSettings::built_in().unwrap();
    let report = run(
        &mut conversation,
        &settings,
        &mut log,
        &store,
        NOW,
        Some(NOW - 61 * MINUTE),
    );

    let micro = report.microcompact.clone().unwrap();
    assert_eq!(micro.previous, PreviousRequest::State);
    assert_eq!((micro.idle_minutes, micro.threshold_minutes), (61, 60));
    assert!(micro.cache_cold);
    // Ten compactable results; the last five (r5, r6, r7, late1, late2) stay.
    assert_eq!(micro.cleared, 5);
    for id in ["r0", "r1", "r2", "r3", "r4"] {
        assert_eq!(reason(&report, id), Reason::Microcompacted, "{id}");
    }
    for id in ["r5", "r6", "r7"] {
        assert_eq!(reason(&report, id), Reason::KeptRecent, "{id}");
    }
    assert_eq!(reason(&report, "s"), Reason::Protected);
    assert_eq!(reason(&report, "m"), Reason::NotCompactable);
    assert_eq!(reason(&report, "late1"), Reason::InsideBoundary);
    assert_eq!(reason(&report, "late2"), Reason::InsideBoundary);
    assert!(report.tokens_freed > 5 * 300, "{}", report.tokens_freed);

    let text = output_text(&conversation.messages[3]);
    assert!(
        text.starts_with("[Old tool result content cleared: Read, "),
        "{text}"
    );
    let handle = text
        .rsplit("condense recall ")
        .next()
        .unwrap()
        .trim_end_matches(']');
    assert_eq!(
        store.get(handle).unwrap(),
        output_text(&original.messages[3]).into_bytes()
    );
    let marker = conversation.messages[3].parts[0]
        .as_tool_result()
        .unwrap()
        .compacted
        .clone()
        .unwrap();
    assert_eq!((marker.phase, marker.at_ms), (Phase::Microcompact, NOW));
    // Only the cleared outputs changed.
    for (index, (before, after)) in original
        .messages
        .iter()
        .zip(&conversation.messages)
        .enumerate()
    {
        if ![3, 5, 7, 9, 11].contains(&index) {
            assert_eq!(before, after, "message {index}");
        }
    }
    assert_eq!(conversation.validate(), original.validate());
}

/// An hour exactly is still warm; so is no known previous request (no report at all), and a
/// rule switched off says nothing either. Then the walk runs as it always does.
#[test]
fn a_warm_cache_an_unknown_gap_and_a_disabled_rule_clear_nothing() {
    let store = MemoryStore::new();
    let settings = {
        let mut s = PruneSettings::built_in().unwrap();
        s.rules.protect_tokens = 0;
        s.rules.minimum_tokens = 0;
        s
    };
    let mut warm = session();
    let report = run(
        &mut warm,
        &settings,
        &mut DecisionLog::new(),
        &store,
        NOW,
        Some(NOW - 60 * MINUTE),
    );
    let micro = report.microcompact.clone().unwrap();
    assert!(!micro.cache_cold && micro.cleared == 0);
    assert_eq!(reason(&report, "r0"), Reason::Pruned, "the walk ran");
    assert_eq!(reason(&report, "m"), Reason::Pruned);

    let mut unknown = session();
    let report = run(
        &mut unknown,
        &settings,
        &mut DecisionLog::new(),
        &store,
        NOW,
        None,
    );
    assert_eq!(report.microcompact, None);

    let mut off = settings.clone();
    off.microcompact.enabled = false;
    let mut disabled = session();
    let report = run(
        &mut disabled,
        &off,
        &mut DecisionLog::new(),
        &store,
        NOW,
        Some(0),
    );
    assert_eq!(report.microcompact, None);
    assert_eq!(reason(&report, "r0"), Reason::Pruned);
}

/// Claude Code timestamps every line: the last assistant message's time is the previous
/// request's, and it wins over the state's.
#[test]
fn the_last_assistant_timestamp_is_the_previous_request_where_the_format_has_one() {
    let mut conversation = session();
    let stamp = |message: &mut Message, at: &str| {
        message.wire = vec![WireRecord {
            fields: serde_json::from_value(serde_json::json!({"timestamp": at})).unwrap(),
            parts: message.parts.len(),
            shape: condense_core::ContentShape::Blocks,
        }];
    };
    let last_call = conversation
        .messages
        .iter()
        .rposition(|message| message.role == Role::Assistant)
        .unwrap();
    stamp(
        &mut conversation.messages[last_call],
        "2025-11-21T04:00:00.000Z",
    );
    let at = condense_core::time::parse_rfc3339("2025-11-21T04:00:00.000Z").unwrap();
    // The state says the cache is warm; the conversation says two hours passed.
    let report = run(
        &mut conversation,
        &PruneSettings::built_in().unwrap(),
        &mut DecisionLog::new(),
        &MemoryStore::new(),
        at + 120 * MINUTE,
        Some(at + 119 * MINUTE),
    );
    let micro = report.microcompact.unwrap();
    assert_eq!(micro.previous, PreviousRequest::LastAssistantMessage);
    assert_eq!(micro.idle_minutes, 120);
    assert_eq!(micro.cleared, 5);
}

/// Decided once, repeated byte for byte on every later request, cold or warm; a cleared
/// placeholder read back from a file without its marker is never cleared again; `keep_recent =
/// 0` still keeps the most recent result (Claude Code's floor).
#[test]
fn cleared_results_are_frozen_and_never_cleared_twice() {
    let store = MemoryStore::new();
    let settings = PruneSettings::built_in().unwrap();
    let mut log = DecisionLog::new();
    let mut first = session();
    run(
        &mut first,
        &settings,
        &mut log,
        &store,
        NOW,
        Some(NOW - 90 * MINUTE),
    );
    assert!(matches!(
        log.get("r0"),
        Some(Decision::Replaced { marker, .. }) if marker.phase == Phase::Microcompact
    ));

    // The next request, a minute later (warm): the same bytes, longer conversation.
    let mut next = session();
    next.messages.push(assistant("done"));
    let report = run(
        &mut next,
        &settings,
        &mut log.clone(),
        &store,
        NOW + MINUTE,
        Some(NOW),
    );
    assert_eq!(reason(&report, "r0"), Reason::Frozen);
    assert_eq!(
        &next.messages[..first.messages.len()],
        &first.messages[..],
        "the prefix is byte-identical"
    );

    // The file written and read back: markers gone, no log. Cold again: nothing new is cleared.
    let mut reread = first.clone();
    for message in &mut reread.messages {
        for part in &mut message.parts {
            if let condense_core::Part::ToolResult(result) = part {
                result.compacted = None;
            }
        }
    }
    let report = run(
        &mut reread,
        &settings,
        &mut DecisionLog::new(),
        &store,
        NOW + 200 * MINUTE,
        Some(NOW),
    );
    assert_eq!(report.microcompact.as_ref().unwrap().cleared, 0);
    assert_eq!(reason(&report, "r0"), Reason::AlreadyReplaced);

    let keep_none = {
        let mut s = PruneSettings::built_in().unwrap();
        s.rules.skip_user_turns = 0;
        s.microcompact.keep_recent = 0;
        s
    };
    let mut all = session();
    let report = run(
        &mut all,
        &keep_none,
        &mut DecisionLog::new(),
        &store,
        NOW,
        Some(0),
    );
    assert_eq!(report.microcompact.as_ref().unwrap().cleared, 9);
    assert_eq!(reason(&report, "late2"), Reason::KeptRecent);
}

/// A cold cache with nothing to clear (every compactable result before the boundary is among
/// the most recent kept) is no reason to stop: the walk judges the results as it would on a
/// warm cache. It once did not, because the rule had marked them kept before finding it would
/// clear nothing, and the walk passes over what is marked (found by a Codex log an hour old).
#[test]
fn a_cold_cache_with_nothing_to_clear_leaves_the_results_to_the_walk() {
    let session = || {
        let mut messages = vec![system("agent"), user("task")];
        for index in 0..3 {
            let id = format!("r{index}");
            messages.push(call(&id, "Read"));
            messages.push(result(&id, &words(400, &id)));
        }
        messages.push(user("next"));
        messages.push(call("late", "Read"));
        messages.push(result("late", &words(400, "late")));
        Conversation::new(messages)
    };
    let settings = {
        let mut s = PruneSettings::built_in().unwrap();
        s.rules.skip_user_turns = 1;
        s.rules.protect_tokens = 0;
        s.rules.minimum_tokens = 10;
        s
    };
    let mut outcomes = Vec::new();
    for previous in [NOW - MINUTE, NOW - 61 * MINUTE] {
        let mut conversation = session();
        let report = run(
            &mut conversation,
            &settings,
            &mut DecisionLog::new(),
            &MemoryStore::new(),
            NOW,
            Some(previous),
        );
        let micro = report.microcompact.clone().unwrap();
        assert_eq!(micro.cleared, 0);
        let reasons: Vec<Reason> = ["r0", "r1", "r2", "late"]
            .iter()
            .map(|id| reason(&report, id))
            .collect();
        outcomes.push((micro.cache_cold, reasons, report.tokens_freed));
    }
    let (warm, cold) = (&outcomes[0], &outcomes[1]);
    assert!(!warm.0 && cold.0);
    assert_eq!(cold.1, warm.1);
    assert_eq!(cold.2, warm.2);
    assert_eq!(
        cold.1[..3],
        [Reason::Pruned, Reason::Pruned, Reason::Pruned],
        "{cold:?}"
    );
    assert_eq!(cold.1[3], Reason::InsideBoundary);
}
