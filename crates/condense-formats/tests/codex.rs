//! Codex CLI's session logs, on one that Codex 0.169.0 wrote (tests/data/README.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::{Compacted, Part, Phase, Role, ToolOutput};
use condense_formats::{Format, FormatError, detect, read, write};
use serde_json::Value;

fn log() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/codex-0.169.0.jsonl"
    ))
    .unwrap()
}

#[test]
fn a_codex_log_is_read_and_written_back_as_the_same_bytes() {
    let bytes = log();
    assert_eq!(detect(&bytes).unwrap(), Format::Codex);
    let (format, conversation) = read(&bytes, None).unwrap();
    assert_eq!(format, Format::Codex);
    let lines = bytes.iter().filter(|&&byte| byte == b'\n').count();
    // Each `response_item` line is a message; every other line is kept beside them.
    assert_eq!(conversation.messages.len(), 18);
    assert_eq!(conversation.messages.len() + conversation.side.len(), lines);
    assert_eq!(write(Format::Codex, &conversation).unwrap(), bytes);
}

#[test]
fn a_codex_logs_items_are_the_models_history() {
    let (_, conversation) = read(&log(), None).unwrap();
    assert!(
        conversation.validate().is_empty(),
        "{:?}",
        conversation.validate()
    );
    let roles: Vec<Role> = conversation.messages.iter().map(|m| m.role).collect();
    use Role::{Assistant as A, System as S, Tool as T, User as U};
    assert_eq!(
        roles,
        [S, U, U, A, A, T, A, T, A, T, A, U, A, A, T, A, T, A]
    );
    // Codex's environment block is in the user's role, but no person wrote it: the two
    // prompts are the session's two user turns.
    assert!(conversation.messages[1].generated);
    assert_eq!(conversation.user_turns(), [2, 11]);
    // A reasoning item, encrypted content and all, is kept as the model made it.
    let Part::Opaque { value } = &conversation.messages[3].parts[0] else {
        panic!("{:?}", conversation.messages[3].parts)
    };
    assert_eq!(value["type"], "reasoning");
    assert!(
        value["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("gAAAAB")
    );
    // The commands Codex ran, in order.
    let commands: Vec<String> = conversation
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|part| match part {
            Part::ToolCall(call) => Some(call.input["cmd"].as_str().unwrap().to_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(
        commands,
        [
            "cat notes.txt",
            "sed -i 's/teh/the/g' notes.txt",
            "cat notes.txt",
            "seq 1 400 > big.txt && cat big.txt",
            "wc -l notes.txt big.txt"
        ]
    );
    // Each line's time is its message's (line 12: the first call).
    assert_eq!(
        conversation.messages[4].timestamp_ms(),
        Some(condense_core::time::parse_rfc3339("2026-11-23T19:32:46.955Z").unwrap())
    );
}

#[test]
fn a_replaced_output_is_gone_from_every_copy_in_the_log() {
    let bytes = log();
    let (_, mut conversation) = read(&bytes, None).unwrap();
    let original = String::from_utf8(bytes).unwrap();
    // The output of `seq 1 400 > big.txt && cat big.txt`.
    let Part::ToolResult(result) = &mut conversation.messages[14].parts[0] else {
        panic!("{:?}", conversation.messages[14].parts)
    };
    let output = result.content.text().into_owned();
    assert!(output.contains("\n399\n400"), "{output}");
    let copies = original.matches("399\\n400").count();
    assert_eq!(copies, 2, "the output and Codex's display copy of it");
    result.content = ToolOutput::Text("[pruned: condense recall 00ff]".into());
    result.compacted = Some(Compacted {
        at_ms: 0,
        phase: Phase::Prune,
        original_tokens: 838,
        original_chars: output.chars().count(),
        handle: "00ff".into(),
    });

    let written = String::from_utf8(write(Format::Codex, &conversation).unwrap()).unwrap();
    assert!(
        !written.contains("399\\n400"),
        "a copy of the output is left"
    );
    assert_eq!(written.matches("[pruned: condense recall 00ff]").count(), 2);
    // Only those two lines changed; the log reads back with the placeholder.
    let changed = original
        .lines()
        .zip(written.lines())
        .filter(|(before, after)| before != after)
        .count();
    assert_eq!(changed, 2);
    assert_eq!(original.lines().count(), written.lines().count());
    let (_, reread) = read(written.as_bytes(), Some(Format::Codex)).unwrap();
    let Part::ToolResult(result) = &reread.messages[14].parts[0] else {
        panic!()
    };
    assert_eq!(result.content.text(), "[pruned: condense recall 00ff]");
}

#[test]
fn a_message_condense_makes_is_written_as_codex_keeps_one() {
    let (_, mut conversation) = read(&log(), None).unwrap();
    // A summary in place of the first turn, as compaction leaves it.
    conversation.messages.drain(1..11);
    conversation.messages.insert(
        1,
        condense_core::Message::text(Role::System, "<prior-conversation-summary>\nsummary"),
    );
    let written = String::from_utf8(write(Format::Codex, &conversation).unwrap()).unwrap();
    let line: Value = written
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line.to_string().contains("prior-conversation-summary"))
        .unwrap();
    // Codex drops `system` messages and string content when it resumes a session.
    assert_eq!(line["type"], "response_item");
    assert_eq!(line["payload"]["type"], "message");
    assert_eq!(line["payload"]["role"], "developer");
    assert_eq!(line["payload"]["content"][0]["type"], "input_text");
    assert!(line["timestamp"].is_string(), "{line}");
    let (_, reread) = read(written.as_bytes(), None).unwrap();
    assert!(reread.messages[1].is_compaction_summary());
    assert!(reread.validate().is_empty());
}

#[test]
fn a_log_codex_compacted_itself_is_refused_at_its_line() {
    let mut bytes = log();
    bytes.extend_from_slice(
        br#"{"timestamp":"2026-11-23T19:40:00.000Z","type":"compacted","payload":{"message":"summary","replacement_history":[]}}"#,
    );
    bytes.push(b'\n');
    let error = read(&bytes, None).unwrap_err();
    assert!(matches!(error, FormatError::Malformed { .. }), "{error}");
    assert!(
        error.to_string().starts_with("line 54: Codex compacted"),
        "{error}"
    );
}

#[test]
fn a_bad_item_is_reported_at_its_line() {
    let text = String::from_utf8(log()).unwrap();
    let broken = text.replacen(r#""call_id":"call_0","output""#, r#""output""#, 1);
    assert_ne!(broken, text);
    let error = read(broken.as_bytes(), None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "line 15: an output item has no `call_id`"
    );
}
