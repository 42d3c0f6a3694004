//! The trigger and the tail when the harness reports the provider's own count of its requests:
//! that count is of the request as it was sent (outputs pruned before were placeholders in it),
//! and it includes what the request carries beside the messages (tool definitions, a system
//! prompt sent apart), which a compaction must leave room for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::testing::tool_step;
use condense_core::{Conversation, Message, Part, Role};
use condense_host::{CompactionOutcome, Compactor, Config, ReportedUsage, SessionState, Sources};
use condense_tokenizer::{Tiktoken, TokenCounter};

/// The configuration the environment `settings` give.
fn config(settings: &[(&str, &str)]) -> Config {
    Config::load(&Sources {
        env: settings
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect(),
        ..Sources::default()
    })
    .unwrap()
}

fn compactor(settings: &[(&str, &str)]) -> Compactor {
    Compactor::from_config(&config(settings))
        .unwrap()
        .with_store(Box::new(condense_pruner::MemoryStore::new()))
        .with_clock(Box::new(condense_pruner::FixedClock(1_763_700_000_000)))
}

/// `steps` shell calls, each with an output of about `tokens` tokens that no other shares.
fn shell_steps(messages: &mut Vec<Message>, turn: usize, steps: usize, tokens: usize) {
    for step in 0..steps {
        let output: String = (0..tokens / 10)
            .map(|line| format!("turn {turn} step {step} line {line} ok\n"))
            .collect();
        messages.extend(tool_step(
            &format!("call_{turn}_{step}"),
            "bash",
            serde_json::json!({"command": format!("run check {turn} {step}")}),
            output,
        ));
    }
}

/// The request after `sent`: the client's `history` with one more shell step, its answer, the
/// provider having counted `sent` as it went out with `prefix` tokens beside its messages;
/// checked to fit the `window` with that prefix.
async fn after_one_step(
    compactor: &Compactor,
    mut history: Vec<Message>,
    state: &mut SessionState,
    sent: &condense_host::Compaction,
    prefix: usize,
    window: usize,
) -> condense_host::Compaction {
    let counter = Tiktoken::default();
    let answered = history.len();
    shell_steps(&mut history, 1, 1, 100);
    state.reported_usage = Some(ReportedUsage::answered(
        sent.conversation.messages.len(),
        counter.count_conversation(&sent.conversation)
            + prefix
            + counter.count_message(&history[answered]),
    ));
    let next = compactor
        .prepare(Conversation::new(history), state)
        .await
        .unwrap();
    let tokens = counter.count_conversation(&next.conversation);
    assert!(
        tokens + prefix <= window,
        "{tokens} tokens and the prefix, over the window: {:?}",
        next.report.compaction
    );
    next
}

/// Asserts that `sent` was summarized and goes out within `window` with its reply's limit
/// (`max_tokens`) and the `beside` tokens the provider counts beyond its messages (tools, a
/// system prompt sent apart); gives the limit.
fn summarized_within(sent: &condense_host::Compaction, beside: usize, window: usize) -> usize {
    assert!(
        matches!(sent.report.compaction, CompactionOutcome::Summarized { .. }),
        "{:?}",
        sent.report.compaction
    );
    let input = Tiktoken::default().count_conversation(&sent.conversation) + beside;
    let limit = sent.conversation.envelope.as_ref().unwrap()["max_tokens"]
        .as_u64()
        .unwrap() as usize;
    assert!(
        input + limit <= window,
        "{input} tokens with what the provider counts beside them and a limit of {limit}, over the window"
    );
    limit
}

/// A 32K window with 4,096 tokens for the reply, compacted only where the window needs it (an
/// early compaction is another question).
const DUE_AT_32K: [(&str, &str); 3] = [
    ("CONDENSE_MODEL_CONTEXT_WINDOW", "32000"),
    ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "4096"),
    ("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0"),
];

/// A 16K window with 4,096 tokens for the reply.
const AT_16K: [(&str, &str); 2] = [
    ("CONDENSE_MODEL_CONTEXT_WINDOW", "16000"),
    ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "4096"),
];

/// A 20K window where the old outputs of [`thirty_steps`] are pruned on the first request,
/// compacted only where the window needs it: thirty steps arriving at once forecast a window
/// due soon, so an early compaction would take the budget's cut at once, and what these tests
/// judge is whether the window is due.
const PRUNING_AT_20K: [(&str, &str); 5] = [
    ("CONDENSE_MODEL_CONTEXT_WINDOW", "20000"),
    ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "2000"),
    ("CONDENSE_PRUNE_PROTECT_TOKENS", "2000"),
    ("CONDENSE_PRUNE_MINIMUM_TOKENS", "1000"),
    ("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0"),
];

/// One task and thirty shell steps of about 700 tokens each (about 24K tokens in all).
fn thirty_steps() -> Conversation {
    let mut messages = vec![
        Message::text(Role::System, "You are a careful agent."),
        Message::text(Role::User, "make the checks pass"),
    ];
    shell_steps(&mut messages, 0, 30, 700);
    Conversation::new(messages)
}

/// Request 1 prunes old outputs; the provider counts that request as sent, just under the
/// threshold. Request 2 is the client's resent history, originals included, plus a little:
/// over the threshold by the provider's measure. Taking the pruned outputs off the provider's
/// count again (they were never in it) put it thousands of tokens under, and the session grew
/// past the window before anything was summarized.
#[tokio::test]
async fn outputs_pruned_before_are_not_taken_off_the_providers_count_again() {
    let compactor = compactor(&PRUNING_AT_20K);
    let history = thirty_steps();
    let mut state = SessionState::default();
    let first = compactor
        .prepare(history.clone(), &mut state)
        .await
        .unwrap();
    assert!(
        first.report.prune.replaced() >= 10,
        "{}",
        first.report.prune.replaced()
    );
    assert_eq!(first.report.compaction, CompactionOutcome::NotDue);
    // Where that request stops repeating the (unpruned) history: the first output replaced.
    let first_replaced = first
        .report
        .prune
        .outputs
        .iter()
        .find(|output| output.reason.replaces())
        .map(|output| output.message);
    assert!(first_replaced.is_some());
    assert_eq!(first.report.prune.first_fresh_message(), first_replaced);

    // The answer to request 1, and the provider's count of that request and answer: just
    // under the threshold (the harness's tool definitions make up the rest).
    let usable = first.report.usable;
    let mut resent = history.clone();
    resent
        .messages
        .push(Message::text(Role::Assistant, "Two checks still fail."));
    state.reported_usage = Some(ReportedUsage::answered(
        resent.messages.len() - 1,
        usable - 50,
    ));
    resent
        .messages
        .push(Message::text(Role::User, "keep going ".repeat(60)));
    let second = compactor.prepare(resent, &mut state).await.unwrap();
    assert!(
        second.report.measured.tokens() >= usable,
        "{:?}",
        second.report.measured
    );
    assert!(
        second.report.prune.frozen_tokens_up_to(usize::MAX) > 5_000,
        "the resent originals were replaced again: {:?}",
        second.report.prune.replaced()
    );
    // Replaced again is not a change: the request repeats the one before it up to the new
    // messages (or to what this request replaces for the first time, after the first).
    assert!(
        second
            .report
            .prune
            .first_fresh_message()
            .is_none_or(|message| message > first_replaced.unwrap()),
        "{:?}",
        second.report.prune.first_fresh_message()
    );
    assert!(
        matches!(
            second.report.compaction,
            CompactionOutcome::Summarized { .. }
        ),
        "over the threshold by the provider's count, yet {:?}",
        second.report.compaction
    );
}

