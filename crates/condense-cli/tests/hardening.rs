//! What a careless or hostile run once did to a user's files, each run again through the CLI:
//! nothing given to condense is lost, a failure exits non-zero, and what is written is true.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// A shared OpenAI transcript copied into `dir` as `name`.
fn session(dir: &Path, name: &str) -> Vec<u8> {
    let bytes =
        std::fs::read(transcripts().join("openai/swe-agent-marshmallow-1867.json")).unwrap();
    std::fs::write(dir.join(name), &bytes).unwrap();
    bytes
}

fn stderr(out: &std::process::Output, dir: &Path) -> String {
    text(&out.stderr, dir)
}

#[test]
fn no_two_of_input_output_report_and_backup_may_be_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let original = session(dir.path(), "v.json");
    std::os::unix::fs::symlink("v.json", dir.path().join("link.json")).unwrap();
    std::fs::hard_link(dir.path().join("v.json"), dir.path().join("hard.json")).unwrap();
    let cases: [&[&str]; 5] = [
        &["compact", "v.json", "-o", "o.json", "--report", "v.json"],
        &["compact", "v.json", "--in-place", "--report", "v.json"],
        &[
            "compact",
            "v.json",
            "-o",
            "o.json",
            "--report",
            "./sub/../v.json",
        ],
        &["compact", "v.json", "-o", "o.json", "--report", "link.json"],
        &["prune", "v.json", "-o", "hard.json"],
    ];
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    for args in cases {
        let out = condense(dir.path(), args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&out, dir.path())
        );
        assert!(
            stderr(&out, dir.path()).contains("are the same file"),
            "{args:?}: {}",
            stderr(&out, dir.path())
        );
        assert_eq!(std::fs::read(dir.path().join("v.json")).unwrap(), original);
        assert!(!dir.path().join("o.json").exists());
        assert!(!dir.path().join("v.json.bak").exists());
    }
    // The report may not take the backup's name either.
    let out = condense(
        dir.path(),
        &["prune", "v.json", "--in-place", "--report", "v.json.bak"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out, dir.path()));
    assert_eq!(
        std::fs::read(dir.path().join("v.json.1.bak")).unwrap(),
        original
    );
}

