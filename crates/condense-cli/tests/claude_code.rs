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

/// The `n`-th command of a script: a count of about 4K tokens of output.
fn seq(n: usize) -> String {
    format!("seq 1 {}", 1500 + 100 * n)
}

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
        Recorded::with(claude, (0..3).map(seq).collect()).await
    }

    /// The same first turn, and `commands` for the requests after it (an empty one answers).
    async fn with(claude: String, commands: Vec<String>) -> Recorded {
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
        assert_eq!(first["result"], "Done.", "{first}");
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

    /// `claude -p PROMPT --resume SESSION`, and its JSON result.
    async fn run_resumed(self: &std::sync::Arc<Self>, prompt: &str) -> Value {
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
        .unwrap()
    }

    /// `claude -p PROMPT --resume SESSION`, and the request it sent.
    async fn resume(self: &std::sync::Arc<Self>, prompt: &str) -> Value {
        let before = self.requests().len();
        let result = self.run_resumed(prompt).await;
        assert_eq!(result["result"], "Done.", "{result}");
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
    // Compacted in place (pruning off, and the tail by whole turns, `min_tail_calls = 0`: the
    // summary, standing for the calls, is what is checked here). The session's
    // one prompt stays whole where it was, in front of the summary, and both are on the chain
    // Claude Code follows back from the last line, so the resumed request opens with them.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("compact.toml"),
        "[prune]\nminimum_tokens = 1000000000\n[compaction]\nmin_tail_calls = 0\n",
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
    // Claude Code sends the session's first prompt back with a line break after it.
    let at = |wanted: &str| texts.iter().position(|text| text.trim_end() == wanted);
    let prompt = at("count to a few thousand, three times");
    let summarized = texts.iter().position(|text| summary(&text));
    assert!(prompt.is_some() && prompt < summarized, "{texts:#?}");
    assert!(summarized < at("and now?"), "{texts:#?}");
    // What the summary stands for is not sent again.
    assert!(!resumed.to_string().contains("toolu_000"), "{resumed}");
}

/// Claude Code compacts a session on its own (`/compact`: a boundary line, then its summary;
/// it resumes from the boundary on), then condense compacts the log too. condense works on what
/// Claude Code sends (the history from its boundary on) and keeps the lines before as they were;
/// Claude Code resumes from condense's summary, and what its own compaction left behind is not
/// sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_resumes_a_log_it_compacted_itself_once_condense_compacted_it_too() {
    let Some(claude) = condense_core::testing::required_url(
        "claude_code_resumes_a_log_it_compacted_itself_once_condense_compacted_it_too",
        "CONDENSE_CLAUDE_CODE",
        "CONDENSE_REQUIRE_CLAUDE_CODE",
    ) else {
        return;
    };
    // The first turn's three commands and its answer; the summary Claude Code asks for at
    // `/compact` (a request that offers tools too); three more commands in the next turn.
    let script = [seq(0), seq(1), seq(2), String::new(), String::new()]
        .into_iter()
        .chain((3..6).map(seq))
        .collect();
    let recorded = std::sync::Arc::new(Recorded::with(claude, script).await);
    let compacted = recorded.run_resumed("/compact").await;
    assert_eq!(compacted["is_error"], false, "{compacted}");
    let more = recorded.run_resumed("count more").await;
    assert_eq!(more["result"], "Done.", "{more}");
    let text = String::from_utf8(std::fs::read(&recorded.log).unwrap()).unwrap();
    assert!(text.contains(r#""subtype":"compact_boundary""#), "{text}");
    // condense sees what Claude Code would send: its summary and what followed, the second
    // turn's three outputs but none of the first's.
    let dir = tempfile::tempdir().unwrap();
    let counted = command(
        dir.path(),
        &["count", recorded.log.to_str().unwrap(), "--json"],
    )
    .output()
    .unwrap();
    assert!(counted.status.success());
    let counted: Value = serde_json::from_slice(&counted.stdout).unwrap();
    let total = counted["total"].as_u64().unwrap();
    assert!((12_000..16_000).contains(&total), "{counted}");
    // The tail by whole turns (`min_tail_calls = 0`): condense's summary then stands for some
    // of the second turn's calls, and the test sees they are not sent again.
    std::fs::write(
        dir.path().join("compact.toml"),
        "[compaction]\nmin_tail_calls = 0\n",
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
    // The lines before the boundary are as Claude Code wrote them.
    let after = String::from_utf8(std::fs::read(&recorded.log).unwrap()).unwrap();
    let boundary = |text: &str| text.find(r#""subtype":"compact_boundary""#).unwrap();
    let head = |text: &str| text[..boundary(text)].rfind('\n').unwrap();
    assert_eq!(after[..head(&after)], text[..head(&text)]);
    let resumed = recorded.resume("and now?").await;
    let texts = texts_of(&resumed);
    let summary = |text: &&String| text.starts_with("<prior-conversation-summary>");
    assert_eq!(texts.iter().filter(summary).count(), 1, "{texts:#?}");
    let prompt = texts.iter().position(|text| text == "and now?");
    assert!(
        prompt.is_some() && texts.iter().position(|text| summary(&text)) < prompt,
        "{texts:#?}"
    );
    // Nothing from before Claude Code's own compaction comes back, and what condense's
    // summary stands for is not sent again either: the outputs sent are the tail's.
    let results = condense_serve::testing::tool_results(resumed["messages"].as_array().unwrap());
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert!(
        ids.iter()
            .all(|id| ["toolu_005", "toolu_006", "toolu_007"].contains(id)),
        "{ids:?}"
    );
    assert!(ids.len() < 3, "{ids:?}");
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
        serde_json::from_str(&stdout).unwrap()
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
