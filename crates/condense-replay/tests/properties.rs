//! What must hold for any session, on generated ones: every policy's requests keep tool calls
//! with their results, the cache never bills more or less input than was sent, nothing is read
//! that was not sent before, a request fails exactly when it is over the window, and the same
//! session gives the same figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use condense_core::testing::{tool_call, tool_result};
use condense_core::{Conversation, Message, Part, Role};
use condense_host::{Compactor, Config, Sources};
use condense_replay::{
    PriceTable, Provider, Recording, Replay, ReplaySettings, RowKind, Ttl, policy, replay,
};
use condense_tokenizer::{Tiktoken, TokenCounter};
use proptest::prelude::*;

const TOOLS: [&str; 4] = ["Read", "Bash", "skill", "grep"];

/// One person's turn: how many steps, each calling one tool whose output has a size.
fn session() -> impl Strategy<Value = Vec<(bool, Vec<(usize, usize)>)>> {
    let step = (
        0..TOOLS.len(),
        prop_oneof![Just(20usize), Just(300), Just(2_000)],
    );
    let turn = (prop::bool::weighted(0.7), prop::collection::vec(step, 0..6));
    prop::collection::vec(turn, 1..8)
}

fn build(turns: &[(bool, Vec<(usize, usize)>)]) -> Conversation {
    let mut messages = vec![Message::text(Role::System, "You are a coding agent.")];
    let mut id = 0;
    for (index, (person, steps)) in turns.iter().enumerate() {
        if *person || index == 0 {
            messages.push(Message::text(Role::User, format!("task {index}: fix it")));
        }
        for (tool, size) in steps {
            id += 1;
            let call = format!("call_{id}");
            messages.push(Message::new(
                Role::Assistant,
                vec![
                    Part::text(format!("step {id}")),
                    tool_call(
                        &call,
                        TOOLS[*tool],
                        serde_json::json!({"path": format!("f{id}.rs")}),
                    ),
                ],
            ));
            let output = format!("line {id} of the output\n").repeat(size / 20 + 1);
            messages.push(Message::new(Role::Tool, vec![tool_result(&call, output)]));
        }
        messages.push(Message::text(Role::Assistant, format!("done with {index}")));
    }
    Conversation::new(messages)
}

