//! Codex CLI's session logs through the CLI: the log Codex 0.169.0 wrote
//! (crates/condense-formats/tests/data), and, when `CONDENSE_CODEX` names a Codex
//! (`scripts/codex.sh`), Codex itself resuming a log that condense pruned and then compacted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{command, condense, replay_json};
use condense_core::{Part, ToolOutput};
use condense_formats::Format;
use condense_serve::testing::{Frozen, files_under, responses_agent_upstream, run_bounded};
use serde_json::Value;

fn fixture() -> PathBuf {
    fixture_named("codex-0.169.0.jsonl")
}

fn fixture_named(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../condense-formats/tests/data")
        .join(name)
        .canonicalize()
        .unwrap()
}

/// Pruning that reaches a short session: only the last user turn is protected, every output
/// before it may go.
const PRUNE_ALL_BUT_THE_LAST_TURN: &str =
    "[prune]\nskip_user_turns = 1\nprotect_tokens = 0\nminimum_tokens = 10\n";

/// Each tool output of a Codex log, by call id.
fn outputs(bytes: &[u8]) -> Vec<(String, String)> {
    let (_, conversation) = condense_formats::read(bytes, Some(Format::Codex)).unwrap();
    conversation
        .messages
        .iter()
        .flat_map(|message| &message.parts)
        .filter_map(|part| match part {
            Part::ToolResult(result) => {
                let ToolOutput::Text(text) = &result.content else {
                    panic!("{result:?}")
                };
                Some((result.call_id.clone(), text.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The handle a placeholder names.
fn handle_in(placeholder: &str) -> Option<&str> {
    let at = placeholder.find("condense recall ")? + "condense recall ".len();
    placeholder.get(at..at + 32)
}

#[test]
fn a_pruned_codex_log_keeps_no_copy_of_what_it_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("rollout.jsonl");
    std::fs::copy(fixture(), &input).unwrap();
    std::fs::write(dir.path().join("prune.toml"), PRUNE_ALL_BUT_THE_LAST_TURN).unwrap();
    let out = condense(
        dir.path(),
        &[
            "prune",
            "rollout.jsonl",
            "--config",
            "prune.toml",
            "--context-window",
            "16000",
            "--max-output-tokens",
            "2000",
            "--now",
            "2026-11-23T19:40:00Z",
            "-o",
            "pruned.jsonl",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = std::fs::read(&input).unwrap();
    let after = std::fs::read(dir.path().join("pruned.jsonl")).unwrap();
    let after_text = String::from_utf8(after.clone()).unwrap();
    assert_eq!(
        before.iter().filter(|&&b| b == b'\n').count(),
        after.iter().filter(|&&b| b == b'\n').count(),
        "pruning changes lines, it does not add or remove them"
    );

    let mut replaced = 0;
    for ((id, original), (same_id, now)) in outputs(&before).into_iter().zip(outputs(&after)) {
        assert_eq!(id, same_id);
        let Some(handle) = handle_in(&now) else {
            assert_eq!(original, now, "{id} was changed without a handle");
            continue;
        };
        replaced += 1;
        // Codex's display copy of the output went with it: the text is nowhere in the file.
        let escaped = serde_json::to_string(&original).unwrap();
        let escaped = &escaped[1..escaped.len() - 1];
        assert!(
            !after_text.contains(escaped),
            "{id}'s output is still in the log"
        );
        let recalled = condense(dir.path(), &["recall", handle]);
        assert!(recalled.status.success());
        assert_eq!(
            String::from_utf8(recalled.stdout).unwrap(),
            original,
            "{id}"
        );
    }
    // Two of the first turn's three outputs (the `sed`'s is smaller than a placeholder); the
    // first `cat notes.txt` was superseded by the `sed` that edited the file.
    assert_eq!(replaced, 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        after_text.contains("stale: superseded by exec_command"),
        "{after_text}"
    );
}

#[test]
fn replay_of_a_codex_log_prices_it_at_openai_with_the_logs_own_figures() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture();
    let value = replay_json(dir.path(), &input, &["recorded", "condense"]);
    assert_eq!(value["provider"], "openai");
    let recorded = &value["policies"][0];
    // One request per response: two turns of three and two calls, each ended by an answer.
    assert_eq!(recorded["requests"], 7);
    assert_eq!(recorded["recorded_requests"], 7);
    // Codex's own totals for the two runs (`turn.completed`): 77,532 input tokens of which
    // 65,152 cached, 280 output.
    assert_eq!(recorded["recorded_cache_read_tokens"], 65_152);
    assert_eq!(recorded["recorded_cache_write_tokens"], 0);
    assert_eq!(recorded["recorded_uncached_tokens"], 77_532 - 65_152);
    assert_eq!(recorded["failures"], 0);
    // Priced at the replay's prices, OpenAI's GPT-4.1 ($2 a million input, $0.50 cached, $8
    // output), not at Anthropic's ($0.0609 there).
    let at_openai = (65_152.0 * 0.5 + (77_532.0 - 65_152.0) * 2.0 + 280.0 * 8.0) / 1e6;
    let cost = recorded["recorded_cost_usd"].as_f64().unwrap();
    assert!(
        (cost - at_openai).abs() < 1e-9,
        "{cost} against {at_openai}"
    );
    // The log is what the model read: its usage lies on a line of o200k's scale.
    let calibration = &value["calibration"];
    assert!(
        calibration["fit_error"].as_f64().unwrap() < 0.05,
        "{calibration}"
    );
    let scale = calibration["fitted_scale"].as_f64().unwrap();
    assert!((0.9..1.1).contains(&scale), "{calibration}");
}

/// A log Codex compacted on its own is replayed from its start: `recorded` sends what Codex
/// sent (its history, its summarizer call, then the replacement history and what followed),
/// the other policies what they would have sent had Codex never compacted.
#[test]
fn replay_of_a_log_codex_compacted_covers_the_requests_before_its_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture_named("codex-0.169.0-compacted.jsonl");
    let value = replay_json(dir.path(), &input, &["recorded", "none"]);
    let recorded = &value["policies"][0];
    let none = &value["policies"][1];
    // Four requests of the first turn (three commands and the summarizer call that answered
    // the fourth with Codex's summary), five of the second: nine `token_usage_record` lines.
    assert_eq!(recorded["requests"], 9);
    assert_eq!(recorded["recorded_requests"], 9);
    assert_eq!(recorded["compactions"], 1);
    assert_eq!(recorded["recorded_uncached_tokens"], 91_073);
    // Calibrated on every request, the simulated input agrees with Codex's own total.
    let simulated = recorded["cache_read_tokens"].as_u64().unwrap()
        + recorded["uncached_tokens"].as_u64().unwrap();
    assert!(simulated.abs_diff(91_073) < 910, "{simulated}");
    // Without Codex's compaction: no summarizer call, and the history grows to the end.
    assert_eq!(none["requests"], 8);
    assert_eq!(none["compactions"], 0);
    // Codex's summary is the measure of a model's for the stand-ins.
    assert_eq!(value["summary_length"]["samples"], 1, "{value}");
    assert!(
        none["peak_context_tokens"].as_u64() > recorded["peak_context_tokens"].as_u64(),
        "{value}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_resumes_a_log_that_condense_pruned_and_compacted() {
    let Some(codex) = condense_core::testing::required_url(
        "codex_resumes_a_log_that_condense_pruned_and_compacted",
        "CONDENSE_CODEX",
        "CONDENSE_REQUIRE_CODEX",
    ) else {
        return;
    };
    // Four commands of about 5K tokens each, then an answer (and the same answer to every
    // request after: the resumed ones).
    let commands = (0..4)
        .map(|n| format!("seq 1 {}", 1500 + 100 * n))
        .collect();
    let (upstream, received) = responses_agent_upstream(commands, "Done.").await;
    let home = codex_home(&upstream);
    let work = tempfile::tempdir().unwrap();
    let run = codex_run(codex, home.path(), work.path());
    // Codex blocks; the scripted model runs on this runtime's other threads meanwhile.
    let first = tokio::task::spawn_blocking({
        let run = run.clone();
        move || run(vec!["count, four times".into()])
    })
    .await
    .unwrap();
    let thread = condense_serve::testing::json_events(&first)
        .iter()
        .find_map(|event| event["thread_id"].as_str().map(str::to_owned))
        .unwrap();
    let log = rollout_in(home.path());
    let bodies = |received: &condense_serve::testing::Received| -> Vec<Value> {
        received
            .lock()
            .unwrap()
            .iter()
            .map(|(_, _, body)| serde_json::from_slice(body).unwrap())
            .collect()
    };
    assert_eq!(bodies(&received).len(), 5);

    // Pruned in place: Codex sends the placeholders when it resumes.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prune.toml"),
        "[prune]\nskip_tool_calls = 1\nprotect_tokens = 0\nminimum_tokens = 10\n",
    )
    .unwrap();
    let pruned = condense_in(
        dir.path(),
        &[
            "prune",
            log.to_str().unwrap(),
            "--in-place",
            "--config",
            "prune.toml",
            "--context-window",
            "16000",
            "--max-output-tokens",
            "2000",
        ],
    );
    assert!(pruned.contains("3 of 4 tool outputs replaced"), "{pruned}");
    tokio::task::spawn_blocking({
        let run = run.clone();
        let thread = thread.clone();
        move || run(vec!["resume".into(), thread, "and now?".into()])
    })
    .await
    .unwrap();
    let resumed = bodies(&received).remove(5);
    Frozen::default().check_body(0, Format::Responses, &resumed);
    let outputs: Vec<&Value> = resumed["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "function_call_output")
        .collect();
    assert_eq!(outputs.len(), 4);
    for (n, output) in outputs.iter().enumerate() {
        let text = output["output"].as_str().unwrap();
        assert_eq!(
            text.contains("condense recall"),
            n < 3,
            "output {n}: {text}"
        );
    }

    // Compacted in place: the head became a summary, which Codex sends as a user message, as it
    // sends the summary of its own compaction.
    // The tail by whole turns (`min_tail_calls = 0`): the summary then stands for calls, and
    // the test sees they are not sent again.
    std::fs::write(
        dir.path().join("compact.toml"),
        "[compaction]\nmin_tail_calls = 0\n",
    )
    .unwrap();
    let compacted = condense_in(
        dir.path(),
        &[
            "compact",
            log.to_str().unwrap(),
            "--in-place",
            "--config",
            "compact.toml",
            "--context-window",
            "6000",
            "--max-output-tokens",
            "1000",
        ],
    );
    assert!(
        compacted.contains("summarized by extractive"),
        "{compacted}"
    );
    tokio::task::spawn_blocking(move || run(vec!["resume".into(), thread, "and then?".into()]))
        .await
        .unwrap();
    let resumed = bodies(&received).remove(6);
    Frozen::default().check_body(0, Format::Responses, &resumed);
    let items = resumed["input"].as_array().unwrap();
    let summary: Vec<&Value> = items
        .iter()
        .filter(|item| item.to_string().contains("<prior-conversation-summary>"))
        .collect();
    assert_eq!(summary.len(), 1, "{items:?}");
    assert_eq!(summary[0]["role"], "user");
    let last = items.last().unwrap();
    assert_eq!(last["content"][0]["text"], "and then?");
    // What the summary stands for is not sent again.
    assert!(
        !items.iter().any(|item| item["call_id"] == "call_0"),
        "{items:?}"
    );
}

/// A Codex home whose configuration sends Codex to `upstream` over the Responses API.
fn codex_home(upstream: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"gpt-5-codex\"\nmodel_provider = \"scripted\"\n\n\
             [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{upstream}/v1\"\n\
             wire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n"
        ),
    )
    .unwrap();
    home
}

/// `codex exec ARGS…` in `work` with `home`, as a function that a blocking task can run: it
/// fails the test if Codex fails, and returns what Codex printed (JSON events).
fn codex_run(
    codex: String,
    home: &Path,
    work: &Path,
) -> impl Fn(Vec<String>) -> String + Clone + Send + 'static {
    let (home, work) = (home.to_owned(), work.to_owned());
    move |args: Vec<String>| {
        let mut command = std::process::Command::new(&codex);
        command
            .arg("exec")
            .args(["--json", "--skip-git-repo-check"])
            .arg("--dangerously-bypass-approvals-and-sandbox")
            .args(args)
            .current_dir(&work)
            .env("CODEX_HOME", &home)
            .env("OPENAI_API_KEY", "sk-test");
        let output = run_bounded(command, Duration::from_secs(120));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_resumes_a_log_it_compacted_itself_once_condense_compacted_it_too() {
    let Some(codex) = condense_core::testing::required_url(
        "codex_resumes_a_log_it_compacted_itself_once_condense_compacted_it_too",
        "CONDENSE_CODEX",
        "CONDENSE_REQUIRE_CODEX",
    ) else {
        return;
    };
    let (upstream, received) = responses_agent_upstream(Vec::new(), "ok").await;
    let home = codex_home(&upstream);
    let thread = "01a209ed-fdb9-78e2-9288-2987e04fbd7d";
    let day = home.path().join("sessions/2026/11/23");
    std::fs::create_dir_all(&day).unwrap();
    let log = day.join(format!("rollout-2026-11-23T19-42-01-{thread}.jsonl"));
    std::fs::copy(fixture_named("codex-0.169.0-compacted.jsonl"), &log).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let said = condense_in(
        dir.path(),
        &[
            "compact",
            log.to_str().unwrap(),
            "--in-place",
            "--context-window",
            "3000",
            "--max-output-tokens",
            "500",
            "--now",
            "2026-11-23T19:45:00Z",
        ],
    );
    assert!(said.contains("summarized by extractive"), "{said}");
    let (_, compacted) =
        condense_formats::read(&std::fs::read(&log).unwrap(), Some(Format::Codex)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let run = codex_run(codex, home.path(), work.path());
    tokio::task::spawn_blocking(move || {
        run(vec!["resume".into(), thread.into(), "and now?".into()])
    })
    .await
    .unwrap();
    let resumed: Value = {
        let received = received.lock().unwrap();
        serde_json::from_slice(&received[0].2).unwrap()
    };
    Frozen::default().check_body(0, Format::Responses, &resumed);
    let items = resumed["input"].as_array().unwrap();
    let opening = |start: &str| {
        items
            .iter()
            .filter(|item| {
                item["content"][0]["text"]
                    .as_str()
                    .is_some_and(|text| text.starts_with(start))
            })
            .count()
    };
    // Codex's own summary (what its compaction left, in the log's replacement history: a user
    // turn, so carried whole) and condense's, each once; then the tail condense kept, and the
    // new prompt.
    assert_eq!(opening("Another language model started"), 1, "{items:?}");
    assert_eq!(opening("<prior-conversation-summary>"), 1, "{items:?}");
    let kept_calls: Vec<&str> = compacted
        .messages
        .iter()
        .flat_map(|message| &message.parts)
        .filter_map(|part| match part {
            Part::ToolCall(call) => Some(call.id.as_str()),
            _ => None,
        })
        .collect();
    let sent_calls: Vec<&str> = items
        .iter()
        .filter(|item| item["type"] == "function_call")
        .filter_map(|item| item["call_id"].as_str())
        .collect();
    assert_eq!(sent_calls, kept_calls);
    assert!(!sent_calls.is_empty());
    assert_eq!(items.last().unwrap()["content"][0]["text"], "and now?");
}

/// Runs `condense` in `dir` and returns what it said on stderr, failing on a failure.
fn condense_in(dir: &Path, args: &[&str]) -> String {
    let out = command(dir, args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// The one session log Codex wrote under `home`.
fn rollout_in(home: &Path) -> PathBuf {
    let mut found = files_under(&home.join("sessions"), "jsonl");
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}
