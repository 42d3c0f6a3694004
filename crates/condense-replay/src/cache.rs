//! Models of the providers' prompt caches: for each request, which of its input tokens were read
//! from the cache, which were written to it, and which were neither.

use std::collections::HashMap;

use serde::Serialize;

use crate::prices::{AnthropicPrices, OpenAiPrices};
use crate::prompt::{Point, Prompt};

/// How a request's input tokens were billed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Read from the cache.
    pub cache_read: u64,
    /// Written to the cache (Anthropic only).
    pub cache_write: u64,
    /// Neither.
    pub uncached: u64,
}

impl Usage {
    /// All input tokens.
    pub fn input(&self) -> u64 {
        self.cache_read + self.cache_write + self.uncached
    }

    /// A request that shares nothing with the cache and leaves nothing in it.
    pub fn uncached(tokens: u64) -> Usage {
        Usage {
            uncached: tokens,
            ..Usage::default()
        }
    }
}

/// How long a cache entry lives after its last use (Anthropic's two lifetimes; OpenAI's
/// automatic cache is modelled with the same lifetime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ttl {
    /// 5 minutes, the default.
    #[default]
    FiveMinutes,
    /// 1 hour (Anthropic's extended lifetime, at a higher write price).
    OneHour,
}

impl Ttl {
    /// The lifetime in milliseconds.
    pub fn ms(self) -> u64 {
        match self {
            Ttl::FiveMinutes => 5 * 60 * 1000,
            Ttl::OneHour => 60 * 60 * 1000,
        }
    }
}

impl std::str::FromStr for Ttl {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "5m" => Ok(Ttl::FiveMinutes),
            "1h" => Ok(Ttl::OneHour),
            other => Err(format!("unknown cache lifetime `{other}`: use 5m or 1h")),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    tokens: u64,
    expires_ms: u64,
}

/// Cached prefixes by their chain hash.
#[derive(Debug, Clone, Default)]
struct Entries(HashMap<u64, Entry>);

impl Entries {
    /// Caches (or keeps) `point` until `expires_ms`.
    fn hold(&mut self, point: Point, expires_ms: u64) {
        self.0.insert(
            point.chain,
            Entry {
                tokens: point.tokens,
                expires_ms,
            },
        );
    }

    /// The entry for `point`, when it is cached and alive at `now_ms`.
    fn live(&mut self, point: &Point, now_ms: u64) -> Option<&mut Entry> {
        self.0
            .get_mut(&point.chain)
            .filter(|entry| entry.expires_ms > now_ms && entry.tokens == point.tokens)
    }
}

/// Anthropic's cache: a prefix is written at each breakpoint the request marks, and a later
/// request reads the longest cached prefix that ends at a block boundary at most
/// `lookback_blocks` blocks before one of its own breakpoints. An entry lives `ttl` after its
/// last write or read.
#[derive(Debug, Clone)]
pub struct AnthropicCache {
    entries: Entries,
    ttl_ms: u64,
    lookback_blocks: u64,
    min_tokens: u64,
}

impl AnthropicCache {
    /// An empty cache with `prices`' rules.
    pub fn new(prices: &AnthropicPrices, ttl: Ttl) -> Self {
        AnthropicCache {
            entries: Entries::default(),
            ttl_ms: ttl.ms(),
            lookback_blocks: prices.lookback_blocks,
            min_tokens: prices.min_cacheable_tokens,
        }
    }

    /// Holds `point` from `now_ms` as if an earlier request had written it.
    pub fn warm(&mut self, point: Point, now_ms: u64) {
        self.entries.hold(point, now_ms + self.ttl_ms);
    }

    /// Sends `prompt` at `now_ms`: what it read, wrote and paid in full.
    pub fn request(&mut self, prompt: &Prompt, now_ms: u64) -> Usage {
        let points = &prompt.points;
        let total = prompt.tokens();
        let mut read = 0;
        for &breakpoint in &prompt.breakpoints {
            let end = points[breakpoint].blocks;
            for point in points[..=breakpoint].iter().rev() {
                if end - point.blocks > self.lookback_blocks {
                    break;
                }
                if let Some(entry) = self.entries.live(point, now_ms) {
                    entry.expires_ms = now_ms + self.ttl_ms;
                    read = read.max(point.tokens);
                    break;
                }
            }
        }
        let mut written_to = read;
        for &breakpoint in &prompt.breakpoints {
            let point = points[breakpoint];
            if point.tokens < self.min_tokens {
                continue;
            }
            self.entries.hold(point, now_ms + self.ttl_ms);
            written_to = written_to.max(point.tokens);
        }
        Usage {
            cache_read: read,
            cache_write: written_to - read,
            uncached: total - written_to,
        }
    }
}

/// OpenAI's automatic cache: every prompt of at least `min` tokens is cached; a later prompt
/// reads the longest prefix it shares with a cached one, rounded down to `min` plus a multiple of
/// `step` tokens. Prefixes are compared at message boundaries (a shared part of a message that
/// differs later is not counted: slightly fewer hits than the provider's token-level match).
#[derive(Debug, Clone)]
pub struct OpenAiCache {
    entries: Entries,
    ttl_ms: u64,
    min_tokens: u64,
    step_tokens: u64,
}

impl OpenAiCache {
    /// An empty cache with `prices`' rules.
    pub fn new(prices: &OpenAiPrices, ttl: Ttl) -> Self {
        OpenAiCache {
            entries: Entries::default(),
            ttl_ms: ttl.ms(),
            min_tokens: prices.min_cached_tokens,
            step_tokens: prices.cache_step_tokens.max(1),
        }
    }

