//! Each rule of phase 1 on conversations small enough to read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use condense_core::{Conversation, Message, Phase, Role};
use condense_pruner::{
    Decision, DecisionLog, FixedClock, MemoryStore, PruneRequest, PruneSettings, Pruner, Reason,
    Store, StoreError,
};
use condense_tokenizer::{Tiktoken, TokenCounter};

const NOW: u64 = 1_763_700_000_000;

fn prune(
    conversation: &mut Conversation,
    settings: &PruneSettings,
    log: &mut DecisionLog,
    store: &dyn Store,
) -> condense_pruner::PruneReport {
    pruner(settings, &Tiktoken::default(), store)
        .prune(conversation, log, PruneRequest::default())
        .unwrap()
}

/// A pruner at [`NOW`].
fn pruner<'a>(
    settings: &'a PruneSettings,
    counter: &'a Tiktoken,
    store: &'a dyn Store,
) -> Pruner<'a> {
    Pruner {
        settings,
        counter,
        store,
        clock: &FixedClock(NOW),
    }
}

fn t9() -> PruneSettings {
    let mut s = PruneSettings::built_in().unwrap();
    s.rules.protect_tokens = 0;
    s.rules.minimum_tokens = 0;
    s
}

/// The per-turn budget alone: no skip boundary (it never applies after one) and a protect window
/// nothing reaches.
fn budget_only() -> PruneSettings {
    let mut s = PruneSettings::built_in().unwrap();
    s.rules.skip_user_turns = 0;
    s.rules.protect_tokens = 10_000_000;
    s
}

/// The skip boundary is a promise: the per-turn budget never cuts an output after it, however
/// large the turn, except an output that alone is larger than the context window (it could never
/// be sent), which becomes a preview.
#[test]
fn after_the_boundary_only_an_output_larger_than_the_window_is_cut() {
    let big = "x".repeat(100) + "\n";
    let fresh = || {
        Conversation::new(vec![
            user("go"),
            Message::new(
                Role::Assistant,
                vec![call_part("a", "bash"), call_part("b", "bash")],
            ),
            result("a", &big.repeat(1500)), // 151,500 chars
            result("b", &big.repeat(1000)), // 101,000 chars: the turn is over the 200,000 budget
        ])
    };
    let counter = Tiktoken::default();
    let run = |conversation: &mut Conversation, window: Option<usize>| {
        let pruner = Pruner {
            settings: &PruneSettings::built_in().unwrap(),
            counter: &counter,
            store: &MemoryStore::new(),
            clock: &FixedClock(NOW),
        };
        pruner
            .prune(
                conversation,
                &mut DecisionLog::new(),
                PruneRequest::window(window),
            )
            .unwrap()
    };
    let mut untouched = fresh();
    let report = run(&mut untouched, None);
    assert_eq!(report.boundary, 0, "one user turn: everything is inside");
    assert!(
        report
            .outputs
            .iter()
            .all(|o| o.reason == Reason::InsideBoundary)
    );
    assert_eq!(untouched, fresh(), "nothing after the boundary changed");

    let a_tokens = report.outputs[0].tokens_before;
    let b_tokens = report.outputs[1].tokens_before;
    assert!(a_tokens > b_tokens);
    let mut cut = fresh();
    let report = run(&mut cut, Some((a_tokens + b_tokens) * 4));
    assert!(
        report
            .outputs
            .iter()
            .all(|o| o.reason == Reason::InsideBoundary),
        "both fit the window"
    );
    let mut cut = fresh();
    let report = run(&mut cut, Some(a_tokens - 1));
    let reasons: Vec<&Reason> = report.outputs.iter().map(|o| &o.reason).collect();
    assert_eq!(
        reasons,
        vec![&Reason::OverTurnBudget, &Reason::InsideBoundary]
    );
    assert!(output_text(&cut.messages[2]).contains("cut to its first"));
    assert_eq!(cut.messages[3], fresh().messages[3]);
}

/// The seed's worked example: ten messages, user turns at 3 and 7, so the boundary is 3; only the
/// `read_file` output at 2 is pruned, the `skill` output at 5 and the `edit_file` output at 7 stay.
#[test]
fn the_seed_example_prunes_only_the_read_before_the_boundary() {
    let mut edit_result = Message::new(Role::User, vec![result_part("c3", "edited src/lib.rs")]);
    edit_result
        .parts
        .push(condense_core::Part::text("looks good, go on"));
    let mut conversation = Conversation::new(vec![
        system("You are a coding agent."),
        call("c1", "read_file"),
        result("c1", &words(300, "contents of src/main.rs")),
        user("now use the skill"),
        call("c2", "skill"),
        result("c2", &words(300, "skill instructions")),
        call("c3", "edit_file"),
        edit_result,
        call("c4", "bash"),
        result("c4", "ok"),
    ]);
    assert_eq!(conversation.user_turns(), vec![3, 7]);
    let original = conversation.clone();
    let store = MemoryStore::new();
    let report = prune(&mut conversation, &t9(), &mut DecisionLog::new(), &store);

    assert_eq!(report.boundary, 3);
    let reasons: Vec<(usize, &str, Reason)> = report
        .outputs
        .iter()
        .map(|o| (o.message, o.tool.as_str(), o.reason.clone()))
        .collect();
    assert_eq!(
        reasons,
        vec![
            (2, "read_file", Reason::Pruned),
            (5, "skill", Reason::Protected),
            (7, "edit_file", Reason::InsideBoundary),
            (9, "bash", Reason::InsideBoundary),
        ]
    );
    for index in 3..10 {
        assert_eq!(
            conversation.messages[index], original.messages[index],
            "message {index}"
        );
    }
    let placeholder = output_text(&conversation.messages[2]);
    assert!(
        placeholder.starts_with("[condense: the output of read_file was pruned ("),
        "{placeholder}"
    );
    let condense_core::Part::ToolResult(result) = &conversation.messages[2].parts[0] else {
        panic!()
    };
    let marker = result.compacted.as_ref().unwrap();
    assert_eq!((marker.at_ms, marker.phase), (NOW, Phase::Prune));
    assert_eq!(marker.original_tokens, report.outputs[0].tokens_before);
    assert!(placeholder.contains(&marker.handle));
    assert_eq!(
        store.get(&marker.handle).unwrap(),
        output_text(&original.messages[2]).as_bytes()
    );
}

