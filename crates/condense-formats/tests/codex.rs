//! Codex CLI's session logs, on one that Codex 0.169.0 wrote (tests/data/README.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::{Compacted, Part, Phase, Role, ToolOutput};
use condense_formats::{Format, detect, read, write};
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
fn the_usage_codex_logs_after_each_response_is_read_with_its_answer() {
    let (_, conversation) = read(&log(), None).unwrap();
    let usage = condense_formats::logged_usage(&conversation);
    // One per response: three calls and an answer, then two calls and an answer.
    let answers: Vec<usize> = usage.iter().map(|usage| usage.answer).collect();
    assert_eq!(answers, [4, 6, 8, 10, 13, 15, 17]);
    // Codex's own totals for the two runs (`turn.completed`).
    assert_eq!(usage.iter().map(|u| u.input).sum::<u64>(), 77_532);
    assert_eq!(usage.iter().map(|u| u.cache_read).sum::<u64>(), 65_152);
    assert_eq!(usage.iter().map(|u| u.output).sum::<u64>(), 280);
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
    // Codex drops `system` messages and string content when it resumes a session; the summary
    // is the user's, as Codex's own compaction leaves its own, not the instructions'.
    assert_eq!(line["type"], "response_item");
    assert_eq!(line["payload"]["type"], "message");
    assert_eq!(line["payload"]["role"], "user");
    assert_eq!(line["payload"]["content"][0]["type"], "input_text");
    assert!(line["timestamp"].is_string(), "{line}");
    let (_, reread) = read(written.as_bytes(), None).unwrap();
    assert!(reread.messages[1].is_compaction_summary());
    assert!(reread.validate().is_empty());
}

fn compacted_log() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/codex-0.169.0-compacted.jsonl"
    ))
    .unwrap()
}

/// The compacted log as an older Codex wrote it: before replacement histories, a `compacted`
/// line held only Codex's summary.
fn older_codex_log() -> Vec<u8> {
    let text = String::from_utf8(compacted_log()).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let mut value: Value = serde_json::from_str(line).unwrap();
            if value["type"] == "compacted" {
                let payload = value["payload"].as_object_mut().unwrap();
                payload.retain(|key, _| key == "message");
            }
            value.to_string()
        })
        .collect();
    (lines.join("\n") + "\n").into_bytes()
}

/// The `compacted` line of a written log.
fn compaction_in(bytes: &[u8]) -> Value {
    std::str::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["type"] == "compacted")
        .unwrap()
}

#[test]
fn after_codex_compacted_a_log_its_history_is_what_the_model_saw() {
    let bytes = compacted_log();
    let (format, conversation) = read(&bytes, None).unwrap();
    assert_eq!(format, Format::Codex);
    // The replacement history's four items, then the line after it and the second turn.
    let texts: Vec<String> = conversation.messages[..6]
        .iter()
        .map(|m| m.plain_text().chars().take(24).collect())
        .collect();
    assert_eq!(
        texts,
        [
            "<skills_instructions>\n##",
            "<environment_context>\n  ",
            "count",
            "Another language model s",
            "SUMMARY: counted with se",
            "count more"
        ]
    );
    assert_eq!(conversation.messages.len(), 13);
    assert!(conversation.validate().is_empty());
    // Codex's environment is no person's turn; its summary, which carries the task, is one.
    assert_eq!(conversation.user_turns(), [2, 3, 5]);
    // Before the compaction: 28 lines, kept beside, and written back as they came.
    assert_eq!(write(Format::Codex, &conversation).unwrap(), bytes);
}

#[test]
fn replacement_items_that_go_leave_the_compacted_line_with_their_metadata() {
    let bytes = compacted_log();
    let (_, mut conversation) = read(&bytes, None).unwrap();
    let before = compaction_in(&bytes);
    let history = before["payload"]["replacement_history"].as_array().unwrap();
    let metadata = before["payload"]["replacement_history_metadata"]
        .as_array()
        .unwrap();
    assert_eq!((history.len(), metadata.len()), (4, 4));
    // `count` and Codex's summary go (as a summary of condense's would take them).
    conversation.messages.remove(3);
    conversation.messages.remove(2);
    let written = write(Format::Codex, &conversation).unwrap();
    let after = compaction_in(&written);
    let kept = after["payload"]["replacement_history"].as_array().unwrap();
    assert_eq!(kept[..], [history[0].clone(), history[1].clone()]);
    assert_eq!(
        after["payload"]["replacement_history_metadata"]
            .as_array()
            .unwrap()[..],
        [metadata[0].clone(), metadata[1].clone()]
    );
    // Everything else in the line is as it was, and the log reads back without them.
    let mut rest = after.clone();
    let mut was = before.clone();
    for line in [&mut rest, &mut was] {
        line["payload"]["replacement_history"] = Value::Null;
        line["payload"]["replacement_history_metadata"] = Value::Null;
    }
    assert_eq!(rest, was);
    let (_, reread) = read(&written, None).unwrap();
    assert_eq!(reread.messages.len(), 11);
    assert_eq!(
        reread.messages[2].plain_text(),
        "SUMMARY: counted with seq several times."
    );
}

