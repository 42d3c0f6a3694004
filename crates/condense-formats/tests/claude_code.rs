//! A log that Claude Code 2.1.197 wrote (tests/data/README.md): what today's Claude Code puts
//! in a session log, beside the older logs of ../shared/transcripts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::{Message, Role};
use condense_formats::{Format, detect, read, write};
use serde_json::Value;

fn log() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/claude-code-2.1.197.jsonl"
    ))
    .unwrap()
}

#[test]
fn a_log_that_opens_with_queue_operations_is_known_as_claude_code() {
    let bytes = log();
    let first: Value =
        serde_json::from_slice(bytes.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["type"], "queue-operation");
    assert_eq!(detect(&bytes).unwrap(), Format::ClaudeCode);
    let (format, conversation) = read(&bytes, None).unwrap();
    assert_eq!(format, Format::ClaudeCode);
    assert_eq!(conversation.messages.len(), 8);
    assert!(conversation.validate().is_empty());
}

#[test]
fn it_is_written_back_as_the_same_bytes() {
    let bytes = log();
    let (_, conversation) = read(&bytes, None).unwrap();
    assert_eq!(write(Format::ClaudeCode, &conversation).unwrap(), bytes);
}

/// Claude Code resumes a session by following the last line's `parentUuid`s back: after a
/// summary that carried the first message, that message (the session's root) must hang below
/// the summary, or the summary is not on the chain and the resumed agent never sees it.
#[test]
fn a_carried_first_message_hangs_below_the_summary() {
    let (_, mut conversation) = read(&log(), None).unwrap();
    let first = conversation.messages[0].clone();
    let last = conversation.messages.pop().unwrap();
    conversation.messages = vec![
        Message::text(Role::User, "<prior-conversation-summary>\nsummary"),
        first,
        last,
    ];
    let written = String::from_utf8(write(Format::ClaudeCode, &conversation).unwrap()).unwrap();
    let lines: Vec<Value> = written
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let by_uuid: std::collections::HashMap<&str, &Value> = lines
        .iter()
        .filter_map(|line| Some((line["uuid"].as_str()?, line)))
        .collect();
    let leaf = lines
        .iter()
        .rev()
        .find(|line| line["type"] == "assistant")
        .unwrap();
    let mut chain = Vec::new();
    let mut at = Some(leaf);
    while let Some(line) = at {
        chain.push(line["message"]["content"].to_string());
        at = line["parentUuid"]
            .as_str()
            .and_then(|parent| by_uuid.get(parent).copied());
    }
    let root = chain.last().unwrap();
    assert!(root.contains("prior-conversation-summary"), "{chain:#?}");
    assert!(
        chain
            .iter()
            .any(|text| text.contains("count to a few thousand"))
    );
}

/// Past the lines detection reads, a log whose first line carries Claude Code's `sessionId` is
/// still known as Claude Code's.
#[test]
fn a_log_that_opens_with_many_other_lines_is_known_by_its_session_id() {
    let text = String::from_utf8(log()).unwrap();
    let first = text.lines().next().unwrap();
    let mut long = first.to_owned();
    for _ in 0..100 {
        long.push('\n');
        long.push_str(first);
    }
    long.push('\n');
    long.push_str(&text);
    assert_eq!(detect(long.as_bytes()).unwrap(), Format::ClaudeCode);
    let (_, conversation) = read(long.as_bytes(), None).unwrap();
    assert_eq!(conversation.messages.len(), 8);
    // Without it, nothing tells such lines from any JSONL.
    let anonymous = long.replace("\"sessionId\"", "\"session\"");
    let first_message = anonymous.find("\"type\":\"user\"").unwrap();
    assert!(first_message > 100 * first.len());
    assert!(detect(anonymous.as_bytes()).is_err());
}

#[test]
fn claude_codes_own_summary_is_a_harness_compaction_and_condenses_is_not() {
    use condense_formats::{HarnessCompaction, harness_compaction};
    let text = String::from_utf8(log()).unwrap();
    // Claude Code's summary after it compacted on its own: a user line of its own, flagged,
    // after the lines it summarizes (which stay in the log).
    let prompt = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["type"] == "user")
        .unwrap();
    let mut summary_line = prompt.clone();
    summary_line["uuid"] = "11111111-2222-4333-8444-555555555555".into();
    summary_line["message"]["content"] =
        "This session is being continued from a previous conversation.".into();
    summary_line["isCompactSummary"] = Value::Bool(true);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.push(summary_line.to_string());
    let (_, conversation) = read((lines.join("\n") + "\n").as_bytes(), None).unwrap();
    let marked: Vec<usize> = conversation
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| harness_compaction(m) == Some(HarnessCompaction::Summary))
        .map(|(index, _)| index)
        .collect();
    assert_eq!(marked.len(), 1);
    assert!(marked[0] > 0);
    // condense's summary carries the same flag (Claude Code resumes from it), but what it
    // replaced is gone from the file: nothing a replay could send instead.
    let mut summary = Message::text(
        Role::User,
        format!("{}\nthe task so far", condense_core::SUMMARY_OPEN),
    );
    summary.wire = conversation.messages[marked[0]].wire.clone();
    assert!(summary.is_compaction_summary());
    assert_eq!(harness_compaction(&summary), None);
}
