//! The three readers: any bytes either fail with an error or give a conversation that writes
//! and reads back to the same conversation (bytes -> read -> write -> read is stable).
#![no_main]

use condense_formats::{Format, read, write};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks a forced format (or detection), so every reader sees every input.
    let Some((&choice, bytes)) = data.split_first() else {
        return;
    };
    let forced = match choice % 4 {
        0 => None,
        1 => Some(Format::OpenAi),
        2 => Some(Format::Anthropic),
        _ => Some(Format::ClaudeCode),
    };
    let Ok((format, conversation)) = read(bytes, forced) else {
        return;
    };
    let written = write(format, &conversation).expect("a conversation that was read writes");
    let (again_format, again) = read(&written, Some(format)).expect("what was written reads");
    assert_eq!(again_format, format);
    assert_eq!(again.messages, conversation.messages, "read -> write -> read changed it");
    let rewritten = write(format, &again).expect("writes again");
    assert_eq!(rewritten, written, "writing is stable");
});