fn long_session(outputs: usize, tokens_each: usize) -> Conversation {
    let mut messages = vec![system("agent"), user("task")];
    for index in 0..outputs {
        let id = format!("c{index}");
        messages.push(call(&id, "read_file"));
        messages.push(result(&id, &words(tokens_each, &id)));
    }
    messages.push(user("second"));
    messages.push(assistant("done"));
    messages.push(user("third"));
    Conversation::new(messages)
}

#[test]
fn the_newest_outputs_up_to_the_window_stay_and_the_older_ones_go() {
    let mut conversation = long_session(30, 3_000);
    let report = prune(
        &mut conversation,
        &PruneSettings::built_in().unwrap(),
        &mut DecisionLog::new(),
        &MemoryStore::new(),
    );
    let kept: Vec<usize> = report
        .outputs
        .iter()
        .filter(|o| o.reason == Reason::InsideWindow)
        .map(|o| o.message)
        .collect();
    let pruned = report
        .outputs
        .iter()
        .filter(|o| o.reason == Reason::Pruned)
        .count();
    let window: usize = report
        .outputs
        .iter()
        .filter(|o| o.reason == Reason::InsideWindow)
        .map(|o| o.tokens_before)
        .sum();
    assert!(
        window <= 40_000 && window + report.outputs[0].tokens_before > 40_000,
        "window {window}"
    );
    assert_eq!(kept.len() + pruned, 30);
    assert!(kept.iter().all(|&m| {
        m > report
            .outputs
            .iter()
            .filter(|o| o.reason == Reason::Pruned)
            .map(|o| o.message)
            .max()
            .unwrap()
    }));
    assert!(report.batch_applied && report.tokens_freed > 20_000);
}

#[test]
fn a_batch_that_frees_too_little_is_not_applied() {
    let mut conversation = long_session(16, 3_000);
    let before = conversation.clone();
    let report = prune(
        &mut conversation,
        &PruneSettings::built_in().unwrap(),
        &mut DecisionLog::new(),
        &MemoryStore::new(),
    );
    assert!(!report.batch_applied);
    assert!(report.reclaimable_tokens > 0 && report.reclaimable_tokens <= 20_000);
    assert!(
        report
            .outputs
            .iter()
            .any(|o| o.reason == Reason::BelowMinimum)
    );
    assert_eq!(conversation, before);
}

#[test]
fn the_walk_stops_at_an_earlier_summary_and_at_a_pruned_output() {
    let mut messages = vec![
        system("agent"),
        call("old", "read_file"),
        result("old", &words(500, "old")),
        Message::text(
            Role::System,
            "<prior-conversation-summary>earlier work</prior-conversation-summary>",
        ),
    ];
    messages.extend(long_session(4, 500).messages.into_iter().skip(1));
    let mut conversation = Conversation::new(messages);
    let mut log = DecisionLog::new();
    let report = prune(&mut conversation, &t9(), &mut log, &MemoryStore::new());
    assert_eq!(report.walk_stopped_at, Some(3));
    assert_eq!(report.outputs[0].reason, Reason::BehindEarlierCompaction);
    assert_eq!(
        report
            .outputs
            .iter()
            .filter(|o| o.reason == Reason::Pruned)
            .count(),
        4
    );

    // Second call: the walk stops at the newest pruned output and looks no further.
    let again = prune(&mut conversation, &t9(), &mut log, &MemoryStore::new());
    let newest_pruned = report
        .outputs
        .iter()
        .filter(|o| o.reason == Reason::Pruned)
        .map(|o| o.message)
        .max();
    assert_eq!(again.walk_stopped_at, newest_pruned);
    assert_eq!(again.tokens_freed, 0);
}

#[test]
fn the_largest_fresh_outputs_of_a_turn_over_budget_become_previews() {
    let big = "x".repeat(100) + "\n";
    let mut conversation = Conversation::new(vec![
        user("go"),
        Message::new(
            Role::Assistant,
            vec![
                call_part("a", "bash"),
                call_part("b", "bash"),
                call_part("c", "bash"),
            ],
        ),
        result("a", &big.repeat(1500)), // 151,500 chars
        result("b", &big.repeat(1000)), // 101,000 chars
        result("c", &big.repeat(600)),  //  60,600 chars
    ]);
    let store = MemoryStore::new();
    let mut log = DecisionLog::new();
    let report = prune(&mut conversation, &budget_only(), &mut log, &store);
    let reasons: Vec<&Reason> = report.outputs.iter().map(|o| &o.reason).collect();
    assert_eq!(
        reasons,
        vec![
            &Reason::OverTurnBudget,
            &Reason::InsideWindow,
            &Reason::InsideWindow
        ]
    );
    let preview = output_text(&conversation.messages[2]);
    assert!(
        preview.starts_with(&big.repeat(20)),
        "the preview keeps whole lines"
    );
    assert_eq!(
        preview.find("\n[condense: output of bash cut to its first 2,020 of 151,500 characters"),
        Some(2020)
    );
    assert!(matches!(log.get("b"), Some(Decision::Kept)));
}

