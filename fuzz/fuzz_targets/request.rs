//! The proxy's reader of request bodies (`Request`: one pass over the body, each message read
//! from its own bytes, a cache of messages already read) against the plain reader of a JSON
//! value: for any body, both refuse it or both give the same conversation, cold and warm.
#![no_main]

use condense_formats::{Format, MessageCache, Request, read_json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&choice, bytes)) = data.split_first() else {
        return;
    };
    let format = match choice % 3 {
        0 => Format::OpenAi,
        1 => Format::Anthropic,
        _ => Format::Responses,
    };
    let Ok(body) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok(request) = Request::parse_for(format, body) else {
        return;
    };
    let plain = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|value| read_json(format, value).ok());
    let cache = MessageCache::default();
    let cold = request.read(format, &cache).ok();
    let warm = request.read(format, &cache).ok();
    assert_eq!(cold, warm, "a warm read differs from the cold one");
    assert_eq!(
        cold, plain,
        "the request reader and the plain reader disagree"
    );
});
