use condense_defaults::DefaultsError;
use serde::Deserialize;

/// The numbers that decide when and where to cut: the model's window and the `[compaction]`
/// rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TailSettings {
    /// The model's context window, in tokens.
    pub context_window: usize,
    /// The most the model may write in one reply.
    pub max_output_tokens: usize,
    /// The `[compaction]` keys this crate reads.
    pub rules: CompactionRules,
    /// How far the tail may go past its budget to show the agent's last `min_tail_calls` calls
    /// as previews, when the budget holds fewer of them (before what the tail already keeps)
    /// and this bound holds more; at or under the budget (0, the default), not at all. A
    /// request whose system prompt and tools take much of the window has its tail's budget held
    /// to half the room they leave (`condense-host`'s room: the other half is the summary's),
    /// and its last exchange can fill most of that half: the calls before it would be
    /// summarized away, small ones too, where the window's own budget shows them as previews.
    pub previews_within: usize,
}

impl TailSettings {
    /// The built-in rules (`config/condense.toml`) for a model with this window and reply.
    pub fn built_in(
        context_window: usize,
        max_output_tokens: usize,
    ) -> Result<Self, DefaultsError> {
        Ok(TailSettings {
            context_window,
            max_output_tokens,
            rules: condense_defaults::section("compaction")?,
            previews_within: 0,
        })
    }
}

/// The `[compaction]` keys that size the cut and price an early compaction. Their defaults and
/// the reasons for them are in `config/condense.toml`; the section's other keys (the template,
/// the continuation) are the host's.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct CompactionRules {
    /// `reserved` is at most this: a reply rarely needs more, so larger output limits should not
    /// shrink the usable window.
    pub reserve_cap: usize,
    /// The tail's share of the usable window.
    pub tail_ratio: f64,
    /// The tail budget is never below this ...
    pub min_tail_tokens: usize,
    /// ... nor above this.
    pub max_tail_tokens: usize,
    /// The tail holds at least this many user turns when the conversation has them.
    pub min_tail_turns: usize,
    /// The tail holds at least this many of the agent's latest tool calls when they fit the
    /// budget as previews.
    pub min_tail_calls: usize,
    /// What sending a token the provider has not cached costs more than reading it from the
    /// cache, in cache reads. A compaction rewrites what it keeps at this price; see
    /// [`pays_to_compact`]. 0 compacts only when the window makes it necessary.
    pub cache_rewrite_cost: f64,
    /// What an output token costs, in cache reads, for a summary a model writes.
    pub output_cost: f64,
    /// How long the provider keeps a prompt's cache after its last use, in minutes, where the
    /// request does not say: past it, a compaction costs no rewrite
    /// ([`pays_at_a_cold_cache`]). 0 turns that rule off.
    pub cache_lifetime_minutes: u64,
}

/// Tokens the conversation may use before compaction is due.
pub fn usable(settings: &TailSettings) -> usize {
    let reserved = settings.rules.reserve_cap.min(settings.max_output_tokens);
    settings.context_window.saturating_sub(reserved)
}

/// `tokens >= usable`: at `usable` the next reply no longer fits.
pub fn is_due(tokens: usize, settings: &TailSettings) -> bool {
    tokens >= usable(settings)
}

/// A compaction that could be made now, before the window needs it, as the cache prices it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EarlyCompaction {
    /// Tokens of the part the summary would replace.
    pub head_tokens: usize,
    /// Tokens the summary will take: as written, where the summarizer can tell before writing
    /// it, else its budget.
    pub summary_tokens: usize,
    /// Tokens of the turns kept after it.
    pub tail_tokens: usize,
    /// Tokens the conversation grows by from one request to the next, on average.
    pub growth_tokens: usize,
    /// Input tokens a model would read to write the summary (`None` for a summary written
    /// locally, which costs the provider nothing); its output is `summary_tokens` at
    /// [`CompactionRules::output_cost`].
    pub summarizer_input_tokens: Option<usize>,
}