/// The harness's tool definitions take more than half the window. The provider's count says so;
/// the tail is sized for what is left, so that the compacted request, those definitions
/// included, is under the threshold. Sized for the whole window, the tail (two whole turns of
/// the budget's top-up) left the request over it, and every later request found nothing new to
/// summarize while the session grew past the window.
#[tokio::test]
async fn the_tail_leaves_room_for_what_the_request_carries_beside_the_messages() {
    const TOOLS: usize = 16_000;
    let compactor = compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "32000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "4000"),
    ]);
    let mut messages = vec![Message::text(Role::System, "You are a careful agent.")];
    // Two small tasks, a larger one, and the task in progress: the last two fit in half the
    // usable window, so the tail once took both.
    for (turn, steps) in [4, 4, 6, 4].into_iter().enumerate() {
        messages.push(Message::text(Role::User, format!("now task {turn}")));
        shell_steps(&mut messages, turn, steps, 1_200);
        if turn < 3 {
            messages.push(Message::text(Role::Assistant, format!("task {turn} done")));
        }
    }
    // The provider's count covers the request before the last result, and its answer.
    let last = messages.len() - 2;
    let conversation = Conversation::new(messages);
    let counter = Tiktoken::default();
    let ours: usize = counter
        .count_each(&conversation.messages[..=last])
        .iter()
        .sum();
    let mut state = SessionState {
        reported_usage: Some(ReportedUsage::answered(last, ours + TOOLS)),
        ..SessionState::default()
    };
    let compaction = compactor.prepare(conversation, &mut state).await.unwrap();
    let report = &compaction.report;
    let CompactionOutcome::Summarized { split, .. } = &report.compaction else {
        panic!("{:?}", report.compaction);
    };
    assert!(
        report.tokens_after + TOOLS < report.usable,
        "{} tokens of messages and {TOOLS} of tools against {} usable ({split:?})",
        report.tokens_after,
        report.usable
    );
}

/// After a request that made a summary, the answer it reported usage for follows the request's
/// last message (the client's own: the continuation is inside the summary). The message after
/// the answer (here a large tool result) must be counted on top of the provider's figure, not
/// taken for part of it.
#[tokio::test]
async fn after_a_summary_the_message_after_the_answer_is_counted() {
    let compactor = compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "20000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "2000"),
        ("CONDENSE_PRUNE_MINIMUM_TOKENS", "1000000"),
    ]);
    let history = thirty_steps();
    let mut state = SessionState::default();
    let first = compactor
        .prepare(history.clone(), &mut state)
        .await
        .unwrap();
    assert!(matches!(
        first.report.compaction,
        CompactionOutcome::Summarized { .. }
    ));
    let sent = &first.conversation.messages;
    assert_eq!(
        sent.last(),
        history.messages.last(),
        "the client's own last message"
    );
    let counter = Tiktoken::default();
    state.reported_usage = Some(ReportedUsage::answered(
        sent.len(),
        counter.count_each(sent).iter().sum::<usize>() + 100,
    ));

    // The client's next history: its own, the answer, and a large result.
    let mut next = history.clone();
    shell_steps(&mut next.messages, 1, 1, 3_000);
    let result_tokens = counter.count_message(next.messages.last().unwrap());
    let second = compactor.prepare(next, &mut state).await.unwrap();
    let condense_host::Measure::ProviderUsage { counted_after, .. } = second.report.measured else {
        panic!("{:?}", second.report.measured);
    };
    assert!(
        counted_after >= result_tokens,
        "{counted_after} counted after the answer, the result alone is {result_tokens}"
    );
}

/// The harness's figure is of a request that still held the outputs this call prunes for the
/// first time. A retry of the same history, before the harness reports again, finds those
/// outputs frozen; it must judge as the first call did and send the same bytes (found by the
/// `prepare` fuzzer: the retry summarized where the first call had not).
#[tokio::test]
async fn a_retry_before_the_next_report_judges_as_the_first_call_did() {
    let compactor = compactor(&PRUNING_AT_20K);
    let history = thirty_steps();
    let counter = Tiktoken::default();
    let ours: usize = counter.count_each(&history.messages).iter().sum();
    let mut state = SessionState {
        reported_usage: Some(ReportedUsage::answered(
            history.messages.len() - 1,
            ours + 200,
        )),
        ..SessionState::default()
    };
    let first = compactor
        .prepare(history.clone(), &mut state)
        .await
        .unwrap();
    assert!(first.report.prune.replaced() >= 10);
    assert_eq!(first.report.compaction, CompactionOutcome::NotDue);
    let retry = compactor.prepare(history, &mut state).await.unwrap();
    assert_eq!(retry.report.compaction, first.report.compaction);
    assert_eq!(retry.conversation.messages, first.conversation.messages);
}

/// The provider counts this history under the threshold where condense's tokenizer counts it
/// over: the trigger leaves it alone, and the report must not call it "still over the
/// threshold" on the other measure (the proxy logged that at 28,273 tokens of a 32K window
/// without trying anything). Both judgements are on the trigger's measure.
#[tokio::test]
async fn the_threshold_is_judged_on_the_triggers_own_measure() {
    let compactor = compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "20000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "2000"),
        ("CONDENSE_PRUNE_MINIMUM_TOKENS", "1000000"),
        // The window's threshold alone: compacting early would be due at three quarters.
        ("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0"),
    ]);
    let history = thirty_steps();
    let counter = Tiktoken::default();
    let ours: usize = counter.count_each(&history.messages).iter().sum();
    let mut state = SessionState::default();
    let usable = compactor
        .prepare(history.clone(), &mut SessionState::default())
        .await
        .unwrap()
        .report
        .usable;
    assert!(ours > usable, "{ours} over {usable} by condense's count");
    // The provider counted the request and its answer at well under the threshold.
    state.reported_usage = Some(ReportedUsage::answered(
        history.messages.len() - 1,
        usable * 3 / 4,
    ));
    let result = compactor.prepare(history, &mut state).await.unwrap();
    assert!(matches!(
        result.report.measured,
        condense_host::Measure::ProviderUsage { .. }
    ));
    assert_eq!(result.report.compaction, CompactionOutcome::NotDue);
    assert!(result.report.tokens_after > usable);
    assert_eq!(result.report.due_after, result.report.measured.tokens());
    assert!(result.report.under_threshold, "{:?}", result.report.note);
    assert_eq!(result.report.note, None);
}

/// The provider's count of a request under a harness whose system prompt and tools take 16,000
/// tokens, with a tokenizer that counts 1.5 of its tokens for each of condense's.
fn under_a_large_prefix(ours: usize) -> usize {
    16_000 + ours * 3 / 2
}

