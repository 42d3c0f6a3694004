//! The built-in configuration: `config/condense.toml`, compiled in.
//!
//! That file is the one place a default is written, with the reason for it beside it. The phase
//! crates' settings structs derive `Deserialize` and are read out of it ([`section`]), so a
//! setting is a field with its doc in the crate that uses it and a line in the file: no
//! `Default` impl repeats a number, and nothing has to be kept equal by hand. `condense-config`
//! merges the user's layers over the same file and reads the same structs out of the result.

#![warn(missing_docs)]

use serde::de::DeserializeOwned;

/// `config/condense.toml`, every key with its default.
pub const CONFIG: &str = include_str!("../../../config/condense.toml");

/// The built-in file does not give what a settings struct asks for: a bug of this build (the
/// file and the struct disagree), which every test that loads the defaults reports.
#[derive(Debug, thiserror::Error)]
#[error("the built-in configuration's [{section}] does not load: {message}")]
pub struct DefaultsError {
    /// The section asked for.
    pub section: String,
    /// What was wrong.
    pub message: String,
}

/// The built-in `[name]` section read as `T`: the defaults of the settings it holds.
pub fn section<T: DeserializeOwned>(name: &str) -> Result<T, DefaultsError> {
    let error = |message: String| DefaultsError {
        section: name.to_owned(),
        message,
    };
    let mut root: toml::Table = toml::from_str(CONFIG).map_err(|e| error(e.to_string()))?;
    let table = root
        .remove(name)
        .ok_or_else(|| error("no such section".to_owned()))?;
    table
        .try_into()
        .map_err(|e: toml::de::Error| error(e.message().trim().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Model {
        context_window: usize,
    }

    #[test]
    fn a_section_reads_and_a_missing_one_is_named() {
        let model: Model = section("model").unwrap();
        assert!(model.context_window > 0);
        let error = section::<Model>("no_such").unwrap_err();
        assert_eq!(error.section, "no_such");
        assert!(error.to_string().contains("[no_such]"), "{error}");
    }
}
