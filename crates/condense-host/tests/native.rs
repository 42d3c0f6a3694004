//! A provider's own compaction (OpenAI's `compaction` item, Anthropic's `compaction` block) in
//! the middle of real sessions, in every format: it and everything before it reach the provider
//! as they came, the trigger counts only what the provider reads, and condense's pruning and
//! summary start after it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::testing::transcripts;
use condense_core::{Conversation, LiveView, SUMMARY_OPEN, last_native_compaction};
use condense_formats::Format;
use condense_host::{CompactionOutcome, Compactor, Config, SessionState, Sources};
use condense_pruner::{FixedClock, MemoryStore};
use condense_tokenizer::TokenCounter;
use proptest::prelude::*;
use serde_json::{Value, json};

fn compactor(window: usize) -> Compactor {
    let config = Config::load(&Sources {
        env: vec![
            ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), window.to_string()),
            ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), "4096".into()),
        ],
        ..Sources::default()
    })
    .unwrap();
    Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(MemoryStore::new()))
        .with_clock(Box::new(FixedClock(1_763_700_000_000)))
}

/// OpenAI's item: opaque, its `encrypted_content` meaningful only to the provider.
fn openai_item(tag: usize) -> Value {
    json!({
        "id": format!("cmp_{tag:04}"),
        "type": "compaction",
        "encrypted_content": format!("gAAAAB{}", "Zm9vYmFy".repeat(200 + tag)),
    })
}

/// Anthropic's block: the summary Claude wrote, resent exactly as returned.
fn anthropic_block(tag: usize) -> Value {
    json!({
        "type": "compaction",
        "content": format!("Summary {tag}: the person asked to fix the build; src/lib.rs was edited."),
    })
}

/// Puts `block` first in the content of the assistant message nearest `fraction` of `messages`.
fn into_assistant(messages: &mut [Value], fraction: f64, block: Value) {
    let from = (messages.len() as f64 * fraction) as usize;
    let index = (from..messages.len())
        .find(|&index| messages[index]["role"] == "assistant")
        .unwrap();
    let content = &mut messages[index]["content"];
    let mut blocks = match content.take() {
        Value::Array(blocks) => blocks,
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        _ => Vec::new(),
    };
    blocks.insert(0, block);
    *content = Value::Array(blocks);
}

/// The shared sessions and a Codex log, each with a provider compaction put at `fraction` of
/// its history, in its own format.
fn sessions(fraction: f64, tag: usize) -> Vec<(String, Format, Vec<u8>)> {
    let mut out = Vec::new();
    for transcript in transcripts().unwrap() {
        let (format, _) = condense_formats::read(&transcript.bytes, None).unwrap();
        let bytes = match format {
            Format::Anthropic | Format::OpenAi => {
                let mut body: Value = serde_json::from_slice(&transcript.bytes).unwrap();
                let block = if format == Format::Anthropic {
                    anthropic_block(tag)
                } else {
                    openai_item(tag)
                };
                let messages = match body.get_mut("messages") {
                    Some(messages) => messages,
                    None => &mut body,
                };
                into_assistant(messages.as_array_mut().unwrap(), fraction, block);
                serde_json::to_vec(&body).unwrap()
            }
            // Two logs hold no assistant line of the main thread: nothing to put it in.
            Format::ClaudeCode => match claude_code_with(&transcript.bytes, fraction, tag) {
                Some(bytes) => bytes,
                None => continue,
            },
            _ => continue,
        };
        out.push((transcript.name.clone(), format, bytes));
    }
    out.push(("codex".into(), Format::Codex, codex_with(fraction, tag)));
    out.push((
        "responses".into(),
        Format::Responses,
        serde_json::to_vec(&responses_body(16, tag, 16)).unwrap(),
    ));
    out
}

fn claude_code_with(bytes: &[u8], fraction: f64, tag: usize) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(bytes).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let from = (lines.len() as f64 * fraction) as usize;
    let index = (from..lines.len()).find(|&index| {
        lines[index]["type"] == "assistant" && lines[index]["isSidechain"] != true
    })?;
    let content = lines[index]["message"]["content"].as_array_mut().unwrap();
    content.insert(0, anthropic_block(tag));
    let mut out = Vec::new();
    for line in lines {
        out.extend(serde_json::to_vec(&line).unwrap());
        out.push(b'\n');
    }
    Some(out)
}

