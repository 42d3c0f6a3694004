//! Native compaction through the proxy: condense answers `POST /v1/responses/compact` for an
//! upstream without it (the scripted one answers 404, as llama.cpp does), a later request that
//! carries condense's item reaches the upstream with the summary in its place, a forged item is
//! refused, and with `pass` (or a provider that compacts) the provider's own work goes through
//! untouched.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use condense_serve::testing::{Received, settings_for, spawn, upstream};
use condense_serve::{DirSessionStore, NativeMode, Proxy};
use serde_json::{Value, json};

async fn proxy(mode: NativeMode) -> (String, Arc<Proxy>, Received, tempfile::TempDir) {
    let (upstream, received) = upstream().await;
    let compactor = condense_serve::testing::compactor(&condense_serve::testing::WINDOW_16K);
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings_for(&format!("http://{upstream}"));
    settings.native_compaction = mode;
    let proxy = Arc::new(
        Proxy::new(
            settings,
            compactor,
            Arc::new(DirSessionStore::new(dir.path())),
        )
        .unwrap(),
    );
    let url = spawn(proxy.clone()).await;
    (url, proxy, received, dir)
}

/// A long Codex-like session as a Responses body.
fn session() -> Value {
    let chat: Value = serde_json::from_slice(
        &condense_core::testing::transcript("openai/openhands-ponylang__ponyc-4588")
            .unwrap()
            .bytes,
    )
    .unwrap();
    let mut body = condense_core::testing::responses_from_chat(&chat);
    body["model"] = json!("qwen3-coder");
    body
}

fn tokens(body: &Value) -> usize {
    let conversation =
        condense_formats::read_json(condense_formats::Format::Responses, body.clone()).unwrap();
    use condense_tokenizer::TokenCounter;
    condense_tokenizer::Tiktoken::default().count_conversation(&conversation)
}

