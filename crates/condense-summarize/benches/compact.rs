//! Phase 2 offline: the split and the extractive summary of the largest transcript's head, with
//! a warm token cache (as in a harness, where the conversation was counted to decide that
//! compaction is due).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use condense_compact::{TailSettings, split};
use condense_core::testing::transcript;
use condense_summarize::{Extractive, ExtractiveSettings};
use condense_template::Template;
use condense_tokenizer::{Tiktoken, TokenCounter};
use criterion::{Criterion, criterion_group, criterion_main};

fn split_and_summarize(c: &mut Criterion) {
    let transcript = transcript("claude-code/5f8cbb78").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let counter = Arc::new(Tiktoken::default());
    let settings = TailSettings::built_in(32_000, 4_096).unwrap();
    let summarizer = Extractive::new(Template::builtin("structured").unwrap(), {
        let mut s = ExtractiveSettings::built_in().unwrap();
        s.counter = counter.clone();
        s
    });
    // Warm: the conversation is counted, and one summary made, before timing.
    counter.count_conversation(&conversation);
    let head = split(&conversation.messages, counter.as_ref(), &settings).head();
    summarizer.summary_of(&conversation.messages[head]).unwrap();

    c.bench_function(
        "split + extractive summary, claude-code/5f8cbb78 at 32K, warm cache",
        |b| {
            b.iter(|| {
                let cut = split(
                    black_box(&conversation.messages),
                    counter.as_ref(),
                    &settings,
                );
                summarizer
                    .summary_of(&conversation.messages[cut.head()])
                    .unwrap()
            })
        },
    );
}

criterion_group!(benches, split_and_summarize);
criterion_main!(benches);
