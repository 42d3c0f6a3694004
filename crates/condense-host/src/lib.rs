//! The host: configuration and the pipeline that a harness or the CLI drives.

pub mod config;

pub use config::{Config, ConfigError, Origin, PluginSpec, Setting, Source, Sources};
