//! OpenAI's Codex CLI as the proxy's client, configured as the README says: a model provider
//! whose `base_url` is the proxy and whose `wire_api` is `responses`. `.ci/run` installs Codex
//! with `scripts/codex.sh` and sets `CONDENSE_CODEX`; elsewhere the test says it was skipped.
//!
//! The upstream is scripted as a model that works like an agent: it has Codex run a command a
//! few times, each printing a few thousand tokens, then answers in text. Codex resends its
//! whole history with every request, so the later requests cross the pruning thresholds: what
//! reaches the upstream is compacted, valid and frozen, while Codex's own session log keeps
//! every output as the command printed it.
#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use condense_serve::testing::{
    agent_bodies, agent_proxy_settings, check_agent_bodies, counting_commands, files_under,
    json_events, proxy_to, responses_agent_upstream, run_bounded, spawn,
};
use serde_json::Value;

/// How many commands the scripted model has Codex run before it answers: each prints a few
/// thousand numbers, about 5K tokens, a different count each time.
const COMMANDS: usize = 6;
/// What the scripted model says once Codex has run its commands.
const FINAL_ANSWER: &str = "Counted six times.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_works_through_the_proxy_and_its_requests_are_compacted() {
    let Some(codex) = condense_core::testing::required_url(
        "codex_works_through_the_proxy_and_its_requests_are_compacted",
        "CONDENSE_CODEX",
        "CONDENSE_REQUIRE_CODEX",
    ) else {
        return;
    };
    let (upstream, received) =
        responses_agent_upstream(counting_commands(COMMANDS), FINAL_ANSWER).await;
    // Codex's own instructions and tools take about 11K tokens of the window.
    let state = tempfile::tempdir().unwrap();
    let proxy = proxy_to(&upstream, &agent_proxy_settings("32000"), state.path());
    let url = spawn(proxy).await;

    // The configuration the README gives for Codex, in a home of its own.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"gpt-5-codex\"\nmodel_provider = \"condense\"\n\n\
             [model_providers.condense]\nname = \"condense\"\nbase_url = \"{url}/v1\"\n\
             wire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n"
        ),
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(&codex);
    command
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "count to a few thousand, several times",
        ])
        .current_dir(work.path())
        .env("CODEX_HOME", home.path())
        .env("OPENAI_API_KEY", "sk-test");
    // Codex blocks; the proxy runs on this runtime's other threads meanwhile.
    let output =
        tokio::task::spawn_blocking(move || run_bounded(command, Duration::from_secs(240)))
            .await
            .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{stdout}");

    // Codex got the scripted model's answer, and the usage it reported, as the upstream sent
    // them.
    let events = json_events(&stdout);
    let said: Vec<&str> = events
        .iter()
        .filter(|event| event["type"] == "item.completed")
        .filter(|event| event["item"]["type"] == "agent_message")
        .filter_map(|event| event["item"]["text"].as_str())
        .collect();
    assert_eq!(said, [FINAL_ANSWER], "{stdout}");
    let ran = events
        .iter()
        .filter(|event| event["type"] == "item.completed")
        .filter(|event| event["item"]["type"] == "command_execution")
        .count();
    assert_eq!(ran, COMMANDS, "{stdout}");

    let bodies = agent_bodies(&received, "/v1/responses");
    assert_eq!(bodies.len(), COMMANDS + 1);
    assert!(
        bodies.iter().all(|body| body["stream"] == true),
        "Codex streams"
    );
    // Each request valid and frozen, the output Codex just produced whole and last (the
    // continuation of a summarized request is inside the summary), and the working directory named
    // where Codex ran (the superseded-read rule resolves relative paths in it).
    check_agent_bodies(
        "Codex",
        condense_formats::Format::Responses,
        &bodies,
        work.path(),
        |call| format!("call_{call}"),
    );

    // Codex's own log of the session still holds every output as the command printed it:
    // the proxy changed what the model saw, not what the agent keeps.
    let rollout = rollout_of(home.path());
    let outputs: Vec<&Value> = rollout
        .iter()
        .filter(|line| line["type"] == "response_item")
        .map(|line| &line["payload"])
        .filter(|item| item["type"] == "function_call_output")
        .collect();
    assert_eq!(outputs.len(), COMMANDS);
    for output in outputs {
        assert!(!output.to_string().contains("condense recall"), "{output}");
    }
}

