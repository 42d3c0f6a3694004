//! sst's opencode as the proxy's client, pointed at it as the README says (its Anthropic
//! provider's `baseURL` in `opencode.json`). `.ci/run` installs opencode with
//! `scripts/opencode.sh` and sets `CONDENSE_OPENCODE`; elsewhere the test says it was skipped.
//!
//! The upstream is the scripted agent model of the Claude Code test: it has opencode run a
//! command a few times with its `bash` tool, each printing a few thousand tokens, then answers
//! in text. opencode resends its whole history with every request, so the later requests cross
//! the pruning thresholds: what reaches the upstream is compacted, valid and frozen, while
//! opencode itself gets the model's answers unchanged.
#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use condense_serve::testing::{
    Received, SCRIPTED_SUMMARY, agent_bodies, agent_proxy_settings, anthropic_agent_upstream,
    check_agent_bodies, counting_commands, json_events, proxy_to, run_bounded, spawn,
};
use serde_json::Value;

/// How many commands the scripted model has opencode run before it answers.
const COMMANDS: usize = 6;
/// What the scripted model says once opencode has run its commands.
const FINAL_ANSWER: &str = "Counted six times.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_works_through_the_proxy_and_its_requests_are_compacted() {
    let Some(opencode) = condense_core::testing::required_url(
        "opencode_works_through_the_proxy_and_its_requests_are_compacted",
        "CONDENSE_OPENCODE",
        "CONDENSE_REQUIRE_OPENCODE",
    ) else {
        return;
    };
    // opencode's system prompt and tools take about 10K tokens of the window.
    let (stdout, received, work) = run_opencode(&opencode, "48000", None).await;
    // opencode ran every command and got the scripted model's answer, as the upstream sent it;
    // the outputs it keeps are what the commands printed, not condense's placeholders.
    let events = json_events(&stdout);
    let said: Vec<&str> = events
        .iter()
        .filter(|event| event["type"] == "text")
        .filter_map(|event| event["part"]["text"].as_str())
        .collect();
    assert_eq!(said, [FINAL_ANSWER], "{stdout}");
    let ran: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "tool_use")
        .map(|event| &event["part"]["state"])
        .collect();
    assert_eq!(ran.len(), COMMANDS, "{stdout}");
    for state in ran {
        assert_eq!(state["status"], "completed", "{state}");
        assert!(!state["output"].to_string().contains("condense recall"));
    }

    let bodies = agent_bodies(&received, "/v1/messages");
    assert_eq!(bodies.len(), COMMANDS + 1);
    // Each request valid and frozen, the output opencode just produced whole, and the working
    // directory named where opencode ran (the superseded-read rule resolves relative paths in it).
    check_agent_bodies(
        "opencode",
        condense_formats::Format::Anthropic,
        &bodies,
        work.path(),
        |call| format!("toolu_{call:03}"),
    );
}

/// Runs opencode on the counting prompt through a fresh proxy (its state in a temporary
/// directory, `window` its context window) to the scripted agent model, its Anthropic
/// provider's `baseURL` at the proxy as a user writes it in `opencode.json`, in fresh home and
/// work directories; `limit` gives the model's context window and output limit in opencode's
/// own settings (opencode compacts on its own when a request's usage crosses them). Checks that
/// opencode succeeded; returns what it printed, what the model received and its work directory.
async fn run_opencode(
    opencode: &str,
    window: &'static str,
    limit: Option<(usize, usize)>,
) -> (String, Received, tempfile::TempDir) {
    let (upstream, received) =
        anthropic_agent_upstream(counting_commands(COMMANDS), FINAL_ANSWER).await;
    let state = tempfile::tempdir().unwrap();
    let url = spawn(proxy_to(
        &upstream,
        &agent_proxy_settings(window),
        state.path(),
    ))
    .await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut anthropic = serde_json::json!({
        "options": {"baseURL": format!("{url}/v1"), "apiKey": "sk-test"}
    });
    if let Some((context, output)) = limit {
        anthropic["models"] = serde_json::json!({
            "claude-sonnet-4-5": {"limit": {"context": context, "output": output}}
        });
    }
    std::fs::write(
        work.path().join("opencode.json"),
        serde_json::json!({
            "$schema": "https://opencode.ai/config.json",
            "model": "anthropic/claude-sonnet-4-5",
            "provider": {"anthropic": anthropic},
            "permission": {"bash": "allow"},
            "autoupdate": false,
            "share": "disabled"
        })
        .to_string(),
    )
    .unwrap();
    let mut command = std::process::Command::new(opencode);
    command
        .args([
            "run", "--format", "json", "--title", "counting", "--pure", "--dir",
        ])
        .arg(work.path())
        .arg("count to a few thousand, several times")
        // opencode takes its directory from `PWD` over the process's own: `--dir` names it.
        .current_dir(work.path())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("XDG_DATA_HOME", home.path().join(".local/share"))
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .env("XDG_STATE_HOME", home.path().join(".local/state"))
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1");
    // opencode blocks; the proxy runs on this runtime's other threads meanwhile.
    let output =
        tokio::task::spawn_blocking(move || run_bounded(command, Duration::from_secs(240)))
            .await
            .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    (stdout, received, work)
}