/// 40 requests of a session opened by `request`, each step adding a 300-token output, at a 20K
/// window (2,000 of reply) under [`under_a_large_prefix`], its figures reported after each: each
/// request's report and what it sent.
async fn forty_requests_under_a_large_prefix(
    request: &str,
) -> Vec<(condense_host::CompactReport, Vec<Message>)> {
    let compactor = compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "20000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "2000"),
    ]);
    let counter = Tiktoken::default();
    let ours = |messages: &[Message]| -> usize { counter.count_each(messages).iter().sum() };
    let mut history = vec![
        Message::text(Role::System, "You are a careful agent."),
        Message::text(Role::User, request),
    ];
    let mut state = SessionState::default();
    let mut requests = Vec::new();
    for step in 0..40 {
        let prepared = compactor
            .prepare(Conversation::new(history.clone()), &mut state)
            .await
            .unwrap();
        let sent = prepared.conversation.messages;
        let mut answer = Vec::new();
        shell_steps(&mut answer, step, 1, 300);
        state.reported_usage = Some(ReportedUsage::answered(
            sent.len(),
            under_a_large_prefix(ours(&sent) + ours(&answer[..1])),
        ));
        history.extend(answer);
        requests.push((prepared.report, sent));
    }
    requests
}

/// A harness whose system prompt and tools take four fifths of a 20K window
/// ([`under_a_large_prefix`]: the provider's figure for each request, as the harness reports
/// it, is `16,000 + 1.5 × ours`). They leave 4,000 tokens, less than twice the reply's reserve
/// of 2,000, so once the session's figures part the prefix from the tokenizer's scale (two
/// requests well apart in size), compaction is due at 16,000 + three quarters of 4,000, not at
/// the 18,000 the whole reserve leaves, and every request it sends fits the window: the summary,
/// the tail and the requests it carries are sized to what the prefix leaves. (Read as a share of
/// each request, the prefix had these 40 requests summarized 18 times; parted, 10.)
#[tokio::test]
async fn a_prefix_that_takes_most_of_the_window_is_parted_from_the_tokenizer_s_scale() {
    let counter = Tiktoken::default();
    let requests = forty_requests_under_a_large_prefix("make the checks pass").await;
    // From the fourth request, the first and the last reported are far enough apart.
    for (step, (report, sent)) in requests.iter().enumerate().skip(3) {
        assert!(
            report.usable.abs_diff(19_000) <= 2,
            "request {step}: due at {}",
            report.usable
        );
        let provider = under_a_large_prefix(counter.count_each(sent).iter().sum());
        assert!(
            provider <= 20_000,
            "request {step}: {provider} tokens by the provider's count ({:?})",
            report.compaction
        );
    }
    let summaries = requests
        .iter()
        .filter(|(report, _)| matches!(report.compaction, CompactionOutcome::Summarized { .. }))
        .count();
    assert!((3..=12).contains(&summaries), "{summaries} summaries");
}

/// A person's request larger than what the prefix leaves beside the summary and the tail is not
/// carried whole after the summary, where it would leave every later request over the window:
/// the summary quotes it.
#[tokio::test]
async fn a_request_the_room_cannot_hold_is_left_to_the_summary_s_quote() {
    let counter = Tiktoken::default();
    let request = format!(
        "make the checks pass. {}",
        "Each check must pass on the old and the new parser alike. ".repeat(200)
    );
    assert!(counter.count_text(&request) > 2_000);
    let requests = forty_requests_under_a_large_prefix(&request).await;
    let mut summarized = 0;
    for (step, (report, sent)) in requests.iter().enumerate().skip(3) {
        let provider = under_a_large_prefix(counter.count_each(sent).iter().sum());
        assert!(provider <= 20_000, "request {step}: {provider} tokens");
        if matches!(report.compaction, CompactionOutcome::Summarized { .. }) {
            summarized += 1;
            assert!(
                sent.iter().all(|message| message.plain_text() != request),
                "request {step} carried the request whole"
            );
            let quoted = sent.iter().any(|message| {
                message.is_compaction_summary()
                    && message
                        .plain_text()
                        .contains("make the checks pass. Each check")
            });
            assert!(quoted, "request {step}: the summary does not quote it");
        }
    }
    assert!(summarized > 0);
}

/// A session whose harness changes its system prompt and tools half way (the provider's figure
/// goes from `12,000 + 1.5 × ours` to `16,000 + 1.5 × ours`, as when a harness loads more tools):
/// the requests of the new prefix are not put on a line with the old ones, so once two of them
/// are far enough apart compaction is due where the new prefix puts it (16,000 + three quarters
/// of the 4,000 it leaves of the 20K window), and every request after the first of the new
/// prefix (judged on the old prefix's last figure) fits the window. (Kept across the change, the old anchors gave slopes no tokenizer has: the line was
/// refused for the rest of the session, and compaction was due at 18,000.)
#[tokio::test]
async fn a_prefix_that_changes_mid_session_is_parted_afresh() {
    let compactor = compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "20000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "2000"),
    ]);
    let counter = Tiktoken::default();
    let ours = |messages: &[Message]| -> usize { counter.count_each(messages).iter().sum() };
    let change = 20;
    let provider = |step: usize, ours: usize| {
        let fixed = if step < change { 12_000 } else { 16_000 };
        fixed + ours * 3 / 2
    };
    let mut history = vec![
        Message::text(Role::System, "You are a careful agent."),
        Message::text(Role::User, "make the checks pass"),
    ];
    let mut state = SessionState::default();
    let mut due = Vec::new();
    for step in 0..40 {
        if step == change {
            history[0] = Message::text(Role::System, "You are a careful agent. More tools now.");
        }
        let prepared = compactor
            .prepare(Conversation::new(history.clone()), &mut state)
            .await
            .unwrap();
        let sent = prepared.conversation.messages;
        // The first request of the new prefix is judged on the old one's last figure: nobody
        // has counted the new prefix yet.
        let size = provider(step, ours(&sent));
        assert!(
            size <= 20_000 || step == change,
            "request {step}: {size} tokens"
        );
        due.push(prepared.report.usable);
        let mut answer = Vec::new();
        shell_steps(&mut answer, step, 1, 300);
        state.reported_usage = Some(ReportedUsage::answered(
            sent.len(),
            provider(step, ours(&sent) + ours(&answer[..1])),
        ));
        history.extend(answer);
    }
    // The old prefix: due at the window less the reply's reserve, or within a few tokens past
    // it while the session's one figure sizes the requests (its fixed part holds the
    // tokenizer's excess over the messages, and leaves the conversation a hair under four
    // times the reserve, where three quarters of it is the conversation's).
    assert!(
        due[..change]
            .iter()
            .all(|&at| (18_000..=18_050).contains(&at)),
        "{due:?}"
    );
    assert!(due[3..change].iter().all(|&at| at == 18_000), "{due:?}");
    let parted = due[change..]
        .iter()
        .position(|at| at.abs_diff(19_000) <= 2)
        .unwrap_or_else(|| panic!("the new prefix never parted: {due:?}"));
    assert!(
        due[change + parted..]
            .iter()
            .all(|at| at.abs_diff(19_000) <= 2),
        "{due:?}"
    );
}

