//! The pipeline end to end on every recorded session, with the extractive summarizer at a
//! 32,000-token window (4,096 reserved for the reply), `TodoWrite` protected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use condense_core::testing::transcripts;
use condense_core::{Conversation, FindingKind, Message, Part, Role};
use condense_host::{
    CompactionOutcome, Compactor, Config, FailureKind, SessionState, Sources, SummarizeErrorKind,
};
use condense_pruner::{FixedClock, MemoryStore};
use condense_summarize::{SummarizeError, Summarizer};

fn config() -> Config {
    config_with(&[])
}

/// [`config`] with more settings from the environment's layer.
fn config_with(more: &[(&str, &str)]) -> Config {
    let mut env: Vec<(String, String)> = vec![
        ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), "32000".into()),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), "4096".into()),
        ("CONDENSE_PRUNE_PROTECTED_TOOLS".into(), "TodoWrite".into()),
    ];
    env.extend(more.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    Config::load(&Sources {
        env,
        ..Sources::default()
    })
    .unwrap()
}

fn compactor(config: &Config) -> Compactor {
    at_time(config, 1_763_700_000_000)
}

/// A compactor of `config` whose clock says `ms`, its originals kept in memory.
fn at_time(config: &Config, ms: u64) -> Compactor {
    Compactor::from_config(config)
        .unwrap()
        .with_store(Box::new(MemoryStore::new()))
        .with_clock(Box::new(FixedClock(ms)))
}

fn protected_outputs(conversation: &Conversation) -> Vec<(String, Part)> {
    let pairs = conversation.tool_pairs();
    conversation
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|part| {
            let result = part.as_tool_result()?;
            (pairs.tool_name(&conversation.messages, result)? == "TodoWrite")
                .then(|| (result.call_id.clone(), part.clone()))
        })
        .collect()
}

fn person_texts(messages: &[Message]) -> Vec<Vec<Part>> {
    messages
        .iter()
        .filter(|m| m.is_user_turn())
        .map(|m| {
            m.parts
                .iter()
                .filter(|p| matches!(p, Part::Text(_) | Part::Image(_)))
                .cloned()
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn every_transcript_is_compacted_under_the_threshold_or_says_why() {
    let config = config();
    let compactor = compactor(&config);
    for transcript in transcripts().unwrap() {
        let (_, original) = condense_formats::read(&transcript.bytes, None).unwrap();
        let name = transcript.name.replace('/', "__");
        let result = compactor.compact(original.clone()).await.unwrap();
        let report = &result.report;
        insta::assert_yaml_snapshot!(name.clone(), report, {
            ".elapsed_ms" => "[elapsed]",
            ".prune.outputs" => insta::dynamic_redaction(|value, _| format!("[{} outputs]", value.as_slice().map_or(0, |s| s.len()))),
        });

        assert!(
            report.under_threshold || report.note.is_some(),
            "{name}: over the threshold without a reason"
        );
        if matches!(report.compaction, CompactionOutcome::NotDue) {
            assert!(report.under_threshold, "{name}");
        }

        // No orphaned pair: nothing the session did not already have (an interrupted call, an id
        // the agent reused).
        let before: Vec<FindingKind> = original.validate().into_iter().map(|f| f.kind).collect();
        for finding in result.conversation.validate() {
            let inherited = match &finding.kind {
                FindingKind::DuplicateCallId { call_id, .. } => {
                    before.iter().any(|k| matches!(k, FindingKind::DuplicateCallId { call_id: id, .. } if id == call_id))
                }
                FindingKind::DuplicateResult { call_id, .. } => {
                    before.iter().any(|k| matches!(k, FindingKind::DuplicateResult { call_id: id, .. } if id == call_id))
                }
                kind => before.contains(kind),
            };
            assert!(inherited, "{name}: new finding {finding}");
        }
        // Every protected output, byte for byte.
        let kept = protected_outputs(&result.conversation);
        for (call_id, part) in protected_outputs(&original) {
            assert!(
                kept.iter().any(|(id, p)| *id == call_id && *p == part),
                "{name}: protected output {call_id} lost or changed"
            );
        }
        // The last two user turns, byte for byte.
        let turns_before = person_texts(&original.messages);
        let turns_after = person_texts(&result.conversation.messages);
        let last_two = &turns_before[turns_before.len().saturating_sub(2)..];
        assert!(
            turns_after.ends_with(last_two),
            "{name}: the last user turns changed"
        );

        // Compacting the result again has nothing more to do.
        if report.under_threshold {
            let again = compactor
                .compact(result.conversation.clone())
                .await
                .unwrap();
            assert!(
                matches!(again.report.compaction, CompactionOutcome::NotDue),
                "{name}: {:?}",
                again.report.compaction
            );
            assert_eq!(again.report.prune.tokens_freed, 0, "{name}");
        }
    }
}

struct Failing;

#[async_trait]
impl Summarizer for Failing {
    fn name(&self) -> &str {
        "failing"
    }

    async fn summarize(&self, _: &[Message], _: &str) -> Result<String, SummarizeError> {
        Err(SummarizeError::Empty {
            url: "http://127.0.0.1:1/v1/chat/completions".into(),
        })
    }
}

#[tokio::test]
async fn after_three_failures_automatic_compaction_stops() {
    let transcript = condense_core::testing::transcript("claude-code/d7d349f9").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let config = config();
    let compactor = compactor(&config).with_summarizer(Box::new(Failing));
    let mut state = SessionState::default();
    for attempt in 1..=3u32 {
        let result = compactor
            .prepare(conversation.clone(), &mut state)
            .await
            .unwrap();
        match &result.report.compaction {
            CompactionOutcome::Failed {
                consecutive_failures,
                error,
                kind,
                ..
            } => {
                assert_eq!(*consecutive_failures, attempt);
                assert!(error.contains("empty summary"));
                assert_eq!(
                    *kind,
                    FailureKind::Summarizer(SummarizeErrorKind::Empty),
                    "the kind survives into the host's report"
                );
            }
            other => panic!("attempt {attempt}: {other:?}"),
        }
        assert!(
            result
                .report
                .note
                .as_deref()
                .unwrap()
                .starts_with("the summarizer failed")
        );
    }
    let result = compactor
        .prepare(conversation.clone(), &mut state)
        .await
        .unwrap();
    assert_eq!(
        result.report.compaction,
        CompactionOutcome::CircuitOpen {
            consecutive_failures: 3
        }
    );
    let saved = SessionState::from_json(&state.to_json()).unwrap();
    assert_eq!(saved, state);
}

#[tokio::test]
async fn a_claude_code_session_is_measured_with_the_provider_usage() {
    let transcript = condense_core::testing::transcript("claude-code/5f8cbb78").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let config = Config::built_in().unwrap();
    let result = compactor(&config).compact(conversation).await.unwrap();
    match result.report.measured {
        condense_host::Measure::ProviderUsage {
            reported, tokens, ..
        } => {
            assert!(
                reported > result.report.tokens_before,
                "Anthropic counts more than o200k here"
            );
            assert!(tokens >= reported);
        }
        other => panic!("{other:?}"),
    }
}

/// The continuation goes inside the summary's message (as Claude Code puts its own): the
/// provider's last message is still the client's own last one, not "Continue…" after the
/// person's request or the latest tool result.
#[tokio::test]
async fn automatic_compaction_puts_the_continuation_in_the_summary() {
    let transcript = condense_core::testing::transcript("claude-code/d7d349f9").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let config = config();
    let result = compactor(&config)
        .prepare(conversation.clone(), &mut SessionState::default())
        .await
        .unwrap();
    assert!(matches!(
        result.report.compaction,
        CompactionOutcome::Summarized { .. }
    ));
    assert_eq!(
        result.conversation.messages.last(),
        conversation.messages.last()
    );
    let summary = result
        .conversation
        .messages
        .iter()
        .find(|message| message.is_compaction_summary())
        .unwrap();
    assert!(
        summary
            .plain_text()
            .ends_with("</prior-conversation-summary>\n\nContinue if you have next steps, or stop and ask for clarification if you are unsure how to proceed.")
    );
    assert!(
        result
            .conversation
            .messages
            .iter()
            .all(|message| !message.generated
                || !message.plain_text().starts_with("Continue if you have"))
    );
}

/// A request that ends in an assistant message asks the model to go on from it (Anthropic's
/// prefill): compaction keeps it last, with no continuation message after it, on the request
/// that summarizes and on a retry of that request, which reuses the frozen summary.
#[tokio::test]
async fn a_prefilled_request_keeps_its_prefill_last() {
    let transcript = condense_core::testing::transcript("claude-code/d7d349f9").unwrap();
    let (_, mut conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    assert_eq!(conversation.messages.last().unwrap().role, Role::User);
    let prefill = Message::text(Role::Assistant, "Here is the plan:\n1.");
    conversation.messages.push(prefill.clone());
    let config = config();
    let compactor = compactor(&config);
    let mut state = SessionState::default();
    for request in ["first", "retry"] {
        let result = compactor
            .prepare(conversation.clone(), &mut state)
            .await
            .unwrap();
        if request == "first" {
            assert!(
                matches!(
                    result.report.compaction,
                    CompactionOutcome::Summarized { .. }
                ),
                "{:?}",
                result.report.compaction
            );
        }
        let messages = &result.conversation.messages;
        assert_eq!(messages.last(), Some(&prefill), "{request}");
        assert!(
            messages.iter().all(|message| !message
                .plain_text()
                .starts_with("Continue if you have next steps")),
            "{request}: no continuation message"
        );
    }
}

/// The compacted session ends as the original did, at every window: its last message is there
/// (its outputs at most cut to previews), and so is the last assistant step with all its calls.
/// A resumed agent must see where it was, never its original task as the latest message. Each
/// Chat Completions transcript also goes through as the Responses body Codex would send for it
/// (its calls and outputs items of their own).
#[tokio::test]
async fn every_transcript_ends_with_its_last_exchange_at_every_window() {
    let mut sessions = Vec::new();
    for transcript in transcripts().unwrap() {
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        if transcript.name.starts_with("openai/") {
            let chat: serde_json::Value = serde_json::from_slice(&transcript.bytes).unwrap();
            let body = condense_core::testing::responses_from_chat(&chat);
            let responses =
                condense_formats::read_json(condense_formats::Format::Responses, body).unwrap();
            sessions.push((format!("{} (Responses)", transcript.name), responses));
        }
        sessions.push((transcript.name, conversation));
    }
    for window in [8_000u32, 16_000, 32_000, 64_000] {
        let config = Config::load(&Sources {
            env: vec![
                ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), window.to_string()),
                ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), "4096".into()),
            ],
            ..Sources::default()
        })
        .unwrap();
        for (name, conversation) in &sessions {
            if conversation.messages.is_empty() {
                continue; // c001d2c0 holds only side records: nothing to end with.
            }
            let compacted = compactor(&config)
                .compact(conversation.clone())
                .await
                .unwrap()
                .conversation;
            let at = format!("{name} at {window}");
            let (Some(last_in), Some(last_out)) =
                (conversation.messages.last(), compacted.messages.last())
            else {
                panic!(
                    "{at}: {} messages in, {} out",
                    conversation.messages.len(),
                    compacted.messages.len()
                );
            };
            assert_eq!(last_in.role, last_out.role, "{at}");
            assert_eq!(last_in.parts.len(), last_out.parts.len(), "{at}");
            for (before, after) in last_in.parts.iter().zip(&last_out.parts) {
                match (before, after) {
                    (Part::ToolResult(before), Part::ToolResult(after)) => {
                        assert_eq!(before.call_id, after.call_id, "{at}")
                    }
                    _ => assert_eq!(before, after, "{at}"),
                }
            }
            let calls = |message: &Message| -> Vec<String> {
                message
                    .parts
                    .iter()
                    .filter_map(|p| p.as_tool_call().map(|c| c.id.clone()))
                    .collect()
            };
            if let Some(step) = conversation
                .messages
                .iter()
                .rev()
                .find(|m| m.role == Role::Assistant)
            {
                assert!(
                    compacted.messages.iter().any(|m| m.role == Role::Assistant
                        && calls(m) == calls(step)
                        && m.plain_text() == step.plain_text()),
                    "{at}: the last assistant step is gone"
                );
            }
            let unanswered = |c: &Conversation| -> Vec<String> {
                c.validate()
                    .into_iter()
                    .filter_map(|finding| match finding.kind {
                        FindingKind::CallWithoutResult { call_id } => Some(call_id),
                        _ => None,
                    })
                    .collect()
            };
            let before = unanswered(conversation);
            assert!(
                unanswered(&compacted).iter().all(|id| before.contains(id)),
                "{at}: a call lost its result"
            );
            assert!(
                !compacted
                    .validate()
                    .iter()
                    .any(|f| matches!(f.kind, FindingKind::ResultWithoutCall { .. })),
                "{at}: a result lost its call"
            );
        }
    }
}

