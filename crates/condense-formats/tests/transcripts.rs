//! Every recorded session in ../shared/transcripts goes through the readers and writers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use condense_core::testing::transcripts;
use condense_core::{Conversation, Part, SideKind, ToolOutput};
use condense_formats::{Format, read, write};
use condense_tokenizer::{Encoding, Tiktoken, TokenCounter};
use serde::Serialize;
use serde_json::Value;

#[derive(Serialize)]
struct Summary {
    format: String,
    messages: usize,
    by_role: BTreeMap<String, usize>,
    generated_user_messages: usize,
    user_turns: Vec<usize>,
    tool_calls: usize,
    tool_results: usize,
    tool_pairs: usize,
    side_records: BTreeMap<String, usize>,
    findings: Vec<String>,
    tokens: BTreeMap<&'static str, usize>,
}

fn summarize(format: Format, conversation: &Conversation) -> Summary {
    let mut by_role = BTreeMap::new();
    let (mut calls, mut results) = (0, 0);
    for message in &conversation.messages {
        *by_role.entry(message.role.to_string()).or_default() += 1;
        for part in &message.parts {
            match part {
                Part::ToolCall(_) => calls += 1,
                Part::ToolResult(_) => results += 1,
                _ => {}
            }
        }
    }
    let mut side_records = BTreeMap::new();
    for record in &conversation.side {
        let kind = match record.kind {
            SideKind::Sidechain => "sidechain",
            SideKind::Summary => "summary",
            SideKind::System => "system",
            SideKind::Other => "other",
        };
        *side_records.entry(kind.to_owned()).or_default() += 1;
    }
    let tokens = [Encoding::O200kBase, Encoding::Cl100kBase]
        .into_iter()
        .map(|encoding| {
            (
                encoding.name(),
                Tiktoken::new(encoding).count_conversation(conversation),
            )
        })
        .collect();
    Summary {
        format: format.to_string(),
        messages: conversation.messages.len(),
        by_role,
        generated_user_messages: conversation.messages.iter().filter(|m| m.generated).count(),
        user_turns: conversation.user_turns(),
        tool_calls: calls,
        tool_results: results,
        tool_pairs: conversation.tool_pairs().pairs().len(),
        side_records,
        findings: conversation
            .validate()
            .iter()
            .map(ToString::to_string)
            .collect(),
        tokens,
    }
}

#[test]
fn every_transcript_parses_and_is_summarized() {
    let all = transcripts().unwrap();
    assert!(
        all.len() >= 20,
        "expected the full set of transcripts, found {}",
        all.len()
    );
    for transcript in all {
        let (format, conversation) = read(&transcript.bytes, None)
            .unwrap_or_else(|error| panic!("{}: {error}", transcript.name));
        let expected = match transcript.name.split('/').next() {
            Some("anthropic") => Format::Anthropic,
            Some("claude-code") => Format::ClaudeCode,
            _ => Format::OpenAi,
        };
        assert_eq!(
            format, expected,
            "{}: detected the wrong format",
            transcript.name
        );
        let name = transcript.name.replace('/', "__");
        insta::assert_yaml_snapshot!(name, summarize(format, &conversation));
    }
}

#[test]
fn a_session_with_no_conversation_is_empty_not_an_error() {
    let transcript = condense_core::testing::transcript("claude-code/c001d2c0").unwrap();
    let (format, conversation) = read(&transcript.bytes, None).unwrap();
    assert_eq!(format, Format::ClaudeCode);
    assert!(conversation.is_empty());
    assert_eq!(
        conversation.side.len(),
        4,
        "its title lines are kept as metadata"
    );
}

#[test]
fn openai_and_anthropic_files_round_trip_to_the_same_json() {
    for transcript in transcripts().unwrap() {
        let (format, conversation) = read(&transcript.bytes, None).unwrap();
        if format == Format::ClaudeCode {
            continue;
        }
        let written = write(format, &conversation).unwrap();
        let original: Value = serde_json::from_slice(&transcript.bytes).unwrap();
        let back: Value = serde_json::from_slice(&written).unwrap();
        assert!(
            original == back,
            "{}: the JSON changed on the way back",
            transcript.name
        );
        let (_, reread) = read(&written, Some(format)).unwrap();
        assert_eq!(
            reread, conversation,
            "{}: re-reading changed the model",
            transcript.name
        );
    }
}

/// Claude Code sessions are not required to come back byte for byte, but an untouched one does
/// come back as the same lines (as JSON values, in the same order).
#[test]
fn claude_code_sessions_written_back_give_the_same_lines() {
    for transcript in transcripts().unwrap() {
        let (format, conversation) = read(&transcript.bytes, None).unwrap();
        if format != Format::ClaudeCode {
            continue;
        }
        let written = write(format, &conversation).unwrap();
        let lines = |bytes: &[u8]| -> Vec<Value> {
            String::from_utf8(bytes.to_vec())
                .unwrap()
                .lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| serde_json::from_str(line).unwrap())
                .collect()
        };
        let (original, back) = (lines(&transcript.bytes), lines(&written));
        assert_eq!(
            original.len(),
            back.len(),
            "{}: line count changed",
            transcript.name
        );
        for (index, (a, b)) in original.iter().zip(&back).enumerate() {
            assert!(a == b, "{}: line {} changed", transcript.name, index + 1);
        }
    }
}

