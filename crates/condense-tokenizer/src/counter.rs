use condense_core::{Conversation, Message, MessageMemo, Part, Role, ToolOutput};
use rayon::prelude::*;
use tiktoken_rs::CoreBPE;

use crate::cache::{CacheStats, TokenCache};
use crate::overhead::{PER_MESSAGE, PER_TOOL_CALL, REPLY_PRIMING};
use crate::pieces::Pieces;
use crate::{Encoding, image};

/// Counts tokens. The phases take a `&dyn TokenCounter`, so a harness can plug in its provider's
/// tokenizer, and tests can use a simple deterministic one.
pub trait TokenCounter: Send + Sync {
    /// Tokens in `text` alone, without any framing.
    fn count_text(&self, text: &str) -> usize;

    /// Tokens `message` costs in a request, framing included (see [`crate::overhead`]).
    fn count_message(&self, message: &Message) -> usize {
        let parts: usize = message.parts.iter().map(|part| self.count_part(part)).sum();
        PER_MESSAGE + self.count_role(message.role) + parts
    }

    /// The role's own token(s) in a message's framing.
    fn count_role(&self, role: Role) -> usize {
        self.count_text(role.as_str())
    }

    /// Tokens of one part of a message, without the message's framing.
    fn count_part(&self, part: &Part) -> usize {
        match part {
            Part::Text(text) => self.count_text(&text.text),
            Part::Thinking(thinking) => self.count_text(&thinking.text),
            // The call is written inside the assistant's text, which is already counted.
            Part::ToolCall(call) if call.embedded => 0,
            Part::ToolCall(call) => {
                let arguments = match &call.raw_input {
                    Some(raw) => self.count_text(raw),
                    None => self.count_json(&call.input),
                };
                PER_TOOL_CALL + self.count_text(&call.name) + arguments
            }
            Part::ToolResult(result) => self.count_output(&result.content),
            Part::Image(image) => image::image_tokens(&image.source),
            Part::Opaque { value } => self.count_json(value),
        }
    }

    /// Tokens of `value` written as compact JSON, as a request carries a tool call's arguments.
    fn count_json(&self, value: &serde_json::Value) -> usize {
        self.count_text(&value.to_string())
    }

    /// Tokens of a tool's output. This is what the pruner weighs and reclaims.
    fn count_output(&self, output: &ToolOutput) -> usize {
        match output {
            ToolOutput::Text(text) => self.count_text(text),
            ToolOutput::Parts(parts) => parts.iter().map(|part| self.count_part(part)).sum(),
        }
    }

    /// Each message's count, in order.
    fn count_each(&self, messages: &[Message]) -> Vec<usize> {
        messages
            .iter()
            .map(|message| self.count_message(message))
            .collect()
    }

    /// What sending `conversation` costs: every message plus the reply priming.
    fn count_conversation(&self, conversation: &Conversation) -> usize {
        conversation_total(&self.count_each(&conversation.messages))
    }

    /// A key that says which counts this counter gives: two counters with the same key count
    /// every message alike, so a count one kept in a [`MessageMemo`] serves the other. `None`
    /// (the default) keeps no count in memos: a counter that is not a pure function of the
    /// message (a calibrated or a remote one) must not say it is.
    fn memo_key(&self) -> Option<u64> {
        None
    }
}

/// [`TokenCounter::count_each`], taking each count a message's memo keeps (see
/// [`condense_core::Memos`]) and keeping the counts it makes. `memo(index)` is message `index`'s
/// memo, if it has one. Runs of messages without a kept count are counted together, so that the
/// counter may spread a long run over its threads as `count_each` does. The same counts as
/// `count_each`, provided each memo belongs to the message it is asked for.
pub fn count_each_memoized<'m>(
    counter: &dyn TokenCounter,
    messages: &[Message],
    memo: impl Fn(usize) -> Option<&'m MessageMemo>,
) -> Vec<usize> {
    let Some(key) = counter.memo_key() else {
        return counter.count_each(messages);
    };
    let kept = |index: usize| memo(index).and_then(|memo| memo.tokens(key));
    let mut counts = Vec::with_capacity(messages.len());
    let mut index = 0;
    while index < messages.len() {
        if let Some(count) = kept(index) {
            counts.push(count);
            index += 1;
            continue;
        }
        let start = index;
        while index < messages.len() && kept(index).is_none() {
            index += 1;
        }
        for (offset, count) in counter
            .count_each(&messages[start..index])
            .into_iter()
            .enumerate()
        {
            if let Some(memo) = memo(start + offset) {
                memo.keep_tokens(key, count);
            }
            counts.push(count);
        }
    }
    counts
}

/// What a conversation whose messages count `counts` (from [`TokenCounter::count_each`]) costs
/// to send: what [`TokenCounter::count_conversation`] gives, for a caller that has the counts
/// already and need not count again.
pub fn conversation_total(counts: &[usize]) -> usize {
    REPLY_PRIMING + counts.iter().sum::<usize>()
}

/// Whether a counter may spread one count over rayon's threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Parallelism {
    /// In parallel when the messages hold at least [`Tiktoken::PARALLEL_MIN_BYTES`] of text and
    /// more than one thread is available; below that, splitting the work costs more than it saves.
    #[default]
    Auto,
    /// In parallel whenever more than one thread is available, whatever the size (for tests).
    Always,
    /// Always on the calling thread.
    Off,
}

