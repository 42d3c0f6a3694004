//! Every shared transcript through every policy: the replay agrees with the provider's own
//! accounting where the log has it, and every request a policy builds is one a provider accepts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use condense_core::Message;
use condense_host::{Compactor, Config, Sources};
use condense_replay::{
    Agreement, Policy, PriceTable, Provider, Recording, Replay, ReplaySettings, Ttl, policy, replay,
};
use condense_tokenizer::{Tiktoken, TokenCounter};

fn transcripts() -> Vec<PathBuf> {
    let dir = condense_core::testing::transcripts_dir();
    let mut files = Vec::new();
    for folder in ["claude-code", "openai", "anthropic"] {
        for entry in std::fs::read_dir(dir.join(folder)).unwrap() {
            files.push(entry.unwrap().path());
        }
    }
    files.sort();
    files
}

fn recording(path: &PathBuf) -> Recording {
    let bytes = std::fs::read(path).unwrap();
    Recording::of(condense_formats::read(&bytes, None).unwrap().1)
}

fn settings(provider: Provider, window: usize) -> ReplaySettings {
    ReplaySettings {
        provider,
        ttl: Ttl::FiveMinutes,
        prices: PriceTable::built_in().unwrap(),
        context_window: window,
        max_output_tokens: 4_096,
    }
}

fn config(window: usize) -> Config {
    Config::load(&Sources {
        flags: config_flags(window),
        ..Sources::default()
    })
    .unwrap()
}

/// The flags of [`config`]: `window`, 4,096 tokens of reply.
fn config_flags(window: usize) -> Vec<(String, String, String)> {
    vec![
        (
            "test".into(),
            "model.context_window".into(),
            window.to_string(),
        ),
        (
            "test".into(),
            "model.max_output_tokens".into(),
            "4096".into(),
        ),
    ]
}

/// The model policies prepare for: `window`, 4,096 tokens of reply, condense's own counts.
fn model(counter: &dyn TokenCounter, window: usize) -> condense_replay::Model<'_> {
    condense_replay::Model {
        counter,
        context_window: window,
        max_output_tokens: 4_096,
        calibration: &condense_replay::IDENTITY,
        prices: condense_host::CachePrices::default(),
        cache_lifetime_minutes: 5,
        answering: None,
        summary_length: None,
    }
}

/// Whether `policy` sent the whole history on every request, as `none` does.
fn sent_everything(policy: &condense_replay::PolicyResult) -> bool {
    policy.compactions == 0 && policy.pruned_outputs == 0
}

/// The condense policy with the built-in configuration for `window`: its summaries written
/// locally (the extractive summarizer, no request) when `remote` is `None`, else priced as a
/// remote summarizer's separate prompt, or forked where that is cheaper (`Some(fork)`).
fn condense_policy(name: &str, window: usize, remote: Option<bool>) -> Box<dyn Policy> {
    let configured = config(window);
    let configured_requests = policy::SummaryRequests::from_config(&configured);
    let requests = match remote {
        None => configured_requests,
        Some(fork) => policy::SummaryRequests {
            local: false,
            fork,
            ..configured_requests
        },
    };
    let compactor = Compactor::from_config(&configured).unwrap();
    Box::new(policy::Condense::new(name, compactor, requests).unwrap())
}

/// Every policy, condense with the built-in configuration for `window`.
fn all(counter: &Arc<dyn TokenCounter>, window: usize) -> Vec<Box<dyn condense_replay::Policy>> {
    let mut policies: Vec<Box<dyn condense_replay::Policy>> = policy::NAMES
        .iter()
        .filter_map(|name| policy::named(name, counter.clone()))
        .collect();
    policies.push(condense_policy("condense", window, None));
    policies
}

fn run(path: &PathBuf, provider: Provider, window: usize) -> (Recording, Replay) {
    let recording = recording(path);
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let mut policies = all(&counter, window);
    let replay = replay(
        &recording,
        &mut policies,
        &settings(provider, window),
        counter,
        &mut |_| {},
    )
    .unwrap();
    (recording, replay)
}