/// The reader is checked against the raw lines, read independently here: every text a line of
/// the branch Claude Code resumes holds (back from the last main-thread line along
/// `parentUuid`), and every tool call and result id, must be in the conversation, and every
/// main-thread line off that branch beside it, as it came.
#[test]
fn claude_code_sessions_lose_no_text_and_no_tool_pair() {
    for transcript in transcripts().unwrap() {
        if !transcript.name.starts_with("claude-code/") {
            continue;
        }
        let values: Vec<Value> = String::from_utf8(transcript.bytes.clone())
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let is_main = |value: &Value| {
            matches!(value["type"].as_str(), Some("user" | "assistant"))
                && value["isSidechain"] != Value::Bool(true)
        };
        let mut branch = BTreeSet::new();
        let mut at = values.iter().rev().find(|value| is_main(value));
        while let Some(value) = at {
            branch.insert(value["uuid"].as_str().unwrap().to_owned());
            at = values
                .iter()
                .find(|line| line["uuid"].is_string() && line["uuid"] == value["parentUuid"]);
        }
        let (_, conversation) = read(&transcript.bytes, Some(Format::ClaudeCode)).unwrap();
        let mut texts = Vec::new();
        let mut ids = BTreeSet::new();
        for value in &values {
            if !is_main(value) {
                continue;
            }
            if !branch.contains(value["uuid"].as_str().unwrap()) {
                assert!(
                    conversation
                        .side
                        .iter()
                        .any(|record| record.value == *value),
                    "{}: a line off the branch is lost",
                    transcript.name
                );
                continue;
            }
            match &value["message"]["content"] {
                Value::String(text) => texts.push(text.clone()),
                Value::Array(blocks) => {
                    for block in blocks {
                        match block["type"].as_str() {
                            Some("text") => texts.push(block["text"].as_str().unwrap().to_owned()),
                            Some("tool_use") => {
                                ids.insert(("call", block["id"].as_str().unwrap().to_owned()));
                            }
                            Some("tool_result") => {
                                ids.insert((
                                    "result",
                                    block["tool_use_id"].as_str().unwrap().to_owned(),
                                ));
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }

        let mut model_texts = Vec::new();
        let mut model_ids = BTreeSet::new();
        for message in &conversation.messages {
            for part in &message.parts {
                match part {
                    Part::Text(text) => model_texts.push(text.text.clone()),
                    Part::ToolCall(call) => {
                        model_ids.insert(("call", call.id.clone()));
                    }
                    Part::ToolResult(result) => {
                        model_ids.insert(("result", result.call_id.clone()));
                        assert!(matches!(
                            result.content,
                            ToolOutput::Text(_) | ToolOutput::Parts(_)
                        ));
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(model_texts, texts, "{}: texts differ", transcript.name);
        assert_eq!(model_ids, ids, "{}: tool ids differ", transcript.name);
    }
}

/// The numbers of a JSON text in order, as written, strings skipped.
fn numbers(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                out.push(&text[start..i]);
            }
            _ => i += 1,
        }
    }
    out
}

/// Read and written back with nothing to do, every number keeps its value: floats are parsed
/// exactly (serde_json's `float_roundtrip`), not off by one in the last digit
/// (`instance_cost` 0.2305142 once came back as 0.23051419999999997).
#[test]
fn every_number_of_every_transcript_survives_a_round_trip() {
    for transcript in transcripts().unwrap() {
        let (format, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        let written = condense_formats::write(format, &conversation).unwrap();
        let before = String::from_utf8(transcript.bytes.clone()).unwrap();
        let after = String::from_utf8(written).unwrap();
        // Writers may move a key (Claude Code's `content` goes last), so compare as sorted
        // values, each parsed by Rust's correctly rounded parser.
        let values = |text: &str| {
            let mut values: Vec<f64> = numbers(text).iter().map(|n| n.parse().unwrap()).collect();
            values.sort_by(f64::total_cmp);
            values
        };
        let (before, after) = (values(&before), values(&after));
        assert_eq!(before.len(), after.len(), "{}", transcript.name);
        for (a, b) in before.iter().zip(&after) {
            assert!(a == b, "{}: {a} came back as {b}", transcript.name);
        }
    }
}

/// A number is written back as it was written, whatever its size: an integer past 2^64 once
/// came back as a float (`12345678901234567890123` as `1.2345678901234568e+22`), a token id
/// or a big counter a client keeps, changed by a tool that only compacted.
#[test]
fn numbers_of_any_size_come_back_as_written() {
    let digits = "12345678901234567890123";
    let body = format!(
        r#"{{"model":"m","seed":{digits},"tiny":1e-400,"messages":[{{"role":"user","content":"hi","n":-{digits}}}]}}"#
    );
    for format in [
        condense_formats::Format::OpenAi,
        condense_formats::Format::Anthropic,
    ] {
        let conversation = condense_formats::read(body.as_bytes(), Some(format))
            .unwrap()
            .1;
        let written =
            String::from_utf8(condense_formats::write_compact(format, &conversation).unwrap())
                .unwrap();
        assert!(written.contains(&format!("\"seed\":{digits}")), "{written}");
        assert!(written.contains(&format!("\"n\":-{digits}")), "{written}");
        assert!(written.contains("\"tiny\":1e-400"), "{written}");
    }
}
