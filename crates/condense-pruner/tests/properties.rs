//! What must hold for any conversation, checked on generated ones.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::*;
use condense_core::{Conversation, Message, Part, Role, ToolOutput};
use condense_pruner::{
    DecisionLog, FixedClock, MemoryStore, PruneReport, PruneRequest, PruneSettings, Pruner, Reason,
    Store,
};
use condense_tokenizer::{Tiktoken, TokenCounter};
use proptest::prelude::*;

const TOOLS: [&str; 4] = ["read_file", "bash", "skill", "grep"];

/// A tool call and the size of its output; outputs are drawn from a small pool of texts so that
/// duplicates are common.
#[derive(Debug, Clone)]
struct Step {
    tool: usize,
    output: usize,
    size: usize,
}

#[derive(Debug, Clone)]
struct Turn {
    person: bool,
    steps: Vec<Vec<Step>>,
}

fn turns() -> impl Strategy<Value = Vec<Turn>> {
    let sizes = prop_oneof![Just(30usize), Just(400), Just(1500), Just(2500)];
    let step = (0..TOOLS.len(), 0..4usize, sizes).prop_map(|(tool, output, size)| Step {
        tool,
        output,
        size,
    });
    let turn = (
        prop::bool::weighted(0.8),
        prop::collection::vec(prop::collection::vec(step, 1..4), 0..4),
    )
        .prop_map(|(person, steps)| Turn { person, steps });
    prop::collection::vec(turn, 0..10)
}

fn settings() -> impl Strategy<Value = PruneSettings> {
    (
        0..4000usize,
        0..3000usize,
        prop_oneof![Just(3000usize), Just(200_000)],
        0..4usize,
        any::<bool>(),
    )
        .prop_map(
            |(protect_tokens, minimum_tokens, turn_budget_chars, skip_user_turns, protect_grep)| {
                let mut settings = {
                    let mut s = PruneSettings::built_in().unwrap();
                    s.rules.protect_tokens = protect_tokens;
                    s.rules.minimum_tokens = minimum_tokens;
                    s.rules.turn_budget_chars = turn_budget_chars;
                    s.rules.skip_user_turns = skip_user_turns;
                    s
                };
                if protect_grep {
                    settings.rules.protected_tools.insert("grep".into());
                }
                settings
            },
        )
}

fn build(turns: &[Turn]) -> Conversation {
    let mut messages = vec![system("agent")];
    let mut id = 0;
    for (index, turn) in turns.iter().enumerate() {
        if turn.person {
            messages.push(user(&format!("request {index}")));
        }
        for calls in &turn.steps {
            let mut parts = vec![Part::text("working")];
            let mut results = Vec::new();
            for step in calls {
                id += 1;
                let call_id = format!("call_{id}");
                parts.push(call_part(&call_id, TOOLS[step.tool]));
                let text: String = format!("output {} ", step.output).repeat(step.size / 10 + 1);
                results.push(result(&call_id, &text));
            }
            messages.push(Message::new(Role::Assistant, parts));
            messages.extend(results);
        }
    }
    Conversation::new(messages)
}

/// The clock of every run: ten hours after the epoch, so a previous request at 0 is long cold.
const CLOCK_MS: u64 = 36_000_000;

fn run(
    settings: &PruneSettings,
    conversation: &mut Conversation,
    log: &mut DecisionLog,
    store: &dyn Store,
) -> PruneReport {
    run_in(settings, conversation, log, store, PruneRequest::default())
}

fn run_in(
    settings: &PruneSettings,
    conversation: &mut Conversation,
    log: &mut DecisionLog,
    store: &dyn Store,
    request: PruneRequest,
) -> PruneReport {
    let counter = Tiktoken::default();
    let pruner = Pruner {
        settings,
        counter: &counter,
        store,
        clock: &FixedClock(CLOCK_MS),
    };
    pruner.prune(conversation, log, request).unwrap()
}

/// No previous request known, a warm cache (a minute ago) or a cold one (ten hours ago).
fn previous() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![Just(None), Just(Some(CLOCK_MS - 60_000)), Just(Some(0))]
}

