//! What the tests that replay a session request by request share.

use condense_host::{Compactor, Config, Sources};
use condense_pruner::{FixedClock, MemoryStore};

/// A compactor for a 32K window (4,096 output tokens), with `env` set as configuration, its
/// originals in memory and a fixed clock (no timestamps: the clock alone never makes
/// microcompact fire).
pub fn compactor(env: &[(&str, &str)]) -> Compactor {
    let mut vars = vec![
        ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), "32000".into()),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), "4096".into()),
    ];
    vars.extend(
        env.iter()
            .map(|(key, value)| (key.to_string(), value.to_string())),
    );
    let config = Config::load(&Sources {
        env: vars,
        ..Sources::default()
    })
    .unwrap();
    Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(MemoryStore::new()))
        .with_clock(Box::new(FixedClock(1_763_700_000_000)))
}
