use std::collections::{HashMap, HashSet};

use crate::{Message, Part, ToolCall, ToolResult};

/// Where a tool call sits: message index and part index within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallSite {
    /// The message holding the call.
    pub message: usize,
    /// The call's index among that message's parts.
    pub part: usize,
}

/// Where a tool result sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResultSite {
    /// The message holding the result.
    pub message: usize,
    /// The result's index among that message's parts.
    pub part: usize,
}

/// Calls and results of a conversation, indexed by call id.
///
/// When an id is used twice (a defect [`crate::validate()`] reports) the first call and the first
/// result win, so lookups stay deterministic.
#[derive(Debug, Clone, Default)]
pub struct ToolPairs<'m> {
    calls: HashMap<&'m str, CallSite>,
    results: HashMap<&'m str, ResultSite>,
}

impl<'m> ToolPairs<'m> {
    /// Indexes every call and result of `messages` by call id. The index borrows the ids: it is
    /// made on every request (by the pruner, the split, the summarizers), and copying each id
    /// was most of its cost.
    pub fn index(messages: &'m [Message]) -> Self {
        let mut pairs = ToolPairs::default();
        for (message_index, message) in messages.iter().enumerate() {
            for (part_index, part) in message.parts.iter().enumerate() {
                match part {
                    Part::ToolCall(call) => {
                        pairs.calls.entry(call.id.as_str()).or_insert(CallSite {
                            message: message_index,
                            part: part_index,
                        });
                    }
                    Part::ToolResult(result) => {
                        pairs
                            .results
                            .entry(result.call_id.as_str())
                            .or_insert(ResultSite {
                                message: message_index,
                                part: part_index,
                            });
                    }
                    _ => {}
                }
            }
        }
        pairs
    }

    /// Where the call with this id is, if anywhere.
    pub fn call_site(&self, call_id: &str) -> Option<CallSite> {
        self.calls.get(call_id).copied()
    }

    /// Where the result answering this call id is, if anywhere.
    pub fn result_site(&self, call_id: &str) -> Option<ResultSite> {
        self.results.get(call_id).copied()
    }

    /// The call that `result` answers.
    pub fn call_for<'a>(
        &self,
        messages: &'a [Message],
        result: &ToolResult,
    ) -> Option<&'a ToolCall> {
        let site = self.call_site(&result.call_id)?;
        messages
            .get(site.message)?
            .parts
            .get(site.part)?
            .as_tool_call()
    }

    /// The tool's name for a result, resolved from its call (results do not carry it on every wire).
    pub fn tool_name<'a>(&self, messages: &'a [Message], result: &ToolResult) -> Option<&'a str> {
        self.call_for(messages, result)
            .map(|call| call.name.as_str())
    }

    /// Every call that has a result, with both sites, ordered by the call's position.
    pub fn pairs(&self) -> Vec<(CallSite, ResultSite)> {
        let mut pairs: Vec<(CallSite, ResultSite)> = self
            .calls
            .iter()
            .filter_map(|(id, call)| self.results.get(id).map(|result| (*call, *result)))
            .collect();
        pairs.sort_by_key(|(call, _)| (call.message, call.part));
        pairs
    }
}

/// Each message of `messages`, from the last back, with how many of its tool calls have a
/// result after it: the calls the agent acted on, each with the output it saw. A call nothing
/// answered (a log's step that was interrupted and never answered) is no recent work to keep,
/// and holds no output to protect: the tail's count of the agent's last calls, the early
/// compaction's and the pruner's skip boundary count these, as the replay's `keeps` does.
/// Results come after their calls, so a walk from the end sees each result before its call and
/// reads no further than its caller takes: the skip boundary is found on every request.
pub fn answered_calls_from_end(messages: &[Message]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut answered: HashSet<&str> = HashSet::new();
    messages
        .iter()
        .enumerate()
        .rev()
        .map(move |(index, message)| {
            let mut calls = 0;
            for part in &message.parts {
                match part {
                    Part::ToolResult(result) => {
                        answered.insert(result.call_id.as_str());
                    }
                    Part::ToolCall(call) if answered.contains(call.id.as_str()) => calls += 1,
                    _ => {}
                }
            }
            (index, calls)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;
    use crate::test_parts::{call as tool_call, result as tool_result};

    /// Only a call with its result after it counts; a message of two calls of which one was
    /// answered counts one; a slice from a step counts what it answers itself.
    #[test]
    fn a_call_counts_as_answered_only_with_its_result() {
        let call = |ids: &[&str]| {
            Message::new(
                Role::Assistant,
                ids.iter().map(|id| tool_call(id)).collect(),
            )
        };
        let result = |id: &str| Message::new(Role::Tool, vec![tool_result(id)]);
        let messages = vec![
            Message::text(Role::User, "go"),
            call(&["a", "b"]),
            result("a"),
            call(&["never"]),
            call(&["c"]),
            result("c"),
        ];
        let counts: Vec<(usize, usize)> = answered_calls_from_end(&messages).collect();
        assert_eq!(counts, [(5, 0), (4, 1), (3, 0), (2, 0), (1, 1), (0, 0)]);
        let from_a_step: Vec<(usize, usize)> = answered_calls_from_end(&messages[3..]).collect();
        assert_eq!(from_a_step, [(2, 0), (1, 1), (0, 0)]);
    }
}
