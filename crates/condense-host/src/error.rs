use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    #[error("{}: cannot read the template file: {source}", path.display())]
    TemplateFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Template(#[from] condense_template::TemplateError),
    #[error(transparent)]
    Summarizer(#[from] condense_summarize::SummarizeError),
    #[error(transparent)]
    Prune(#[from] condense_pruner::PruneError),
    #[error(transparent)]
    Plugin(#[from] crate::PluginError),
    #[error(
        "plugins {first} and {second} both supply a compaction template: set compaction.template_plugin to the one to use"
    )]
    TemplateConflict { first: String, second: String },
    #[error(
        "compaction.template_plugin names `{name}`, but no loaded plugin of that name supplies a template"
    )]
    NoSuchTemplatePlugin { name: String },
    #[error("the template of plugin {plugin}: {error}")]
    PluginTemplate {
        plugin: String,
        error: condense_template::TemplateError,
    },
}