fn run(conversation: &Conversation, provider: Provider, window: usize) -> Replay {
    let recording = Recording::of(conversation.clone());
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let mut policies: Vec<Box<dyn condense_replay::Policy>> = policy::NAMES
        .iter()
        .filter_map(|name| policy::named(name, counter.clone()))
        .collect();
    let config = Config::load(&Sources {
        flags: vec![
            (
                "t".into(),
                "model.context_window".into(),
                window.to_string(),
            ),
            ("t".into(), "model.max_output_tokens".into(), "1000".into()),
        ],
        ..Sources::default()
    })
    .unwrap();
    let requests = policy::SummaryRequests::from_config(&config);
    let compactor = Compactor::from_config(&config).unwrap();
    policies.push(Box::new(
        policy::Condense::new("condense", compactor, requests).unwrap(),
    ));
    let settings = ReplaySettings {
        provider,
        ttl: Ttl::FiveMinutes,
        prices: PriceTable::built_in().unwrap(),
        context_window: window,
        max_output_tokens: 1_000,
    };
    replay(&recording, &mut policies, &settings, counter, &mut |_| {}).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_policy_sends_valid_requests_and_is_billed_for_exactly_what_it_sent(
        turns in session(),
        window in prop_oneof![Just(3_000usize), Just(8_000), Just(200_000)],
        openai in any::<bool>(),
    ) {
        let conversation = build(&turns);
        let provider = if openai { Provider::OpenAi } else { Provider::Anthropic };

        // The requests themselves: pairs kept, whatever the policy did.
        let recording = Recording::of(conversation.clone());
        let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
        let model = condense_replay::Model {
            counter: counter.as_ref(),
            context_window: window,
            max_output_tokens: 1_000,
            calibration: &condense_replay::IDENTITY,
            prices: condense_host::CachePrices::default(),
            cache_lifetime_minutes: 5,
            answering: None,
            summary_length: None,
        };
        for name in ["claude-code", "opencode", "hermes"] {
            let mut policy = policy::named(name, counter.clone()).unwrap();
            for step in &recording.steps {
                let history = &conversation.messages[..step.answer];
                let prepared = policy.prepare(history, None, &model).unwrap();
                let findings = condense_core::validate(&prepared.input);
                prop_assert!(findings.is_empty(), "{name}: {findings:?}");
                // A fork of the agent's request (Claude Code's summary) keeps its pairs too.
                if let Some(policy::SummarizerCall {
                    input: policy::SummarizerInput::Forked(forked),
                    ..
                }) = &prepared.summarizer
                {
                    let findings = condense_core::validate(forked);
                    prop_assert!(findings.is_empty(), "{name}'s fork: {findings:?}");
                }
            }
        }

        let replay = run(&conversation, provider, window);
        let mut summaries = 0;
        for result in &replay.policies {
            let mut sent_before = 0u64;
            for row in &result.rows {
                // The agent's request with the reply's limit it went out with: the model's,
                // or the one a policy lowered to fit.
                let limit = row.reply_limit.unwrap_or(1_000);
                if row.failed {
                    prop_assert_eq!(row.kind, RowKind::Agent);
                    // Refused, and billed nothing; or its answer cut short by a lowered limit
                    // once more, billed as the provider bills it.
                    if row.context_tokens + limit > window as u64 {
                        prop_assert_eq!(row.cost_usd, 0.0);
                    } else {
                        prop_assert!(row.reply_limit.is_some());
                        prop_assert_eq!(row.output_tokens, limit);
                    }
                    continue;
                }
                // An answer cut short at a lowered limit is billed up to it, and the request
                // goes once more: the step's agent row follows it.
                if row.kind == RowKind::CutShort {
                    prop_assert_eq!(Some(row.output_tokens), row.reply_limit);
                    prop_assert!(
                        result.rows.iter().any(|other| other.step == row.step
                            && other.kind == RowKind::Agent),
                        "{}",
                        result.name
                    );
                }
                // Claude Code's compaction request is asked again smaller where the provider
                // would refuse it; no request over the window is billed.
                if row.kind == RowKind::Agent {
                    prop_assert!(row.context_tokens + limit <= window as u64, "{}", result.name);
                }
                if result.name == "claude-code" {
                    prop_assert!(row.context_tokens <= window as u64, "{}", result.name);
                }
                if row.kind == RowKind::Agent {
                    prop_assert_eq!(row.usage.input(), row.context_tokens, "{}", result.name);
                }
                // Nothing is read that no earlier request sent.
                prop_assert!(row.usage.cache_read <= sent_before, "{}", result.name);
                if provider == Provider::OpenAi {
                    prop_assert_eq!(row.usage.cache_write, 0);
                }
                prop_assert!(row.cost_usd >= 0.0);
                sent_before = sent_before.max(row.context_tokens);
            }
            prop_assert_eq!(
                result.failures,
                result.rows.iter().filter(|row| row.failed).count()
            );
            summaries += result.compactions;
        }
        if window == 3_000 && conversation.messages.len() > 40 {
            prop_assert!(summaries > 0, "a long session in a tiny window and no policy summarized");
        }
        // The recorded policy is the session as it was: no policy of its own.
        let recorded = &replay.policies[0];
        let none = &replay.policies[1];
        prop_assert_eq!(&recorded.rows, &none.rows);
        // The same session, the same figures.
        prop_assert_eq!(
            serde_json::to_string(&replay).unwrap(),
            serde_json::to_string(&run(&conversation, provider, window)).unwrap()
        );
    }
}