/// The built-in configuration for a `window` and a reply of `output` tokens.
fn config_at(window: &str, output: &str) -> Config {
    Config::load(&Sources {
        env: vec![
            ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), window.into()),
            ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), output.into()),
        ],
        ..Sources::default()
    })
    .unwrap()
}

/// The text of the summary a compaction left in `conversation`.
fn summary_text(conversation: &Conversation) -> String {
    conversation
        .messages
        .iter()
        .find(|m| m.is_compaction_summary())
        .map(Message::plain_text)
        .expect("a summary")
}

/// A session an agent compacted on its own starts with that agent's summary, on the user's side:
/// all that is left of what came before. condense's summary carries it whole (a block quote
/// naming the agent), never quoted as the person's request and cut there, and a second
/// compaction carries it again; its numbered lines are not taken for requests.
#[tokio::test]
async fn an_agents_own_summary_is_carried_whole_through_two_compactions() {
    // Claude Code's layout: numbered sections, far longer than a quoted request may be.
    let mut theirs = String::from(
        "This session is being continued from a previous conversation that ran out of context. \
         The summary below covers the earlier portion of the conversation.\n\nSummary:\n\
         1. Primary Request and Intent:\n   Port the vector kernels to the new layout.\n\n\
         2. Key Technical Concepts:\n",
    );
    for fact in 0..80 {
        theirs.push_str(&format!(
            "   - finding {fact}: the kernel at offset {fact} reads its stride twice\n"
        ));
    }
    theirs.push_str("\n3. Pending Tasks:\n   - rerun the benchmarks");
    assert!(theirs.len() > 5_000);
    let transcript = condense_core::testing::transcript("claude-code/d7d349f9").unwrap();
    let (_, mut conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let first_turn = conversation
        .messages
        .iter()
        .position(Message::is_user_turn)
        .unwrap();
    conversation.messages[first_turn].parts = vec![Part::text(theirs.clone())];
    assert_eq!(
        conversation.messages[first_turn].harness_summary(),
        Some("Claude Code")
    );

    let first = compactor(&config_at("32000", "4096"))
        .compact(conversation)
        .await
        .unwrap();
    let second = compactor(&config_at("8000", "2000"))
        .compact(first.conversation.clone())
        .await
        .unwrap();
    for (which, compacted) in [
        ("first", &first.conversation),
        ("second", &second.conversation),
    ] {
        let summary = summary_text(compacted);
        let quoted: String = summary
            .lines()
            .skip_while(|line| *line != "Earlier summary by Claude Code, quoted in full:")
            .skip(1)
            .map_while(|line| line.strip_prefix("> ").or((line == ">").then_some("")))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(quoted, theirs, "the {which} summary:\n{summary}");
        // The person's requests are numbered from 1 after it; none is the agent's summary.
        assert!(
            !summary
                .lines()
                .any(|line| line.starts_with("1. This session")),
            "{summary}"
        );
    }
}

/// Compacting a compacted session folds the earlier summary in: every request it quoted is
/// quoted again and every file it named is named again (the earlier summary is not a user turn
/// and names no tool call, so reading the head alone would drop it all).
#[tokio::test]
async fn a_second_compaction_keeps_what_the_first_summary_kept() {
    let transcript = condense_core::testing::transcript("claude-code/d7d349f9").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let first = compactor(&config_at("32000", "4096"))
        .compact(conversation)
        .await
        .unwrap();
    let first_summary = summary_text(&first.conversation);
    let second = compactor(&config_at("8000", "2000"))
        .compact(first.conversation)
        .await
        .unwrap();
    assert!(
        matches!(
            second.report.compaction,
            CompactionOutcome::Summarized { .. }
        ),
        "{:?}",
        second.report.compaction
    );
    let second_summary = summary_text(&second.conversation);
    let quoted: Vec<&str> = first_summary
        .lines()
        .filter(|line| {
            line.split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    let files: Vec<&str> = first_summary
        .lines()
        .filter(|line| line.starts_with("- /") || line.starts_with("- ."))
        .collect();
    assert!(!quoted.is_empty() && !files.is_empty(), "{first_summary}");
    for line in quoted.iter().chain(&files) {
        let (_, body) = line.split_once(' ').unwrap();
        assert!(
            second_summary.contains(body),
            "lost from the first summary: {line}\n---\n{second_summary}"
        );
    }
}

/// The summary's size is what every later request pays for: at 24K and 32K windows, on every
/// shared session that compacts, the summary's message (tags and continuation included) stays
/// within the default `summarizer.budget_tokens` (3,000), and it still names every file the
/// summarized messages touched and quotes every request of the person's among them.
#[tokio::test]
async fn every_summary_is_within_its_budget_with_every_file_and_request() {
    let points = summaries_with_every_file_and_request(|conversation| conversation).await;
    assert!(points >= 12, "{points} compaction points");
}

/// A person's message that holds a `<summary>` line (Claude Code's `<task-notification>` when a
/// background command ends; a C# doc comment pasted in) is quoted in condense's summary like any
/// other, and the summary stays whole: it used to be read as a model's answer, whose
/// `<summary>` block is the summary, and became that one line, naming no file.
#[tokio::test]
async fn a_request_holding_a_summary_tag_leaves_the_summary_whole() {
    const NOTIFICATION: &str = "<task-notification>\n<task-id>b0be39e</task-id>\n<status>completed</status>\n<summary>Background command \"Run the tests\" completed (exit code 0)</summary>\n</task-notification>\n";
    let points = summaries_with_every_file_and_request(|mut conversation| {
        // (Two of the logs hold side records only: no request to edit.)
        let said = conversation
            .messages
            .iter_mut()
            .filter(|message| message.is_user_turn())
            .flat_map(|message| message.parts.iter_mut())
            .find_map(|part| match part {
                Part::Text(said) if !said.text.trim().is_empty() => Some(said),
                _ => None,
            });
        if let Some(said) = said {
            said.text.insert_str(0, NOTIFICATION);
        }
        conversation
    })
    .await;
    assert!(points >= 12, "{points} compaction points");
}

/// Compacts every shared session, `edited`, at 24K and 32K, and checks that each summary is
/// within its budget, names every file the head's calls touched and quotes the start of each of
/// the person's requests in it: how many were summarized.
async fn summaries_with_every_file_and_request(
    edited: impl Fn(Conversation) -> Conversation,
) -> usize {
    let mut points = 0;
    for window in ["24000", "32000"] {
        let config = Config::load(&Sources {
            env: vec![
                ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), window.into()),
                ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), "4096".into()),
            ],
            ..Sources::default()
        })
        .unwrap();
        let budget = config.settings().extractive.budget_tokens;
        assert_eq!(budget, 3_000);
        for transcript in transcripts().unwrap() {
            let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
            let conversation = edited(conversation);
            let result = compactor(&config)
                .compact(conversation.clone())
                .await
                .unwrap();
            let CompactionOutcome::Summarized {
                summary_tokens,
                split,
                ..
            } = &result.report.compaction
            else {
                continue;
            };
            points += 1;
            let name = format!("{} at {window}", transcript.name);
            assert!(*summary_tokens <= budget, "{name}: {summary_tokens}");
            let summary = result
                .conversation
                .messages
                .iter()
                .find(|message| message.is_compaction_summary())
                .unwrap()
                .plain_text();
            let head = &conversation.messages[split.pinned..split.tail_start];
            for call in head
                .iter()
                .flat_map(|message| &message.parts)
                .filter_map(Part::as_tool_call)
            {
                for path in condense_core::tool_paths::touched(&call.name, &call.input).0 {
                    assert!(summary.contains(path), "{name}: {path} is not named");
                }
            }
            for turn in head.iter().filter(|message| message.is_user_turn()) {
                let text = turn.plain_text();
                let start: String = text.trim().chars().take(200).collect();
                assert!(
                    summary.contains(start.trim()),
                    "{name}: a request is not quoted: {start:?}"
                );
            }
        }
    }
    points
}