/// A Write of a whole file as the last exchange, beside a prefix of tools and system prompt
/// that the messages do not show: the compaction cuts the file's text for the request to fit
/// the window, and the provider counts that request as sent. The next request is the client's
/// history with the file whole again plus one step, judged by that count: it must carry the
/// same cut, byte for byte, or it goes out over the window with a count that said it fit.
#[tokio::test]
async fn an_input_cut_to_fit_the_window_is_cut_the_same_on_the_next_request() {
    const PREFIX: usize = 15_000;
    const WINDOW: usize = 32_000;
    let compactor = compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "32000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "4096"),
    ]);
    let counter = Tiktoken::default();
    let ours = |conversation: &Conversation| counter.count_conversation(conversation);
    let mut history = vec![
        Message::text(Role::System, "You are a careful agent."),
        Message::text(Role::User, "write the parser module"),
    ];
    shell_steps(&mut history, 0, 3, 300);
    let mut state = SessionState::default();
    let first = compactor
        .prepare(Conversation::new(history.clone()), &mut state)
        .await
        .unwrap();
    assert_eq!(first.report.compaction, CompactionOutcome::NotDue);

    // The answer to request 1 is the Write; the provider counted request 1 with its prefix,
    // and that answer.
    let content: String = (0..1_800)
        .map(|n| format!("line {n}: let x{n} = parse({n});\n"))
        .collect();
    let write = tool_step(
        "write",
        "Write",
        serde_json::json!({"file_path": "/src/parser.rs", "content": content}),
        "File created successfully at: /src/parser.rs",
    );
    state.reported_usage = Some(ReportedUsage::answered(
        history.len(),
        ours(&first.conversation) + PREFIX + counter.count_message(&write[0]),
    ));
    history.extend(write);
    let second = compactor
        .prepare(Conversation::new(history.clone()), &mut state)
        .await
        .unwrap();
    let CompactionOutcome::Summarized {
        previewed_inputs: 1,
        ..
    } = &second.report.compaction
    else {
        panic!("{:?}", second.report.compaction);
    };
    assert!(ours(&second.conversation) + PREFIX <= WINDOW);
    let cut_input = |conversation: &Conversation| {
        conversation
            .messages
            .iter()
            .find_map(|message| {
                message
                    .parts
                    .iter()
                    .filter_map(condense_core::Part::as_tool_call)
                    .find(|call| call.id == "write")
            })
            .map(|call| call.input.clone())
    };

    // The answer to request 2 is one more step; the provider counted request 2 as sent.
    let third = after_one_step(&compactor, history, &mut state, &second, PREFIX, WINDOW).await;
    assert_eq!(
        cut_input(&third.conversation),
        cut_input(&second.conversation)
    );
    // Nothing else to do: the request repeats the one before it, then the new step.
    assert_eq!(third.report.compaction, CompactionOutcome::NotDue);
    assert_eq!(
        third.conversation.messages[..second.conversation.messages.len()],
        second.conversation.messages[..]
    );
}

/// A screenshot the person sends, in a 32K window its system prompt (29,500 tokens, as
/// Chat Completions agents send it) and tools (1,000, which the messages do not show) nearly
/// fill, with nothing older than the recent turns to summarize: the image is left out for the
/// request to fit, and the provider counts that request as sent. The next request is the client's history with the image whole again
/// plus one step, judged by that count: it must carry the same cut, byte for byte, or it goes
/// out over the window with a count that said it fit.
#[tokio::test]
async fn a_screenshot_left_out_to_fit_the_window_is_left_out_on_the_next_request() {
    const PREFIX: usize = 1_000;
    const WINDOW: usize = 32_000;
    let compactor = compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "32000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "4096"),
    ]);
    let counter = Tiktoken::default();
    let ours = |conversation: &Conversation| counter.count_conversation(conversation);
    let prompt: String = (0..3_040)
        .map(|n| format!("Rule {n}: keep the change small.\n"))
        .collect();
    let mut history = vec![
        Message::text(Role::System, prompt),
        Message::text(Role::User, "fix the commit author"),
    ];
    shell_steps(&mut history, 0, 3, 150);
    history.push(Message::text(Role::Assistant, "Done: the author is fixed."));
    let system = counter.count_message(&history[0]);
    assert!((29_000..30_000).contains(&system), "{system}");
    let mut state = SessionState::default();
    let first = compactor
        .prepare(Conversation::new(history.clone()), &mut state)
        .await
        .unwrap();
    // The provider counted request 1 with its prefix; the person answers with a screenshot.
    state.reported_usage = Some(ReportedUsage::answered(
        history.len(),
        ours(&first.conversation) + PREFIX,
    ));
    history.push(Message::new(
        Role::User,
        vec![
            Part::text("[Image #1] the page still shows the old author"),
            Part::Image(condense_core::Image {
                source: serde_json::json!({"type": "url", "url": "https://example.com/1.png"}),
                extra: condense_core::JsonMap::new(),
            }),
        ],
    ));
    let second = compactor
        .prepare(Conversation::new(history.clone()), &mut state)
        .await
        .unwrap();
    // Nothing older than the recent turns to summarize: the cut alone makes it fit, and the
    // report says so.
    assert_eq!(
        second.report.compaction,
        CompactionOutcome::NothingToCompact { cut_to_fit: 1 }
    );
    let shown = condense_host::render_report(
        "run.json",
        "openai",
        &condense_host::Config::built_in().unwrap(),
        &second.report,
        false,
        None,
    );
    assert!(
        shown.contains(
            "nothing to summarize: the recent turns are all there is; over the window, so 1 cut to fit"
        ),
        "{shown}"
    );
    assert!(ours(&second.conversation) + PREFIX <= WINDOW);
    let screenshot = |conversation: &Conversation| {
        conversation
            .messages
            .iter()
            .find(|message| message.plain_text().starts_with("[Image #1]"))
            .map(|message| message.parts.clone())
    };
    let sent = screenshot(&second.conversation).unwrap();
    assert!(!sent.iter().any(|part| matches!(part, Part::Image(_))));

    // The answer to request 2 is one step; the provider counted request 2 as sent.
    let third = after_one_step(&compactor, history, &mut state, &second, PREFIX, WINDOW).await;
    assert_eq!(screenshot(&third.conversation), Some(sent));
    assert_eq!(third.report.prune.messages.len(), 1);
}

/// Under a harness whose system prompt and tools leave 2,500 tokens of a 20K window, a session
/// that reads a new file at every step: a summary listing the files read comes to more than the
/// room, and requests go out with it written again smaller, the earliest files given up. That
/// is for the request that needed it only: the frozen head keeps the summary as first written,
/// and the next summary folds that, so every file it listed is listed again, and given up again
/// only where the room still needs it. (Folding the smaller one, a file once given up was gone
/// from every later summary.)
#[tokio::test]
async fn a_summary_written_again_smaller_gives_up_its_files_for_one_request_only() {
    let compactor = compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "20000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "2000"),
    ]);
    let counter = Tiktoken::default();
    let ours = |messages: &[Message]| -> usize { counter.count_each(messages).iter().sum() };
    let provider = |ours: usize| 17_500 + ours * 3 / 2;
    let mut history = vec![
        Message::text(Role::System, "You are a careful agent."),
        Message::text(Role::User, "make the checks pass"),
    ];
    let mut state = SessionState::default();
    // The summary each compaction wrote (as first written), and the one it sent.
    let mut summaries: Vec<(String, String)> = Vec::new();
    for step in 0..90 {
        let prepared = compactor
            .prepare(Conversation::new(history.clone()), &mut state)
            .await
            .unwrap();
        let sent = prepared.conversation.messages;
        assert!(provider(ours(&sent)) <= 20_000, "request {step}");
        if matches!(
            prepared.report.compaction,
            CompactionOutcome::Summarized { .. }
        ) {
            let summary = sent
                .iter()
                .find(|message| message.is_compaction_summary())
                .unwrap()
                .plain_text();
            let written = match &state.head.as_ref().unwrap().whole_summary {
                Some(whole) => {
                    assert!(summary.contains(&whole.sent), "request {step}");
                    whole.whole.clone()
                }
                None => summary.clone(),
            };
            summaries.push((written, summary));
        }
        let answer = module_read(step, 20);
        state.reported_usage = Some(ReportedUsage::answered(
            sent.len(),
            provider(ours(&sent) + ours(&answer[..1])),
        ));
        history.extend(answer);
    }
    let modules = |text: &str| -> std::collections::BTreeSet<String> {
        text.match_indices("module_")
            .map(|(at, _)| text[at..at + 9].to_owned())
            .collect()
    };
    // Each summary folds the one before as first written: no file it listed is gone.
    for pair in summaries.windows(2) {
        let (before, after) = (modules(&pair[0].0), modules(&pair[1].0));
        assert!(
            before.is_subset(&after),
            "gone: {:?}",
            before.difference(&after).collect::<Vec<_>>()
        );
    }
    let given_up = summaries
        .iter()
        .filter(|(written, sent)| modules(written) != modules(sent))
        .count();
    assert!(given_up >= 5, "{given_up} summaries gave up files");
}

