//! Anthropic's Claude Code as the proxy's client, pointed at it as the README says
//! (`ANTHROPIC_BASE_URL`). `.ci/run` installs Claude Code with `scripts/claude-code.sh` and sets
//! `CONDENSE_CLAUDE_CODE`; elsewhere the test says it was skipped.
//!
//! The upstream is scripted as a model that works like an agent: it has Claude Code run a
//! command a few times with its Bash tool, each printing a few thousand tokens, then answers in
//! text. Claude Code resends its whole history with every request, so the later requests cross
//! the pruning thresholds: what reaches the upstream is compacted, valid and frozen, while
//! Claude Code's own session log keeps every output as the command printed it.
#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use condense_serve::testing::{
    agent_bodies, agent_proxy_settings, anthropic_agent_upstream, anthropic_delegating_upstream,
    check_agent_bodies, counting_commands, files_under, proxy_to, run_bounded, spawn,
};
use serde_json::Value;

/// How many commands the scripted model has Claude Code run before it answers.
const COMMANDS: usize = 6;
/// What the scripted model says once Claude Code has run its commands.
const FINAL_ANSWER: &str = "Counted six times.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_works_through_the_proxy_and_its_requests_are_compacted() {
    let Some(claude) = condense_core::testing::required_url(
        "claude_code_works_through_the_proxy_and_its_requests_are_compacted",
        "CONDENSE_CLAUDE_CODE",
        "CONDENSE_REQUIRE_CLAUDE_CODE",
    ) else {
        return;
    };
    let (upstream, received) =
        anthropic_agent_upstream(counting_commands(COMMANDS), FINAL_ANSWER).await;
    // Claude Code's own system prompt and tools take about 20K tokens of the window.
    let state = tempfile::tempdir().unwrap();
    let proxy = proxy_to(&upstream, &agent_proxy_settings("48000"), state.path());
    let url = spawn(proxy).await;

    let (home, work) = run_claude(
        &claude,
        &url,
        "count to a few thousand, several times",
        "Bash",
    )
    .await;

    let bodies = agent_bodies(&received, "/v1/messages");
    assert_eq!(bodies.len(), COMMANDS + 1);
    // Each request valid and frozen, the output Claude Code just produced whole, and the working
    // directory named where Claude Code ran (the superseded-read rule resolves relative paths in it).
    check_agent_bodies(
        "Claude Code",
        condense_formats::Format::Anthropic,
        &bodies,
        work.path(),
        |call| format!("toolu_{call:03}"),
    );

    // Claude Code's own log of the session still holds every output as the command printed
    // it: the proxy changed what the model saw, not what the agent keeps.
    let log = session_log(home.path());
    assert!(!log.contains("condense recall"));
    for turn in 0..COMMANDS {
        let last = 1500 + 100 * turn;
        assert!(
            log.contains(&format!("\\n{}\\n{last}", last - 1)),
            "output {turn}"
        );
    }
}

/// What the scripted model has Claude Code's main thread ask a subagent to do.
const SUBAGENT_PROMPT: &str = "Count to a few thousand, several times, with Bash.";
/// The subagent's last answer.
const SUBAGENT_ANSWER: &str = "Counted, six times.";