/// One step of a longer session: the tool called (of [`LONG_TOOLS`]), the characters of its
/// output and of the text its input gives (a file for a Write; 0 for a path alone).
#[derive(Debug, Clone)]
struct LongStep {
    tool: usize,
    output: usize,
    input: usize,
}

/// The tools of [`long_session`]: `skill` is protected, `Write` is given whole files.
const LONG_TOOLS: [&str; 5] = ["Read", "Bash", "skill", "grep", "Write"];

/// A longer session than [`session`]'s, in shapes the shared ones do not have: a system prompt
/// of up to about 17,000 tokens, one to four of the person's turns (each message up to 2,000
/// characters, and one in five with a screenshot) of up to thirty steps,
/// outputs and inputs from a line to several times a small window, the protected `skill` among
/// the tools. Each turn ([`LongTurn`]), with the system prompt's characters.
fn long_session() -> impl Strategy<Value = (usize, Vec<LongTurn>)> {
    let step = (
        0..LONG_TOOLS.len(),
        prop_oneof![
            Just(40usize),
            Just(400),
            Just(1_500),
            Just(4_000),
            Just(12_000),
            Just(60_000)
        ],
        prop_oneof![
            4 => Just(0usize),
            1 => Just(2_000),
            1 => Just(12_000),
            1 => Just(40_000)
        ],
    )
        .prop_map(|(tool, output, input)| LongStep {
            tool,
            output,
            input,
        });
    // A message of the person's of 20,000 characters is a pasted report (a deterministic test's
    // below too).
    let turn = (
        prop_oneof![Just(0usize), Just(20), Just(2_000), Just(20_000)],
        prop_oneof![4 => Just(false), 1 => Just(true)],
        prop::collection::vec(step, 1..30),
    )
        .prop_map(|(person, screenshot, steps)| LongTurn {
            person,
            screenshot,
            steps,
        });
    (
        prop_oneof![Just(0usize), Just(8_000), Just(30_000), Just(60_000)],
        prop::collection::vec(turn, 1..5),
    )
}

fn build_long(system: usize, turns: &[LongTurn]) -> Conversation {
    let mut messages = vec![Message::text(
        Role::System,
        format!(
            "You are a coding agent.\n{}",
            "Rule: be careful.\n".repeat(system / 18)
        ),
    )];
    let mut id = 0;
    for (index, turn) in turns.iter().enumerate() {
        if turn.person > 0 || turn.screenshot || index == 0 {
            let mut said = vec![Part::text(format!(
                "task {index}: fix it\n{}",
                "details here\n".repeat(turn.person / 13)
            ))];
            if turn.screenshot {
                // Of a size the tokenizer cannot read: charged the most an image costs (1,600).
                said.push(Part::Image(condense_core::Image {
                    source: serde_json::json!({"type": "url", "url": format!("https://example.com/{index}.png")}),
                    extra: condense_core::JsonMap::new(),
                }));
            }
            messages.push(Message::new(Role::User, said));
        }
        for step in &turn.steps {
            id += 1;
            let call = format!("call_{id}");
            let mut input = serde_json::json!({"path": format!("f{id}.rs")});
            if step.input > 0 {
                input["content"] = format!("fn f{id}() {{}}\n")
                    .repeat(step.input / 12 + 1)
                    .into();
            }
            messages.push(Message::new(
                Role::Assistant,
                vec![
                    Part::text(format!("step {id}")),
                    tool_call(&call, LONG_TOOLS[step.tool], input),
                ],
            ));
            let output = format!("line {id} of the output\n").repeat(step.output / 20 + 1);
            messages.push(Message::new(Role::Tool, vec![tool_result(&call, output)]));
        }
        messages.push(Message::text(Role::Assistant, format!("done with {index}")));
    }
    Conversation::new(messages)
}