/// The agent's `step`: a Read of a module of its own, `lines` lines of about eight tokens each.
fn module_read(step: usize, lines: usize) -> [Message; 2] {
    let output: String = (0..lines)
        .map(|line| format!("fn check_{step}_{line}() {{}}\n"))
        .collect();
    tool_step(
        &format!("call_{step}"),
        "Read",
        serde_json::json!({
            "file_path": format!("/home/dev/parser/src/module_{step:02}/implementation.rs")
        }),
        output,
    )
}

/// The first compaction of a session whose tools and system prompt take 11,000 of a 16K
/// window, before the provider's figures give them apart from the tokenizer's scale: the
/// request goes out with the reply's limit the harness asked (4,096) lowered so that the
/// provider's count of the request and the limit fit the window, as the provider requires.
/// Scaling the provider's figure by what condense's count went down by takes the prefix to
/// shrink with the conversation, and sent the limit unchanged over the window. (Sized by its
/// one figure, the request may fill three quarters of what the prefix leaves before it is due:
/// fourteen steps are.)
#[tokio::test]
async fn the_first_compaction_lowers_the_reply_s_limit_by_the_provider_s_count() {
    const PREFIX: usize = 11_000;
    const WINDOW: usize = 16_000;
    let compactor = compactor(&AT_16K);
    let counter = Tiktoken::default();
    let mut messages = vec![
        Message::text(Role::System, "You are a careful agent."),
        Message::text(Role::User, "make the checks pass"),
    ];
    shell_steps(&mut messages, 0, 14, 300);
    // The provider counted the request before the last step, with the prefix.
    let answered = messages.len() - 2;
    let mut state = SessionState {
        reported_usage: Some(ReportedUsage::answered(
            answered,
            counter
                .count_each(&messages[..=answered])
                .iter()
                .sum::<usize>()
                + PREFIX,
        )),
        ..SessionState::default()
    };
    let mut conversation = Conversation::new(messages);
    conversation.envelope = serde_json::json!({"model": "m", "max_tokens": 4_096})
        .as_object()
        .cloned();
    let sent = compactor.prepare(conversation, &mut state).await.unwrap();
    let limit = summarized_within(&sent, PREFIX, WINDOW);
    assert_eq!(
        sent.report.reply_limit.map(|limit| limit.sent as usize),
        Some(limit)
    );
}

/// `count` tool definitions of about 276 tokens each, and condense's count of them all.
fn tool_definitions(count: usize) -> (Vec<serde_json::Value>, usize) {
    let tools: Vec<serde_json::Value> = (0..count)
        .map(|tool| {
            serde_json::json!({
                "name": format!("tool_{tool}"),
                "description": format!("Tool {tool} checks one part of the build. ").repeat(25),
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            })
        })
        .collect();
    let tokens =
        Tiktoken::default().count_text(&serde_json::Value::from(tools.clone()).to_string());
    (tools, tokens)
}

/// Twelve shell steps of about 500 tokens beside `tools` tool definitions (about 276 tokens
/// each), with the harness's 4,096-token reply limit: the conversation and the tools' count.
fn checks_with_tools(tools: usize) -> (Conversation, usize) {
    let (tools, tools_tokens) = tool_definitions(tools);
    let mut messages = vec![
        Message::text(Role::System, "You are a careful agent."),
        Message::text(Role::User, "make the checks pass"),
    ];
    shell_steps(&mut messages, 0, 12, 500);
    let mut conversation = Conversation::new(messages);
    conversation.envelope = serde_json::json!({"model": "m", "max_tokens": 4_096, "tools": tools})
        .as_object()
        .cloned();
    (conversation, tools_tokens)
}

/// A reply that stopped at the limit condense lowered (the proxy reads `max_tokens` in the
/// answer) asks for more room. Where tools take 11K of a 16K window, a compaction leaves the
/// conversation three quarters of the rest and lowers the reply's limit to what is left; the
/// same request prepared again after that reply was cut, as the client sends it to try again,
/// leaves the reply twice the limit that cut it, here more than the reserve the harness keeps
/// for it, so the limit goes out as the harness asked, and the conversation is compacted to
/// fit beside it. Where tools leave less, the conversation gives up all it can.
#[tokio::test]
async fn a_reply_cut_at_a_lowered_limit_gets_twice_the_room_next_time() {
    const WINDOW: usize = 16_000;
    let compactor = compactor(&AT_16K);
    let counter = Tiktoken::default();
    for (tools, least_room) in [(40, 4_096), (46, 3_000)] {
        let (conversation, tools_tokens) = checks_with_tools(tools);
        let prepare = |mut state: SessionState| {
            let (compactor, conversation) = (&compactor, conversation.clone());
            async move {
                let sent = compactor.prepare(conversation, &mut state).await.unwrap();
                (sent, state)
            }
        };
        let (first, mut state) = prepare(SessionState::default()).await;
        let cut = summarized_within(&first, tools_tokens, WINDOW);
        assert!(
            cut < 2_048 + 1_024,
            "{tools_tokens} tokens of tools: lowered to {cut}"
        );
        assert_eq!(state.reply_floor, 0);
        state.record_cut_reply(cut, None);
        let (again, kept) = prepare(state).await;
        let room = summarized_within(&again, tools_tokens, WINDOW);
        assert!(
            room >= least_room && room <= 4_096,
            "{tools_tokens} tokens of tools: {cut} then {room}"
        );
        assert!(
            counter.count_conversation(&again.conversation)
                < counter.count_conversation(&first.conversation) / 2
        );
        assert_eq!(
            kept.reply_floor,
            2 * cut,
            "the floor stays with the session"
        );
    }
}