/// What the head of each round touched and asked, found without the summarizer: every path a
/// call names and the start of every request of the person's.
fn kept_facts(head: &[Message]) -> (Vec<String>, Vec<String>) {
    let paths = head
        .iter()
        .flat_map(|message| &message.parts)
        .filter_map(Part::as_tool_call)
        .flat_map(|call| {
            // A directory is named once, with or without its last `/`: looked for without.
            condense_core::tool_paths::touched(&call.name, &call.input)
                .0
                .into_iter()
                .map(condense_core::tool_paths::entry)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let requests = head
        .iter()
        .filter(|message| message.is_user_turn())
        .map(|message| {
            message
                .plain_text()
                .trim()
                .chars()
                .take(120)
                .collect::<String>()
        })
        .filter(|start| !start.trim().is_empty())
        .collect();
    (paths, requests)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 12, ..Default::default() })]

    /// Re-compaction over several rounds loses nothing: a session resumed at turns of the
    /// person's chosen at random, compacted after each (the summary of the last round in the
    /// head of the next), ends with a summary that still names every file and quotes every
    /// request any round's head had.
    #[test]
    fn nothing_is_lost_over_rounds_of_compaction(
        transcript in proptest::sample::select(vec![
            "claude-code/d7d349f9", "claude-code/5f8cbb78",
            "openai/mini-swe-agent-django__django-11138",
        ]),
        cuts in proptest::collection::vec(0.1f64..0.95, 1..4),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let whole = condense_core::testing::transcript(transcript).unwrap();
        let (_, whole) = condense_formats::read(&whole.bytes, None).unwrap();
        let turns: Vec<usize> = (1..whole.messages.len())
            .filter(|&at| whole.messages[at].is_user_turn())
            .collect();
        let mut ends: Vec<usize> = cuts
            .iter()
            .map(|cut| turns[((turns.len() - 1) as f64 * cut) as usize])
            .collect();
        ends.push(whole.messages.len());
        ends.sort_unstable();
        ends.dedup();
        let compactor = compactor(&config_at("16000", "2000"));
        let mut conversation = Conversation::new(Vec::new());
        let mut from = 0;
        let (mut paths, mut requests) = (Vec::new(), Vec::new());
        let mut summarized = false;
        for end in ends {
            conversation.messages.extend(whole.messages[from..end].iter().cloned());
            from = end;
            let result = runtime
                .block_on(compactor.compact_now(conversation.clone(), None))
                .unwrap();
            if let CompactionOutcome::Summarized { split, .. } = &result.report.compaction {
                let (p, r) = kept_facts(&conversation.messages[split.pinned..split.tail_start]);
                paths.extend(p);
                requests.extend(r);
                summarized = true;
            }
            conversation = result.conversation;
        }
        proptest::prop_assume!(summarized);
        let summary = summary_text(&conversation);
        for path in &paths {
            proptest::prop_assert!(summary.contains(path.as_str()), "{transcript}: lost {path}");
        }
        for request in &requests {
            proptest::prop_assert!(
                summary.contains(request.trim()),
                "{transcript}: lost a request: {request:?}"
            );
        }
    }
}

/// `prune.walk_when`: a harness's request that is not due for compaction is not walked with
/// "due" (the default: with the cache warm, a rewrite pays only when it saves a summary or a
/// failure), and is with "always"; a saved session compacted on purpose is walked either way.
#[tokio::test]
async fn a_request_not_due_is_walked_only_when_asked() {
    let transcript = condense_core::testing::transcript("claude-code/d7d349f9").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let config = |when: &str| {
        Config::load(&Sources {
            env: vec![
                ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), "200000".into()),
                ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), "4096".into()),
                ("CONDENSE_MICROCOMPACT_ENABLED".into(), "false".into()),
                ("CONDENSE_PRUNE_PROTECT_TOKENS".into(), "10000".into()),
                ("CONDENSE_PRUNE_MINIMUM_TOKENS".into(), "5000".into()),
                ("CONDENSE_PRUNE_WALK_WHEN".into(), when.into()),
                // Due only when the window is full: compacting early would be due here.
                ("CONDENSE_COMPACTION_CACHE_REWRITE_COST".into(), "0".into()),
            ],
            ..Sources::default()
        })
        .unwrap()
    };
    let due = compactor(&config("due"));
    let prepared = due
        .prepare(conversation.clone(), &mut SessionState::default())
        .await
        .unwrap();
    assert!(matches!(
        prepared.report.compaction,
        CompactionOutcome::NotDue
    ));
    assert_eq!(prepared.report.prune.replaced(), 0);
    assert_eq!(prepared.conversation, conversation, "nothing rewritten");

    let always = compactor(&config("always"))
        .prepare(conversation.clone(), &mut SessionState::default())
        .await
        .unwrap();
    assert!(
        always.report.prune.replaced() > 0,
        "{:?}",
        always.report.prune.tokens_freed
    );

    let on_purpose = due.compact(conversation).await.unwrap();
    assert_eq!(
        on_purpose.report.prune.replaced(),
        always.report.prune.replaced()
    );
}

/// An autonomous run (one user turn of many steps) is compacted with more of the agent's latest
/// tool calls in its tail than whole turns hold, up to ten as far as the tail budget goes: each
/// output before the last exchange whole or cut to a preview of its start (original stored), the
/// last exchange whole; and the next request of the session repeats the same previews (decisions
/// frozen, the cached prefix unchanged).
#[tokio::test]
async fn an_autonomous_runs_tail_holds_its_recent_calls_and_keeps_them_on_the_next_request() {
    let config = config();
    let ours = compactor(&config);
    let whole_turns = config_with(&[("CONDENSE_COMPACTION_MIN_TAIL_CALLS", "0")]);
    let (mut held, mut held_ten) = (0, 0);
    for transcript in transcripts().unwrap() {
        if !transcript.name.starts_with("openai/mini-swe-agent") {
            continue;
        }
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        let outputs_of = |messages: &[Message]| -> Vec<(String, String)> {
            messages
                .iter()
                .flat_map(|m| &m.parts)
                .filter_map(Part::as_tool_result)
                .map(|r| (r.call_id.clone(), r.content.text().into_owned()))
                .collect()
        };
        let originals: std::collections::HashMap<String, String> =
            outputs_of(&conversation.messages).into_iter().collect();
        // The request two steps before the end, then the last one, in one session.
        let earlier = Conversation {
            messages: conversation.messages[..conversation.messages.len() - 2].to_vec(),
            ..conversation.clone()
        };
        let earlier_again = earlier.clone();
        let mut state = SessionState::default();
        let first = ours.prepare(earlier, &mut state).await.unwrap();
        let CompactionOutcome::Summarized { split, .. } = &first.report.compaction else {
            continue;
        };
        if split.rule != condense_compact::TailRule::RecentCalls {
            continue;
        }
        let name = &transcript.name;
        let before = compactor(&whole_turns)
            .prepare(earlier_again, &mut SessionState::default())
            .await
            .unwrap();
        let CompactionOutcome::Summarized {
            split: by_turns, ..
        } = &before.report.compaction
        else {
            panic!("{name}: {:?}", before.report.compaction);
        };
        assert!(
            split.tail_calls > by_turns.tail_calls && split.tail_calls <= 10,
            "{name}: {} calls, {} by whole turns",
            split.tail_calls,
            by_turns.tail_calls
        );
        held_ten += usize::from(split.tail_calls >= 10);
        assert!(split.kept_tokens <= split.budget, "{name}");
        let sent = outputs_of(&first.conversation.messages);
        assert!(sent.len() >= split.tail_calls, "{name}");
        let mut previews = 0;
        for (id, shown) in &sent {
            let original = &originals[id];
            if shown != original {
                let start: String = original.chars().take(200).collect();
                assert!(shown.starts_with(&start), "{name}: {id} is not a preview");
                assert!(shown.contains("condense recall"), "{name}: {id}");
                previews += 1;
            }
        }
        assert!(previews > 0, "{name}: the tail fit whole, nothing to test");
        let last = sent.last().unwrap();
        assert_eq!(
            &last.1, &originals[&last.0],
            "{name}: the last output is whole"
        );

        let next = ours
            .prepare(conversation.clone(), &mut state)
            .await
            .unwrap();
        let again: std::collections::HashMap<String, String> =
            outputs_of(&next.conversation.messages)
                .into_iter()
                .collect();
        let mut repeated = 0;
        for (id, shown) in &sent {
            if let Some(now) = again.get(id) {
                assert_eq!(now, shown, "{name}: {id} changed on the next request");
                repeated += usize::from(now != &originals[id]);
            }
        }
        assert!(repeated > 0, "{name}: no preview met again");
        held += 1;
    }
    assert!(
        held >= 3,
        "only {held} mini-swe-agent runs held their recent calls"
    );
    assert!(held_ten >= 2, "only {held_ten} held ten");
}