/// What must hold of condense's defaults on sessions it was never measured on: no failed
/// request where another policy has none, and at least what Claude Code's rules keep where
/// both finish. The shared sessions' check
/// (`transcripts.rs`, `condense_is_on_the_frontier_and_keeps_what_matters_wherever_any_policy_finishes`)
/// on shapes they do not have: a protected tool's outputs larger than the window, or more
/// together than the room a summary leaves, a run of outputs each several times the window.
fn assert_finishes_and_keeps(replay: &Replay) -> Result<(), TestCaseError> {
    let named = |wanted: &str| {
        replay
            .policies
            .iter()
            .find(|policy| policy.name == wanted)
            .unwrap()
    };
    let (ours, theirs) = (named("condense"), named("claude-code"));
    let figures: Vec<String> = replay
        .policies
        .iter()
        .map(|policy| {
            format!(
                "{} failed {} keeps {:.3}",
                policy.name, policy.failures, policy.retention
            )
        })
        .collect();
    if replay.policies.iter().any(|policy| policy.failures == 0) {
        prop_assert_eq!(ours.failures, 0, "{:?}", figures);
    }
    if theirs.failures == 0 {
        prop_assert!(ours.retention >= theirs.retention - 1e-9, "{:?}", figures);
    }
    // Their compaction request, asked again smaller where the provider would refuse it, is
    // never billed over the window.
    let window = replay.context_window as u64;
    for row in theirs.rows.iter().filter(|row| !row.failed) {
        prop_assert!(
            row.context_tokens <= window,
            "{:?} at {}",
            row.kind,
            row.step
        );
    }
    Ok(())
}

// The same 24 sessions on every run (a fixed seed): a check that fails at random is no check.
// More cases and another seed here explore: drawn afresh until 2026-11-28, about one case in
// 300 to 3,500 found condense keeping a point or two less than Claude Code's rules (82.6 %
// against 82.8 %, 84.3 % against 84.5 %, at 32K and 64K, on sessions of 40,000-60,000-character
// outputs and inputs). The two traced came of two faults, both mended: the replay billed their
// compaction request as taken where the provider would refuse it as over the window, and a last
// exchange whose calls filled the tail's budget had its outputs cut to their notes. After them,
// three random runs of 3,000 cases each (the last with pasted reports among the person's
// messages) found none, and a fourth found one of another kind after 1,583 cases, mended too:
// a compaction the window forces whose tail held two of the last ten calls, the inputs of the
// calls before them (12,000 characters given to a Read) taking the budget where only outputs
// were cut to hold more (90.15 % against 90.16 %, a 30,000-character system prompt at 64K).
// On 2026-11-29 runs of 1,200, 3,000, 4,000 and four of 5,000 cases found one more, twice: a
// provider's figure for an answer of two messages recorded at the first
// (`a_figure_for_an_answer_of_two_messages_covers_both`), mended.
proptest! {
    #![proptest_config(ProptestConfig {
        rng_seed: proptest::test_runner::RngSeed::Fixed(20_261_128),
        ..ProptestConfig::with_cases(24)
    })]

    #[test]
    fn condense_finishes_where_another_policy_does_and_keeps_what_claude_codes_rules_keep(
        (system, turns) in long_session(),
        window in prop_oneof![Just(8_000usize), Just(16_000), Just(32_000), Just(64_000)],
        openai in any::<bool>(),
    ) {
        let provider = if openai { Provider::OpenAi } else { Provider::Anthropic };
        assert_finishes_and_keeps(&run(&build_long(system, &turns), provider, window))?;
    }
}

