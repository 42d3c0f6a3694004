//! A log that Claude Code 2.1.197 wrote (tests/data/README.md): what today's Claude Code puts
//! in a session log, beside the older logs of ../shared/transcripts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::{Message, Role};
use condense_formats::{Format, detect, read, write};
use serde_json::Value;

/// A log of `tests/data` (its README says where each came from).
fn data(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name),
    )
    .unwrap()
}

fn log() -> Vec<u8> {
    data("claude-code-2.1.197.jsonl")
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

fn compacted_log() -> Vec<u8> {
    data("claude-code-2.1.197-compacted.jsonl")
}

#[test]
fn after_claude_code_compacted_a_log_its_history_starts_at_the_boundary() {
    let bytes = compacted_log();
    let (format, conversation) = read(&bytes, None).unwrap();
    assert_eq!(format, Format::ClaudeCode);
    // What Claude Code sent after its `/compact` (what it resumes from the boundary on): its
    // summary, the command's lines, its "continue" note and its own reply to it, the new
    // prompt and the answer. The three commands before are beside, not in the history.
    let texts: Vec<String> = conversation
        .messages
        .iter()
        .map(|m| m.plain_text().chars().take(30).collect())
        .collect();
    assert_eq!(texts.len(), 8, "{texts:?}");
    assert!(texts[0].starts_with("This session is being continu"));
    assert_eq!(texts[6], "and now?");
    assert!(
        !conversation
            .messages
            .iter()
            .any(|m| m.parts.iter().any(|p| p.as_tool_result().is_some()))
    );
    assert!(conversation.validate().is_empty());
    // Claude Code's summary carries the task, and a person typed `/compact`: both are turns.
    assert_eq!(conversation.user_turns(), [0, 2, 6]);
    // Written back as the same bytes, the lines before the boundary among them.
    assert_eq!(write(Format::ClaudeCode, &conversation).unwrap(), bytes);
}

#[test]
fn a_log_read_whole_keeps_what_came_before_claude_codes_compaction() {
    use condense_formats::{HarnessCompaction, harness_compaction, read_whole};
    let bytes = compacted_log();
    let (_, now) = read(&bytes, None).unwrap();
    let whole = read_whole(&bytes, Format::ClaudeCode).unwrap();
    // The prompt, three calls with their results, the answer; then what the model sees now.
    assert_eq!(whole.messages.len(), 8 + now.messages.len());
    assert_eq!(
        whole.messages[0].plain_text(),
        "count to a few thousand, three times"
    );
    let marks: Vec<Option<HarnessCompaction>> =
        whole.messages.iter().map(harness_compaction).collect();
    assert_eq!(marks[8], Some(HarnessCompaction::Summary));
    assert_eq!(marks.iter().filter(|mark| mark.is_some()).count(), 1);
    // Read as the model sees it, the summary is where the history starts: nothing to leave out.
    assert!(now.messages.iter().all(|m| harness_compaction(m).is_none()));
    assert!(whole.validate().is_empty());
    // Every usage Claude Code logged, before the boundary too (its own reply after the
    // command is Claude Code's words, with no usage).
    assert_eq!(condense_formats::logged_usage(&whole).len(), 5);
    assert_eq!(condense_formats::logged_usage(&now).len(), 1);
}

#[test]
fn condenses_summary_is_no_harness_compaction() {
    use condense_formats::{harness_compaction, read_whole};
    // condense flags its summary as Claude Code flags its own (Claude Code resumes from such
    // a line), but what it replaced is gone from the file: nothing a replay could send instead.
    let bytes = compacted_log();
    let (_, mut conversation) = read(&bytes, None).unwrap();
    let summary = Message::text(
        Role::User,
        format!("{}\nthe task so far", condense_core::SUMMARY_OPEN),
    );
    conversation.messages.splice(1..4, [summary]);
    let written = write(Format::ClaudeCode, &conversation).unwrap();
    let text = String::from_utf8(written.clone()).unwrap();
    assert_eq!(text.matches(r#""isCompactSummary":true"#).count(), 2);
    let whole = read_whole(&written, Format::ClaudeCode).unwrap();
    let flagged: Vec<String> = whole
        .messages
        .iter()
        .filter(|m| harness_compaction(m).is_some())
        .map(|m| m.plain_text().chars().take(20).collect())
        .collect();
    assert_eq!(flagged, ["This session is bein"]);
}

/// After a rewind, the person's new message hangs below an earlier line: Claude Code resumes
/// along the chain from the last line, so the branch they left is not part of the history. It
/// stays in the log, beside, and is written back where it was.
#[test]
fn a_branch_the_person_left_is_beside_the_history() {
    let line = |uuid: &str, parent: Option<&str>, role: &str, text: &str| {
        serde_json::json!({"parentUuid": parent, "isSidechain": false, "type": role,
            "message": {"role": role, "content": text}, "uuid": uuid,
            "timestamp": "2026-11-23T10:00:00.000Z", "sessionId": "s"})
        .to_string()
    };
    let log = [
        line("u1", None, "user", "fix the parser"),
        line("a1", Some("u1"), "assistant", "which one?"),
        line("u2", Some("a1"), "user", "the TOML one"),
        line("a2", Some("u2"), "assistant", "done with TOML"),
        // Rewound to `a1` and asked again.
        line("u3", Some("a1"), "user", "the JSON one"),
        line("a3", Some("u3"), "assistant", "done with JSON"),
    ]
    .join("\n")
        + "\n";
    let (_, conversation) = read(log.as_bytes(), Some(Format::ClaudeCode)).unwrap();
    let texts: Vec<String> = conversation
        .messages
        .iter()
        .map(Message::plain_text)
        .collect();
    assert_eq!(
        texts,
        [
            "fix the parser",
            "which one?",
            "the JSON one",
            "done with JSON"
        ]
    );
    assert_eq!(conversation.side.len(), 2);
    assert_eq!(
        write(Format::ClaudeCode, &conversation).unwrap(),
        log.as_bytes()
    );
    // Read whole (for a replay), the branch left is beside too: the requests that made the
    // session are those along the branch taken.
    let whole = condense_formats::read_whole(log.as_bytes(), Format::ClaudeCode).unwrap();
    assert_eq!(whole.messages, conversation.messages);
}

/// A line kept beside the messages that hangs below a message a summary replaced (an
/// attachment Claude Code chained between two messages) is hung below the last line linked when
/// written: left pointing at a line that is gone, it would end Claude Code's walk back from the
/// last message there, short of the summary.
#[test]
fn a_line_beside_that_hung_below_a_replaced_message_hangs_below_the_summary() {
    let log = [
        r#"{"parentUuid":null,"type":"user","message":{"role":"user","content":"task"},"uuid":"u1","sessionId":"s"}"#,
        r#"{"parentUuid":"u1","type":"assistant","message":{"role":"assistant","content":"step"},"uuid":"a1","sessionId":"s"}"#,
        r#"{"parentUuid":"a1","type":"attachment","attachment":{"type":"todo_reminder"},"uuid":"att","sessionId":"s"}"#,
        r#"{"parentUuid":"att","type":"user","message":{"role":"user","content":"next"},"uuid":"u2","sessionId":"s"}"#,
    ]
    .join("\n")
        + "\n";
    let (_, mut conversation) = read(log.as_bytes(), Some(Format::ClaudeCode)).unwrap();
    assert_eq!(conversation.messages.len(), 3);
    // What a compaction leaves: the summary in place of the first two messages, the attachment
    // just before the tail.
    let summary = Message::text(
        Role::User,
        format!("{}\nthe task so far", condense_core::SUMMARY_OPEN),
    );
    conversation.messages.splice(0..2, [summary]);
    conversation.side[0].before_message = 1;
    let written = String::from_utf8(write(Format::ClaudeCode, &conversation).unwrap()).unwrap();
    let lines: Vec<Value> = written
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1]["uuid"], "att");
    assert_eq!(lines[1]["parentUuid"], lines[0]["uuid"]);
    assert_eq!(lines[2]["parentUuid"], "att");
    // An untouched log's lines beside are written as they came.
    let (_, untouched) = read(log.as_bytes(), Some(Format::ClaudeCode)).unwrap();
    assert_eq!(
        write(Format::ClaudeCode, &untouched).unwrap(),
        log.as_bytes()
    );
}

/// A line of a Claude Code log below `parent` saying `content`; an assistant's is reply `id`
/// and carries usage: `input` uncached tokens, 1,000 read, 100 written, 7 output.
fn chained(
    uuid: &str,
    parent: Option<&str>,
    role: &str,
    sidechain: bool,
    content: &str,
    id: &str,
    input: u64,
) -> String {
    let mut message = serde_json::json!({"role": role, "content": content});
    if role == "assistant" {
        message["id"] = id.into();
        message["usage"] = serde_json::json!({"input_tokens": input,
            "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000,
            "output_tokens": 7});
    }
    serde_json::json!({"parentUuid": parent, "isSidechain": sidechain, "type": role,
        "message": message, "uuid": uuid,
        "timestamp": "2026-11-23T10:00:00.000Z", "sessionId": "s"})
    .to_string()
}

/// The requests a log accounts for beside its main thread: a subagent's replies and those on a
/// branch the person left, one per reply (its lines carry the usage each; the last counts),
/// and none of the main thread's.
#[test]
fn the_usage_beside_the_main_thread_is_a_subagents_or_a_left_branchs() {
    let line =
        |uuid: &str, parent: Option<&str>, role: &str, sidechain: bool, id: &str, input: u64| {
            chained(uuid, parent, role, sidechain, uuid, id, input)
        };
    let log = [
        line("u1", None, "user", false, "", 0),
        line("a1", Some("u1"), "assistant", false, "msg_main_1", 3),
        // A subagent's run: its task, then one reply over two lines.
        line("t1", None, "user", true, "", 0),
        line("s1", Some("t1"), "assistant", true, "msg_sub", 1),
        line("s2", Some("s1"), "assistant", true, "msg_sub", 2),
        line("u2", Some("a1"), "user", false, "", 0),
        line("a2", Some("u2"), "assistant", false, "msg_left", 4),
        // Rewound to `a1` and asked again.
        line("u3", Some("a1"), "user", false, "", 0),
        line("a3", Some("u3"), "assistant", false, "msg_main_2", 5),
    ]
    .join("\n")
        + "\n";
    let whole = condense_formats::read_whole(log.as_bytes(), Format::ClaudeCode).unwrap();
    let beside = condense_formats::side_usage(&whole);
    let found: Vec<(condense_formats::SideThread, u64, u64, u64)> = beside
        .iter()
        .map(|(thread, usage)| (*thread, usage.uncached(), usage.cache_read, usage.output))
        .collect();
    assert_eq!(
        found,
        [
            (condense_formats::SideThread::Subagent, 2, 1000, 7),
            (condense_formats::SideThread::LeftBranch, 4, 1000, 7),
        ]
    );
    // The main thread's replies are the conversation's own usage.
    let main: Vec<u64> = condense_formats::logged_usage(&whole)
        .iter()
        .map(condense_formats::LoggedUsage::uncached)
        .collect();
    assert_eq!(main, [3, 5]);
}

/// One reply whose calls' results Claude Code 2 wrote between its lines (each call on a line of
/// its own, its result right after it, one `message.id`, the usage on each line and the last
/// line's complete) is read as the messages the lines make, written back as the same bytes,
/// and accounted for once: from its first message to its last, with its last line's usage.
/// Counted per message, the one request would be two, and a replay would bill its input twice.
#[test]
fn a_reply_whose_results_came_between_its_lines_is_one_request() {
    let log = data("claude-code-2.1-parallel-reads.jsonl");
    let (_, conversation) = read(&log, Some(Format::ClaudeCode)).unwrap();
    let roles: Vec<Role> = conversation.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant].repeat(3));
    let ids: Vec<Option<&str>> = conversation
        .messages
        .iter()
        .map(condense_formats::reply_id)
        .collect();
    assert_eq!(
        ids,
        [
            None,
            Some("msg_r"),
            None,
            Some("msg_r"),
            None,
            Some("msg_s")
        ]
    );
    assert_eq!(write(Format::ClaudeCode, &conversation).unwrap(), log);
    let usage: Vec<(usize, usize, u64)> = condense_formats::logged_usage(&conversation)
        .iter()
        .map(|usage| (usage.first, usage.answer, usage.output))
        .collect();
    assert_eq!(usage, [(1, 3, 40), (5, 5, 5)]);
}

