//! Every command run as a process, on recorded sessions, with snapshots of what it prints.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

use serde_json::Value;

#[test]
fn compact_then_count_is_under_the_threshold_and_compacting_again_does_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let example = example();
    let out = compact_for_32k(
        dir.path(),
        example.to_str().unwrap(),
        &["-o", "compacted.jsonl", "--report", "report.json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr, dir.path()));
    insta::assert_snapshot!("compact_example", text(&out.stderr, dir.path()));
    assert!(out.stdout.is_empty());

    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    let usable = report["usable"].as_u64().unwrap();
    let counted = condense(dir.path(), &["count", "compacted.jsonl", "--json"]);
    assert!(counted.status.success());
    let counts: Value = serde_json::from_slice(&counted.stdout).unwrap();
    assert!(counts["total"].as_u64().unwrap() < usable, "{counts}");

    let again = compact_for_32k(dir.path(), "compacted.jsonl", &["-o", "again.jsonl"]);
    assert!(again.status.success());
    let said = text(&again.stderr, dir.path());
    assert!(
        said.contains("compact: not needed") && said.contains("0 tokens freed"),
        "{said}"
    );
}

/// The compacted main thread is a Claude Code session: every line has a uuid whose parent is an
/// earlier line (or none), and sidechains and metadata lines are all still there.
#[test]
fn a_compacted_claude_code_session_is_still_a_claude_code_session() {
    let dir = tempfile::tempdir().unwrap();
    let source = transcripts().join("claude-code/5f8cbb78-38d3-47e9-9504-baa93bb166c9.jsonl");
    let out = compact_for_32k(
        dir.path(),
        source.to_str().unwrap(),
        &["-o", "out.jsonl", "-q"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr, dir.path()));
    assert!(out.stderr.is_empty(), "-q prints nothing");
    let lines = |path: &Path| -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let before = lines(&source);
    let after = lines(&dir.path().join("out.jsonl"));
    let side = |lines: &[Value]| {
        lines
            .iter()
            .filter(|l| {
                l["isSidechain"] == Value::Bool(true)
                    || !matches!(l["type"].as_str(), Some("user" | "assistant"))
            })
            .count()
    };
    assert_eq!(side(&after), side(&before));
    assert!(after.len() < before.len());
    let mut seen = std::collections::HashSet::new();
    for line in after.iter().filter(|l| {
        l["isSidechain"] != Value::Bool(true)
            && matches!(l["type"].as_str(), Some("user" | "assistant"))
    }) {
        let uuid = line["uuid"].as_str().expect("every main line has a uuid");
        match &line["parentUuid"] {
            Value::Null => assert!(seen.is_empty(), "only the first line has no parent"),
            Value::String(parent) => assert!(
                seen.contains(parent.as_str()),
                "{uuid}: parent {parent} is not an earlier line"
            ),
            other => panic!("{other}"),
        }
        seen.insert(uuid.to_owned());
        assert!(line["message"]["content"].is_string() || line["message"]["content"].is_array());
    }
    assert!(
        after
            .iter()
            .any(|l| l["isCompactSummary"] == Value::Bool(true))
    );
}

#[test]
fn prune_stores_originals_that_recall_gives_back() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("condense.toml"),
        "[prune]\nprotect_tokens = 0\nminimum_tokens = 0\n",
    )
    .unwrap();
    let source = transcripts().join("anthropic/claude-code-5f8cbb78.json");
    let out = condense(
        dir.path(),
        &[
            "prune",
            source.to_str().unwrap(),
            "--store",
            "originals",
            "-o",
            "pruned.json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr, dir.path()));
    insta::assert_snapshot!("prune_anthropic_5f8cbb78", text(&out.stderr, dir.path()));

    let results = |path: &Path| -> Vec<Value> {
        let body: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|block| block["type"] == "tool_result")
            .cloned()
            .collect()
    };
    let mut recalled = 0;
    for (before, after) in results(&source)
        .iter()
        .zip(results(&dir.path().join("pruned.json")))
    {
        let Some(placeholder) = after["content"]
            .as_str()
            .filter(|c| c.starts_with("[condense:"))
        else {
            continue;
        };
        // Outputs that were lists of blocks are stored as JSON; the text ones are checked here.
        let Some(original) = before["content"].as_str() else {
            continue;
        };
        let handle = placeholder
            .rsplit("condense recall ")
            .next()
            .unwrap()
            .trim_end_matches(']');
        let back = condense(dir.path(), &["recall", handle, "--store", "originals"]);
        assert!(back.status.success(), "{}", text(&back.stderr, dir.path()));
        assert_eq!(String::from_utf8(back.stdout).unwrap(), original);
        recalled += 1;
    }
    assert!(recalled > 10, "only {recalled} outputs were pruned");
}

/// A request body's tool definitions are counted beside its messages (not in the total: the
/// messages' count is what compaction can change), in words and in the JSON.
#[test]
fn count_gives_a_request_s_tool_definitions_apart() {
    let dir = tempfile::tempdir().unwrap();
    let mut body: serde_json::Value = serde_json::from_slice(
        &std::fs::read(transcripts().join("anthropic/claude-code-dc7e9081.json")).unwrap(),
    )
    .unwrap();
    let path = dir.path().join("request.json");
    std::fs::write(&path, body.to_string()).unwrap();
    let plain = condense(dir.path(), &["count", path.to_str().unwrap(), "--json"]);
    let plain: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert_eq!(plain.get("tool_definitions"), None);
    body["tools"] = serde_json::json!([{"name": "Read", "description": "Reads a file from the local filesystem. ".repeat(40),
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]);
    std::fs::write(&path, body.to_string()).unwrap();
    let json = condense(dir.path(), &["count", path.to_str().unwrap(), "--json"]);
    assert!(json.status.success(), "{}", text(&json.stderr, dir.path()));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let tools = json["tool_definitions"].as_u64().unwrap();
    assert!((300..700).contains(&tools), "{tools}");
    assert_eq!(json["total"], plain["total"]);
    let words = condense(dir.path(), &["count", path.to_str().unwrap()]);
    assert!(
        text(&words.stdout, dir.path()).contains(&format!(
            "and {tools} tokens of tool definitions beside them"
        )),
        "{}",
        text(&words.stdout, dir.path())
    );
}

#[test]
fn count_and_inspect_print_tables() {
    let dir = tempfile::tempdir().unwrap();
    let source = transcripts().join("openai/swe-agent-marshmallow-1867.json");
    let out = condense(dir.path(), &["count", source.to_str().unwrap()]);
    assert!(out.status.success());
    insta::assert_snapshot!("count_swe_agent", text(&out.stdout, dir.path()));
    let json = condense(dir.path(), &["count", source.to_str().unwrap(), "--json"]);
    insta::assert_snapshot!("count_swe_agent_json", text(&json.stdout, dir.path()));

    let small = transcripts().join("claude-code/9cc4a4b0-cba8-4e56-b79f-80b730735150.jsonl");
    let out = condense(
        dir.path(),
        &[
            "inspect",
            small.to_str().unwrap(),
            "--context-window",
            "3000",
            "--max-output-tokens",
            "500",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr, dir.path()));
    insta::assert_snapshot!("inspect_9cc4a4b0", text(&out.stdout, dir.path()));
}

#[test]
fn config_plugins_and_templates_are_shown() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".condense.toml"),
        "[model]\ncontext_window = 64000\n",
    )
    .unwrap();
    let show = condense(dir.path(), &["config", "show", "--protect", "memory_store"]);
    assert!(show.status.success());
    insta::assert_snapshot!("config_show", text(&show.stdout, dir.path()));
    let check = condense(dir.path(), &["config", "check"]);
    assert_eq!(
        text(&check.stdout, dir.path()),
        "the configuration is valid (0 plugin(s) loaded)\n"
    );
    let path = condense(dir.path(), &["config", "path"]);
    insta::assert_snapshot!("config_path", text(&path.stdout, dir.path()));
    let plugins = condense(dir.path(), &["plugins", "list"]);
    assert_eq!(text(&plugins.stdout, dir.path()), "no plugins configured\n");
    let list = condense(dir.path(), &["template", "list"]);
    insta::assert_snapshot!("template_list", text(&list.stdout, dir.path()));
    let shown = condense(dir.path(), &["template", "show", "structured"]);
    assert!(
        String::from_utf8(shown.stdout)
            .unwrap()
            .contains("## Relevant files / directories")
    );
}

