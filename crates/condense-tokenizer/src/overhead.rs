//! The tokens a request spends around the text itself.
//!
//! The numbers are OpenAI's, from the cookbook's "How to count tokens with tiktoken"
//! (`num_tokens_from_messages` for gpt-4o / gpt-4 / gpt-3.5-turbo-0613 and later), the same ones
//! tiktoken-rs's `num_tokens_from_messages` uses, so a plain chat counts exactly as it does there:
//! each message is framed as `<|start|>{role}<|message|>{content}<|end|>`, which costs
//! [`PER_MESSAGE`] tokens plus the role's own token; every reply is primed with
//! `<|start|>assistant<|message|>` ([`REPLY_PRIMING`], once per request); each tool call costs its
//! name, its arguments and [`PER_TOOL_CALL`].
//!
//! Anthropic does not publish its framing; the same numbers are used there, and a harness that has
//! the provider's reported usage should prefer it (the host does).

/// Framing tokens per message, before the role's own token.
pub const PER_MESSAGE: usize = 3;
/// Tokens that prime the model's reply, once per request.
pub const REPLY_PRIMING: usize = 3;
/// Framing tokens per tool call, on top of its name and arguments (tiktoken-rs's
/// `FUNCTION_CALL_OVERHEAD`).
pub const PER_TOOL_CALL: usize = 1;