/// A compaction leaves its request under the point at which it is due, not only under the
/// window: where tools take 11K of a 16K window and the agent's last reply wrote a whole file
/// (a Write of about 2,500 tokens, the longest reply of the session), the reply keeps room for a
/// reply as long, the Write's input cut to a preview (stored whole) to make it. Fitted to the
/// window alone, the request kept the whole Write and went out with the reply's limit lowered
/// to less than the agent's last reply took; the next as long was cut short.
#[tokio::test]
async fn a_compaction_leaves_the_reply_room_for_the_agent_s_longest_reply() {
    const WINDOW: usize = 16_000;
    let compactor = compactor(&AT_16K);
    let counter = Tiktoken::default();
    let (mut conversation, tools_tokens) = checks_with_tools(40);
    let file: String = (0..250)
        .map(|line| format!("pub fn check_{line}() -> bool {{ true }}\n"))
        .collect();
    let write = tool_step(
        "call_write",
        "Write",
        serde_json::json!({"file_path": "/home/dev/checks/src/lib.rs", "content": file}),
        "File created successfully at: /home/dev/checks/src/lib.rs".to_owned(),
    );
    let reply = counter.count_message(&write[0]);
    assert!(reply > 2_000, "{reply}");
    conversation.messages.extend(write);
    let mut state = SessionState::default();
    let sent = compactor.prepare(conversation, &mut state).await.unwrap();
    let limit = summarized_within(&sent, tools_tokens, WINDOW);
    assert!(
        limit >= reply,
        "a reply of {reply} tokens, a limit of {limit}"
    );
    let CompactionOutcome::Summarized {
        previewed_inputs, ..
    } = sent.report.compaction
    else {
        unreachable!("summarized_within checked it");
    };
    assert_eq!(previewed_inputs, 1);
}

/// A last exchange no request could hold: where tools take 11K of a 16K window, the agent's
/// last step thought for about 6K tokens before its call, a block the provider takes only whole
/// and as signed. Kept whole, the request was over the window, refused, and sent again as it
/// was (nothing new to summarize): the session stopped there. The exchange now goes to the
/// summary too, and the request, the summary and its continuation, fits.
#[tokio::test]
async fn a_last_exchange_no_request_could_hold_goes_to_the_summary_too() {
    const WINDOW: usize = 16_000;
    let compactor = compactor(&AT_16K);
    let (conversation, tools_tokens, exchange) = checks_then_a_long_thought(600);
    assert!(exchange + tools_tokens > WINDOW);
    let mut state = SessionState::default();
    let sent = compactor
        .prepare(conversation.clone(), &mut state)
        .await
        .unwrap();
    let CompactionOutcome::Summarized { split, .. } = &sent.report.compaction else {
        panic!("{:?}", sent.report.compaction);
    };
    assert_eq!(split.rule, condense_compact::TailRule::NoRoom);
    let config = config(&AT_16K);
    let shown =
        condense_host::render_report("run.json", "anthropic", &config, &sent.report, false, None);
    assert!(
        shown.contains("the last exchange alone over the window"),
        "{shown}"
    );
    // The client's next request, the agent's answer and one more step after the whole history:
    // the frozen head stands for all of it, the summary first, the new step after it.
    let mut next = conversation;
    next.messages.extend(tool_step(
        "call_next",
        "bash",
        serde_json::json!({"command": "cargo test -p parser --release"}),
        "test result: ok. 12 passed".to_owned(),
    ));
    let again = compactor.prepare(next.clone(), &mut state).await.unwrap();
    let summary_at = |messages: &[Message]| {
        messages
            .iter()
            .position(Message::is_compaction_summary)
            .unwrap()
    };
    let at = summary_at(&again.conversation.messages);
    assert_eq!(
        again.conversation.messages[at],
        sent.conversation.messages[summary_at(&sent.conversation.messages)]
    );
    assert_eq!(
        again.conversation.messages[at + 1..],
        next.messages[next.messages.len() - 2..]
    );
    let last = sent.conversation.messages.last().unwrap();
    assert!(last.is_compaction_summary(), "{last:?}");
    assert!(last.plain_text().contains("cargo test -p parser"));
    assert!(!sent.conversation.messages.iter().any(|message| {
        message
            .parts
            .iter()
            .any(|part| matches!(part, Part::Thinking(_)))
    }));
    summarized_within(&sent, tools_tokens, WINDOW);
}

/// The same cut where the provider's count of the cut request is the session's only figure
/// (its first answer was the one cut): the request sent again is sized by that figure, what it
/// counted beyond condense's count a fixed part, and leaves the reply twice the limit that cut
/// it. Taken as condense's count scaled, the prefix seemed to shrink with the conversation, and
/// the request sent again left the reply less than the limit that had cut it.
#[tokio::test]
async fn a_reply_cut_at_the_session_s_first_figure_gets_twice_the_room() {
    const WINDOW: usize = 16_000;
    let compactor = compactor(&AT_16K);
    let counter = Tiktoken::default();
    let (conversation, tools_tokens) = checks_with_tools(40);
    let mut state = SessionState::default();
    let first = compactor
        .prepare(conversation.clone(), &mut state)
        .await
        .unwrap();
    let cut = summarized_within(&first, tools_tokens, WINDOW);
    // The provider counted the request as it went out, its tools beside its messages.
    let input = counter.count_conversation(&first.conversation) + tools_tokens;
    assert!(state.record_cut_short(Some(input)));
    let again = compactor.prepare(conversation, &mut state).await.unwrap();
    let room = summarized_within(&again, tools_tokens, WINDOW);
    assert!(room >= (2 * cut).min(4_096), "{cut} then {room}");
}

/// Before the provider has reported any figure (a resumed session's first request), the tool
/// definitions the request carries are counted beside its messages: thirty steps that fit a
/// 32K window alone are due with 8K tokens of tools, and compacted to fit the window beside
/// them, with the reply's limit. Without the tools the same messages are not due.
#[tokio::test]
async fn a_first_request_s_tool_definitions_count_before_any_figure() {
    const WINDOW: usize = 32_000;
    let compactor = compactor(&DUE_AT_32K);
    let counter = Tiktoken::default();
    let (tools, tools_tokens) = tool_definitions(30);
    let history = thirty_steps();
    let messages = counter.count_conversation(&history);
    let usable = WINDOW - 4_096;
    assert!(
        messages < usable && messages + tools_tokens > usable,
        "{messages} tokens of messages and {tools_tokens} of tools"
    );

    let alone = compactor
        .prepare(history.clone(), &mut SessionState::default())
        .await
        .unwrap();
    assert_eq!(alone.report.compaction, CompactionOutcome::NotDue);

    let mut conversation = history;
    conversation.envelope = serde_json::json!({"model": "m", "max_tokens": 4_096, "tools": tools})
        .as_object()
        .cloned();
    let sent = compactor
        .prepare(conversation, &mut SessionState::default())
        .await
        .unwrap();
    summarized_within(&sent, tools_tokens, WINDOW);
}

/// A harness that embeds condense meets the provider's refusal itself: a request condense
/// counts under the window, which a provider counting 1.4 of its tokens per condense token
/// refuses, is recorded as refused with the count the refusal gives
/// ([`condense_host::refusal::too_long`]), and the same history prepared again is compacted to
/// what the provider takes. A state nothing was prepared from records nothing.
#[tokio::test]
async fn a_request_the_provider_refused_is_prepared_again_by_its_count() {
    const WINDOW: usize = 32_000;
    let compactor = compactor(&DUE_AT_32K);
    let counter = Tiktoken::default();
    let provider = |conversation: &Conversation| counter.count_conversation(conversation) * 7 / 5;
    assert!(!SessionState::default().record_refusal(40_000));

    let history = thirty_steps();
    let mut state = SessionState::default();
    let first = compactor
        .prepare(history.clone(), &mut state)
        .await
        .unwrap();
    assert_eq!(first.report.compaction, CompactionOutcome::NotDue);
    let counted = provider(&first.conversation);
    assert!(counted > WINDOW, "{counted}");
    // Anthropic's words for it.
    let error = serde_json::json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": format!("prompt is too long: {counted} tokens > {WINDOW} maximum")}});
    let refusal = condense_host::refusal::too_long(error.to_string().as_bytes()).unwrap();
    assert!(state.record_refusal(refusal.input_tokens(WINDOW)));

    let again = compactor.prepare(history, &mut state).await.unwrap();
    assert!(
        matches!(
            again.report.compaction,
            CompactionOutcome::Summarized { .. }
        ),
        "{:?}",
        again.report.compaction
    );
    let counted = provider(&again.conversation);
    assert!(
        counted + 4_096 <= WINDOW,
        "{counted} tokens by the provider's count, with the reply's reserve over the window"
    );
}

