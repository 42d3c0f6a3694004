//! What condense asks the summarizer, and what it does with the answer.
//!
//! A template is a text file rendered with minijinja. Its `## ` (and `### `) lines are the
//! sections the summary must have: the prompt shows them to the model, the extractive summarizer
//! fills them, and the answer is checked against them. Every prompt is wrapped in a preamble and a
//! trailer that tell the model to answer with text only: a summarizer that calls a tool has failed.

#![warn(missing_docs)]
mod parse;
mod template;

pub use parse::{ParsedSummary, parse_summary, summary_as_written};
pub use template::{BUILTIN, PromptVars, Template, TemplateError, VARIABLES};
