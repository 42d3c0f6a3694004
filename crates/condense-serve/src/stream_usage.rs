//! Asking a Chat Completions stream for its usage on the client's behalf.
//!
//! A Chat Completions stream reports no usage unless the request sets
//! `stream_options.include_usage`, and many clients leave it unset (LangChain's `ChatOpenAI`
//! whenever its base URL is not OpenAI's, as it is not when it points at this proxy; the
//! OpenAI SDKs unless told). Without the provider's count the session sizes
//! its requests by condense's own tokenizer and its margin, never by what the provider
//! counted. So the proxy adds the option to a stream request that has no `stream_options`,
//! reads the usage, and takes it out of the stream before the client reads it
//! ([`crate::answer::AnswerEdits::usage_asked`]). A request so asked that the upstream refuses
//! (other than as too long) is sent again without it. Where the option was the cause (the
//! refusal names it, as an older Azure API version's does, or the request goes through without
//! it, as it does past a gateway that refuses fields it does not know in words of its own), the
//! upstream is not asked again while the proxy runs.

use bytes::Bytes;
use condense_formats::Request;

/// What is added, first in the body's object.
const ASKED: &[u8] = br#""stream_options":{"include_usage":true},"#;

/// Whether to ask `request`, a Chat Completions body, for its stream's usage: it streams, and
/// says nothing of `stream_options` itself (a client that set it chose).
pub fn should_ask(request: &Request<'_>) -> bool {
    request
        .entry("stream")
        .is_some_and(|stream| stream.trim() == "true")
        && !request.has_entry("stream_options")
}

/// `body` (a JSON object) asking for its stream's usage, and where the addition starts;
/// `None` for a body that does not open with an object.
pub fn asked(body: &[u8]) -> Option<(Bytes, usize)> {
    let open = body.iter().position(|byte| !byte.is_ascii_whitespace())?;
    if body[open] != b'{' {
        return None;
    }
    let at = open + 1;
    let mut out = Vec::with_capacity(body.len() + ASKED.len());
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(ASKED);
    out.extend_from_slice(&body[at..]);
    Some((Bytes::from(out), at))
}

/// The body [`asked`] made, without the addition it made at `at`.
pub fn unasked(body: &[u8], at: usize) -> Bytes {
    let end = (at + ASKED.len()).min(body.len());
    let mut out = Vec::with_capacity(body.len().saturating_sub(ASKED.len()));
    out.extend_from_slice(&body[..at.min(body.len())]);
    out.extend_from_slice(&body[end..]);
    Bytes::from(out)
}

/// Whether an upstream's answer `status`, `body` says it refuses the option: a 400 or 422 that
/// names it (Azure's "Unrecognized request argument supplied: stream_options", a strict
/// server's "stream_options: Extra inputs are not permitted"). A refusal in other words is
/// told by the request going through without it.
pub fn refuses_option(status: u16, body: &[u8]) -> bool {
    matches!(status, 400 | 422) && memchr::memmem::find(body, b"stream_options").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn request(body: &str) -> Request<'_> {
        Request::parse(body).unwrap()
    }

    #[test]
    fn only_a_stream_that_says_nothing_of_its_options_is_asked() {
        assert!(should_ask(&request(
            r#"{"model":"m","stream": true,"messages":[]}"#
        )));
        assert!(!should_ask(&request(r#"{"model":"m","messages":[]}"#)));
        assert!(!should_ask(&request(
            r#"{"model":"m","stream":false,"messages":[]}"#
        )));
        // The client's own choice, either way, is left alone.
        for options in [
            r#"{"include_usage":false}"#,
            r#"{"include_usage":true}"#,
            "null",
        ] {
            let body = format!(r#"{{"stream":true,"stream_options":{options},"messages":[]}}"#);
            assert!(!should_ask(&request(&body)), "{options}");
        }
    }

    #[test]
    fn the_addition_is_valid_json_and_comes_out_whole() {
        let body = " \n{\"model\": \"m\", \"stream\": true, \"messages\": []}";
        let (with, at) = asked(body.as_bytes()).unwrap();
        let value: Value = serde_json::from_slice(&with).unwrap();
        assert_eq!(value["stream_options"], json!({"include_usage": true}));
        assert_eq!(value["model"], "m");
        assert_eq!(&unasked(&with, at)[..], body.as_bytes());
        assert!(asked(b"[1]").is_none());
        assert!(asked(b"  ").is_none());
    }

    #[test]
    fn a_refusal_names_the_option() {
        let azure = br#"{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error","param":null,"code":null}}"#;
        assert!(refuses_option(400, azure));
        assert!(refuses_option(
            422,
            br#"{"detail":[{"loc":["body","stream_options"],"msg":"Extra inputs are not permitted"}]}"#
        ));
        assert!(!refuses_option(500, azure));
        assert!(!refuses_option(
            400,
            br#"{"error":{"message":"maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#
        ));
    }
}