fn bytes(conversation: &Conversation) -> String {
    serde_json::to_string(conversation).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn pruning_keeps_what_it_must_keep(
        turns in turns(),
        settings in settings(),
        window in prop::option::of(200..20_000usize),
        previous in previous(),
        rewrite in prop::sample::select(vec![0.0, 3.0, 11.5]),
    ) {
        let original = build(&turns);
        let mut pruned = original.clone();
        let store = MemoryStore::new();
        let request = PruneRequest {
            context_window: window,
            previous_request_ms: previous,
            skip_walk: false,
            cache_rewrite_cost: rewrite,
        };
        let report = run_in(&settings, &mut pruned, &mut DecisionLog::new(), &store, request);
        let boundary = report.boundary;
        // Microcompact: only a cold cache clears, and never the most recent results of its tools.
        let micro = &settings.microcompact;
        let compactable: Vec<&condense_pruner::OutputReport> = report
            .outputs
            .iter()
            .filter(|o| micro.tools.contains(&o.tool) && !settings.rules.protected_tools.contains(&o.tool))
            .collect();
        let cleared = report.outputs.iter().filter(|o| o.reason == Reason::Microcompacted).count();
        prop_assert!(cleared == 0 || previous == Some(0), "cleared {} with a warm cache", cleared);
        for recent in compactable.iter().rev().take(micro.keep_recent.max(1)) {
            prop_assert!(recent.reason != Reason::Microcompacted, "a recent result was cleared");
        }

        prop_assert_eq!(pruned.validate(), original.validate());
        prop_assert_eq!(pruned.messages.len(), original.messages.len());
        let mut outputs = report.outputs.iter();
        for (index, (before, after)) in original.messages.iter().zip(&pruned.messages).enumerate() {
            prop_assert_eq!(before.role, after.role);
            prop_assert_eq!(before.parts.len(), after.parts.len());
            for (a, b) in before.parts.iter().zip(&after.parts) {
                let (Part::ToolResult(a), Part::ToolResult(b)) = (a, b) else {
                    prop_assert_eq!(a, b, "message {}: only tool outputs may change", index);
                    continue;
                };
                let decision = outputs.next().unwrap();
                let tool = &decision.tool;
                if a.content == b.content {
                    continue;
                }
                // The skip boundary's first exception, and a protected tool's: an output larger
                // than the whole window, which no request could carry.
                let too_large = window.is_some_and(|window| decision.tokens_before > window);
                prop_assert!(!settings.rules.protected_tools.contains(tool)
                    || (decision.reason == Reason::OverTurnBudget && too_large),
                    "protected {} changed: {:?}", tool, decision.reason);
                // And one by choice: an output identical to one of the request's fresh results
                // (after its last assistant message), which the request still shows whole.
                let shown_fresh = match &decision.reason {
                    Reason::Duplicate { newer } => {
                        let last_answer = pruned.messages.iter().rposition(|m| m.role == Role::Assistant);
                        pruned.messages.iter().enumerate().any(|(at, message)| {
                            last_answer.is_some_and(|last| at > last)
                                && message.parts.iter().any(|part| matches!(part,
                                    Part::ToolResult(fresh) if &fresh.call_id == newer && fresh.content == a.content))
                        })
                    }
                    _ => false,
                };
                prop_assert!(index < boundary || (decision.reason == Reason::OverTurnBudget && too_large) || shown_fresh,
                    "message {} at or after the boundary {} changed: {:?} ({} tokens, window {:?})",
                    index, boundary, decision.reason, decision.tokens_before, window);
                let ToolOutput::Text(text) = &a.content else { unreachable!() };
                let handle = &b.compacted.as_ref().unwrap().handle;
                prop_assert_eq!(store.get(handle).unwrap(), text.as_bytes().to_vec());
            }
        }
    }

    #[test]
    fn pruning_twice_is_pruning_once(turns in turns(), settings in settings()) {
        let mut conversation = build(&turns);
        let mut log = DecisionLog::new();
        let store = MemoryStore::new();
        run(&settings, &mut conversation, &mut log, &store);
        let (once, once_log) = (bytes(&conversation), log.to_json());
        let report = run(&settings, &mut conversation, &mut log, &store);
        prop_assert_eq!(bytes(&conversation), once);
        prop_assert_eq!(log.to_json(), once_log);
        prop_assert_eq!(report.tokens_freed, 0);
    }

    /// A cold cache twice in a row (no request in between): the second call clears nothing new,
    /// and everything the first cleared comes back byte for byte.
    #[test]
    fn microcompact_never_clears_twice(turns in turns(), settings in settings()) {
        let mut conversation = build(&turns);
        let mut log = DecisionLog::new();
        let store = MemoryStore::new();
        let cold = PruneRequest { context_window: None, previous_request_ms: Some(0), ..PruneRequest::default() };
        let first = run_in(&settings, &mut conversation, &mut log, &store, cold);
        let once = conversation.clone();
        let second = run_in(&settings, &mut conversation, &mut log, &store, cold);
        prop_assert_eq!(second.microcompact.map(|m| m.cleared), Some(0));
        prop_assert!(second.outputs.iter().all(|o| o.reason != Reason::Microcompacted));
        for (before, after) in first.outputs.iter().zip(&second.outputs) {
            if before.reason == Reason::Microcompacted {
                prop_assert_eq!(&after.reason, &Reason::AlreadyReplaced);
                prop_assert_eq!(&conversation.messages[before.message], &once.messages[before.message]);
            }
        }
    }

    /// A harness keeps the log between requests and sends the conversation again, longer: with the
    /// same log, two runs give the same bytes, and every earlier replacement comes back identical.
    #[test]
    fn the_same_log_gives_the_same_bytes(
        turns in turns(),
        settings in settings(),
        cut in 0.0..1.0f64,
        previous in previous(),
    ) {
        let full = build(&turns);
        let mut prefix = Conversation::new(full.messages[..(full.messages.len() as f64 * cut) as usize].to_vec());
        let mut log = DecisionLog::new();
        let store = MemoryStore::new();
        let request = PruneRequest { context_window: None, previous_request_ms: previous, ..PruneRequest::default() };
        run_in(&settings, &mut prefix, &mut log, &store, request);

        let (mut first, mut second) = (full.clone(), full.clone());
        let (mut log_a, mut log_b) = (log.clone(), log.clone());
        let report_a = run_in(&settings, &mut first, &mut log_a, &store, request);
        let report_b = run_in(&settings, &mut second, &mut log_b, &store, request);
        prop_assert_eq!(bytes(&first), bytes(&second));
        prop_assert_eq!(log_a.to_json(), log_b.to_json());
        prop_assert_eq!(report_a, report_b);

        let replaced_before: BTreeSet<(usize, usize)> = sites_replaced(&prefix);
        for (message, part) in replaced_before {
            prop_assert_eq!(&first.messages[message].parts[part], &prefix.messages[message].parts[part]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// An agent's trim, whatever it names: the pairs stay whole, a protected output is never
    /// trimmed, at most the one target changes (and only to the agent's summary), only the most
    /// recent result unless older ones are allowed, and the next request repeats it byte for byte.
    #[test]
    fn an_agent_trim_touches_its_target_at_most(
        turns in turns(),
        target in prop::option::of(0..40usize),
        allow_older in any::<bool>(),
    ) {
        let mut conversation = build(&turns);
        let ids: Vec<String> = conversation
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| p.as_tool_result().map(|r| r.call_id.clone()))
            .collect();
        let mut input = serde_json::json!({"summary": "what mattered"});
        if let Some(target) = target {
            input["tool_call_id"] = ids.get(target).cloned().unwrap_or_else(|| "missing".into()).into();
        }
        conversation.messages.push(Message::new(
            Role::Assistant,
            vec![condense_core::testing::tool_call("trim", "trim_tool_result", input)],
        ));
        conversation.messages.push(result("trim", "ok"));
        // No other rule may act, so every change is the trim's.
        let settings = {
            let mut s = PruneSettings::built_in().unwrap();
            s.rules.protect_tokens = usize::MAX;
            s.rules.turn_budget_chars = usize::MAX;
            s.trim.allow_older = allow_older;
            s.rules.protected_tools = ["skill".to_owned()].into();
            s
        };
        let original = conversation.clone();
        let store = MemoryStore::new();
        let mut log = DecisionLog::new();
        let report = run(&settings, &mut conversation, &mut log, &store);
        prop_assert_eq!(conversation.validate(), original.validate());
        let changed: Vec<&condense_pruner::OutputReport> =
            report.outputs.iter().filter(|o| o.reason == Reason::TrimmedByAgent).collect();
        prop_assert!(changed.len() <= 1);
        let differing = original
            .messages
            .iter()
            .zip(&conversation.messages)
            .filter(|(a, b)| a != b)
            .count();
        prop_assert_eq!(differing, changed.len());
        if let Some(trimmed) = changed.first() {
            prop_assert!(trimmed.tool != "skill");
            let last_output = ids.last().unwrap();
            prop_assert!(allow_older || &trimmed.call_id == last_output);
            let text = output_text(&conversation.messages[trimmed.message]);
            prop_assert!(text.starts_with("[trimmed by the agent: what mattered — original: condense recall "));
        }
        let mut again = original.clone();
        run(&settings, &mut again, &mut log, &store);
        prop_assert_eq!(bytes(&again), bytes(&conversation));
    }
}

fn sites_replaced(conversation: &Conversation) -> BTreeSet<(usize, usize)> {
    let mut sites = BTreeSet::new();
    for (m, message) in conversation.messages.iter().enumerate() {
        for (p, part) in message.parts.iter().enumerate() {
            if matches!(part, Part::ToolResult(result) if result.compacted.is_some()) {
                sites.insert((m, p));
            }
        }
    }
    sites
}

/// The properties above mean something only if the generated cases exercise every rule: sample the
/// generators and check that pruning, previews and duplicates all happen often.
#[test]
fn the_generators_exercise_every_rule() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let (mut pruned, mut previews, mut duplicates, mut frozen_cases) = (0, 0, 0, 0);
    let (mut cleared, mut inside) = (0, 0);
    for _ in 0..200 {
        let turns = turns().new_tree(&mut runner).unwrap().current();
        let settings = settings().new_tree(&mut runner).unwrap().current();
        let mut conversation = build(&turns);
        let report = run(
            &settings,
            &mut conversation,
            &mut DecisionLog::new(),
            &MemoryStore::new(),
        );
        let has = |wanted: fn(&Reason) -> bool| report.outputs.iter().any(|o| wanted(&o.reason));
        pruned += usize::from(has(|r| *r == Reason::Pruned));
        previews += usize::from(has(|r| *r == Reason::OverTurnBudget));
        duplicates += usize::from(has(|r| matches!(r, Reason::Duplicate { .. })));
        inside +=
            usize::from(report.outputs.iter().any(|o| {
                matches!(o.reason, Reason::Duplicate { .. }) && o.message >= report.boundary
            }));
        frozen_cases += usize::from(report.replaced() > 0);
        let cold = PruneRequest {
            context_window: None,
            previous_request_ms: Some(0),
            ..PruneRequest::default()
        };
        let mut conversation = build(&turns);
        let report = run_in(
            &settings,
            &mut conversation,
            &mut DecisionLog::new(),
            &MemoryStore::new(),
            cold,
        );
        cleared += usize::from(report.microcompact.is_some_and(|m| m.cleared > 0));
    }
    assert!(
        cleared >= 40,
        "only {cleared} of 200 cases cleared anything on a cold cache"
    );
    assert!(pruned >= 40, "only {pruned} of 200 cases pruned anything");
    assert!(
        previews >= 20,
        "only {previews} of 200 cases cut a turn to previews"
    );
    assert!(
        duplicates >= 10,
        "only {duplicates} of 200 cases replaced a duplicate"
    );
    assert!(
        inside >= 5,
        "only {inside} of 200 cases replaced a duplicate of a fresh result inside the boundary"
    );
    assert!(
        frozen_cases >= 60,
        "only {frozen_cases} of 200 cases replaced anything"
    );
}

/// A call the agent made with texts in its input: its tool (a protected one among them), whether
/// it is written inside the assistant's text (mini-swe-agent), and the sizes of a Write's
/// `content` and of a MultiEdit-like `edits` list's `new_string`s.
#[derive(Debug, Clone)]
struct Sent {
    tool: usize,
    embedded: bool,
    content: usize,
    edits: Vec<usize>,
}

const SENDERS: [&str; 4] = ["Write", "MultiEdit", "bash", "skill"];

fn sent_steps() -> impl Strategy<Value = Vec<Vec<Sent>>> {
    let size = prop_oneof![
        Just(40usize),
        Just(2_000),
        Just(2_100),
        Just(6_000),
        Just(30_000)
    ];
    let sent = (
        0..SENDERS.len(),
        prop::bool::weighted(0.15),
        size.clone(),
        prop::collection::vec(size, 0..3),
    )
        .prop_map(|(tool, embedded, content, edits)| Sent {
            tool,
            embedded,
            content,
            edits,
        });
    prop::collection::vec(prop::collection::vec(sent, 1..3), 1..6)
}

/// A task, then each step's calls, each with a short result.
fn sending(steps: &[Vec<Sent>]) -> Conversation {
    let mut messages = vec![user("write the module")];
    let mut id = 0;
    for calls in steps {
        let mut parts = vec![Part::text("writing")];
        let mut results = Vec::new();
        for sent in calls {
            id += 1;
            let text = |size: usize, seed: usize| -> String {
                (0..)
                    .map(|line| format!("line {line} of text {seed}\n"))
                    .scan(0, |len, line| {
                        *len += line.len();
                        (*len <= size).then_some(line)
                    })
                    .collect()
            };
            let edits: Vec<serde_json::Value> = sent
                .edits
                .iter()
                .enumerate()
                .map(|(at, &size)| serde_json::json!({"old_string": "x", "new_string": text(size, id * 10 + at)}))
                .collect();
            let input = serde_json::json!({
                "file_path": format!("/src/f{id}.rs"),
                "content": text(sent.content, id),
                "edits": edits,
                "replace_all": false,
            });
            let mut part =
                condense_core::testing::tool_call(format!("call_{id}"), SENDERS[sent.tool], input);
            if let Part::ToolCall(call) = &mut part {
                call.embedded = sent.embedded;
            }
            parts.push(part);
            results.push(result(&format!("call_{id}"), "done"));
        }
        messages.push(Message::new(Role::Assistant, parts));
        messages.extend(results);
    }
    Conversation::new(messages)
}

/// Every string of `value` with its JSON pointer.
fn strings(value: &serde_json::Value, at: String, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::String(text) => out.push((at, text.clone())),
        serde_json::Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                strings(item, format!("{at}/{index}"), out);
            }
        }
        serde_json::Value::Object(fields) => {
            for (key, item) in fields {
                strings(item, format!("{at}/{key}"), out);
            }
        }
        _ => {}
    }
}