/// An early compaction (a saving, not a necessity) does not take the agent's recent work where
/// a tail within the tail's share of the window holds it: on every request of the autonomous
/// runs at a 128K window, where only the cost model makes condense compact, each summary keeps
/// the last ten calls in the tail, none cut to a preview; where they are more than the window's
/// tail budget (8,000 tokens) they are kept in a wider tail, never more than the tail's share
/// of the usable window (a quarter).
#[tokio::test]
async fn an_early_compaction_keeps_the_recent_calls_whole() {
    let ours = compactor(&config_at("128000", "4096"));
    let (budget, share) = (8_000, (128_000 - 4_096) / 4);
    let (mut early, mut wider) = (0, 0);
    for transcript in transcripts().unwrap() {
        if !transcript.name.starts_with("openai/mini-swe-agent") {
            continue;
        }
        let name = &transcript.name;
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        let messages = &conversation.messages;
        let mut state = SessionState::default();
        for end in (1..messages.len()).filter(|&end| messages[end].role == Role::Assistant) {
            let request = Conversation {
                messages: messages[..end].to_vec(),
                ..conversation.clone()
            };
            let prepared = ours.prepare(request, &mut state).await.unwrap();
            let CompactionOutcome::Summarized {
                split, early: true, ..
            } = &prepared.report.compaction
            else {
                continue;
            };
            early += 1;
            let calls = messages[..end]
                .iter()
                .flat_map(|m| &m.parts)
                .filter(|part| matches!(part, Part::ToolCall(_)))
                .count();
            assert!(
                split.previews.is_none() && split.tail_calls >= calls.min(10),
                "{name}, request before message {end}: {split:?}"
            );
            assert!(
                split.kept_tokens <= share,
                "{name}, message {end}: {split:?}"
            );
            wider += usize::from(split.kept_tokens > budget);
        }
    }
    assert!(early >= 6, "{early} early compactions");
    assert!(wider >= 1, "no tail wider than the budget among {early}");
}

/// In a window whose tail budget is already the tail's whole share (32K: 7,000 of 27,904
/// tokens), the autonomous runs' last ten calls are often more than it holds, and no wider
/// tail is taken: an early compaction there makes the cut the window would force, the recent
/// calls as previews within the budget, but the last exchange whole (the output the agent has
/// just been given is cut only where the window needs it), and only where the window is due
/// before the session is likely to end. With no summary yet, that is the request at half the
/// usable window: no session's first such compaction comes sooner (OpenHands ponyc-4593, which
/// ends before the window is due, compacted at 13,188 of 27,904 tokens without that forecast).
#[tokio::test]
async fn an_early_compaction_in_a_small_window_makes_the_cut_the_window_would_force() {
    let ours = compactor(&config_at("32000", "4096"));
    let mut previewing = 0;
    for transcript in transcripts().unwrap() {
        if !transcript.name.starts_with("openai/") {
            continue;
        }
        let name = &transcript.name;
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        let messages = &conversation.messages;
        let mut state = SessionState::default();
        let mut summarized = false;
        for end in (1..messages.len()).filter(|&end| messages[end].role == Role::Assistant) {
            let request = Conversation {
                messages: messages[..end].to_vec(),
                ..conversation.clone()
            };
            let prepared = ours.prepare(request, &mut state).await.unwrap();
            let report = &prepared.report;
            let CompactionOutcome::Summarized {
                split,
                early,
                previewed_outputs,
                ..
            } = &report.compaction
            else {
                continue;
            };
            if *early && *previewed_outputs > 0 {
                previewing += 1;
                // The budget's own cut, as the window would force it: the recent calls as
                // previews within the budget, none in a wider tail.
                assert!(
                    split.previews.is_some() && split.kept_tokens <= split.budget,
                    "{name}, message {end}: {split:?}"
                );
                if !summarized {
                    assert!(
                        2 * report.tokens_before >= report.usable,
                        "{name}, message {end}: {} of {} tokens",
                        report.tokens_before,
                        report.usable
                    );
                }
                // The last exchange is whole: its output is the one the agent just got.
                let sent = &prepared.conversation.messages;
                assert_eq!(sent.last(), messages[..end].last(), "{name}, message {end}");
            }
            summarized = true;
        }
    }
    assert!(
        previewing >= 5,
        "{previewing} early compactions took the budget's previews"
    );
}

/// An autonomous run of `steps` shell calls, each answered by an output of about 900 tokens.
fn run_of(steps: usize) -> Conversation {
    let mut messages = vec![
        Message::text(Role::System, "You are a careful agent."),
        Message::text(Role::User, "make the checks pass"),
    ];
    for step in 0..steps {
        let output: String = (0..90)
            .map(|line| format!("step {step} line {line} passed ok\n"))
            .collect();
        messages.extend(condense_core::testing::tool_step(
            &format!("call_{step}"),
            "bash",
            serde_json::json!({"command": format!("run check {step}")}),
            output,
        ));
    }
    Conversation::new(messages)
}

/// The request of `run` at which condense first compacts early at a 128K window (a fresh
/// session state, each request prepared in turn), if any.
async fn first_early_compaction(run: &Conversation) -> Option<usize> {
    let ours = compactor(&config_at("128000", "4096"));
    let mut state = SessionState::default();
    for end in (1..run.messages.len()).filter(|&end| run.messages[end].role == Role::Assistant) {
        let request = Conversation::new(run.messages[..end].to_vec());
        let prepared = ours.prepare(request, &mut state).await.unwrap();
        if matches!(
            prepared.report.compaction,
            CompactionOutcome::Summarized { early: true, .. }
        ) {
            return Some(end);
        }
    }
    None
}

/// condense's own summarizer, weighed as if it could not say what it would write: the
/// extractive summary, offered only by writing it.
struct UnweighedExtractive(condense_summarize::Extractive);

#[async_trait]
impl Summarizer for UnweighedExtractive {
    fn name(&self) -> &str {
        "extractive"
    }

    fn runs_locally(&self) -> bool {
        true
    }

    async fn summarize(&self, head: &[Message], prompt: &str) -> Result<String, SummarizeError> {
        self.0.summarize(head, prompt).await
    }
}

/// An early compaction weighs the summary condense's own summarizer would write (a few hundred
/// tokens for the autonomous run), not the 3,000 tokens of its budget: the run compacts early
/// requests sooner than with the same summaries weighed at the budget, where the saving it
/// waited for was the budget's less what the summary takes.
#[tokio::test]
async fn an_early_compaction_weighs_the_summary_condense_would_write() {
    let run = run_of(120);
    let first_with = async |summarizer: &dyn Summarizer| -> Option<(usize, usize)> {
        let ours = compactor(&config_at("128000", "4096"));
        let mut state = SessionState::default();
        for end in (1..run.messages.len()).filter(|&end| run.messages[end].role == Role::Assistant)
        {
            let request = Conversation::new(run.messages[..end].to_vec());
            let prepared = ours
                .prepare_with(request, &mut state, summarizer)
                .await
                .unwrap();
            if let CompactionOutcome::Summarized {
                early: true,
                summary_tokens,
                ..
            } = prepared.report.compaction
            {
                return Some((end, summary_tokens));
            }
        }
        None
    };
    let extractive = condense_summarize::Extractive::new(
        condense_template::Template::builtin("structured").unwrap(),
        condense_summarize::ExtractiveSettings::built_in().unwrap(),
    );
    let (weighed, written) = first_with(&extractive).await.unwrap();
    let (at_the_budget, _) = first_with(&UnweighedExtractive(extractive)).await.unwrap();
    assert!(written < 1_000, "{written} tokens");
    assert!(
        weighed < at_the_budget,
        "as written: at message {weighed}; at the budget: {at_the_budget}"
    );
}