#[test]
fn a_kept_output_is_never_cut_by_the_budget_later_and_a_replacement_is_repeated_byte_for_byte() {
    let big = "y".repeat(99) + "\n";
    let mut first = Conversation::new(vec![
        user("go"),
        Message::new(
            Role::Assistant,
            vec![call_part("a", "bash"), call_part("b", "bash")],
        ),
        result("a", &big.repeat(1500)),
        result("b", &big.repeat(800)),
    ]);
    let originals = first.clone();
    let mut log = DecisionLog::new();
    let store = MemoryStore::new();
    prune(&mut first, &budget_only(), &mut log, &store);
    assert!(matches!(log.get("b"), Some(Decision::Kept)));

    // The harness sends the originals again, with one more result in the same turn. Without the
    // log the turn (150K + 80K + 150K) would be over budget and `b` could be cut; with it only the
    // new result is fresh, and `a` gets exactly the same replacement as before.
    let mut second = originals.clone();
    second.messages[1].parts.push(call_part("c", "bash"));
    second.messages.push(result("c", &big.repeat(1500)));
    let saved = DecisionLog::from_json(&log.to_json()).unwrap();
    let mut log2 = saved.clone();
    let report = prune(&mut second, &budget_only(), &mut log2, &store);
    assert_eq!(report.outputs[0].reason, Reason::Frozen);
    assert_eq!(
        second.messages[2], first.messages[2],
        "byte-identical replacement, same marker"
    );
    assert_eq!(
        output_text(&second.messages[3]),
        big.repeat(800),
        "kept stays kept"
    );
    assert_eq!(
        report.outputs[2].reason,
        Reason::InsideWindow,
        "150K fresh alone is under budget"
    );
}

#[test]
fn an_output_identical_to_a_newer_one_points_to_it() {
    let listing = words(400, "ls -R output");
    let mut conversation = Conversation::new(vec![
        user("look around"),
        call("first", "bash"),
        result("first", &listing),
        call("other", "bash"),
        result("other", &words(400, "something else")),
        call("second", "bash"),
        result("second", &listing),
        user("thanks"),
        assistant("ok"),
        user("again"),
    ]);
    let settings = {
        let mut s = PruneSettings::built_in().unwrap();
        s.rules.protect_tokens = 100_000;
        s.rules.minimum_tokens = 0;
        s
    };
    let report = prune(
        &mut conversation,
        &settings,
        &mut DecisionLog::new(),
        &MemoryStore::new(),
    );
    assert_eq!(
        report.outputs[0].reason,
        Reason::Duplicate {
            newer: "second".into()
        }
    );
    assert_eq!(report.outputs[1].reason, Reason::InsideWindow);
    assert_eq!(report.outputs[2].reason, Reason::InsideWindow);
    assert!(
        output_text(&conversation.messages[2])
            .starts_with("[condense: same output as the later bash call second (")
    );
    assert_eq!(output_text(&conversation.messages[6]), listing);
}

/// An agent's editor viewing `view` under call `first`, making the calls of `between`, then
/// viewing it again under call `again`: the request that brings the second view.
fn viewed_again(first: &str, between: &[Message], again: &str, view: &str) -> Conversation {
    let mut messages = vec![
        user("fix the parser"),
        call(first, "str_replace_editor"),
        result(first, view),
    ];
    messages.extend_from_slice(between);
    messages.extend([call(again, "str_replace_editor"), result(again, view)]);
    Conversation::new(messages)
}

/// An agent viewing the same file again, a short call between: the fresh view stays where the
/// agent asked for it, whole, and the older one, inside the skip boundary, points to it, as
/// the request saves more than the provider reads again after it. The pointer is frozen: the
/// next request carries it byte for byte, with the original stored.
#[test]
fn an_output_identical_to_a_fresh_result_points_to_it_inside_the_boundary() {
    let view = words(400, "cat -n parser.c");
    let grep = [call("grep", "bash"), result("grep", "29:DECL(pattern);")];
    let original = viewed_again("first", &grep, "again", &view);
    let mut conversation = original.clone();
    let settings = PruneSettings::built_in().unwrap();
    let store = MemoryStore::new();
    let counter = Tiktoken::default();
    let request = PruneRequest {
        cache_rewrite_cost: 11.5,
        ..PruneRequest::window(Some(32_000))
    };
    let mut log = DecisionLog::new();
    let report = pruner(&settings, &counter, &store)
        .prune(&mut conversation, &mut log, request)
        .unwrap();
    assert_eq!(report.boundary, 0, "one user turn: everything is inside");
    assert_eq!(
        reason_of(&report, "first"),
        Reason::Duplicate {
            newer: "again".into()
        }
    );
    assert_eq!(reason_of(&report, "grep"), Reason::InsideBoundary);
    let pointer = output_text(&conversation.messages[2]);
    assert!(
        pointer.starts_with("[condense: same output as the later str_replace_editor call again ("),
        "{pointer}"
    );
    assert_eq!(output_text(&conversation.messages[6]), view);
    let handle = &conversation.messages[2].parts[0]
        .as_tool_result()
        .unwrap()
        .compacted
        .as_ref()
        .unwrap()
        .handle;
    assert_eq!(store.get(handle).unwrap(), view.as_bytes());

    // The next request, from the harness as it sent the first (the older view whole): the
    // same pointer, byte for byte, where the fresh view is no longer fresh.
    let mut next = original;
    next.messages
        .extend([call("edit", "bash"), result("edit", "done")]);
    let report = pruner(&settings, &counter, &store)
        .prune(&mut next, &mut log, request)
        .unwrap();
    assert_eq!(reason_of(&report, "first"), Reason::Frozen);
    assert_eq!(output_text(&next.messages[2]), pointer);
    assert_eq!(output_text(&next.messages[6]), view);
}

