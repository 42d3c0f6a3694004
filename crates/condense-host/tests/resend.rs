//! A client that resends its whole, uncompacted history with every request (every SDK, every
//! agent behind a proxy): a summary made for one request comes back byte for byte on the next,
//! and a new one is made only when the compacted form crosses the threshold again.
#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used)]

mod common;

use condense_core::testing::transcript;
use condense_core::{Conversation, Message, Part, Role, ToolOutput};
use condense_host::{CompactionOutcome, HeadOutcome, SessionState};

/// The session's requests: each assistant step is one, its input everything before it.
fn requests(conversation: &Conversation) -> Vec<Conversation> {
    conversation
        .messages
        .iter()
        .enumerate()
        .filter(|(index, message)| *index > 0 && message.role == Role::Assistant)
        .map(|(index, _)| Conversation {
            messages: conversation.messages[..index].to_vec(),
            envelope: conversation.envelope.clone(),
            side: conversation.side.clone(),
        })
        .collect()
}

/// A shared transcript's requests prepared in turn at 32K until one is summarized: the
/// compactor, the session's state after it, every request, and that one's index.
async fn up_to_the_first_summary(
    name: &str,
) -> (
    condense_host::Compactor,
    SessionState,
    Vec<Conversation>,
    usize,
) {
    let (_, session) = condense_formats::read(&transcript(name).unwrap().bytes, None).unwrap();
    let compactor = common::compactor(&[]);
    let mut state = SessionState::default();
    let all = requests(&session);
    for (index, request) in all.iter().enumerate() {
        let prepared = compactor
            .prepare(request.clone(), &mut state)
            .await
            .unwrap();
        if matches!(
            prepared.report.compaction,
            CompactionOutcome::Summarized { .. }
        ) {
            return (compactor, state, all, index);
        }
    }
    panic!("no summary of {name} at 32K")
}

#[tokio::test]
async fn every_request_after_a_summary_starts_with_the_same_bytes() {
    // An autonomous run in OpenAI format (no timestamps: the clock alone never makes
    // microcompact fire), long enough to need several summaries at 32K.
    let (_, session) = condense_formats::read(
        &transcript("openai/mini-swe-agent-sympy__sympy-13091")
            .unwrap()
            .bytes,
        None,
    )
    .unwrap();
    let compactor = common::compactor(&[]);
    let mut state = SessionState::default();
    let mut previous: Option<Vec<Message>> = None;
    let (mut summaries, mut reused, mut judged) = (0, 0, 0);
    for request in requests(&session) {
        let prepared = compactor.prepare(request, &mut state).await.unwrap();
        let report = &prepared.report;
        judged += 1;
        assert!(report.under_threshold, "{:?}", report.note);
        if let Some(HeadOutcome::Reused { replaced_by, .. }) = report.head {
            reused += 1;
            let before = previous.as_ref().unwrap();
            if !matches!(report.compaction, CompactionOutcome::Summarized { .. }) {
                // No new summary: the whole replacement is the previous request's, byte for byte.
                assert_eq!(
                    &prepared.conversation.messages[..replaced_by],
                    &before[..replaced_by],
                    "request {judged}"
                );
            }
        }
        assert!(!matches!(report.head, Some(HeadOutcome::Diverged { .. })));
        if matches!(report.compaction, CompactionOutcome::Summarized { .. }) {
            summaries += 1;
            // The summary folds the previous one in: the earlier summary was in its head.
            let head = state.head.as_ref().unwrap();
            assert!(head.replacement.iter().any(Message::is_compaction_summary));
        }
        previous = Some(prepared.conversation.messages);
    }
    eprintln!("{judged} requests: {summaries} summaries, {reused} reused the frozen head");
    // Without the frozen head every request past the first summary would summarize again.
    assert!(summaries >= 2, "{summaries} summaries");
    assert!(
        summaries * 5 < reused,
        "{summaries} summaries, {reused} reuses of {judged}"
    );
}

#[tokio::test]
async fn an_edited_history_is_judged_afresh_and_says_so() {
    let (compactor, mut state, all, index) =
        up_to_the_first_summary("openai/mini-swe-agent-sympy__sympy-13091").await;
    let old_summary = state
        .head
        .as_ref()
        .unwrap()
        .replacement
        .iter()
        .find(|message| message.is_compaction_summary())
        .cloned()
        .unwrap();
    let mut edited = all[index + 1].clone();
    let first_user = edited
        .messages
        .iter()
        .position(Message::is_user_turn)
        .unwrap();
    edited.messages[first_user] = Message::text(Role::User, "a different task");
    let prepared = compactor.prepare(edited, &mut state).await.unwrap();
    assert_eq!(
        prepared.report.head,
        Some(HeadOutcome::Diverged { at: first_user })
    );
    let json = serde_json::to_value(&prepared.report).unwrap();
    assert_eq!(json["head"], "diverged");
    // The old summary, made of the history before the edit, is gone.
    assert!(!prepared.conversation.messages.contains(&old_summary));
}

