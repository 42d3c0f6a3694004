//! The reply's limit a request names, lowered to the room its input leaves in the window.
//!
//! Anthropic's Messages API refuses a request whose input and `max_tokens` together exceed the
//! model's window ("input length and `max_tokens` exceed context limit: 193125 + 21333 >
//! 200000", as Claude Code 2.0.76 users report it, their session stuck on it:
//! anthropics/claude-code#16580), and OpenAI's Chat Completions one whose messages and
//! completion limit do ("However, you requested N tokens (X in the messages, Y in the
//! completion)"). condense lets a request's input grow to the window less the reply's
//! reserve (`min(reserve_cap, max_output_tokens)`), and, where a system prompt and tools leave
//! the conversation little, to a share of what they leave (`Line::limit`): a harness that asks
//! for a longer reply than the room left would be refused. condense lowers the limit to that
//! room before the request goes out. A reply could not have been longer than the room anyway;
//! the lower limit takes from the model only the estimate's margin.

use condense_core::Conversation;
use serde::Serialize;
use serde_json::Value;

/// The keys a request names its reply's limit by: Anthropic's and Chat Completions' older
/// `max_tokens`, Chat Completions' `max_completion_tokens`, the Responses API's
/// `max_output_tokens`.
const LIMIT_KEYS: [&str; 3] = ["max_tokens", "max_completion_tokens", "max_output_tokens"];

/// The share of the part of an estimate condense counted at the session's line's scale, left
/// unasked beside it: the provider's figure is exact up to its last answer, but what came since,
/// and a request a summary rewrote, are condense's count taken to the provider's through the
/// line, which a message unlike the others misses by a little, and a request one token over is
/// refused whole. (A choice, not a measure.)
pub(crate) const ESTIMATE_MARGIN: f64 = 0.01;

/// The provider's count of a request as condense estimates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Estimate {
    /// The estimate.
    pub tokens: usize,
    /// What is left unasked beside it where the limit asked does not fit: how far the estimate
    /// may fall short.
    pub margin: usize,
}

/// The least thinking budget Anthropic takes: a request whose lowered limit leaves less than
/// this beside a thinking budget is left as it came (the provider's refusal says why).
const MIN_THINKING_BUDGET: u64 = 1_024;

/// A reply limit condense lowered, in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReplyLimit {
    /// The limit the client asked for.
    pub asked: u64,
    /// The limit sent: the window less the provider's count of the input, as condense
    /// estimates it, and the estimate's margin.
    pub sent: u64,
}

/// Lowers `conversation`'s reply limit to what `window` leaves beside `input` (the provider's
/// count of the request, as condense estimates it, and its margin), where the limit it names is
/// more; with an Anthropic thinking budget that would no longer be less than the limit, the
/// budget too, to one token less. `None`, and the request unchanged, where it names no limit,
/// where the limit fits, where the input alone takes the window, or where the room would not
/// hold the least thinking budget beside a reply.
pub(crate) fn fit(
    conversation: &mut Conversation,
    window: usize,
    input: Estimate,
) -> Option<ReplyLimit> {
    let envelope = conversation.envelope.as_mut()?;
    let key = LIMIT_KEYS
        .into_iter()
        .find(|key| envelope.get(*key).is_some_and(Value::is_u64))?;
    let asked = envelope.get(key).and_then(Value::as_u64)?;
    let room = window
        .checked_sub(input.tokens.saturating_add(input.margin))
        .filter(|room| *room > 0)? as u64;
    if asked <= room {
        return None;
    }
    if let Some(thinking) = envelope
        .get_mut("thinking")
        .and_then(Value::as_object_mut)
        .filter(|thinking| {
            let budget = thinking.get("budget_tokens").and_then(Value::as_u64);
            budget.is_some_and(|budget| budget >= room)
        })
    {
        if room <= MIN_THINKING_BUDGET {
            return None;
        }
        thinking.insert("budget_tokens".into(), (room - 1).into());
    }
    envelope.insert(key.into(), room.into());
    Some(ReplyLimit { asked, sent: room })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn estimate(tokens: usize, margin: usize) -> Estimate {
        Estimate { tokens, margin }
    }

    fn asking(envelope: Value) -> Conversation {
        let mut conversation = Conversation::new(Vec::new());
        conversation.envelope = envelope.as_object().cloned();
        conversation
    }

    #[test]
    fn a_limit_past_the_room_is_lowered_to_it() {
        let mut conversation = asking(json!({"model": "claude", "max_tokens": 32_000}));
        // 200,000 less the input and its margin.
        let lowered = fit(&mut conversation, 200_000, estimate(179_000, 40));
        let sent = ReplyLimit {
            asked: 32_000,
            sent: 20_960,
        };
        assert_eq!(lowered, Some(sent));
        assert_eq!(conversation.envelope.unwrap()["max_tokens"], 20_960);
    }

    #[test]
    fn a_limit_that_fits_is_left_as_it_came() {
        let mut conversation = asking(json!({"model": "gpt", "max_completion_tokens": 4_096}));
        let before = conversation.clone();
        assert_eq!(fit(&mut conversation, 32_000, estimate(27_000, 10)), None);
        assert_eq!(conversation, before);
    }

    #[test]
    fn each_api_s_key_is_the_one_lowered() {
        for key in LIMIT_KEYS {
            let mut conversation = asking(json!({"model": "m", key: 8_000}));
            assert!(
                fit(&mut conversation, 10_000, estimate(6_000, 0)).is_some(),
                "{key}"
            );
            assert_eq!(conversation.envelope.unwrap()[key], 4_000, "{key}");
        }
    }

    #[test]
    fn a_thinking_budget_stays_under_the_lowered_limit() {
        let mut conversation = asking(json!({
            "max_tokens": 32_000,
            "thinking": {"type": "enabled", "budget_tokens": 31_999}
        }));
        fit(&mut conversation, 200_000, estimate(190_000, 0)).unwrap();
        let envelope = conversation.envelope.unwrap();
        assert_eq!(envelope["max_tokens"], 10_000);
        assert_eq!(envelope["thinking"]["budget_tokens"], 9_999);
    }

    #[test]
    fn no_limit_an_input_over_the_window_or_no_room_to_think_is_left_alone() {
        let none = json!({"model": "gpt"});
        let over = json!({"max_tokens": 4_096});
        let thinking =
            json!({"max_tokens": 4_096, "thinking": {"type": "enabled", "budget_tokens": 2_048}});
        for (envelope, input) in [(none, 31_000), (over, 33_000), (thinking, 31_000)] {
            let mut conversation = asking(envelope);
            let before = conversation.clone();
            assert_eq!(fit(&mut conversation, 32_000, estimate(input, 0)), None);
            assert_eq!(conversation, before);
        }
    }
}
