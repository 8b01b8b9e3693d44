//! `BufferPool` and the `PoolSlot` that acquire() hands out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::dmabuf::PyDmaBuf;
use crate::buffer::{self, ErrorKind, HeapSpec, Wait};
use crate::python::errors::{error, invalid, non_negative, IntoPyResult};
use crate::python::timeout::{next_slice, Timeout};

/// A fixed ring of equal buffers, allocated once.
#[pyclass(frozen, name = "BufferPool", module = "npu_zc._core")]
pub struct PyBufferPool {
    pub(crate) pool: Arc<buffer::BufferPool>,
    pub(crate) buffers: Vec<Py<PyDmaBuf>>,
}

fn state_name(s: buffer::SlotState) -> &'static str {
    match s {
        buffer::SlotState::Free => "free",
        buffer::SlotState::Cpu => "cpu",
        buffer::SlotState::InFlight => "in-flight",
    }
}

#[pymethods]
impl PyBufferPool {
    #[new]
    #[pyo3(signature = (count, size, heap = "auto"))]
    fn new(py: Python<'_>, count: &Bound<'_, PyAny>, size: &Bound<'_, PyAny>, heap: &str) -> PyResult<Self> {
        let count = non_negative(count, "pool count")?;
        let size = non_negative(size, "buffer size")?;
        let spec = HeapSpec::parse(heap).py_err()?;
        let pool = Arc::new(py.detach(|| buffer::BufferPool::new(count, size, &spec)).py_err()?);
        let buffers = pool
            .buffers()
            .iter()
            .map(|b| Py::new(py, PyDmaBuf::wrap(b.clone(), true)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyBufferPool { pool, buffers })
    }

    fn __len__(&self) -> usize {
        self.pool.len()
    }

    #[getter]
    fn buffers(&self, py: Python<'_>) -> Vec<Py<PyDmaBuf>> {
        self.buffers.iter().map(|b| b.clone_ref(py)).collect()
    }

    #[getter]
    fn free_count(&self) -> usize {
        self.pool.free_count()
    }

    /// "free", "cpu" or "in-flight".
    fn state(&self, index: &Bound<'_, PyAny>) -> PyResult<&'static str> {
        self.pool.state(non_negative(index, "pool buffer index")?).map(state_name).py_err()
    }

    /// Takes a free buffer. timeout=None waits as long as it takes; block=False
    /// (or timeout=0) fails at once with PoolExhaustedError when none is free.
    #[pyo3(signature = (timeout = None, *, block = true))]
    fn acquire(slf: &Bound<'_, Self>, timeout: Option<Timeout>, block: bool) -> PyResult<PySlot> {
        let py = slf.py();
        let pool = slf.get().pool.clone();
        // None, inf or beyond what a Duration holds (1e20 s, 10**400) is for ever (timeout.rs).
        let timeout = timeout.unwrap_or(Timeout(None));
        if !block || timeout.0 == Some(Duration::ZERO) {
            // No wait, so the GIL stays held: the pool's lock is held for a scan of a few slots and never
            // while waiting (the condvar lets it go), and a detach here cost a GIL hand-over per frame.
            let index = pool.acquire(Wait::No).py_err()?;
            return PySlot::new(slf, index);
        }
        // Wait in slices, letting Python run its signal handlers between them:
        // Ctrl-C stops a wait for a buffer that may never come.
        let deadline = timeout.deadline();
        let index = loop {
            let Some(slice) = next_slice(deadline) else {
                return Err(pool.exhausted(timeout.0)).py_err();
            };
            match py.detach(|| pool.acquire(Wait::For(slice))) {
                Ok(index) => break index,
                Err(e) if e.kind == ErrorKind::PoolExhausted => py.check_signals()?,
                Err(e) => return Err(e).py_err(),
            }
        };
        PySlot::new(slf, index)
    }

    /// Gone: an index can name a buffer that another caller holds now. Release
    /// through the PoolSlot that acquire() returned.
    fn release(&self, index: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(invalid(format!(
            "pool.release({index}) is not supported: an index may name a buffer another caller holds now; \
             keep the PoolSlot that acquire() returned and call slot.release()"
        )))
    }

    /// Closes every buffer; refused while any is held, in flight, or viewed.
    fn close(&self) -> PyResult<()> {
        let busy = (0..self.pool.len()).filter(|&i| self.pool.state(i).ok() != Some(buffer::SlotState::Free)).count();
        if busy > 0 {
            return Err(error(
                ErrorKind::Busy,
                format!("cannot close the pool: {busy} buffer(s) are held or in flight"),
            ));
        }
        for b in &self.buffers {
            let b = b.get();
            b.refuse_if_busy(&b.lock(), "close the pool holding")?;
        }
        for b in &self.buffers {
            b.get().close_now()?;
        }
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "<BufferPool {} x {} bytes, {} free>",
            self.pool.len(),
            self.pool.buffers()[0].size(),
            self.pool.free_count()
        )
    }
}

/// One buffer taken from a pool. As a context manager it releases the buffer
/// on exit unless it was submitted (then the request's completion releases it).
#[pyclass(frozen, name = "PoolSlot", module = "npu_zc._core")]
pub struct PySlot {
    pool: Py<PyBufferPool>,
    index: usize,
    /// The buffer as this holder sees it: its views are counted apart.
    lease: Py<PyDmaBuf>,
    done: AtomicBool,
    submitted: AtomicBool,
}

impl PySlot {
    fn new(pool: &Bound<'_, PyBufferPool>, index: usize) -> PyResult<Self> {
        let lease = Py::new(pool.py(), pool.get().buffers[index].get().lease())?;
        let (done, submitted) = (AtomicBool::new(false), AtomicBool::new(false));
        Ok(PySlot { pool: pool.clone().unbind(), index, lease, done, submitted })
    }
}

#[pymethods]
impl PySlot {
    #[getter]
    fn index(&self) -> usize {
        self.index
    }

    #[getter]
    fn buffer(&self, py: Python<'_>) -> Py<PyDmaBuf> {
        self.lease.clone_ref(py)
    }

    /// Marks the buffer in flight (bound to a device request).
    fn submit(&self) -> PyResult<()> {
        if self.done.load(Ordering::SeqCst) {
            // The index may belong to another caller by now.
            return Err(invalid(format!("pool buffer {} was released already: it cannot be submitted", self.index)));
        }
        self.pool.get().pool.submit(self.index).py_err()?;
        self.submitted.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Returns the buffer to the pool; a second release is an error.
    /// Refused while numpy views made through `slot.buffer` are alive: once
    /// released, another caller may acquire the buffer and write it.
    fn release(&self) -> PyResult<()> {
        let views = self.lease.get().views();
        if views > 0 && !self.done.load(Ordering::SeqCst) {
            return Err(error(
                ErrorKind::Busy,
                format!(
                    "cannot release pool buffer {}: {views} numpy view(s) made through slot.buffer are alive; \
                     delete them first (e.g. `del array`): once released, another caller may write the buffer",
                    self.index
                ),
            ));
        }
        if self.done.swap(true, Ordering::SeqCst) {
            return Err(invalid(format!("pool buffer {} was released already", self.index)));
        }
        self.lease.get().end_lease();
        self.pool.get().pool.release(self.index).py_err()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if !self.submitted.load(Ordering::SeqCst) && !self.done.load(Ordering::SeqCst) {
            self.release()?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = self.pool.get().pool.state(self.index).map(state_name).unwrap_or("?");
        format!("<PoolSlot {} {state}>", self.index)
    }
}