/// The same view again after a long output the last request sent: replacing the older view
/// would have the provider read that output again uncached, which costs more than the view
/// saves, so both stay whole where a cache is kept; offline, with no cache to rewrite, the
/// older one points to the fresh one. A protected tool's repeat, and a repeat of an output
/// that is not fresh, stay whole either way.
#[test]
fn a_duplicate_of_a_fresh_result_goes_only_where_it_pays() {
    let view = words(400, "cat -n parser.c");
    let between = [
        call("log", "bash"),
        result("log", &words(2_000, "make output")),
        call("skill", "skill"),
        result("skill", &view),
    ];
    let conversation = viewed_again("first", &between, "again", &view);
    let mut settings = PruneSettings::built_in().unwrap();
    settings.rules.protected_tools.insert("skill".into());
    let counter = Tiktoken::default();
    let run = |settings: &PruneSettings, rewrite: f64| {
        let mut conversation = conversation.clone();
        let request = PruneRequest {
            cache_rewrite_cost: rewrite,
            ..PruneRequest::window(Some(32_000))
        };
        let report = pruner(settings, &counter, &MemoryStore::new())
            .prune(&mut conversation, &mut DecisionLog::new(), request)
            .unwrap();
        (report, conversation)
    };
    let (warm, unchanged) = run(&settings, 3.0);
    assert_eq!(reason_of(&warm, "first"), Reason::InsideBoundary);
    assert_eq!(unchanged, conversation);
    let (offline, pruned) = run(&settings, 0.0);
    assert_eq!(
        reason_of(&offline, "first"),
        Reason::Duplicate {
            newer: "again".into()
        }
    );
    assert_eq!(reason_of(&offline, "skill"), Reason::Protected);
    assert_eq!(output_text(&pruned.messages[6]), view);
    assert_eq!(output_text(&pruned.messages[8]), view);

    // Off, nothing inside the boundary is touched.
    settings.rules.duplicates_of_fresh = false;
    let (off, untouched) = run(&settings, 0.0);
    assert_eq!(reason_of(&off, "first"), Reason::InsideBoundary);
    assert_eq!(untouched, conversation);
}

/// A harness that reuses a call id (SWE-agent does) and gets the same output under it again:
/// the older copy stays whole, as a duplicate of the fresh one or, older than the boundary, of
/// a newer one. Its decision, logged by that id, would be repeated on the next request on every
/// identical output under the id, the newer one too, and the text would be sent nowhere.
#[test]
fn a_duplicate_under_a_reused_call_id_stays_whole() {
    let view = words(400, "cat -n parser.c");
    let grep = [call("grep", "bash"), result("grep", "29:DECL(pattern);")];
    let conversation = viewed_again("view", &grep, "view", &view);
    let settings = PruneSettings::built_in().unwrap();
    let (counter, store) = (Tiktoken::default(), MemoryStore::new());
    let request = PruneRequest {
        cache_rewrite_cost: 11.5,
        ..PruneRequest::window(Some(32_000))
    };
    let mut log = DecisionLog::new();
    for _ in 0..2 {
        let mut sent = conversation.clone();
        pruner(&settings, &counter, &store)
            .prune(&mut sent, &mut log, request)
            .unwrap();
        assert_eq!(sent, conversation);
    }

    // The walk's duplicates, before the boundary (two user turns after them).
    let mut walked = conversation.clone();
    walked
        .messages
        .extend([user("and now?"), assistant("ok"), user("again")]);
    let walk = {
        let mut s = PruneSettings::built_in().unwrap();
        s.rules.minimum_tokens = 0;
        s.rules.duplicates_of_fresh = false;
        s
    };
    let mut log = DecisionLog::new();
    for _ in 0..2 {
        let mut sent = walked.clone();
        let report = pruner(&walk, &counter, &store)
            .prune(&mut sent, &mut log, PruneRequest::default())
            .unwrap();
        assert!(report.boundary > 6);
        assert_eq!(sent, walked);
    }
}

struct BrokenStore;

impl Store for BrokenStore {
    fn put(&self, handle: &str, _: &[u8]) -> Result<(), StoreError> {
        Err(StoreError::Write {
            handle: handle.into(),
            path: "/read-only/store".into(),
            source: std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "read-only file system",
            ),
        })
    }

    fn get(&self, handle: &str) -> Result<Vec<u8>, StoreError> {
        Err(StoreError::NotFound(handle.into()))
    }
}

#[test]
fn a_store_that_cannot_be_written_leaves_everything_unchanged() {
    let mut conversation = long_session(30, 3_000);
    let before = conversation.clone();
    let mut log = DecisionLog::new();
    let counter = Tiktoken::default();
    let settings = PruneSettings::built_in().unwrap();
    let pruner = Pruner {
        settings: &settings,
        counter: &counter,
        store: &BrokenStore,
        clock: &FixedClock(NOW),
    };
    let error = pruner
        .prune(&mut conversation, &mut log, PruneRequest::default())
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("could not store the original of tool output `c"),
        "{error}"
    );
    assert!(error.to_string().contains("so nothing was pruned"));
    assert_eq!(conversation, before);
    assert!(log.is_empty());
}