async fn post(url: &str, path: &str, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}{path}"))
        .header("authorization", "Bearer sk-test")
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn condense_answers_responses_compact_where_the_upstream_has_none() {
    let (url, proxy, received, _dir) = proxy(NativeMode::Auto).await;
    let body = session();
    let before = tokens(&body);
    let answer = post(&url, "/v1/responses/compact", &body).await;
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert!(received.lock().unwrap().is_empty(), "answered here");
    assert_eq!(answer["object"], "response.compaction");
    let output = answer["output"].as_array().unwrap();
    let items: Vec<&Value> = output
        .iter()
        .filter(|item| item["type"] == "compaction")
        .collect();
    assert_eq!(items.len(), 1, "exactly one compaction item");
    assert_eq!(&output[0], items[0], "first: nothing before it");
    // The run's task, which the compaction kept whole, is among the items kept after it.
    let task = &body["input"][0];
    assert_eq!(task["role"], "user");
    assert!(output.contains(task), "the run's task is kept");
    let envelope = items[0]["encrypted_content"].as_str().unwrap();
    assert!(envelope.starts_with("condense.v1."), "{envelope}");
    assert!(answer["usage"]["input_tokens"].as_u64().unwrap() > 0);

    // The client goes on from the compacted window, as Codex and the SDK do.
    let mut next = body.clone();
    let mut input = output.clone();
    input.push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Now run the tests."}]}));
    next["input"] = json!(input);
    let response = post(&url, "/v1/responses", &next).await;
    assert_eq!(response.status(), 200);
    let (path, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    assert_eq!(path, "/v1/responses");
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    let text = sent.to_string();
    assert!(
        !text.contains("condense.v1."),
        "the envelope never goes upstream"
    );
    assert!(
        text.contains("<prior-conversation-summary>"),
        "its summary does"
    );
    assert!(text.contains("Now run the tests."));
    assert!(tokens(&sent) < 16_000 - 4_096 && tokens(&sent) < before / 2);
    let metrics = proxy.metrics.render();
    assert!(
        metrics.contains("condense_emulated_compactions_total 1"),
        "{metrics}"
    );

    // A changed envelope is refused, in OpenAI's shape, and nothing is sent.
    let sent_before = received.lock().unwrap().len();
    let mut forged = next.clone();
    let tampered = envelope.replacen("condense.v1.e", "condense.v1.f", 1);
    assert_ne!(tampered, envelope);
    forged["input"][0]["encrypted_content"] = json!(tampered);
    let response = post(&url, "/v1/responses", &forged).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot be used"),
        "{error}"
    );
    assert_eq!(received.lock().unwrap().len(), sent_before);

    // Compacting a compacted window again folds the earlier summary in: one item still.
    let again = post(&url, "/v1/responses/compact", &next).await;
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.unwrap();
    let items = again["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "compaction")
        .count();
    assert_eq!(items, 1);
}

/// `pass`: the compaction endpoint is the upstream's to answer (here a 404, relayed as it
/// came); a provider that compacts answers with its own item, which then reaches it again
/// byte for byte with everything before it, and `context_management` goes on as it came.
#[tokio::test]
async fn with_pass_the_providers_own_compaction_goes_through_untouched() {
    let (url, _proxy, received, _dir) = proxy(NativeMode::Pass).await;
    let body = session();
    let response = post(&url, "/v1/responses/compact", &body).await;
    assert_eq!(response.status(), 404, "the upstream's answer, relayed");

    let native = reqwest::Client::new()
        .post(format!("{url}/v1/responses/compact"))
        .header("x-test", "native")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(native.status(), 200);
    let native: Value = native.json().await.unwrap();
    let item = native["output"][0].clone();
    assert_eq!(item["encrypted_content"], "gAAAABprovider-opaque");

    // The long history, the provider's item after it, and a long history after that.
    let mut next = body.clone();
    next["context_management"] = json!([{"type": "compaction", "compact_threshold": 100000}]);
    let history = body["input"].as_array().unwrap().clone();
    let mut input = history.clone();
    input.push(item.clone());
    input.extend(history.iter().skip(1).cloned());
    next["input"] = json!(input);
    let response = post(&url, "/v1/responses", &next).await;
    assert_eq!(response.status(), 200);
    let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    let kept = history.len() + 1;
    assert_eq!(
        sent["input"].as_array().unwrap()[..kept],
        input[..kept],
        "the provider's item and all before it, as they came"
    );
    assert!(
        sent["input"].as_array().unwrap().len() < input.len(),
        "compacted after it"
    );
    assert_eq!(sent["context_management"], next["context_management"]);
}

/// A long Claude Code session as an Anthropic body, with `context_management` edits.
fn anthropic_session(edits: Value) -> Value {
    let mut body: Value = serde_json::from_slice(
        &condense_core::testing::transcript("anthropic/claude-code-5f8cbb78")
            .unwrap()
            .bytes,
    )
    .unwrap();
    body["context_management"] = json!({"edits": edits});
    body
}

async fn post_anthropic(url: &str, body: &Value, test: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", "sk-ant-test")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "context-management-2025-06-27");
    if let Some(test) = test {
        request = request.header("x-test", test);
    }
    request.json(body).send().await.unwrap()
}

/// For an Anthropic-compatible upstream that is not Anthropic's (it refuses the field, as the
/// scripted one does), condense applies the edits itself: the field never reaches it, old tool
/// results are cleared (originals kept), and the answer reports `applied_edits` as Anthropic's
/// does. With `pass` the field goes on as it came, and the upstream's refusal comes back.
#[tokio::test]
async fn anthropic_context_edits_are_applied_where_the_upstream_has_none() {
    let edits = json!([
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 20000},
         "keep": {"type": "tool_uses", "value": 3}},
    ]);
    let body = anthropic_session(edits.clone());
    let (url, _proxy, received, _dir) = proxy(NativeMode::Auto).await;
    let response = post_anthropic(&url, &body, None).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    let applied = &answer["context_management"]["applied_edits"];
    assert_eq!(applied[0]["type"], "clear_tool_uses_20250919", "{answer}");
    assert!(applied[0]["cleared_tool_uses"].as_u64().unwrap() > 10);
    assert_eq!(
        answer["content"][0]["text"], "ok",
        "the answer itself as it came"
    );
    let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    assert!(sent.get("context_management").is_none());
    assert!(sent.to_string().contains("cleared by context management"));

    // Anthropic's own upstream (pass): the field goes on, untouched, and is its to apply.
    let (url, _proxy, received, _dir) = proxy(NativeMode::Pass).await;
    let refused = post_anthropic(&url, &body, None).await;
    assert_eq!(refused.status(), 400, "the other vendor's refusal, relayed");
    let accepted = post_anthropic(&url, &body, Some("native")).await;
    assert_eq!(accepted.status(), 200);
    let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    assert_eq!(sent["context_management"], json!({"edits": edits}));
}