#[test]
fn an_older_codexs_compaction_is_read_as_its_summary() {
    let bytes = older_codex_log();
    let (_, conversation) = read(&bytes, None).unwrap();
    let first = &conversation.messages[0];
    assert_eq!(first.role, Role::User);
    assert!(
        first
            .plain_text()
            .starts_with("Another language model started")
    );
    assert_eq!(conversation.messages.len(), 10);
    assert_eq!(write(Format::Codex, &conversation).unwrap(), bytes);
}

#[test]
fn a_bad_item_is_reported_at_its_line() {
    let text = String::from_utf8(log()).unwrap();
    let broken = text.replacen(r#""call_id":"call_0","output""#, r#""output""#, 1);
    assert_ne!(broken, text);
    let error = read(broken.as_bytes(), None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "line 15: a function_call_output item has no `call_id`"
    );
}

#[test]
fn a_log_read_whole_keeps_what_came_before_codexs_compaction() {
    use condense_formats::{HarnessCompaction, harness_compaction, logged_usage, read_whole};
    let bytes = compacted_log();
    let (_, now) = read(&bytes, None).unwrap();
    let whole = read_whole(&bytes, Format::Codex).unwrap();
    let items = |text: &str| {
        text.lines()
            .filter(|line| line.contains(r#""type":"response_item""#))
            .count()
    };
    let before = std::str::from_utf8(&bytes)
        .unwrap()
        .split(r#""type":"compacted""#);
    let before = items(before.clone().next().unwrap());
    assert_eq!(before, 10);
    // Every item Codex logged before the compaction, then the history it replaced them with,
    // then what came after: what the model saw now is the end of the whole.
    assert_eq!(whole.messages.len(), before + now.messages.len());
    assert_eq!(
        whole.messages[before..],
        now.messages[..]
            .iter()
            .map(|m| {
                let mut m = m.clone();
                for record in &mut m.wire {
                    if record.fields.contains_key("condense_replacement_item") {
                        record
                            .fields
                            .insert("condense_restates".into(), Value::Bool(true));
                    }
                }
                m
            })
            .collect::<Vec<_>>()[..]
    );
    assert_eq!(whole.messages[2].plain_text(), "count");
    let marks: Vec<Option<HarnessCompaction>> =
        whole.messages.iter().map(harness_compaction).collect();
    // Codex's summarizer answered its compaction request with an item of the history.
    assert_eq!(
        whole.messages[before - 1].plain_text(),
        "SUMMARY: counted with seq several times."
    );
    assert_eq!(marks[before - 1], Some(HarnessCompaction::SummarizerAnswer));
    assert!(marks[..before - 1].iter().all(Option::is_none));
    assert_eq!(marks[before], Some(HarnessCompaction::Replacement));
    assert_eq!(
        marks[before + 1..before + 4],
        [Some(HarnessCompaction::ReplacementItem); 3]
    );
    assert!(marks[before + 4..].iter().all(Option::is_none));
    // Read as the model sees it, the replacement history is no restatement: nothing came
    // before it.
    assert!(now.messages.iter().all(|m| harness_compaction(m).is_none()));
    assert!(whole.validate().is_empty(), "{:?}", whole.validate());
    // The usage Codex logged before its compaction is read too, each with its own answer.
    let usage = logged_usage(&whole);
    assert_eq!(usage.len(), 9);
    assert_eq!(logged_usage(&now).len(), 5);
    assert!(usage[..4].iter().all(|u| u.answer < before));
    assert!(
        usage
            .iter()
            .all(|u| whole.messages[u.answer].role == Role::Assistant)
    );
}

#[test]
fn an_older_codexs_summary_read_whole_is_where_its_history_starts_again() {
    use condense_formats::{HarnessCompaction, harness_compaction, read_whole};
    let whole = read_whole(&older_codex_log(), Format::Codex).unwrap();
    let summary = whole
        .messages
        .iter()
        .position(|m| harness_compaction(m) == Some(HarnessCompaction::Replacement))
        .unwrap();
    // After the ten items before the compaction, its summary alone.
    assert_eq!(summary, 10);
    assert_eq!(whole.messages.len(), 10 + 10);
    assert!(
        whole.messages[summary]
            .plain_text()
            .starts_with("Another language model started")
    );
}

/// A Codex log of one line (its session's metadata alone) is read as a Codex log, not refused
/// as a JSON document of no known shape.
#[test]
fn a_codex_log_of_one_line_is_read_as_a_log() {
    let bytes = log();
    let first = bytes.split_inclusive(|&b| b == b'\n').next().unwrap();
    let (format, conversation) = read(first, None).unwrap();
    assert_eq!(format, Format::Codex);
    assert!(conversation.messages.is_empty());
    assert_eq!(write(Format::Codex, &conversation).unwrap(), first);
}
