//! Inputs the fuzzers (fuzz/, FUZZING.md) found, cut down by hand, each kept as a regular test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_formats::{Format, read, write};

/// read -> write -> read keeps every part, and writing again changes nothing.
fn round_trips(bytes: &[u8], format: Format) {
    let (_, first) = read(bytes, Some(format)).unwrap();
    let written = write(format, &first).unwrap();
    let (_, second) = read(&written, Some(format)).unwrap();
    let parts = |c: &condense_core::Conversation| -> Vec<_> {
        c.messages
            .iter()
            .map(|m| (m.role, m.parts.clone()))
            .collect()
    };
    assert_eq!(parts(&second), parts(&first));
    assert_eq!(write(format, &second).unwrap(), written);
}

/// `tool_calls` on a `tool` message (the fuzzer spliced one in) was read as calls the writer
/// then dropped: only an assistant's `tool_calls` are calls; elsewhere the field is kept as it
/// came.
#[test]
fn tool_calls_on_a_tool_message_are_kept_not_dropped() {
    let body = br#"[
      {"role": "user", "content": "go"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "a", "content": "x", "tool_calls": [{"id": "b", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]}
    ]"#;
    round_trips(body, Format::OpenAi);
    let (_, conversation) = read(body, Some(Format::OpenAi)).unwrap();
    let written = write(Format::OpenAi, &conversation).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&written).unwrap();
    assert_eq!(value[2]["tool_calls"][0]["id"], "b", "the field survives");
    assert_eq!(conversation.messages[2].parts.len(), 1, "it is not a call");
}

/// A Claude Code line whose `parentUuid` names no line (the fuzzer changed one uuid) is linked
/// to the line before it when written, as after compaction; the parts are untouched and the
/// written form is a fixed point.
#[test]
fn a_broken_parent_chain_is_relinked_once_and_nothing_else_changes() {
    let lines = concat!(
        r#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"hi"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a1","parentUuid":"no-such-line","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"hello"}]}}"#,
        "\n"
    );
    round_trips(lines.as_bytes(), Format::ClaudeCode);
    let (_, conversation) = read(lines.as_bytes(), None).unwrap();
    let written = String::from_utf8(write(Format::ClaudeCode, &conversation).unwrap()).unwrap();
    assert!(written.contains(r#""parentUuid":"u1""#), "{written}");
}

/// A line without a `uuid` gets one when written, after its other keys. The writer used to move
/// `message` to the end of every line, so the second write put it after that new uuid and the
/// bytes changed again; `message` (and its `content`) now keep their place.
#[test]
fn a_line_without_a_uuid_is_written_the_same_way_twice() {
    let lines = concat!(
        r#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"hi"}}"#,
        "\n",
        r#"{"parentUuid":"u1","type":"user","message":{"role":"user","content":"again"},"timestamp":"2025-07-21T18:41:25.853Z"}"#,
        "\n"
    );
    round_trips(lines.as_bytes(), Format::ClaudeCode);
    let (_, conversation) = read(lines.as_bytes(), None).unwrap();
    let written = String::from_utf8(write(Format::ClaudeCode, &conversation).unwrap()).unwrap();
    let first = written.lines().next().unwrap();
    assert_eq!(
        first,
        r#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"hi"}}"#,
        "an untouched line keeps its key order"
    );
}

/// An Anthropic `system` prompt that opens with the summary marker (the fuzzer cut a compacted
/// session down to it) was written back as the first user message: the writer took it for a
/// summary condense made. Only a summary condense made (no wire record) leaves `system`.
#[test]
fn a_system_prompt_that_opens_like_a_summary_stays_the_system_prompt() {
    let body = br#"{"system": "<prior-conversation-summary>n.", "messages": [{"role": "user", "content": "hi"}]}"#;
    round_trips(body, Format::Anthropic);
    let (_, conversation) = read(body, Some(Format::Anthropic)).unwrap();
    let written = write(Format::Anthropic, &conversation).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&written).unwrap();
    assert_eq!(value["system"], "<prior-conversation-summary>n.");
    assert_eq!(value["messages"].as_array().unwrap().len(), 1);

    // A summary condense makes still goes out as the first user message.
    let mut compacted = conversation.clone();
    compacted.messages[0] = condense_core::Message::text(
        condense_core::Role::System,
        "<prior-conversation-summary>\nx\n</prior-conversation-summary>",
    );
    let value: serde_json::Value =
        serde_json::from_slice(&write(Format::Anthropic, &compacted).unwrap()).unwrap();
    assert!(value.get("system").is_none(), "{value}");
    assert_eq!(value["messages"][0]["role"], "user");
}

/// Claude Code lines without a `uuid` (the fuzzer renamed the key) get one when written, and
/// hang below the line before; the line after them used to keep its parent, so the written
/// log forked there, and read again (along the chain Claude Code resumes) it lost the line
/// without a uuid. A line that came below the parent a made line was given now comes below the
/// made line (read run 17).
#[test]
fn a_line_given_a_uuid_on_writing_does_not_fork_the_chain() {
    let lines = concat!(
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"one"},"uuid":"a"}"#,
        "\n",
        r#"{"parentUuid":"no-such-line","type":"user","message":{"role":"user","content":"two"}}"#,
        "\n",
        r#"{"parentUuid":"a","type":"user","message":{"role":"user","content":"three"},"uuid":"c"}"#,
        "\n",
        r#"{"parentUuid":"gone","type":"user","message":{"role":"user","content":"four"}}"#,
        "\n"
    );
    round_trips(lines.as_bytes(), Format::ClaudeCode);
    let (_, first) = read(lines.as_bytes(), None).unwrap();
    assert_eq!(first.messages.len(), 4);
}