/// Codex's remote compaction: a `compaction_trigger` item at the end of an ordinary
/// `/v1/responses` request is answered by condense with a response whose only output is one
/// `compaction` item, as JSON or as the event stream asked for; the upstream never sees it.
/// Nothing but the item stays in the client's history, so the item carries the turns condense
/// kept: a later request that sends the item alone reaches the upstream with the summary and
/// those turns, the session's last tool output whole among them.
#[tokio::test]
async fn a_compaction_trigger_is_answered_with_one_item_that_carries_the_kept_turns() {
    let (url, proxy, received, _dir) = proxy(NativeMode::Auto).await;
    let body = session();
    let history = body["input"].as_array().unwrap().clone();
    let last_output = history
        .iter()
        .rev()
        .find(|item| item["type"] == "function_call_output")
        .cloned()
        .unwrap();
    let mut asked = body.clone();
    let mut input = history.clone();
    input.push(json!({"type": "compaction_trigger"}));
    asked["input"] = json!(input);

    let answer = post(&url, "/v1/responses", &asked).await;
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer["object"], "response");
    assert_eq!(answer["status"], "completed");
    let output = answer["output"].as_array().unwrap();
    assert_eq!(output.len(), 1, "{answer}");
    assert_eq!(output[0]["type"], "compaction");
    assert!(answer["usage"]["input_tokens"].as_u64().unwrap() > 0);

    asked["stream"] = json!(true);
    let streamed = post(&url, "/v1/responses", &asked).await;
    assert_eq!(streamed.status(), 200);
    assert_eq!(streamed.headers()["content-type"], "text/event-stream");
    let text = streamed.text().await.unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|event| event["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed"
        ]
    );
    assert_eq!(
        events[2]["item"], events[3]["response"]["output"][0],
        "the item done is the one completed"
    );
    assert_eq!(
        events[2]["item"], output[0],
        "the same input, the same item: deterministic"
    );
    assert!(received.lock().unwrap().is_empty(), "answered here");
    let metrics = proxy.metrics.render();
    assert!(
        metrics.contains("condense_emulated_compactions_total 2"),
        "{metrics}"
    );

    // The client keeps the item alone, and asks on.
    let mut next = body.clone();
    next["input"] = json!([
        output[0].clone(),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go on."}]},
    ]);
    let response = post(&url, "/v1/responses", &next).await;
    assert_eq!(response.status(), 200);
    let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    let sent_input = sent["input"].as_array().unwrap();
    let text = sent.to_string();
    assert!(
        !text.contains("condense.v1."),
        "the envelope never goes upstream"
    );
    assert!(text.contains("<prior-conversation-summary>"));
    assert!(
        sent_input.contains(&last_output),
        "the turns kept after the summary ride in the item, the last output whole"
    );
    assert_eq!(sent_input.last().unwrap()["content"][0]["text"], "Go on.");
    condense_formats::read_json(condense_formats::Format::Responses, sent.clone()).unwrap();
}

/// The blocks of an Anthropic answer, streamed or not: a JSON answer's `content`, or a stream's
/// blocks put together from its events (a compaction block's `compaction_delta` its content).
async fn answer_blocks(response: reqwest::Response) -> (Vec<Value>, Value) {
    assert_eq!(response.status(), 200);
    let streamed = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream");
    let text = response.text().await.unwrap();
    if !streamed {
        let answer: Value = serde_json::from_str(&text).unwrap();
        return (answer["content"].as_array().unwrap().clone(), answer);
    }
    let mut blocks: Vec<Value> = Vec::new();
    let mut last = Value::Null;
    for data in text.lines().filter_map(|line| line.strip_prefix("data: ")) {
        let event: Value = serde_json::from_str(data).unwrap();
        let index = event["index"].as_u64().map(|index| index as usize);
        match event["type"].as_str().unwrap() {
            "content_block_start" => {
                assert_eq!(index, Some(blocks.len()), "blocks in order: {text}");
                blocks.push(event["content_block"].clone());
            }
            "content_block_delta" => {
                let block = &mut blocks[index.unwrap()];
                match event["delta"]["type"].as_str().unwrap() {
                    "compaction_delta" => block["content"] = event["delta"]["content"].clone(),
                    "text_delta" => {
                        let text = format!(
                            "{}{}",
                            block["text"].as_str().unwrap_or_default(),
                            event["delta"]["text"].as_str().unwrap()
                        );
                        block["text"] = json!(text);
                    }
                    _ => {}
                }
            }
            "message_delta" => last = event,
            _ => {}
        }
    }
    (blocks, last)
}