/// A harness records the provider's count of each answered request with
/// `SessionState::record_answer`: after a summary the client's history is longer than the
/// request condense sent, and the figure stands at the answer as the sent request is followed
/// by it, so the trigger counts from it (only the one step after the answer counted by
/// condense). A state nothing was prepared from records nothing.
#[tokio::test]
async fn an_answer_s_figure_recorded_after_a_summary_stands_at_the_answer() {
    let compactor = compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "20000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "2000"),
    ]);
    let counter = Tiktoken::default();
    assert!(!SessionState::default().record_answer(1_000));
    let mut history = thirty_steps().messages;
    let mut state = SessionState::default();
    let first = compactor
        .prepare(Conversation::new(history.clone()), &mut state)
        .await
        .unwrap();
    assert!(
        matches!(
            first.report.compaction,
            CompactionOutcome::Summarized { .. }
        ),
        "{:?}",
        first.report.compaction
    );
    assert!(history.len() > first.conversation.messages.len());
    let answered = history.len();
    shell_steps(&mut history, 1, 1, 100);
    let figure = counter.count_conversation(&first.conversation)
        + 3_000
        + counter.count_message(&history[answered]);
    assert!(state.record_answer(figure));
    let next = compactor
        .prepare(Conversation::new(history.clone()), &mut state)
        .await
        .unwrap();
    match next.report.measured {
        condense_host::Measure::ProviderUsage {
            reported,
            counted_after,
            ..
        } => {
            assert_eq!(reported, figure);
            assert_eq!(counted_after, counter.count_message(&history[answered + 1]));
        }
        other => panic!("the figure was not used: {other:?}"),
    }
}

/// The checks of [`checks_with_tools`] (40 tools) with a last step that thought `lines` lines
/// before its call, and condense's count of that step's call message.
fn checks_then_a_long_thought(lines: usize) -> (Conversation, usize, usize) {
    let (mut conversation, tools_tokens) = checks_with_tools(40);
    let thought: String = (0..lines)
        .map(|line| format!("step {line}: the parser may skip a line here\n"))
        .collect();
    let mut step = tool_step(
        "call_last",
        "bash",
        serde_json::json!({"command": "cargo test -p parser"}),
        "test result: ok. 12 passed".to_owned(),
    );
    step[0].parts.insert(
        0,
        Part::Thinking(condense_core::Thinking {
            text: thought,
            signature: Some("c2lnbmVk".to_owned()),
            extra: Default::default(),
        }),
    );
    let exchange = Tiktoken::default().count_each(&step).iter().sum();
    conversation.messages.extend(step);
    (conversation, tools_tokens, exchange)
}

/// A runtime for a property's requests, and the compactor for `window` with the reply's 4,096.
fn at_window(window: usize) -> (tokio::runtime::Runtime, Compactor) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let window = window.to_string();
    let compactor = compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", &window),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "4096"),
    ]);
    (runtime, compactor)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// The last exchange is summarized only where no request could hold it: where the system
    /// prompt, the tools and the exchange alone are over the window, the request is the summary
    /// and its continuation, and fits; wherever the exchange goes out, it goes out as it came,
    /// its thinking whole.
    #[test]
    fn the_last_exchange_is_summarized_only_where_no_request_could_hold_it(
        lines in 10usize..900,
        window in 14_000usize..24_000,
    ) {
        let (runtime, compactor) = at_window(window);
        let (conversation, tools_tokens, exchange) = checks_then_a_long_thought(lines);
        let counter = Tiktoken::default();
        let system = counter.count_message(&conversation.messages[0]);
        let sent = runtime
            .block_on(compactor.prepare(conversation.clone(), &mut SessionState::default()))
            .unwrap();
        let messages = &sent.conversation.messages;
        let no_room = matches!(
            &sent.report.compaction,
            CompactionOutcome::Summarized { split, .. }
                if split.rule == condense_compact::TailRule::NoRoom
        );
        let alone = system + tools_tokens + exchange;
        proptest::prop_assert_eq!(no_room, alone > window, "{} tokens alone", alone);
        if no_room {
            proptest::prop_assert!(messages.last().unwrap().is_compaction_summary());
            proptest::prop_assert!(
                counter.count_conversation(&sent.conversation) + tools_tokens <= window
            );
        } else {
            let at = messages.len() - 2;
            proptest::prop_assert_eq!(&messages[at..], &conversation.messages[conversation.messages.len() - 2..]);
        }
    }

    /// A request sent again after its reply was cut at the limit condense lowered leaves the
    /// reply more room than the request that was cut, up to the reserve, and fits the window:
    /// whatever the agent's last step thought and whatever the window, a reply cut once is not
    /// sent back into the room that cut it, unless the request was the summary and its
    /// continuation alone already, all that the system prompt and tools leave room for.
    #[test]
    fn a_request_sent_again_after_a_cut_leaves_the_reply_more_room(
        lines in 10usize..900,
        window in 15_000usize..24_000,
    ) {
        let (runtime, compactor) = at_window(window);
        let (conversation, tools_tokens, _) = checks_then_a_long_thought(lines);
        let counter = Tiktoken::default();
        let room = |sent: &condense_host::Compaction| {
            window.saturating_sub(counter.count_conversation(&sent.conversation) + tools_tokens)
        };
        let mut state = SessionState::default();
        let first = runtime
            .block_on(compactor.prepare(conversation.clone(), &mut state))
            .unwrap();
        let Some(limit) = first.report.reply_limit else {
            return Ok(());
        };
        let cut = limit.sent as usize;
        state.record_cut_reply(cut, None);
        let again = runtime.block_on(compactor.prepare(conversation, &mut state)).unwrap();
        let limit = again.conversation.envelope.as_ref().unwrap()["max_tokens"]
            .as_u64()
            .unwrap() as usize;
        proptest::prop_assert!(room(&again) >= limit, "{} left for a limit of {}", room(&again), limit);
        // More room, unless the request was the summary and its continuation alone already
        // (the system prompt and tools leave the reply less than twice the cut).
        let summary_alone = again.conversation.messages.last().is_some_and(Message::is_compaction_summary);
        proptest::prop_assert!(
            limit > cut || limit == 4_096 || summary_alone,
            "cut at {}, sent again with {} ({} left)", cut, limit, room(&again)
        );
    }
}

