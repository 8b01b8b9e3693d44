//! The base object of every numpy view of a buffer, and the token that counts
//! live views.
//!
//! Safety of views (the rust-numpy model): a numpy array made by `map()` has a
//! `_Mapping` object as its base, which owns the mmap; the memory lives as long
//! as any array (or slice of one) does. Each `_Mapping` also holds a token
//! that counts live views, and `close()` refuses while the count is not zero.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pyo3::prelude::*;

use crate::buffer::Mapping;
use crate::python::alias::MappingEntry;

/// A mapping of a buffer, known to the aliasing rule (`alias`) as that
/// buffer's bytes for as long as it is mapped.
pub(super) struct KnownMapping {
    // Declared first, so dropped first: out of the registry before the unmap.
    pub(super) _entry: MappingEntry,
    pub(super) mapping: Mapping,
}

/// Decrements the owning buffer's view count when the last array is gone.
pub(super) struct ViewToken(Arc<AtomicUsize>);

impl ViewToken {
    pub(super) fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        ViewToken(count.clone())
    }
}

impl Drop for ViewToken {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The base object of every numpy view: keeps the mapping alive.
#[pyclass(frozen, name = "_Mapping", module = "npu_zc._core")]
pub struct PyMapping {
    pub(super) _mapping: Arc<KnownMapping>,
    pub(super) _token: ViewToken,
    /// Anything else the view keeps alive (a camera frame: while a view of
    /// it lives, the driver does not get the buffer back).
    pub(super) _keep: Option<Py<PyAny>>,
}