#[test]
fn an_empty_conversation_and_an_orphan_result_are_handled() {
    let mut empty = Conversation::default();
    let report = prune(
        &mut empty,
        &t9(),
        &mut DecisionLog::new(),
        &MemoryStore::new(),
    );
    assert!(report.outputs.is_empty() && report.tokens_freed == 0);

    let mut orphan = Conversation::new(vec![
        user("a"),
        result("ghost", &words(300, "no call for this")),
        user("b"),
        user("c"),
    ]);
    let report = prune(
        &mut orphan,
        &t9(),
        &mut DecisionLog::new(),
        &MemoryStore::new(),
    );
    assert_eq!(report.outputs[0].tool, "(unknown tool)");
    assert_eq!(report.outputs[0].reason, Reason::Pruned);
    assert_eq!(
        orphan.validate().len(),
        1,
        "still the one finding it had: no new orphan"
    );
}

#[test]
fn protected_tools_are_extended_by_configuration() {
    let mut conversation = long_session(30, 3_000);
    let mut settings = PruneSettings::built_in().unwrap();
    settings.rules.protected_tools.insert("read_file".into());
    let report = prune(
        &mut conversation,
        &settings,
        &mut DecisionLog::new(),
        &MemoryStore::new(),
    );
    assert!(report.outputs.iter().all(|o| o.reason == Reason::Protected));
}

/// A `trim_tool_result` call with this input, answered by the harness with "ok".
fn trim(id: &str, input: serde_json::Value) -> Vec<Message> {
    vec![
        Message::new(
            Role::Assistant,
            vec![condense_core::testing::tool_call(
                id,
                "trim_tool_result",
                input,
            )],
        ),
        result(id, "ok"),
    ]
}

fn trimmed_session(input: serde_json::Value) -> Conversation {
    let mut messages = vec![
        user("look at both files"),
        call("a", "read_file"),
        result("a", &words(300, "contents of a")),
        call("s", "skill"),
        result("s", &words(300, "skill text")),
        call("b", "read_file"),
        result("b", &words(300, "contents of b")),
    ];
    messages.extend(trim("t", input));
    Conversation::new(messages)
}

fn trims(settings: &PruneSettings, conversation: &mut Conversation) -> (PruneReport, DecisionLog) {
    let mut log = DecisionLog::new();
    let report = prune(conversation, settings, &mut log, &MemoryStore::new());
    (report, log)
}

use condense_pruner::{PruneReport, TrimOutcome, TrimRefusal};

#[test]
fn the_agent_trims_the_most_recent_result_with_its_own_summary() {
    let original = trimmed_session(serde_json::json!({"summary": "b defines parse() at line 3"}));
    let mut conversation = original.clone();
    let store = MemoryStore::new();
    let mut log = DecisionLog::new();
    let report = prune(
        &mut conversation,
        &PruneSettings::built_in().unwrap(),
        &mut log,
        &store,
    );
    assert_eq!(report.trims.len(), 1);
    assert_eq!(report.trims[0].target.as_deref(), Some("b"));
    assert_eq!(report.trims[0].outcome, TrimOutcome::Trimmed);
    let text = output_text(&conversation.messages[6]);
    assert!(
        text.starts_with(
            "[trimmed by the agent: b defines parse() at line 3 — original: condense recall "
        ),
        "{text}"
    );
    let handle = text.trim_end_matches(']').rsplit(' ').next().unwrap();
    assert_eq!(
        store.get(handle).unwrap(),
        output_text(&original.messages[6]).into_bytes()
    );
    assert!(
        matches!(log.get("b"), Some(Decision::Replaced { marker, .. }) if marker.phase == Phase::AgentTrim)
    );
    // Everything else is as it was: the other outputs, the trim call and its own result.
    for index in [0, 1, 2, 3, 4, 5, 7, 8] {
        assert_eq!(
            conversation.messages[index], original.messages[index],
            "message {index}"
        );
    }
    assert!(conversation.validate().is_empty());

    // The next request replays it byte for byte.
    let mut again = original.clone();
    let report = prune(
        &mut again,
        &PruneSettings::built_in().unwrap(),
        &mut log,
        &store,
    );
    assert_eq!(report.trims[0].outcome, TrimOutcome::Frozen);
    assert_eq!(again.messages[6], conversation.messages[6]);
}

#[test]
fn a_trim_that_cannot_be_done_changes_nothing_and_says_why() {
    let cases = [
        (
            serde_json::json!({"summary": "a was long"}),
            Some("a"),
            TrimRefusal::NotMostRecent,
        ),
        (
            serde_json::json!({"summary": "a", "tool_call_id": "nope"}),
            Some("nope"),
            TrimRefusal::UnknownTarget,
        ),
        (
            serde_json::json!({"summary": "skill", "tool_call_id": "s"}),
            Some("s"),
            TrimRefusal::Protected,
        ),
        (
            serde_json::json!({"tool_call_id": "b"}),
            Some("b"),
            TrimRefusal::NoSummary,
        ),
    ];
    for (input, target, reason) in cases {
        let mut input = input;
        if target == Some("a") {
            input["tool_call_id"] = "a".into();
        }
        let original = trimmed_session(input.clone());
        let mut conversation = original.clone();
        let (report, log) = trims(&PruneSettings::built_in().unwrap(), &mut conversation);
        assert_eq!(report.trims[0].target.as_deref(), target, "{input}");
        assert_eq!(
            report.trims[0].outcome,
            TrimOutcome::Refused { reason },
            "{input}"
        );
        assert_eq!(conversation, original, "{input}");
        assert!(log.is_empty(), "{input}");
    }

    // allow_older lifts the one refusal that is a policy.
    let settings = {
        let mut s = PruneSettings::built_in().unwrap();
        s.trim.allow_older = true;
        s
    };
    let mut conversation =
        trimmed_session(serde_json::json!({"summary": "a was long", "tool_call_id": "a"}));
    let (report, _) = trims(&settings, &mut conversation);
    assert_eq!(report.trims[0].outcome, TrimOutcome::Trimmed);
    assert!(
        output_text(&conversation.messages[2]).starts_with("[trimmed by the agent: a was long")
    );

    // A session written back after a trim (its marker gone) is not trimmed twice.
    let written_back = conversation.clone();
    let mut plain = written_back.clone();
    for message in &mut plain.messages {
        for part in &mut message.parts {
            if let condense_core::Part::ToolResult(result) = part {
                result.compacted = None;
            }
        }
    }
    let (report, _) = trims(&settings, &mut plain);
    assert_eq!(
        report.trims[0].outcome,
        TrimOutcome::Refused {
            reason: TrimRefusal::AlreadyReplaced
        }
    );
    assert_eq!(
        output_text(&plain.messages[2]),
        output_text(&written_back.messages[2])
    );
}

