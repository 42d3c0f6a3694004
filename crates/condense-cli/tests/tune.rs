//! `condense tune` on a directory of the shared sessions: every candidate replayed, the
//! frontier marked, the chosen one on it, and what it writes a layer `config check` accepts and
//! the replay confirms.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{condense, transcripts};

#[test]
fn tune_writes_a_layer_that_loads_and_keeps_what_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = sessions_in(dir.path());
    for name in [
        "openai/mini-swe-agent-django__django-11138.json",
        "openai/swe-agent-marshmallow-1867.json",
    ] {
        let from = transcripts().join(name);
        std::fs::copy(&from, sessions.join(from.file_name().unwrap())).unwrap();
    }
    // Not a session: passed over. An empty log (Claude Code leaves one for a session whose
    // main thread never got a message): left out, and said so.
    std::fs::write(sessions.join("notes.txt"), "not a session").unwrap();
    std::fs::write(sessions.join("6c2214d7.jsonl"), "").unwrap();
    let out_file = dir.path().join("tuned.toml");
    let args = [
        "tune",
        sessions.to_str().unwrap(),
        "--context-window",
        "32000",
        "--max-output-tokens",
        "4096",
        "-o",
        out_file.to_str().unwrap(),
    ];
    let out = condense(dir.path(), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("condense: left out 1 file(s) that hold nothing: ")
            && stderr.contains("6c2214d7.jsonl"),
        "{stderr}"
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.starts_with("2 session(s), "), "{table}");
    let rows: Vec<&str> = table
        .lines()
        .filter(|line| line.contains('%') && !line.starts_with("+ on"))
        .collect();
    // A row for each distinct result, with how many more candidates had it: 128 in all.
    let alike = |row: &str| -> usize {
        row.rsplit_once("(+").map_or(0, |(_, more)| {
            more.trim_end_matches(" alike)").parse().unwrap()
        })
    };
    let candidates: usize = rows[..rows.len() - 1]
        .iter()
        .map(|row| 1 + alike(row))
        .sum();
    assert_eq!(candidates, 128, "{table}");
    assert!(
        table.contains(&format!(
            "128 candidate configurations, {} results",
            rows.len() - 1
        )),
        "{table}"
    );
    let chosen: Vec<&str> = rows
        .iter()
        .copied()
        .filter(|row| row.starts_with('*'))
        .collect();
    assert_eq!(chosen.len(), 1, "{table}");
    assert!(rows.last().unwrap().contains("claude-code's own rules"));
    // The chosen keeps at least 95 % and fails nothing, as its header says.
    let cells: Vec<&str> = chosen[0].split_whitespace().collect();
    let keeps: f64 = cells[2].trim_end_matches('%').parse().unwrap();
    assert!(keeps >= 95.0, "{}", chosen[0]);
    assert_eq!(cells[4], "0", "{}", chosen[0]);

    let layer = std::fs::read_to_string(&out_file).unwrap();
    assert!(
        layer.starts_with("# Written by `condense tune` on 2 recorded session(s)"),
        "{layer}"
    );
    let check = condense(
        dir.path(),
        &["config", "check", "--config", out_file.to_str().unwrap()],
    );
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    // The replay confirms it: each session replayed under the layer costs, in all, what the
    // chosen row says, and keeps as much (the sessions' means weighted by their requests).
    let (mut cost, mut kept, mut requests) = (0.0, 0.0, 0.0);
    for entry in std::fs::read_dir(&sessions).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|extension| extension != "json") {
            continue;
        }
        let replay = condense(
            dir.path(),
            &[
                "replay",
                path.to_str().unwrap(),
                "--context-window",
                "32000",
                "--max-output-tokens",
                "4096",
                "--config",
                out_file.to_str().unwrap(),
                "--json",
            ],
        );
        assert!(
            replay.status.success(),
            "{}",
            String::from_utf8_lossy(&replay.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
        let ours = json["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|policy| policy["name"] == "condense")
            .unwrap();
        let asked = ours["requests"].as_f64().unwrap();
        cost += ours["cost_usd"].as_f64().unwrap();
        kept += ours["retention"].as_f64().unwrap() * asked;
        requests += asked;
    }
    let said_cost: f64 = cells[1].parse().unwrap();
    assert!(
        (cost - said_cost).abs() < 0.006,
        "{cost} against {}",
        chosen[0]
    );
    assert!(
        (100.0 * kept / requests - keeps).abs() < 0.051,
        "{} % against {}",
        100.0 * kept / requests,
        chosen[0]
    );

    // The same sessions, the same answer.
    std::fs::remove_file(&out_file).unwrap();
    let again = condense(dir.path(), &args);
    assert_eq!(String::from_utf8(again.stdout).unwrap(), table);
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), layer);
}

