#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::testing::transcripts;
use condense_core::{Conversation, Memos, Message, Part, Role, ToolCall};
use condense_tokenizer::{
    Encoding, Parallelism, Tiktoken, TokenCounter, count_each_memoized, overhead,
};
use proptest::prelude::*;
use serde_json::json;

#[test]
fn text_counts_are_tiktoken_counts() {
    let text = "fn main() { println!(\"héllo, 世界\"); } // base64: aGVsbG8gd29ybGQ=";
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let bpe = match encoding {
            Encoding::O200kBase => tiktoken_rs::o200k_base().unwrap(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base().unwrap(),
        };
        assert_eq!(
            Tiktoken::new(encoding).count_text(text),
            bpe.encode_ordinary(text).len()
        );
    }
    let o200k = Tiktoken::new(Encoding::O200kBase).count_text(text);
    let cl100k = Tiktoken::new(Encoding::Cl100kBase).count_text(text);
    assert_ne!(
        o200k, cl100k,
        "the two encodings should disagree on mixed text"
    );
}

/// A plain chat counts exactly as tiktoken-rs's own implementation of OpenAI's cookbook does.
#[test]
fn a_plain_chat_counts_as_the_openai_cookbook_says() {
    let chat = [
        (Role::System, "You are a careful coding agent."),
        (Role::User, "Why does `cargo test` hang on the second run?"),
        (
            Role::Assistant,
            "Probably a lock file left behind; let me look.",
        ),
    ];
    let conversation = Conversation::new(
        chat.iter()
            .map(|(role, text)| Message::text(*role, *text))
            .collect(),
    );
    let reference: Vec<tiktoken_rs::ChatCompletionRequestMessage> = chat
        .iter()
        .map(|(role, text)| tiktoken_rs::ChatCompletionRequestMessage {
            role: role.as_str().to_owned(),
            content: Some((*text).to_owned()),
            ..Default::default()
        })
        .collect();
    let expected = tiktoken_rs::num_tokens_from_messages("gpt-4o", &reference).unwrap();
    assert_eq!(
        Tiktoken::default().count_conversation(&conversation),
        expected
    );
}

#[test]
fn a_tool_call_costs_its_name_its_arguments_and_the_call_overhead() {
    let counter = Tiktoken::default();
    let arguments = r#"{"path": "src/lib.rs"}"#;
    let call = Part::ToolCall(ToolCall {
        id: "call_1".into(),
        name: "read_file".into(),
        input: json!({"path": "src/lib.rs"}),
        raw_input: Some(arguments.into()),
        embedded: false,
        extra: Default::default(),
    });
    assert_eq!(
        counter.count_part(&call),
        overhead::PER_TOOL_CALL + counter.count_text("read_file") + counter.count_text(arguments)
    );
}

#[test]
fn recounting_an_unchanged_conversation_tokenizes_nothing() {
    let transcript = condense_core::testing::transcript("claude-code/d7d349f9").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let counter = Tiktoken::default();
    let first = counter.count_conversation(&conversation);
    let after_first = counter.cache_stats();
    assert!(after_first.misses > 0);

    let second = counter.count_conversation(&conversation);
    let after_second = counter.cache_stats();
    assert_eq!(first, second);
    assert_eq!(
        after_second.misses, after_first.misses,
        "a warm recount must not tokenize"
    );
    assert!(after_second.hits > after_first.hits);

    let mut grown = conversation.clone();
    grown
        .messages
        .push(Message::text(Role::User, "one more thing, a new text"));
    counter.count_conversation(&grown);
    assert_eq!(
        counter.cache_stats().misses,
        after_first.misses + 1,
        "only the new text is counted"
    );
}

#[test]
fn the_parallel_count_of_every_transcript_is_the_sequential_count() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for transcript in transcripts().unwrap() {
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        let sequential = Tiktoken::default()
            .with_parallelism(Parallelism::Off)
            .count_each(&conversation.messages);
        let parallel = pool.install(|| Tiktoken::default().count_each(&conversation.messages));
        assert_eq!(parallel, sequential, "{}", transcript.name);
    }
}

/// Counts kept in memos are the counts themselves: for every shared transcript, with memos for
/// some messages only (every third has none), the first pass (counting and keeping) and the
/// second (reading what was kept) equal `count_each`, and the second looks up only the messages
/// without a memo. A
/// counter keyed otherwise does not take the first one's counts.
#[test]
fn counts_kept_in_memos_are_the_counts() {
    for transcript in transcripts().unwrap() {
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        let messages = &conversation.messages;
        let expected = Tiktoken::default().count_each(messages);
        let memos = Memos::new(
            (0..messages.len())
                .map(|index| (index % 3 != 2).then(Default::default))
                .collect(),
        );
        let counter = Tiktoken::default();
        let first = count_each_memoized(&counter, messages, |index| memos.get(index));
        assert_eq!(first, expected, "{}: counting", transcript.name);
        // A fresh counter looks up only the texts of the messages without a memo.
        let fresh = Tiktoken::default();
        let second = count_each_memoized(&fresh, messages, |index| memos.get(index));
        assert_eq!(second, expected, "{}: from the memos", transcript.name);
        let alone = Tiktoken::default();
        for message in messages.iter().skip(2).step_by(3) {
            alone.count_message(message);
        }
        let lookups = |stats: condense_tokenizer::CacheStats| stats.hits + stats.misses;
        assert_eq!(
            lookups(fresh.cache_stats()),
            lookups(alone.cache_stats()),
            "{}",
            transcript.name
        );
        for (index, &count) in expected.iter().enumerate() {
            let kept = memos.get(index).and_then(|memo| memo.tokens(1));
            assert_eq!(
                kept,
                (index % 3 != 2).then_some(count),
                "{}",
                transcript.name
            );
        }
        let other = Tiktoken::new(Encoding::Cl100kBase);
        assert_eq!(
            count_each_memoized(&other, messages, |index| memos.get(index)),
            other.count_each(messages),
            "{}: another encoding",
            transcript.name
        );
    }
}

