//! Chat Completions' older function calling (`function_call` on the assistant, a
//! `role: "function"` answer, no ids): read as tool pairs, written back as it came.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::{Part, Role, ToolOutput};
use condense_formats::{Format, MessageCache, Request, read, read_json, write};
use serde_json::{Value, json};

/// Two calls of one function, answered in order, then an answer; `function_call: null` on the
/// last, as some clients send it beside no call.
fn session() -> Value {
    json!({
        "model": "gpt-3.5-turbo-0613",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Weather in Paris and in Oslo?"},
            {"role": "assistant", "content": null,
             "function_call": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"role": "function", "name": "get_weather", "content": "{\"temp\": 21}"},
            {"role": "assistant", "content": null,
             "function_call": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
            {"role": "function", "name": "get_weather", "content": "{\"temp\": 4}"},
            {"role": "assistant", "content": "Paris 21, Oslo 4.", "function_call": null}
        ],
        "functions": [{"name": "get_weather", "parameters": {"type": "object"}}]
    })
}

fn pretty(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap();
    bytes.push(b'\n');
    bytes
}

#[test]
fn functions_and_their_answers_are_tool_pairs() {
    let (format, conversation) = read(&pretty(&session()), None).unwrap();
    assert_eq!(format, Format::OpenAi);
    assert!(
        conversation.validate().is_empty(),
        "{:?}",
        conversation.validate()
    );
    let roles: Vec<Role> = conversation.messages.iter().map(|m| m.role).collect();
    use Role::{Assistant as A, System as S, Tool as T, User as U};
    assert_eq!(roles, [S, U, A, T, A, T, A]);
    let pairs: Vec<(String, String, String)> = conversation
        .messages
        .windows(2)
        .filter_map(|pair| {
            let call = pair[0].parts.iter().find_map(Part::as_tool_call)?;
            let result = pair[1].parts.iter().find_map(Part::as_tool_result)?;
            Some((
                call.id.clone(),
                call.input["city"].to_string(),
                result.call_id.clone(),
            ))
        })
        .collect();
    assert_eq!(
        pairs,
        [
            (
                "function-call-2".into(),
                "\"Paris\"".into(),
                "function-call-2".into()
            ),
            (
                "function-call-4".into(),
                "\"Oslo\"".into(),
                "function-call-4".into()
            )
        ]
    );
}

/// The same JSON value, as for every Chat Completions file: no id added to a call or an answer.
#[test]
fn a_function_session_is_written_back_as_the_same_value() {
    let (_, conversation) = read(&pretty(&session()), None).unwrap();
    let written: Value =
        serde_json::from_slice(&write(Format::OpenAi, &conversation).unwrap()).unwrap();
    assert_eq!(written, session());
}

#[test]
fn a_replaced_answer_stays_a_function_answer() {
    let (_, mut conversation) = read(&pretty(&session()), None).unwrap();
    let Part::ToolResult(result) = &mut conversation.messages[3].parts[0] else {
        panic!()
    };
    result.content = ToolOutput::Text("[pruned: condense recall 0123]".into());
    let written: Value =
        serde_json::from_slice(&write(Format::OpenAi, &conversation).unwrap()).unwrap();
    assert_eq!(
        written["messages"][3],
        json!({"role": "function", "name": "get_weather", "content": "[pruned: condense recall 0123]"})
    );
    assert_eq!(written["messages"][2], session()["messages"][2]);
}

#[test]
fn an_answer_with_no_call_before_it_is_reported_not_dropped() {
    let mut value = session();
    value["messages"].as_array_mut().unwrap().remove(2);
    let (_, conversation) = read(&pretty(&value), None).unwrap();
    assert_eq!(conversation.messages.len(), 6);
    assert_eq!(
        conversation.validate().len(),
        1,
        "{:?}",
        conversation.validate()
    );
    let written: Value =
        serde_json::from_slice(&write(Format::OpenAi, &conversation).unwrap()).unwrap();
    assert_eq!(written, value);
}

#[test]
fn the_proxys_reader_links_them_as_the_plain_reader_does_cold_and_warm() {
    let body = session().to_string();
    let plain = read_json(Format::OpenAi, session()).unwrap();
    let cache = MessageCache::new(MessageCache::DEFAULT_CAPACITY_BYTES);
    for _ in 0..2 {
        let request = Request::parse(&body).unwrap();
        assert_eq!(request.read(Format::OpenAi, &cache).unwrap(), plain);
    }
    // The same answer at another place answers the call before it there.
    let mut longer = session();
    let messages = longer["messages"].as_array_mut().unwrap();
    let extra: Vec<Value> = messages[4..6].to_vec();
    messages.splice(6..6, extra);
    let plain = read_json(Format::OpenAi, longer.clone()).unwrap();
    let request_body = longer.to_string();
    let request = Request::parse(&request_body).unwrap();
    let warm = request.read(Format::OpenAi, &cache).unwrap();
    assert_eq!(warm, plain);
    assert!(warm.validate().is_empty());
}
