//! Exact token counts for condense conversations.
//!
//! Compaction decisions hinge on counts (`tokens >= usable`, a protect window of 40,000 tokens),
//! so they are made with the model's real tokenizer rather than `chars / 4`, which is off by more
//! than half on base64 or CJK text. Tokenizing is the expensive part of every phase, so counts are
//! cached by content: a harness that recounts its conversation before every request pays only for
//! what is new.

#![warn(missing_docs)]
mod cache;
mod counter;
mod encoding;
mod image;
pub mod overhead;
mod pieces;

pub use cache::CacheStats;
pub use counter::{Parallelism, Tiktoken, TokenCounter, conversation_total, count_each_memoized};
pub use encoding::{Encoding, UnknownEncoding};
