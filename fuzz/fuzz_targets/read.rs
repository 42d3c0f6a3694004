//! The five readers: any bytes either fail with an error or give a conversation whose parts
//! survive write -> read, and whose written form is a fixed point; a session log also reads whole,
//! and its inline subagent threads read or fail with an error.
#![no_main]

use condense_formats::{Format, read, write};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks a forced format (or detection), so every reader sees every input.
    let Some((&choice, bytes)) = data.split_first() else {
        return;
    };
    let forced = match choice % 6 {
        0 => None,
        1 => Some(Format::OpenAi),
        2 => Some(Format::Anthropic),
        3 => Some(Format::Responses),
        4 => Some(Format::ClaudeCode),
        _ => Some(Format::Codex),
    };
    let Ok((format, conversation)) = read(bytes, forced) else {
        return;
    };
    // A replay reads a log whole: every log that reads, reads whole, with at least the
    // messages the model sees now (what came before an agent's own compaction adds to them).
    if format.is_jsonl() {
        let whole =
            condense_formats::read_whole(bytes, format).expect("a log that reads, reads whole");
        assert!(whole.messages.len() >= conversation.messages.len());
        // And the subagent threads it keeps inline read too, or fail with an error; each starts
        // at a message line, so each has a message.
        if let Ok(subagents) = condense_formats::subagents(bytes, format) {
            for subagent in subagents {
                assert!(!subagent.conversation.messages.is_empty(), "{}", subagent.name);
            }
        }
    }
    let written = write(format, &conversation).expect("a conversation that was read writes");
    let (again_format, again) = read(&written, Some(format)).expect("what was written reads");
    assert_eq!(again_format, format);
    // The first write may normalise the envelope (a Claude Code line whose parent is missing is
    // linked to the line before it, as after compaction); the parts never change...
    let parts = |c: &condense_core::Conversation| {
        c.messages
            .iter()
            .map(|m| (m.role, m.parts.clone()))
            .collect::<Vec<_>>()
    };
    let (first_parts, again_parts) = (parts(&conversation), parts(&again));
    if format == Format::ClaudeCode && again_parts != first_parts {
        // ... except that a Claude Code log whose chain is broken is read line by line, and
        // writing repairs the chain: read again along it, a branch the repair reveals is
        // beside the history. Its lines are still in the log, and the history is what the
        // first reading held, less those: part by part, since two lines of one reply read as
        // one message may end up one on each side (read run 21).
        let flat = |parts: &[(condense_core::Role, Vec<condense_core::Part>)]| {
            parts
                .iter()
                .flat_map(|(role, parts)| parts.iter().map(move |part| (*role, part.clone())))
                .collect::<Vec<_>>()
        };
        let (first_flat, again_flat) = (flat(&first_parts), flat(&again_parts));
        let mut rest = first_flat.iter();
        assert!(
            again_flat
                .iter()
                .all(|part| rest.any(|first| first == part)),
            "read -> write -> read changed the parts"
        );
        let lines = written.iter().filter(|&&byte| byte == b'\n').count();
        let read_lines: usize =
            again.messages.iter().map(|m| m.wire.len()).sum::<usize>() + again.side.len();
        assert_eq!(read_lines, lines, "a line of the written log was not read");
    } else {
        assert_eq!(
            again_parts, first_parts,
            "read -> write -> read changed the parts"
        );
    }
    // ... and from then on writing is a fixed point.
    let rewritten = write(format, &again).expect("writes again");
    assert_eq!(rewritten, written, "writing is stable");
    let (_, third) = read(&rewritten, Some(format)).expect("reads again");
    assert_eq!(third.messages, again.messages);
});
