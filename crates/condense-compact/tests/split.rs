#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_compact::{TailSettings, split};
use condense_core::testing::transcripts;
use condense_core::testing::{tool_call, tool_result};
use condense_core::{Message, Part, Role};
use condense_tokenizer::{Tiktoken, TokenCounter};
use proptest::prelude::*;

fn settings(context_window: usize) -> TailSettings {
    TailSettings::built_in(context_window, 4_096).unwrap()
}

#[test]
fn the_split_of_every_transcript_at_three_windows() {
    let counter = Tiktoken::default();
    for transcript in transcripts().unwrap() {
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        let mut lines = Vec::new();
        for window in [16_000, 32_000, 128_000] {
            let split = split(&conversation.messages, &counter, &settings(window));
            lines.push(format!(
                "{:>3}K: pinned {}, head {}..{} ({} tokens), tail from {} ({} tokens, {} user turns, {} calls, budget {}, {:?}{}){}",
                window / 1000,
                split.pinned,
                split.pinned,
                split.tail_start,
                split.head_tokens,
                split.tail_start,
                split.tail_tokens,
                split.tail_user_turns,
                split.tail_calls,
                split.budget,
                split.rule,
                split.previews.as_ref().map_or(String::new(), |p| format!(
                    ", outputs of {}..{} over {} as previews: {} tokens",
                    p.messages.start, p.messages.end, p.over, split.kept_tokens
                )),
                if split.nothing_to_compact() { ", nothing to compact" } else { "" }
            ));
            assert_pairs_whole(&conversation.messages, split.tail_start);
        }
        insta::assert_snapshot!(transcript.name.replace('/', "__"), lines.join("\n"));
    }
}

fn assert_pairs_whole(messages: &[Message], tail_start: usize) {
    let pairs = condense_core::ToolPairs::index(messages);
    for (call, result) in pairs.pairs() {
        assert_eq!(
            call.message < tail_start,
            result.message < tail_start,
            "the cut at {tail_start} splits the pair at {} / {}",
            call.message,
            result.message
        );
    }
}

