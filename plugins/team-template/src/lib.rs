//! Supplies a team's compaction template, so every project of the team summarizes the same way.
//!
//! ```toml
//! [[plugins]]
//! path = "target/release/libcondense_plugin_team_template.so"
//! [plugins.config]
//! file = "docs/compaction.md"        # or: template = "## Ticket\n## Done\n## Next\n"
//! ```
//! A template set in condense's own configuration still wins over this one.

use condense_plugin::{Plugin, export_plugin};
use serde::Deserialize;

/// What the plugin supplies when its configuration names no template.
pub const DEFAULT_TEMPLATE: &str = "Summarize the work for the next engineer on the team.\n\n## Ticket\nThe ticket or request being worked on, quoted.\n\n## Done\nWhat is finished, with the commits or files that show it.\n\n## Next\nWhat to do next, in order.\n\n## Files\nEvery file touched.\n";

#[derive(Debug, Default)]
pub struct TeamTemplate {
    template: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    template: Option<String>,
    file: Option<String>,
}

impl Plugin for TeamTemplate {
    fn name(&self) -> &str {
        "team-template"
    }

    fn version(&self) -> &str {
        env!("CARGO_PKG_VERSION")
    }

    fn configure(&mut self, config_toml: &str) -> Result<(), String> {
        let settings: Settings =
            toml::from_str(config_toml).map_err(|error| format!("team-template: {error}"))?;
        self.template = Some(match (settings.template, settings.file) {
            (Some(_), Some(_)) => {
                return Err("team-template: set `template` or `file`, not both".into());
            }
            (Some(text), None) => text,
            (None, Some(path)) => std::fs::read_to_string(&path)
                .map_err(|error| format!("team-template: cannot read {path}: {error}"))?,
            (None, None) => DEFAULT_TEMPLATE.to_owned(),
        });
        Ok(())
    }

    fn template(&self) -> Option<String> {
        self.template.clone()
    }
}

export_plugin!(TeamTemplate);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_comes_from_the_config_or_a_file() {
        let mut plugin = TeamTemplate::default();
        plugin.configure("").unwrap();
        assert_eq!(plugin.template().as_deref(), Some(DEFAULT_TEMPLATE));
        plugin.configure("template = \"## A\\n\"").unwrap();
        assert_eq!(plugin.template().as_deref(), Some("## A\n"));
        let error = plugin
            .configure("file = \"/no/such/template.md\"")
            .unwrap_err();
        assert!(error.starts_with("team-template: cannot read /no/such/template.md"));
    }
}