/// `compact_20260112` for an Anthropic-compatible upstream that has none: past its trigger
/// condense summarizes the request now, the upstream gets the compacted form without the field,
/// and the answer (JSON or streamed, as Claude Code streams) carries a `compaction` block
/// first. The client then resends its whole history with that block in the assistant turn: the
/// upstream, which would refuse the block, gets condense's summary and the turns it kept in its
/// place, nothing before it. With `pause_after_compaction` the block is the whole answer.
#[tokio::test]
async fn anthropic_compaction_is_emulated_with_a_block_the_client_resends() {
    let compact = json!([{"type": "compact_20260112",
                          "trigger": {"type": "input_tokens", "value": 20000}}]);
    let body = anthropic_session(compact.clone());
    let (url, proxy, received, _dir) = proxy(NativeMode::Auto).await;
    for stream in [false, true] {
        let mut asked = body.clone();
        asked["stream"] = json!(stream);
        let (blocks, _) = answer_blocks(post_anthropic(&url, &asked, None).await).await;
        assert_eq!(
            blocks[0]["type"], "compaction",
            "stream {stream}: {blocks:?}"
        );
        assert!(
            blocks[0]["content"]
                .as_str()
                .unwrap()
                .contains("<condense-kept>condense.v1."),
            "the turns kept ride sealed in the block"
        );
        assert_eq!(blocks[1]["text"], "ok", "the upstream's answer after it");
        let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        assert!(sent.get("context_management").is_none());
        assert!(sent.to_string().contains("<prior-conversation-summary>"));
        assert!(
            sent["messages"].as_array().unwrap().len() < body["messages"].as_array().unwrap().len()
        );
    }
    let metrics = proxy.metrics.render();
    assert!(
        metrics.contains("condense_emulated_compactions_total 2"),
        "{metrics}"
    );

    // The client resends everything, the answer's blocks as its assistant turn, and asks on.
    let (blocks, _) = answer_blocks(post_anthropic(&url, &body, None).await).await;
    let mut next = body.clone();
    let messages = next["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": blocks}));
    messages.push(json!({"role": "user", "content": "Go on."}));
    let (_, _, compacted_form) = received.lock().unwrap().last().cloned().unwrap();
    let compacted_form: Value = serde_json::from_slice(&compacted_form).unwrap();
    next.as_object_mut().unwrap().remove("context_management");
    let response = post_anthropic(&url, &next, None).await;
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
    let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    let text = sent.to_string();
    assert!(
        !text.contains("\"compaction\""),
        "the block never reaches it"
    );
    assert!(!text.contains("condense.v1."));
    assert!(text.contains("<prior-conversation-summary>"));
    let sent_messages = sent["messages"].as_array().unwrap();
    let kept = &compacted_form["messages"].as_array().unwrap()[1..];
    assert!(!kept.is_empty());
    assert_eq!(
        &sent_messages[1..=kept.len()],
        kept,
        "the turns kept come back from the block, after the summary"
    );
    assert_eq!(sent_messages[kept.len() + 1]["content"][0]["text"], "ok");
    assert_eq!(sent_messages.last().unwrap()["content"], "Go on.");

    // A block whose sealed turns were changed is refused.
    let sent_before = received.lock().unwrap().len();
    let mut forged = next.clone();
    let turn = forged["messages"].as_array().unwrap().len() - 2;
    let content = forged["messages"][turn]["content"][0]["content"]
        .as_str()
        .unwrap()
        .replacen("condense.v1.e", "condense.v1.f", 1);
    forged["messages"][turn]["content"][0]["content"] = json!(content);
    let refused = post_anthropic(&url, &forged, None).await;
    assert_eq!(refused.status(), 400);
    assert_eq!(received.lock().unwrap().len(), sent_before);

    // Paused: the block alone, the upstream not asked.
    let mut paused = anthropic_session(json!([{"type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 20000}, "pause_after_compaction": true}]));
    for stream in [false, true] {
        paused["stream"] = json!(stream);
        let (blocks, last) = answer_blocks(post_anthropic(&url, &paused, None).await).await;
        assert_eq!(blocks.len(), 1, "{blocks:?}");
        assert_eq!(blocks[0]["type"], "compaction");
        let stop = if stream {
            &last["delta"]["stop_reason"]
        } else {
            &last["stop_reason"]
        };
        assert_eq!(stop, "compaction");
    }
    assert_eq!(received.lock().unwrap().len(), sent_before);
}

/// OpenAI's server-side compaction (`context_management: [{"type": "compaction", ...}]`) asked
/// of an upstream that has none: the entry is taken off (such a server would refuse the field
/// or ignore it) and condense's own compaction at its threshold stands in; anything else in the
/// field goes on. With `pass` it goes on as it came (the test above).
#[tokio::test]
async fn openai_server_side_compaction_is_taken_off_for_an_upstream_without_it() {
    let (url, _proxy, received, _dir) = proxy(NativeMode::Auto).await;
    let mut body = session();
    body["context_management"] = json!([{"type": "compaction", "compact_threshold": 20000}]);
    let response = post(&url, "/v1/responses", &body).await;
    assert_eq!(response.status(), 200);
    let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    assert!(
        sent.get("context_management").is_none(),
        "{}",
        sent["context_management"]
    );
    assert!(
        tokens(&sent) < 16_000,
        "condense compacted it in the provider's place"
    );

    body["context_management"] = json!([
        {"type": "compaction", "compact_threshold": 20000},
        {"type": "something_else"},
    ]);
    let response = post(&url, "/v1/responses", &body).await;
    assert_eq!(response.status(), 200);
    let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    let sent: Value = serde_json::from_slice(&sent).unwrap();
    assert_eq!(
        sent["context_management"],
        json!([{"type": "something_else"}])
    );
}
