//! Allocation (`alloc`) and what the heaps offer (`heaps`, `auto_plan`).

use std::sync::Arc;

use pyo3::prelude::*;

use super::dmabuf::PyDmaBuf;
use crate::buffer::{self, HeapSpec};
use crate::python::errors::{non_negative, IntoPyResult};

/// Allocates a buffer of at least `size` bytes (rounded up to a page).
#[pyfunction]
#[pyo3(signature = (size, heap = "auto"))]
pub(super) fn alloc(py: Python<'_>, size: &Bound<'_, PyAny>, heap: &str) -> PyResult<PyDmaBuf> {
    let size = non_negative(size, "buffer size")?;
    let spec = HeapSpec::parse(heap).py_err()?;
    let buf = py.detach(|| buffer::alloc(size, &spec)).py_err()?;
    Ok(PyDmaBuf::wrap(Arc::new(buf), false))
}

/// What `heaps()` reports for one heap or device.
#[pyclass(frozen, get_all, name = "HeapInfo", module = "npu_zc._core")]
pub struct PyHeapInfo {
    name: String,
    path: Option<String>,
    backend: &'static str,
    usable: bool,
    reason: Option<String>,
    size_limit: Option<u64>,
}

#[pymethods]
impl PyHeapInfo {
    fn __repr__(&self) -> String {
        match &self.reason {
            None => format!("<HeapInfo {} ({}) usable>", self.name, self.backend),
            Some(r) => format!("<HeapInfo {} ({}) unusable: {r}>", self.name, self.backend),
        }
    }
}

#[pyfunction]
pub(super) fn heaps(py: Python<'_>) -> Vec<PyHeapInfo> {
    py.detach(buffer::heaps)
        .into_iter()
        .map(|h| PyHeapInfo {
            name: h.name,
            path: h.path.map(|p| p.display().to_string()),
            backend: h.backend,
            usable: h.usable,
            reason: h.reason,
            size_limit: h.size_limit,
        })
        .collect()
}

/// The order `heap="auto"` tries, each with why it is unusable here (None: usable).
#[pyfunction]
pub(super) fn auto_plan(py: Python<'_>) -> Vec<(String, Option<String>)> {
    py.detach(buffer::heap::auto_plan)
        .into_iter()
        .map(|(spec, why)| {
            let name = match spec {
                HeapSpec::DmaHeap(n) => n,
                HeapSpec::Udmabuf => "udmabuf".into(),
                HeapSpec::Memfd => "memfd".into(),
                other => format!("{other:?}"),
            };
            (name, why)
        })
        .collect()
}