/// Every cut reply of a session under a harness whose system prompt and tools leave 3,000
/// tokens of a 20K window, its 60 steps each reading a file of about 650 tokens, prepared with
/// `compactor` (its window 20K, its reply's reserve 2,000): where a request goes out with its
/// reply's limit lowered, the reply is cut there, and the same request prepared again must
/// leave the reply twice that limit, up to the reserve. The outcome of each such request, and
/// of it sent again.
async fn cut_replies_sent_again(
    compactor: &Compactor,
) -> Vec<(CompactionOutcome, CompactionOutcome)> {
    const WINDOW: usize = 20_000;
    let counter = Tiktoken::default();
    let ours = |messages: &[Message]| -> usize { counter.count_each(messages).iter().sum() };
    let provider = |ours: usize| 17_000 + ours * 3 / 2;
    let request = |messages: &[Message]| {
        let mut conversation = Conversation::new(messages.to_vec());
        conversation.envelope = serde_json::json!({"model": "m", "max_tokens": 2_000})
            .as_object()
            .cloned();
        conversation
    };
    let mut history = vec![
        Message::text(Role::System, "You are a careful agent."),
        Message::text(Role::User, "make the checks pass"),
    ];
    let mut state = SessionState::default();
    let mut outcomes = Vec::new();
    for step in 0..60 {
        let prepared = compactor
            .prepare(request(&history), &mut state)
            .await
            .unwrap();
        let sent = prepared.conversation.messages.clone();
        if let Some(limit) = prepared.report.reply_limit {
            let input = provider(ours(&sent));
            let mut after_the_cut = state.clone();
            assert!(after_the_cut.record_cut_short(Some(input)));
            let again = compactor
                .prepare(request(&history), &mut after_the_cut)
                .await
                .unwrap();
            let room = WINDOW - provider(ours(&again.conversation.messages));
            let wanted = (2 * limit.sent as usize).min(2_000);
            assert!(
                room >= wanted,
                "request {step}: cut at {}, then {room}: {:?}",
                limit.sent,
                again.report.compaction
            );
            outcomes.push((prepared.report.compaction, again.report.compaction));
        }
        let answer = module_read(step, 80);
        state.reported_usage = Some(ReportedUsage::answered(
            sent.len(),
            provider(ours(&sent) + ours(&answer[..1])),
        ));
        history.extend(answer);
    }
    outcomes
}

/// The compactor [`cut_replies_sent_again`] runs: a 20K window, 2,000 tokens for the reply.
fn at_20k() -> Compactor {
    compactor(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "20000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "2000"),
    ])
}

/// A reply cut at a lowered limit where nothing is left to summarize
/// ([`cut_replies_sent_again`]): each compaction keeps the last exchange alone (its output cut
/// to a preview) beside the summary, and the reply's limit goes out lowered to what that
/// leaves. The same request prepared again after the reply was cut there has nothing new to
/// summarize: it went out as it was, in the room that had cut the reply, and the reply was cut
/// again. Now condense's summary is written again smaller, for that request, to leave the
/// reply twice the limit that cut it, up to the reserve.
#[tokio::test]
async fn a_reply_cut_with_nothing_new_to_summarize_gets_its_room_from_the_summary() {
    let outcomes = cut_replies_sent_again(&at_20k()).await;
    // The compaction kept the last exchange alone: the request sent again has nothing new to
    // summarize.
    let last_exchange_alone = outcomes
        .iter()
        .filter(|(prepared, _)| {
            matches!(prepared, CompactionOutcome::Summarized { split, .. }
                if split.tail_start == split.last_exchange)
        })
        .count();
    assert!(last_exchange_alone >= 10, "{last_exchange_alone}");
}

/// A model that writes a long summary, as a capable one does: every file the head read, with
/// what it found there, under the template's sections.
struct Thorough;

#[async_trait::async_trait]
impl condense_summarize::Summarizer for Thorough {
    fn name(&self) -> &str {
        "thorough-model"
    }

    async fn summarize(
        &self,
        head: &[Message],
        _prompt: &str,
    ) -> Result<String, condense_summarize::SummarizeError> {
        let files: Vec<String> = head
            .iter()
            .flat_map(|message| &message.parts)
            .filter_map(|part| match part {
                Part::ToolCall(call) => call.input["file_path"].as_str().map(str::to_owned),
                _ => None,
            })
            .collect();
        let found: String = files
            .iter()
            .map(|file| format!("- {file}: eighty checks, each an empty function; none fails\n"))
            .collect();
        let listed: String = files.iter().map(|file| format!("- {file}\n")).collect();
        Ok(format!(
            "## Goal\nThe person asked: make the checks pass.\n## Instructions\nNone given.\n\
             ## Discoveries\n{found}## Accomplished\nRead {} modules.\n\
             ## Relevant files / directories\n{listed}",
            files.len()
        ))
    }
}

/// [`a_reply_cut_with_nothing_new_to_summarize_gets_its_room_from_the_summary`] with a model
/// writing the summaries. Its summary is not asked for again where nothing is new; condense's
/// own, folding it, is written smaller in its place for the request sent again. Sent as the
/// model wrote it, the request was answered in the room that had cut the reply, and cut again.
#[tokio::test]
async fn a_models_summary_with_nothing_new_gives_a_cut_reply_its_room() {
    let outcomes = cut_replies_sent_again(&at_20k().with_summarizer(Box::new(Thorough))).await;
    let by = |outcome: &CompactionOutcome| match outcome {
        CompactionOutcome::Summarized { summarizer, .. } => Some(summarizer.clone()),
        _ => None,
    };
    // Requests sent again whose summary the model had written, and that went out with
    // condense's in its place.
    let written_again = outcomes
        .iter()
        .filter(|(prepared, again)| {
            by(prepared).as_deref() == Some("thorough-model")
                && by(again).as_deref() == Some("extractive")
        })
        .count();
    assert!(written_again >= 10, "{written_again}");
}

/// A last exchange the window holds, but not beside the room a cut reply asked for: where tools
/// take 11K of a 16K window, the agent's last step thought for about 4,300 tokens before its
/// call, a block the provider takes only whole. The first request keeps the exchange as it
/// came, its reply's limit lowered to the few hundred tokens left, and the reply is cut there.
/// Sent again, the request held the exchange in the same room and the reply was cut again. Now
/// the exchange goes to the summary, as where no request could hold it, and the reply gets
/// twice the room that cut it.
#[tokio::test]
async fn a_last_exchange_that_leaves_a_cut_reply_no_room_goes_to_the_summary() {
    const WINDOW: usize = 16_000;
    let compactor = compactor(&AT_16K);
    let (conversation, tools_tokens, _) = checks_then_a_long_thought(360);
    let mut state = SessionState::default();
    let first = compactor
        .prepare(conversation.clone(), &mut state)
        .await
        .unwrap();
    let exchange = &conversation.messages[conversation.messages.len() - 2..];
    let sent = &first.conversation.messages;
    assert_eq!(&sent[sent.len() - 2..], exchange);
    let cut = summarized_within(&first, tools_tokens, WINDOW);
    assert!(cut < 1_000, "{cut}");
    state.record_cut_reply(cut, None);
    let again = compactor.prepare(conversation, &mut state).await.unwrap();
    let CompactionOutcome::Summarized { split, .. } = &again.report.compaction else {
        panic!("{:?}", again.report.compaction);
    };
    assert_eq!(split.rule, condense_compact::TailRule::NoRoom);
    let room = summarized_within(&again, tools_tokens, WINDOW);
    assert!(room >= 2 * cut, "{cut} then {room}");
    let last = again.conversation.messages.last().unwrap();
    assert!(
        last.plain_text().contains("cargo test -p parser"),
        "{last:?}"
    );
}
