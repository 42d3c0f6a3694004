//! Facts about a message that are kept while the message does not change.
//!
//! A client behind a proxy resends its whole history with every request, so the same messages
//! are hashed and counted again and again: on the longest shared session that was a fifth of a
//! proxied request's instructions. A reader that recognises a message it read before (see
//! `condense_formats::MessageCache`) hands out the message's [`MessageMemo`] with it, and the
//! pipeline computes each fact at most once per message instead of once per request.

use std::sync::{Arc, OnceLock};

/// What is known about one message: each fact a pure function of the message, computed the
/// first time it is asked for and shared by every conversation that holds the same message.
#[derive(Debug, Default)]
pub struct MessageMemo {
    content_hash: OnceLock<u64>,
    /// The message's tokens and the key of the counter that counted them: a count is only good
    /// for the counter (the encoding) that made it.
    tokens: OnceLock<(u64, usize)>,
}

impl MessageMemo {
    /// The message's content hash, from `compute` the first time.
    pub fn content_hash(&self, compute: impl FnOnce() -> u64) -> u64 {
        *self.content_hash.get_or_init(compute)
    }

    /// The message's tokens as the counter keyed `counter` counted them, when known.
    pub fn tokens(&self, counter: u64) -> Option<usize> {
        self.tokens
            .get()
            .filter(|(key, _)| *key == counter)
            .map(|&(_, count)| count)
    }

    /// Keeps `count` as the message's tokens under the counter keyed `counter`. The first count
    /// kept stays: a process counts with one counter, and another counter's count is simply not
    /// known (asked again each time).
    pub fn keep_tokens(&self, counter: u64, count: usize) {
        let _ = self.tokens.set((counter, count));
    }
}

/// The memos of a conversation's messages, by the messages' index: `None` for a message that
/// has none (one the reader did not recognise, or changed after reading it).
///
/// Only good for the messages as they were read: whoever changes a message must not pass its
/// memo on. The pipeline uses them before it changes anything (see
/// `condense_host::Compactor::prepare_memoized`).
#[derive(Debug, Default, Clone)]
pub struct Memos(Vec<Option<Arc<MessageMemo>>>);

impl Memos {
    /// The memos of messages `0..memos.len()`.
    pub fn new(memos: Vec<Option<Arc<MessageMemo>>>) -> Self {
        Memos(memos)
    }

    /// Message `index`'s memo, if it has one.
    pub fn get(&self, index: usize) -> Option<&MessageMemo> {
        self.0.get(index)?.as_deref()
    }

    /// How many messages the memos are for.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether they are for no message.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drops message `index`'s memo: the message was changed after it was read.
    pub fn forget(&mut self, index: usize) {
        if let Some(memo) = self.0.get_mut(index) {
            *memo = None;
        }
    }

    /// Makes room for a message inserted at `index` that has no memo.
    pub fn insert_unknown(&mut self, index: usize) {
        self.0.insert(index.min(self.0.len()), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_content_hash_is_computed_once() {
        let memo = MessageMemo::default();
        let calls = Cell::new(0);
        let hash = || {
            calls.set(calls.get() + 1);
            42
        };
        assert_eq!(memo.content_hash(hash), 42);
        assert_eq!(memo.content_hash(hash), 42);
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn a_count_is_only_known_to_the_counter_that_made_it() {
        let memo = MessageMemo::default();
        assert_eq!(memo.tokens(1), None);
        memo.keep_tokens(1, 120);
        assert_eq!(memo.tokens(1), Some(120));
        assert_eq!(memo.tokens(2), None);
        // Another counter's count does not replace the first.
        memo.keep_tokens(2, 99);
        assert_eq!(memo.tokens(1), Some(120));
        assert_eq!(memo.tokens(2), None);
    }

    #[test]
    fn memos_follow_their_messages() {
        let mut memos = Memos::new(vec![Some(Arc::default()), None, Some(Arc::default())]);
        memos.get(0).unwrap().keep_tokens(7, 10);
        memos.insert_unknown(0);
        assert_eq!(memos.len(), 4);
        assert!(memos.get(0).is_none());
        assert_eq!(memos.get(1).unwrap().tokens(7), Some(10));
        assert!(memos.get(2).is_none());
        memos.forget(3);
        assert!(memos.get(3).is_none());
        assert!(memos.get(9).is_none());
        memos.forget(9);
    }
}