#[test]
fn plugins_list_shows_what_each_plugin_brings() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin("condense-plugin-memory-store", &[], "memory_store_cli");
    std::fs::write(
        dir.path().join("condense.toml"),
        format!("[[plugins]]\npath = {}\n[plugins.config]\ntools = [\"memory_delete\"]\n\n[[plugins]]\npath = \"libmissing.so\"\nrequired = false\n", serde_json::Value::String(plugin.display().to_string())),
    )
    .unwrap();
    let out = condense(dir.path(), &["plugins", "list"]);
    assert!(out.status.success(), "{}", text(&out.stderr, dir.path()));
    let listed = text(&out.stdout, dir.path()).replace(&plugin.display().to_string(), "<plugin>");
    assert_eq!(
        listed,
        "memory-store 0.1.0  <plugin>\n  protected tools: memory_store, memory_recall, memory_delete\n  template: no\n"
    );
    assert_eq!(
        text(&out.stderr, dir.path()),
        "condense: warning: skipping an optional plugin: libmissing.so: no such plugin file\n"
    );

    let show = condense(dir.path(), &["config", "show"]);
    let shown = text(&show.stdout, dir.path());
    assert!(
        shown.contains("[[plugins]]  # project <tmp>/condense.toml"),
        "{shown}"
    );
}

#[test]
fn every_command_has_help_with_an_example() {
    let dir = tempfile::tempdir().unwrap();
    for command in [
        &["--help"][..],
        &["compact", "--help"],
        &["prune", "--help"],
        &["count", "--help"],
        &["inspect", "--help"],
        &["recall", "--help"],
        &["config", "--help"],
        &["plugins", "--help"],
        &["template", "--help"],
        &["completions", "--help"],
        &["man", "--help"],
    ] {
        let out = condense(dir.path(), command);
        assert!(out.status.success(), "{command:?}");
        assert!(
            String::from_utf8(out.stdout).unwrap().contains("Example:"),
            "{command:?} has no example"
        );
    }
}

/// Bad input: one line on stderr, the right exit status, and no output file left behind.
#[test]
fn bad_input_is_one_line_and_the_right_status() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.json"), "").unwrap();
    std::fs::write(
        dir.path().join("garbage.bin"),
        (0u8..=255).cycle().take(3000).collect::<Vec<u8>>(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("truncated.json"),
        "[{\"role\": \"user\", \"content\": \"hi\"",
    )
    .unwrap();
    std::fs::write(dir.path().join("bad.toml"), "[model]\ncontext_windw = 5\n").unwrap();
    std::fs::create_dir(dir.path().join("a-directory")).unwrap();
    let cases: [(&[&str], i32, &str); 9] = [
        (
            &["compact", "missing.json", "-o", "out.json"],
            1,
            "condense: missing.json: cannot read: No such file or directory (os error 2)",
        ),
        (
            &["compact", "a-directory", "-o", "out.json"],
            1,
            "condense: a-directory: is a directory, not a session file",
        ),
        (
            &["compact", "empty.json", "-o", "out.json"],
            1,
            "condense: empty.json: the input is empty",
        ),
        (
            &["compact", "garbage.bin", "-o", "out.json"],
            1,
            "condense: garbage.bin: the input is not valid UTF-8 (line 2, byte 128)",
        ),
        (
            &["compact", "truncated.json", "-o", "out.json"],
            1,
            "condense: truncated.json: invalid JSON at line 1, column 33: EOF while parsing an object",
        ),
        (
            &[
                "compact",
                "truncated.json",
                "--format",
                "yaml",
                "-o",
                "out.json",
            ],
            2,
            "condense: invalid value 'yaml' for '--format <FORMAT>': unknown format `yaml` (expected openai, openai-responses, anthropic, claude-code or codex) (see condense --help)",
        ),
        (
            &[
                "compact",
                "truncated.json",
                "--config",
                "bad.toml",
                "-o",
                "out.json",
            ],
            1,
            "condense: bad.toml:2:1: unknown key `model.context_windw` (did you mean `context_window`?)",
        ),
        // clap's own messages continue on the lines after the first: the list of what is
        // missing, the spelling it would accept.
        (
            &["recall"],
            2,
            "condense: the following required arguments were not provided: <HANDLE> (see condense --help)",
        ),
        (
            &[
                "compact",
                "empty.json",
                "--contex-window",
                "5",
                "-o",
                "out.json",
            ],
            2,
            "condense: unexpected argument '--contex-window' found; tip: a similar argument exists: '--context-window' (see condense --help)",
        ),
    ];
    for (args, status, message) in cases {
        let out = condense(dir.path(), args);
        assert_eq!(out.status.code(), Some(status), "{args:?}");
        let said = text(&out.stderr, dir.path());
        assert_eq!(said.lines().count(), 1, "{args:?}: {said}");
        assert_eq!(said.trim_end(), message, "{args:?}");
        assert!(
            !dir.path().join("out.json").exists(),
            "{args:?} left an output file"
        );
    }
}