#[test]
fn outputs_through_links_and_fifos_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    session(dir.path(), "v.json");
    std::fs::write(dir.path().join("target.json"), "old").unwrap();
    std::os::unix::fs::symlink("target.json", dir.path().join("link.json")).unwrap();
    let out = condense(dir.path(), &["prune", "v.json", "-o", "link.json", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    let link = std::fs::symlink_metadata(dir.path().join("link.json")).unwrap();
    assert!(link.file_type().is_symlink(), "the link is still a link");
    let written = std::fs::read(dir.path().join("target.json")).unwrap();
    assert!(
        serde_json::from_slice::<Value>(&written).is_ok(),
        "its target got the result"
    );

    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let out = condense(dir.path(), &["prune", "v.json", "-o", "fifo", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    let through = reader.join().unwrap();
    assert!(serde_json::from_slice::<Value>(&through).is_ok());
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "the FIFO is still a FIFO");
}

/// `-` is stdout for `-o` and `--report`, as it is stdin for the input (no file named `-`
/// appears); a link to a pipe (`/dev/stdout` when stdout is one) is written through, since its
/// target has no name to rename onto; the session and the report cannot both take stdout.
#[test]
fn a_dash_and_dev_stdout_write_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    session(dir.path(), "v.json");
    let out = condense(dir.path(), &["prune", "v.json", "-o", "-", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    assert!(serde_json::from_slice::<Value>(&out.stdout).is_ok());
    assert!(!dir.path().join("-").exists());

    for report in ["-", "/dev/stdout"] {
        let out = condense(
            dir.path(),
            &["prune", "v.json", "-o", "o.json", "--report", report, "-q"],
        );
        assert!(
            out.status.success(),
            "{report}: {}",
            stderr(&out, dir.path())
        );
        let report_json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(report_json["prune"].is_object(), "{report}: {report_json}");
        assert!(dir.path().join("o.json").exists());
        assert!(!dir.path().join("-").exists());
    }
    let out = condense(dir.path(), &["prune", "v.json", "--report", "-", "-q"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out, dir.path()).contains("--report -"));
    assert!(out.stdout.is_empty());
    let out = condense(
        dir.path(),
        &["prune", "v.json", "--dry-run", "--report", "-", "-q"],
    );
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    assert!(serde_json::from_slice::<Value>(&out.stdout).is_ok());
}

/// `v.json` compacted in place for an 8K window: small enough that the shared session is
/// compacted, so the input really is replaced.
const COMPACT_V_IN_PLACE: [&str; 8] = [
    "compact",
    "v.json",
    "--in-place",
    "-q",
    "--context-window",
    "8000",
    "--max-output-tokens",
    "2000",
];

#[test]
fn in_place_keeps_the_mode_and_never_overwrites_a_backup() {
    let dir = tempfile::tempdir().unwrap();
    let original = session(dir.path(), "v.json");
    let path = dir.path().join("v.json");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let args = COMPACT_V_IN_PLACE;
    let out = condense(dir.path(), &args);
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    let mode = |name: &str| {
        std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("v.json"), 0o600);
    assert_eq!(mode("v.json.bak"), 0o600);
    let first = std::fs::read(&path).unwrap();
    assert_ne!(first, original, "compacted");

    // A second run keeps the first backup and makes another.
    let out = condense(dir.path(), &args);
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    assert_eq!(
        std::fs::read(dir.path().join("v.json.bak")).unwrap(),
        original
    );
    assert_eq!(
        std::fs::read(dir.path().join("v.json.1.bak")).unwrap(),
        first
    );
}

#[test]
fn concurrent_in_place_runs_lose_nothing_and_the_losers_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let original = session(dir.path(), "v.json");
    let runs: Vec<_> = (0..6)
        .map(|_| {
            command(dir.path(), &COMPACT_V_IN_PLACE)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = runs
        .into_iter()
        .map(|run| run.wait_with_output().unwrap())
        .collect();
    let won = outs.iter().filter(|out| out.status.success()).count();
    assert!(won >= 1, "one run at least replaces the input");
    for out in outs.iter().filter(|out| !out.status.success()) {
        assert_eq!(out.status.code(), Some(1));
        let said = stderr(out, dir.path());
        assert!(
            said.contains("appeared while condense ran (another run on the same file?)")
                || said.contains("changed while condense ran (another run?)"),
            "{said}"
        );
    }
    // Every backup holds a whole session: the original, or (for a run that began after another
    // had replaced the input) that run's compacted input. The original is among them.
    let backups: Vec<Vec<u8>> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(".bak"))
        .map(|path| std::fs::read(path).unwrap())
        .collect();
    assert!(backups.contains(&original), "the original is kept");
    let compacted = std::fs::read(dir.path().join("v.json")).unwrap();
    assert_ne!(compacted, original);
    let body: Value = serde_json::from_slice(&compacted).unwrap();
    assert!(body["messages"].as_array().is_some_and(|m| !m.is_empty()));
    for backup in &backups {
        serde_json::from_slice::<Value>(backup).unwrap();
    }
    let leftovers = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains("condense-tmp")
        })
        .count();
    assert_eq!(leftovers, 0);
}

#[test]
fn a_failed_summarizer_writes_nothing_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let original = session(dir.path(), "v.json");
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "compact",
            "v.json",
            "-o",
            "out.json",
            "--report",
            "report.json",
            "--context-window",
            "8000",
            "--max-output-tokens",
            "2000",
            "--summarizer",
            "openai",
        ];
        args.extend_from_slice(extra);
        command(dir.path(), &args)
            .env("CONDENSE_SUMMARIZER_BASE_URL", &url)
            .env("CONDENSE_SUMMARIZER_MAX_ATTEMPTS", "1")
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(1));
    let said = stderr(&out, dir.path());
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("the openai summarizer failed"), "{said}");
    assert!(!dir.path().join("out.json").exists());
    assert!(
        !dir.path().join("report.json").exists(),
        "no report of a failed run"
    );
    assert_eq!(std::fs::read(dir.path().join("v.json")).unwrap(), original);

    let out = run(&["--allow-over-threshold", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(report["compaction"]["outcome"], "failed");
    assert_eq!(report["under_threshold"], false);
}

#[test]
fn a_signal_removes_the_temporary_file_and_a_later_run_sweeps_stale_ones() {
    let dir = tempfile::tempdir().unwrap();
    session(dir.path(), "v.json");
    let mut child = command(dir.path(), &["prune", "v.json", "-o", "out.json", "-q"])
        .env("CONDENSE_TEST_HOLD_WRITE_MS", "20000")
        .spawn()
        .unwrap();
    let temporary = dir
        .path()
        .join(format!(".out.json.{}.condense-tmp", child.id()));
    let started = Instant::now();
    while !temporary.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no temporary file appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    assert!(!temporary.exists(), "the temporary file is gone");
    assert!(!dir.path().join("out.json").exists());

    // A dead process's temporary (no PID is this large) goes; a live one's stays.
    let dead = dir.path().join(".out.json.999999999.condense-tmp");
    let live = dir
        .path()
        .join(format!(".out.json.{}.condense-tmp", std::process::id()));
    std::fs::write(&dead, "half").unwrap();
    std::fs::write(&live, "half").unwrap();
    let out = condense(dir.path(), &["prune", "v.json", "-o", "out.json", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    assert!(!dead.exists());
    assert!(live.exists());
}

/// Prunes a shared Claude Code session with every unprotected output before the boundary
/// replaced, into `out.jsonl`, originals under `originals/`.
fn prune_everything(dir: &Path) -> std::process::Output {
    let source = transcripts().join("claude-code/5f8cbb78-38d3-47e9-9504-baa93bb166c9.jsonl");
    command(
        dir,
        &[
            "prune",
            source.to_str().unwrap(),
            "-o",
            "out.jsonl",
            "--store",
            "originals",
            "-q",
        ],
    )
    .env("CONDENSE_PRUNE_PROTECT_TOKENS", "0")
    .env("CONDENSE_PRUNE_MINIMUM_TOKENS", "0")
    .output()
    .unwrap()
}

#[test]
fn recall_verifies_what_it_returns_and_never_follows_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let out = prune_everything(dir.path());
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    let found = handles(&dir.path().join("out.jsonl"));
    assert!(found.len() >= 3, "{found:?}");
    let entry = |handle: &str| dir.path().join("originals").join(&handle[..2]).join(handle);
    let recall = |handle: &str| condense(dir.path(), &["recall", handle, "--store", "originals"]);

    let intact = recall(&found[0]);
    assert!(intact.status.success());

    // Truncated.
    let bytes = std::fs::read(entry(&found[0])).unwrap();
    std::fs::write(entry(&found[0]), &bytes[..bytes.len() / 2]).unwrap();
    let out = recall(&found[0]);
    assert_eq!(out.status.code(), Some(1));
    let said = stderr(&out, dir.path());
    assert!(
        said.contains(&found[0]) && said.contains("corrupt"),
        "{said}"
    );
    let relative = format!("originals/{}/{}", &found[0][..2], found[0]);
    assert!(said.contains(&relative), "{said}");
    assert!(out.stdout.is_empty());

    // Replaced by a symlink to another file, even one with the right content.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&elsewhere, std::fs::read(entry(&found[1])).unwrap()).unwrap();
    std::fs::remove_file(entry(&found[1])).unwrap();
    std::os::unix::fs::symlink(&elsewhere, entry(&found[1])).unwrap();
    let out = recall(&found[1]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out, dir.path()).contains("symlink"),
        "{}",
        stderr(&out, dir.path())
    );

    // Pruning again repairs both entries: the run holds the true bytes.
    let out = prune_everything(dir.path());
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    for handle in &found[..2] {
        let out = recall(handle);
        assert!(out.status.success(), "{}", stderr(&out, dir.path()));
        assert!(
            !std::fs::symlink_metadata(entry(handle))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
}

#[test]
fn a_pruned_claude_code_file_keeps_no_copy_of_a_pruned_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = prune_everything(dir.path());
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    let mut pruned_lines = 0;
    for line in std::fs::read_to_string(dir.path().join("out.jsonl"))
        .unwrap()
        .lines()
    {
        let value: Value = serde_json::from_str(line).unwrap();
        let Some(blocks) = value["message"]["content"].as_array() else {
            continue;
        };
        // Any rule's placeholder: the walk's ("was pruned") or microcompact's ("cleared").
        let placeholder = blocks.iter().any(|block| {
            block["type"] == "tool_result"
                && block["content"]
                    .to_string()
                    .contains("Original: condense recall")
        });
        if placeholder && value.get("toolUseResult").is_some() {
            pruned_lines += 1;
            let copy = &value["toolUseResult"];
            assert!(
                copy.as_str()
                    .is_some_and(|text| text.contains("Original: condense recall")),
                "a pruned output's copy survives: {}",
                &copy.to_string()[..copy.to_string().len().min(200)]
            );
        }
    }
    assert!(pruned_lines > 20, "{pruned_lines}");
}

#[test]
fn a_blank_store_dir_and_a_window_within_the_reserve_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    // `""` is the user's data directory; blanks are a mistake.
    std::fs::write(dir.path().join("condense.toml"), "[store]\ndir = \"  \"\n").unwrap();
    let out = condense(dir.path(), &["config", "check"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out, dir.path()).contains("store.dir"),
        "{}",
        stderr(&out, dir.path())
    );
    std::fs::remove_file(dir.path().join("condense.toml")).unwrap();

    let out = condense(
        dir.path(),
        &["config", "check", "--context-window", "16000"],
    );
    // Refused where a flag gave it: a usage error, as clap's own; the file's `store.dir`
    // above is a failure (1).
    assert_eq!(out.status.code(), Some(2));
    let said = stderr(&out, dir.path());
    assert!(
        said.contains("16000") && said.contains("20000") && said.contains("32000"),
        "{said}"
    );
    session(dir.path(), "v.json");
    let out = condense(
        dir.path(),
        &[
            "compact",
            "v.json",
            "--context-window",
            "16000",
            "-o",
            "o.json",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.path().join("o.json").exists());
}

#[test]
fn odd_environments_and_pipes_are_handled() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    session(dir.path(), "v.json");
    let out = command(dir.path(), &["count", "v.json"])
        .env("FOO", OsStr::from_bytes(b"\xff"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    let out = command(dir.path(), &["count", "v.json"])
        .env("CONDENSE_MODEL_ENCODING", OsStr::from_bytes(b"\xff"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out, dir.path()),
        "condense: CONDENSE_MODEL_ENCODING: the value is not UTF-8\n"
    );
    // A CONDENSE_* variable that is not a setting may hold any path.
    let out = command(dir.path(), &["count", "v.json"])
        .env("CONDENSE_TRANSCRIPTS", OsStr::from_bytes(b"/tmp/\xff"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));

    // A reader that stops after one line.
    let mut child = command(dir.path(), &["inspect", "v.json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    {
        use std::io::BufRead;
        let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
        reader.read_line(&mut first).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(first.contains("role"));
    assert!(out.status.success());
    assert_eq!(stderr(&out, dir.path()), "");
}

#[test]
fn a_byte_order_mark_is_read_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let original = session(dir.path(), "plain.json");
    let mut with_bom = b"\xEF\xBB\xBF".to_vec();
    with_bom.extend_from_slice(&original);
    std::fs::write(dir.path().join("bom.json"), &with_bom).unwrap();
    let out = condense(dir.path(), &["prune", "bom.json", "-o", "out.json", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    let written = std::fs::read(dir.path().join("out.json")).unwrap();
    assert!(written.starts_with(b"\xEF\xBB\xBF"));
    let plain = condense(
        dir.path(),
        &["prune", "plain.json", "-o", "plain-out.json", "-q"],
    );
    assert!(plain.status.success());
    assert_eq!(
        &written[3..],
        std::fs::read(dir.path().join("plain-out.json")).unwrap()
    );
}

#[test]
fn usage_mistakes_exit_2_and_dry_runs_still_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = condense(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out, dir.path()).contains("Usage: condense"));
    assert!(out.stdout.is_empty());

    let anthropic = transcripts().join("anthropic/claude-code-5f8cbb78.json");
    let out = condense(
        dir.path(),
        &["count", anthropic.to_str().unwrap(), "--format", "openai"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out, dir.path())
            .contains("--format openai contradicts the content, which is anthropic"),
        "{}",
        stderr(&out, dir.path())
    );

    session(dir.path(), "v.json");
    let out = condense(
        dir.path(),
        &["prune", "v.json", "--dry-run", "--report", "r.json", "-q"],
    );
    assert!(out.status.success());
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert!(report["prune"]["outputs"].is_array());
    assert!(out.stdout.is_empty(), "a dry run writes no session");

    let out = condense(dir.path(), &["count", "missing.json"]);
    assert_eq!(out.status.code(), Some(1));
    let said = stderr(&out, dir.path());
    assert_eq!(
        said.matches("No such file or directory").count(),
        1,
        "{said}"
    );
}

#[test]
fn a_panicking_optional_plugin_prints_nothing_under_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let panicky = plugin("condense-plugin-broken", &["panics"], "panicky_cli");
    std::fs::write(
        dir.path().join("condense.toml"),
        format!(
            "[[plugins]]\npath = {}\nrequired = false\n",
            Value::String(panicky.display().to_string())
        ),
    )
    .unwrap();
    let quiet = condense(dir.path(), &["-q", "config", "check"]);
    assert!(quiet.status.success(), "{}", stderr(&quiet, dir.path()));
    assert_eq!(stderr(&quiet, dir.path()), "");
    let loud = condense(dir.path(), &["config", "check"]);
    let said = stderr(&loud, dir.path());
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(
        said.contains("panicked") && said.contains("index out of bounds"),
        "{said}"
    );
}

#[test]
fn recall_prints_an_output_of_blocks_as_the_provider_sent_it() {
    let dir = tempfile::tempdir().unwrap();
    let listing = "src/lib.rs src/main.rs Cargo.toml README.md ".repeat(400);
    let body = serde_json::json!({
        "model": "claude",
        "system": "You are an agent.",
        "messages": [
            {"role": "user", "content": "take a screenshot"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "shot", "name": "screenshot", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "shot", "content": [
                {"type": "text", "text": listing},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo"}}
            ]}]},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "thanks"},
            {"role": "assistant", "content": "welcome"},
            {"role": "user", "content": "bye"}
        ]
    });
    std::fs::write(dir.path().join("s.json"), body.to_string()).unwrap();
    let out = command(
        dir.path(),
        &[
            "prune",
            "s.json",
            "-o",
            "out.json",
            "--store",
            "originals",
            "-q",
        ],
    )
    .env("CONDENSE_PRUNE_PROTECT_TOKENS", "0")
    .env("CONDENSE_PRUNE_MINIMUM_TOKENS", "0")
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    let found = handles(&dir.path().join("out.json"));
    assert_eq!(found.len(), 1, "the screenshot's output was pruned");
    let recalled = condense(dir.path(), &["recall", &found[0], "--store", "originals"]);
    assert!(
        recalled.status.success(),
        "{}",
        stderr(&recalled, dir.path())
    );
    let blocks: Value = serde_json::from_slice(&recalled.stdout).unwrap();
    assert_eq!(blocks, body["messages"][2]["content"][0]["content"]);
    // In another API's shape, the image is that API's image (it was an `image_url` holding
    // Anthropic's `source`, which every OpenAI server refuses).
    for (format, expected) in [
        (
            "openai",
            serde_json::json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo"}}),
        ),
        (
            "openai-responses",
            serde_json::json!({"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo"}),
        ),
    ] {
        let recalled = condense(
            dir.path(),
            &[
                "recall",
                &found[0],
                "--store",
                "originals",
                "--format",
                format,
            ],
        );
        assert!(recalled.status.success(), "{format}");
        let blocks: Value = serde_json::from_slice(&recalled.stdout).unwrap();
        assert_eq!(blocks[1], expected, "{format}");
    }
}

