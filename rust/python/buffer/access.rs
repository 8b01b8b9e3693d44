//! `CpuAccess`: the context manager of `DmaBuf.cpu_access(mode)`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::dmabuf::PyDmaBuf;
use crate::buffer::{ErrorKind, SyncMode};
use crate::python::errors::error;
use crate::python::fence;

/// The context manager returned by `DmaBuf.cpu_access(mode)`.
#[pyclass(frozen, name = "CpuAccess", module = "npu_zc._core")]
pub struct PyCpuAccess {
    pub(super) buffer: Py<PyDmaBuf>,
    pub(super) mode: SyncMode,
    /// Wait this long for fences before the sync start (None: the kernel waits).
    pub(super) timeout: Option<Duration>,
    pub(super) active: AtomicBool,
}

#[pymethods]
impl PyCpuAccess {
    fn __enter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        let this = slf.get();
        if this.active.load(Ordering::SeqCst) {
            return Err(error(ErrorKind::Busy, "this cpu_access bracket is already entered"));
        }
        if this.timeout.is_some() && this.buffer.get().is_dmabuf {
            let buf = this.buffer.get().buf()?;
            fence::wait(slf.py(), &buf, this.mode, this.timeout)?;
        }
        this.buffer.get().sync(this.mode, true, slf.py())?;
        this.active.store(true, Ordering::SeqCst);
        Ok(slf.clone())
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if self.active.swap(false, Ordering::SeqCst) {
            self.buffer.get().sync(self.mode, false, py)?;
        }
        Ok(false)
    }

    #[getter]
    fn mode(&self) -> &'static str {
        match self.mode {
            SyncMode::Read => "read",
            SyncMode::Write => "write",
            SyncMode::ReadWrite => "rw",
        }
    }
}

/// A bracket entered and dropped without `__exit__` (an abandoned context
/// manager, a generator never finished) ends when Python collects it, so the
/// buffer can close and take a new bracket.
impl Drop for PyCpuAccess {
    fn drop(&mut self) {
        if self.active.swap(false, Ordering::SeqCst) {
            self.buffer.get().end_abandoned_bracket(self.mode);
        }
    }
}