/// Whether compacting now costs less, per request, than carrying the head until the window is
/// full.
///
/// Every request reads the whole prompt from the cache, so a head of `h` tokens replaced by a
/// summary of `s` saves `h - s` cache reads on each request that follows. The compaction costs
/// the rewrite of what comes after the unchanged prefix, `k = s + tail`, at
/// [`CompactionRules::cache_rewrite_cost`] `c` a token, plus the summarizer's own request when a
/// model writes it (`m`, in cache reads). A session that compacts each time its compactable part
/// has grown by `x = h - s` past `k`, at `g` tokens a request, pays on average
/// `(k + x/2)` reads and `(c*k + m) * g / x` for the compactions per request, which is least at
/// `x² = 2 * g * (c*k + m)`. So compacting pays once `(h - s)² >= 2 * g * (c*k + m)`: the rule
/// follows from the prices and from how fast this session grows, not from a share of the window.
/// It never fires again straight after a compaction (the head is then the summary itself).
pub fn pays_to_compact(early: &EarlyCompaction, settings: &TailSettings) -> bool {
    terms(early, settings).is_some_and(|terms| {
        let cost = terms.rewrite * terms.kept + terms.summarizer;
        terms.saved * terms.saved >= 2.0 * early.growth_tokens as f64 * cost
    })
}

/// What a compaction is weighed by, in cache reads a token.
struct Terms {
    /// `c`, [`CompactionRules::cache_rewrite_cost`].
    rewrite: f64,
    /// `h - s`: what the summary saves on each request after it.
    saved: f64,
    /// `k`: the summary and the tail, rewritten.
    kept: f64,
    /// `m`: the summarizer's request, for a summary a model writes.
    summarizer: f64,
}

/// `early`'s [`Terms`]; `None` where nothing is saved or a rewrite is free (the rules are off).
fn terms(early: &EarlyCompaction, settings: &TailSettings) -> Option<Terms> {
    let rewrite = settings.rules.cache_rewrite_cost;
    let saved = early.head_tokens.saturating_sub(early.summary_tokens) as f64;
    if rewrite <= 0.0 || saved <= 0.0 {
        return None;
    }
    Some(Terms {
        rewrite,
        saved,
        kept: (early.summary_tokens + early.tail_tokens) as f64,
        summarizer: early.summarizer_input_tokens.map_or(0.0, |input| {
            input as f64 + early.summary_tokens as f64 * settings.rules.output_cost
        }),
    })
}

/// Whether a compaction pays for itself on the spot where the provider's cache has expired.
///
/// After the cache's lifetime the next request is written to the cache whole, whatever is
/// done: a compaction then adds no rewrite of what it keeps, and writes `h - s` fewer tokens at
/// once, at `1 + c` reads each. What it does to the rest of the session is bring the compactions
/// the window forces forward: the next one comes once the conversation has grown by
/// `usable - k` rather than by what is left of the window, `h - s` tokens of growth sooner. Over
/// the session that is `(h - s) / (usable - k)` compactions more, at most one, each a rewrite of
/// `k` at `c` (and the summarizer's request, when a model writes it). So it pays when
/// `(1 + c)(h - s) >= (c*k + m) * min(1, (h - s) / (usable - k))`: any saving, where the window
/// leaves `(c*k + m) / (1 + c)` or more to grow into past what is kept (about as much again as
/// is kept, for a summary written locally); in a window tighter than that, a saving of at least
/// that much (nearly what is kept).
///
/// Charging a whole compaction, the most it can add, refused the compaction at a Claude Code
/// session's switch from Opus to Sonnet at 64K, and the session carried 38,000 to 59,000 tokens
/// for 15 requests to the compaction the window then forced.
pub fn pays_at_a_cold_cache(early: &EarlyCompaction, settings: &TailSettings) -> bool {
    terms(early, settings).is_some_and(|terms| {
        let cycle = usable(settings) as f64 - terms.kept;
        if cycle <= 0.0 {
            return false;
        }
        let more = (terms.saved / cycle).min(1.0);
        (1.0 + terms.rewrite) * terms.saved
            >= (terms.rewrite * terms.kept + terms.summarizer) * more
    })
}

