//! A provider's refusal of a request as longer than the model's window, and the count of the
//! request's input it gives in its error.
//!
//! Before the provider's first figure for a session, condense measures a request with its own
//! tokenizer and without the tools the request carries: a resumed session's first request, or
//! one to a model whose tokenizer counts far more than condense's, can go out over the window.
//! The provider then says how long it counted the request, and that is the figure condense
//! needed: the proxy records it and prepares the request again ([`crate::Proxy`]).

use serde_json::Value;

/// The provider's count of the input of a request whose error `body` refuses it as longer than
/// the model's window; `None` where the body is not such a refusal or gives no count. The
/// errors read, in the provider's own words:
///
/// - Anthropic: `prompt is too long: 208310 tokens > 200000 maximum`, and `input length and
///   `max_tokens` exceed context limit: 193125 + 21333 > 200000` (the input fits, the reply's
///   limit beside it does not).
/// - OpenAI's Chat Completions (and servers that speak it, llama.cpp's among them): `This
///   model's maximum context length is 8192 tokens. However, you requested 9047 tokens (9031 in
///   the messages, 16 in the completion)`, with `N in the functions` where tools are sent, or
///   `However, your messages resulted in 130532 tokens`.
pub(crate) fn refused_input(body: &[u8]) -> Option<usize> {
    let error: Value = serde_json::from_slice(body).ok()?;
    let message = error["error"]["message"].as_str()?;
    anthropic(message).or_else(|| openai(message))
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
}

/// The whole number right after the first `lead` in `text`.
fn number_after(text: &str, lead: &str) -> Option<usize> {
    let rest = &text[text.find(lead)? + lead.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The whole number right before the first `tail` in `text`.
fn number_before(text: &str, tail: &str) -> Option<usize> {
    let before = &text[..text.find(tail)?];
    let start = before
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |at| at + 1);
    before[start..].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(message: &str) -> Vec<u8> {
        serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
            .to_string()
            .into_bytes()
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
    fn other_errors_give_nothing() {
        for message in [
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            "messages.3: `tool_use` ids were found without `tool_result` blocks immediately after",
            "prompt is too long",
            "",
        ] {
            assert_eq!(refused_input(&body(message)), None, "{message}");
        }
        assert_eq!(refused_input(b"not json"), None);
        assert_eq!(refused_input(b"{\"error\": \"a string\"}"), None);
    }
}