/// Each thread of a session with usage: its main thread, and the subagents it keeps inline
/// (each with its own calibration, as a subagent has its own system prompt and tools).
fn threads_with_usage() -> Vec<(String, Recording)> {
    let mut threads = Vec::new();
    for path in transcripts()
        .iter()
        .filter(|path| path.extension().unwrap() == "jsonl")
    {
        let bytes = std::fs::read(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let main = recording(path);
        if main.recorded_steps() > 0 {
            threads.push((name.clone(), main));
        }
        for subagent in
            condense_formats::subagents(&bytes, condense_formats::Format::ClaudeCode).unwrap()
        {
            let recording = Recording::of(subagent.conversation);
            if recording.recorded_steps() > 0 {
                threads.push((format!("{name}, {}", subagent.name), recording));
            }
        }
    }
    threads
}

/// `recording` replayed by the `recorded` policy alone, under Anthropic's model at 200K.
fn as_recorded(recording: &Recording) -> Replay {
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let mut policies = vec![policy::named("recorded", counter.clone()).unwrap()];
    replay(
        recording,
        &mut policies,
        &settings(Provider::Anthropic, 200_000),
        counter,
        &mut |_| {},
    )
    .unwrap()
}

/// The `recorded` policy against Anthropic's cache model reproduces Claude Code's own usage:
/// the cache-hit share within 3 points on every thread that has usage (the main thread of each
/// session, and each subagent's), and at least 80 % of the requests with a large recorded cache
/// write (a cold cache, a model switch) written by the simulation too.
#[test]
fn the_recorded_policy_reproduces_the_providers_own_cache_accounting() {
    let mut large = 0;
    let mut flagged = 0;
    let mut compared = 0;
    for (name, recording) in threads_with_usage() {
        let replay = as_recorded(&recording);
        // The log is what the model read: its usage bears out its messages.
        assert!(
            replay.calibration.fits_the_log(),
            "{name}: {:?}",
            replay.calibration
        );
        let agreement = Agreement::of(&recording, &replay.policies[0]).unwrap();
        let gap = (agreement.simulated_hit_share - agreement.recorded_hit_share).abs();
        assert!(
            gap <= 0.03,
            "{name}: simulated {:.3} vs recorded {:.3}",
            agreement.simulated_hit_share,
            agreement.recorded_hit_share
        );
        assert_eq!(agreement.requests, recording.recorded_steps());
        large += agreement.large_writes;
        flagged += agreement.large_writes_flagged;
        compared += 1;
    }
    assert_eq!(
        compared, 11,
        "the eight Claude Code sessions with usage, and 5f8cbb78's three subagents"
    );
    assert!(large >= 10, "only {large} large writes to judge by");
    assert!(
        flagged * 5 >= large * 4,
        "{flagged} of {large} large cache writes flagged"
    );
}

/// A session's subagents are replayed with it, each in a context of its own: 5f8cbb78's three
/// made 88 requests (383 uncached input tokens, 192,363 written to the cache, 4,052,167 read,
/// 15,967 output, summed by `message.id` from its `isSidechain` lines). The whole session's
/// figures add the threads up under each policy, its recorded figures are the main thread's
/// and theirs, and nothing is left out unsaid. Replayed alone, the main thread reports the
/// subagents' requests beside its figures instead; a session without subagents or branches
/// left has nothing to report.
#[test]
fn a_sessions_subagents_are_replayed_with_it() {
    let dir = condense_core::testing::transcripts_dir();
    let path = dir.join("claude-code/5f8cbb78-38d3-47e9-9504-baa93bb166c9.jsonl");
    let window = 200_000;
    let (main, alone) = run(&path, Provider::Anthropic, window);
    let beside = alone.not_replayed.unwrap();
    assert_eq!(beside.subagent_requests, 88);
    assert_eq!(beside.left_branch_requests, 0);
    let prices = &settings(Provider::Anthropic, window).prices.anthropic;
    let input = prices.input_per_mtok / 1e6;
    let expected = 383.0 * input
        + 192_363.0 * input * prices.cache_write_5m_multiplier
        + 4_052_167.0 * input * prices.cache_read_multiplier
        + 15_967.0 * prices.output_per_mtok / 1e6;
    assert!(
        (beside.subagent_cost_usd - expected).abs() < 1e-9,
        "{} vs {expected}",
        beside.subagent_cost_usd
    );
    let recorded = alone.policies[0].recorded.unwrap();
    assert_eq!(recorded.recorded_requests, 119, "the main thread's own");

    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let bytes = std::fs::read(&path).unwrap();
    let mut subagents: Vec<condense_replay::SubagentRecording> =
        condense_formats::subagents(&bytes, condense_formats::Format::ClaudeCode)
            .unwrap()
            .into_iter()
            .map(|subagent| {
                condense_replay::SubagentRecording::new(
                    subagent.name,
                    Recording::of(subagent.conversation),
                    all(&counter, window),
                )
            })
            .collect();
    let whole = condense_replay::replay_session(
        &main,
        &mut all(&counter, window),
        &mut subagents,
        &settings(Provider::Anthropic, window),
        counter.clone(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(whole.not_replayed, None);
    assert_eq!(whole.policies, alone.policies, "the main thread as alone");
    assert_eq!(whole.subagents.len(), 3);
    let requests: usize = whole.subagents.iter().map(|s| s.agent_requests).sum();
    assert_eq!(requests, 88);
    for subagent in &whole.subagents {
        assert!(subagent.calibration.fitted_on > 0, "{}", subagent.name);
    }
    let session = whole.session[0].recorded.unwrap();
    assert_eq!(session.recorded_requests, 119 + 88);
    assert_eq!(
        session.recorded_cache_read_tokens,
        recorded.recorded_cache_read_tokens + 4_052_167
    );
    assert_eq!(
        session.recorded_cache_write_tokens,
        recorded.recorded_cache_write_tokens + 192_363
    );
    assert_eq!(
        session.recorded_uncached_tokens,
        recorded.recorded_uncached_tokens + 383
    );
    assert!((session.recorded_cost_usd - recorded.recorded_cost_usd - expected).abs() < 1e-9);
    for (index, total) in whole.session.iter().enumerate() {
        let threads = std::iter::once(&whole.policies[index])
            .chain(whole.subagents.iter().map(|s| &s.policies[index]));
        let (mut cost, mut requests, mut read, mut rows) = (0.0, 0, 0, 0);
        for thread in threads {
            assert_eq!(thread.name, total.name);
            cost += thread.cost_usd;
            requests += thread.requests;
            read += thread.cache_read_tokens;
            rows += thread.rows.len();
        }
        assert!((total.cost_usd - cost).abs() < 1e-9, "{}", total.name);
        assert_eq!(
            (total.requests, total.cache_read_tokens, total.rows.len()),
            (requests, read, rows),
            "{}",
            total.name
        );
        let agent: Vec<u64> = total
            .rows
            .iter()
            .filter(|row| row.kind == condense_replay::RowKind::Agent)
            .map(|row| row.context_tokens)
            .collect();
        assert_eq!(total.peak_context_tokens, *agent.iter().max().unwrap());
        assert_eq!(
            total.mean_context_tokens,
            agent.iter().sum::<u64>() / agent.len() as u64
        );
    }
    assert_eq!(whole.session[0].cost_vs_recorded, Some(1.0));
    // Taken together the subagents agree with their log as each does.
    let agreement = Agreement::over(
        subagents
            .iter()
            .zip(&whole.subagents)
            .map(|(subagent, replayed)| (&subagent.recording, &replayed.policies[0])),
    )
    .unwrap();
    assert_eq!(agreement.requests, 88);
    assert_eq!(
        (agreement.large_writes, agreement.large_writes_flagged),
        (14, 14)
    );
    assert!((agreement.simulated_hit_share - agreement.recorded_hit_share).abs() <= 0.03);

    let (_, plain) = run(
        &dir.join("claude-code/d7d349f9-c243-46e2-9a32-4a0eddfc634b.jsonl"),
        Provider::Anthropic,
        window,
    );
    assert_eq!(plain.not_replayed, None);
    assert!(plain.subagents.is_empty() && plain.session.is_empty());
}

/// The calibration finds the system prompt and tools that Claude Code's log leaves out: about
/// 14K tokens on these sessions (the first request of each writes that much more than its
/// messages).
#[test]
fn the_calibration_finds_the_prompt_the_log_does_not_show() {
    let path = condense_core::testing::transcripts_dir()
        .join("claude-code/d7d349f9-c243-46e2-9a32-4a0eddfc634b.jsonl");
    let (_, replay) = run(&path, Provider::Anthropic, 200_000);
    let calibration = replay.calibration;
    assert_eq!(calibration.fitted_on, 90);
    assert!(
        (10_000..20_000).contains(&calibration.hidden_prefix),
        "{calibration:?}"
    );
    assert!((1.1..1.8).contains(&calibration.scale), "{calibration:?}");
}

/// A log whose text was redacted (every output and every reply's text one short mark, its
/// usage as recorded) is not what the model read, and its calibration says so: the usage
/// gives some fourteen provider tokens per token of what is left.
#[test]
fn a_log_with_its_text_redacted_does_not_fit_its_line() {
    let path = condense_core::testing::transcripts_dir()
        .join("claude-code/e80aa543-6eff-4cb5-91e0-6d4e8e7951e9.jsonl");
    let redacted =
        condense_core::testing::with_text_redacted(&std::fs::read_to_string(path).unwrap());
    let recording = Recording::of(condense_formats::read(redacted.as_bytes(), None).unwrap().1);
    let replay = as_recorded(&recording);
    let calibration = replay.calibration;
    assert_eq!(calibration.fitted_on, 17);
    assert!(calibration.fitted_scale > 5.0, "{calibration:?}");
    assert!(!calibration.fits_the_log(), "{calibration:?}");
}

/// No tool call or result of `input` is left unpaired that was paired in `history` (a
/// recorded session may itself end a turn with an unanswered call; that is not the policy's).
fn assert_valid(
    policy: &str,
    path: &std::path::Path,
    step: usize,
    input: &[Message],
    history: &[Message],
) {
    let known: Vec<_> = condense_core::validate(history)
        .into_iter()
        .map(|finding| finding.kind)
        .collect();
    let broken: Vec<_> = condense_core::validate(input)
        .into_iter()
        .filter(|finding| !known.contains(&finding.kind))
        .collect();
    assert!(
        broken.is_empty(),
        "{policy} on {} request {step}: {broken:?}",
        path.display()
    );
}

/// A message's role and the calls and results it holds (a result may be cut to a preview).
fn shape(message: &Message) -> (condense_core::Role, Vec<String>) {
    let ids = message
        .parts
        .iter()
        .filter_map(|part| match part {
            condense_core::Part::ToolCall(call) => Some(format!("call {}", call.id)),
            condense_core::Part::ToolResult(result) => Some(format!("result {}", result.call_id)),
            _ => None,
        })
        .collect();
    (message.role, ids)
}

/// At a 32K window every compacting policy fires on the long sessions. Whatever it does, each
/// request it builds keeps every tool call with its result; condense ends each request with the
/// session's last message (its outputs possibly cut to previews); the same replay twice gives the same figures; and `none` fails exactly where
/// a request is over the window.
#[test]
fn every_policy_builds_valid_requests_on_every_transcript() {
    let window = 32_000;
    let mut fired = std::collections::BTreeMap::new();
    for path in transcripts() {
        let recording = recording(&path);
        let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
        let model = model(counter.as_ref(), window);
        let messages = &recording.conversation.messages;
        for mut policy in all(&counter, window) {
            for (index, step) in recording.steps.iter().enumerate() {
                let history = &messages[..step.answer];
                let prepared = policy.prepare(history, step.time_ms, &model).unwrap();
                assert_valid(policy.name(), &path, index, &prepared.input, history);
                if policy.name() == "condense" {
                    // The last message, or just before the continuation a summary adds.
                    let last = history.last().map(shape);
                    let tail: Vec<_> = prepared.input.iter().rev().take(2).map(shape).collect();
                    assert!(
                        tail.iter().any(|sent| Some(sent) == last.as_ref()),
                        "condense dropped the last message of request {index} of {}",
                        path.display()
                    );
                }
                if let Some(condense_replay::SummarizerInput::Forked(input)) =
                    prepared.summarizer.map(|call| call.input)
                {
                    assert_valid(policy.name(), &path, index, &input, history);
                }
                policy.observe(model.tokens(&prepared.input) as u64, 0);
            }
        }
        let (_, first) = run(&path, Provider::Anthropic, window);
        // Twice on a session with times and one without: the same figures, byte for byte.
        let name = path.file_name().unwrap().to_string_lossy();
        if name.starts_with("d7d349f9") || name.starts_with("swe-agent") {
            let (_, second) = run(&path, Provider::Anthropic, window);
            assert_eq!(
                serde_json::to_string(&first).unwrap(),
                serde_json::to_string(&second).unwrap(),
                "{}",
                path.display()
            );
        }
        // condense measures with the provider's usage, system prompt and tools included, so it
        // compacts in time even where they take half the window (it once ignored such usage
        // as implausible and failed dozens of requests here).
        let condense = first
            .policies
            .iter()
            .find(|p| p.name == "condense")
            .unwrap();
        assert_eq!(condense.failures, 0, "condense on {}", path.display());
        let none = first.policies.iter().find(|p| p.name == "none").unwrap();
        // Refused as the provider refuses: the input and the reply's 4,096 over the window.
        let over = none
            .rows
            .iter()
            .filter(|row| row.context_tokens + 4_096 > window as u64)
            .count();
        assert_eq!(none.failures, over);
        for result in &first.policies {
            *fired.entry(result.name.clone()).or_insert(0) += result.compactions;
            let requests = result.rows.len();
            assert_eq!(result.requests, requests);
            assert_eq!(
                requests - result.summarizer_requests,
                recording.steps.len(),
                "one agent request per recorded step"
            );
        }
    }
    for name in ["claude-code", "opencode", "hermes", "condense"] {
        assert!(fired[name] > 0, "{name} never summarized at 32K: {fired:?}");
    }
}

/// `recording` replayed under `policies` at `window`, priced by Anthropic's cache model.
fn under_anthropic(
    recording: &Recording,
    mut policies: Vec<Box<dyn Policy>>,
    counter: Arc<dyn TokenCounter>,
    window: usize,
) -> Replay {
    replay(
        recording,
        &mut policies,
        &settings(Provider::Anthropic, window),
        counter,
        &mut |_| {},
    )
    .unwrap()
}

/// `recording` replayed under Anthropic's model at `window` by Claude Code's rules, then by
/// condense's defaults.
fn beside_claude_code(recording: &Recording, window: usize) -> Replay {
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let policies = vec![
        policy::named("claude-code", counter.clone()).unwrap(),
        condense_policy("condense", window, None),
    ];
    under_anthropic(recording, policies, counter, window)
}

/// `replay`'s result for the policy named `wanted`.
fn named<'r>(replay: &'r Replay, wanted: &str) -> &'r condense_replay::PolicyResult {
    replay
        .policies
        .iter()
        .find(|policy| policy.name == wanted)
        .unwrap()
}

/// The steps of the requests of `policy`'s that failed.
fn failed_steps(policy: &condense_replay::PolicyResult) -> Vec<usize> {
    policy
        .rows
        .iter()
        .filter(|row| row.failed)
        .map(|row| row.step)
        .collect()
}

/// At 24K, 20K and 18K, where Claude Code's system prompt and tools (about 15K provider tokens,
/// which the log does not show) leave little room, condense fails none of a session's requests
/// wherever another policy fails none, and elsewhere no more than any other policy. A request
/// fails as the provider judges it: its input and its reply's limit over the window
/// (condense lowers the limit to the room the input leaves where the reply's 4,096 do not fit),
/// or its answer cut short by a limit so lowered. A request the provider refuses, condense
/// sends once more compacted by the count the refusal gives, as its proxy does
/// ([`condense_replay::Policy::refused`]): a session's first request, before the session's
/// figures give condense the system prompt and tools, fails no longer (every policy that sends
/// the first as it came fails it). What fails where every policy does: at 18K a dozen of
/// d7d349f9's, whose replies of up to 5,058 tokens no request at that window leaves room for. Under the earlier measure, the input alone over the window, condense finished
/// every request of every session here: it once failed dozens at 24K (it took outputs pruned
/// by earlier requests off the provider's count a second time, sized the tail for the whole
/// window, and, once a summary could not get under, waited while the session grew past the
/// window); at 20K one, d7d349f9's request after its 3,831-token `Write`, until such an input
/// could be cut to a preview where nothing else makes the request fit; at 18K two of
/// d7d349f9's, the requests after such a cut, until the cut was logged and made again.
#[test]
fn condense_fails_fewest_at_18k_20k_and_24k() {
    let mut failed = Vec::new();
    for window in [18_000, 20_000, 24_000] {
        for path in transcripts() {
            let (_, replay) = run(&path, Provider::Anthropic, window);
            let named = |wanted: &str| named(&replay, wanted);
            let ours = named("condense");
            let others = ["claude-code", "opencode", "hermes"].map(|name| named(name).failures);
            if others.contains(&0) {
                failed.extend(failures_of(&path, window, ours));
            } else {
                assert!(
                    others.iter().all(|failures| ours.failures <= *failures),
                    "{} at {window}: condense failed {}, the others {others:?}",
                    path.display(),
                    ours.failures
                );
            }
        }
    }
    assert_eq!(failed, Vec::<String>::new());
}

/// 2cba43de's first request at 20K, before any figure of the provider's: condense counts the
/// messages alone (the log holds neither the system prompt nor the tools, about 15K of
/// Anthropic's tokens), finds nothing due and sends it as it came, with the reply's whole
/// 4,096, and the provider refuses it. As condense's proxy does, the replay's policy takes the
/// count the refusal gives and prepares the request again: compacted, it is taken, and only
/// the second try is in the figures. Policies without such a retry are left their refusals.
#[test]
fn a_first_request_the_provider_refuses_is_sent_again_compacted_by_its_count() {
    let path = transcripts()
        .into_iter()
        .find(|path| path.to_string_lossy().contains("2cba43de"))
        .unwrap();
    let (_, replay) = run(&path, Provider::Anthropic, 20_000);
    let ours = named(&replay, "condense");
    assert_eq!((ours.resent, ours.failures), (1, 0));
    let first = &ours.rows[0];
    let limit = first.reply_limit.unwrap_or(4_096);
    assert!(
        !first.failed && first.context_tokens + limit <= 20_000,
        "{first:?}"
    );
    for other in ["claude-code", "opencode", "hermes"] {
        assert_eq!(named(&replay, other).resent, 0, "{other}");
    }
}

/// `policy`'s failed requests on `path` at `window`, as "SESSION at WINDOW: STEP" (the
/// session's first 20 characters).
fn failures_of(
    path: &std::path::Path,
    window: usize,
    policy: &condense_replay::PolicyResult,
) -> Vec<String> {
    let name = path.file_stem().unwrap().to_string_lossy();
    let session = name.get(..20).unwrap_or(&name);
    failed_steps(policy)
        .into_iter()
        .map(|step| format!("{session} at {window}: {step}"))
        .collect()
}

/// At 16K, where Claude Code's system prompt and tools (14K-15K by Anthropic's count, which the
/// log does not show) leave 1.5K-2.4K (1.1K-1.7K by condense's), condense fails no request where
/// Claude Code's rules fail none. It once failed where the request ends in a message of the
/// person's that this room cannot hold beside a summary (a screenshot of 1,600 tokens on
/// dc7e9081 and 6dc88126): their rules send a summary of it in its place; condense, with
/// everything else cut, leaves its image out (the whole message stored, the person's words
/// kept). Before that, it failed more: each output of a last exchange over the tail's budget
/// kept the whole budget (6dc88126's request 10), and the summary kept its half of the room
/// beside a tail over its own. On those two sessions their rules fail every request (their
/// compaction request, the screenshot and the summary before it in it, is more than this window
/// holds even with its oldest rounds dropped, and the requests sent without it fail, their
/// reply's 4,096 beside them), and condense fewer (two each: the first, before any figure of
/// the provider's, and one whose reply outgrew the room the lowered limit left).
#[test]
fn at_16k_condense_fails_no_request_where_claude_code_s_rules_fail_none() {
    let window = 16_384;
    let mut person_cut = 0;
    for path in transcripts()
        .iter()
        .filter(|path| path.extension().unwrap() == "jsonl")
    {
        let recording = recording(path);
        let replay = beside_claude_code(&recording, window);
        let (theirs, ours) = (&replay.policies[0], &replay.policies[1]);
        let name = path.file_name().unwrap().to_string_lossy();
        let screenshot = name.starts_with("dc7e9081") || name.starts_with("6dc88126");
        if (theirs.failures != 0 && !screenshot) || ours.requests == 0 {
            continue;
        }
        if screenshot {
            person_cut += 1;
            // Leaving the image out keeps more than their summary does, and fails fewer.
            assert!(ours.retention > theirs.retention, "{name}");
            assert!(ours.failures < theirs.failures, "{name}");
        } else {
            let failed = failed_steps(ours);
            assert!(failed.is_empty(), "{name}: requests {failed:?} failed");
        }
    }
    assert_eq!(person_cut, 2, "both sessions with a screenshot replayed");
}

/// A Claude Code log with calls it never answered (a step interrupted, the agent going on with
/// its next message, as Claude Code 2 logs show), here every tenth result taken out: at 128K,
/// where Claude Code's rules never compact and keep everything, condense compacts early and
/// still keeps everything. Its tail once counted an unanswered call as one of the last ten
/// and left the oldest of them to the summary (99.4 %-99.8 % kept).
#[test]
fn calls_a_log_never_answered_are_not_counted_among_the_ten_the_tail_keeps() {
    for (name, provider) in [
        ("d7d349f9", Provider::Anthropic),
        ("d7d349f9", Provider::OpenAi),
        ("5f8cbb78", Provider::OpenAi),
    ] {
        let path = transcripts()
            .into_iter()
            .find(|path| {
                path.extension().unwrap() == "jsonl" && path.to_string_lossy().contains(name)
            })
            .unwrap();
        let mut conversation = condense_formats::read(&std::fs::read(&path).unwrap(), None)
            .unwrap()
            .1;
        let mut results = 0;
        conversation.messages.retain(|message| {
            let only_results = message.role != condense_core::Role::Assistant
                && !message.parts.is_empty()
                && message
                    .parts
                    .iter()
                    .all(|part| matches!(part, condense_core::Part::ToolResult(_)));
            results += usize::from(only_results);
            !only_results || results % 10 != 5
        });
        let recording = Recording::of(conversation);
        let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
        let mut policies = vec![
            policy::named("claude-code", counter.clone()).unwrap(),
            condense_policy("condense", 128_000, None),
        ];
        let replay = replay(
            &recording,
            &mut policies,
            &settings(provider, 128_000),
            counter,
            &mut |_| {},
        )
        .unwrap();
        let (theirs, ours) = (named(&replay, "claude-code"), named(&replay, "condense"));
        assert_eq!(
            (theirs.compactions, theirs.retention),
            (0, 1.0),
            "{name} {provider}"
        );
        assert!(
            ours.compactions > 0,
            "{name} {provider}: condense compacts early"
        );
        assert_eq!(ours.retention, 1.0, "{name} {provider}");
    }
}

/// `path`'s Claude Code log with `tokens` more of system prompt and tools on every request (read
/// from the cache, as Claude Code's own prompt is): what its usage would say of a harness whose
/// prefix is that much larger.
fn with_larger_prefix(path: &PathBuf, tokens: u64) -> Recording {
    edited_log(path, |value| {
        if let Some(read) = value.pointer_mut("/message/usage/cache_read_input_tokens")
            && let Some(before) = read.as_u64()
        {
            *read = serde_json::json!(before + tokens);
        }
    })
}

/// `path`'s JSONL log with `edit` made to each line that is JSON (the others kept as they are),
/// read back as a recording.
fn edited_log(path: &PathBuf, mut edit: impl FnMut(&mut serde_json::Value)) -> Recording {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(
            |line| match serde_json::from_str::<serde_json::Value>(line) {
                Ok(mut value) => {
                    edit(&mut value);
                    value.to_string()
                }
                Err(_) => line.to_owned(),
            },
        )
        .collect();
    let bytes = lines.join("\n").into_bytes();
    Recording::of(condense_formats::read(&bytes, None).unwrap().1)
}

/// Where a harness's system prompt and tools take 25K-29K of a 32K window (the shared Claude
/// Code sessions with 13,500 tokens more of them on every request; the issue that asked for it
/// names a real one of 27.9K), condense fails no request where Claude Code's rules fail none: it
/// parts the prefix from the tokenizer's scale on the session's own figures, gives the
/// conversation three quarters of what the prefix leaves, and sizes the summary, the tail and
/// the requests it carries to that. (Taken as a share of each request, the prefix once left
/// requests of two of these sessions over the window, nine in all.) And where the last exchange
/// alone is more than the prefix leaves (d7d349f9's after its 3,831-token `Write`, 5.1K by the
/// provider's count, where the prefix leaves 4.1K), the file's text in the call is cut to a
/// preview: that request once failed, where their rules, which summarize the last exchange
/// away, sent it.
#[test]
fn condense_finishes_where_claude_code_s_rules_do_with_a_prefix_filling_the_window() {
    let window = 32_768;
    for path in transcripts()
        .iter()
        .filter(|path| path.extension().unwrap() == "jsonl")
    {
        let recording = with_larger_prefix(path, 13_500);
        let replay = beside_claude_code(&recording, window);
        let (theirs, ours) = (&replay.policies[0], &replay.policies[1]);
        // Two of the logs hold side records only: nothing to send.
        if theirs.failures != 0 || ours.requests == 0 {
            continue;
        }
        let failed = failed_steps(ours);
        let name = path.file_name().unwrap().to_string_lossy();
        assert!(
            failed.is_empty(),
            "{name}: requests {failed:?} over the window"
        );
        // It keeps far more than their rules, which keep a summary alone.
        assert!(ours.retention > theirs.retention, "{name}");
    }
}

/// Where Claude Code's system prompt and tools (about 15K provider tokens, which the log does
/// not show) leave the conversation 1.5K-2K tokens of a 16.5K or 17K window, condense fails no
/// request wherever any policy fails none (opencode's rules, which send a summary alone, finish
/// every session there). The summary's room is reckoned before the tail's cuts and in condense's
/// count of the provider's window, and the summary never gave up the person's requests and the
/// files it lists: requests went over the window by a few hundred tokens, 48 of d7d349f9's at
/// 16K, 3 at 16.5K, 1 at 17K, and 9cc4a4b0's at 16K. Now a request still over the window goes
/// out with the summary written again within what is left, those lines shed where they must
/// be, and the summary of a request with nothing new is so written too where it alone is what
/// keeps the request over. (Sessions of Claude Code 2 whose prompt and tools take 30K-34K of a
/// 32K-36K window failed 1-44 requests each the same way; see BENCHMARKS.md.) Judged as the
/// provider judges a request, its input and reply limit together, 5f8cbb78's step 115 at 17K
/// failed until 2026-12-01: a reply longer than any the agent had written, cut short by the
/// limit lowered to the room, and cut again when sent once more, as the request had nothing new
/// to summarize and went out as it was; its summary is now written again smaller to leave the
/// reply twice the limit that cut it. (Each request these tests named as failing so, at
/// 16.5K-24K, was the one after which the agent wrote a reply longer than any before it:
/// 5f8cbb78's step 114 at 17K, until the replay sent a request cut at a lowered limit once
/// more, as the proxy and a client that streams do; 2cba43de's first at 20K, until a refused
/// request was sent again compacted by the refusal's count; 5f8cbb78's request at 17K right
/// after its cut one, until a cut reply left the next request twice the limit that cut it;
/// d7d349f9's step 55 at 20K, until the hidden prefix was held to what the session's first
/// request shows; and its step 62 at 20K, until a compaction left its request under the point
/// at which compaction is due.)
#[test]
fn condense_finishes_wherever_any_policy_does_with_under_2k_left_by_the_prefix() {
    let mut failed = Vec::new();
    for window in [16_500, 17_000] {
        for path in transcripts()
            .iter()
            .filter(|path| path.extension().unwrap() == "jsonl")
        {
            let (_, replay) = run(path, Provider::Anthropic, window);
            let ours = replay
                .policies
                .iter()
                .find(|policy| policy.name == "condense")
                .unwrap();
            if replay.policies.iter().any(|policy| policy.failures == 0) {
                failed.extend(failures_of(path, window, ours));
            }
        }
    }
    assert_eq!(failed, Vec::<String>::new());
}

/// An answer cut short at a reply limit condense lowered is billed as the provider bills it (the
/// input, and the reply up to the limit), and the request goes once more, prepared after the
/// policy saw the cut, as the proxy asks again for a whole answer and a client that streams
/// sends it again: 5f8cbb78 at 17K, whose step 114 the agent answered at more length than ever
/// before. Before, the cut answer cost nothing and the request counted as failed.
#[test]
fn a_reply_cut_at_a_lowered_limit_is_billed_and_sent_once_more() {
    let path = transcripts()
        .into_iter()
        .find(|path| path.to_string_lossy().contains("claude-code/5f8cbb78"))
        .unwrap();
    let (_, replay) = run(&path, Provider::Anthropic, 17_000);
    let ours = replay
        .policies
        .iter()
        .find(|policy| policy.name == "condense")
        .unwrap();
    let step: Vec<&condense_replay::Row> = ours.rows.iter().filter(|row| row.step == 114).collect();
    let kinds: Vec<_> = step.iter().map(|row| row.kind).collect();
    assert_eq!(
        kinds,
        [
            condense_replay::RowKind::CutShort,
            condense_replay::RowKind::Agent
        ]
    );
    let (cut, again) = (step[0], step[1]);
    assert_eq!(Some(cut.output_tokens), cut.reply_limit);
    assert!(cut.cost_usd > 0.0 && !cut.failed, "{cut:?}");
    assert!(!again.failed, "{again:?}");
    assert!(
        again.reply_limit.unwrap_or(4_096) > cut.output_tokens,
        "{again:?}"
    );
    assert!(ours.resent >= 1);
    // Every cut short once is one more request in the figures, billed.
    let cuts = ours
        .rows
        .iter()
        .filter(|row| row.kind == condense_replay::RowKind::CutShort)
        .count();
    let agent = ours
        .rows
        .iter()
        .filter(|row| row.kind == condense_replay::RowKind::Agent)
        .count();
    assert_eq!(ours.requests, agent + cuts + ours.summarizer_requests);
}

/// A configuration that asks summaries inside the agent's request (`summarizer.kind = "upstream"`
/// with `summarizer.fork`, as the proxy runs it) pays for them at the cache-read price: each
/// forked call reads the agent's prefix, where the separate prompt reads nothing. The agent's
/// own requests are the same either way, so the session costs less by what the summaries saved.
#[test]
fn forked_summaries_read_the_agents_cached_prefix() {
    let path = condense_core::testing::transcripts_dir()
        .join("openai/mini-swe-agent-sympy__sympy-13091.json");
    let replay = separate_and_forked(&path, 64_000);
    let (separate, forked) = (&replay.policies[0], &replay.policies[1]);
    let summaries = |result: &condense_replay::PolicyResult| -> Vec<condense_replay::Row> {
        result
            .rows
            .iter()
            .filter(|row| row.kind == condense_replay::RowKind::Summarizer)
            .cloned()
            .collect()
    };
    let agent = |result: &condense_replay::PolicyResult| -> Vec<u64> {
        result
            .rows
            .iter()
            .filter(|row| row.kind == condense_replay::RowKind::Agent)
            .map(|row| row.context_tokens)
            .collect()
    };
    assert_eq!(agent(separate), agent(forked), "the agent's requests");
    let (by_itself, inside) = (summaries(separate), summaries(forked));
    assert!(!inside.is_empty());
    assert_eq!(by_itself.len(), inside.len());
    assert!(by_itself.iter().all(|row| row.usage.cache_read == 0));
    assert!(
        inside
            .iter()
            .any(|row| row.usage.cache_read * 2 > row.context_tokens),
        "{inside:?}"
    );
    let cost = |rows: &[condense_replay::Row]| rows.iter().map(|row| row.cost_usd).sum::<f64>();
    assert!(cost(&inside) < cost(&by_itself), "{inside:?} {by_itself:?}");
    assert!(forked.cost_usd < separate.cost_usd);
}

/// A fork is made only when it costs less than the separate prompt by the cache's prices:
/// where the part it would write at a premium (messages new since the last request, outputs
/// just replaced) outweighs a small head, the head goes alone. Over every shared session at
/// 32K, forking never made a session dearer (it did by 3 % on e80aa543 before that rule).
#[test]
fn forking_never_makes_a_session_dearer() {
    for path in transcripts() {
        let replay = separate_and_forked(&path, 32_000);
        let (separate, forked) = (&replay.policies[0], &replay.policies[1]);
        assert!(
            forked.cost_usd <= separate.cost_usd + 1e-9,
            "{}: {} forked against {} separate",
            path.display(),
            forked.cost_usd,
            separate.cost_usd
        );
    }
}

/// A summary is never forked at a request the provider's cache holds nothing of (the pause
/// before it past the cache's lifetime): the fork's estimate counted what the previous request
/// sent as cached, and such a fork writes all it reads at the write price. 5f8cbb78 at 32K with
/// ten minutes between its lines (where, as recorded, summaries are forked): every summary goes
/// as a prompt of its own, nothing read from the cache or written to it.
#[test]
fn no_summary_is_forked_at_a_cold_cache() {
    let path = condense_core::testing::transcripts_dir()
        .join("claude-code/5f8cbb78-38d3-47e9-9504-baa93bb166c9.jsonl");
    let mut line = 0u64;
    let recording = edited_log(&path, |value| {
        if let Some(time) = value.get_mut("timestamp") {
            let minutes = line * 10;
            *time = serde_json::json!(format!(
                "2025-07-{:02}T{:02}:{:02}:00.000Z",
                1 + minutes / 1440,
                minutes / 60 % 24,
                minutes % 60
            ));
            line += 1;
        }
    });
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let mut policies = vec![condense_policy("forked", 32_000, Some(true))];
    let replay = replay(
        &recording,
        &mut policies,
        &settings(Provider::Anthropic, 32_000),
        counter,
        &mut |_| {},
    )
    .unwrap();
    let summaries: Vec<&condense_replay::Row> = replay.policies[0]
        .rows
        .iter()
        .filter(|row| row.kind == condense_replay::RowKind::Summarizer)
        .collect();
    assert!(summaries.len() > 3, "{summaries:?}");
    assert!(
        summaries
            .iter()
            .all(|row| row.usage.cache_read == 0 && row.usage.cache_write == 0),
        "{summaries:?}"
    );
}

/// The condense policy twice on `path` at `window`: summaries asked separately, then forked.
fn separate_and_forked(path: &PathBuf, window: usize) -> Replay {
    let recording = recording(path);
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let mut policies = vec![
        condense_policy("separate", window, Some(false)),
        condense_policy("forked", window, Some(true)),
    ];
    replay(
        &recording,
        &mut policies,
        &settings(Provider::Anthropic, window),
        counter,
        &mut |_| {},
    )
    .unwrap()
}

/// The OpenAI model never writes at a premium, and reads only in 128-token steps from 1,024.
#[test]
fn the_openai_model_reads_in_steps_and_never_writes() {
    let path = condense_core::testing::transcripts_dir()
        .join("openai/mini-swe-agent-django__django-16139.json");
    let (_, replay) = run(&path, Provider::OpenAi, 200_000);
    for result in &replay.policies {
        assert_eq!(result.cache_write_tokens, 0, "{}", result.name);
        for row in &result.rows {
            let read = row.usage.cache_read;
            assert!(
                read == 0 || (read >= 1024 && (read - 1024) % 128 == 0),
                "{read}"
            );
        }
        assert!(result.cache_read_tokens > 0);
    }
}

/// The replay keeps only the wire fields policies read; the condense policy must still send,
/// request for request, what the engine itself sends for the full log (times, usage, working
/// directory and all).
#[test]
fn condense_in_the_replay_sends_what_the_engine_sends_on_the_full_log() {
    let window = 32_000;
    let path = condense_core::testing::transcripts_dir()
        .join("claude-code/d7d349f9-c243-46e2-9a32-4a0eddfc634b.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    let full = condense_formats::read(&bytes, None).unwrap().1;
    let recording = Recording::of(full.clone());
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let model = model(counter.as_ref(), window);
    let configured = config(window);
    let requests = policy::SummaryRequests::from_config(&configured);
    let compactor = Compactor::from_config(&configured).unwrap();
    let mut replayed = policy::Condense::new("condense", compactor, requests).unwrap();
    let clock = SetClock::default();
    let engine = Compactor::from_config(&config(window))
        .unwrap()
        .with_store(Box::new(condense_host::MemoryStore::new()))
        .with_clock(Box::new(clock.clone()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut state = condense_host::SessionState::default();
    let mut summaries = 0;
    for (index, step) in recording.steps.iter().enumerate() {
        let now = step.time_ms.unwrap();
        let prepared = replayed
            .prepare(
                &recording.conversation.messages[..step.answer],
                Some(now),
                &model,
            )
            .unwrap();
        clock.0.store(now, std::sync::atomic::Ordering::Relaxed);
        let history = condense_core::Conversation::new(full.messages[..step.answer].to_vec());
        let direct = runtime
            .block_on(engine.prepare(history, &mut state))
            .unwrap();
        if matches!(
            direct.report.compaction,
            condense_host::CompactionOutcome::Summarized { .. }
        ) {
            summaries += 1;
        }
        let parts = |messages: &[Message]| -> Vec<_> {
            messages.iter().map(|m| (m.role, m.parts.clone())).collect()
        };
        assert_eq!(
            parts(&prepared.input),
            parts(&direct.conversation.messages),
            "request {index}"
        );
    }
    assert!(summaries > 0, "the window is small enough for summaries");
}

/// A clock the test sets to each request's time.
#[derive(Debug, Clone, Default)]
struct SetClock(Arc<std::sync::atomic::AtomicU64>);

impl condense_host::Clock for SetClock {
    fn now_ms(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A session sent as Responses bodies (as Codex sends it: each answer a run of items, its text
/// and each call a message of its own) is the same requests as its Chat Completions form: one
/// per answer, with the same output and context within the few tokens the item framing adds.
#[test]
fn a_responses_session_replays_as_its_chat_form() {
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let mut compared = 0;
    for path in transcripts() {
        if !path.to_string_lossy().contains("/openai/") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let chat: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let body = condense_core::testing::responses_from_chat(&chat);
        let chat = recording(&path);
        let responses = Recording::of(
            condense_formats::read_json(condense_formats::Format::Responses, body).unwrap(),
        );
        assert_eq!(responses.steps.len(), chat.steps.len(), "{path:?}");
        let replayed = |recording: &Recording| {
            let mut policies: Vec<Box<dyn Policy>> = ["recorded", "none"]
                .iter()
                .filter_map(|name| policy::named(name, counter.clone()))
                .collect();
            replay(
                recording,
                &mut policies,
                &settings(Provider::OpenAi, 200_000),
                counter.clone(),
                &mut |_| {},
            )
            .unwrap()
        };
        let (ours, theirs) = (replayed(&responses), replayed(&chat));
        for (a, b) in ours.policies.iter().zip(&theirs.policies) {
            assert_eq!(a.requests, b.requests, "{path:?} {}", a.name);
            // An answer of text and calls is two items, each framed as a message (a few
            // tokens each).
            let (x, y) = (a.output_tokens as f64, b.output_tokens as f64);
            let framing = 5.0 * a.requests as f64;
            assert!((x - y).abs() <= framing, "{path:?} {}: {x} vs {y}", a.name);
            let (x, y) = (a.mean_context_tokens as f64, b.mean_context_tokens as f64);
            assert!((x - y).abs() <= 0.05 * y, "{path:?} {}: {x} vs {y}", a.name);
        }
        compared += 1;
    }
    assert!(compared >= 10, "{compared}");
}

/// A subagent replayed under other policies than the main thread's could not be added up: the
/// replay refuses it, naming both.
#[test]
fn a_subagent_under_other_policies_is_refused() {
    let dir = condense_core::testing::transcripts_dir();
    let path = dir.join("claude-code/5f8cbb78-38d3-47e9-9504-baa93bb166c9.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let first = condense_formats::subagents(&bytes, condense_formats::Format::ClaudeCode)
        .unwrap()
        .remove(0);
    let mut subagents = vec![condense_replay::SubagentRecording::new(
        first.name,
        Recording::of(first.conversation),
        vec![policy::named("none", counter.clone()).unwrap()],
    )];
    let error = condense_replay::replay_session(
        &recording(&path),
        &mut [policy::named("recorded", counter.clone()).unwrap()],
        &mut subagents,
        &settings(Provider::Anthropic, 200_000),
        counter,
        &mut |_| {},
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the none policy: subagent sidechain from line 275 is given other policies than the main thread's (recorded)"
    );
}

/// What [`condense_is_on_the_frontier_and_keeps_what_matters_wherever_any_policy_finishes`]
/// checks, at `windows` under both providers' prices: no breach of what must hold (all of them
/// listed when there are any), Claude Code's rules finishing at `theirs_finish` points, and
/// condense costing more than they do at no more than `dearer_at_most` of them. Cost at most
/// theirs is the target not yet met everywhere: a floor, so that a change that makes condense
/// dearer than their rules at one more point is seen (lowered as the count falls).
fn assert_on_the_frontier(windows: &[usize], theirs_finish: usize, dearer_at_most: usize) {
    let (breaches, finish, dearer) = frontier(windows);
    assert!(breaches.is_empty(), "{}", breaches.join("\n"));
    assert_eq!(
        finish, theirs_finish,
        "the points where Claude Code's rules finish"
    );
    assert!(
        dearer.len() <= dearer_at_most,
        "condense costs more than Claude Code's rules at {} points (at most {dearer_at_most}):\n{}",
        dearer.len(),
        dearer.join("\n")
    );
}

/// Every breach at `windows`, the points where Claude Code's rules finish, and those of them
/// where condense costs more ([`assert_on_the_frontier`]).
fn frontier(windows: &[usize]) -> (Vec<String>, usize, Vec<String>) {
    // Every breach, so that one run shows them all.
    let mut breaches = Vec::new();
    // Where Claude Code's rules finish: the points, and those where condense costs more.
    let (mut theirs_finish, mut dearer) = (0, Vec::new());
    for path in transcripts() {
        for (provider, window) in [Provider::Anthropic, Provider::OpenAi]
            .into_iter()
            .flat_map(|provider| windows.iter().map(move |&window| (provider, window)))
        {
            let (_, replay) = run(&path, provider, window);
            let name = format!("{} at {window} ({provider})", path.display());
            let named = |wanted: &str| named(&replay, wanted);
            let (ours, none) = (named("condense"), named("none"));
            if none.failures == 0 && none.retention != 1.0 {
                breaches.push(format!(
                    "{name}: the whole history keeps {}",
                    none.retention
                ));
            }
            // Against the rules agents ship today: wherever they finish, condense shows the
            // model at least what they do; its cost against theirs is counted below.
            let theirs = named("claude-code");
            // (Two of the logs hold side records only: nothing to send, nothing to compare.)
            if theirs.failures == 0 && theirs.requests != 0 {
                theirs_finish += 1;
                if ours.cost_usd > theirs.cost_usd + 1e-9 {
                    dearer.push(format!("{name}: {:.3}x", ours.cost_usd / theirs.cost_usd));
                }
            }
            if theirs.failures == 0 && ours.retention < theirs.retention - 1e-9 {
                breaches.push(format!(
                    "{name}: condense keeps {:.4}, Claude Code's rules {:.4}",
                    ours.retention, theirs.retention
                ));
            }
            // What matters to the agent, on average over its requests: at least 95 %.
            if ours.failures == 0 && ours.retention < 0.95 {
                breaches.push(format!(
                    "{name}: condense keeps {:.4} on average",
                    ours.retention
                ));
            }
            if replay.policies.iter().any(|policy| policy.failures == 0) && ours.failures != 0 {
                breaches.push(format!(
                    "{name}: condense failed {} requests where another policy failed none",
                    ours.failures
                ));
            }
            for other in replay.policies.iter().filter(|policy| {
                !matches!(policy.name.as_str(), "recorded" | "none") && !sent_everything(policy)
            }) {
                let dominates = other.failures == 0
                    && other.cost_usd < ours.cost_usd - 1e-9
                    && other.retention >= ours.retention;
                if dominates {
                    breaches.push(format!(
                        "{name}: {} costs ${:.4} and keeps {:.4}; condense ${:.4} and {:.4}",
                        other.name, other.cost_usd, other.retention, ours.cost_usd, ours.retention
                    ));
                }
            }
        }
    }
    (breaches, theirs_finish, dearer)
}

/// What condense's defaults must hold on every shared session at 32K, 64K and 128K, priced
/// against Anthropic's cache model and OpenAI's: no failed request wherever any policy has none, no
/// other compaction policy (Claude Code's, opencode's, hermes-agent's rules) that finishes both
/// cheaper and keeping at least as much (condense on their cost/retention frontier), at
/// least what Claude Code's rules keep wherever they finish, and at least 95 % of what matters
/// on average over a session's requests wherever condense finishes; and the
/// measure itself: the whole history, sent as it is, keeps everything. (Sending everything can
/// be cheaper where a session ends just under the window, or ends before an early compaction
/// has paid for itself: condense compacts early when that costs less over the requests that
/// follow, a bet on the session going on that a session ending a few requests later loses. So
/// `none`, and a policy that on this session did what `none` does, summarizing and clearing
/// nothing, are not compared: on openhands ponyc-4588 at 32K, condense compacts at the 45th of
/// 49 requests, to be paid back by the 56th, and costs 3 % more than sending everything.)
#[test]
fn condense_is_on_the_frontier_and_keeps_what_matters_wherever_any_policy_finishes() {
    assert_on_the_frontier(&[32_000, 64_000, 128_000], 119, DEARER_THAN_CLAUDE_CODE);
}

/// The points of [`condense_is_on_the_frontier_and_keeps_what_matters_wherever_any_policy_finishes`]
/// (120: each shared file's main thread with requests to send, at three windows and two
/// providers' prices; BENCHMARKS.md counts 108, leaving out the Messages API copies of two
/// Claude Code sessions) where condense's defaults cost more than Claude Code's rules. Those
/// rules finish at 119: at d7d349f9 at 32K under Anthropic's model, the files they attach again
/// after a summary leave 20 requests over the window (5f8cbb78's that fail at 32K are its
/// subagents', which this test does not replay). Condense is dearer at 4, all at
/// 32K under OpenAI's model, where it keeps the agent's last ten calls after a summary and
/// their rules keep the summary and the files alone: dc7e9081 (1.071x: they compact once, read
/// no file to attach, and keep 79.9 % to condense's 100 %), pylint-6528 (1.034x),
/// django-11138 (1.010x) and ponyc-4595 (1.000x) (BENCHMARKS.md).
const DEARER_THAN_CLAUDE_CODE: usize = 4;

/// The same at windows the defaults were never measured at while they were chosen (40K, 48K,
/// 96K, and the 200K of Claude's models), where the shares and the cost model's cycle fall
/// elsewhere: no breach of what must hold, and Claude Code's rules dearer than condense's at
/// no more points than [`DEARER_AT_OTHER_WINDOWS`].
#[test]
fn condense_keeps_to_the_frontier_at_windows_its_defaults_were_not_chosen_at() {
    assert_on_the_frontier(
        &[40_000, 48_000, 96_000, 200_000],
        160,
        DEARER_AT_OTHER_WINDOWS,
    );
}

/// The points of [`condense_keeps_to_the_frontier_at_windows_its_defaults_were_not_chosen_at`]
/// (160) where condense's defaults cost more than Claude Code's rules, as last measured: 4 at
/// 40K and 1 at 48K, on django-11138 and pylint-6528 (the tail of recent calls against their
/// summary alone, as at 32K).
const DEARER_AT_OTHER_WINDOWS: usize = 5;

/// `path`'s Claude Code log with each of its answers `minutes` after the request it answers
/// (every later timestamp moved on by that much at each answer): a session paced by a person
/// approving each step, or by builds that outlast the cache, where every request finds the
/// cache expired. Every answer is named as Sonnet's, so that the pauses are the only requests
/// written whole (a model's switch is [`a_request_to_another_model_is_compacted_as_at_an_expired_cache`]'s).
fn paced(path: &PathBuf, minutes: u64) -> Recording {
    let mut shift = 0;
    edited_log(path, |value| {
        if let Some(model) = value.pointer_mut("/message/model") {
            *model = "claude-sonnet-4-20250514".into();
        }
        if value["type"] == "assistant" {
            shift += minutes * 60_000;
        }
        if let Some(at) = value["timestamp"].as_str().map(str::to_owned) {
            let moved = condense_core::time::parse_rfc3339(&at).unwrap() + shift;
            value["timestamp"] = condense_core::time::format_rfc3339(moved).into();
        }
    })
}

/// `recording` replayed at 64K under Anthropic's cache model living `ttl` by condense as
/// built in and by condense with the rule of a cold cache turned off
/// (`compaction.cache_lifetime_minutes = 0`), in that order.
fn with_and_without_the_cold_rule(recording: &Recording, ttl: Ttl) -> Replay {
    let window = 64_000;
    let mut configured = Sources {
        flags: vec![(
            "test".into(),
            "compaction.cache_lifetime_minutes".into(),
            "0".into(),
        )],
        ..Sources::default()
    };
    configured.flags.extend(config_flags(window));
    let configured = Config::load(&configured).unwrap();
    let requests = policy::SummaryRequests::from_config(&configured);
    let compactor = Compactor::from_config(&configured).unwrap();
    let off = policy::Condense::new("off", compactor, requests).unwrap();
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
    let mut policies = vec![
        condense_policy("condense", window, None),
        Box::new(off) as _,
    ];
    let settings = ReplaySettings {
        ttl,
        ..settings(Provider::Anthropic, window)
    };
    replay(recording, &mut policies, &settings, counter, &mut |_| {}).unwrap()
}

/// The first request condense with the rule of a cold cache sends otherwise than without it:
/// checked to be smaller (a compaction), the whole session cheaper and keeping as much, with
/// nothing failed. Its step.
fn first_cold_compaction(replay: &Replay) -> usize {
    let (rule, without) = (&replay.policies[0], &replay.policies[1]);
    let first = rule
        .rows
        .iter()
        .zip(&without.rows)
        .position(|(ours, theirs)| ours.context_tokens != theirs.context_tokens)
        .expect("the rule compacted somewhere");
    let step = rule.rows[first].step;
    assert!(
        rule.rows[first].context_tokens < without.rows[first].context_tokens,
        "request {step} was compacted"
    );
    assert!(
        rule.cost_usd < without.cost_usd,
        "{} against {}",
        rule.cost_usd,
        without.cost_usd
    );
    assert!(rule.retention >= without.retention);
    assert_eq!(failed_steps(rule), Vec::<usize>::new());
    step
}

/// The shared Claude Code session the cold-cache tests replay.
fn d7d349f9() -> PathBuf {
    transcripts()
        .into_iter()
        .find(|path| path.to_string_lossy().contains("d7d349f9"))
        .unwrap()
}

/// Past the cache's lifetime a request is written to the cache whole whatever it holds, so a
/// compaction then rewrites nothing it would not have: condense compacts at such a request where
/// the head it replaces is larger than what it keeps (`compaction.cache_lifetime_minutes`).
/// d7d349f9 at 64K with each answer six minutes after its request: the first request that
/// differs from the rule turned off comes after a pause, the session costs less (measured:
/// $11.11 against $12.07) and keeps as much. With a cache of an hour (`--ttl 1h`) the pauses are
/// no longer pauses and the rule changes nothing.
#[test]
fn a_compaction_after_the_cache_expired_rewrites_nothing_it_would_not_have() {
    let path = d7d349f9();
    let recording = paced(&path, 6);
    let step = first_cold_compaction(&with_and_without_the_cold_rule(
        &recording,
        Ttl::FiveMinutes,
    ));
    let pause = recording.steps[step].time_ms.unwrap() - recording.steps[step - 1].time_ms.unwrap();
    assert!(
        pause > 5 * 60_000,
        "request {step} came {pause} ms after the one before"
    );
    let hour = with_and_without_the_cold_rule(&recording, Ttl::OneHour);
    assert_eq!(hour.policies[0].cost_usd, hour.policies[1].cost_usd);
}

/// A provider keeps a cache per model: d7d349f9 falls back from Opus to Sonnet at its 59th
/// request, which the log shows written to the cache whole. condense, reading the model off the
/// request, compacts at such a request where the head it replaces is larger than what it keeps,
/// as after a pause. At the log's own fallback condense compacted eleven requests before, and
/// the head is smaller than that; so the fallback is moved to the 71st request, which comes
/// before condense compacts again: that is then the first request condense sends otherwise than
/// with the rule off, and the session costs less and keeps as much.
#[test]
fn a_request_to_another_model_is_compacted_as_at_an_expired_cache() {
    let mut recording = self::recording(&d7d349f9());
    let (opus, sonnet) = (
        Some("claude-opus-4-20250514"),
        Some("claude-sonnet-4-20250514"),
    );
    let models = |recording: &Recording| -> Vec<Option<String>> {
        recording
            .steps
            .iter()
            .map(|step| step.model.clone())
            .collect()
    };
    let steps = recording.steps.len();
    let fallback = |at: usize| -> Vec<Option<String>> {
        (0..steps)
            .map(|step| if step < at { opus } else { sonnet }.map(str::to_owned))
            .collect()
    };
    assert_eq!(models(&recording), fallback(58));
    for (step, model) in recording.steps.iter_mut().zip(fallback(70)) {
        step.model = model;
    }
    let step = first_cold_compaction(&with_and_without_the_cold_rule(
        &recording,
        Ttl::FiveMinutes,
    ));
    assert_eq!(step, 70);
}

/// A Claude Code 1.0 log the harness compacted itself, made from the shared 069508a5 (Claude
/// Code 1.0.53): its summary, a user line flagged `isCompactSummary` that starts a new root,
/// goes before the person's second request, and the requests after it carry what Claude Code
/// would then have sent: its system prompt, the summary and what followed, and 20,000 tokens the
/// log does not hold (Claude Code 1.0 attaches the files it had read again; the unseen logs of
/// the same project carry 14K-89K of them after each summary). Replayed whole, the `recorded`
/// policy reproduces the log's usage: the line through the requests before the summary, the
/// step after it found, the provider's cache-hit share within 3 points and the large cache
/// write after the summary made too, every request's input after the summary within 2 % of the log's.
#[test]
fn a_log_claude_code_1_compacted_is_replayed_with_what_it_sent_after_its_summary() {
    use serde_json::Value;
    const RESTORED: u64 = 20_000;
    let path = condense_core::testing::transcripts_dir()
        .join("claude-code/069508a5-1193-487c-a9b5-a6f5f3ae4f98.jsonl");
    let mut lines: Vec<Value> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let input = |line: &Value| -> u64 {
        let usage = &line["message"]["usage"];
        [
            "input_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ]
        .iter()
        .map(|field| usage[field].as_u64().unwrap())
        .sum()
    };
    let second = lines
        .iter()
        .position(|line| {
            line["message"]["content"] == "Walk me through installing cuda toolkit 12.x please"
        })
        .unwrap();
    let first_input = input(
        lines
            .iter()
            .find(|line| line["type"] == "assistant")
            .unwrap(),
    );
    let first_text = lines
        .iter()
        .find(|line| line["type"] == "user" && line["message"]["content"].is_string())
        .unwrap()["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    // What the request answering the second request sent before it: the system prompt and the
    // session so far, which the summary replaces (the second request's few tokens aside).
    let answer = &lines[second + 1];
    let replaced = input(answer) - first_input;
    let mut summary = lines[second].clone();
    summary["uuid"] = "compact-summary".into();
    summary["parentUuid"] = Value::Null;
    summary["isCompactSummary"] = true.into();
    summary["message"]["content"] = format!(
        "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below: {first_text}"
    )
    .into();
    lines[second]["parentUuid"] = "compact-summary".into();
    let mut expected = Vec::new();
    let mut after_the_summary = 0;
    let mut usages: std::collections::HashMap<String, Value> = std::collections::HashMap::new();
    for (index, line) in lines.iter_mut().enumerate() {
        if line["type"] != "assistant" {
            continue;
        }
        // Every line of one reply carries the reply's usage.
        let id = line["message"]["id"].to_string();
        if let Some(usage) = usages.get(&id) {
            line["message"]["usage"] = usage.clone();
            continue;
        }
        let was = input(line);
        let now = if index < second {
            was
        } else {
            was - replaced + RESTORED
        };
        let usage = &mut line["message"]["usage"];
        if index > second {
            let uncached = usage["input_tokens"].as_u64().unwrap();
            let written = if index == second + 1 {
                // The system prompt was cached; the summary and what followed it were not.
                now - uncached - first_input + 20
            } else {
                usage["cache_creation_input_tokens"].as_u64().unwrap()
            };
            usage["cache_creation_input_tokens"] = written.into();
            usage["cache_read_input_tokens"] = (now - uncached - written).into();
        }
        usages.insert(id, usage.clone());
        expected.push(now);
        after_the_summary += usize::from(index > second);
    }
    lines.insert(second, summary);
    let bytes: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let conversation =
        condense_formats::read_whole(bytes.as_bytes(), condense_formats::Format::ClaudeCode)
            .unwrap();
    let recording = Recording::of(conversation);
    assert_eq!(recording.recorded_steps(), expected.len());

    let replay = as_recorded(&recording);
    let calibration = &replay.calibration;
    assert!(calibration.fits_the_log(), "{calibration:?}");
    let [after] = calibration.after_summaries.as_slice() else {
        panic!("one step after the one summary: {calibration:?}");
    };
    // Within 5 %: the line through the real requests before the summary lies off them by a
    // few hundred tokens, and the step takes up what the line misses further on.
    assert!(
        after.tokens.abs_diff(RESTORED) * 20 <= RESTORED,
        "{after:?}"
    );
    let agreement = Agreement::of(&recording, &replay.policies[0]).unwrap();
    assert_eq!(agreement.requests, expected.len());
    assert!(
        (agreement.simulated_hit_share - agreement.recorded_hit_share).abs() <= 0.03,
        "{agreement:?}"
    );
    assert!(agreement.large_writes_flagged >= 2, "{agreement:?}");
    let rows: Vec<u64> = replay.policies[0]
        .rows
        .iter()
        .filter(|row| row.kind == condense_replay::RowKind::Agent)
        .map(|row| row.context_tokens)
        .collect();
    assert_eq!(rows.len(), expected.len());
    // The requests after the summary: on the line with the step (those before it lie as far
    // off the line through this log as they did before it was compacted, up to 6 %).
    let before = expected.len() - after_the_summary;
    for (at, (simulated, recorded)) in rows.iter().zip(&expected).enumerate().skip(before) {
        assert!(
            simulated.abs_diff(*recorded) * 50 <= *recorded,
            "request {at}: simulated {simulated}, recorded {recorded}"
        );
    }
}