/// An answer the log holds as two messages ("done with 0", then the next step's call, given
/// 40,000 characters, with no message of the person's between them): the provider's figure
/// for that request covers both, and the replay's condense policy recorded it at the first,
/// so the trigger counted the call's 10,000 tokens a second time, found a request of 43,303
/// tokens over the 63,000 a 64K window leaves beside a 1,000-token reply, and compacted it,
/// keeping 80 % where sending everything kept all. Found by a random run of this file's
/// properties (2026-11-29, after about 18,000 cases; it failed the same before that day's
/// changes). The trigger takes an answer's figure to cover every assistant message of it now
/// (`host::usage`), as the proxy's Responses answers need too.
#[test]
fn a_figure_for_an_answer_of_two_messages_covers_both() {
    let turns = [
        agent(vec![step(0, 40, 12_000)]),
        agent(vec![step(0, 1_500, 40_000)]),
    ];
    let replay = run(&build_long(60_000, &turns), Provider::Anthropic, 64_000);
    assert_finishes_and_keeps(&replay).unwrap();
    let ours = replay
        .policies
        .iter()
        .find(|policy| policy.name == "condense")
        .unwrap();
    assert_eq!((ours.compactions, ours.retention), (0, 1.0));
}

/// A `skill` (protected) whose output is about 23,000 tokens, in an 8,000-token window: no
/// request can carry it, so it becomes a preview as an unprotected one would (before, condense
/// sent it whole and failed where Claude Code's rules, summarizing it away, finished).
#[test]
fn a_protected_output_larger_than_the_window_becomes_a_preview() {
    let replay = run(
        &build(&[(false, vec![(2, 60_000)])]),
        Provider::Anthropic,
        8_000,
    );
    assert_finishes_and_keeps(&replay).unwrap();
}

/// Protected outputs that are each smaller than the window and together more than the room a
/// summary leaves beside the tail (about 13,000 tokens of `skill` in a 16,000-token window):
/// the newest that fit are carried past the summary, the others summarized (before, all were
/// carried and the request went out over the window).
#[test]
fn of_protected_outputs_more_than_the_room_the_newest_that_fit_are_carried() {
    let mut first = vec![(2, 4_000); 3];
    first.extend([(0, 40); 7]);
    let mut second = vec![(0, 40), (0, 40), (0, 40), (2, 40), (2, 1_500), (2, 4_000)];
    second.extend([(0, 40); 8]);
    second.extend([
        (2, 1_500),
        (0, 40),
        (0, 40),
        (2, 1_500),
        (2, 4_000),
        (0, 40),
        (2, 1_500),
    ]);
    let third = vec![
        (0, 40),
        (0, 400),
        (0, 1_500),
        (2, 40),
        (0, 12_000),
        (2, 12_000),
        (0, 1_500),
        (0, 4_000),
    ];
    let turns = [(false, first), (true, second), (true, third)];
    let replay = run(&build(&turns), Provider::Anthropic, 16_000);
    assert_finishes_and_keeps(&replay).unwrap();
}

/// A request over the window whose head is only the earlier summary and what it carries (a
/// system prompt of about 15,000 tokens, a search with a 12,000-character pattern and a
/// 60,000-character output previewed by the first summary, then the person's message with a
/// screenshot and two more calls, at 32K under OpenAI's prices): nothing new to summarize, but
/// the request is still fitted to the window, its calls' inputs cut. (Drawn by a random run on
/// 2026-11-28: it went out 61 tokens over the window, where Claude Code's rules finished.)
#[test]
fn a_request_with_nothing_new_to_summarize_is_still_fitted_to_the_window() {
    let turns = [
        LongTurn {
            person: 0,
            screenshot: false,
            steps: vec![step(3, 60_000, 12_000), step(0, 40, 2_000)],
        },
        LongTurn {
            person: 2_000,
            screenshot: true,
            steps: vec![step(0, 12_000, 2_000), step(2, 400, 0)],
        },
    ];
    let replay = run(&build_long(60_000, &turns), Provider::OpenAi, 32_000);
    assert_finishes_and_keeps(&replay).unwrap();
}

/// A turn of [`long_session`]'s: the person's message of about `person` characters (the
/// first turn always has one), with a screenshot or not, then the agent's `steps`.
#[derive(Debug, Clone)]
struct LongTurn {
    person: usize,
    screenshot: bool,
    steps: Vec<LongStep>,
}

