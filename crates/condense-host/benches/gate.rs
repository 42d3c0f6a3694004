//! The gate's own cost: judging a model's answer on the largest shared session's head at 32K,
//! beside making the extractive summary of the same head (what stands in when the gate
//! rejects), and the ledger a model's accepted answer gets.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use condense_compact::{TailSettings, split};
use condense_core::testing::transcript;
use condense_summarize::{Extractive, ExtractiveSettings};
use condense_template::Template;
use condense_tokenizer::{Tiktoken, TokenCounter};
use criterion::{Criterion, criterion_group, criterion_main};

fn gate(c: &mut Criterion) {
    let transcript = transcript("claude-code/5f8cbb78").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let counter = Arc::new(Tiktoken::default());
    let settings = TailSettings::built_in(32_000, 4_096).unwrap();
    let template = Template::builtin("structured").unwrap();
    let summarizer = Extractive::new(template.clone(), {
        let mut s = ExtractiveSettings::built_in().unwrap();
        s.counter = counter.clone();
        s
    });
    counter.count_conversation(&conversation);
    let cut = split(&conversation.messages, counter.as_ref(), &settings);
    let head = &conversation.messages[cut.head()];
    let head_tokens: usize = head
        .iter()
        .map(|message| counter.count_message(message))
        .sum();
    // The answer judged: a summary as a model would write it (the extractive one, which the
    // gate passes), and the prompt it answered.
    let answer = summarizer.summary_of(head).unwrap();
    let prompt = template
        .render_prompt(&condense_template::PromptVars {
            context_window: 32_000,
            date: "2026-11-25".into(),
            ..Default::default()
        })
        .unwrap();
    let sections = template.sections().len();

    let mut group = c.benchmark_group("gate, claude-code/5f8cbb78 at 32K");
    group.bench_function("judge a model's answer", |b| {
        b.iter(|| {
            condense_host::gate::judge(
                black_box(&answer),
                0,
                sections,
                &prompt,
                head,
                head_tokens,
                counter.as_ref(),
            )
        })
    });
    group.bench_function("the ledger under it", |b| {
        b.iter(|| condense_summarize::ledger(black_box(head)))
    });
    group.bench_function("baseline: the extractive summary", |b| {
        b.iter(|| summarizer.summary_of(black_box(head)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, gate);
criterion_main!(benches);