fn subagent_log() -> Vec<u8> {
    data("claude-code-2.1.197-subagent.jsonl")
}

/// Claude Code 2 writes each subagent's conversation to a log of its own, every line a
/// sidechain's: that thread is the conversation (its task, its calls and outputs, its answer,
/// its requests' usage), written back as the same bytes, and a line condense makes in it is a
/// sidechain line of the same agent, so that Claude Code reads it as part of that thread.
#[test]
fn a_subagents_own_log_is_its_conversation() {
    let bytes = subagent_log();
    let (format, conversation) = read(&bytes, None).unwrap();
    assert_eq!(format, Format::ClaudeCode);
    let roles: Vec<Role> = conversation.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant
        ]
    );
    assert_eq!(
        conversation.messages[0].plain_text(),
        "Run seq 1 30 and report the last number."
    );
    assert!(conversation.validate().is_empty());
    assert_eq!(write(Format::ClaudeCode, &conversation).unwrap(), bytes);
    let whole = condense_formats::read_whole(&bytes, Format::ClaudeCode).unwrap();
    assert_eq!(condense_formats::logged_usage(&whole).len(), 3);
    assert!(condense_formats::side_usage(&whole).is_empty());

    let mut compacted = conversation.clone();
    let last = compacted.messages.pop().unwrap();
    compacted.messages = vec![
        Message::text(Role::User, "<prior-conversation-summary>\nsummary"),
        last,
    ];
    let written = String::from_utf8(write(Format::ClaudeCode, &compacted).unwrap()).unwrap();
    for line in written.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        assert_eq!(line["isSidechain"], true, "{line}");
        assert_eq!(line["agentId"], "a31bf5bd29a79d555", "{line}");
    }
    let (_, again) = read(written.as_bytes(), None).unwrap();
    assert_eq!(again.messages.len(), 2);
}

