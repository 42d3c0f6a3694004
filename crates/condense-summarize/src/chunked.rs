//! Summarizing a head larger than the summarizer's window: in chunks that fit, whose partial
//! summaries are then merged. Chunks are sized with our tokenizer and a safety margin (the
//! server's tokenizer may count more), and a chunk the server still finds too long is split in
//! two and tried again, so the server's context error is handled here and never reaches the user.

use std::collections::VecDeque;

use async_trait::async_trait;
use condense_tokenizer::TokenCounter;

use crate::SummarizeError;
use crate::flatten::{Turn, alternate};

/// One request to a chat model: the turns, the last of which is the prompt.
#[async_trait]
pub(crate) trait Complete: Send + Sync {
    async fn complete(&self, turns: Vec<Turn>) -> Result<String, SummarizeError>;
}

/// How much of the summarizer's window one request may fill.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Room {
    pub window: usize,
    pub reply_tokens: usize,
    /// The share of the window our count may fill, leaving room for the server's tokenizer
    /// counting the same text as more tokens.
    pub safety: f64,
}

/// Shortest text a single turn is cut down to before giving up on fitting it.
const MIN_TURN_CHARS: usize = 200;

pub(crate) async fn summarize(
    model: &dyn Complete,
    counter: &dyn TokenCounter,
    turns: Vec<Turn>,
    prompt: &str,
    room: Room,
) -> Result<String, SummarizeError> {
    let usable = ((room.window.saturating_sub(room.reply_tokens)) as f64 * room.safety) as usize;
    let budget = usable.saturating_sub(counter.count_text(prompt));
    if budget < 256 {
        return Err(SummarizeError::WindowTooSmall {
            window: room.window,
        });
    }

    let mut queue: VecDeque<Vec<Turn>> = pack(turns, budget, counter).into();
    let mut partials = Vec::new();
    while let Some(chunk) = queue.pop_front() {
        match ask(model, chunk.clone(), prompt).await {
            Ok(summary) => partials.push(summary),
            Err(SummarizeError::ContextExceeded { .. }) => {
                for half in split_in_two(chunk, room.window)?.into_iter().rev() {
                    queue.push_front(half);
                }
            }
            Err(other) => return Err(other),
        }
    }

    // Merge partial summaries, as many at a time as fit, until one is left.
    while partials.len() > 1 {
        let total = partials.len();
        let groups = group(partials, budget, counter);
        if groups.len() == total {
            // No two partial summaries fit in one request: merging cannot make progress.
            return Err(SummarizeError::WindowTooSmall {
                window: room.window,
            });
        }
        let mut next = Vec::with_capacity(groups.len());
        for mut group in groups {
            next.push(match group.len() {
                1 => group.remove(0),
                _ => merge(model, group, total, prompt).await?,
            });
        }
        partials = next;
    }
    partials.pop().ok_or(SummarizeError::NothingToSummarize)
}

async fn ask(
    model: &dyn Complete,
    chunk: Vec<Turn>,
    prompt: &str,
) -> Result<String, SummarizeError> {
    let mut turns = chunk;
    turns.push(Turn::user(prompt));
    model.complete(alternate(turns)).await
}

async fn merge(
    model: &dyn Complete,
    partials: Vec<String>,
    total: usize,
    prompt: &str,
) -> Result<String, SummarizeError> {
    let mut text = format!(
        "The conversation was too long to summarize at once, so it was summarized in {total} consecutive parts. \
         Here are {} of those partial summaries, oldest first. Combine them into one summary of the whole \
         conversation: later parts override earlier ones where they disagree.\n",
        partials.len()
    );
    for (index, partial) in partials.iter().enumerate() {
        text.push_str(&format!(
            "\n<part-{n}>\n{partial}\n</part-{n}>\n",
            n = index + 1
        ));
    }
    ask(model, vec![Turn::user(text)], prompt).await
}

/// Partial summaries in order, grouped so that each group fits one request.
fn group(partials: Vec<String>, budget: usize, counter: &dyn TokenCounter) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut used = 0;
    for partial in partials {
        let tokens = counter.count_text(&partial) + 16;
        match groups.last_mut() {
            Some(last) if used + tokens <= budget => last.push(partial),
            _ => {
                groups.push(vec![partial]);
                used = 0;
            }
        }
        used += tokens;
    }
    groups
}

/// Turns packed in order into chunks of at most `budget` tokens; a turn larger than that alone is
/// cut to fit.
fn pack(turns: Vec<Turn>, budget: usize, counter: &dyn TokenCounter) -> Vec<Vec<Turn>> {
    let mut chunks = Vec::new();
    let mut chunk = Vec::new();
    let mut used = 0;
    for mut turn in turns {
        let mut tokens = counter.count_text(&turn.text) + 8;
        while tokens > budget && turn.text.chars().count() > MIN_TURN_CHARS {
            turn.text = shorten(&turn.text);
            tokens = counter.count_text(&turn.text) + 8;
        }
        if !chunk.is_empty() && used + tokens > budget {
            chunks.push(std::mem::take(&mut chunk));
            used = 0;
        }
        used += tokens;
        chunk.push(turn);
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

/// A chunk the server refused as too long, in two halves (or one turn, shortened).
fn split_in_two(mut chunk: Vec<Turn>, window: usize) -> Result<Vec<Vec<Turn>>, SummarizeError> {
    if chunk.len() > 1 {
        let second = chunk.split_off(chunk.len() / 2);
        return Ok(vec![chunk, second]);
    }
    match chunk.pop() {
        Some(mut turn) if turn.text.chars().count() > MIN_TURN_CHARS => {
            turn.text = shorten(&turn.text);
            Ok(vec![vec![turn]])
        }
        _ => Err(SummarizeError::WindowTooSmall { window }),
    }
}

/// The first half of a text, with a marker.
fn shorten(text: &str) -> String {
    let half = text.chars().count() / 2;
    crate::flatten::cut(text, half)
}