/// A conversation of turns, each a person's message then steps of calls and results of random
/// sizes; a generated flag puts some results inside the next user message, as Anthropic does,
/// and another makes some steps a built-in tool's call and output that condense keeps whole
/// (opaque items linked by their `call_id`, as the Responses API's computer use sends them).
fn conversation() -> impl Strategy<Value = Vec<Message>> {
    let step = (
        1..4usize,
        0..800usize,
        any::<bool>(),
        prop::bool::weighted(0.25),
    );
    let turn = (0..400usize, prop::collection::vec(step, 0..4));
    prop::collection::vec(turn, 0..12).prop_map(|turns| {
        let mut messages = vec![Message::text(Role::System, "be useful")];
        let mut id = 0;
        for (words, steps) in turns {
            messages.push(Message::text(Role::User, "ask ".repeat(words + 1)));
            for (calls, size, inline, built_in) in steps {
                if built_in {
                    id += 1;
                    messages.extend(built_in_step(&format!("c{id}"), size));
                    continue;
                }
                let mut call_parts = Vec::new();
                let mut results = Vec::new();
                for _ in 0..calls {
                    id += 1;
                    call_parts.push(tool_call(
                        format!("c{id}"),
                        "bash",
                        serde_json::json!({"command": "ls"}),
                    ));
                    results.push(tool_result(format!("c{id}"), "out ".repeat(size)));
                }
                messages.push(Message::new(Role::Assistant, call_parts));
                if inline {
                    messages.push(Message::new(Role::User, results));
                } else {
                    messages.extend(
                        results
                            .into_iter()
                            .map(|r| Message::new(Role::Tool, vec![r])),
                    );
                }
            }
        }
        messages
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_split_is_whole_and_keeps_the_turns(messages in conversation(), window in 6_000usize..40_000) {
        let counter = Tiktoken::default();
        let settings = settings(window);
        let split = split(&messages, &counter, &settings);

        // Head and tail are the conversation, in order.
        prop_assert!(split.pinned <= split.tail_start && split.tail_start <= messages.len());
        let total: usize = counter.count_each(&messages).iter().sum();
        let pinned: usize = counter.count_each(&messages[..split.pinned]).iter().sum();
        prop_assert_eq!(pinned + split.head_tokens + split.tail_tokens, total);

        // No pair crosses the cut, nor any opaque items the wire links.
        let pairs = condense_core::ToolPairs::index(&messages);
        for (call, result) in pairs.pairs() {
            prop_assert_eq!(call.message < split.tail_start, result.message < split.tail_start);
        }
        prop_assert_eq!(links_split(&messages, split.tail_start), None);

        // The tail always holds the last exchange: the last assistant message and all after it.
        if let Some(last_assistant) = messages.iter().rposition(|m| m.role == Role::Assistant) {
            prop_assert!(split.tail_start <= last_assistant, "tail from {} but the last step is at {}", split.tail_start, last_assistant);
        } else if messages.len() > split.pinned {
            prop_assert!(split.tail_start < messages.len(), "the last message is in the tail");
        }

        // A tail moved back for the recent calls fits its budget once its previews are made,
        // previews only what is before the last exchange (and nothing where it fits whole), and
        // holds more calls than before.
        if split.rule == condense_compact::TailRule::RecentCalls {
            prop_assert!(split.kept_tokens <= split.budget);
            match split.previews.as_ref() {
                Some(previews) => {
                    prop_assert!(split.tail_tokens > split.budget);
                    prop_assert_eq!(previews.messages.start, split.tail_start);
                    let last_assistant = messages.iter().rposition(|m| m.role == Role::Assistant).unwrap();
                    prop_assert!(previews.messages.end <= last_assistant);
                }
                None => prop_assert_eq!(split.kept_tokens, split.tail_tokens),
            }
            prop_assert!(split.tail_calls > 0 && split.tail_start > split.pinned);
        } else if split.previews.is_none() {
            prop_assert_eq!(split.kept_tokens, split.tail_tokens);
        }

        // A suffix cut back to the latest calls holds `min_tail_calls` of them, within its
        // budget, and starts at the step that makes the earliest of them.
        if split.rule == condense_compact::TailRule::LatestCalls {
            let calls = |from: usize| messages[from..].iter().flat_map(|m| &m.parts).filter(|part| matches!(part, condense_core::Part::ToolCall(_))).count();
            let wanted = settings.rules.min_tail_calls;
            prop_assert!(split.tail_calls >= wanted && calls(split.tail_start + 1) < wanted);
            prop_assert!(split.tail_tokens <= split.budget);
        }

        // The tail holds min_tail_turns user turns when there are that many, unless even the
        // last turn is over budget or those turns would fill half the usable window.
        let turns = condense_core::user_turns(&messages);
        let wanted = settings.rules.min_tail_turns.min(turns.len());
        if wanted > 0 {
            let from = |index: usize| counter.count_each(&messages[index..]).iter().sum::<usize>();
            let last_fits = from(turns[turns.len() - 1]) <= split.budget;
            let wanted_fit = from(turns[turns.len() - wanted]) <= split.budget.max(condense_compact::usable(&settings) / 2);
            if last_fits && wanted_fit {
                prop_assert!(split.tail_user_turns >= wanted, "{} turns kept, {} wanted", split.tail_user_turns, wanted);
            }
        }
    }
}

/// The first link of opaque items ([`Part::opaque_link`]) that a cut at `tail_start` splits.
fn links_split(messages: &[Message], tail_start: usize) -> Option<String> {
    let mut sides: std::collections::HashMap<&str, bool> = std::collections::HashMap::new();
    for (index, message) in messages.iter().enumerate() {
        for link in message.parts.iter().filter_map(Part::opaque_link) {
            let side = index < tail_start;
            if *sides.entry(link).or_insert(side) != side {
                return Some(link.to_owned());
            }
        }
    }
    None
}

/// A built-in tool's call and output that condense keeps whole: opaque items linked by their
/// `call_id`, the output sent by the client (a generated user message), as the Responses API's
/// computer use has them.
fn built_in_step(id: &str, size: usize) -> [Message; 2] {
    let call = Message::new(
        Role::Assistant,
        vec![Part::Opaque {
            value: serde_json::json!({"type": "computer_call", "call_id": id,
                "action": {"type": "screenshot"}}),
        }],
    );
    let mut output = Message::new(
        Role::User,
        vec![Part::Opaque {
            value: serde_json::json!({"type": "computer_call_output", "call_id": id,
                "output": "out ".repeat(size)}),
        }],
    );
    output.generated = true;
    [call, output]
}

/// One person's request, then an autonomous run of single-call steps, each output `sizes[i]`
/// words long.
fn run_of(sizes: impl IntoIterator<Item = usize>) -> Vec<Message> {
    let mut messages = vec![
        Message::text(Role::System, "be useful"),
        Message::text(Role::User, "fix the bug"),
    ];
    for (id, size) in sizes.into_iter().enumerate() {
        messages.extend(function_step(&format!("c{id}"), size));
    }
    messages
}

/// One step of a run: a shell call and its output of `size` words.
fn function_step(id: &str, size: usize) -> [Message; 2] {
    [
        Message::new(
            Role::Assistant,
            vec![tool_call(id, "bash", serde_json::json!({"command": "ls"}))],
        ),
        Message::new(Role::Tool, vec![tool_result(id, "out ".repeat(size))]),
    ]
}

/// An autonomous run ([`run_of`]) with outputs of random sizes, some small enough for the tail
/// budget to hold more than `min_tail_calls` of them.
fn autonomous_run() -> impl Strategy<Value = Vec<Message>> {
    prop::collection::vec(0..600usize, 1..80).prop_map(run_of)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The tail of a run too long for its budget is the run's last `min_tail_calls` calls when
    /// more than that fit: no older call rides along, none of those is left out.
    #[test]
    fn an_autonomous_runs_tail_is_its_latest_calls(messages in autonomous_run(), window in 6_000usize..40_000) {
        let counter = Tiktoken::default();
        let settings = settings(window);
        let split = split(&messages, &counter, &settings);
        let wanted = settings.rules.min_tail_calls;
        let counts = counter.count_each(&messages);
        // The calls (one a step) of the longest suffix within the budget, as a suffix cut
        // takes it: from a step, never from a result.
        let fitting = (2..messages.len())
            .step_by(2)
            .find(|&from| counts[from..].iter().sum::<usize>() <= split.budget)
            .map_or(0, |from| (messages.len() - from) / 2);
        if split.rule == condense_compact::TailRule::Suffix || split.rule == condense_compact::TailRule::LatestCalls {
            prop_assert_eq!(split.tail_calls, fitting.min(wanted));
            prop_assert_eq!(split.rule == condense_compact::TailRule::LatestCalls, fitting > wanted);
        }
        prop_assert!(split.tail_tokens <= split.budget || split.rule == condense_compact::TailRule::LastExchange || split.rule == condense_compact::TailRule::RecentCalls);
    }
}

/// An autonomous run whose steps are function calls or, some of them, a built-in tool's that
/// condense keeps whole ([`built_in_step`]) or an answer the provider stores (references, and an
/// output whose call is not shown); some answers start with a reasoning item of their own, as a
/// Responses answer does.
fn mixed_run() -> impl Strategy<Value = Vec<Message>> {
    let step = (0..600usize, 0..3u8, any::<bool>());
    prop::collection::vec(step, 1..80).prop_map(|steps| {
        let mut messages = run_of([]);
        for (id, (size, kind, reasoned)) in steps.into_iter().enumerate() {
            if kind == 2 {
                // The AI SDK's with `store` on: the answer as references to what the provider
                // stored, its output beside them with no call shown.
                let reference = |id: String| Part::Opaque {
                    value: serde_json::json!({"type": "item_reference", "id": id}),
                };
                messages.push(Message::new(
                    Role::Assistant,
                    vec![reference(format!("rs_{id}"))],
                ));
                messages.push(Message::new(
                    Role::Assistant,
                    vec![reference(format!("fc_{id}"))],
                ));
                messages.push(Message::new(
                    Role::Tool,
                    vec![tool_result(format!("call_{id}"), "out ".repeat(size))],
                ));
                continue;
            }
            let built_in = kind == 1;
            if reasoned {
                messages.push(Message::new(
                    Role::Assistant,
                    vec![Part::Opaque {
                        value: serde_json::json!({"type": "reasoning", "id": format!("rs_{id}"),
                            "encrypted_content": "gAAAA"}),
                    }],
                ));
            }
            let id = format!("c{id}");
            if built_in {
                messages.extend(built_in_step(&id, size));
            } else {
                messages.extend(function_step(&id, size));
            }
        }
        messages
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A built-in tool's call and its output are never parted, as a call and its result are
    /// not: the API refuses an output whose call is gone; nor is an answer of several assistant
    /// messages (a call without the reasoning item before it is refused too), nor an output
    /// from the answer whose stored call it answers.
    #[test]
    fn a_cut_never_parts_linked_items_or_an_answer(messages in mixed_run(), window in 4_000usize..40_000) {
        let counter = Tiktoken::default();
        let split = split(&messages, &counter, &settings(window));
        prop_assert_eq!(links_split(&messages, split.tail_start), None);
        assert_pairs_whole(&messages, split.tail_start);
        let start = split.tail_start;
        prop_assert!(
            start == 0 || start >= messages.len()
                || !(messages[start].role == Role::Assistant && messages[start - 1].role == Role::Assistant),
            "the tail starts at {start}, inside an answer"
        );
        // Every result needs what comes before it: its call, or the answer its call was in.
        prop_assert!(
            start >= messages.len()
                || !messages[start].parts.iter().any(|part| matches!(part, Part::ToolResult(_))),
            "the tail starts at {start}, at a result"
        );
    }
}

/// A 32K window's settings with a tail budget of `tokens`, whatever the window's share.
fn with_tail_budget(tokens: usize) -> TailSettings {
    let mut squeezed = settings(32_000);
    squeezed.rules.min_tail_tokens = tokens;
    squeezed.rules.max_tail_tokens = tokens;
    squeezed
}

/// The tokens of a whole preview: `prune.preview_bytes` (2 KB) at about four bytes a token.
const WHOLE_PREVIEW: usize = 512;

/// `split_counted` with previews that keep an output's first `limit` tokens, never more than
/// [`WHOLE_PREVIEW`] (as the host's pruner sizes them, its note aside).
fn split_previewing(messages: &[Message], settings: &TailSettings) -> condense_compact::Split {
    let counter = Tiktoken::default();
    let sizes = |result: &condense_core::ToolResult, _: &str, limit: usize| {
        let whole = counter.count_output(&result.content);
        (whole, whole.min(limit).min(WHOLE_PREVIEW))
    };
    condense_compact::split_counted(messages, &counter.count_each(messages), &sizes, settings)
}

/// A run whose last output alone takes the tail's whole budget: within the budget the calls
/// before it are lost whole; with `previews_within` past the budget, the ten latest are shown,
/// those before the last exchange as previews of what it leaves them.
#[test]
fn a_last_exchange_that_fills_the_budget_leaves_the_calls_before_it_as_previews() {
    let messages = run_of((0..14).map(|id| if id == 13 { 1_900 } else { 300 }));
    let mut squeezed = with_tail_budget(2_000);

    let within_budget = split_previewing(&messages, &squeezed);
    assert_eq!(within_budget.tail_calls, 1, "{within_budget:?}");
    assert_eq!(within_budget.previews, None);

    squeezed.previews_within = 4_000;
    let stretched = split_previewing(&messages, &squeezed);
    assert_eq!(stretched.rule, condense_compact::TailRule::RecentCalls);
    assert_eq!(stretched.tail_calls, 10, "{stretched:?}");
    assert!(stretched.kept_tokens > stretched.budget);
    assert!(stretched.kept_tokens <= 4_000, "{stretched:?}");
    let previews = stretched.previews.as_ref().unwrap();
    assert_eq!(previews.messages.start, stretched.tail_start);
    assert_eq!(previews.messages.end, messages.len() - 2);
    assert!(previews.over < 300, "{previews:?}");
    assert_pairs_whole(&messages, stretched.tail_start);

    // With the recent calls turned off (`min_tail_calls = 0`), the bound changes nothing.
    squeezed.rules.min_tail_calls = 0;
    let by_turns = split_previewing(&messages, &squeezed);
    squeezed.previews_within = 0;
    assert_eq!(by_turns, split_previewing(&messages, &squeezed));
    assert_eq!(by_turns.previews, None);
}

/// A run whose last output takes most of the tail's budget, not all of it: the budget holds a
/// few of the calls before it, and the bound past the budget (the room the summary leaves) the
/// rest of the ten latest, as previews of what it leaves them. A budget that held some of them
/// used to end the tail there, and the agent's last small steps (a status, a grep) went to the
/// summary though the room held them.
#[test]
fn a_last_exchange_that_takes_most_of_the_budget_leaves_the_rest_of_the_calls_within_the_bound() {
    let messages = run_of((0..14).map(|id| if id == 13 { 1_300 } else { 300 }));
    let mut squeezed = with_tail_budget(2_000);

    let within_budget = split_previewing(&messages, &squeezed);
    assert_eq!(within_budget.rule, condense_compact::TailRule::RecentCalls);
    assert!(
        (2..10).contains(&within_budget.tail_calls),
        "some of the calls before the last exchange, not all: {within_budget:?}"
    );

    squeezed.previews_within = 4_000;
    let stretched = split_previewing(&messages, &squeezed);
    assert_eq!(stretched.rule, condense_compact::TailRule::RecentCalls);
    assert_eq!(stretched.tail_calls, 10, "{stretched:?}");
    assert!(stretched.kept_tokens > stretched.budget, "{stretched:?}");
    assert!(stretched.kept_tokens <= 4_000, "{stretched:?}");
    let previews = stretched.previews.as_ref().unwrap();
    assert_eq!(previews.messages.start, stretched.tail_start);
    assert_eq!(
        previews.messages.end,
        messages.len() - 2,
        "the last exchange whole"
    );
    assert_pairs_whole(&messages, stretched.tail_start);
}

/// A last exchange over the budget itself (a request whose system prompt and tools leave a
/// small room) holds none of the calls before it whole beside it: within `previews_within`
/// they are shown as previews beside it, the last exchange whole; past it (or without the
/// bound), its outputs over the budget are cut to previews, and the calls before it are kept
/// whole as far as what those previews leave of the budget holds them.
#[test]
fn a_last_exchange_over_the_budget_leaves_the_calls_before_it_as_previews_within_the_bound() {
    let messages = run_of((0..14).map(|id| if id == 13 { 2_400 } else { 300 }));
    let mut squeezed = with_tail_budget(2_000);

    let alone = split_previewing(&messages, &squeezed);
    assert_eq!(alone.rule, condense_compact::TailRule::LastExchange);
    let previews = alone.previews.as_ref().unwrap();
    assert_eq!(
        previews.messages,
        messages.len() - 2..messages.len(),
        "the last exchange's output alone cut: {alone:?}"
    );
    // Its preview (512 tokens) leaves the budget about 1,500 tokens: four of the 300-token
    // calls before it, whole, and not a fifth.
    assert_eq!(alone.tail_calls, 5, "{alone:?}");
    assert!(alone.kept_tokens <= alone.budget, "{alone:?}");
    assert!(
        alone.kept_tokens + 300 > alone.budget,
        "no room for one more: {alone:?}"
    );
    assert_pairs_whole(&messages, alone.tail_start);

    squeezed.previews_within = 4_000;
    let stretched = split_previewing(&messages, &squeezed);
    assert_eq!(stretched.rule, condense_compact::TailRule::RecentCalls);
    assert_eq!(stretched.tail_calls, 10, "{stretched:?}");
    assert!(stretched.kept_tokens <= 4_000, "{stretched:?}");
    let previews = stretched.previews.as_ref().unwrap();
    assert_eq!(
        previews.messages.end,
        messages.len() - 2,
        "the last exchange whole"
    );
    assert!(previews.over < 300, "{previews:?}");
    assert_pairs_whole(&messages, stretched.tail_start);

    // A bound the last exchange alone fills: as without it.
    squeezed.previews_within = 2_400;
    assert_eq!(split_previewing(&messages, &squeezed), alone);
}

/// A last exchange of several calls over the budget (Claude Code runs calls in parallel) is cut
/// so that the whole of it fits: the budget less the assistant's own words and calls, in equal
/// shares among its outputs, not the budget each (three outputs would then keep three budgets,
/// a request over the window where a large system prompt leaves a small room). Where half the
/// room is more than the budget, each keeps a whole preview as far as that half holds them.
#[test]
fn a_last_exchange_of_several_outputs_over_the_budget_fits_it_once_cut() {
    let mut messages = run_of([300, 300]);
    let calls: Vec<_> = (0..3)
        .map(|id| {
            tool_call(
                format!("p{id}"),
                "bash",
                serde_json::json!({"command": format!("cat part{id}.log")}),
            )
        })
        .collect();
    messages.push(Message::new(Role::Assistant, calls));
    for id in 0..3 {
        messages.push(Message::new(
            Role::Tool,
            vec![tool_result(format!("p{id}"), "out ".repeat(1_500))],
        ));
    }
    // A room whose half is the budget: 6,000 less the 4,096 reserved for the reply.
    let mut small = settings(6_000);
    small.rules.min_tail_tokens = 1_000;
    small.rules.max_tail_tokens = 1_000;
    let split = split_previewing(&messages, &small);
    assert_eq!(split.rule, condense_compact::TailRule::LastExchange);
    assert_eq!(split.tail_calls, 3, "{split:?}");
    let previews = split.previews.as_ref().unwrap();
    assert!(previews.over * 3 < 1_000, "{previews:?}");
    assert!(split.kept_tokens <= 1_000, "{split:?}");
    assert_pairs_whole(&messages, split.tail_start);

    // At 32,000 the same budget leaves each output its whole preview, the tail within half the
    // room.
    let split = split_previewing(&messages, &with_tail_budget(1_000));
    let previews = split.previews.as_ref().unwrap();
    assert_eq!(previews.over, WHOLE_PREVIEW, "{previews:?}");
    assert!(split.kept_tokens > 1_000, "{split:?}");
    assert!(split.kept_tokens <= 3 * WHOLE_PREVIEW + 100, "{split:?}");
    assert_pairs_whole(&messages, split.tail_start);
}

/// A last exchange whose calls alone are over the budget (a Write given a whole file) keeps
/// its small output whole: cut to the share the budget leaves it (none), it would be its note
/// alone, and the tail no nearer the budget.
#[test]
fn a_last_exchange_whose_calls_fill_the_budget_keeps_a_small_output_whole() {
    let mut messages = run_of([300, 300]);
    messages.push(Message::new(
        Role::Assistant,
        vec![tool_call(
            "w",
            "Write",
            serde_json::json!({"file_path": "big.rs", "content": "fn f() {}\n".repeat(1_000)}),
        )],
    ));
    messages.push(Message::new(
        Role::Tool,
        vec![tool_result(
            "w",
            "File created successfully at: big.rs ".repeat(10),
        )],
    ));
    let split = split_previewing(&messages, &with_tail_budget(2_000));
    assert_eq!(split.rule, condense_compact::TailRule::LastExchange);
    assert!(split.tail_tokens > 2_000, "{split:?}");
    assert_eq!(
        split.kept_tokens, split.tail_tokens,
        "nothing cut: {split:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `previews_within` only ever adds recent calls, as previews where they do not fit it
    /// whole, to a tail whose budget held fewer than `min_tail_calls` of them, and never past
    /// itself: at or under the budget, with the recent calls turned off (`min_tail_calls = 0`),
    /// or where the budget holds them all, it changes nothing.
    #[test]
    fn previews_past_the_budget_stay_within_their_bound(messages in autonomous_run(), window in 6_000usize..40_000, past in 0usize..6_000, calls in prop::sample::select(vec![0usize, 5, 10])) {
        let mut base = settings(window);
        base.rules.min_tail_calls = calls;
        let before = split_previewing(&messages, &base);
        let mut stretched = base;
        stretched.previews_within = before.budget.saturating_sub(1_000) + past;
        let after = split_previewing(&messages, &stretched);
        if calls == 0 || stretched.previews_within <= before.budget || before.tail_calls >= calls {
            prop_assert_eq!(&after, &before);
        } else {
            prop_assert!(after.tail_calls >= before.tail_calls);
            prop_assert!(after.tail_calls <= base.rules.min_tail_calls.max(before.tail_calls));
            if after != before {
                prop_assert_eq!(after.rule, condense_compact::TailRule::RecentCalls);
                prop_assert!(after.kept_tokens <= stretched.previews_within);
                // Previews only where the calls do not fit the bound whole.
                match after.previews.as_ref() {
                    Some(previews) => {
                        prop_assert!(after.tail_tokens > stretched.previews_within);
                        prop_assert_eq!(previews.messages.start, after.tail_start);
                        prop_assert!(previews.messages.end <= messages.len() - 2);
                    }
                    None => prop_assert_eq!(after.kept_tokens, after.tail_tokens),
                }
            }
        }
        assert_pairs_whole(&messages, after.tail_start);
    }
}

/// An autonomous run's task, the only request of the person's in the head, leads the summary
/// where the compaction keeps it whole; once it stands in front of a summary, `pinned` keeps it
/// there, so every later compaction leaves the prefix (system prompt, task) as it was.
#[test]
fn an_autonomous_runs_task_leads_the_summary_and_stays_pinned() {
    let counter = Tiktoken::default();
    let messages = run_of([400; 40]);
    let settings = settings(16_000);
    let cut = split(&messages, &counter, &settings);
    assert_eq!(cut.pinned, 1, "the system prompt alone, before any summary");
    let task = counter.count_message(&messages[1]);
    let carried = condense_compact::carried(
        &messages,
        cut.pinned,
        cut.tail_start,
        &Default::default(),
        2,
    );
    assert_eq!(
        carried.first(),
        Some(&messages[1]),
        "the task is carried whole"
    );
    assert!(condense_compact::leads_the_summary(
        &messages, &cut, &carried, task, 3_000
    ));
    // Larger than a summary would quote it, or not carried: carried after the summary as before.
    assert!(!condense_compact::leads_the_summary(
        &messages,
        &cut,
        &carried,
        task,
        task - 1
    ));
    assert!(!condense_compact::leads_the_summary(
        &messages,
        &cut,
        &carried[1..],
        task,
        3_000
    ));
    // A second request of the person's in the head: both are quoted or carried as before.
    let mut two = messages.clone();
    two.insert(4, Message::text(Role::User, "and the other one"));
    let cut_two = split(&two, &counter, &settings);
    let carried_two = condense_compact::carried(
        &two,
        cut_two.pinned,
        cut_two.tail_start,
        &Default::default(),
        2,
    );
    assert!(!condense_compact::leads_the_summary(
        &two,
        &cut_two,
        &carried_two,
        task,
        3_000
    ));

    // The compacted run: system prompt, task, summary, tail. The task stays pinned.
    let mut compacted = condense_compact::reassemble(&messages, 2, cut.tail_start, "done", None);
    assert!(compacted[2].is_compaction_summary());
    assert_eq!(condense_compact::pinned(&compacted), 2);
    compacted.extend(run_of([400; 30]).into_iter().skip(2));
    let again = split(&compacted, &counter, &settings);
    assert_eq!(again.pinned, 2);
    assert!(compacted[again.head()][0].is_compaction_summary());
    // A summary right after the system prompt: that alone is pinned, as before.
    let moved = condense_compact::reassemble(&messages, 1, cut.tail_start, "done", None);
    assert_eq!(condense_compact::pinned(&moved), 1);
}

/// What a tail message needs among the pinned messages stays with them: a provider's compaction
/// pinned after the system prompt, an answer that continues it and an output whose call it
/// holds. The split ends (it looped forever, looking further back than the pinned messages) and
/// keeps what it needs.
#[test]
fn what_the_tail_needs_among_the_pinned_messages_stays_there() {
    let pinned = vec![
        Message::text(Role::System, "be useful"),
        Message::new(
            Role::Assistant,
            vec![Part::Opaque {
                value: serde_json::json!({"type": "compaction", "encrypted_content": "gAAAA"}),
            }],
        ),
        Message::text(Role::Assistant, "Carrying on from the compaction."),
        Message::new(
            Role::Tool,
            vec![tool_result("call_before", "out ".repeat(500))],
        ),
    ];
    let counter = Tiktoken::default();
    // Short enough for the tail to reach back to the pinned messages, and long.
    for steps in [0, 1, 3, 30] {
        let mut messages = pinned.clone();
        let run = run_of((0..steps).map(|step| 200 + step * 20));
        messages.extend(run.into_iter().skip(1));
        for window in [4_000, 8_000, 16_000, 32_000] {
            let split = split(&messages, &counter, &settings(window));
            assert_eq!(split.pinned, 2, "the system prompt and the compaction");
            assert!(split.tail_start >= split.pinned && split.tail_start <= messages.len());
            assert_pairs_whole(&messages, split.tail_start);
        }
    }
}

/// A call a log never answered (a step interrupted, the agent going on with its next message)
/// is no recent work: the tail of a run holds the last `min_tail_calls` calls that have their
/// outputs, the unanswered one among them besides. Counted as one of the ten, it once left the
/// oldest of them to the summary, where the replay's `keeps` (and the agent) missed it.
#[test]
fn a_call_never_answered_is_not_one_of_the_recent_calls_the_tail_holds() {
    // Each output about 500 tokens: the run is over the 8,000 of the budget, more than ten
    // of its steps within it.
    let mut messages = run_of([500; 20]);
    let interrupted = Message::new(
        Role::Assistant,
        vec![tool_call(
            "cut",
            "bash",
            serde_json::json!({"command": "make"}),
        )],
    );
    // Between the 15th step's output and the 16th step.
    let at = 2 + 2 * 15;
    messages.insert(at, interrupted);
    let counter = Tiktoken::default();
    let settings = settings(64_000);
    let split = split(&messages, &counter, &settings);
    let wanted = settings.rules.min_tail_calls;
    assert_eq!(
        split.rule,
        condense_compact::TailRule::LatestCalls,
        "{split:?}"
    );
    assert_eq!(split.tail_calls, wanted);
    let ids: Vec<&str> = messages[split.tail_start..]
        .iter()
        .flat_map(|message| &message.parts)
        .filter_map(Part::as_tool_call)
        .map(|call| call.id.as_str())
        .collect();
    let answered: Vec<String> = (20 - wanted..20).map(|step| format!("c{step}")).collect();
    for id in &answered {
        assert!(
            ids.contains(&id.as_str()),
            "{id} left to the summary: {ids:?}"
        );
    }
    assert!(ids.contains(&"cut") && !ids.contains(&"c9"), "{ids:?}");
}
