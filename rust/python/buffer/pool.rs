//! `BufferPool` and the `PoolSlot` that acquire() hands out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::dmabuf::PyDmaBuf;
use crate::buffer::{self, ErrorKind, HeapSpec, Wait};
use crate::python::errors::{error, invalid, non_negative, IntoPyResult};

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
    fn acquire(slf: &Bound<'_, Self>, timeout: Option<f64>, block: bool) -> PyResult<PySlot> {
        let wait = match (block, timeout) {
            (false, _) => Wait::No,
            (true, None) => Wait::Forever,
            // Beyond what a Duration holds (1e20 s, inf) is forever.
            (true, Some(t)) if t >= 0.0 => Duration::try_from_secs_f64(t).map_or(Wait::Forever, Wait::For),
            (true, Some(t)) => return Err(invalid(format!("timeout must be >= 0 seconds or None, got {t}"))),
        };
        let pool = slf.get().pool.clone();
        let index = slf.py().detach(|| pool.acquire(wait)).py_err()?;
        Ok(PySlot {
            pool: slf.clone().unbind(),
            index,
            done: AtomicBool::new(false),
            submitted: AtomicBool::new(false),
        })
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
    done: AtomicBool,
    submitted: AtomicBool,
}

#[pymethods]
impl PySlot {
    #[getter]
    fn index(&self) -> usize {
        self.index
    }

    #[getter]
    fn buffer(&self, py: Python<'_>) -> Py<PyDmaBuf> {
        self.pool.get().buffers[self.index].clone_ref(py)
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
    fn release(&self) -> PyResult<()> {
        if self.done.swap(true, Ordering::SeqCst) {
            return Err(invalid(format!("pool buffer {} was released already", self.index)));
        }
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