/// A handle that cannot be one is a usage mistake (status 2); `recall --help`'s example has a
/// handle's form; a FIFO where an original goes is an error at once, never a hang, for
/// `recall` and for a `prune` that would store there.
#[test]
fn a_malformed_handle_is_a_usage_error_and_a_fifo_in_the_store_never_hangs() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        "xyz",
        "3f2a9c0d1e4b5a6978877665544332211",
        "3F2A9C0D1E4B5A697887766554433221",
    ] {
        let out = condense(dir.path(), &["recall", bad, "--store", "originals"]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&out, dir.path()).contains("is not a handle"),
            "{bad}"
        );
    }
    let help = condense(dir.path(), &["recall", "--help"]);
    let help = String::from_utf8(help.stdout).unwrap();
    let example = help
        .split("Example:")
        .nth(1)
        .and_then(|example| example.split("condense recall ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap();
    assert!(condense_pruner::is_handle(example), "{example}");

    let source = transcripts().join("anthropic/claude-code-5f8cbb78.json");
    let body = std::fs::read(&source).unwrap();
    std::fs::write(dir.path().join("s.json"), &body).unwrap();
    std::fs::write(
        dir.path().join("condense.toml"),
        "[prune]\nprotect_tokens = 0\nminimum_tokens = 0\n",
    )
    .unwrap();
    // Where the first replaced output's original goes, a FIFO.
    let out = condense(
        dir.path(),
        &["prune", "s.json", "--store", "probe", "-o", "p.json"],
    );
    assert!(out.status.success(), "{}", stderr(&out, dir.path()));
    let handle = handles(&dir.path().join("p.json")).remove(0);
    let fifo = dir
        .path()
        .join("originals")
        .join(&handle[..2])
        .join(&handle);
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let out = condense(dir.path(), &["recall", &handle, "--store", "originals"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out, dir.path()).contains("not a regular file"));
    let out = condense(
        dir.path(),
        &["prune", "s.json", "--store", "originals", "-o", "q.json"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out, dir.path()).contains("not a regular file"));
    assert!(!dir.path().join("q.json").exists());
}

/// `--in-place` where the backup cannot be written whole (a full disk; here a file-size limit,
/// which fails the write the same way): nothing replaced, status 1, and no truncated
/// `FILE.bak` left to pass for a backup on the next run.
#[test]
fn a_backup_that_cannot_be_written_whole_is_not_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let source = transcripts().join("anthropic/claude-code-5f8cbb78.json");
    let original = std::fs::read(&source).unwrap();
    assert!(original.len() > 100_000);
    let input = dir.path().join("s.json");
    std::fs::write(&input, &original).unwrap();
    // 200 KiB at most per file written (bash's ulimit -f counts 1 KiB blocks): over every
    // original the run stores, under the input's 351 KiB. SIGXFSZ ignored, so the write fails
    // with EFBIG, as a full disk fails it with ENOSPC.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f 200; exec '{}' compact s.json --in-place",
            env!("CARGO_BIN_EXE_condense")
        ))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out, dir.path()));
    assert!(
        stderr(&out, dir.path()).contains("backup"),
        "{}",
        stderr(&out, dir.path())
    );
    assert_eq!(
        std::fs::read(&input).unwrap(),
        original,
        "the input is untouched"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".bak"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A log with CRLF line ends, a blank line and no final newline: written back byte for byte
/// when nothing changed; when compacted, still CRLF and still no final newline.
#[test]
fn a_log_keeps_its_line_ends() {
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read_to_string(
        transcripts().join("claude-code/d7d349f9-c243-46e2-9a32-4a0eddfc634b.jsonl"),
    )
    .unwrap();
    let mut lines: Vec<&str> = source.lines().collect();
    lines.insert(3, "");
    let windows = lines.join("\r\n");
    std::fs::write(dir.path().join("w.jsonl"), &windows).unwrap();
    // Before the session's first reply: no idle gap, a window nothing is due in (and no
    // compacting early, which a long session at any window can be due for).
    let unchanged = command(
        dir.path(),
        &[
            "compact",
            "w.jsonl",
            "-o",
            "same.jsonl",
            "-q",
            "--context-window",
            "1000000",
            "--now",
            "2025-01-01T00:00:00Z",
        ],
    )
    .env("CONDENSE_COMPACTION_CACHE_REWRITE_COST", "0")
    .output()
    .unwrap();
    assert!(
        unchanged.status.success(),
        "{}",
        stderr(&unchanged, dir.path())
    );
    assert_eq!(
        std::fs::read(dir.path().join("same.jsonl")).unwrap(),
        windows.as_bytes(),
        "nothing changed: the same bytes"
    );
    let compacted = condense(
        dir.path(),
        &[
            "compact",
            "w.jsonl",
            "-o",
            "small.jsonl",
            "-q",
            "--context-window",
            "32000",
            "--max-output-tokens",
            "4096",
        ],
    );
    assert!(
        compacted.status.success(),
        "{}",
        stderr(&compacted, dir.path())
    );
    let written = std::fs::read(dir.path().join("small.jsonl")).unwrap();
    assert_ne!(written, windows.as_bytes());
    let newlines = written.iter().filter(|&&byte| byte == b'\n').count();
    let crlf = written.windows(2).filter(|pair| pair == b"\r\n").count();
    assert!(
        newlines > 10 && crlf == newlines,
        "{crlf} of {newlines} are CRLF"
    );
    assert!(!written.ends_with(b"\n"), "no final newline, as the input");
}