/// The tiktoken counter, with its content cache. Share one per session (or per process): the
/// cache is what makes recounting an unchanged conversation cheap.
pub struct Tiktoken {
    encoding: Encoding,
    bpe: &'static CoreBPE,
    /// tiktoken's counts, faster (see [`Pieces`]); `None` falls back to `bpe`.
    pieces: Option<&'static Pieces>,
    cache: TokenCache,
    parallelism: Parallelism,
    /// Each role's tokens, counted once: every message's framing needs one.
    role_tokens: [usize; 4],
}

impl std::fmt::Debug for Tiktoken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiktoken")
            .field("encoding", &self.encoding)
            .field("parallelism", &self.parallelism)
            .field("cache", &self.cache.stats())
            .finish()
    }
}

impl Tiktoken {
    /// Text below which a count stays on one thread.
    pub const PARALLEL_MIN_BYTES: usize = 64 * 1024;
    /// Distinct texts remembered before the cache starts over: at 16 bytes a key plus a count and
    /// the map's overhead, about 40 MB at most.
    pub const DEFAULT_CACHE_ENTRIES: usize = 1 << 20;

    /// A counter with `encoding` and a fresh cache.
    pub fn new(encoding: Encoding) -> Self {
        let bpe = encoding.bpe();
        let role_tokens = ROLES.map(|role| bpe.encode_ordinary(role.as_str()).len());
        Tiktoken {
            encoding,
            bpe,
            pieces: encoding.pieces(),
            cache: TokenCache::new(Self::DEFAULT_CACHE_ENTRIES),
            parallelism: Parallelism::Auto,
            role_tokens,
        }
    }

    /// Counts batches with `parallelism` threads.
    pub fn with_parallelism(mut self, parallelism: Parallelism) -> Self {
        self.parallelism = parallelism;
        self
    }

    /// The encoding it counts with.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The cache's hits, misses and size.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// `text`'s tokens, uncached.
    fn encoded_len(&self, text: &str) -> usize {
        match self.pieces {
            Some(pieces) => pieces.count(text),
            None => self.bpe.encode_ordinary(text).len(),
        }
    }

    fn worth_parallel(&self, messages: &[Message]) -> bool {
        let enough_work =
            || messages.iter().map(text_bytes).sum::<usize>() >= Self::PARALLEL_MIN_BYTES;
        rayon::current_num_threads() > 1
            && match self.parallelism {
                Parallelism::Auto => enough_work(),
                Parallelism::Always => true,
                Parallelism::Off => false,
            }
    }
}

impl Default for Tiktoken {
    fn default() -> Self {
        Tiktoken::new(Encoding::default())
    }
}

impl TokenCounter for Tiktoken {
    fn count_text(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        self.cache.get_or_count(text, |text| self.encoded_len(text))
    }

    fn count_role(&self, role: Role) -> usize {
        self.role_tokens[role_index(role)]
    }

    /// The encoding decides every count (the framing's constants are the crate's own).
    fn memo_key(&self) -> Option<u64> {
        Some(match self.encoding {
            Encoding::O200kBase => 1,
            Encoding::Cl100kBase => 2,
        })
    }

    /// Looked up by the value's structure, so a value already counted is not written out again
    /// (writing JSON out was most of the cost of recounting a session's tool calls).
    fn count_json(&self, value: &serde_json::Value) -> usize {
        let mut state = xxhash_rust::xxh3::Xxh3::new();
        // Apart from every text's key: those hash the text's bytes alone.
        state.update(b"condense:json\0");
        condense_core::hash_value(value, &mut state);
        self.cache
            .get_or_count_keyed(state.digest128(), || self.encoded_len(&value.to_string()))
    }

    /// Counts are per message and add up, so the parallel result is exactly the sequential one.
    fn count_each(&self, messages: &[Message]) -> Vec<usize> {
        if self.worth_parallel(messages) {
            messages
                .par_iter()
                .map(|message| self.count_message(message))
                .collect()
        } else {
            messages
                .iter()
                .map(|message| self.count_message(message))
                .collect()
        }
    }
}

const ROLES: [Role; 4] = [Role::System, Role::User, Role::Assistant, Role::Tool];

fn role_index(role: Role) -> usize {
    match role {
        Role::System => 0,
        Role::User => 1,
        Role::Assistant => 2,
        Role::Tool => 3,
    }
}

/// Bytes of text a message holds, a cheap stand-in for the work of counting it.
fn text_bytes(message: &Message) -> usize {
    message.parts.iter().map(part_bytes).sum()
}

fn part_bytes(part: &Part) -> usize {
    match part {
        Part::Text(text) => text.text.len(),
        Part::Thinking(thinking) => thinking.text.len(),
        Part::ToolCall(call) if call.embedded => 0,
        Part::ToolCall(call) => call.raw_input.as_ref().map_or(64, String::len),
        Part::ToolResult(result) => match &result.content {
            ToolOutput::Text(text) => text.len(),
            ToolOutput::Parts(parts) => parts.iter().map(part_bytes).sum(),
        },
        Part::Image(_) | Part::Opaque { .. } => 0,
    }
}