/// Tool-call arguments are looked up by their structure rather than their written-out JSON: the
/// count must still be the count of the JSON a request carries, cold and warm, for every call of
/// every shared transcript; and values that differ only in key order or kind are not confused.
#[test]
fn arguments_count_as_their_written_json_cold_and_warm() {
    let counter = Tiktoken::default();
    let mut calls = 0;
    for transcript in transcripts().unwrap() {
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        for part in conversation.messages.iter().flat_map(|m| &m.parts) {
            let Part::ToolCall(call) = part else { continue };
            let written = Tiktoken::default().count_text(&call.input.to_string());
            assert_eq!(
                counter.count_json(&call.input),
                written,
                "{}",
                transcript.name
            );
            assert_eq!(
                counter.count_json(&call.input),
                written,
                "{}",
                transcript.name
            );
            calls += 1;
        }
    }
    assert!(
        calls > 1_000,
        "only {calls} tool calls in the shared transcripts"
    );
    let ordered: serde_json::Value = serde_json::from_str(r#"{"a": "x y z", "b": 1}"#).unwrap();
    let reversed: serde_json::Value = serde_json::from_str(r#"{"b": 1, "a": "x y z"}"#).unwrap();
    assert_eq!(
        counter.count_json(&ordered),
        counter.count_text(&ordered.to_string())
    );
    assert_eq!(
        counter.count_json(&reversed),
        counter.count_text(&reversed.to_string())
    );
    assert_eq!(
        counter.count_json(&json!("12")),
        counter.count_text("\"12\"")
    );
    assert_eq!(counter.count_json(&json!(12)), counter.count_text("12"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn parallel_and_sequential_counts_agree(texts in prop::collection::vec("\\PC{0,300}", 0..40)) {
        let messages: Vec<Message> = texts
            .iter()
            .enumerate()
            .map(|(i, text)| Message::text(if i % 2 == 0 { Role::User } else { Role::Assistant }, text.clone()))
            .collect();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let sequential = Tiktoken::default().with_parallelism(Parallelism::Off).count_each(&messages);
        let parallel = pool.install(|| {
            Tiktoken::default().with_parallelism(Parallelism::Always).count_each(&messages)
        });
        prop_assert_eq!(parallel, sequential);
    }

    #[test]
    fn a_cached_count_equals_a_fresh_count(text in "\\PC{0,500}") {
        let counter = Tiktoken::default();
        let first = counter.count_text(&text);
        prop_assert_eq!(counter.count_text(&text), first);
        prop_assert_eq!(Tiktoken::default().count_text(&text), first);
    }
}

/// mini-swe-agent writes its commands in the assistant's text and gets the output back as user
/// text; reading turns those into tool pairs, which must not count the command twice. Checked
/// against the raw wire messages, counted as the plain strings they are.
#[test]
fn tool_use_carried_in_text_is_counted_once() {
    let counter = Tiktoken::default();
    for transcript in transcripts().unwrap() {
        if !transcript.name.starts_with("openai/mini-swe-agent") {
            continue;
        }
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        assert!(
            conversation.tool_pairs().pairs().len() > 10,
            "{}",
            transcript.name
        );
        let raw: serde_json::Value = serde_json::from_slice(&transcript.bytes).unwrap();
        let wire: usize = raw["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                overhead::PER_MESSAGE
                    + counter.count_text(m["role"].as_str().unwrap())
                    + counter.count_text(m["content"].as_str().unwrap())
            })
            .sum();
        assert_eq!(
            counter.count_conversation(&conversation),
            wire + overhead::REPLY_PRIMING,
            "{}",
            transcript.name
        );
    }
}

/// A tool's output can hold a run of spaces longer than tiktoken-rs's backtracking engine will
/// look ahead over (its own `encode_ordinary` panics on this text); the counter counts it.
#[test]
fn a_megabyte_run_of_spaces_is_counted_not_a_panic() {
    let counter = Tiktoken::default();
    let run = counter.count_text(&" ".repeat(1_199_999));
    assert!(run > 0 && run < 40_000, "{run}");
    assert_eq!(
        counter.count_text(&format!("{}x", " ".repeat(1_200_000))),
        run + 1
    );
}