/// Whether an early compaction that keeps the agent's recent calls whole in a tail wider than
/// the budget (`early.tail_tokens`, past [`tail_budget`]) costs less per request, over the
/// session that follows, than a tail of the budget kept by compactions the full window forces.
///
/// A session that keeps `k` tokens at each compaction and compacts every `x` tokens of growth,
/// at `g` tokens a request, reads `k + x/2` tokens a request on average and pays
/// `(c*k + m) * g / x` for its compactions ([`pays_to_compact`]'s terms). The wider tail
/// compacts where that is least, `x = √(2g(c*k + m))`; the budget's tail, which is all a
/// compaction at a full window keeps of the recent work, compacts when the window is full,
/// `x = usable - k`. In a small window the wider tail leaves too little room to grow into and
/// is rewritten too often; in a large one, carrying the head to the full window costs more than
/// the recent work kept whole. The summarizer's request `m` is taken as the same for both.
pub fn wider_tail_pays(early: &EarlyCompaction, settings: &TailSettings) -> bool {
    let rules = &settings.rules;
    let growth = early.growth_tokens as f64;
    let summary = early.summary_tokens as f64;
    let summarizer = early
        .summarizer_input_tokens
        .map_or(0.0, |input| input as f64 + summary * rules.output_cost);
    let per_request = |kept: f64, cycle: f64| {
        kept + cycle / 2.0 + (rules.cache_rewrite_cost * kept + summarizer) * growth / cycle
    };
    let wide = summary + early.tail_tokens as f64;
    let wide_cycle = (2.0 * growth * (rules.cache_rewrite_cost * wide + summarizer)).sqrt();
    let budget = summary + tail_budget(settings) as f64;
    let full_cycle = usable(settings) as f64 - budget;
    if wide_cycle <= 0.0 || full_cycle <= 0.0 {
        return false;
    }
    per_request(wide, wide_cycle) < per_request(budget, full_cycle)
}

