//! `none`: no compaction at all. Requests past the context window are counted as failures (the
//! provider would refuse them).

use std::borrow::Cow;

use condense_core::Message;

use super::{Model, Policy, Prepared};
use crate::ReplayError;

/// Everything, every time.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCompaction;

impl Policy for NoCompaction {
    fn name(&self) -> &str {
        "none"
    }

    fn prepare<'h>(
        &mut self,
        history: &'h [Message],
        _now_ms: Option<u64>,
        _model: &Model<'_>,
    ) -> Result<Prepared<'h>, ReplayError> {
        Ok(Prepared {
            reply_limit: None,
            input: Cow::Borrowed(history),
            ..Prepared::default()
        })
    }
}
