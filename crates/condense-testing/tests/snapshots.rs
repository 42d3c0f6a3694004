//! The helper on real sessions: the README's three lines on the example session, and two shared
//! transcripts compacted with the team-template plugin loaded, as a team would lock them down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use condense_testing::{Options, render};

#[tokio::test]
async fn the_readme_s_three_lines_on_the_example_session() {
    condense_testing::assert_compaction!(
        "../../examples/claude-code-d7d349f9.jsonl",
        window = 32_000,
        config = "tests/fixtures/small-reply.toml"
    );
}

/// Ten minutes after the session's last reply: the cache is warm, so the walk decides (the
/// README's example, at the fixed time months later, shows microcompact instead).
#[test]
fn prune_only_in_a_plain_test() {
    condense_testing::assert_compaction!(
        "../../examples/claude-code-d7d349f9.jsonl",
        prune_only = true,
        now = "2025-07-17T21:25:00Z",
        config = "tests/fixtures/small-reply.toml"
    );
}

/// Builds the team-template plugin into a target directory of this crate's tests.
fn team_template_plugin() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = workspace.join("target/plugin-tests-testing");
    let status = Command::new(env!("CARGO"))
        .current_dir(&workspace)
        .args([
            "build",
            "--quiet",
            "-p",
            "condense-plugin-team-template",
            "--target-dir",
        ])
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success());
    target.join("debug").join(format!(
        "{}condense_plugin_team_template{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

#[test]
fn two_shared_transcripts_with_the_team_template_plugin() {
    let plugin = team_template_plugin();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("condense.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\ncontext_window = 32000\nmax_output_tokens = 4096\n\n[[plugins]]\npath = {}\n",
            serde_json::Value::String(plugin.display().to_string())
        ),
    )
    .unwrap();
    let transcripts = condense_core::testing::transcripts_dir()
        .canonicalize()
        .unwrap();
    for name in [
        "claude-code/5f8cbb78-38d3-47e9-9504-baa93bb166c9.jsonl",
        "openai/mini-swe-agent-sympy__sympy-13091.json",
    ] {
        let options = Options {
            config: Some(config.clone()),
            ..Options::default()
        };
        let rendered = render(&transcripts, Path::new(name), &options).unwrap();
        assert!(
            rendered.contains("## Ticket"),
            "the plugin's template wrote the summary"
        );
        let rendered = rendered.replace(&dir.path().display().to_string(), "<tmp>");
        insta::assert_snapshot!(name.replace('/', "__"), rendered);
    }
}