/// A protected tool's output in the head is carried past the summary: an early compaction saves
/// none of it and rewrites it with the tail. So a run that loaded a skill of about 13,400 tokens
/// at its start compacts early no sooner than the same run without it (it was counted as a
/// saving, and the run compacted early sooner, rewriting the skill each time).
#[tokio::test]
async fn a_protected_output_is_no_saving_to_an_early_compaction() {
    let plain = run_of(120);
    let without = first_early_compaction(&plain).await;
    assert!(
        without.is_some(),
        "the run compacts early without the skill"
    );
    let mut with = plain.clone();
    let skill: String = (0..1_800)
        .map(|line| format!("rule {line}: keep it\n"))
        .collect();
    with.messages.splice(
        2..2,
        condense_core::testing::tool_step(
            "skill_0",
            "skill",
            serde_json::json!({"name": "rules"}),
            skill,
        ),
    );
    // Two messages more before each request of the plain run.
    let with_skill = first_early_compaction(&with).await.map(|end| end - 2);
    assert!(
        with_skill.is_none_or(|end| end >= without.unwrap()),
        "with the skill at {with_skill:?}, without at {without:?}"
    );
}

/// condense's own summary tells how a call ended from what its tool returned, where the agent
/// now sees the note that replaced it: a failed build by its exit code and its first error (a
/// mini-swe-agent output holds its exit code alone), not "ok" or the placeholder's words.
#[tokio::test]
async fn the_summary_tells_a_replaced_failure_by_its_original() {
    use condense_pruner::Store;
    let original = "<returncode>2</returncode>\n<output>\nsrc/a.c: In function 'f':\n\
                    src/a.c:3:5: warning: unused variable 'x'\n\
                    src/a.c:4:5: warning: unused variable 'y'\n\
                    src/a.c:9:1: error: expected ';' before '}' token\n\
                    make: *** [all] Error 1\n</output>";
    let handle = condense_pruner::handle_of(original.as_bytes());
    let store = MemoryStore::new();
    store.put(&handle, original.as_bytes()).unwrap();
    let mut conversation = run_of(40);
    // The first call was the build; its output was pruned on an earlier request.
    let [call, result] = &mut conversation.messages[2..4] else {
        unreachable!()
    };
    let Part::ToolCall(call) = &mut call.parts[0] else {
        unreachable!()
    };
    call.input = serde_json::json!({"command": "make -j4"});
    let Part::ToolResult(result) = &mut result.parts[0] else {
        unreachable!()
    };
    result.content = condense_core::ToolOutput::Text(format!(
        "[condense: the output of bash was pruned (60 tokens). Original: condense recall {handle}]"
    ));
    result.compacted = Some(condense_core::Compacted {
        at_ms: 0,
        phase: condense_core::Phase::Prune,
        original_tokens: 60,
        original_chars: original.chars().count(),
        handle: handle.clone(),
    });
    let summarized = |store: MemoryStore| {
        let conversation = conversation.clone();
        async move {
            let compaction = Compactor::from_config(&config())
                .unwrap()
                .with_store(Box::new(store))
                .with_clock(Box::new(FixedClock(1_763_700_000_000)))
                .compact(conversation)
                .await
                .unwrap();
            summary_text(&compaction.conversation)
        }
    };
    let summary = summarized(store).await;
    assert!(
        summary.contains(
            "- bash `make -j4` failed: … / src/a.c:9:1: error: expected ';' before '}' token\n"
        ),
        "{summary}"
    );
    assert!(!summary.contains("make -j4 → ok"), "{summary}");
    // An original the store no longer has (another machine's, swept): the summary can tell
    // only what the agent sees, the placeholder, which holds neither the exit code nor the error.
    let summary = summarized(MemoryStore::new()).await;
    assert!(!summary.contains("expected ';'"), "{summary}");
}

/// After a pause longer than the provider's cache lifetime, the next request is written to the
/// cache whole whatever it holds: a request the square-root rule would carry on (a head that
/// saves less than it would pay back at a warm cache) is compacted then, keeping the recent
/// calls whole, and the report says why; two minutes after the previous request it is not.
#[tokio::test]
async fn a_request_after_the_cache_expired_is_compacted_where_that_saves_what_it_keeps() {
    let config = config_at("200000", "4096");
    let at = |ms: u64| at_time(&config, ms);
    let start = 1_763_700_000_000;
    let mut state = SessionState::default();
    let first = at(start).prepare(run_of(22), &mut state).await.unwrap();
    assert!(
        matches!(first.report.compaction, CompactionOutcome::NotDue),
        "{:?}",
        first.report.compaction
    );
    let warm = at(start + 2 * 60_000)
        .prepare(run_of(23), &mut state.clone())
        .await
        .unwrap();
    assert!(
        matches!(warm.report.compaction, CompactionOutcome::NotDue),
        "{:?}",
        warm.report.compaction
    );
    let cold = at(start + 10 * 60_000)
        .prepare(run_of(23), &mut state)
        .await
        .unwrap();
    let CompactionOutcome::Summarized {
        split,
        early: true,
        cache_cold: true,
        ..
    } = &cold.report.compaction
    else {
        panic!("{:?}", cold.report.compaction);
    };
    assert!(
        split.previews.is_none() && split.tail_calls >= 10,
        "{split:?}"
    );
    let shown =
        condense_host::render_report("run.json", "run.json", &config, &cold.report, false, None);
    assert!(
        shown.contains("cache holding nothing of the request"),
        "{shown}"
    );
}

/// `conversation` as a request to `model`.
fn to_model(mut conversation: Conversation, model: &str) -> Conversation {
    conversation.envelope = Some(condense_core::JsonMap::from_iter([(
        "model".to_owned(),
        model.into(),
    )]));
    conversation
}

/// A provider keeps a cache per model and prompt prefix: two minutes after the previous
/// request, a request to another model (Claude Code falling back from Opus to Sonnet) or with
/// another system prompt (a harness rewrote it) is written whole, and is compacted as
/// after a pause; one to the same model and prefix is not, nor one back to a model the session
/// used within the cache's lifetime; a model last used longer ago is cold again.
#[tokio::test]
async fn a_request_to_another_model_or_prefix_is_compacted_as_at_an_expired_cache() {
    let config = config_at("200000", "4096");
    let start = 1_763_700_000_000;
    let minute = 60_000;
    // What `minutes` after the start a request of `steps` calls to `model` (with `system` as
    // its system prompt, when given) does to the session `state`.
    let send = async |minutes: u64,
                      steps: usize,
                      model: &str,
                      system: Option<&str>,
                      state: &mut SessionState| {
        let mut conversation = run_of(steps);
        if let Some(system) = system {
            conversation.messages[0] = Message::text(Role::System, system);
        }
        at_time(&config, start + minutes * minute)
            .prepare(to_model(conversation, model), state)
            .await
            .unwrap()
            .report
            .compaction
    };
    let cold = |outcome: &CompactionOutcome| {
        matches!(
            outcome,
            CompactionOutcome::Summarized {
                early: true,
                cache_cold: true,
                ..
            }
        )
    };
    let not_due = |outcome: &CompactionOutcome| matches!(outcome, CompactionOutcome::NotDue);
    let mut opus = SessionState::default();
    assert!(not_due(
        &send(0, 22, "claude-opus-4", None, &mut opus).await
    ));

    let same = send(2, 23, "claude-opus-4", None, &mut opus.clone()).await;
    assert!(not_due(&same), "{same:?}");
    let switched = send(2, 23, "claude-sonnet-4", None, &mut opus.clone()).await;
    assert!(cold(&switched), "{switched:?}");
    let moved = Some("You are a careful agent in /repo/build.");
    let prefixed = send(2, 23, "claude-opus-4", moved, &mut opus.clone()).await;
    assert!(cold(&prefixed), "{prefixed:?}");

    // The session went to Sonnet (a request too small to compact), then back to Opus: warm
    // within the lifetime, cold past it.
    let mut both = opus.clone();
    send(3, 1, "claude-sonnet-4", None, &mut both).await;
    let back = send(4, 23, "claude-opus-4", None, &mut both).await;
    assert!(not_due(&back), "{back:?}");
    let mut sonnet_since = opus;
    for minutes in [2, 4, 6] {
        send(minutes, 1, "claude-sonnet-4", None, &mut sonnet_since).await;
    }
    let late = send(7, 23, "claude-opus-4", None, &mut sonnet_since).await;
    assert!(cold(&late), "{late:?}");
}