/// A last line without a `uuid` (the fuzzer renamed the key) still names its parent: the chain
/// back from it is the one Claude Code resumes, with a branch beside it. The reader used to
/// distrust the whole chain for want of that uuid and read every line, while the written log,
/// where the line has one, was read along its chain (read run 18).
#[test]
fn a_last_line_without_a_uuid_is_walked_back_from_its_parent() {
    let lines = concat!(
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"one"},"uuid":"a"}"#,
        "\n",
        r#"{"parentUuid":"a","type":"user","message":{"role":"user","content":"left"},"uuid":"b"}"#,
        "\n",
        r#"{"parentUuid":"a","type":"user","message":{"role":"user","content":"taken"},"uuid":"c"}"#,
        "\n",
        r#"{"parentUuid":"c","type":"user","message":{"role":"user","content":"last"}}"#,
        "\n"
    );
    round_trips(lines.as_bytes(), Format::ClaudeCode);
    let (_, first) = read(lines.as_bytes(), None).unwrap();
    let texts: Vec<String> = first.messages.iter().map(|m| m.plain_text()).collect();
    assert_eq!(texts, ["one", "taken", "last"]);
}

/// Two lines with one `uuid` (the fuzzer copied a line): which of them a child hangs below
/// cannot be told, so the chain is not trusted and every line counts, before writing and
/// after (read run 19).
#[test]
fn two_lines_with_one_uuid_leave_every_line_in_the_history() {
    let lines = concat!(
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"one"},"uuid":"a"}"#,
        "\n",
        r#"{"parentUuid":"gone","type":"user","message":{"role":"user","content":"two"},"uuid":"b"}"#,
        "\n",
        r#"{"parentUuid":"x","type":"user","message":{"role":"user","content":"three"}}"#,
        "\n",
        r#"{"parentUuid":"a","type":"user","message":{"role":"user","content":"four"},"uuid":"b"}"#,
        "\n",
        r#"{"parentUuid":"x","type":"user","message":{"role":"user","content":"five"}}"#,
        "\n"
    );
    round_trips(lines.as_bytes(), Format::ClaudeCode);
    let (_, first) = read(lines.as_bytes(), None).unwrap();
    assert_eq!(first.messages.len(), 5);
}

/// A broken chain (the last line's parent is missing) is not trusted: every line is history.
/// Writing repairs it (that line hangs below the line before), and the repaired chain, read
/// again, leaves the branch the log always had (two replies to one line) beside the history,
/// still in the file. The fuzzer's property allows this one change (read run 19).
#[test]
fn a_repaired_chain_leaves_the_branch_it_reveals_in_the_log() {
    let lines = concat!(
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"one"},"uuid":"a"}"#,
        "\n",
        r#"{"parentUuid":"a","type":"assistant","message":{"role":"assistant","content":"left"},"uuid":"b"}"#,
        "\n",
        r#"{"parentUuid":"a","type":"assistant","message":{"role":"assistant","content":"taken"},"uuid":"c"}"#,
        "\n",
        r#"{"parentUuid":"gone","type":"user","message":{"role":"user","content":"last"},"uuid":"d"}"#,
        "\n"
    );
    let (_, first) = read(lines.as_bytes(), None).unwrap();
    assert_eq!(first.messages.len(), 4);
    let written = write(Format::ClaudeCode, &first).unwrap();
    let (_, again) = read(&written, None).unwrap();
    let texts: Vec<String> = again.messages.iter().map(|m| m.plain_text()).collect();
    assert_eq!(texts, ["one", "taken", "last"]);
    assert!(
        String::from_utf8(written.clone())
            .unwrap()
            .contains(r#""content":"left""#)
    );
    assert_eq!(write(Format::ClaudeCode, &again).unwrap(), written);
}

/// Two lines of one reply (one `message.id`) that both hang below one line, read as one message
/// while the chain is broken (read run 21): after the repair, the first line is on a branch
/// left and the second on the branch taken, so the reply read again is the second line's part alone. No part is lost or
/// reordered (the second reading's parts come in the first's order) and the first line stays
/// in the log; the fuzzer's property compares parts, not messages, for this.
#[test]
fn a_repaired_chain_may_leave_part_of_a_reply_on_a_branch() {
    let lines = concat!(
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"one"},"uuid":"a"}"#,
        "\n",
        r#"{"parentUuid":"a","type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"aside"}]},"uuid":"b"}"#,
        "\n",
        r#"{"parentUuid":"a","type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"answer"}]},"uuid":"c"}"#,
        "\n",
        r#"{"parentUuid":"gone","type":"user","message":{"role":"user","content":"last"},"uuid":"d"}"#,
        "\n"
    );
    let (_, first) = read(lines.as_bytes(), None).unwrap();
    let texts = |c: &condense_core::Conversation| -> Vec<String> {
        c.messages.iter().map(|m| m.plain_text()).collect()
    };
    assert_eq!(texts(&first), ["one", "aside\nanswer", "last"]);
    let written = write(Format::ClaudeCode, &first).unwrap();
    let (_, again) = read(&written, None).unwrap();
    assert_eq!(texts(&again), ["one", "answer", "last"]);
    assert!(
        String::from_utf8(written.clone())
            .unwrap()
            .contains(r#""text":"aside""#)
    );
    assert_eq!(write(Format::ClaudeCode, &again).unwrap(), written);
}
