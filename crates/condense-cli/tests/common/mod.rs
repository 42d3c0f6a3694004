//! What the CLI's test files share: running `condense` as a user would, the recorded sessions,
//! and the plugins built for real.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn transcripts() -> PathBuf {
    condense_core::testing::transcripts_dir()
        .canonicalize()
        .unwrap()
}

pub fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/claude-code-d7d349f9.jsonl")
        .canonicalize()
        .unwrap()
}

/// Runs `condense` in `dir` with a clean environment: no user configuration, no CONDENSE_*
/// settings from the machine.
pub fn condense(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().unwrap()
}

/// The `condense` command with `args` in `dir`, not yet run, so a test can add variables,
/// stdin or a pipe.
pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_condense"));
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join("no-config"));
    command
}

/// The "now" of the CLI tests that print reports (they print the idle time since the session's
/// last reply, which the wall clock would change every day). It is months after every shared
/// session, so time-based microcompact fires where the format has timestamps, as it does for a
/// person resuming an old session.
pub const FIXED_NOW: &str = "2026-01-01T00:00:00Z";

/// `condense compact INPUT` for a model with a 32,000-token window and 4,096 tokens of reply, at
/// [`FIXED_NOW`], followed by `extra`.
pub fn compact_for_32k(dir: &Path, input: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "compact",
        input,
        "--context-window",
        "32000",
        "--max-output-tokens",
        "4096",
        "--now",
        FIXED_NOW,
    ];
    args.extend_from_slice(extra);
    condense(dir, &args)
}

/// `condense replay INPUT --policy P… --json` in `dir`, which must succeed, as JSON.
pub fn replay_json(dir: &Path, input: &Path, policies: &[&str]) -> serde_json::Value {
    let mut args = vec!["replay", input.to_str().unwrap()];
    for policy in policies {
        args.extend(["--policy", policy]);
    }
    args.push("--json");
    let out = condense(dir, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn text(bytes: &[u8], dir: &Path) -> String {
    String::from_utf8_lossy(bytes)
        .replace(&dir.display().to_string(), "<tmp>")
        .replace(&transcripts().display().to_string(), "<transcripts>")
        .replace(
            &example().parent().unwrap().display().to_string(),
            "<examples>",
        )
}

/// Builds a plugin package with `features` the way the host's plugin tests do, into a target
/// directory of the CLI tests' own (the host's tests rebuild the same packages with other
/// features), and copies the library to `name`, since a loaded library stays loaded.
pub fn plugin(package: &str, features: &[&str], name: &str) -> PathBuf {
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = BUILD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let target = workspace.join("target/plugin-tests-cli");
    let mut command = Command::new(env!("CARGO"));
    command
        .current_dir(&workspace)
        .args(["build", "--quiet", "-p", package, "--target-dir"])
        .arg(&target);
    if !features.is_empty() {
        command.args(["--features", &features.join(",")]);
    }
    assert!(command.status().unwrap().success(), "building {package}");
    let file = |stem: &str| {
        format!(
            "{}{stem}{}",
            std::env::consts::DLL_PREFIX,
            std::env::consts::DLL_SUFFIX
        )
    };
    let copy = target.join(file(name));
    let staging = copy.with_extension("tmp");
    std::fs::copy(
        target.join("debug").join(file(&package.replace('-', "_"))),
        &staging,
    )
    .unwrap();
    std::fs::rename(&staging, &copy).unwrap();
    copy
}

/// The handles the placeholders in `file` name, in order, each once.
pub fn handles(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut found = Vec::new();
    for piece in text.split("condense recall ").skip(1) {
        let handle: String = piece.chars().take_while(char::is_ascii_hexdigit).collect();
        if handle.len() == 32 && !found.contains(&handle) {
            found.push(handle);
        }
    }
    found
}
