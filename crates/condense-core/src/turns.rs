use crate::Message;

/// Indices of the user turns in `messages`, oldest first (see [`Message::is_user_turn`]).
pub fn user_turns(messages: &[Message]) -> Vec<usize> {
    messages
        .iter()
        .enumerate()
        .filter(|(_, message)| message.is_user_turn())
        .map(|(index, _)| index)
        .collect()
}