/// Where the last exchange alone is more than the window holds (a Write that gave a whole file,
/// in a window the request's system prompt and tools nearly fill), the request goes out with
/// that input cut to a preview: its call, its result and the rest of its input kept, the whole
/// input in the store, the wire's `arguments` written again from it. Not a request the provider
/// refuses, and not the exchange summarized away (a resumed agent sees where it was). A window
/// that holds the exchange never has it cut.
#[tokio::test]
async fn a_last_exchange_over_the_window_goes_out_with_its_input_cut() {
    use condense_tokenizer::{Tiktoken, TokenCounter, conversation_total};
    let content: String = (0..900)
        .map(|n| format!("line {n}: let x{n} = {n};\n"))
        .collect();
    let input = serde_json::json!({"file_path": "/src/big.rs", "content": content});
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You are a careful agent."}),
        serde_json::json!({"role": "user", "content": "write the parser module"}),
    ];
    for step in 0..3 {
        let output: String = (0..90)
            .map(|line| format!("step {step} line {line} passed ok\n"))
            .collect();
        messages.extend([
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{step}"), "type": "function", "function": {"name": "bash", "arguments": format!("{{\"command\": \"run check {step}\"}}")}}]}),
            serde_json::json!({"role": "tool", "tool_call_id": format!("c{step}"), "content": output}),
        ]);
    }
    messages.extend([
        serde_json::json!({"role": "assistant", "content": "Writing the module.", "tool_calls": [{"id": "write", "type": "function", "function": {"name": "Write", "arguments": input.to_string()}}]}),
        serde_json::json!({"role": "tool", "tool_call_id": "write", "content": "File created successfully at: /src/big.rs"}),
    ]);
    let body = serde_json::json!({"model": "gpt-4.1", "messages": messages});
    let conversation = condense_formats::read_json(condense_formats::Format::OpenAi, body).unwrap();
    let counter = Tiktoken::default();
    let total = |conversation: &Conversation| {
        conversation_total(&counter.count_each(&conversation.messages))
    };
    assert!(total(&conversation) > 12_000);

    let ours = compactor(&config_at("8000", "1024"));
    let compaction = ours.compact(conversation.clone()).await.unwrap();
    let out = &compaction.conversation;
    assert!(total(out) <= 8_000, "{} tokens", total(out));
    let CompactionOutcome::Summarized {
        previewed_inputs: 1,
        ..
    } = &compaction.report.compaction
    else {
        panic!("{:?}", compaction.report.compaction);
    };
    // The last exchange as it was but for the file's text: the words, the call, the result.
    let [.., step, result] = &out.messages[..] else {
        unreachable!()
    };
    assert_eq!(step.plain_text(), "Writing the module.");
    let call = step.parts.iter().find_map(Part::as_tool_call).unwrap();
    assert_eq!((call.id.as_str(), call.name.as_str()), ("write", "Write"));
    assert_eq!(call.input["file_path"], "/src/big.rs");
    let cut = call.input["content"].as_str().unwrap();
    assert!(cut.starts_with("line 0: let x0 = 0;\nline 1: "), "{cut}");
    assert_eq!(result, conversation.messages.last().unwrap());
    // The whole input, from the handle the note names.
    let handle = cut.trim_end_matches(']').rsplit(' ').next().unwrap();
    let whole: serde_json::Value =
        serde_json::from_slice(&ours.store().get(handle).unwrap()).unwrap();
    assert_eq!(whole, input);
    // On the wire, the arguments are the cut input.
    let written = condense_formats::to_value(condense_formats::Format::OpenAi, out).unwrap();
    let arguments = written["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find_map(|message| message["tool_calls"][0]["function"]["arguments"].as_str())
        .unwrap();
    let sent: serde_json::Value = serde_json::from_str(arguments).unwrap();
    assert_eq!(sent["content"].as_str(), Some(cut));

    // Where the window holds the exchange, its input goes out whole.
    let roomy = compactor(&config_at("16000", "1024"))
        .compact(conversation)
        .await
        .unwrap();
    assert!(
        !matches!(
            roomy.report.compaction,
            CompactionOutcome::Summarized {
                previewed_inputs: 1..,
                ..
            }
        ),
        "{:?}",
        roomy.report.compaction
    );
    let last_call = roomy
        .conversation
        .messages
        .iter()
        .rev()
        .find_map(|message| message.parts.iter().find_map(Part::as_tool_call))
        .unwrap();
    assert_eq!(last_call.input, input);
}

/// A screenshot the person sends, in a window its system prompt nearly fills (a Chat
/// Completions agent's 6,500-token prompt in 8K): with the summary shrunk and nothing else left
/// to cut, the image is left out for a note naming the whole message, stored first; the person's
/// words stay. Not a request the provider refuses, and not the message summarized away. The next
/// request, which the client sends with the image whole, carries the same cut (phase 1, from the
/// session's log), so it fits, as the provider's count of this one said it would.
#[tokio::test]
async fn a_screenshot_the_window_cannot_hold_is_left_out_as_the_last_resort() {
    use condense_tokenizer::{Tiktoken, TokenCounter, conversation_total};
    let prompt: String = (0..720)
        .map(|n| format!("Rule {n}: keep the change small.\n"))
        .collect();
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": prompt}),
        serde_json::json!({"role": "user", "content": "fix the commit author"}),
    ];
    for step in 0..3 {
        let output: String = (0..60)
            .map(|line| format!("commit {step}{line:02} author old <old@example.com>\n"))
            .collect();
        messages.extend([
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{step}"), "type": "function", "function": {"name": "bash", "arguments": format!("{{\"command\": \"git log {step}\"}}")}}]}),
            serde_json::json!({"role": "tool", "tool_call_id": format!("c{step}"), "content": output}),
        ]);
    }
    let words = "[Image #1] the page still shows the old author";
    messages.extend([
        serde_json::json!({"role": "assistant", "content": "Done: every commit has the new author."}),
        serde_json::json!({"role": "user", "content": [
            {"type": "text", "text": words},
            {"type": "image_url", "image_url": {"url": "https://example.com/shot.png"}},
        ]}),
    ]);
    let conversation = chat(&messages);
    let counter = Tiktoken::default();
    let total = |conversation: &Conversation| {
        conversation_total(&counter.count_each(&conversation.messages))
    };
    let system = counter.count_message(&conversation.messages[0]);
    assert!((6_000..7_000).contains(&system), "{system}");

    let config = config_at("8000", "1024");
    let ours = compactor(&config);
    let mut state = SessionState::default();
    let first = ours
        .prepare(conversation.clone(), &mut state)
        .await
        .unwrap();
    // The report says so, and where the whole message is.
    let shown = condense_host::render_report(
        "run.json",
        "openai",
        &config,
        &first.report,
        false,
        Some("/tmp/originals"),
    );
    assert!(
        shown.contains("1 of the person's messages in the tail cut, images left out first"),
        "{shown}"
    );
    assert!(shown.contains("originals: /tmp/originals"), "{shown}");
    let out = &first.conversation;
    assert!(total(out) <= 8_000, "{} tokens", total(out));
    let CompactionOutcome::Summarized { cut_person: 1, .. } = &first.report.compaction else {
        panic!("{:?}", first.report.compaction);
    };
    let asked = out.messages.last().unwrap();
    let note = note_of(asked);
    assert_eq!(asked.plain_text(), format!("{words}\n{note}"));
    assert!(
        note.starts_with("[condense: an image (1,600 tokens) left out of this message"),
        "{note}"
    );
    // The whole message, from the handle the note names.
    let handle = note.trim_end_matches(']').rsplit(' ').next().unwrap();
    let whole: Vec<Part> = serde_json::from_slice(&ours.store().get(handle).unwrap()).unwrap();
    assert_eq!(&whole, &conversation.messages.last().unwrap().parts);
    // On the wire, a text block where the image was.
    let written = condense_formats::to_value(condense_formats::Format::OpenAi, out).unwrap();
    let content = &written["messages"].as_array().unwrap().last().unwrap()["content"];
    assert_eq!(content[1]["type"], "text");
    assert_eq!(content[1]["text"].as_str(), Some(note.as_str()));

    // The next request, the image sent whole again: the same cut, nothing summarized anew.
    messages.extend([
        serde_json::json!({"role": "assistant", "content": "I see the old author on the page."}),
        serde_json::json!({"role": "user", "content": "then rewrite the history again"}),
    ]);
    let second = ours.prepare(chat(&messages), &mut state).await.unwrap();
    assert_eq!(
        second.report.prune.messages.len(),
        1,
        "{:?}",
        second.report.prune
    );
    assert!(
        !matches!(
            second.report.compaction,
            CompactionOutcome::Summarized { .. }
        ),
        "{:?}",
        second.report.compaction
    );
    let out = &second.conversation;
    assert!(total(out) <= 8_000, "{} tokens", total(out));
    let resent = &out.messages[out.messages.len() - 3];
    assert_eq!(note_of(resent), note);
}

/// A Chat Completions request of `messages` to gpt-4.1, read.
fn chat(messages: &[serde_json::Value]) -> Conversation {
    let body = serde_json::json!({"model": "gpt-4.1", "messages": messages});
    condense_formats::read_json(condense_formats::Format::OpenAi, body).unwrap()
}

/// The text of `message`'s last part: the note where its image was.
fn note_of(message: &Message) -> String {
    match message.parts.last() {
        Some(Part::Text(text)) => text.text.clone(),
        other => panic!("{other:?}"),
    }
}