/// A turn of the agent's `steps` alone, after the task.
fn agent(steps: Vec<LongStep>) -> LongTurn {
    LongTurn {
        person: 0,
        screenshot: false,
        steps,
    }
}

/// A step of [`long_session`]'s: `tool` (of [`LONG_TOOLS`]) with `output` characters returned
/// and `input` given.
fn step(tool: usize, output: usize, input: usize) -> LongStep {
    LongStep {
        tool,
        output,
        input,
    }
}

/// The room for what is carried past a summary is what the pinned messages leave: a system
/// prompt sent as a message (about 8,300 tokens), two `skill` outputs of about 1,400 and 21,000
/// tokens in a 32,000-token window. Before, the room did not count the system prompt, both were
/// carried, and the compacted request was larger than the one it replaced and over the window;
/// now the one that fits is carried.
#[test]
fn protected_outputs_are_carried_in_the_room_a_system_prompt_leaves() {
    let steps = vec![step(2, 4_000, 0), step(2, 60_000, 0), step(0, 400, 2_000)];
    let replay = run(
        &build_long(30_000, &[agent(steps)]),
        Provider::Anthropic,
        32_000,
    );
    assert_finishes_and_keeps(&replay).unwrap();
}

/// A session whose agent gives its tools inputs of 10,000 tokens, at 64K: the provider's
/// figures, its inputs cut to previews between them, put the session's line at 0.85 of the
/// provider's tokens per condense token, and the 4,200 tokens after its last figure, counted
/// that much short, left a request of 63,576 under the threshold, over what the reply's 1,000
/// leave. Found by a random run of this file's properties (after 233 cases).
#[test]
fn a_line_that_counts_fewer_than_condense_holds_back_no_compaction() {
    let turns = [
        LongTurn {
            person: 20_000,
            screenshot: false,
            steps: vec![
                step(2, 12_000, 40_000),
                step(0, 40, 40_000),
                step(3, 40, 12_000),
                step(0, 60_000, 0),
            ],
        },
        agent(vec![
            step(0, 40, 12_000),
            step(0, 40, 0),
            step(0, 60_000, 0),
            step(0, 40, 40_000),
            step(0, 60_000, 2_000),
            step(0, 12_000, 0),
        ]),
    ];
    let replay = run(&build_long(60_000, &turns), Provider::Anthropic, 64_000);
    assert_finishes_and_keeps(&replay).unwrap();
}

/// The last exchange's `skill` output (about 21,000 tokens) is smaller than the window and
/// more than the room a system prompt of about 16,700 tokens leaves: cut to a preview, the last
/// resort once everything else that may be cut is, where before the request went out over the
/// window. So is a protected call's input larger than the window (a `skill` given about 13,000
/// tokens in an 8,000-token window).
#[test]
fn a_protected_output_or_input_more_than_the_room_is_cut_as_the_last_resort() {
    let output = build_long(60_000, &[agent(vec![step(2, 60_000, 0)])]);
    assert_finishes_and_keeps(&run(&output, Provider::Anthropic, 32_000)).unwrap();
    let input = build_long(0, &[agent(vec![step(2, 60_000, 40_000)])]);
    assert_finishes_and_keeps(&run(&input, Provider::Anthropic, 8_000)).unwrap();
}

/// The person's first message, a pasted report of about 4,600 tokens with a screenshot (1,600),
/// beside a system prompt of about 1,800 in an 8,000-token window: nothing to summarize, and
/// more than the window holds. Its screenshot is left out and its text cut to a preview (the
/// whole message stored), where before condense sent it whole and failed where Claude Code's
/// rules, summarizing it away, finished.
#[test]
fn a_persons_message_more_than_the_room_is_cut_as_the_very_last_resort() {
    let turn = LongTurn {
        person: 20_000,
        screenshot: true,
        steps: vec![step(0, 40, 0)],
    };
    let replay = run(&build_long(8_000, &[turn]), Provider::Anthropic, 8_000);
    assert_finishes_and_keeps(&replay).unwrap();
}
