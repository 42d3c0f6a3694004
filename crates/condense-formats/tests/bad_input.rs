//! Bad input gets a clear error that says what and where, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::{FindingKind, Part, ToolOutput};
use condense_formats::{Format, FormatError, Location, read};

fn error_of(bytes: &[u8], format: Option<Format>) -> FormatError {
    match read(bytes, format) {
        Ok((format, _)) => panic!("read as {format} instead of failing"),
        Err(error) => error,
    }
}

#[test]
fn truncated_json_names_line_and_column() {
    let input = b"{\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"hi\"";
    let error = error_of(input, None);
    assert!(
        matches!(error, FormatError::Json { line: 3, .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("invalid JSON at line 3, column"),
        "{error}"
    );
}

#[test]
fn a_jsonl_line_that_is_not_json_names_the_line() {
    let input = concat!(
        r#"{"type":"user","message":{"role":"user","content":"hi"},"uuid":"1"}"#,
        "\n",
        r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"ok"}]}}"#,
        "\n",
        "{\"type\": \"user\", oops}\n",
    );
    let error = error_of(input.as_bytes(), None);
    assert!(
        matches!(error, FormatError::JsonLine { line: 3, .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().starts_with("line 3 is not JSON"),
        "{error}"
    );
}

#[test]
fn an_unknown_role_names_the_message() {
    let openai = br#"[{"role":"user","content":"a"},{"role":"narrator","content":"b"}]"#;
    let error = error_of(openai, None);
    assert!(
        matches!(&error, FormatError::UnknownRole { at: Location::Message(1), role } if role == "narrator"),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "message 1: unknown role `narrator`");

    let anthropic = br#"{"system":"s","messages":[{"role":"tool","content":"b"}]}"#;
    let error = error_of(anthropic, Some(Format::Anthropic));
    assert_eq!(error.to_string(), "message 0: unknown role `tool`");
}

#[test]
fn invalid_utf8_names_the_line() {
    let mut input = b"[{\"role\":\"user\",\n\"content\":\"caf".to_vec();
    input.extend([0xC3, 0x28]);
    input.extend(b"\"}]");
    let error = error_of(&input, None);
    assert!(
        matches!(error, FormatError::InvalidUtf8 { line: 2, .. }),
        "{error:?}"
    );
}

#[test]
fn empty_and_garbage_input_are_errors() {
    assert!(matches!(error_of(b"", None), FormatError::Empty));
    assert!(matches!(error_of(b" \n\t\n", None), FormatError::Empty));
    let garbage: Vec<u8> = (0u8..=255).cycle().take(4096).collect();
    assert!(matches!(
        error_of(&garbage, None),
        FormatError::InvalidUtf8 { .. }
    ));
    assert!(matches!(
        error_of(b"hello there", None),
        FormatError::Json { .. }
    ));
    assert!(matches!(
        error_of(b"42", None),
        FormatError::Unrecognized(_)
    ));
    assert!(matches!(
        error_of(br#"{"model":"x"}"#, None),
        FormatError::Unrecognized(_)
    ));
}

#[test]
fn a_malformed_message_says_what_is_wrong_and_where() {
    let error = error_of(br#"[{"role":"tool","content":"x"}]"#, None);
    assert_eq!(
        error.to_string(),
        "message 0: a tool message has no `tool_call_id`"
    );
    let error = error_of(br#"[{"role":"user","content":7}]"#, None);
    assert_eq!(
        error.to_string(),
        "message 0: `content` must be a string or a list, not a number"
    );
    let jsonl = "{\"type\":\"user\",\"uuid\":\"a\"}\n{\"type\":\"summary\"}\n";
    let error = error_of(jsonl.as_bytes(), None);
    assert_eq!(
        error.to_string(),
        "line 1: a `user` line has no `message` object"
    );
}

#[test]
fn a_tool_result_without_a_call_reads_and_is_a_validation_finding() {
    let input =
        br#"[{"role":"user","content":"go"},{"role":"tool","tool_call_id":"ghost","content":"x"}]"#;
    let (_, conversation) = read(input, None).unwrap();
    let findings = conversation.validate();
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].message, 1);
    assert_eq!(
        findings[0].kind,
        FindingKind::ResultWithoutCall {
            call_id: "ghost".into()
        }
    );
}

#[test]
fn a_50_mb_tool_output_is_read_whole() {
    let output = "x".repeat(50 * 1024 * 1024);
    let input = serde_json::json!([
        {"role": "user", "content": "dump it"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]);
    let bytes = serde_json::to_vec(&input).unwrap();
    let (_, conversation) = read(&bytes, None).unwrap();
    let Part::ToolResult(result) = &conversation.messages[2].parts[0] else {
        panic!("message 2 is not a tool result");
    };
    assert!(matches!(&result.content, ToolOutput::Text(text) if text.len() == output.len()));
}