#[test]
fn the_input_is_never_overwritten_unless_asked_and_then_backed_up() {
    let dir = tempfile::tempdir().unwrap();
    let source = transcripts().join("openai/swe-agent-marshmallow-1867.json");
    std::fs::copy(&source, dir.path().join("session.json")).unwrap();
    let out = condense(
        dir.path(),
        &["compact", "session.json", "-o", "session.json"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr, dir.path())
            .contains("the input and --output are the same file (session.json); nothing was written; use --in-place")
    );

    let out = condense(
        dir.path(),
        &[
            "prune",
            "session.json",
            "--in-place",
            "-q",
            "--store",
            "originals",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr, dir.path()));
    assert_eq!(
        std::fs::read(dir.path().join("session.json.bak")).unwrap(),
        std::fs::read(&source).unwrap()
    );
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("condense-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn prune_alone_over_the_threshold_says_the_summary_did_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let source = transcripts().join("openai/mini-swe-agent-sympy__sympy-13091.json");
    let out = condense(
        dir.path(),
        &[
            "prune",
            source.to_str().unwrap(),
            "--context-window",
            "8000",
            "--max-output-tokens",
            "1000",
            "--dry-run",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr, dir.path()));
    let stderr = text(&out.stderr, dir.path());
    let result = stderr
        .lines()
        .find(|line| line.trim_start().starts_with("result:"))
        .unwrap();
    // It once said the summary and the kept turns were too large, of a run that made no summary.
    assert!(
        result.ends_with(
            "tokens, still over the 7,000 usable after pruning alone (the summary phase was not run)"
        ),
        "{result}"
    );
}

#[test]
fn stdin_in_and_stdout_out() {
    let dir = tempfile::tempdir().unwrap();
    let source =
        std::fs::read(transcripts().join("openai/swe-agent-marshmallow-1867.json")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_condense"))
        .args(["compact", "-", "-q", "--store", "originals"])
        .current_dir(dir.path())
        .env_clear()
        .env("HOME", dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&source).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let written: Value = serde_json::from_slice(&out.stdout).unwrap();
    let original: Value = serde_json::from_slice(&source).unwrap();
    assert_eq!(
        written, original,
        "under the threshold: the same session comes back"
    );
}

/// An Anthropic request compacted is still a valid request: the system prompt stays `system`,
/// the summary is the first (user) message, and the roles alternate from there.
#[test]
fn a_compacted_anthropic_request_starts_with_the_summary_as_a_user_message() {
    let dir = tempfile::tempdir().unwrap();
    let source = transcripts().join("anthropic/claude-code-5f8cbb78.json");
    let out = compact_for_32k(
        dir.path(),
        source.to_str().unwrap(),
        &["-q", "-o", "out.json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr, dir.path()));
    let before: Value = serde_json::from_slice(&std::fs::read(&source).unwrap()).unwrap();
    let after: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out.json")).unwrap()).unwrap();
    assert_eq!(after["system"], before["system"]);
    let messages = after["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    let first = messages[0]["content"].to_string();
    assert!(first.contains("<prior-conversation-summary>"), "{first}");
    assert!(messages.len() < before["messages"].as_array().unwrap().len());
}

/// A Responses body (the OpenHands run as Codex would send it) is detected, compacted and
/// written back as a Responses body: the instructions stay `instructions`, the run's task stays
/// the first item, its parts as they came, with the summary written after them (no second user
/// message after it), the last items are the session's own, and a forced format that
/// contradicts the content is refused.
#[test]
fn a_compacted_responses_body_is_still_a_responses_body() {
    let dir = tempfile::tempdir().unwrap();
    let before = openhands_as_responses();
    std::fs::write(dir.path().join("codex.json"), before.to_string()).unwrap();
    let out = condense(
        dir.path(),
        &[
            "compact",
            "codex.json",
            "--context-window",
            "16000",
            "--max-output-tokens",
            "4096",
            "-o",
            "out.json",
        ],
    );
    let stderr = text(&out.stderr, dir.path());
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("(openai-responses)"), "{stderr}");
    let after: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out.json")).unwrap()).unwrap();
    assert_eq!(after["instructions"], before["instructions"]);
    let (items, original) = (
        after["input"].as_array().unwrap(),
        before["input"].as_array().unwrap(),
    );
    assert!(items.len() < original.len());
    // The task's parts as they came, the summary a part of its own after them, in one message.
    let (task, parts) = (&items[0], original[0]["content"].as_array().unwrap());
    assert_eq!(task["role"], "user");
    assert_eq!(
        task["content"].as_array().unwrap()[..parts.len()],
        parts[..]
    );
    assert!(
        task["content"][parts.len()]["text"]
            .as_str()
            .unwrap()
            .starts_with("<prior-conversation-summary>")
    );
    assert_ne!(items[1]["role"], "user");
    assert_eq!(items.last(), original.last());
    let out = condense(dir.path(), &["count", "codex.json", "--format", "openai"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        text(&out.stderr, dir.path())
    );
}

/// The OpenHands run (Chat Completions, its shell commands `execute_bash` calls) as the
/// Responses API request Codex would send of it.
fn openhands_as_responses() -> Value {
    let chat: Value = serde_json::from_slice(
        &std::fs::read(transcripts().join("openai/openhands-ponylang__ponyc-4588.json")).unwrap(),
    )
    .unwrap();
    condense_core::testing::responses_from_chat(&chat)
}

/// `body` (a Responses request) written to `name` in `dir` and compacted for `window` tokens
/// with `max_output` reserved: the items it comes out with.
fn compacted_items(
    dir: &Path,
    name: &str,
    body: &Value,
    window: &str,
    max_output: &str,
) -> Vec<Value> {
    std::fs::write(dir.join(name), body.to_string()).unwrap();
    let out = condense(
        dir,
        &[
            "compact",
            name,
            "--context-window",
            window,
            "--max-output-tokens",
            max_output,
            "-q",
            "-o",
            "out.json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr, dir));
    let after: Value =
        serde_json::from_slice(&std::fs::read(dir.join("out.json")).unwrap()).unwrap();
    after["input"].as_array().unwrap().clone()
}

/// The OpenHands run (its 24 shell commands Codex-style function calls) with every command
/// made a built-in tool's call and output by `as_builtin` (the call's id, its command, its
/// output): the function-calling session and its built-in twin.
fn shell_twins(as_builtin: impl Fn(&Value, &str, &Value) -> (Value, Value)) -> (Value, Value) {
    let functions = openhands_as_responses();
    let mut twin = functions.clone();
    let mut outputs = std::collections::HashMap::new();
    for item in twin["input"].as_array_mut().unwrap() {
        if item["type"] == "function_call" && item["name"] == "execute_bash" {
            let arguments: Value =
                serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
            outputs.insert(item["call_id"].as_str().unwrap().to_owned(), None);
            *item = as_builtin(
                &item["call_id"],
                arguments["command"].as_str().unwrap(),
                &Value::Null,
            )
            .0;
        } else if item["type"] == "function_call_output"
            && let Some(slot) = outputs.get_mut(item["call_id"].as_str().unwrap())
        {
            *slot = Some(());
            *item = as_builtin(&item["call_id"], "", &item["output"]).1;
        }
    }
    assert_eq!(outputs.len(), 24);
    assert!(outputs.values().all(Option::is_some));
    (functions, twin)
}

/// What a compaction of `twin` keeps, against the same compaction of its function-calling
/// twin: the same summary (the tool named as each session names it), as many items, and every
/// output with its call (`answered` names the calls the outputs answer).
fn compacts_as_the_function_twin(
    dir: &Path,
    (functions, twin): (Value, Value),
    tool: &str,
    answered: impl Fn(&Value) -> Option<String>,
) -> Vec<Value> {
    let (as_functions, as_twin) = (
        compacted_items(dir, "functions.json", &functions, "16000", "4096"),
        compacted_items(dir, "twin.json", &twin, "16000", "4096"),
    );
    let summary = |items: &[Value]| {
        let text = items[0]["content"].to_string();
        let start = text
            .find("<prior-conversation-summary>")
            .expect("a summary");
        text[start..].to_owned()
    };
    assert_eq!(
        summary(&as_twin).replace(&format!("- {tool}: "), "- execute_bash: "),
        summary(&as_functions)
    );
    assert_eq!(as_twin.len(), as_functions.len());
    let mut calls: Vec<String> = as_twin
        .iter()
        .filter(|item| {
            item["type"]
                .as_str()
                .is_some_and(|kind| kind.ends_with("_call"))
        })
        .map(|item| item["call_id"].as_str().unwrap().to_owned())
        .collect();
    let mut outputs: Vec<String> = as_twin.iter().filter_map(answered).collect();
    calls.sort();
    outputs.sort();
    assert_eq!(
        outputs, calls,
        "every output has its call, every call its output"
    );
    as_twin
}

/// A session of the local shell tool (codex-mini's, the AI SDK's `localShell`) compacts as the
/// same session of function calls does: its calls are calls, its outputs their results (here
/// named by `id`, as the API reference has it), so the summary names the same files, the tail
/// keeps as many calls, and no output is left without its call.
#[test]
fn a_local_shell_session_compacts_as_its_function_calling_twin() {
    let dir = tempfile::tempdir().unwrap();
    let twins = shell_twins(|id, command, output| {
        (
            serde_json::json!({"type": "local_shell_call", "call_id": id, "status": "completed",
                "action": {"type": "exec", "command": ["bash", "-lc", command], "env": {}}}),
            serde_json::json!({"type": "local_shell_call_output", "id": id, "output": output}),
        )
    });
    let items = compacts_as_the_function_twin(dir.path(), twins, "local_shell", |item| {
        let key = match item["type"].as_str()? {
            "function_call_output" => "call_id",
            "local_shell_call_output" => "id",
            _ => return None,
        };
        Some(item[key].as_str()?.to_owned())
    });
    assert!(
        items.iter().any(|item| item["type"] == "local_shell_call"),
        "the tail keeps the local shell's calls"
    );
}

/// The same with the shell tool (GPT-5.1's, the Agents SDK's `ShellTool`), whose output is a
/// list of chunks: read as their text, the session compacts as its twin does, and every output
/// goes out as chunks the API takes, the ones condense cut to a preview as well.
#[test]
fn a_shell_tool_session_compacts_as_its_function_calling_twin() {
    let dir = tempfile::tempdir().unwrap();
    let twins = shell_twins(|id, command, output| {
        (
            serde_json::json!({"type": "shell_call", "call_id": id, "status": "completed",
                "action": {"commands": [command], "timeout_ms": 120000, "max_output_length": null}}),
            serde_json::json!({"type": "shell_call_output", "call_id": id, "output": [
                {"stdout": output, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}),
        )
    });
    let originals: std::collections::HashMap<String, Value> = twins.1["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "shell_call_output")
        .map(|item| (item["call_id"].as_str().unwrap().to_owned(), item.clone()))
        .collect();
    let twin = twins.1.clone();
    let items = compacts_as_the_function_twin(dir.path(), twins, "shell", |item| {
        matches!(
            item["type"].as_str()?,
            "function_call_output" | "shell_call_output"
        )
        .then(|| item["call_id"].as_str().map(str::to_owned))?
    });
    assert!(
        items.iter().any(|item| item["type"] == "shell_call_output"),
        "the tail keeps the shell tool's outputs"
    );
    // In smaller windows the tail's outputs are cut to previews: each goes out as one chunk
    // with its command's outcome.
    let mut changed = 0;
    for window in ["16000", "8000", "6000", "4000"] {
        let items = compacted_items(dir.path(), "twin.json", &twin, window, "1000");
        for output in items
            .iter()
            .filter(|item| item["type"] == "shell_call_output")
        {
            let original = &originals[output["call_id"].as_str().unwrap()];
            let [chunk] = output["output"].as_array().unwrap().as_slice() else {
                panic!("one chunk, as it came: {output}");
            };
            assert!(
                chunk["stdout"].is_string() && chunk["stderr"] == "",
                "{output}"
            );
            assert_eq!(chunk["outcome"], original["output"][0]["outcome"]);
            if output != original {
                // Cut to its start, shorter than it came.
                let (cut, whole) = (
                    chunk["stdout"].as_str().unwrap(),
                    original["output"][0]["stdout"].as_str().unwrap(),
                );
                assert!(
                    cut.len() < whole.len()
                        && whole.starts_with(&cut.chars().take(40).collect::<String>()),
                    "{cut}"
                );
                changed += 1;
            }
        }
    }
    assert!(
        changed > 0,
        "an output condense cut goes out as a chunk too"
    );
}

/// A run as the AI SDK sends it with `store` on: every earlier answer an `item_reference` to
/// what the provider stored (its reasoning, then its call), the outputs inline with no call
/// shown. Compacted at any window, the tail starts at an answer, never at an output whose call
/// went into the summary or between an answer's reasoning and its call (OpenAI refuses both).
#[test]
fn a_stored_answers_references_stay_with_their_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let mut body = openhands_as_responses();
    let mut stored = Vec::new();
    for (index, item) in body["input"].as_array().unwrap().iter().enumerate() {
        let reference = |id: String| serde_json::json!({"type": "item_reference", "id": id});
        match item["type"].as_str() {
            Some("function_call") => {
                stored.push(reference(format!("rs_{index}")));
                stored.push(reference(format!("fc_{index}")));
            }
            Some("message") if item["role"] == "assistant" => {
                stored.push(reference(format!("msg_{index}")))
            }
            _ => stored.push(item.clone()),
        }
    }
    body["input"] = Value::Array(stored);
    body["store"] = Value::Bool(true);
    for window in ["4000", "6000", "8000", "12000", "16000", "24000"] {
        let items = compacted_items(dir.path(), "stored.json", &body, window, "1000");
        assert!(
            items.len() < body["input"].as_array().unwrap().len(),
            "at {window}"
        );
        // The task, with the summary in it, then an answer's first reference.
        let first = &items[1];
        let id = first["id"].as_str().unwrap_or_default();
        assert!(
            first["type"] == "item_reference" && (id.starts_with("rs_") || id.starts_with("msg_")),
            "at {window} the tail starts at {first}"
        );
    }
}

/// The trim tool, ready to paste into a harness's tool list, in each provider's shape; and a
/// session whose agent called it comes out with the result trimmed and the call reported.
#[test]
fn the_trim_tool_is_printed_for_each_provider_and_applied() {
    let dir = tempfile::tempdir().unwrap();
    for format in ["openai", "openai-responses", "anthropic"] {
        let out = condense(dir.path(), &["tools", "schema", "--format", format]);
        assert!(out.status.success());
        let tool: Value = serde_json::from_slice(&out.stdout).unwrap();
        insta::assert_yaml_snapshot!(format!("trim_tool_{format}"), tool);
    }
    let session = serde_json::json!([
        {"role": "user", "content": "what is in notes.txt?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "r", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}}]},
        {"role": "tool", "tool_call_id": "r", "content": "line\n".repeat(500)},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "t", "type": "function", "function": {"name": "trim_tool_result", "arguments": "{\"summary\":\"notes.txt is 500 lines of 'line'\"}"}}]},
        {"role": "tool", "tool_call_id": "t", "content": "trimmed"},
        {"role": "assistant", "content": "It holds 500 lines."}
    ]);
    std::fs::write(dir.path().join("s.json"), session.to_string()).unwrap();
    let out = condense(
        dir.path(),
        &[
            "prune", "s.json", "-o", "out.json", "--report", "r.json", "-q",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr, dir.path()));
    let written: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out.json")).unwrap()).unwrap();
    let trimmed = written[2]["content"].as_str().unwrap();
    assert!(
        trimmed.starts_with(
            "[trimmed by the agent: notes.txt is 500 lines of 'line' — original: condense recall "
        ),
        "{trimmed}"
    );
    assert_eq!(
        written[4]["content"], "trimmed",
        "the trim call's own result stays"
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(report["prune"]["trims"][0]["outcome"], "trimmed");
    assert_eq!(report["prune"]["trims"][0]["target"], "r");
}

#[test]
fn replay_prices_every_policy_and_draws_the_chart() {
    let dir = tempfile::tempdir().unwrap();
    let input = transcripts().join("openai/swe-agent-marshmallow-1867.json");
    let input = input.to_str().unwrap();
    let out = condense(
        dir.path(),
        &[
            "replay",
            input,
            "--provider",
            "anthropic",
            "--context-window",
            "8000",
            "--max-output-tokens",
            "1024",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!("replay_swe_agent_8k", text(&out.stdout, dir.path()));

    let json = condense(
        dir.path(),
        &["replay", input, "--json", "--plot", "chart.svg"],
    );
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    // No --provider: a Chat Completions session was paid at OpenAI's prices.
    assert_eq!(value["provider"], "openai");
    let policies = value["policies"].as_array().unwrap();
    let names: Vec<&str> = policies
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "recorded",
            "none",
            "claude-code",
            "opencode",
            "hermes",
            "condense"
        ]
    );
    for policy in policies {
        for key in [
            "requests",
            "failures",
            "compactions",
            "cache_read_tokens",
            "cache_write_tokens",
            "uncached_tokens",
            "output_tokens",
            "cost_usd",
        ] {
            assert!(policy[key].is_number(), "{key} in {policy}");
        }
    }
    let chart = std::fs::read_to_string(dir.path().join("chart.svg")).unwrap();
    assert!(
        chart.starts_with("<svg"),
        "{}",
        &chart[..100.min(chart.len())]
    );
    for name in names {
        assert!(chart.contains(name), "the legend names {name}");
    }
}

#[test]
fn replay_of_a_claude_code_log_reports_the_logs_own_figures() {
    let dir = tempfile::tempdir().unwrap();
    let input = transcripts().join("claude-code/e80aa543-6eff-4cb5-91e0-6d4e8e7951e9.jsonl");
    let value = replay_json(dir.path(), &input, &["recorded", "condense"]);
    assert_eq!(
        value["provider"], "anthropic",
        "Claude Code talks to Anthropic"
    );
    let recorded = &value["policies"][0];
    assert_eq!(recorded["name"], "recorded");
    assert_eq!(recorded["recorded_requests"], 17);
    assert_eq!(recorded["recorded_cache_read_tokens"], 327_261);
    assert_eq!(recorded["recorded_cache_write_tokens"], 31_928);
    assert_eq!(recorded["recorded_uncached_tokens"], 59);
    assert_eq!(recorded["cost_vs_recorded"], 1.0);
    assert!(value["policies"][1].get("recorded_requests").is_none());
}

/// A log whose text was redacted (as log-sharing tools do) replays, but says that its figures
/// are not the session's: its own usage counts some fourteen times what its messages hold.
/// The log as recorded says nothing of the kind.
#[test]
fn replay_of_a_log_with_its_text_redacted_says_its_figures_are_not_the_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let original = transcripts().join("claude-code/e80aa543-6eff-4cb5-91e0-6d4e8e7951e9.jsonl");
    let redacted = dir.path().join("redacted.jsonl");
    std::fs::write(
        &redacted,
        condense_core::testing::with_text_redacted(&std::fs::read_to_string(&original).unwrap()),
    )
    .unwrap();
    const WARNING: &str = "warning: the log's own usage does not bear out its messages";
    for (input, warned) in [(&original, false), (&redacted, true)] {
        let out = condense(
            dir.path(),
            &["replay", input.to_str().unwrap(), "--policy", "recorded"],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let table = String::from_utf8(out.stdout).unwrap();
        assert_eq!(table.contains(WARNING), warned, "{table}");
    }
    let value = replay_json(dir.path(), &redacted, &["recorded"]);
    assert!(
        value["calibration"]["fitted_scale"].as_f64().unwrap() > 5.0,
        "{value}"
    );
}

#[test]
fn replay_refuses_what_it_cannot_do_before_writing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let input = transcripts().join("openai/swe-agent-marshmallow-1867.json");
    let input = input.to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (&["--policy", "aider"], "unknown policy `aider`"),
        // A configuration value refused where a flag gave it is a usage error, as in `compact`.
        (&["--context-window", "0"], "must be more than 0"),
        (&["--template", "nope"], "unknown template `nope`"),
        (&["--policy", "condense-b"], "needs --config-b"),
        (&["--provider", "gemini"], "unknown provider `gemini`"),
        (&["--ttl", "10m"], "use 5m or 1h"),
        (&["--plot", "chart.png"], "written as .svg or .html"),
        (
            &["--config-b", "missing.toml"],
            "no such configuration file",
        ),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["replay", input];
        args.extend_from_slice(extra);
        let out = condense(dir.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
    }
    // The chart never replaces the session it is drawn from.
    let copy = dir.path().join("session.svg");
    std::fs::copy(input, &copy).unwrap();
    let out = condense(
        dir.path(),
        &[
            "replay",
            "session.svg",
            "--format",
            "openai",
            "--plot",
            "session.svg",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("same file"));
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(input).unwrap());
    let bad = dir.path().join("prices.toml");
    std::fs::write(&bad, "[anthropic]\ninput_per_mtok = \"three\"\n").unwrap();
    let out = condense(dir.path(), &["replay", input, "--prices", "prices.toml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("prices.toml"));
}

#[test]
fn the_upstream_summarizer_is_refused_outside_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let input = transcripts().join("openai/swe-agent-marshmallow-1867.json");
    let out = condense(
        dir.path(),
        &[
            "compact",
            input.to_str().unwrap(),
            "--summarizer",
            "upstream",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("only `condense serve` has them"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--summarizer"),
        "says where the kind came from: {stderr}"
    );
    // Pruning summarizes nothing, so it runs.
    let out = condense(
        dir.path(),
        &[
            "prune",
            input.to_str().unwrap(),
            "--summarizer",
            "upstream",
            "--dry-run",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A protect window wider than the usable window keeps every output it reaches: the report says
/// so, with the setting that scales it, and says nothing once that setting is on.
#[test]
fn a_protect_window_wider_than_the_window_is_pointed_out() {
    let dir = tempfile::tempdir().unwrap();
    let input = transcripts().join("openai/mini-swe-agent-sympy__sympy-13091.json");
    let input = input.to_str().unwrap();
    let args = [
        "prune",
        input,
        "--dry-run",
        "--context-window",
        "32000",
        "--max-output-tokens",
        "4096",
    ];
    let out = condense(dir.path(), &args);
    assert!(out.status.success());
    let said = text(&out.stderr, dir.path());
    assert!(
        said.contains(
            "note:    the protect window (40,000 tokens) is wider than the 27,904 usable, so 113 outputs it covers were kept; prune.adaptive_thresholds = true"
        ),
        "{said}"
    );
    std::fs::write(
        dir.path().join("adaptive.toml"),
        "[prune]\nadaptive_thresholds = true\n",
    )
    .unwrap();
    let mut adaptive = args.to_vec();
    adaptive.extend(["--config", "adaptive.toml"]);
    let out = condense(dir.path(), &adaptive);
    assert!(out.status.success());
    let said = text(&out.stderr, dir.path());
    assert!(!said.contains("note:"), "{said}");
    assert!(said.contains("54 of 124 tool outputs replaced"), "{said}");
}

/// A session in Chat Completions' older function calling (`function_call`, `role: "function"`)
/// is pruned like any other: the old answers become placeholders in their own form (a
/// `function` message with its `name`, no id added), and each comes back with `recall`.
#[test]
fn a_session_of_legacy_function_calls_is_pruned_in_its_own_form() {
    let dir = tempfile::tempdir().unwrap();
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You read files."}),
        serde_json::json!({"role": "user", "content": "Read the four logs."}),
    ];
    for n in 0..4 {
        messages.push(serde_json::json!({"role": "assistant", "content": null,
            "function_call": {"name": "read_file", "arguments": format!("{{\"path\": \"log{n}.txt\"}}")}}));
        let body: String = (0..400)
            .map(|line| format!("log {n} line {line}: ok\n"))
            .collect();
        messages
            .push(serde_json::json!({"role": "function", "name": "read_file", "content": body}));
    }
    messages.push(serde_json::json!({"role": "assistant", "content": "All four are fine."}));
    messages.push(serde_json::json!({"role": "user", "content": "Thanks."}));
    let session = serde_json::json!({"model": "gpt-3.5-turbo-0613", "messages": messages});
    std::fs::write(dir.path().join("functions.json"), session.to_string()).unwrap();
    std::fs::write(
        dir.path().join("prune.toml"),
        "[prune]\nskip_user_turns = 1\nprotect_tokens = 0\nminimum_tokens = 10\n",
    )
    .unwrap();
    let out = condense(
        dir.path(),
        &[
            "prune",
            "functions.json",
            "--config",
            "prune.toml",
            "-o",
            "pruned.json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pruned: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("pruned.json")).unwrap()).unwrap();
    let mut recalled = 0;
    for (index, (was, now)) in session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .zip(pruned["messages"].as_array().unwrap())
        .enumerate()
    {
        if was["role"] != "function" {
            assert_eq!(was, now, "message {index}");
            continue;
        }
        let keys: Vec<&String> = now.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 3, "{now}");
        assert_eq!((&now["role"], &now["name"]), (&was["role"], &was["name"]));
        let placeholder = now["content"].as_str().unwrap();
        let at = placeholder.find("condense recall ").expect(placeholder) + 16;
        let handle = &placeholder[at..at + 32];
        let back = condense(dir.path(), &["recall", handle]);
        assert!(back.status.success());
        assert_eq!(
            String::from_utf8(back.stdout).unwrap(),
            was["content"].as_str().unwrap()
        );
        recalled += 1;
    }
    assert_eq!(recalled, 4);
}

/// A Claude Code log with a branch the person left (a rewind) and attachments among the
/// messages, compacted: the lines beside the messages keep their place among the messages
/// they came with, so the last message line is still the session's last message (not the
/// branch left behind, which would then be what Claude Code resumes), and the chain Claude
/// Code walks back from it reaches condense's summary.
#[test]
fn a_compacted_claude_code_log_resumes_from_its_last_message_through_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let output =
        |n: usize| -> String { (0..700).map(|line| format!("{n}: line {line}\n")).collect() };
    let mut lines: Vec<Value> = Vec::new();
    let mut push = |uuid: &str, parent: Option<&str>, kind: &str, content: Value| {
        let mut line = serde_json::json!({"parentUuid": parent, "isSidechain": false,
            "type": kind, "uuid": uuid, "timestamp": "2026-11-23T10:00:00.000Z",
            "sessionId": "s", "cwd": "/work"});
        if kind == "attachment" {
            line["attachment"] =
                serde_json::json!({"type": "todo_reminder", "content": "keep going"});
        } else {
            line["message"] = serde_json::json!({"role": kind, "content": content});
        }
        lines.push(line);
    };
    let call = |id: &str| serde_json::json!([{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}]);
    let result = |id: &str, n: usize| serde_json::json!([{"type": "tool_result", "tool_use_id": id, "content": output(n)}]);
    push("u1", None, "user", "task one".into());
    push("a1", Some("u1"), "assistant", call("t1"));
    push("r1", Some("a1"), "user", result("t1", 1));
    push("att1", Some("r1"), "attachment", Value::Null);
    push("a2", Some("att1"), "assistant", call("t2"));
    push("r2", Some("a2"), "user", result("t2", 2));
    push("a3", Some("r2"), "assistant", "done one".into());
    // A turn the person then rewound.
    push("u2x", Some("a3"), "user", "a wrong turn".into());
    push("a2x", Some("u2x"), "assistant", "the wrong answer".into());
    push("u2", Some("a3"), "user", "task two".into());
    push("a4", Some("u2"), "assistant", call("t3"));
    push("r3", Some("a4"), "user", result("t3", 3));
    push("att2", Some("r3"), "attachment", Value::Null);
    push("a5", Some("att2"), "assistant", call("t4"));
    push("r4", Some("a5"), "user", result("t4", 4));
    push("a6", Some("r4"), "assistant", "done two".into());
    push("u3", Some("a6"), "user", "task three".into());
    push("a7", Some("u3"), "assistant", "done three".into());
    let log: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(dir.path().join("session.jsonl"), &log).unwrap();
    let out = condense(
        dir.path(),
        &[
            "compact",
            "session.jsonl",
            "--context-window",
            "9000",
            "--max-output-tokens",
            "1000",
            "-o",
            "out.jsonl",
        ],
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.contains("summarized"),
        "{said}"
    );
    let written: Vec<Value> = std::fs::read_to_string(dir.path().join("out.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // Nothing beside the messages is lost: the branch left behind and both attachments.
    for uuid in ["u2x", "a2x", "att1", "att2"] {
        assert!(
            written.iter().any(|line| line["uuid"] == uuid),
            "{uuid} is gone"
        );
    }
    // The last message line is the session's last message, and walking back from it along
    // `parentUuid` reaches the summary, as Claude Code's resume does.
    let last = written
        .iter()
        .rev()
        .find(|line| matches!(line["type"].as_str(), Some("user" | "assistant")))
        .unwrap();
    assert_eq!(last["uuid"], "a7");
    let mut at = Some(last);
    let mut reached_summary = false;
    let mut steps = 0;
    while let Some(line) = at {
        steps += 1;
        assert!(steps <= written.len(), "the chain loops");
        let content = &line["message"]["content"];
        let text = content
            .as_str()
            .or_else(|| content[0]["text"].as_str())
            .unwrap_or_default();
        reached_summary |= text.starts_with(condense_core::SUMMARY_OPEN);
        at = written
            .iter()
            .find(|other| other["uuid"].is_string() && other["uuid"] == line["parentUuid"]);
    }
    assert!(reached_summary, "{written:#?}");
    // Read again, the history ends with the session's last message.
    let (_, reread) =
        condense_formats::read(&std::fs::read(dir.path().join("out.jsonl")).unwrap(), None)
            .unwrap();
    assert_eq!(reread.messages.last().unwrap().plain_text(), "done three");
}

/// A log Claude Code compacted itself (`/compact`) is replayed from its first request:
/// `recorded` makes Claude Code's own requests, its summarizer call among them (counted as a
/// summary, reading the agent's cached prefix as Claude Code's forked call does), and the other
/// policies the session's requests as if Claude Code had not compacted. Claude Code's reply to
/// its own command (`"model": "<synthetic>"`) is no request.
#[test]
fn replay_of_a_log_claude_code_compacted_counts_its_summarizer_call() {
    let dir = tempfile::tempdir().unwrap();
    let input = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../condense-formats/tests/data/claude-code-2.1.197-compacted.jsonl");
    let value = replay_json(dir.path(), &input, &["recorded", "none"]);
    assert_eq!(value["provider"], "anthropic");
    let (recorded, none) = (&value["policies"][0], &value["policies"][1]);
    // Four requests before the boundary, the summarizer call, the one after.
    assert_eq!(recorded["requests"], 6);
    assert_eq!(recorded["compactions"], 1);
    assert_eq!(recorded["recorded_requests"], 5);
    assert_eq!(none["requests"], 5);
    assert_eq!(none["compactions"], 0);
    // The summarizer call reads what the agent's last request wrote: beyond the cold start,
    // `recorded` writes little more than `none` does.
    let writes = |policy: &Value| policy["cache_write_tokens"].as_u64().unwrap();
    assert!(writes(recorded) < writes(none) + 1_000, "{value}");
    // Its summary is the measure of a model's: the stand-ins of the policies whose summary a
    // model writes are sized by it, and the report says by how much.
    let length = &value["summary_length"];
    assert_eq!(length["samples"], 1, "{value}");
    assert!(length["mean_tokens"].as_u64().unwrap() > 0, "{value}");
    let templates: Vec<&str> = length["factors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|factor| factor[0].as_str().unwrap())
        .collect();
    assert_eq!(templates, ["detailed", "structured"]);
    let table = condense(
        dir.path(),
        &["replay", input.to_str().unwrap(), "--policy", "none"],
    );
    let stdout = String::from_utf8_lossy(&table.stdout);
    assert!(
        stdout.contains("summaries a model writes sized as the harness's own in this log (1 of "),
        "{stdout}"
    );
}

/// Claude Code 2 keeps each subagent's log beside the session's (`SESSION/subagents/
/// agent-ID.jsonl`): the session's replay replays each with it and adds them up, and each
/// also replays on its own, its requests those of the subagent's thread. A subagent log that
/// cannot be read fails the replay, naming it.
#[test]
fn replay_replays_the_subagent_logs_beside_a_session_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let data =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../condense-formats/tests/data");
    let session = dir.path().join("s.jsonl");
    std::fs::copy(data.join("claude-code-2.1.197.jsonl"), &session).unwrap();
    let without = replay_json(dir.path(), &session, &["recorded"]);
    assert!(without.get("subagents").is_none() && without.get("session").is_none());
    let main_requests = without["agent_requests"].as_u64().unwrap();

    std::fs::create_dir_all(dir.path().join("s/subagents")).unwrap();
    let agent = dir.path().join("s/subagents/agent-a31bf5bd29a79d555.jsonl");
    std::fs::copy(data.join("claude-code-2.1.197-subagent.jsonl"), &agent).unwrap();
    let with = condense(dir.path(), &["replay", "s.jsonl", "--policy", "recorded"]);
    assert!(with.status.success());
    let stdout = String::from_utf8_lossy(&with.stdout);
    assert!(
        stdout.contains("with a subagent the session started (3 requests"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the log's own figures, the whole session ("),
        "{stdout}"
    );
    assert!(
        stdout.contains("cache-hit share on the subagents: simulated "),
        "{stdout}"
    );
    // A directory of that name is no log, and Claude Code's own compaction request, logged
    // beside them, is no subagent.
    std::fs::create_dir(dir.path().join("s/subagents/agent-b.jsonl")).unwrap();
    std::fs::copy(
        data.join("claude-code-2.1.197-subagent.jsonl"),
        dir.path().join("s/subagents/agent-acompact-5e1f2a.jsonl"),
    )
    .unwrap();
    let value = replay_json(dir.path(), &session, &["recorded"]);
    assert_eq!(value["subagents"].as_array().unwrap().len(), 1);
    assert_eq!(value["policies"], without["policies"], "the main thread");
    assert_eq!(value["subagents"][0]["name"], "agent-a31bf5bd29a79d555");
    assert_eq!(value["subagents"][0]["agent_requests"], 3);
    assert_eq!(
        value["session"][0]["requests"].as_u64().unwrap(),
        main_requests + 3
    );
    assert_eq!(
        value["session"][0]["recorded_requests"].as_u64().unwrap(),
        without["policies"][0]["recorded_requests"]
            .as_u64()
            .unwrap()
            + 3
    );

    let alone = replay_json(dir.path(), &agent, &["recorded"]);
    assert_eq!(alone["agent_requests"], 3);
    assert_eq!(alone["policies"][0]["recorded_requests"], 3);
    assert_eq!(alone["policies"], value["subagents"][0]["policies"]);

    std::fs::write(&agent, "{\"type\": \"user\", \"isSidechain\": true}\n").unwrap();
    let broken = condense(dir.path(), &["replay", "s.jsonl", "--policy", "recorded"]);
    assert_eq!(broken.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert!(
        stderr.contains(
            "agent-a31bf5bd29a79d555.jsonl: line 1: a `user` line has no `message` object"
        ),
        "{stderr}"
    );
}

/// With the default store (the user's data directory), a handle a placeholder names is
/// recalled from any directory: the CLI compacted in one, the person recalls in another.
#[test]
fn a_handle_is_recalled_from_any_directory() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("project");
    let elsewhere = home.path().join("elsewhere");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(
        work.join("condense.toml"),
        "[prune]\nprotect_tokens = 0\nminimum_tokens = 0\n",
    )
    .unwrap();
    let source = transcripts().join("anthropic/claude-code-5f8cbb78.json");
    let run = |dir: &Path, args: &[&str]| {
        common::command(dir, args)
            .env("HOME", home.path())
            .output()
            .unwrap()
    };
    let out = run(
        &work,
        &["prune", source.to_str().unwrap(), "-o", "pruned.json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    let store = home.path().join(".local/share/condense/originals");
    assert!(
        said.contains(&format!("originals: {}", store.display())),
        "the report says where: {said}"
    );
    let handle = handles(&work.join("pruned.json")).remove(0);
    let out = run(&elsewhere, &["recall", &handle]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty());
    assert!(!elsewhere.join(".condense").exists());
}

/// `condense completions SHELL` prints a script the shell accepts, naming the subcommands;
/// `condense man` prints a manual page.
#[test]
fn completions_and_the_manual_page_are_printed() {
    let dir = tempfile::tempdir().unwrap();
    let out = condense(dir.path(), &["completions", "bash"]);
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(script.contains("compact") && script.contains("recall") && script.contains("serve"));
    std::fs::write(dir.path().join("condense.bash"), &script).unwrap();
    let checked = std::process::Command::new("bash")
        .arg("-n")
        .arg(dir.path().join("condense.bash"))
        .status()
        .unwrap();
    assert!(checked.success(), "bash accepts the script");
    let out = condense(dir.path(), &["man"]);
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.contains(".TH condense 1"),
        "{}",
        &page[..page.len().min(200)]
    );
    let out = condense(dir.path(), &["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `--config FILE` may come before the subcommand, as people write it with most tools.
#[test]
fn the_configuration_file_may_come_first() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        "[model]\ncontext_window = 123456\n",
    )
    .unwrap();
    for args in [
        &["--config", "c.toml", "config", "show"][..],
        &["--config=c.toml", "config", "show"],
        &["config", "show", "--config", "c.toml"],
    ] {
        let out = condense(dir.path(), args);
        assert!(out.status.success(), "{args:?}");
        let shown = String::from_utf8(out.stdout).unwrap();
        assert!(shown.contains("context_window = 123456"), "{args:?}");
    }
}

/// A session an earlier run pruned is summarized from the originals that run kept (a file keeps
/// no markers: its placeholders are recognised), so a failure is told by its error, not by the
/// placeholder; and a dry run says what the run would do, reading the same originals, and
/// stores nothing of its own.
#[test]
fn a_second_run_summarizes_from_the_originals_the_first_kept_and_a_dry_run_alike() {
    let dir = tempfile::tempdir().unwrap();
    let input = transcripts().join("claude-code/d7d349f9-c243-46e2-9a32-4a0eddfc634b.jsonl");
    let window = ["--context-window", "32000", "--max-output-tokens", "4096"];
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(window);
        all.extend(["--store", "originals", "-q"]);
        let out = condense(dir.path(), &all);
        assert!(out.status.success(), "{}", text(&out.stderr, dir.path()));
    };
    // Microcompact clears the old outputs (the log is long past the cache's life).
    run(&["prune", input.to_str().unwrap(), "-o", "pruned.jsonl"]);
    // The store keeps each original at `<first two hex digits>/<handle>`.
    let stored = || {
        std::fs::read_dir(dir.path().join("originals"))
            .unwrap()
            .map(|shard| std::fs::read_dir(shard.unwrap().path()).unwrap().count())
            .sum::<usize>()
    };
    let kept = stored();
    assert!(kept > 0);
    run(&[
        "compact",
        "pruned.jsonl",
        "--dry-run",
        "--report",
        "dry.json",
    ]);
    assert_eq!(stored(), kept, "a dry run stores nothing");
    run(&[
        "compact",
        "pruned.jsonl",
        "-o",
        "out.jsonl",
        "--report",
        "real.json",
    ]);
    let summary = |name: &str| {
        let report: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(name)).unwrap()).unwrap();
        report["compaction"]["summary_tokens"].clone()
    };
    assert!(summary("real.json").is_u64(), "{}", summary("real.json"));
    assert_eq!(summary("dry.json"), summary("real.json"));
    let compacted = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert!(
        compacted.contains("error: unknown type name ‘vsla_stats_t’"),
        "the summary tells the first build's error"
    );
    assert!(!compacted.contains("failed: [Old tool result content cleared"));
}
