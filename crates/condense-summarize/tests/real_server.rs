//! A real OpenAI-compatible server: llama.cpp with SmolLM2-135M and its 8,192-token window,
//! started by `../shared/llm/serve.sh` (`.ci/run` starts it, sets `CONDENSE_LLM_URL` and requires
//! it with `CONDENSE_REQUIRE_LLM=1`; elsewhere the test says on the terminal that it was skipped). The head
//! of a real session is far larger than that window, so the chunked path runs for real, and the
//! server's own `context_length_exceeded` refusals must be handled before they reach the caller.
#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use condense_compact::{TailSettings, split};
use condense_summarize::{OpenAi, RemoteSettings, Summarizer};
use condense_template::{PromptVars, Template};
use condense_tokenizer::{Tiktoken, TokenCounter};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_head_is_summarized_by_a_real_small_model() {
    let Some(base_url) = condense_core::testing::required_url(
        "a_real_head_is_summarized_by_a_real_small_model",
        "CONDENSE_LLM_URL",
        "CONDENSE_REQUIRE_LLM",
    ) else {
        return;
    };
    let transcript =
        condense_core::testing::transcript("openai/openhands-ponylang__ponyc-4595").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let counter = Tiktoken::default();
    let tail = TailSettings::built_in(16_000, 4_096).unwrap();
    let split = split(&conversation.messages, &counter, &tail);
    let head = &conversation.messages[split.head()];
    let head_tokens: usize = counter.count_each(head).iter().sum();
    assert!(
        head_tokens > 2 * 8_192,
        "the head ({head_tokens} tokens) must be far larger than the model's window"
    );

    let mut settings = RemoteSettings::new(base_url, "smollm2").unwrap();
    settings.api_key_env = None;
    settings.context_window = 8_192;
    settings.max_summary_tokens = 384;
    settings.timeout = Duration::from_secs(300);
    let template = Template::builtin("structured").unwrap();
    let prompt = template
        .render_prompt(&PromptVars {
            context_window: 16_000,
            date: "2026-11-21".into(),
            ..PromptVars::default()
        })
        .unwrap();
    let summary = OpenAi::new(settings)
        .unwrap()
        .summarize(head, &prompt)
        .await;
    let summary = summary
        .unwrap_or_else(|error| panic!("the real server's answer did not make a summary: {error}"));
    assert!(!summary.trim().is_empty());
    eprintln!("summary of {head_tokens} tokens by SmolLM2-135M:\n{summary}");
}