/// opencode compacting on its own through the proxy: its model's window set small in its own
/// settings, it asks its summarizer "What did we do so far?" and sends the answer, with its next
/// step merged into the same message, as the start of every later request. condense reads that
/// answer, as opencode sent it, as opencode's summary: a summary of condense's own carries it
/// whole under opencode's name and quotes neither the question nor the summary as the person's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencodes_own_summary_is_read_as_opencode_sent_it() {
    let Some(opencode) = condense_core::testing::required_url(
        "opencodes_own_summary_is_read_as_opencode_sent_it",
        "CONDENSE_OPENCODE",
        "CONDENSE_REQUIRE_OPENCODE",
    ) else {
        return;
    };
    // The proxy's window is far larger than opencode's: opencode compacts, condense forwards.
    let (stdout, received, _work) = run_opencode(&opencode, "1000000", Some((16_000, 2_000))).await;

    let bodies = agent_bodies(&received, "/v1/messages");
    // The requests after opencode's compaction: its question opens the history, after the
    // system prompt.
    let after: Vec<Vec<condense_core::Message>> = bodies
        .iter()
        .map(|body| {
            condense_formats::read_json(condense_formats::Format::Anthropic, body.clone())
                .unwrap()
                .messages
        })
        .filter(|messages| {
            messages
                .iter()
                .find(|message| message.role != condense_core::Role::System)
                .is_some_and(condense_core::Message::is_summary_request)
        })
        .collect();
    assert!(
        !after.is_empty(),
        "opencode did not compact on its own: {stdout}"
    );
    let mut merged = 0;
    for messages in &after {
        let answer = 1 + messages
            .iter()
            .position(condense_core::Message::is_summary_request)
            .unwrap();
        let summary = condense_core::harness_summary_at(messages, answer)
            .unwrap_or_else(|| panic!("{:?}", messages.get(answer)));
        assert_eq!(summary.agent, "opencode");
        assert_eq!(summary.text(&messages[answer]), SCRIPTED_SUMMARY);
        merged += usize::from(summary.parts < messages[answer].parts.len());
    }
    // The shape this reading exists for: the next step's call in the summary's own message.
    assert!(merged > 0, "{:?}", after.last());

    let newest = after.last().unwrap();
    let ours = condense_summarize::Extractive::new(
        condense_template::Template::builtin("structured").unwrap(),
        condense_summarize::ExtractiveSettings::built_in().unwrap(),
    )
    .summary_of(newest)
    .unwrap();
    let quoted: String = SCRIPTED_SUMMARY
        .lines()
        .map(|line| format!("\n> {line}"))
        .collect();
    assert!(
        ours.contains(&format!(
            "Earlier summary by opencode, quoted in full:{quoted}\n"
        )),
        "{ours}"
    );
    assert!(
        !ours.contains(condense_core::OPENCODE_SUMMARY_REQUEST),
        "{ours}"
    );
}
