//! Protects a memory store's tools: what an agent wrote to its memory, and what it recalled, must
//! survive pruning and compaction, or the memory is useless.
//!
//! ```toml
//! [[plugins]]
//! path = "target/release/libcondense_plugin_memory_store.so"
//! [plugins.config]
//! tools = ["memory_delete"]   # protected too, beside memory_store and memory_recall
//! ```

use condense_plugin::{Plugin, export_plugin};
use serde::Deserialize;

const ALWAYS: [&str; 2] = ["memory_store", "memory_recall"];

#[derive(Debug, Default)]
pub struct MemoryStorePlugin {
    extra: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(default)]
    tools: Vec<String>,
}

impl Plugin for MemoryStorePlugin {
    fn name(&self) -> &str {
        "memory-store"
    }

    fn version(&self) -> &str {
        env!("CARGO_PKG_VERSION")
    }

    fn configure(&mut self, config_toml: &str) -> Result<(), String> {
        let settings: Settings =
            toml::from_str(config_toml).map_err(|error| format!("memory-store: {error}"))?;
        self.extra = settings.tools;
        Ok(())
    }

    fn protected_tools(&self) -> Vec<String> {
        let mut tools: Vec<String> = ALWAYS.iter().map(|tool| (*tool).to_owned()).collect();
        tools.extend(
            self.extra
                .iter()
                .filter(|tool| !ALWAYS.contains(&tool.as_str()))
                .cloned(),
        );
        tools
    }
}

export_plugin!(MemoryStorePlugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configured_tools_join_the_built_in_ones() {
        let mut plugin = MemoryStorePlugin::default();
        plugin
            .configure("tools = [\"memory_delete\", \"memory_store\"]")
            .unwrap();
        assert_eq!(
            plugin.protected_tools(),
            ["memory_store", "memory_recall", "memory_delete"]
        );
        assert!(
            plugin
                .configure("tool = []")
                .unwrap_err()
                .contains("unknown field")
        );
    }
}
