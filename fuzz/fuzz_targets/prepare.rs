//! `prepare` on arbitrary valid conversations, built from the input as a script of turns, calls
//! (reads and edits of a few paths, spelt several ways, so that later calls supersede earlier
//! reads) and outputs: no tool call or result is orphaned, protected outputs are untouched, the last
//! message is kept, and a second request with the same history gives the same bytes.
#![no_main]

use condense_core::testing::{tool_call, tool_result};
use std::sync::OnceLock;

use condense_core::{Conversation, Message, Part, Role, ToolOutput};
use condense_host::{CompactionOutcome, Compactor, Config, ReportedUsage, SessionState, Sources};
use condense_pruner::{FixedClock, MemoryStore};
use condense_tokenizer::{Tiktoken, TokenCounter};
use libfuzzer_sys::fuzz_target;

const TOOLS: [&str; 4] = ["bash", "read_file", "skill", "grep"];

/// The files the calls name, one file under three spellings (relative, absolute in the working
/// directory the system prompt names, with `.` and `..`) and another: the superseded-read rule
/// must match the first three as one path.
const PATHS: [&str; 4] = ["src/a.rs", "/w/src/a.rs", "./src/../src/a.rs", "notes.txt"];

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let mut sources = Sources::default();
        for (key, value) in [
            ("model.context_window", "6000"),
            ("model.max_output_tokens", "1000"),
            ("prune.protect_tokens", "800"),
            ("prune.minimum_tokens", "100"),
            ("prune.turn_budget_chars", "6000"),
        ] {
            sources
                .flags
                .push(("--fuzz".into(), key.into(), value.into()));
        }
        Config::load(&sources).expect("the fuzz configuration is valid")
    })
}

fn text(seed: u8, len: usize) -> String {
    let words = ["alpha", "beta", "gamma", "delta", "λ", "日本", "0x1f", "\n"];
    (0..len)
        .map(|i| words[(usize::from(seed) + i * 7) % words.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

/// Two bytes per step: what happens, and how big (outputs up to about 400 words, so one run
/// stays fast enough to explore: the rules care about relative sizes, not megabytes).
fn conversation(data: &[u8]) -> Conversation {
    let mut messages = vec![Message::new(
        Role::System,
        vec![Part::text("You are an agent.\n<env>\n  Working directory: /w\n</env>")],
    )];
    let mut next_id = 0usize;
    for pair in data.chunks(2) {
        let (op, size) = (pair[0], usize::from(*pair.get(1).unwrap_or(&1)));
        match op % 4 {
            0 => messages.push(Message::new(
                Role::User,
                vec![Part::text(text(op, size % 40 + 1))],
            )),
            1 => messages.push(Message::new(
                Role::Assistant,
                vec![Part::text(text(op, size % 30 + 1))],
            )),
            _ => {
                let calls = usize::from(op % 3) + 1;
                let mut call_parts = Vec::new();
                let mut results = Vec::new();
                for k in 0..calls {
                    let id = format!("call_{next_id}");
                    next_id += 1;
                    let tool = TOOLS[(usize::from(op) + k) % TOOLS.len()];
                    // A read of one of the paths, or a shell command that shows or edits one
                    // (or just words): so that later calls supersede earlier reads.
                    let path = PATHS[(usize::from(op >> 2) + k) % PATHS.len()];
                    let input = match (tool, op >> 5) {
                        ("read_file", _) => serde_json::json!({"path": path}),
                        ("bash", 0..=2) => serde_json::json!({"command": format!("cat {path}")}),
                        ("bash", 3..=4) => {
                            serde_json::json!({"command": format!("sed -i s/a/b/ {path}")})
                        }
                        _ => serde_json::json!({"command": text(op, 3)}),
                    };
                    call_parts.push(tool_call(id.clone(), tool, input));
                    results.push(Message::new(
                        Role::Tool,
                        vec![tool_result(id, text(op ^ k as u8, (size % 64) * 6 + 1))],
                    ));
                }
                messages.push(Message::new(Role::Assistant, call_parts));
                messages.extend(results);
            }
        }
    }
    Conversation::new(messages)
}

fn protected_outputs(conversation: &Conversation) -> Vec<(String, ToolOutput)> {
    let pairs = conversation.tool_pairs();
    conversation
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|part| match part {
            Part::ToolResult(result)
                if pairs.tool_name(&conversation.messages, result) == Some("skill") =>
            {
                Some((result.call_id.clone(), result.content.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Built once: loading the tokenizer takes far longer than one run, and a harness keeps one
/// compactor per process too. The store is content-addressed, so sharing it changes nothing.
fn compactor() -> &'static Compactor {
    static COMPACTOR: OnceLock<Compactor> = OnceLock::new();
    COMPACTOR.get_or_init(|| {
        Compactor::from_config(config())
            .expect("the compactor builds")
            .with_store(Box::new(MemoryStore::new()))
            .with_clock(Box::new(FixedClock(1_763_700_000_000)))
    })
}

fuzz_target!(|data: &[u8]| {
    let conversation = conversation(data);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let run = |state: &mut SessionState| {
        runtime
            .block_on(compactor().prepare(conversation.clone(), state))
            .expect("prepare succeeds with an in-memory store")
    };
    // An odd-length input also says the harness reported the provider's count of the request
    // that ended at the last message, with up to 5,100 tokens of tool definitions and system
    // prompt beside the messages (the trigger and the tail then work in the provider's count).
    let mut state = SessionState::default();
    if data.len() % 2 == 1 && conversation.messages.len() > 1 {
        static COUNTER: OnceLock<Tiktoken> = OnceLock::new();
        let counter = COUNTER.get_or_init(Tiktoken::default);
        let ours: usize = counter.count_each(&conversation.messages).iter().sum();
        state.reported_usage = Some(ReportedUsage {
            message: conversation.messages.len() - 1,
            tokens: ours + usize::from(data[0]) * 20,
        });
    }
    let first = run(&mut state);
    let out = &first.conversation;
    assert!(
        out.validate().is_empty(),
        "pairs broken: {:?}",
        out.validate()
    );
    let before = protected_outputs(&conversation);
    let after = protected_outputs(out);
    assert_eq!(after.len(), before.len(), "a protected output was dropped");
    for (id, content) in &after {
        if let Some((_, original)) = before.iter().find(|(b, _)| b == id) {
            assert_eq!(content, original, "protected output {id} changed");
        }
    }
    // Automatic compaction ends with the continuation message, the session's own last message
    // right before it; unless that message is the assistant's (a prefill), which stays last.
    let mut ending = out.messages.iter().rev().peekable();
    let prefilled = conversation
        .messages
        .last()
        .is_some_and(|message| message.role == Role::Assistant);
    if matches!(
        &first.report.compaction,
        CompactionOutcome::Summarized { .. }
    ) && !prefilled
    {
        ending.next();
    }
    if let (Some(last_in), Some(last_out)) = (conversation.messages.last(), ending.next())
        && conversation.messages.len() > 1
    {
        assert_eq!(last_in.role, last_out.role, "the last message is kept");
        if !last_in
            .parts
            .iter()
            .any(|p| matches!(p, Part::ToolResult(_)))
        {
            assert_eq!(last_in, last_out, "the last message is kept as it was");
        }
    }
    let second = run(&mut state);
    assert_eq!(
        serde_json::to_string(&second.conversation.messages).expect("serialises"),
        serde_json::to_string(&first.conversation.messages).expect("serialises"),
        "the same history with the same state gives the same bytes"
    );
});