/// Settings under which only stale reads are replaced: a protect window nothing outgrows, and
/// no minimum to wait for.
fn only_stale_reads() -> PruneSettings {
    let mut s = PruneSettings::built_in().unwrap();
    s.rules.protect_tokens = 1_000_000;
    s.rules.minimum_tokens = 0;
    s
}

/// Why the report judged the output of call `id` as it did.
fn reason_of(report: &condense_pruner::PruneReport, id: &str) -> Reason {
    report
        .outputs
        .iter()
        .find(|o| o.call_id == id)
        .map(|o| o.reason.clone())
        .unwrap()
}

/// A read is stale once a later call edits the same file (the paths compared absolute, relative
/// ones joined to the session's working directory): it is replaced first, whatever the protect
/// window, with a placeholder naming the call that superseded it. A search naming the file does
/// not make a read stale; nothing after the boundary changes; a protected output never does.
#[test]
fn a_read_superseded_by_a_later_edit_is_replaced_first() {
    let read = |id: &str, path: &str| {
        Message::new(
            Role::Assistant,
            vec![condense_core::testing::tool_call(
                id,
                "Read",
                serde_json::json!({"file_path": path}),
            )],
        )
    };
    let edit = |id: &str, path: &str| {
        Message::new(
            Role::Assistant,
            vec![condense_core::testing::tool_call(
                id,
                "Edit",
                serde_json::json!({"file_path": path, "old_string": "a", "new_string": "b"}),
            )],
        )
    };
    let grep = Message::new(
        Role::Assistant,
        vec![condense_core::testing::tool_call(
            "g",
            "Grep",
            serde_json::json!({"path": "/w/b.rs", "pattern": "x"}),
        )],
    );
    let mut first = user("fix a.rs");
    first.wire = vec![condense_core::WireRecord {
        fields: serde_json::from_value(serde_json::json!({"cwd": "/w"})).unwrap(),
        parts: 1,
        shape: condense_core::ContentShape::String,
    }];
    let mut edit_relative = edit("e", "src/../a.rs");
    edit_relative.wire = first.wire.clone();
    let original = Conversation::new(vec![
        first,
        read("ra", "/w/a.rs"),
        result("ra", &words(300, "a.rs before")),
        read("rb", "/w/b.rs"),
        result("rb", &words(300, "b.rs")),
        grep,
        result("g", "b.rs:1: x"),
        edit_relative,
        result("e", "edited"),
        user("thanks"),
        read("late", "/w/a.rs"),
        result("late", &words(300, "a.rs after")),
        user("and now?"),
    ]);
    let settings = only_stale_reads();
    let mut conversation = original.clone();
    let store = MemoryStore::new();
    let mut log = DecisionLog::new();
    let report = prune(&mut conversation, &settings, &mut log, &store);
    let reason = |id: &str| reason_of(&report, id);
    assert_eq!(
        reason("ra"),
        Reason::Superseded {
            by: "Edit".into(),
            at: 7
        }
    );
    assert_eq!(
        reason("rb"),
        Reason::InsideWindow,
        "a search does not supersede"
    );
    assert_eq!(reason("late"), Reason::InsideBoundary);
    let text = output_text(&conversation.messages[2]);
    assert!(
        text.starts_with("[condense: this Read output is stale: superseded by Edit at message 7 ("),
        "{text}"
    );
    assert!(
        matches!(log.get("ra"), Some(Decision::Replaced { marker, .. }) if marker.phase == Phase::Superseded)
    );
    assert_eq!(conversation.messages[4], original.messages[4]);
    assert_eq!(conversation.messages[11], original.messages[11]);

    let mut off = settings.clone();
    off.rules.supersede_reads = false;
    let mut untouched = original.clone();
    let report = prune(&mut untouched, &off, &mut DecisionLog::new(), &store);
    assert!(
        report
            .outputs
            .iter()
            .all(|o| !matches!(o.reason, Reason::Superseded { .. }))
    );
    assert_eq!(untouched, original);

    let mut protected = settings;
    protected.rules.protected_tools = ["Read".to_owned()].into();
    let mut kept = original.clone();
    prune(&mut kept, &protected, &mut DecisionLog::new(), &store);
    assert_eq!(kept, original, "a protected tool's read is never replaced");
}