/// A compaction the window forces whose tail, with no output to cut, holds only the last few of
/// the agent's ten latest calls: six Writes of whole files before three tests, their inputs
/// taking the budget. Those inputs are cut to previews (the files are on disk, the whole inputs
/// stored), and the tail then holds all ten calls, where with the inputs whole it held fewer.
#[tokio::test]
async fn a_tail_that_holds_few_calls_for_their_inputs_cuts_them_to_hold_ten() {
    let mut messages = surveyed();
    for n in 0..6 {
        let mut input = generated_file();
        input["file_path"] = format!("/src/gen{n}.rs").into();
        messages.extend(chat_step(
            &format!("write{n}"),
            "Write",
            input.to_string(),
            format!("File created successfully at: /src/gen{n}.rs"),
        ));
    }
    messages.extend(tested());
    messages.extend(chat_step(
        "last",
        "bash",
        "{\"command\": \"git status\"}".into(),
        "nothing to commit".into(),
    ));
    let conversation = chat(&messages);
    let config = config_at("16000", "1024");
    let ours = compactor(&config);
    let mut state = SessionState::default();
    let first = ours
        .prepare(conversation.clone(), &mut state)
        .await
        .unwrap();
    let CompactionOutcome::Summarized {
        split,
        tail_inputs,
        early: false,
        ..
    } = &first.report.compaction
    else {
        panic!("{:?}", first.report.compaction);
    };
    assert_eq!(split.tail_calls, 10, "{split:?}");
    assert!(*tail_inputs > 0, "{:?}", first.report.compaction);
    let out = &first.conversation;
    for n in 0..6 {
        let write = the_call(out, &format!("write{n}"));
        assert_eq!(write.input["file_path"], format!("/src/gen{n}.rs"));
    }
    // The last exchange goes out as it came.
    let last = conversation.messages.len() - 2;
    assert_eq!(
        out.messages[out.messages.len() - 2..],
        conversation.messages[last..]
    );
}

/// A compaction the window forces, whose tail is over its budget with a Write of a whole file
/// among the agent's last ten calls: that input is cut to a preview first (the file is on disk,
/// the whole input stored), and the tail then holds all ten calls, where with the input whole it
/// held eight. The last exchange stays as it was, and the next request, the input sent whole
/// again, carries the same cut.
#[tokio::test]
async fn a_tail_over_its_budget_cuts_what_the_agent_wrote_before_what_it_read() {
    let input = generated_file();
    let mut messages = surveyed();
    messages.extend(chat_step(
        "write",
        "Write",
        input.to_string(),
        "File created successfully at: /src/gen.rs".into(),
    ));
    messages.extend(tested());
    messages.extend(chat_step(
        "last",
        "bash",
        "{\"command\": \"git status\"}".into(),
        "nothing to commit".into(),
    ));
    let conversation = chat(&messages);
    let config = config_at("16000", "1024");
    let ours = compactor(&config);
    let mut state = SessionState::default();
    let first = ours
        .prepare(conversation.clone(), &mut state)
        .await
        .unwrap();
    let CompactionOutcome::Summarized {
        split,
        tail_inputs: 1,
        early: false,
        ..
    } = &first.report.compaction
    else {
        panic!("{:?}", first.report.compaction);
    };
    assert_eq!(split.tail_calls, 10, "{split:?}");
    let shown =
        condense_host::render_report("run.json", "openai", &config, &first.report, false, None);
    assert!(
        shown.contains("so first 1 of its earlier tool calls' inputs cut to previews"),
        "{shown}"
    );
    let out = &first.conversation;
    let calls: Vec<&condense_core::ToolCall> = out
        .messages
        .iter()
        .flat_map(|message| message.parts.iter().filter_map(Part::as_tool_call))
        .collect();
    let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "old9", "old10", "old11", "old12", "old13", "write", "test0", "test1", "test2", "last"
        ]
    );
    // The file's text cut (here to nothing but the note: the tail was over by more than it),
    // the path kept; the whole input from the handle the note names.
    let write = calls[5];
    assert_eq!(write.input["file_path"], "/src/gen.rs");
    let cut = write.input["content"].as_str().unwrap();
    assert!(
        cut.starts_with("\n[condense: this input to Write cut to its first 0 of 2,680 characters"),
        "{cut}"
    );
    let handle = cut.trim_end_matches(']').rsplit(' ').next().unwrap();
    let whole: serde_json::Value =
        serde_json::from_slice(&ours.store().get(handle).unwrap()).unwrap();
    assert_eq!(whole, input);
    // What the agent read after it is whole, and so is the last exchange.
    for (at, message) in out.messages.iter().enumerate().rev().take(8) {
        let original =
            &conversation.messages[conversation.messages.len() - out.messages.len() + at];
        assert_eq!(message, original, "message {at}");
    }

    // The next request, the file's text sent whole again: the same cut, from the session's log.
    messages.extend(chat_step(
        "next",
        "bash",
        "{\"command\": \"git diff\"}".into(),
        "diff --git a/src/gen.rs".into(),
    ));
    let second = ours.prepare(chat(&messages), &mut state).await.unwrap();
    assert_eq!(
        second.report.prune.inputs.len(),
        1,
        "{:?}",
        second.report.prune
    );
    let again = the_call(&second.conversation, "write");
    assert_eq!(again.input["content"].as_str(), Some(cut));
}

/// A Write whose call begins the last exchange, its result after the call the agent made beside
/// it: what the agent has just done, so its input is not cut to make the tail fit, though the
/// last assistant message comes after it. (Where the input cut stopped at the last assistant
/// message, it cut the Write's text.)
#[tokio::test]
async fn the_inputs_cut_first_stop_where_the_last_exchange_begins() {
    let input = generated_file();
    let mut messages = surveyed();
    messages.extend(tested());
    let [write_call, write_result] = chat_step(
        "write",
        "Write",
        input.to_string(),
        "File created successfully at: /src/gen.rs".into(),
    );
    let [status_call, status_result] = chat_step(
        "last",
        "bash",
        "{\"command\": \"git status\"}".into(),
        "nothing to commit".into(),
    );
    messages.extend([write_call, status_call, write_result, status_result]);
    let config = config_at("16000", "1024");
    let out = compactor(&config)
        .prepare(chat(&messages), &mut SessionState::default())
        .await
        .unwrap();
    let CompactionOutcome::Summarized {
        tail_inputs: 0,
        previewed_outputs,
        ..
    } = &out.report.compaction
    else {
        panic!("{:?}", out.report.compaction);
    };
    assert!(*previewed_outputs > 0, "{:?}", out.report.compaction);
    assert_eq!(the_call(&out.conversation, "write").input, input);
}

/// The tool call `id` in `conversation`.
fn the_call<'c>(conversation: &'c Conversation, id: &str) -> &'c condense_core::ToolCall {
    conversation
        .messages
        .iter()
        .flat_map(|message| message.parts.iter().filter_map(Part::as_tool_call))
        .find(|call| call.id == id)
        .unwrap()
}

/// The file the Write of the input-cut tests creates: 100 short functions, 2,680 characters.
fn generated_file() -> serde_json::Value {
    let content: String = (0..100)
        .map(|n| format!("pub fn f{n}() -> u32 {{ {n} }}\n"))
        .collect();
    serde_json::json!({"file_path": "/src/gen.rs", "content": content})
}

/// `count` lines of a command's output.
fn output_lines(what: &str, count: usize) -> String {
    (0..count)
        .map(|n| format!("{what} line {n}: ok\n"))
        .collect()
}

/// One call of the agent's and its result, as Chat Completions messages.
fn chat_step(id: &str, name: &str, arguments: String, output: String) -> [serde_json::Value; 2] {
    [
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}),
        serde_json::json!({"role": "tool", "tool_call_id": id, "content": output}),
    ]
}

/// The input-cut tests' session before the Write: the task, then fourteen surveys of 120 lines.
fn surveyed() -> Vec<serde_json::Value> {
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You are a careful agent."}),
        serde_json::json!({"role": "user", "content": "generate the functions and test them"}),
    ];
    for n in 0..14 {
        messages.extend(chat_step(
            &format!("old{n}"),
            "bash",
            format!("{{\"command\": \"survey {n}\"}}"),
            output_lines(&format!("survey {n}"), 120),
        ));
    }
    messages
}

/// Three test runs of 40 lines.
fn tested() -> Vec<serde_json::Value> {
    (0..3)
        .flat_map(|n| {
            chat_step(
                &format!("test{n}"),
                "bash",
                format!("{{\"command\": \"cargo test part{n}\"}}"),
                output_lines(&format!("test part{n}"), 40),
            )
        })
        .collect()
}

/// An autonomous run's task stays where it came, after the system prompt, through every
/// compaction of the run, request by request in one session: each compacted request starts
/// with the very messages the run's first request was (so a provider that caches prefixes
/// reads them at each compaction, where it would rewrite them after a summary), the summary
/// comes next, and each summary still says what the task is.
#[tokio::test]
async fn an_autonomous_runs_task_stays_in_front_through_every_compaction() {
    let ours = compactor(&config());
    let mut runs = 0;
    for name in [
        "openai/mini-swe-agent-pylint-dev__pylint-6528",
        "openai/openhands-ponylang__ponyc-4588",
    ] {
        let transcript = condense_core::testing::transcript(name).unwrap();
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        let front = &conversation.messages[..2];
        assert_eq!(front[0].role, Role::System, "{name}");
        assert!(front[1].is_user_turn(), "{name}");
        let task: String = front[1].plain_text().chars().take(60).collect();
        let mut state = SessionState::default();
        let mut compactions = 0;
        for end in 1..conversation.messages.len() {
            if conversation.messages[end].role != Role::Assistant {
                continue;
            }
            let request = Conversation {
                messages: conversation.messages[..end].to_vec(),
                ..conversation.clone()
            };
            let sent = ours.prepare(request, &mut state).await.unwrap();
            let messages = &sent.conversation.messages;
            assert_eq!(&messages[..2], front, "{name}: request {end}");
            if !matches!(sent.report.compaction, CompactionOutcome::Summarized { .. }) {
                continue;
            }
            compactions += 1;
            assert!(messages[2].is_compaction_summary(), "{name}: request {end}");
            let summary = messages[2].plain_text();
            assert!(
                summary.contains(&task),
                "{name}: request {end}: the summary does not say what the task is\n{summary}"
            );
        }
        assert!(compactions >= 2, "{name}: {compactions} compactions");
        runs += 1;
    }
    assert_eq!(runs, 2);
}