/// `clamp(usable * tail_ratio, min_tail_tokens, max_tail_tokens)`.
pub fn tail_budget(settings: &TailSettings) -> usize {
    let share = (usable(settings) as f64 * settings.rules.tail_ratio).floor() as usize;
    share.clamp(
        settings.rules.min_tail_tokens,
        settings
            .rules
            .max_tail_tokens
            .max(settings.rules.min_tail_tokens),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_design_numbers() {
        let at = |context_window, max_output_tokens| {
            TailSettings::built_in(context_window, max_output_tokens).unwrap()
        };
        assert_eq!(usable(&at(200_000, 32_000)), 180_000);
        assert_eq!(usable(&at(200_000, 8_000)), 192_000);
        assert_eq!(tail_budget(&at(200_000, 32_000)), 8_000);
        assert_eq!(usable(&at(32_000, 4_000)), 28_000);
        assert_eq!(tail_budget(&at(32_000, 4_000)), 7_000);
        assert_eq!(tail_budget(&at(8_000, 4_000)), 2_000);
        assert!(is_due(180_000, &at(200_000, 32_000)));
        assert!(!is_due(179_999, &at(200_000, 32_000)));
    }

    /// The square-root rule: with a 3,000-token summary and a 7,000-token tail, a session
    /// growing 600 tokens a request compacts once the summary would save 12,000 tokens
    /// (12,000² = 144M ≥ 2 × 600 × 11.5 × 10,000 = 138M), not at 11,000; twice the growth needs
    /// √2 times the saving; a model's summary (3,000 output tokens at 50 reads each, 20,000
    /// input) needs more; a rewrite cost of 0 turns the rule off.
    #[test]
    fn compacting_early_pays_by_the_square_root_rule() {
        let settings = TailSettings::built_in(200_000, 32_000).unwrap();
        let early = |head_tokens, growth_tokens, summarizer_input_tokens| EarlyCompaction {
            head_tokens,
            summary_tokens: 3_000,
            tail_tokens: 7_000,
            growth_tokens,
            summarizer_input_tokens,
        };
        assert!(pays_to_compact(&early(15_000, 600, None), &settings));
        assert!(!pays_to_compact(&early(14_000, 600, None), &settings));
        assert!(!pays_to_compact(&early(15_000, 1_200, None), &settings));
        assert!(pays_to_compact(&early(20_000, 1_200, None), &settings));
        assert!(!pays_to_compact(
            &early(20_000, 600, Some(20_000)),
            &settings
        ));
        assert!(pays_to_compact(
            &early(30_000, 600, Some(20_000)),
            &settings
        ));
        assert!(!pays_to_compact(&early(3_000, 0, None), &settings));
        let mut off = settings;
        off.rules.cache_rewrite_cost = 0.0;
        assert!(!pays_to_compact(&early(100_000, 600, None), &off));
    }

    /// At a cache that has expired, compacting brings the window's compactions forward by
    /// what it saves. In a 200K window (usable 180,000) keeping a 3,000-token summary and a
    /// 7,000-token tail, that is 500 / 170,000 of a compaction for a head that saves 500 tokens:
    /// 11.5 × 10,000 × 500 / 170,000 ≈ 338 reads, against 12.5 × 500 = 6,250 saved on the write,
    /// so it pays, and so does a model's summary of a 12,200-token head (its request at
    /// 12,200 + 50 × 3,000 reads). In a 32K window (usable 27,904) keeping 15,000, a head that
    /// saves 7,000 brings 7,000 / 12,904 of a compaction forward, 11.5 × 15,000 × 0.54 ≈ 93,600
    /// reads against 87,500 saved, and does not pay; a saving of 12,904 or more brings a whole
    /// one forward, and pays once it outweighs it, from 13,800 (12.5 × 13,800 = 11.5 × 15,000).
    /// What keeps the whole window never pays, nor does anything at a rewrite cost of 0.
    #[test]
    fn a_compaction_at_an_expired_cache_pays_for_the_compactions_it_brings_forward() {
        let large = TailSettings::built_in(200_000, 32_000).unwrap();
        let early = |head_tokens, tail_tokens, summarizer_input_tokens| EarlyCompaction {
            head_tokens,
            summary_tokens: 3_000,
            tail_tokens,
            growth_tokens: 600,
            summarizer_input_tokens,
        };
        assert!(pays_at_a_cold_cache(&early(3_500, 7_000, None), &large));
        assert!(!pays_to_compact(&early(3_500, 7_000, None), &large));
        assert!(pays_at_a_cold_cache(
            &early(12_200, 7_000, Some(12_200)),
            &large
        ));
        assert!(!pays_at_a_cold_cache(&early(3_000, 7_000, None), &large));

        let small = TailSettings::built_in(32_000, 4_096).unwrap();
        assert!(!pays_at_a_cold_cache(&early(10_000, 12_000, None), &small));
        assert!(!pays_at_a_cold_cache(&early(16_700, 12_000, None), &small));
        assert!(pays_at_a_cold_cache(&early(16_800, 12_000, None), &small));
        assert!(!pays_at_a_cold_cache(&early(40_000, 25_000, None), &small));

        let mut off = large;
        off.rules.cache_rewrite_cost = 0.0;
        assert!(!pays_at_a_cold_cache(&early(100_000, 7_000, None), &off));
    }

    /// The recent calls kept whole in a 12,000-token tail, against the budget's tail at a full
    /// window, a session growing 1,000 tokens a request, OpenAI's rewrite price (3 reads):
    /// at 32K (usable 27,904, budget 6,976) the wider tail costs 2,000 + 12,000 + √(2 × 1,000
    /// × 3 × 14,000) ≈ 23,165 reads a request against 8,976 + 18,928 / 2 + 3 × 8,976 × 1,000 /
    /// 18,928 ≈ 19,863; at 64K (usable 59,904, budget 8,000) ≈ 23,165 against ≈ 35,553. A
    /// session that does not grow, or a window with no room past the budget, never widens.
    #[test]
    fn a_wider_tail_pays_in_a_large_window_not_a_small_one() {
        let early = |growth_tokens| EarlyCompaction {
            head_tokens: 20_000,
            summary_tokens: 2_000,
            tail_tokens: 12_000,
            growth_tokens,
            summarizer_input_tokens: None,
        };
        let at = |window| {
            let mut settings = TailSettings::built_in(window, 4_096).unwrap();
            settings.rules.cache_rewrite_cost = 3.0;
            settings
        };
        assert!(!wider_tail_pays(&early(1_000), &at(32_000)));
        assert!(wider_tail_pays(&early(1_000), &at(64_000)));
        assert!(wider_tail_pays(&early(1_000), &at(128_000)));
        assert!(!wider_tail_pays(&early(0), &at(128_000)));
        assert!(!wider_tail_pays(&early(1_000), &at(6_000)));
    }
}
