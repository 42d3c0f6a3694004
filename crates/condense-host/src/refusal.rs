//! A provider's refusal of a request as longer than the model's window, and the count of the
//! request's input it gives in its error.
//!
//! Before the provider's first figure for a session, condense measures a request with its own
//! tokenizer (the tool definitions as their JSON, which the provider renders its own way): a
//! resumed session's first request, or one to a model whose tokenizer counts far more than
//! condense's, can go out over the window.
//! The provider then says how long it counted the request, and that is the figure condense
//! needed: recorded in the session ([`crate::SessionState::record_refusal`]), the same history
//! prepared again is compacted to fit. `condense serve` does this itself, once per request; a
//! harness that embeds condense does it with this module.

use serde_json::Value;

/// A provider's refusal of a request as longer than the model's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TooLong {
    /// With the provider's count of the request's input.
    Counted(usize),
    /// Without a count: more than the window, by how much not said (OpenAI's Responses API:
    /// `Your input exceeds the context window of this model`, code `context_length_exceeded`).
    Uncounted,
}

impl TooLong {
    /// The provider's count of the refused request's input: the count it gave or, without one,
    /// one token over the model's `window`, the least the refusal says.
    pub fn input_tokens(self, window: usize) -> usize {
        match self {
            TooLong::Counted(tokens) => tokens,
            TooLong::Uncounted => window.saturating_add(1),
        }
    }
}

/// Whether the error `body` refuses a request as longer than the model's window, and with the
/// provider's count of its input where it gives one; `None` for any other error. The errors
/// read, in the provider's own words:
///
/// - Anthropic: `prompt is too long: 208310 tokens > 200000 maximum`, and `input length and
///   `max_tokens` exceed context limit: 193125 + 21333 > 200000` (the input fits, the reply's
///   limit beside it does not).
/// - OpenAI's Chat Completions (and servers that speak it, llama.cpp's among them): `This
///   model's maximum context length is 8192 tokens. However, you requested 9047 tokens (9031 in
///   the messages, 16 in the completion)`, with `N in the functions` where tools are sent, or
///   `However, your messages resulted in 130532 tokens`; code `context_length_exceeded`. Older
///   servers (vLLM's, Gemini's OpenAI endpoint): `However, you requested 8977 tokens (8977 in
///   your prompt; 0 for the completion)`.
/// - OpenRouter: `This endpoint's maximum context length is 204800 tokens. However, you
///   requested about 205432 tokens (81684 of text input, 3748 of tool input, 120000 in the
///   output)`: the inputs summed.
/// - OpenAI's Responses API: code `context_length_exceeded`, no count.
///
/// `body` is the provider's error body (`{"error": {...}}`), or its `error` object alone, as
/// the providers' SDKs keep it.
pub fn too_long(body: &[u8]) -> Option<TooLong> {
    let body: Value = serde_json::from_slice(body).ok()?;
    let error = match body.get("error") {
        Some(error) if error.is_object() => error,
        _ => &body,
    };
    let message = error["message"].as_str().unwrap_or_default();
    match anthropic(message).or_else(|| openai(message)) {
        Some(tokens) => Some(TooLong::Counted(tokens)),
        None => (error["code"] == "context_length_exceeded").then_some(TooLong::Uncounted),
    }
}

/// Anthropic's two refusals for length.
fn anthropic(message: &str) -> Option<usize> {
    ["prompt is too long: ", "exceed context limit: "]
        .iter()
        .find_map(|lead| number_after(message, lead))
}

/// OpenAI's: the messages and the functions (the tools) where it names them apart from the
/// completion, else the whole the messages came to.
fn openai(message: &str) -> Option<usize> {
    if !message.contains("maximum context length") {
        return None;
    }
    let messages = number_before(message, " in the messages");
    let functions = number_before(message, " in the functions").unwrap_or(0);
    messages
        .map(|messages| messages + functions)
        .or_else(|| number_after(message, "resulted in "))
        .or_else(|| number_before(message, " in your prompt"))
        .or_else(|| inputs(message))
}

