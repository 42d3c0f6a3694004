//! Claude Code resuming session logs that condense compacted, or pruned, in place: the
//! README's first promise ("writes a Claude Code session that the same agent can resume"),
//! checked with the agent itself when `CONDENSE_CLAUDE_CODE` names it
//! (`scripts/claude-code.sh`); skipped, visibly, elsewhere.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::command;
use condense_formats::Format;
use condense_serve::testing::{Frozen, Received, anthropic_agent_upstream, run_bounded};
use serde_json::Value;

/// A session Claude Code recorded against a scripted model that had it run three commands of
/// about 4K tokens each, then answered (and answers every request after: the resumed ones).
struct Recorded {
    received: Received,
    run: Box<dyn Fn(Vec<String>) -> Value + Send + Sync>,
    session: String,
    log: PathBuf,
    _dirs: [tempfile::TempDir; 2],
}

impl Recorded {
    async fn new(claude: String) -> Recorded {
        let commands = (0..3)
            .map(|n| format!("seq 1 {}", 1500 + 100 * n))
            .collect();
        let (upstream, received) = anthropic_agent_upstream(commands, "Done.").await;
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let run = claude_run(claude, upstream, home.path(), work.path());
        let first = tokio::task::spawn_blocking({
            let run = run.clone();
            move || {
                run(vec![
                    "-p".into(),
                    "count to a few thousand, three times".into(),
                ])
            }
        })
        .await
        .unwrap();
        let session = first["session_id"].as_str().unwrap().to_owned();
        let log = session_log(home.path(), &session);
        let recorded = Recorded {
            received,
            run: Box::new(run),
            session,
            log,
            _dirs: [home, work],
        };
        assert_eq!(recorded.requests().len(), 4);
        recorded
    }

    /// The requests that offered tools (the agent's own, not a side request), in order.
    fn requests(&self) -> Vec<Value> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .map(|(_, _, body)| serde_json::from_slice::<Value>(body).unwrap())
            .filter(|body| body["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .collect()
    }

    /// `claude -p PROMPT --resume SESSION`, and the request it sent.
    async fn resume(self: &std::sync::Arc<Self>, prompt: &str) -> Value {
        let before = self.requests().len();
        let this = self.clone();
        let prompt = prompt.to_owned();
        tokio::task::spawn_blocking(move || {
            (this.run)(vec![
                "-p".into(),
                prompt,
                "--resume".into(),
                this.session.clone(),
            ])
        })
        .await
        .unwrap();
        let resumed = self.requests().remove(before);
        Frozen::default().check_body(0, Format::Anthropic, &resumed);
        resumed
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_resumes_a_log_condense_compacted_from_its_summary() {
    let Some(claude) = condense_core::testing::required_url(
        "claude_code_resumes_a_log_condense_compacted_from_its_summary",
        "CONDENSE_CLAUDE_CODE",
        "CONDENSE_REQUIRE_CLAUDE_CODE",
    ) else {
        return;
    };
    let recorded = std::sync::Arc::new(Recorded::new(claude).await);
    // Compacted in place (pruning off: the summary is what is checked here). The session's
    // one prompt is carried whole after the summary, and both are on the chain Claude Code
    // follows back from the last line, so the resumed request opens with them.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("compact.toml"),
        "[prune]\nminimum_tokens = 1000000000\n",
    )
    .unwrap();
    let said = condense_in(
        dir.path(),
        &[
            "compact",
            recorded.log.to_str().unwrap(),
            "--in-place",
            "--config",
            "compact.toml",
            "--context-window",
            "8000",
            "--max-output-tokens",
            "1000",
        ],
    );
    assert!(said.contains("summarized by extractive"), "{said}");
    let resumed = recorded.resume("and now?").await;
    let texts = texts_of(&resumed);
    let summary = |text: &&String| text.starts_with("<prior-conversation-summary>");
    assert_eq!(texts.iter().filter(summary).count(), 1, "{texts:#?}");
    let at = |wanted: &str| texts.iter().position(|text| text == wanted);
    let prompt = at("count to a few thousand, three times");
    assert!(
        texts.iter().position(|text| summary(&text)) < prompt,
        "{texts:#?}"
    );
    assert!(prompt.is_some() && prompt < at("and now?"), "{texts:#?}");
    // What the summary stands for is not sent again.
    assert!(!resumed.to_string().contains("toolu_000"), "{resumed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_resumes_a_log_condense_pruned_with_its_placeholders() {
    let Some(claude) = condense_core::testing::required_url(
        "claude_code_resumes_a_log_condense_pruned_with_its_placeholders",
        "CONDENSE_CLAUDE_CODE",
        "CONDENSE_REQUIRE_CLAUDE_CODE",
    ) else {
        return;
    };
    let recorded = std::sync::Arc::new(Recorded::new(claude).await);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("prune.toml"),
        "[prune]\nskip_tool_calls = 1\nprotect_tokens = 0\nminimum_tokens = 10\n",
    )
    .unwrap();
    let said = condense_in(
        dir.path(),
        &[
            "prune",
            recorded.log.to_str().unwrap(),
            "--in-place",
            "--config",
            "prune.toml",
            "--context-window",
            "12000",
            "--max-output-tokens",
            "2000",
        ],
    );
    assert!(said.contains("2 of 3 tool outputs replaced"), "{said}");
    let resumed = recorded.resume("and now?").await;
    let results = condense_serve::testing::tool_results(resumed["messages"].as_array().unwrap());
    assert_eq!(results.len(), 3, "{resumed}");
    for (n, (_, content)) in results.iter().enumerate() {
        assert_eq!(
            content.to_string().contains("condense recall"),
            n < 2,
            "output {n}: {content}"
        );
    }
    assert_eq!(
        texts_of(&resumed).last().map(String::as_str),
        Some("and now?")
    );
}

/// The texts of a Messages request's messages, in order.
fn texts_of(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|message| match &message["content"] {
            Value::String(text) => vec![text.clone()],
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|block| block["text"].as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// `claude ARGS… --allowedTools Bash --output-format json` in `work`, with `home` as its home
/// and `upstream` as its API, as a function a blocking task can run: it fails the test if
/// Claude Code fails, and returns its JSON result.
fn claude_run(
    claude: String,
    upstream: String,
    home: &Path,
    work: &Path,
) -> impl Fn(Vec<String>) -> Value + Clone + Send + Sync + 'static {
    let (home, work) = (home.to_owned(), work.to_owned());
    move |args: Vec<String>| {
        let mut command = std::process::Command::new(&claude);
        command
            .args(args)
            .args(["--allowedTools", "Bash", "--output-format", "json"])
            .current_dir(&work)
            .env("HOME", &home)
            .env("ANTHROPIC_BASE_URL", &upstream)
            .env("ANTHROPIC_API_KEY", "sk-test")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1");
        let output = run_bounded(command, Duration::from_secs(120));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{}\n{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        let result: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(result["result"], "Done.", "{stdout}");
        result
    }
}

/// Runs `condense` in `dir` and returns what it said on stderr, failing on a failure.
fn condense_in(dir: &Path, args: &[&str]) -> String {
    let out = command(dir, args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

/// The log of `session` under `home`.
fn session_log(home: &Path, session: &str) -> PathBuf {
    let projects = home.join(".claude/projects");
    for entry in std::fs::read_dir(&projects).unwrap() {
        let candidate = entry.unwrap().path().join(format!("{session}.jsonl"));
        if candidate.exists() {
            return candidate;
        }
    }
    panic!("no log of {session} under {}", projects.display())
}
