use std::fmt;
use std::str::FromStr;

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

use crate::pieces::Pieces;

/// The tiktoken encodings condense counts with. `o200k_base` (GPT-4o and later) is the default;
/// `cl100k_base` (GPT-4, GPT-3.5) for older models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Encoding {
    #[default]
    /// `o200k_base` (GPT-4o and later; the default).
    O200kBase,
    /// `cl100k_base` (GPT-4, GPT-3.5).
    Cl100kBase,
}

impl Encoding {
    /// The name configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    /// The shared tokenizer. tiktoken-rs builds each one once per process (building o200k_base
    /// takes a noticeable fraction of a second), so every counter shares it.
    pub(crate) fn bpe(self) -> &'static CoreBPE {
        match self {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        }
    }

    /// The shared counter without the backtracking regex ([`Pieces`]), built once per process
    /// like the tokenizer it reads its ranks from.
    pub(crate) fn pieces(self) -> Option<&'static Pieces> {
        static O200K: OnceLock<Option<Pieces>> = OnceLock::new();
        static CL100K: OnceLock<Option<Pieces>> = OnceLock::new();
        let cell = match self {
            Encoding::O200kBase => &O200K,
            Encoding::Cl100kBase => &CL100K,
        };
        cell.get_or_init(|| Pieces::new(self)).as_ref()
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown encoding `{0}` (expected o200k_base or cl100k_base)")]
/// An encoding name that is neither.
pub struct UnknownEncoding(pub String);

impl FromStr for Encoding {
    type Err = UnknownEncoding;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "o200k_base" => Ok(Encoding::O200kBase),
            "cl100k_base" => Ok(Encoding::Cl100kBase),
            _ => Err(UnknownEncoding(name.to_owned())),
        }
    }
}