/// An edit that failed (Claude Code's "String to replace not found", marked as an error)
/// changed nothing: the read before it still shows the file, and only the edit that went
/// through after it makes it stale.
#[test]
fn an_edit_that_failed_leaves_the_read_before_it_current() {
    let call = |id: &str, tool: &str, input: serde_json::Value| {
        Message::new(
            Role::Assistant,
            vec![condense_core::testing::tool_call(id, tool, input)],
        )
    };
    let edit = serde_json::json!({"file_path": "/w/a.rs", "old_string": "a", "new_string": "b"});
    let mut failed = result(
        "e1",
        "<tool_use_error>String to replace not found in file.</tool_use_error>",
    );
    if let Some(condense_core::Part::ToolResult(output)) = failed.parts.first_mut() {
        output.is_error = Some(true);
    }
    let original = Conversation::new(vec![
        user("fix a.rs"),
        call("ra", "Read", serde_json::json!({"file_path": "/w/a.rs"})),
        result("ra", &words(300, "a.rs before")),
        call("e1", "Edit", edit.clone()),
        failed,
        user("try again"),
        user("and now?"),
    ]);
    let settings = only_stale_reads();
    let store = MemoryStore::new();
    let mut conversation = original.clone();
    let report = prune(
        &mut conversation,
        &settings,
        &mut DecisionLog::new(),
        &store,
    );
    assert_eq!(reason_of(&report, "ra"), Reason::InsideWindow);
    assert_eq!(conversation, original);

    let mut went_through = original.messages.clone();
    went_through.splice(
        5..5,
        [
            call("e2", "Edit", edit),
            result("e2", "The file /w/a.rs has been updated."),
        ],
    );
    let mut conversation = Conversation::new(went_through);
    let report = prune(
        &mut conversation,
        &settings,
        &mut DecisionLog::new(),
        &store,
    );
    assert_eq!(
        reason_of(&report, "ra"),
        Reason::Superseded {
            by: "Edit".into(),
            at: 5
        }
    );
}

/// Codex's way of reading and editing: a `shell` call whose script `cat`s a file, then an
/// `apply_patch` custom call that updates it, in a Responses body. The read is stale and goes
/// first, its placeholder naming the patch.
#[test]
fn a_codex_read_superseded_by_apply_patch_is_replaced_first() {
    let body = serde_json::json!({
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix src/lib.rs"}]},
            {"type": "function_call", "call_id": "read", "name": "shell",
             "arguments": "{\"command\":[\"bash\",\"-lc\",\"cat src/lib.rs\"],\"workdir\":\"/w\"}"},
            {"type": "function_call_output", "call_id": "read", "output": words(300, "lib.rs before")},
            {"type": "custom_tool_call", "call_id": "patch", "name": "apply_patch",
             "input": "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** End Patch"},
            {"type": "custom_tool_call_output", "call_id": "patch", "output": "Success."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and now?"}]}
        ]
    });
    let mut conversation =
        condense_formats::read_json(condense_formats::Format::Responses, body).unwrap();
    let report = prune(
        &mut conversation,
        &only_stale_reads(),
        &mut DecisionLog::new(),
        &MemoryStore::new(),
    );
    assert_eq!(
        reason_of(&report, "read"),
        Reason::Superseded {
            by: "apply_patch".into(),
            at: 4
        }
    );
    let text = output_text(&conversation.messages[3]);
    assert!(
        text.contains("superseded by apply_patch at message 4"),
        "{text}"
    );
}

/// Codex names its working directory in the environment context it sends first, and a shell
/// call may run in a `workdir` of its own: a read by absolute path is superseded by a patch of
/// the same file by relative path, and a read in a subdirectory by an edit of it from the
/// session's directory, while a file of the same name elsewhere is not.
#[test]
fn a_codex_read_is_matched_in_the_directory_codex_recorded() {
    let call = |id: &str, arguments: serde_json::Value| {
        serde_json::json!({"type": "function_call", "call_id": id, "name": "exec_command",
            "arguments": arguments.to_string()})
    };
    let output = |id: &str, text: String| serde_json::json!({"type": "function_call_output", "call_id": id, "output": text});
    let user_text = |text: &str| {
        serde_json::json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]})
    };
    let body = serde_json::json!({
        "model": "gpt-5-codex",
        "input": [
            user_text("<environment_context>\n  <cwd>/w</cwd>\n  <shell>bash</shell>\n</environment_context>"),
            user_text("fix the two files"),
            call("absolute", serde_json::json!({"cmd": "cat /w/src/lib.rs"})),
            output("absolute", words(300, "lib.rs before")),
            call("in-sub", serde_json::json!({"cmd": "cat lib.rs", "workdir": "sub"})),
            output("in-sub", words(300, "sub/lib.rs before")),
            call("top", serde_json::json!({"cmd": "cat lib.rs"})),
            output("top", words(300, "lib.rs at the top")),
            {"type": "custom_tool_call", "call_id": "patch", "name": "apply_patch",
             "input": "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** End Patch"},
            {"type": "custom_tool_call_output", "call_id": "patch", "output": "Success."},
            call("sed", serde_json::json!({"cmd": "sed -i s/a/b/ sub/lib.rs"})),
            output("sed", String::new()),
            user_text("thanks"),
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
            user_text("and now?")
        ]
    });
    let mut conversation =
        condense_formats::read_json(condense_formats::Format::Responses, body).unwrap();
    let report = prune(
        &mut conversation,
        &only_stale_reads(),
        &mut DecisionLog::new(),
        &MemoryStore::new(),
    );
    let reason = |id: &str| reason_of(&report, id);
    assert_eq!(
        reason("absolute"),
        Reason::Superseded {
            by: "apply_patch".into(),
            at: 8
        }
    );
    assert_eq!(
        reason("in-sub"),
        Reason::Superseded {
            by: "exec_command".into(),
            at: 10
        }
    );
    assert_eq!(reason("top"), Reason::InsideWindow);
}