/// Codex's remote compaction (`remote_compaction_v2`, which Codex 0.169 uses for a provider
/// named `OpenAI`) against an upstream that has none: past `model_auto_compact_token_limit`,
/// Codex sends its history with a `compaction_trigger` item and expects exactly one `compaction`
/// item back. condense answers it (`serve.native_compaction = "auto"`, a local upstream), the
/// upstream never sees the trigger or the envelope, and Codex goes on to finish its task from
/// condense's summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_remote_compaction_is_answered_by_condense() {
    let Some(codex) = condense_core::testing::required_url(
        "codex_remote_compaction_is_answered_by_condense",
        "CONDENSE_CODEX",
        "CONDENSE_REQUIRE_CODEX",
    ) else {
        return;
    };
    let (upstream, received) =
        responses_agent_upstream(counting_commands(COMMANDS), FINAL_ANSWER).await;
    let state = tempfile::tempdir().unwrap();
    // A window wide enough that condense's own compaction on the way does not fire: what is
    // tested is Codex's.
    let proxy = proxy_to(&upstream, &agent_proxy_settings("400000"), state.path());
    let url = spawn(proxy.clone()).await;

    let home = tempfile::tempdir().unwrap();
    // Codex's first request is about 11K tokens (its instructions and tools), each command
    // adds about 2K: it compacts after the second.
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"gpt-5-codex\"\nmodel_provider = \"condense\"\n\
             model_auto_compact_token_limit = 16000\n\n\
             [model_providers.condense]\nname = \"OpenAI\"\nbase_url = \"{url}/v1\"\n\
             wire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n"
        ),
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(&codex);
    command
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "count to a few thousand, several times",
        ])
        .current_dir(work.path())
        .env("CODEX_HOME", home.path())
        .env("OPENAI_API_KEY", "sk-test");
    let output =
        tokio::task::spawn_blocking(move || run_bounded(command, Duration::from_secs(240)))
            .await
            .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    let said: Vec<String> = json_events(&stdout)
        .iter()
        .filter(|event| event["type"] == "item.completed")
        .filter(|event| event["item"]["type"] == "agent_message")
        .filter_map(|event| event["item"]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(said, [FINAL_ANSWER], "{stdout}");

    // Codex compacted, and kept the one item condense made.
    let compactions: Vec<Value> = rollout_of(home.path())
        .into_iter()
        .filter(|line| line["type"] == "compacted")
        .collect();
    assert!(!compactions.is_empty(), "Codex never compacted: {stdout}");
    for compaction in &compactions {
        let history = compaction["payload"]["replacement_history"]
            .as_array()
            .unwrap();
        let items: Vec<&Value> = history
            .iter()
            .filter(|item| item["type"] == "compaction")
            .collect();
        assert_eq!(items.len(), 1, "{compaction}");
        assert!(
            items[0]["encrypted_content"]
                .as_str()
                .unwrap()
                .starts_with(condense_serve::native::ENVELOPE_PREFIX),
            "{compaction}"
        );
    }
    let answered = proxy
        .metrics
        .emulated_compactions
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(answered, u64::try_from(compactions.len()).unwrap());

    // The upstream saw neither the trigger nor an envelope: after the compaction, condense's
    // summary in the item's place, and each later request valid.
    let bodies = agent_bodies(&received, "/v1/responses");
    assert_eq!(
        bodies.len(),
        COMMANDS + 1,
        "one request per step, none for compacting"
    );
    for body in &bodies {
        let text = body.to_string();
        assert!(!text.contains("compaction_trigger"), "{text}");
        assert!(
            !text.contains(condense_serve::native::ENVELOPE_PREFIX),
            "{text}"
        );
        condense_formats::read_json(condense_formats::Format::Responses, body.clone()).unwrap();
    }
    let summarized = bodies
        .iter()
        .filter(|body| body.to_string().contains("<prior-conversation-summary>"))
        .count();
    assert!(
        summarized >= 1,
        "no request went on from condense's summary"
    );
    // The last request still ends with the output of the command Codex ran last, whole.
    let last = bodies.last().unwrap()["input"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(last["type"], "function_call_output", "{last}");
    let printed = last["output"].as_str().unwrap();
    let counted_to = 1500 + 100 * (COMMANDS - 1);
    assert!(printed.contains(&format!("\n{counted_to}\n")), "{last}");
    assert!(!printed.contains("condense recall"), "{last}");
}

/// The lines of the one session log Codex wrote under `home`.
fn rollout_of(home: &std::path::Path) -> Vec<Value> {
    let found = files_under(&home.join("sessions"), "jsonl");
    assert_eq!(found.len(), 1, "{found:?}");
    std::fs::read_to_string(&found[0])
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}