/// A team's logs measure the harness's model together: the one Claude Code compacted sizes the
/// stand-ins of every session, and the table says by how much.
#[test]
fn tune_sizes_a_models_summary_by_every_log_that_holds_one() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = sessions_in(dir.path());
    let data =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../condense-formats/tests/data");
    for name in [
        "claude-code-2.1.197-compacted.jsonl",
        "claude-code-2.1.197.jsonl",
    ] {
        std::fs::copy(data.join(name), sessions.join(name)).unwrap();
    }
    let out = tuned(dir.path(), &sessions, "32000");
    let table = String::from_utf8(out.stdout).unwrap();
    let second = table.lines().nth(1).unwrap();
    assert!(
        second.starts_with(
            "summaries a model writes sized as the harness's own in these logs (1 of "
        ),
        "{table}"
    );
}

/// Among a team's logs, one whose text was redacted is named: its figures price the log as
/// it is, not what the provider billed. The others are not.
#[test]
fn tune_names_a_log_whose_usage_its_messages_do_not_bear_out() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = sessions_in(dir.path());
    let log = transcripts().join("claude-code/e80aa543-6eff-4cb5-91e0-6d4e8e7951e9.jsonl");
    std::fs::copy(&log, sessions.join("as-recorded.jsonl")).unwrap();
    std::fs::write(
        sessions.join("redacted.jsonl"),
        condense_core::testing::with_text_redacted(&std::fs::read_to_string(&log).unwrap()),
    )
    .unwrap();
    let out = tuned(dir.path(), &sessions, "64000");
    let told = String::from_utf8(out.stderr).unwrap();
    let named: Vec<&str> = told
        .lines()
        .filter(|line| line.contains("the log's own usage does not bear out its messages"))
        .collect();
    assert_eq!(named.len(), 1, "{told}");
    assert!(named[0].contains("redacted.jsonl"), "{told}");
}

/// An empty `sessions` directory in `dir`, for a test's logs.
fn sessions_in(dir: &std::path::Path) -> std::path::PathBuf {
    let sessions = dir.join("sessions");
    std::fs::create_dir(&sessions).unwrap();
    sessions
}

/// `condense tune` on the logs in `sessions` at a `window`-token context window, run in `dir`,
/// which must succeed.
fn tuned(dir: &std::path::Path, sessions: &std::path::Path, window: &str) -> std::process::Output {
    let out = condense(
        dir,
        &[
            "tune",
            sessions.to_str().unwrap(),
            "--context-window",
            window,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn tune_refuses_what_is_not_there() {
    let dir = tempfile::tempdir().unwrap();
    let out = condense(dir.path(), &["tune", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nowhere: no such file or directory"));
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = condense(dir.path(), &["tune", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no recorded sessions found"));
    // A directory of logs that hold nothing has no session either; an empty log named alone
    // is an error that names it.
    let log = empty.join("s.jsonl");
    std::fs::write(&log, "\n").unwrap();
    let out = condense(dir.path(), &["tune", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no recorded sessions found"));
    let out = condense(dir.path(), &["tune", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("s.jsonl: the input is empty"), "{stderr}");
}
