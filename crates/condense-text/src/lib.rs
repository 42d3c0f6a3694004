//! Text as people read it, shared by condense's rules (placeholders, summaries, configuration
//! errors) and its command line: numbers with thousands separators, "did you mean …?" for a
//! mistyped name, and text cut at a limit with a marker.

#![warn(missing_docs)]
mod cut;
mod suggest;
mod thousands;

pub use cut::{Limit, Marker, cut};
pub use suggest::{edit_distance, nearest};
pub use thousands::thousands;