fn codex_with(fraction: f64, tag: usize) -> Vec<u8> {
    let log = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../condense-formats/tests/data/codex-0.169.0.jsonl"
    ))
    .unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let at = (lines.len() as f64 * fraction) as usize;
    let item = json!({
        "timestamp": "2026-11-01T10:00:00.000Z",
        "type": "response_item",
        "payload": openai_item(tag),
    });
    let mut out = String::new();
    for (index, line) in lines.iter().enumerate() {
        if index == at {
            out.push_str(&item.to_string());
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    out.into_bytes()
}

/// A Codex-like Responses body: `before` shell calls with large outputs, the provider's
/// compaction, then `after` more.
fn responses_body(before: usize, tag: usize, after: usize) -> Value {
    let mut input = vec![json!({"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Fix the failing test in crates/app/src/lib.rs"}
    ]})];
    let call = |index: usize| {
        [
            json!({"type": "function_call", "call_id": format!("call_{index}"), "name": "shell",
                "arguments": json!({"command": ["cat", format!("crates/app/src/mod{index}.rs")]}).to_string()}),
            json!({"type": "function_call_output", "call_id": format!("call_{index}"),
                "output": format!("fn f{index}() {{}}\n").repeat(300)}),
        ]
    };
    for index in 0..before {
        input.extend(call(index));
    }
    input.push(openai_item(tag));
    input.push(json!({"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Now run the whole suite"}
    ]}));
    for index in before..before + after {
        input.extend(call(index));
    }
    json!({
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "context_management": [{"type": "compaction", "compact_threshold": 200000}],
        "input": input,
    })
}

/// What every session must show once compacted: the compaction and all before it as they came,
/// condense's work after it, the count of what the provider reads.
fn check(name: &str, format: Format, bytes: &[u8], result: &condense_host::Compaction) {
    let input = condense_formats::read_whole(bytes, format).unwrap();
    let (at, part) = last_native_compaction(&input.messages).unwrap();
    let written = condense_formats::write(format, &result.conversation).unwrap();
    let output = condense_formats::read_whole(&written, format).unwrap();
    let (out_at, out_part) = last_native_compaction(&output.messages)
        .unwrap_or_else(|| panic!("{name}: the provider's compaction is gone"));
    assert_eq!((out_at, out_part), (at, part), "{name}: moved");
    assert_eq!(
        output.messages[..at],
        input.messages[..at],
        "{name}: what came before the compaction changed"
    );
    assert_eq!(
        output.messages[at].parts[..=part],
        input.messages[at].parts[..=part],
        "{name}"
    );
    assert!(
        output.messages[..=at]
            .iter()
            .all(|message| !message.plain_text().contains(SUMMARY_OPEN)),
        "{name}: a summary of condense's before the provider's compaction"
    );
    let native = result.report.native.expect("reported");
    assert_eq!(native.at_message, at, "{name}");
    // The trigger counted what the provider reads, not what it ignores.
    let mut view = input.clone();
    let lifted = LiveView::take(&mut view);
    let counter = condense_tokenizer::Tiktoken::new(condense_tokenizer::Encoding::O200kBase);
    if lifted.is_some() {
        assert_eq!(
            result.report.tokens_before,
            counter.count_conversation(&view),
            "{name}"
        );
        assert!(result.report.tokens_before < counter.count_conversation(&input));
    }
    if format.is_jsonl() {
        // A log: every line up to the compaction's is written back byte for byte.
        let lines = |bytes: &[u8]| -> Vec<Vec<u8>> {
            bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
        };
        let (before, after) = (lines(bytes), lines(&written));
        // The last compaction line is the one put in.
        let line = before
            .iter()
            .rposition(|l| {
                let needle = b"\"type\":\"compaction\"";
                l.windows(needle.len()).any(|w| w == needle)
            })
            .unwrap();
        assert_eq!(
            after[..line],
            before[..line],
            "{name}: a line before the compaction changed"
        );
        // Its own line keeps it byte for byte (the parts after it in the same message may have
        // been summarized).
        let block = |line: &[u8]| -> Value {
            let value: Value = serde_json::from_slice(line).unwrap();
            let item = if format == Format::Codex {
                &value["payload"]
            } else {
                &value["message"]["content"][0]
            };
            item.clone()
        };
        assert_eq!(block(&after[line]), block(&before[line]), "{name}");
    }
}