/// `value` with every string emptied: what must not change when texts are cut.
fn shape_of(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::String(_) => serde_json::Value::String(String::new()),
        serde_json::Value::Array(items) => items.iter().map(shape_of).collect(),
        serde_json::Value::Object(fields) => fields
            .iter()
            .map(|(key, item)| (key.clone(), shape_of(item)))
            .collect(),
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The agent's own inputs cut to fit a window, whatever the request and however much must
    /// go: only texts longer than the note that follows a preview, of unprotected calls sent
    /// as calls, in the range asked, change, each to a shorter start of itself (at most
    /// `prune.preview_bytes`) and the note naming the whole input, which the store holds; ids, names, results, words and every
    /// other value stay; the count is of the calls changed; the same request gives the same
    /// bytes; and the log makes the same cuts again on the request resent whole.
    #[test]
    fn cutting_inputs_keeps_what_it_must_keep(
        steps in sent_steps(),
        excess in prop_oneof![Just(0usize), 1..40_000usize],
        from in 0..6usize,
    ) {
        let original = sending(&steps);
        let settings = PruneSettings::built_in().unwrap();
        let limit = settings.rules.preview_bytes;
        let counter = Tiktoken::default();
        let store = MemoryStore::new();
        let pruner = Pruner { settings: &settings, counter: &counter, store: &store, clock: &FixedClock(CLOCK_MS) };
        let within = (from * 2).min(original.messages.len())..original.messages.len();
        let mut cut = original.clone();
        let mut log = DecisionLog::new();
        let calls = pruner.preview_inputs(&mut cut, within.clone(), excess, &mut log).unwrap();
        let mut again = original.clone();
        pruner.preview_inputs(&mut again, within.clone(), excess, &mut DecisionLog::new()).unwrap();
        prop_assert_eq!(bytes(&cut), bytes(&again));
        prop_assert_eq!(cut.validate(), original.validate());
        prop_assert_eq!(cut.messages.len(), original.messages.len());

        let mut changed = 0;
        for (index, (before, after)) in original.messages.iter().zip(&cut.messages).enumerate() {
            prop_assert_eq!(before.role, after.role);
            prop_assert_eq!(before.parts.len(), after.parts.len());
            for (a, b) in before.parts.iter().zip(&after.parts) {
                let (Part::ToolCall(a), Part::ToolCall(b)) = (a, b) else {
                    prop_assert_eq!(a, b, "message {}: only call inputs may change", index);
                    continue;
                };
                prop_assert_eq!((&a.id, &a.name, a.embedded), (&b.id, &b.name, b.embedded));
                if a.input == b.input {
                    continue;
                }
                changed += 1;
                prop_assert!(excess > 0, "cut with nothing to free");
                prop_assert!(within.contains(&index), "message {} outside {:?} cut", index, within);
                prop_assert!(!a.embedded, "a call written in the text was cut");
                prop_assert!(!settings.rules.protected_tools.contains(&a.name), "protected {} cut", a.name);
                prop_assert_eq!(shape_of(&a.input), shape_of(&b.input));
                let (mut was, mut now) = (Vec::new(), Vec::new());
                strings(&a.input, String::new(), &mut was);
                strings(&b.input, String::new(), &mut now);
                let mut handles = BTreeSet::new();
                for ((at, was), (_, now)) in was.iter().zip(&now) {
                    if was == now {
                        continue;
                    }
                    let Some(note_at) = now.rfind("\n[condense: this input to ") else {
                        return Err(TestCaseError::fail(format!("{at}: no note in {now:?}")));
                    };
                    let (shown, note) = now.split_at(note_at);
                    prop_assert!(
                        counter.count_text(was) > counter.count_text(note),
                        "{}: a text of {} bytes, no longer than its note, cut", at, was.len()
                    );
                    prop_assert!(now.len() < was.len(), "{}: cut to something longer", at);
                    prop_assert!(shown.len() <= limit && was.starts_with(shown), "{}: {:?} is not a preview", at, shown);
                    let handle = now.trim_end_matches(']').rsplit(' ').next().unwrap().to_owned();
                    handles.insert(handle);
                }
                // One handle a call, holding its whole input.
                prop_assert_eq!(handles.len(), 1);
                let whole: serde_json::Value = serde_json::from_slice(&store.get(handles.first().unwrap()).unwrap()).unwrap();
                prop_assert_eq!(&whole, &a.input);
            }
        }
        prop_assert_eq!(calls, changed);
        // Logged, so that the next request, which carries the inputs whole, is cut the same.
        let mut resent = original.clone();
        let again = pruner
            .prune(&mut resent, &mut log, PruneRequest { skip_walk: true, ..PruneRequest::default() })
            .unwrap();
        prop_assert_eq!(bytes(&resent), bytes(&cut));
        prop_assert_eq!(again.inputs.len(), calls);
        prop_assert_eq!(again.changed(), calls > 0);
        if calls > 0 {
            prop_assert!(counter.count_conversation(&cut) < counter.count_conversation(&original));
        }
    }
}

