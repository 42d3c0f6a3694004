//! The price table: what a token costs and the rules of each provider's cache.
//!
//! Every number lives in `config/prices.toml`; a user's file of the same shape is read on top of
//! it, key by key, so that a contract price or a newer model is one line of TOML.

use serde::{Deserialize, Serialize};

use condense_host::CachePrices;

use crate::ReplayError;

/// `config/prices.toml`, the one place the numbers are written.
pub const BUILT_IN_PRICES: &str = include_str!("../../../config/prices.toml");

/// Both providers' prices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// Anthropic's Messages API.
    pub anthropic: AnthropicPrices,
    /// OpenAI's Chat Completions.
    pub openai: OpenAiPrices,
}

/// Anthropic: explicit breakpoints, writes at a premium, reads at a discount.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnthropicPrices {
    /// The model the prices are for.
    pub model: String,
    /// When the figures were checked.
    pub checked: String,
    /// Where they come from.
    pub source: String,
    /// Dollars per million uncached input tokens.
    pub input_per_mtok: f64,
    /// Dollars per million output tokens.
    pub output_per_mtok: f64,
    /// A 5-minute cache write costs the input price times this.
    pub cache_write_5m_multiplier: f64,
    /// A 1-hour cache write costs the input price times this.
    pub cache_write_1h_multiplier: f64,
    /// A cache hit costs the input price times this.
    pub cache_read_multiplier: f64,
    /// Shorter prefixes are never cached.
    pub min_cacheable_tokens: u64,
    /// How many content blocks before a breakpoint the provider looks for a cached prefix.
    pub lookback_blocks: u64,
}

/// OpenAI: automatic prefix caching, no write premium.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiPrices {
    /// The model the prices are for.
    pub model: String,
    /// When the figures were checked.
    pub checked: String,
    /// Where they come from.
    pub source: String,
    /// Dollars per million uncached input tokens.
    pub input_per_mtok: f64,
    /// Dollars per million cached input tokens.
    pub cached_input_per_mtok: f64,
    /// Dollars per million output tokens.
    pub output_per_mtok: f64,
    /// Prompts shorter than this are never cached.
    pub min_cached_tokens: u64,
    /// A hit covers the shared prefix rounded down to the minimum plus a multiple of this.
    pub cache_step_tokens: u64,
}

impl PriceTable {
    /// The prices condense weighs an early compaction with, in cache reads a token, when it is
    /// billed at these for `provider` with `ttl`: what an input token the provider has not
    /// cached costs more than a cached one (on Anthropic, a cache write), and an output token.
    /// Each `None` where a cached read is free: there is nothing to weigh against.
    pub fn cache_prices(&self, provider: crate::Provider, ttl: crate::Ttl) -> CachePrices {
        let (read, rewrite, output) = match provider {
            crate::Provider::Anthropic => {
                let prices = &self.anthropic;
                let write = match ttl {
                    crate::Ttl::FiveMinutes => prices.cache_write_5m_multiplier,
                    crate::Ttl::OneHour => prices.cache_write_1h_multiplier,
                };
                let read = prices.input_per_mtok * prices.cache_read_multiplier;
                (read, prices.input_per_mtok * write, prices.output_per_mtok)
            }
            crate::Provider::OpenAi => {
                let prices = &self.openai;
                (
                    prices.cached_input_per_mtok,
                    prices.input_per_mtok,
                    prices.output_per_mtok,
                )
            }
        };
        let in_reads = |price: f64| (read > 0.0).then(|| (price / read).max(0.0));
        CachePrices {
            cache_rewrite_cost: in_reads(rewrite - read),
            output_cost: in_reads(output),
        }
    }

    /// The built-in table.
    pub fn built_in() -> Result<PriceTable, ReplayError> {
        PriceTable::layered(None)
    }

    /// The built-in table with `overrides` (the text of a user's file named `path`) read on top.
    pub fn with_overrides(path: &str, overrides: &str) -> Result<PriceTable, ReplayError> {
        PriceTable::layered(Some((path, overrides)))
    }

    fn layered(overrides: Option<(&str, &str)>) -> Result<PriceTable, ReplayError> {
        let parse = |name: &str, text: &str| {
            text.parse::<toml::Table>()
                .map_err(|error| ReplayError::Prices {
                    path: name.to_owned(),
                    message: error.to_string(),
                })
        };
        let mut table = parse("config/prices.toml (built in)", BUILT_IN_PRICES)?;
        let name = overrides.map_or("config/prices.toml (built in)", |(path, _)| path);
        if let Some((path, text)) = overrides {
            merge(&mut table, parse(path, text)?);
        }
        let prices: PriceTable =
            toml::Value::Table(table)
                .try_into()
                .map_err(|error: toml::de::Error| ReplayError::Prices {
                    path: name.to_owned(),
                    message: error.message().to_owned(),
                })?;
        prices.check(name)?;
        Ok(prices)
    }

