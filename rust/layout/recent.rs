//! The few most recently used values of something costly to build (a plan,
//! a resize's tap tables): a pipeline converts every frame with the same
//! arguments, so the first entry nearly always answers.

use std::sync::{Arc, Mutex};

/// Keeps the `KEEP` most recently used values, by key.
pub(crate) struct Recent<K, V, const KEEP: usize> {
    entries: Mutex<Vec<(K, Arc<V>)>>,
}

impl<K: PartialEq, V, const KEEP: usize> Recent<K, V, KEEP> {
    pub(crate) const fn new() -> Self {
        Recent { entries: Mutex::new(Vec::new()) }
    }

    /// The value for `key`, built by `build` (outside the lock) when it is
    /// not kept; an error from `build` is returned and nothing is kept.
    pub(crate) fn get_or_build<E>(&self, key: K, build: impl FnOnce() -> Result<V, E>) -> Result<Arc<V>, E> {
        // A poisoned lock only means another thread panicked mid-update.
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = entries.iter().position(|(k, _)| *k == key) {
            let entry = entries.remove(i);
            let value = entry.1.clone();
            entries.insert(0, entry);
            return Ok(value);
        }
        drop(entries);
        let value = Arc::new(build()?);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(0, (key, value.clone()));
        entries.truncate(KEEP);
        Ok(value)
    }

    /// `get_or_build` for values whose building cannot fail.
    pub(crate) fn get_or_make(&self, key: K, make: impl FnOnce() -> V) -> Arc<V> {
        match self.get_or_build(key, || Ok::<V, std::convert::Infallible>(make())) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }
}