/// The generator of [`cutting_inputs_keeps_what_it_must_keep`] makes every kind of call its
/// checks tell apart, and with enough to free each is cut or left as it must be: a Write's
/// content and a MultiEdit's edits cut, a protected tool's and an embedded call's left.
#[test]
fn the_input_generator_exercises_every_case() {
    let sent = |tool, embedded, content, edits: &[usize]| Sent {
        tool,
        embedded,
        content,
        edits: edits.to_vec(),
    };
    let conversation = sending(&[
        vec![sent(0, false, 30_000, &[]), sent(3, false, 30_000, &[])],
        vec![
            sent(1, false, 40, &[6_000, 6_000]),
            sent(0, true, 30_000, &[]),
        ],
    ]);
    let settings = PruneSettings::built_in().unwrap();
    let counter = Tiktoken::default();
    let store = MemoryStore::new();
    let pruner = Pruner {
        settings: &settings,
        counter: &counter,
        store: &store,
        clock: &FixedClock(CLOCK_MS),
    };
    let mut cut = conversation.clone();
    let end = cut.messages.len();
    assert_eq!(
        pruner
            .preview_inputs(&mut cut, 0..end, 100_000, &mut DecisionLog::new())
            .unwrap(),
        2
    );
    let input = |conversation: &Conversation, message: usize, part: usize| {
        conversation.messages[message].parts[part]
            .as_tool_call()
            .unwrap()
            .input
            .clone()
    };
    // The Write's content, and both of the MultiEdit's edits.
    assert_ne!(
        input(&cut, 1, 1)["content"],
        input(&conversation, 1, 1)["content"]
    );
    for edit in 0..2 {
        assert_ne!(
            input(&cut, 4, 1)["edits"][edit]["new_string"],
            input(&conversation, 4, 1)["edits"][edit]["new_string"]
        );
    }
    // Not the protected skill's, nor the call written in the text.
    assert_eq!(input(&cut, 1, 2), input(&conversation, 1, 2));
    assert_eq!(input(&cut, 4, 2), input(&conversation, 4, 2));
}