#[tokio::test]
async fn a_provider_compaction_survives_compact_in_every_format() {
    let compactor = compactor(16_000);
    let mut summarized_after = 0;
    for fraction in [0.3, 0.6] {
        for (name, format, bytes) in sessions(fraction, 1) {
            let name = format!("{name} at {fraction}");
            let conversation = condense_formats::read_whole(&bytes, format).unwrap();
            let result = compactor.compact(conversation).await.unwrap();
            check(&name, format, &bytes, &result);
            if let CompactionOutcome::Summarized { .. } = result.report.compaction {
                summarized_after += 1;
            }
        }
    }
    // The sessions are long enough after the compaction for condense to summarize there.
    assert!(summarized_after >= 10, "{summarized_after}");
}

#[tokio::test]
async fn the_per_request_path_keeps_it_too_and_freezes_what_it_made_after_it() {
    let compactor = compactor(16_000);
    let body = responses_body(16, 7, 16);
    let bytes = serde_json::to_vec(&body).unwrap();
    let mut state = SessionState::default();
    let conversation = condense_formats::read_whole(&bytes, Format::Responses).unwrap();
    let first = compactor
        .prepare(conversation.clone(), &mut state)
        .await
        .unwrap();
    assert!(matches!(
        first.report.compaction,
        CompactionOutcome::Summarized { .. }
    ));
    check(
        "responses, first request",
        Format::Responses,
        &bytes,
        &first,
    );
    // The client's next request: the same history and one more step.
    let mut next = body.clone();
    let input = next["input"].as_array_mut().unwrap();
    input.push(
        json!({"type": "function_call", "call_id": "call_x", "name": "shell", "arguments": "{}"}),
    );
    input.push(json!({"type": "function_call_output", "call_id": "call_x", "output": "ok"}));
    let next_bytes = serde_json::to_vec(&next).unwrap();
    let conversation = condense_formats::read_whole(&next_bytes, Format::Responses).unwrap();
    let second = compactor.prepare(conversation, &mut state).await.unwrap();
    check(
        "responses, next request",
        Format::Responses,
        &next_bytes,
        &second,
    );
    // The summary made on the first request is sent again as it was: the cached prefix holds.
    let first_bytes = condense_formats::write(Format::Responses, &first.conversation).unwrap();
    let second_bytes = condense_formats::write(Format::Responses, &second.conversation).unwrap();
    let first_items = serde_json::from_slice::<Value>(&first_bytes).unwrap()["input"].clone();
    let second_items = serde_json::from_slice::<Value>(&second_bytes).unwrap()["input"].clone();
    let first_items = first_items.as_array().unwrap();
    assert_eq!(
        second_items.as_array().unwrap()[..first_items.len() - 1],
        first_items[..first_items.len() - 1]
    );
    // `context_management` goes on as it came.
    assert_eq!(
        serde_json::from_slice::<Value>(&second_bytes).unwrap()["context_management"],
        body["context_management"]
    );
}

#[tokio::test]
async fn what_the_provider_ignores_does_not_trigger_a_compaction() {
    // 40 large outputs before the compaction, a small history after it: the provider reads
    // little, so nothing is due.
    let compactor = compactor(16_000);
    let body = responses_body(40, 3, 1);
    let bytes = serde_json::to_vec(&body).unwrap();
    let conversation = condense_formats::read_whole(&bytes, Format::Responses).unwrap();
    let counter = compactor.counter();
    assert!(counter.count_conversation(&conversation) > 40_000);
    let result = compactor.compact(conversation.clone()).await.unwrap();
    assert_eq!(result.report.compaction, CompactionOutcome::NotDue);
    assert_eq!(result.report.prune.replaced(), 0);
    assert_eq!(result.conversation, conversation);
    assert_eq!(
        condense_formats::write(Format::Responses, &result.conversation).unwrap(),
        condense_formats::write(Format::Responses, &conversation).unwrap()
    );
}