/// SWE-agent reuses a call id for later calls. A decision is for the output it was made on (the
/// original its marker names): another output under the same id is judged afresh, not given
/// that output's replacement, which would change the prefix the provider cached.
#[test]
fn a_decision_is_repeated_only_on_the_output_it_was_made_for_when_a_call_id_is_reused() {
    let big = "z".repeat(99) + "\n";
    let originals = Conversation::new(vec![
        user("go"),
        call("a", "bash"),
        result("a", "first output, short"),
        call("a", "bash"),
        result("a", &big.repeat(200)),
    ]);
    let (settings, counter, store) = (budget_only(), Tiktoken::default(), MemoryStore::new());
    let pruner = pruner(&settings, &counter, &store);
    let mut first = originals.clone();
    let mut log = DecisionLog::new();
    let cut = pruner
        .preview_oversized(&mut first, 4..5, 100, &mut log)
        .unwrap();
    assert_eq!(cut, 1);
    assert_eq!(output_text(&first.messages[2]), "first output, short");

    let mut again = originals.clone();
    pruner
        .prune(&mut again, &mut log, PruneRequest::default())
        .unwrap();
    assert_eq!(
        output_text(&again.messages[2]),
        "first output, short",
        "the earlier output under the same id stays as it was"
    );
    assert_eq!(again.messages[4], first.messages[4], "the decision repeats");
}

/// A preview made for a share of a tail's budget stays within about that share, its note
/// included (the cut is sized by the output's own bytes a token, so a start denser than the
/// whole goes a little over), and the pruner's own count of it (what a cut plans with) is the
/// preview's count.
#[test]
fn a_preview_within_a_limit_stays_within_it_and_is_counted_as_made() {
    let (settings, counter, store) = (budget_only(), Tiktoken::default(), MemoryStore::new());
    let pruner = pruner(&settings, &counter, &store);
    let original = words(3_000, "uniform");
    let mut conversation =
        Conversation::new(vec![user("go"), call("a", "bash"), result("a", &original)]);
    let result = conversation.messages[2].parts[0].as_tool_result().unwrap();
    let whole = counter.count_output(&result.content);
    let planned = pruner.preview_tokens(result, whole, "bash", 300);
    let mut log = DecisionLog::new();
    let cut = pruner
        .preview_oversized(&mut conversation, 2..3, 300, &mut log)
        .unwrap();
    assert_eq!(cut, 1);
    let shown = output_text(&conversation.messages[2]);
    let tokens = counter.count_text(&shown);
    assert!(shown.starts_with("uniform\nline 0 of uniform"), "{shown}");
    assert!((150..=315).contains(&tokens), "{tokens} tokens");
    assert_eq!(planned, tokens);
}

/// The last resort of a request still over the window: protected outputs cut to the same
/// share, the largest first, as far as frees what is asked (the unprotected output beside them
/// left to the other rules), and the cuts repeated on the next request, which carries them
/// whole again; an unprotected preview never is. Nothing asked, nothing cut.
#[test]
fn protected_outputs_are_cut_to_fit_only_as_the_last_resort_and_the_cut_repeats() {
    let mut settings = budget_only();
    settings.rules.protected_tools.insert("memory".into());
    let (counter, store) = (Tiktoken::default(), MemoryStore::new());
    let pruner = pruner(&settings, &counter, &store);
    let originals = Conversation::new(vec![
        user("go"),
        call("small", "memory"),
        result("small", &words(50, "small")),
        call("large", "memory"),
        result("large", &words(20_000, "large")),
        call("plain", "bash"),
        result("plain", &words(2_000, "plain")),
    ]);
    let tokens = |conversation: &Conversation, at: usize| {
        counter.count_text(&output_text(&conversation.messages[at]))
    };
    let mut log = DecisionLog::new();
    let mut untouched = originals.clone();
    assert_eq!(
        pruner
            .preview_protected_to_fit(&mut untouched, 0..7, 0, &mut log)
            .unwrap(),
        0
    );
    assert_eq!(untouched, originals);

    let mut cut = originals.clone();
    let freed = 5_000;
    let made = pruner
        .preview_protected_to_fit(&mut cut, 0..7, freed, &mut log)
        .unwrap();
    assert_eq!(made, 1, "the large one frees enough alone");
    assert_eq!(cut.messages[2], originals.messages[2]);
    assert_eq!(
        cut.messages[6], originals.messages[6],
        "not a protected output"
    );
    assert!(tokens(&originals, 4) - tokens(&cut, 4) >= freed);
    assert!(output_text(&cut.messages[4]).starts_with("large\nline 0 of large"));

    let mut again = originals.clone();
    let report = pruner
        .prune(&mut again, &mut log, PruneRequest::default())
        .unwrap();
    assert_eq!(again.messages[4], cut.messages[4], "the cut repeats");
    assert_eq!(again.messages[2], originals.messages[2]);
    assert_eq!(reason_of(&report, "small"), Reason::Protected);
}

/// The skip boundary of an autonomous run counts the calls that were answered: a call a log
/// never answered holds no output to protect, and counted, it left the oldest of the last ten
/// outputs outside the boundary.
#[test]
fn a_call_never_answered_does_not_move_the_skip_boundary() {
    let mut messages = vec![user("go")];
    for step in 0..12 {
        messages.push(call(&format!("c{step}"), "bash"));
        messages.push(result(&format!("c{step}"), "ok"));
    }
    let answered_only = condense_pruner::boundary_by_calls(&messages, 10);
    // The message of c2, the tenth answered call from the end.
    assert_eq!(answered_only, 1 + 2 * 2);
    messages.insert(1 + 2 * 8, call("interrupted", "bash"));
    assert_eq!(
        condense_pruner::boundary_by_calls(&messages, 10),
        answered_only
    );
}
