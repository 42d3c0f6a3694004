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
}