fn responses_with(before: usize, places: &[usize], after: usize) -> Value {
    let mut body = responses_body(before, 0, after);
    let input = body["input"].as_array_mut().unwrap();
    // More compactions at item boundaries the provider could make (between a call and its
    // output is none: pairs stay whole).
    for (tag, &place) in places.iter().enumerate() {
        let at = (1 + 2 * place).min(input.len());
        input.insert(at, openai_item(tag + 10));
    }
    body
}

/// The same history as an Anthropic body: each step an assistant `tool_use` and the user's
/// `tool_result`, a compaction block opening the assistant message of each step in `places`.
fn anthropic_with(steps: usize, places: &[usize]) -> Value {
    let mut messages =
        vec![json!({"role": "user", "content": "Fix the failing test in crates/app/src/lib.rs"})];
    for step in 0..steps {
        let mut content = Vec::new();
        if let Some(tag) = places.iter().position(|&place| place == step) {
            content.push(anthropic_block(tag));
        }
        content.push(
            json!({"type": "tool_use", "id": format!("toolu_{step}"), "name": "Read",
            "input": {"file_path": format!("crates/app/src/mod{step}.rs")}}),
        );
        messages.push(json!({"role": "assistant", "content": content}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": format!("toolu_{step}"), "content": format!("fn f{step}() {{}}\n").repeat(300)}]}));
    }
    json!({"model": "claude-sonnet-4-5", "max_tokens": 4096, "system": "You are Claude Code.",
        "context_management": {"edits": [{"type": "compact_20260112"}]}, "messages": messages})
}

/// Every compaction of a body, in order, with the item or message it is in.
fn compactions(format: Format, body: &Value) -> Vec<(usize, Value)> {
    let list = if format == Format::Responses {
        &body["input"]
    } else {
        &body["messages"]
    };
    let mut found = Vec::new();
    for (index, entry) in list.as_array().unwrap().iter().enumerate() {
        let blocks = match (&entry["content"], format) {
            (_, Format::Responses) => vec![entry.clone()],
            (Value::Array(blocks), _) => blocks.clone(),
            _ => Vec::new(),
        };
        found.extend(
            blocks
                .into_iter()
                .filter(|block| block["type"] == "compaction")
                .map(|block| (index, block)),
        );
    }
    found
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Wherever compactions sit and however many there are, in either provider's format,
    /// preparing a request never drops or reorders one, and everything before the last one
    /// comes back as it was.
    #[test]
    fn no_path_drops_or_reorders_a_compaction(
        before in 0usize..20,
        after in 0usize..20,
        places in prop::collection::vec(0usize..40, 0..4),
        window in prop::sample::select(vec![12_000usize, 16_000, 32_000]),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let compactor = compactor(window);
        let bodies = [
            (Format::Responses, responses_with(before, &places, after)),
            (Format::Anthropic, anthropic_with(before + after, &places)),
        ];
        for (format, body) in bodies {
            let bytes = serde_json::to_vec(&body).unwrap();
            let conversation = condense_formats::read_whole(&bytes, format).unwrap();
            let mut state = SessionState::default();
            let result = runtime.block_on(compactor.prepare(conversation, &mut state)).unwrap();
            let written: Value = serde_json::from_slice(
                &condense_formats::write(format, &result.conversation).unwrap()).unwrap();
            let (kept, given) = (compactions(format, &written), compactions(format, &body));
            prop_assert_eq!(&kept, &given);
            if let Some((last, _)) = given.last() {
                let list = if format == Format::Responses { "input" } else { "messages" };
                prop_assert_eq!(
                    &written[list].as_array().unwrap()[..*last],
                    &body[list].as_array().unwrap()[..*last]
                );
            }
        }
    }
}

#[test]
fn readers_and_writers_keep_compactions_in_place() {
    // Every format, written and read back: same compactions, same order, same bytes.
    for (name, format, bytes) in sessions(0.5, 2) {
        let conversation: Conversation = condense_formats::read_whole(&bytes, format).unwrap();
        assert!(
            last_native_compaction(&conversation.messages).is_some(),
            "{name}"
        );
        let written = condense_formats::write(format, &conversation).unwrap();
        if format.is_jsonl() {
            assert_eq!(written, bytes, "{name}");
        } else {
            let parse = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).unwrap();
            assert_eq!(parse(&written), parse(&bytes), "{name}");
        }
    }
}