/// Every Chat Completions and Anthropic session, compacted at windows from 4K to 32K and
/// written, keeps its roles as strict chat templates want them, as the session itself did
/// (Mistral's rule for Chat Completions: after an optional first system message, user and
/// assistant alternate, tool messages and the assistant's tool calls aside, and no other system
/// message; for Anthropic's messages, which hold tool results in user messages, user and
/// assistant alternate from the first); read back, the summary is condense's again, and the
/// person's first request is there as it was.
#[tokio::test]
async fn every_session_keeps_its_roles_alternating_when_compacted() {
    fn breaks(format: condense_formats::Format, messages: &[serde_json::Value]) -> Vec<usize> {
        if format == condense_formats::Format::Anthropic {
            let role = |at: usize| messages[at]["role"].as_str();
            return (0..messages.len())
                .filter(|&at| {
                    let wanted = if at % 2 == 0 { "user" } else { "assistant" };
                    role(at) != Some(wanted)
                })
                .collect();
        }
        let role = |message: &serde_json::Value| message["role"].as_str().unwrap_or("").to_owned();
        let start = usize::from(
            messages
                .first()
                .is_some_and(|first| matches!(role(first).as_str(), "system" | "developer")),
        );
        let mut turn = 0;
        let mut broken = Vec::new();
        for (at, message) in messages.iter().enumerate().skip(start) {
            let role = role(message);
            if role == "tool" || role == "assistant" && message.get("tool_calls").is_some() {
                continue;
            }
            let wanted = if turn % 2 == 0 { "user" } else { "assistant" };
            if role != wanted {
                broken.push(at);
            }
            turn += 1;
        }
        broken
    }
    let mut checked = std::collections::HashMap::new();
    for transcript in transcripts().unwrap() {
        let (format, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        if !matches!(
            format,
            condense_formats::Format::OpenAi | condense_formats::Format::Anthropic
        ) {
            continue;
        }
        let sent = |bytes: &[u8]| -> Vec<serde_json::Value> {
            let value: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            value
                .get("messages")
                .unwrap_or(&value)
                .as_array()
                .unwrap()
                .clone()
        };
        assert_eq!(
            breaks(format, &sent(&transcript.bytes)),
            Vec::<usize>::new()
        );
        for window in ["4000", "8000", "16000", "32000"] {
            let at = format!("{} at {window}", transcript.name);
            let compaction = compactor(&config_at(window, "1024"))
                .compact(conversation.clone())
                .await
                .unwrap();
            if !matches!(
                compaction.report.compaction,
                CompactionOutcome::Summarized { .. }
            ) {
                continue;
            }
            let written = condense_formats::write(format, &compaction.conversation).unwrap();
            assert_eq!(breaks(format, &sent(&written)), Vec::<usize>::new(), "{at}");
            let (_, read) = condense_formats::read(&written, Some(format)).unwrap();
            let summaries: Vec<&Message> = read
                .messages
                .iter()
                .filter(|message| message.is_compaction_summary())
                .collect();
            assert_eq!(summaries.len(), 1, "{at}");
            let first_request = |messages: &[Message]| {
                messages
                    .iter()
                    .find(|message| message.is_user_turn())
                    .map(Message::plain_text)
            };
            assert_eq!(
                first_request(&read.messages),
                first_request(&compaction.conversation.messages),
                "{at}"
            );
            *checked.entry(format).or_insert(0) += 1;
        }
    }
    assert!(
        checked[&condense_formats::Format::OpenAi] >= 20,
        "{checked:?} compactions checked"
    );
    assert!(
        checked[&condense_formats::Format::Anthropic] >= 6,
        "{checked:?} compactions checked"
    );
}

/// OpenHands viewing the same file three times in a row (ponyc-4595: a 20,740-character view at
/// messages 11, 15 and 19), sent request by request as the harness sends it, whole: each request
/// that brings the view again carries the text once, whole, at its newest place, and the older
/// views, inside the skip boundary (the run's last ten calls), as pointers to a newer one; every
/// later request carries the same pointers byte for byte (frozen), and nothing before the
/// compaction the window forces changes but them.
#[tokio::test]
async fn a_file_viewed_again_is_sent_once_at_its_newest_place() {
    let transcript =
        condense_core::testing::transcript("openai/openhands-ponylang__ponyc-4595").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let view = |index: usize| {
        conversation.messages[index].parts[0]
            .as_tool_result()
            .unwrap()
    };
    let text = view(11).content.text().into_owned();
    assert!(text.len() > 20_000);
    assert_eq!(view(15).content.text(), text);
    assert_eq!(view(19).content.text(), text);
    let ours = compactor(&config());
    let mut state = SessionState::default();
    let mut pointers: Vec<(usize, String)> = Vec::new();
    for end in [16, 18, 20, 22] {
        let request = Conversation {
            messages: conversation.messages[..end].to_vec(),
            ..conversation.clone()
        };
        let sent = ours.prepare(request.clone(), &mut state).await.unwrap();
        assert!(
            matches!(sent.report.compaction, CompactionOutcome::NotDue),
            "request {end}: {:?}",
            sent.report.compaction
        );
        let messages = &sent.conversation.messages;
        let shown = |index: usize| messages[index].parts[0].as_tool_result().unwrap();
        let newest = if end > 19 { 19 } else { 15 };
        assert_eq!(shown(newest).content.text(), text, "request {end}");
        for older in [11, 15].into_iter().filter(|&older| older < newest) {
            let pointer = shown(older).content.text().into_owned();
            assert!(
                pointer.starts_with("[condense: same output as the later str_replace_editor call"),
                "request {end}, message {older}: {pointer}"
            );
            match pointers.iter().find(|(at, _)| *at == older) {
                Some((_, before)) => assert_eq!(&pointer, before, "request {end}: not frozen"),
                None => pointers.push((older, pointer)),
            }
        }
        let whole = messages
            .iter()
            .flat_map(|message| &message.parts)
            .filter_map(Part::as_tool_result)
            .filter(|result| result.content.text() == text)
            .count();
        assert_eq!(whole, 1, "request {end}: the view sent {whole} times");
        for (index, (before, after)) in request.messages.iter().zip(messages).enumerate() {
            if index != 11 && index != 15 {
                assert_eq!(before, after, "request {end}: message {index} changed");
            }
        }
    }
    assert_eq!(pointers.len(), 2);
}

/// The same file viewed again after a long build log the last request sent: on a harness's
/// request, with the provider's cache warm, the older view stays, as pointing it at the fresh
/// one would have the provider read the log again uncached, which costs more than the view
/// saves; the same session pruned or compacted on purpose, a file with no cache to keep warm,
/// has it point to the fresh view.
#[tokio::test]
async fn a_repeat_behind_a_long_output_goes_only_where_no_cache_is_kept() {
    let view: String = (0..150)
        .map(|line| format!("{line:>6}\tDEF(pattern_{line});\n"))
        .collect();
    let log: String = (0..300)
        .map(|line| format!("[{line}/300] Building C object src/libponyc/{line}.c.o\n"))
        .collect();
    let call = |id: &str, command: &str| serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "str_replace_editor", "arguments": serde_json::json!({"command": command, "path": "/src/parser.c"}).to_string()}}]});
    let output = |id: &str, text: &str| serde_json::json!({"role": "tool", "tool_call_id": id, "content": text});
    let session = chat(&[
        serde_json::json!({"role": "system", "content": "You are a coding agent."}),
        serde_json::json!({"role": "user", "content": "Fix the parser."}),
        call("first", "view"),
        output("first", &view),
        call("build", "make"),
        output("build", &log),
        call("again", "view"),
        output("again", &view),
    ]);
    let older = |conversation: &Conversation| {
        let first = conversation
            .messages
            .iter()
            .flat_map(|message| &message.parts)
            .filter_map(Part::as_tool_result)
            .find(|result| result.call_id == "first");
        first.unwrap().content.text().into_owned()
    };
    let ours = compactor(&config());
    let sent = ours
        .prepare(session.clone(), &mut SessionState::default())
        .await
        .unwrap();
    assert_eq!(
        older(&sent.conversation),
        view,
        "a warm cache: the view stays"
    );
    for on_purpose in [
        ours.prune(session.clone()).await.unwrap(),
        ours.compact(session.clone()).await.unwrap(),
    ] {
        let pointer = older(&on_purpose.conversation);
        assert!(
            pointer
                .starts_with("[condense: same output as the later str_replace_editor call again"),
            "{pointer}"
        );
    }
}