/// Older logs keep each subagent's lines inline, two subagents run at once interleaved: each
/// thread (a sidechain root and the lines chained below it) reads as the conversation of a log
/// of its own, and a broken line in one is named by its line in the session's log.
#[test]
fn the_subagents_a_log_keeps_inline_are_conversations_of_their_own() {
    let line = |uuid: &str, parent: Option<&str>, role: &str, sidechain: bool, text: &str| {
        chained(
            uuid,
            parent,
            role,
            sidechain,
            text,
            &format!("msg_{uuid}"),
            10,
        )
    };
    let mut lines = vec![
        line("u1", None, "user", false, "look at both crates"),
        line("a1", Some("u1"), "assistant", false, "starting two agents"),
        line("x1", None, "user", true, "read crate x"),
        line("y1", None, "user", true, "read crate y"),
        line("x2", Some("x1"), "assistant", true, "x is small"),
        line("y2", Some("y1"), "assistant", true, "y is large"),
        line("y3", Some("y2"), "user", true, "go on"),
        line("y4", Some("y3"), "assistant", true, "y is done"),
        line("u2", Some("a1"), "user", false, "thanks"),
    ];
    let log = lines.join("\n") + "\n";
    let found = condense_formats::subagents(log.as_bytes(), Format::ClaudeCode).unwrap();
    let threads: Vec<(&str, Vec<String>)> = found
        .iter()
        .map(|subagent| {
            assert!(subagent.conversation.validate().is_empty());
            (
                subagent.name.as_str(),
                subagent
                    .conversation
                    .messages
                    .iter()
                    .map(condense_core::Message::plain_text)
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        threads,
        [
            (
                "sidechain from line 3",
                vec!["read crate x".to_owned(), "x is small".to_owned()]
            ),
            (
                "sidechain from line 4",
                vec![
                    "read crate y".to_owned(),
                    "y is large".to_owned(),
                    "go on".to_owned(),
                    "y is done".to_owned()
                ]
            ),
        ]
    );
    assert_eq!(
        condense_formats::logged_usage(&found[1].conversation).len(),
        2
    );
    // The main thread's reading is not changed by them, and has no subagents of other formats.
    let (_, main) = read(log.as_bytes(), None).unwrap();
    assert_eq!(main.messages.len(), 3);
    assert!(
        condense_formats::subagents(&subagent_log(), Format::ClaudeCode)
            .unwrap()
            .is_empty()
    );

    lines[6] = line("y3", Some("y2"), "user", true, "go on")
        .replace("\"role\":\"user\"", "\"role\":\"robot\"");
    let broken = lines.join("\n") + "\n";
    let error = condense_formats::subagents(broken.as_bytes(), Format::ClaudeCode).unwrap_err();
    assert_eq!(error.to_string(), "line 7: unknown role `robot`");
}

/// Claude Code 1.0 leaves no boundary when it compacts on its own: its summary is a user line
/// flagged `isCompactSummary` that starts a new root (`parentUuid: null`). As the model sees it
/// the history starts there; read whole, it goes on through that root to the chain before it
/// (the replay sees the whole session), the summary marked as the harness's compaction.
#[test]
fn a_claude_code_1_0_summary_root_is_a_compaction_not_a_branch_left() {
    use condense_formats::{HarnessCompaction, harness_compaction, read_whole};
    let mut summary: serde_json::Value = serde_json::from_str(&chained(
        "s1",
        None,
        "user",
        false,
        "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below: counted twice.",
        "",
        0,
    ))
    .unwrap();
    summary["isCompactSummary"] = true.into();
    let lines = [
        chained("u1", None, "user", false, "count to a thousand", "", 0),
        chained("a1", Some("u1"), "assistant", false, "1, 2, 3", "r1", 10),
        chained("u2", Some("a1"), "user", false, "again", "", 0),
        chained(
            "a2",
            Some("u2"),
            "assistant",
            false,
            "1, 2, 3 again",
            "r2",
            20,
        ),
        summary.to_string(),
        chained("u3", Some("s1"), "user", false, "and now?", "", 0),
        chained("a3", Some("u3"), "assistant", false, "done", "r3", 30),
    ];
    let bytes = (lines.join("\n") + "\n").into_bytes();
    let (_, now) = read(&bytes, None).unwrap();
    let texts: Vec<String> = now.messages.iter().map(|m| m.plain_text()).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts[0].starts_with("This session is being continued"));
    let whole = read_whole(&bytes, Format::ClaudeCode).unwrap();
    assert_eq!(
        whole.messages.len(),
        7,
        "the whole session, not the last branch"
    );
    assert_eq!(whole.messages[0].plain_text(), "count to a thousand");
    let marks: Vec<Option<HarnessCompaction>> =
        whole.messages.iter().map(harness_compaction).collect();
    assert_eq!(marks[4], Some(HarnessCompaction::Summary));
    assert_eq!(condense_formats::logged_usage(&whole).len(), 3);
    // Written back as it came.
    assert_eq!(write(Format::ClaudeCode, &now).unwrap(), bytes);
}

/// A log of one line is also one JSON document (a session that stopped at its first message,
/// or one cut short): it is read as the log its line belongs to, and written back the same.
#[test]
fn a_log_of_one_line_is_read_as_a_log() {
    let bytes = log();
    let first_message = bytes
        .split(|&b| b == b'\n')
        .find(|line| {
            serde_json::from_slice::<Value>(line).is_ok_and(|value| value["type"] == "user")
        })
        .unwrap();
    let mut one = first_message.to_vec();
    one.push(b'\n');
    let (format, conversation) = read(&one, None).unwrap();
    assert_eq!(format, Format::ClaudeCode);
    assert_eq!(conversation.messages.len(), 1);
    assert_eq!(conversation.messages[0].role, Role::User);
    assert_eq!(write(Format::ClaudeCode, &conversation).unwrap(), one);
}