    /// Holds `point` from `now_ms` as if an earlier request had sent it.
    pub fn warm(&mut self, point: Point, now_ms: u64) {
        self.entries.hold(point, now_ms + self.ttl_ms);
    }

    /// Sends `prompt` at `now_ms`.
    pub fn request(&mut self, prompt: &Prompt, now_ms: u64) -> Usage {
        let total = prompt.tokens();
        let shared = prompt
            .points
            .iter()
            .rev()
            .find(|point| self.entries.live(point, now_ms).is_some())
            .map_or(0, |point| point.tokens);
        let read = if shared >= self.min_tokens {
            self.min_tokens + (shared - self.min_tokens) / self.step_tokens * self.step_tokens
        } else {
            0
        };
        if total >= self.min_tokens {
            for point in &prompt.points {
                self.entries.hold(*point, now_ms + self.ttl_ms);
            }
        }
        Usage {
            cache_read: read,
            cache_write: 0,
            uncached: total - read,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PriceTable;

    /// A prompt of `sizes` messages (tokens each, one block each), sharing a chain with any other
    /// built from the same leading sizes and `salt`s; the breakpoint on the last message.
    fn prompt(sizes: &[(u64, u64)]) -> Prompt {
        let mut points = Vec::new();
        let mut tokens = 0;
        let mut chain = 0u64;
        for (index, (size, salt)) in sizes.iter().enumerate() {
            tokens += size;
            chain = chain
                .wrapping_mul(31)
                .wrapping_add(salt * 1000 + index as u64 + 1);
            points.push(Point {
                chain,
                tokens,
                blocks: index as u64 + 1,
            });
        }
        Prompt {
            breakpoints: vec![points.len() - 1],
            points,
        }
    }

    fn anthropic() -> AnthropicCache {
        AnthropicCache::new(&PriceTable::built_in().unwrap().anthropic, Ttl::FiveMinutes)
    }

    #[test]
    fn a_growing_conversation_reads_what_the_last_request_wrote() {
        let mut cache = anthropic();
        let first = cache.request(&prompt(&[(5000, 0), (2000, 0)]), 0);
        assert_eq!(
            (first.cache_read, first.cache_write, first.uncached),
            (0, 7000, 0)
        );
        let second = cache.request(&prompt(&[(5000, 0), (2000, 0), (300, 0), (700, 0)]), 60_000);
        assert_eq!((second.cache_read, second.cache_write), (7000, 1000));
    }

    #[test]
    fn an_edited_message_invalidates_everything_after_it() {
        let mut cache = anthropic();
        cache.request(&prompt(&[(5000, 0), (2000, 0), (3000, 0)]), 0);
        let edited = cache.request(&prompt(&[(5000, 0), (2000, 1), (3000, 0), (10, 0)]), 1000);
        assert_eq!(
            edited.cache_read, 0,
            "only the last message was marked, so nothing hits"
        );
        assert_eq!(edited.cache_write, 10_010);
    }

    #[test]
    fn an_entry_expires_after_its_lifetime_and_a_read_refreshes_it() {
        let mut cache = anthropic();
        cache.request(&prompt(&[(5000, 0)]), 0);
        let warm = cache.request(&prompt(&[(5000, 0), (10, 0)]), 4 * 60_000);
        assert_eq!(warm.cache_read, 5000);
        // 8 minutes after the first write, but 4 after the read that refreshed the entry.
        let still = cache.request(&prompt(&[(5000, 0), (10, 0), (10, 0)]), 8 * 60_000);
        assert_eq!(still.cache_read, 5010);
        let cold = cache.request(&prompt(&[(5000, 0), (10, 0), (10, 0), (5, 0)]), 14 * 60_000);
        assert_eq!((cold.cache_read, cold.cache_write), (0, 5025));
    }

    #[test]
    fn a_cached_prefix_more_than_twenty_blocks_back_is_not_found() {
        let mut cache = anthropic();
        cache.request(&prompt(&[(5000, 0)]), 0);
        let mut sizes = vec![(5000, 0)];
        sizes.extend(std::iter::repeat_n((10, 0), 20));
        assert_eq!(cache.request(&prompt(&sizes), 1000).cache_read, 5000);
        let mut cache = anthropic();
        cache.request(&prompt(&[(5000, 0)]), 0);
        sizes.push((10, 0));
        assert_eq!(cache.request(&prompt(&sizes), 1000).cache_read, 0);
    }

    #[test]
    fn a_prefix_under_the_minimum_is_never_written() {
        let mut cache = anthropic();
        let small = cache.request(&prompt(&[(500, 0)]), 0);
        assert_eq!((small.cache_write, small.uncached), (0, 500));
    }

    #[test]
    fn openai_reads_the_shared_prefix_rounded_to_128_token_steps_from_1024() {
        let prices = PriceTable::built_in().unwrap().openai;
        let mut cache = OpenAiCache::new(&prices, Ttl::FiveMinutes);
        let first = cache.request(&prompt(&[(1500, 0), (500, 0)]), 0);
        assert_eq!((first.cache_read, first.uncached), (0, 2000));
        let second = cache.request(&prompt(&[(1500, 0), (500, 0), (100, 0)]), 1000);
        // 2000 shared: 1024 + 7 × 128 = 1920.
        assert_eq!(
            (second.cache_read, second.cache_write, second.uncached),
            (1920, 0, 180)
        );
        let mut cache = OpenAiCache::new(&prices, Ttl::FiveMinutes);
        cache.request(&prompt(&[(1000, 0), (10, 0)]), 0);
        assert_eq!(
            cache
                .request(&prompt(&[(1000, 0), (10, 0), (50, 0)]), 1)
                .cache_read,
            0
        );
    }
}
