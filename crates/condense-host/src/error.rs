use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
/// Why the pipeline could not be built or run; each variant keeps its source's kind, so a
/// harness tells a bad configuration from a summarizer that failed without parsing text.
#[non_exhaustive]
pub enum HostError {
    #[error(transparent)]
    /// The configuration is invalid.
    Config(#[from] crate::ConfigError),
    #[error("{}: cannot read the template file: {source}", path.display())]
    /// The configured template file could not be read.
    TemplateFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    #[error(transparent)]
    /// A template is invalid.
    Template(#[from] condense_template::TemplateError),
    #[error(transparent)]
    /// The summarizer could not be built.
    Summarizer(#[from] condense_summarize::SummarizeError),
    #[error(transparent)]
    /// Phase 1 failed (an original could not be stored).
    Prune(#[from] condense_pruner::PruneError),
    #[error(transparent)]
    /// A plugin failed.
    Plugin(#[from] crate::PluginError),
    #[error(
        "plugins {first} and {second} both supply a compaction template: set compaction.template_plugin to the one to use"
    )]
    /// Two plugins offer a template and none is chosen.
    TemplateConflict {
        /// The first plugin offering one.
        first: String,
        /// The second.
        second: String,
    },
    #[error(
        "compaction.template_plugin names `{name}`, but no loaded plugin of that name supplies a template"
    )]
    /// `compaction.template_plugin` names no loaded plugin with a template.
    NoSuchTemplatePlugin {
        /// The name.
        name: String,
    },
    #[error("the template of plugin {plugin}: {error}")]
    /// A plugin's template is invalid.
    PluginTemplate {
        /// The plugin.
        plugin: String,
        /// What is wrong with the template.
        error: condense_template::TemplateError,
    },
}