/// Claude Code clears its own old tool results after an idle hour (`[Old tool result content
/// cleared]`, all but the five most recent) and sends the history so: the head the summary
/// stands for comes back with other contents but the same conversation. It keeps its summary,
/// byte for byte, on that request and the next, instead of being judged afresh and summarized
/// again.
#[tokio::test]
async fn a_client_that_clears_its_own_old_results_keeps_the_summary() {
    let (compactor, mut state, all, index) =
        up_to_the_first_summary("anthropic/claude-code-5f8cbb78").await;
    let replacement = state.head.as_ref().unwrap().replacement.clone();
    let clear = |request: &Conversation| {
        let mut request = request.clone();
        let results: Vec<(usize, usize)> = request
            .messages
            .iter()
            .enumerate()
            .flat_map(|(m, message)| {
                message
                    .parts
                    .iter()
                    .enumerate()
                    .filter(|(_, part)| matches!(part, Part::ToolResult(_)))
                    .map(move |(p, _)| (m, p))
            })
            .collect();
        let keep = results.len().saturating_sub(5);
        for &(m, p) in &results[..keep] {
            if let Part::ToolResult(result) = &mut request.messages[m].parts[p] {
                result.content = ToolOutput::Text("[Old tool result content cleared]".into());
            }
        }
        request
    };
    for next in &all[index + 1..index + 3] {
        let prepared = compactor.prepare(clear(next), &mut state).await.unwrap();
        assert!(
            matches!(prepared.report.head, Some(HeadOutcome::Reused { .. })),
            "{:?}",
            prepared.report.head
        );
        assert!(!matches!(
            prepared.report.compaction,
            CompactionOutcome::Summarized { .. }
        ));
        assert_eq!(
            &prepared.conversation.messages[..replacement.len()],
            &replacement[..]
        );
    }
}

/// A session whose last request is over the threshold by itself (the fuzzer's `prepare` target
/// found the case with protected outputs that were, which are now carried past the summary only
/// as far as they fit; here both): the first request's summary cannot get under, so every
/// resend met a head that was that summary and the messages it carried, and summarized it
/// again, a new summary and a rewritten cached prefix on every request. Now the resend is told
/// there is nothing new, and a retry of that very request is sent the same bytes, continuation
/// message included.
#[tokio::test]
async fn a_summary_that_cannot_get_under_is_not_made_again_on_a_resend() {
    let mut messages = vec![
        Message::text(Role::System, "You are an agent."),
        Message::text(Role::User, "run the skills"),
    ];
    for step in 0..40 {
        messages.extend(condense_core::testing::tool_step(
            &format!("call_{step}"),
            "skill",
            serde_json::json!({"name": format!("s{step}")}),
            format!("skill {step} says: ") + &"the rule to keep, word by word. ".repeat(40),
        ));
    }
    // The person's own message, which nothing may cut: about 10,000 tokens of a log, over the
    // threshold (10,000) with the call before it, under the window.
    messages.push(Message::text(
        Role::User,
        "why does it fail?\n".to_owned()
            + &(0..2_200)
                .map(|line| format!("E{line} failed\n"))
                .collect::<String>(),
    ));
    let history = Conversation::new(messages);
    let config = condense_host::Config::load(&condense_host::Sources {
        env: vec![
            ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), "12000".into()),
            ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), "2000".into()),
        ],
        ..condense_host::Sources::default()
    })
    .unwrap();
    let compactor = condense_host::Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(condense_pruner::MemoryStore::new()))
        .with_clock(Box::new(condense_pruner::FixedClock(1_763_700_000_000)));
    let mut state = SessionState::default();
    let first = compactor
        .prepare(history.clone(), &mut state)
        .await
        .unwrap();
    // The skills' outputs do not fit beside that message: all but the one in the tail are
    // left to the summary.
    assert!(
        matches!(
            first.report.compaction,
            CompactionOutcome::Summarized {
                protected_summarized: 39,
                carried_messages: 0,
                ..
            }
        ),
        "{:?} {} tokens, {} usable",
        first.report.compaction,
        first.report.tokens_before,
        first.report.usable
    );
    assert!(
        !first.report.under_threshold,
        "the person's last message does not fit: {} tokens",
        first.report.tokens_after
    );
    let again = compactor
        .prepare(history.clone(), &mut state)
        .await
        .unwrap();
    assert_eq!(
        again.report.compaction,
        CompactionOutcome::NothingNew {
            previewed_outputs: 0,
            cut_to_fit: 0,
        }
    );
    assert!(matches!(
        again.report.head,
        Some(HeadOutcome::Reused { .. })
    ));
    assert_eq!(again.conversation.messages, first.conversation.messages);

    // One more message: the head is the same summary, the continuation is that request's own.
    let mut longer = history.clone();
    longer.messages.push(Message::text(Role::User, "and now?"));
    let next = compactor.prepare(longer, &mut state).await.unwrap();
    let n = first.conversation.messages.len() - 1;
    assert_eq!(
        next.conversation.messages[..n],
        first.conversation.messages[..n],
        "the prefix stays"
    );
}