    /// Prices are from 0 to [`PRICE_LIMIT`]; the cache's step is not zero.
    fn check(&self, path: &str) -> Result<(), ReplayError> {
        let a = &self.anthropic;
        let o = &self.openai;
        let numbers = [
            ("anthropic.input_per_mtok", a.input_per_mtok),
            ("anthropic.output_per_mtok", a.output_per_mtok),
            (
                "anthropic.cache_write_5m_multiplier",
                a.cache_write_5m_multiplier,
            ),
            (
                "anthropic.cache_write_1h_multiplier",
                a.cache_write_1h_multiplier,
            ),
            ("anthropic.cache_read_multiplier", a.cache_read_multiplier),
            ("openai.input_per_mtok", o.input_per_mtok),
            ("openai.cached_input_per_mtok", o.cached_input_per_mtok),
            ("openai.output_per_mtok", o.output_per_mtok),
        ];
        for (key, value) in numbers {
            // A bound far above any real price or multiplier: what is past it is a typo, and a
            // product of such numbers would print as `inf` or `NaN`.
            if !(0.0..=PRICE_LIMIT).contains(&value) {
                return Err(ReplayError::Prices {
                    path: path.to_owned(),
                    message: format!(
                        "`{key}` must be a price (or multiplier) from 0 to {PRICE_LIMIT:.0}, not {value}"
                    ),
                });
            }
        }
        if o.cache_step_tokens == 0 {
            return Err(ReplayError::Prices {
                path: path.to_owned(),
                message: "`openai.cache_step_tokens` must be at least 1".to_owned(),
            });
        }
        Ok(())
    }
}

/// The largest price (dollars per million tokens) or multiplier a price table may hold.
const PRICE_LIMIT: f64 = 1_000_000.0;

/// `over`'s keys replace `base`'s, table by table.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(value)) => merge(inner, value),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_table_reads_and_holds_the_published_multipliers() {
        let prices = PriceTable::built_in().unwrap();
        assert_eq!(prices.anthropic.cache_write_5m_multiplier, 1.25);
        assert_eq!(prices.anthropic.cache_write_1h_multiplier, 2.0);
        assert_eq!(prices.anthropic.cache_read_multiplier, 0.1);
        assert_eq!(prices.anthropic.lookback_blocks, 20);
        assert_eq!(prices.openai.min_cached_tokens, 1024);
        assert_eq!(prices.openai.cache_step_tokens, 128);
    }

    /// condense plans with the prices it is billed at: for each provider's model here, the
    /// prices `config/models.toml` gives that model (Anthropic's being the `[compaction]`
    /// defaults), and for the 1-hour cache a write's own price.
    #[test]
    fn condense_plans_with_the_prices_the_replay_bills() {
        use crate::{Provider, Ttl};
        let prices = PriceTable::built_in().unwrap();
        let config = condense_host::Config::built_in().unwrap();
        let planned = |model: &str| {
            let defaults = config.tail_settings().rules;
            let rule = config.model_windows().find(model).map(|rule| rule.prices);
            let rule = rule.unwrap_or_default();
            (
                rule.cache_rewrite_cost
                    .unwrap_or(defaults.cache_rewrite_cost),
                rule.output_cost.unwrap_or(defaults.output_cost),
            )
        };
        let rounded = |price: Option<f64>| (price.unwrap() * 1e6).round() / 1e6;
        for (provider, model) in [
            (Provider::Anthropic, &prices.anthropic.model),
            (Provider::OpenAi, &prices.openai.model),
        ] {
            let billed = prices.cache_prices(provider, Ttl::FiveMinutes);
            let (rewrite, output) = planned(model);
            assert_eq!(rounded(billed.cache_rewrite_cost), rewrite, "{model}");
            assert_eq!(rounded(billed.output_cost), output, "{model}");
        }
        let hour = prices.cache_prices(Provider::Anthropic, Ttl::OneHour);
        assert_eq!(rounded(hour.cache_rewrite_cost), 19.0);
        let free =
            PriceTable::with_overrides("free.toml", "[openai]\ncached_input_per_mtok = 0.0\n")
                .unwrap()
                .cache_prices(Provider::OpenAi, Ttl::FiveMinutes);
        assert_eq!(free, CachePrices::default());
    }

    #[test]
    fn a_users_file_overrides_only_what_it_names() {
        let prices =
            PriceTable::with_overrides("mine.toml", "[anthropic]\ninput_per_mtok = 15.0\n")
                .unwrap();
        assert_eq!(prices.anthropic.input_per_mtok, 15.0);
        assert_eq!(prices.anthropic.output_per_mtok, 15.0);
        assert_eq!(prices.openai, PriceTable::built_in().unwrap().openai);
    }

    #[test]
    fn a_misspelt_key_or_a_negative_price_is_an_error_naming_the_file() {
        let error = PriceTable::with_overrides("mine.toml", "[anthropic]\ninput_per_mtk = 1.0\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("mine.toml") && error.contains("input_per_mtk"),
            "{error}"
        );
        let error = PriceTable::with_overrides("mine.toml", "[openai]\noutput_per_mtok = -1.0\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("openai.output_per_mtok"), "{error}");
        for huge in ["1e308", "inf", "nan", "2000000.0"] {
            let error = PriceTable::with_overrides(
                "mine.toml",
                &format!("[anthropic]\ninput_per_mtok = {huge}\n"),
            )
            .unwrap_err()
            .to_string();
            assert!(
                error.contains("anthropic.input_per_mtok"),
                "{huge}: {error}"
            );
        }
        let error = PriceTable::with_overrides("mine.toml", "[openai\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("mine.toml"), "{error}");
    }
}
