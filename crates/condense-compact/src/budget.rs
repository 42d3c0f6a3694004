/// The numbers that decide when and where to cut; each default is the one `config/condense.toml` gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TailSettings {
    /// The model's context window, in tokens.
    pub context_window: usize,
    /// The most the model may write in one reply.
    pub max_output_tokens: usize,
    /// `reserved` is at most this (20,000): a reply rarely needs more, so larger output limits
    /// should not shrink the usable window.
    pub reserve_cap: usize,
    /// The tail's share of the usable window (0.25).
    pub tail_ratio: f64,
    /// The tail budget is never below this (2,000 tokens) ...
    pub min_tail_tokens: usize,
    /// ... nor above this (8,000 tokens).
    pub max_tail_tokens: usize,
    /// The tail holds at least this many user turns when the conversation has them (2).
    pub min_tail_turns: usize,
}

impl Default for TailSettings {
    fn default() -> Self {
        TailSettings {
            context_window: 200_000,
            max_output_tokens: 32_000,
            reserve_cap: 20_000,
            tail_ratio: 0.25,
            min_tail_tokens: 2_000,
            max_tail_tokens: 8_000,
            min_tail_turns: 2,
        }
    }
}

/// Tokens the conversation may use before compaction is due.
pub fn usable(settings: &TailSettings) -> usize {
    let reserved = settings.reserve_cap.min(settings.max_output_tokens);
    settings.context_window.saturating_sub(reserved)
}

/// `tokens >= usable`: at `usable` the next reply no longer fits.
pub fn is_due(tokens: usize, settings: &TailSettings) -> bool {
    tokens >= usable(settings)
}

/// `clamp(usable * tail_ratio, min_tail_tokens, max_tail_tokens)`.
pub fn tail_budget(settings: &TailSettings) -> usize {
    let share = (usable(settings) as f64 * settings.tail_ratio).floor() as usize;
    share.clamp(
        settings.min_tail_tokens,
        settings.max_tail_tokens.max(settings.min_tail_tokens),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_design_numbers() {
        let at = |context_window, max_output_tokens| TailSettings {
            context_window,
            max_output_tokens,
            ..TailSettings::default()
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
}