/// OpenRouter's parts of a request's input, each `N of KIND input` (text, tool, image),
/// summed; `None` where it names none.
fn inputs(message: &str) -> Option<usize> {
    let mut total = None;
    let mut rest = message;
    while let Some(at) = rest.find(" of ") {
        let (before, after) = (&rest[..at], &rest[at + " of ".len()..]);
        let kind_end = after.find([',', ')', ';']).unwrap_or(after.len());
        if after[..kind_end].ends_with(" input")
            && let Some(tokens) = trailing_number(before)
        {
            total = Some(total.unwrap_or(0) + tokens);
        }
        rest = after;
    }
    total
}

/// The whole number right after the first `lead` in `text`.
fn number_after(text: &str, lead: &str) -> Option<usize> {
    let rest = &text[text.find(lead)? + lead.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The whole number right before the first `tail` in `text`.
fn number_before(text: &str, tail: &str) -> Option<usize> {
    trailing_number(&text[..text.find(tail)?])
}

/// The whole number `text` ends with.
fn trailing_number(text: &str) -> Option<usize> {
    let start = text
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |at| at + 1);
    text[start..].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(message: &str) -> Vec<u8> {
        serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
            .to_string()
            .into_bytes()
    }

    /// The count `message` gives, as [`too_long`] reads it.
    fn refused_input(body: &[u8]) -> Option<usize> {
        match too_long(body)? {
            TooLong::Counted(tokens) => Some(tokens),
            TooLong::Uncounted => None,
        }
    }

    #[test]
    fn anthropic_s_refusals_give_the_input_s_count() {
        assert_eq!(
            refused_input(&body("prompt is too long: 208310 tokens > 200000 maximum")),
            Some(208_310)
        );
        assert_eq!(
            refused_input(&body(
                "input length and `max_tokens` exceed context limit: 193125 + 21333 > 200000, decrease input length or `max_tokens` and try again"
            )),
            Some(193_125)
        );
    }

    #[test]
    fn openai_s_refusals_give_the_messages_and_the_functions() {
        // llama.cpp's server, word for word (the shared model server's answer to 9,000 words).
        assert_eq!(
            refused_input(&body(
                "This model's maximum context length is 8192 tokens. However, you requested 9047 tokens (9031 in the messages, 16 in the completion). Please reduce the length of the messages or completion."
            )),
            Some(9_031)
        );
        assert_eq!(
            refused_input(&body(
                "This model's maximum context length is 128000 tokens. However, you requested 131000 tokens (126000 in the messages, 4000 in the functions, and 1000 in the completion). Please reduce the length of the messages, functions, or completion."
            )),
            Some(130_000)
        );
        assert_eq!(
            refused_input(&body(
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages."
            )),
            Some(130_532)
        );
    }

    #[test]
    fn openrouter_s_and_older_servers_refusals_give_the_input() {
        assert_eq!(
            refused_input(&body(
                "This endpoint's maximum context length is 204800 tokens. However, you requested about 205432 tokens (81684 of text input, 3748 of tool input, 120000 in the output). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically."
            )),
            Some(85_432)
        );
        assert_eq!(
            refused_input(&body(
                "This endpoint's maximum context length is 16384 tokens. However, you requested about 94307 tokens (94307 of text input). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically."
            )),
            Some(94_307)
        );
        assert_eq!(
            refused_input(&body(
                "This model's maximum context length is 8192 tokens, however you requested 8977 tokens (8977 in your prompt; 0 for the completion). Please reduce your prompt; or completion length."
            )),
            Some(8_977)
        );
    }

    /// The `error` object alone, as OpenAI's and Anthropic's SDKs keep it (`error.body`).
    #[test]
    fn the_error_object_alone_is_read_too() {
        let alone = serde_json::json!({"type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum"});
        assert_eq!(
            too_long(alone.to_string().as_bytes()),
            Some(TooLong::Counted(208_310))
        );
    }

    #[test]
    fn the_responses_api_s_refusal_has_no_count() {
        let refusal = serde_json::json!({"error": {
            "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}});
        assert_eq!(
            too_long(refusal.to_string().as_bytes()),
            Some(TooLong::Uncounted)
        );
    }

    #[test]
    fn other_errors_are_not_refusals_for_length() {
        for message in [
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "messages.3: `tool_use` ids were found without `tool_result` blocks immediately after",
            "prompt is too long",
            "",
        ] {
            assert_eq!(too_long(&body(message)), None, "{message}");
        }
        assert_eq!(too_long(b"not json"), None);
        assert_eq!(too_long(b"{\"error\": \"a string\"}"), None);
    }
}
