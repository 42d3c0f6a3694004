//! Phase 1 on every recorded session, at a small and a large context window (adaptive thresholds
//! on, so the two differ): a snapshot of every decision, and the invariants checked on real data.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::testing::transcripts;
use condense_core::{Part, ToolOutput};
use condense_pruner::{
    DecisionLog, FixedClock, MemoryStore, PruneRequest, PruneSettings, Pruner, Reason, Store,
};
use condense_tokenizer::{Tiktoken, TokenCounter};

#[test]
fn every_transcript_is_pruned_as_the_rules_say() {
    let counter = Tiktoken::default();
    let settings = {
        let mut s = PruneSettings::built_in().unwrap();
        s.rules.adaptive_thresholds = true;
        s
    };
    for transcript in transcripts().unwrap() {
        let (_, original) = condense_formats::read(&transcript.bytes, None).unwrap();
        for window in [32_000, 200_000] {
            let mut conversation = original.clone();
            let store = MemoryStore::new();
            let pruner = Pruner {
                settings: &settings,
                counter: &counter,
                store: &store,
                clock: &FixedClock(0),
            };
            let report = pruner
                .prune(
                    &mut conversation,
                    &mut DecisionLog::new(),
                    PruneRequest::window(Some(window)),
                )
                .unwrap();
            let name = format!("{}@{}k", transcript.name.replace('/', "__"), window / 1000);
            insta::assert_snapshot!(name.clone(), report.to_string());

            // Given the counts it would take itself, the pruner decides the same.
            let mut counted = original.clone();
            let counted_report = pruner
                .prune_counted(
                    &mut counted,
                    &counter.count_each(&original.messages),
                    &mut DecisionLog::new(),
                    PruneRequest::window(Some(window)),
                )
                .unwrap();
            assert_eq!(counted, conversation, "{name}: counted");
            assert_eq!(
                counted_report.to_string(),
                report.to_string(),
                "{name}: counted"
            );

            assert_eq!(
                conversation.validate(),
                original.validate(),
                "{name}: pairs changed"
            );
            assert_eq!(conversation.messages.len(), original.messages.len());
            for (output, (before, after)) in report
                .outputs
                .iter()
                .zip(results(&original).into_iter().zip(results(&conversation)))
            {
                let changed = before.content != after.content;
                let replaced = matches!(
                    output.reason,
                    Reason::Pruned
                        | Reason::Duplicate { .. }
                        | Reason::OverTurnBudget
                        | Reason::Superseded { .. }
                );
                assert_eq!(changed, replaced, "{name}: message {}", output.message);
                if output.message >= report.boundary {
                    assert!(
                        !changed || output.reason == Reason::OverTurnBudget,
                        "{name}: {} changed past the boundary",
                        output.message
                    );
                }
                if changed {
                    let marker = after.compacted.as_ref().unwrap();
                    let ToolOutput::Text(text) = &before.content else {
                        continue;
                    };
                    assert_eq!(
                        store.get(&marker.handle).unwrap(),
                        text.as_bytes(),
                        "{name}"
                    );
                }
            }
        }
    }
}

fn results(conversation: &condense_core::Conversation) -> Vec<condense_core::ToolResult> {
    conversation
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(Part::as_tool_result)
        .cloned()
        .collect()
}
