//! What the unit tests of several modules share.

use condense_tokenizer::Tiktoken;

use crate::{FixedClock, PruneSettings, Pruner, Store, StoreError};

/// A pruner of `settings` keeping originals in `store`, its clock at 0.
pub(crate) fn pruner<'a>(
    settings: &'a PruneSettings,
    counter: &'a Tiktoken,
    store: &'a dyn Store,
) -> Pruner<'a> {
    Pruner {
        settings,
        counter,
        store,
        clock: &FixedClock(0),
    }
}

/// A store on a full disk: every write fails.
pub(crate) struct Full;

impl Store for Full {
    fn put(&self, handle: &str, _: &[u8]) -> Result<(), StoreError> {
        Err(StoreError::Write {
            handle: handle.to_owned(),
            path: "/full".into(),
            source: std::io::Error::other("no space left on device"),
        })
    }

    fn get(&self, handle: &str) -> Result<Vec<u8>, StoreError> {
        Err(StoreError::NotFound(handle.to_owned()))
    }
}