/// Claude Code hands work to a subagent (its `Agent` tool), whose requests go through the proxy
/// too, with a system prompt and a first message of their own: the proxy keeps the subagent
/// a session of its own (no header names either), so its long outputs are pruned and frozen
/// from one of its requests to the next while the main thread's requests stay as they are, and
/// Claude Code keeps the subagent's log, beside the session's, with every output whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_subagent_is_a_session_of_its_own_through_the_proxy() {
    let Some(claude) = condense_core::testing::required_url(
        "a_claude_code_subagent_is_a_session_of_its_own_through_the_proxy",
        "CONDENSE_CLAUDE_CODE",
        "CONDENSE_REQUIRE_CLAUDE_CODE",
    ) else {
        return;
    };
    let (upstream, received) = anthropic_delegating_upstream(
        SUBAGENT_PROMPT,
        counting_commands(COMMANDS),
        SUBAGENT_ANSWER,
        FINAL_ANSWER,
    )
    .await;
    let state = tempfile::tempdir().unwrap();
    let proxy = proxy_to(&upstream, &agent_proxy_settings("48000"), state.path());
    let url = spawn(proxy).await;

    let (home, work) =
        run_claude(&claude, &url, "have a subagent count for you", "Bash,Agent").await;

    let bodies = agent_bodies(&received, "/v1/messages");
    let (subagent, main): (Vec<Value>, Vec<Value>) = bodies.into_iter().partition(|body| {
        let first = &body["messages"][0]["content"];
        first.as_str() == Some(SUBAGENT_PROMPT)
            || first
                .as_array()
                .into_iter()
                .flatten()
                .any(|block| block["text"] == SUBAGENT_PROMPT)
    });
    // The main thread: the request that delegated, and the one after the subagent's answer,
    // which came back whole as the `Agent` call's result.
    assert_eq!(main.len(), 2, "{main:?}");
    let last = main[1]["messages"].to_string();
    assert!(last.contains(SUBAGENT_ANSWER), "{last}");
    assert!(!last.contains("condense recall"), "{last}");
    // The subagent: one request per command and its answer, pruned and frozen in its own
    // session.
    assert_eq!(subagent.len(), COMMANDS + 1);
    check_agent_bodies(
        "Claude Code subagent",
        condense_formats::Format::Anthropic,
        &subagent,
        work.path(),
        |call| format!("toolu_s{call:03}"),
    );
    // The proxy told the two apart by what each conversation starts with (the system prompt,
    // the first message, the first reply), which it forwarded unchanged: each of the subagent's
    // requests after its first is in one session, the main thread's in another.
    let session = |body: &Value| {
        let conversation =
            condense_formats::read_json(condense_formats::Format::Anthropic, body.clone()).unwrap();
        condense_serve::derived_session(condense_serve::Api::Anthropic, &conversation)
    };
    let theirs: std::collections::BTreeSet<String> = subagent[1..].iter().map(session).collect();
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert!(!theirs.contains(&session(&main[1])));

    // Claude Code's log of the subagent, beside the session's, keeps every output whole.
    let logs = files_under(&home.path().join(".claude/projects"), "jsonl");
    let subagent_log: Vec<_> = logs
        .iter()
        .filter(|path| path.to_string_lossy().contains("/subagents/agent-"))
        .collect();
    assert_eq!(subagent_log.len(), 1, "{logs:?}");
    let log = std::fs::read_to_string(subagent_log[0]).unwrap();
    assert!(!log.contains("condense recall"));
    for turn in 0..COMMANDS {
        let last = 1500 + 100 * turn;
        assert!(
            log.contains(&format!("\\n{}\\n{last}", last - 1)),
            "output {turn}"
        );
    }
}

/// Runs `claude -p PROMPT`, `tools` allowed, in a home and a working directory of its own with
/// the proxy at `url` for its base URL, to its end (bounded), and checks that it got the
/// scripted model's answer as the upstream sent it: the home and the working directory.
async fn run_claude(
    claude: &str,
    url: &str,
    prompt: &str,
    tools: &str,
) -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(claude);
    command
        .args(["-p", prompt])
        .args(["--allowedTools", tools, "--output-format", "json"])
        .current_dir(work.path())
        .env("HOME", home.path())
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1");
    // Claude Code blocks; the proxy runs on this runtime's other threads meanwhile.
    let output =
        tokio::task::spawn_blocking(move || run_bounded(command, Duration::from_secs(240)))
            .await
            .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["result"], FINAL_ANSWER, "{stdout}");
    assert_eq!(result["is_error"], false);
    (home, work)
}

/// The one session log Claude Code wrote under `home`.
fn session_log(home: &std::path::Path) -> String {
    let found = files_under(&home.join(".claude/projects"), "jsonl");
    assert_eq!(found.len(), 1, "{found:?}");
    std::fs::read_to_string(&found[0]).unwrap()
}
