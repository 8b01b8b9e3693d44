//! `DmaBuf`: a buffer fd owned by Python, its numpy views (`map`), the
//! state a CPU-access bracket and close() share, and `CpuAccess`, the
//! bracket itself (one room: each reads the other's state).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use numpy::ndarray::ArrayView1;
use numpy::PyArray1;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyTuple};
use rustix::fd::{AsRawFd, BorrowedFd, IntoRawFd};

use super::view::{KnownMapping, PyMapping, ViewToken};
use crate::buffer::{Access, DmaBuf, ErrorKind, SyncMode};
use crate::python::alias;
use crate::python::errors::{error, invalid, non_negative, Count, IntoPyResult};
use crate::python::fence;
use crate::python::timeout::Timeout;

#[derive(Default)]
pub(super) struct Open {
    buf: Option<Arc<DmaBuf>>,
    /// One mapping of the whole buffer per access mode, made on first use and
    /// shared by every view: per-frame `map()` calls cost no syscall.
    rw: Option<Arc<KnownMapping>>,
    ro: Option<Arc<KnownMapping>>,
    /// The mode of the open cpu_access bracket, if one is open.
    syncing: Option<SyncMode>,
}

/// A DMA-BUF (or memfd) owned by Python.
#[pyclass(frozen, name = "DmaBuf", module = "npu_zc._core")]
pub struct PyDmaBuf {
    state: Mutex<Open>,
    views: Arc<AtomicUsize>,
    /// Kept for repr and errors after close.
    size: usize,
    kind: String,
    pub(super) is_dmabuf: bool,
    /// Buffers of a pool are closed with the pool, never one by one.
    pooled: bool,
    /// Only read-only views (a camera frame's buffer: the driver writes it).
    read_only: bool,
    /// What views must keep alive, and may be asked whether the memory is
    /// still ours (`held`): the camera frame this buffer is lent as.
    holder: Option<Py<PyAny>>,
}

impl PyDmaBuf {
    pub(crate) fn wrap(buf: Arc<DmaBuf>, pooled: bool) -> Self {
        PyDmaBuf {
            size: buf.size(),
            kind: buf.kind().to_string(),
            is_dmabuf: buf.is_dmabuf(),
            pooled,
            read_only: false,
            holder: None,
            views: Arc::new(AtomicUsize::new(0)),
            state: Mutex::new(Open { buf: Some(buf), ..Default::default() }),
        }
    }

    /// This buffer as a camera frame lends it: views are read-only, keep the
    /// frame (`holder`) held, and count as this buffer's views; none is made
    /// once the frame is released.
    pub(crate) fn lent_by(&self, holder: Py<PyAny>) -> Self {
        PyDmaBuf { read_only: true, holder: Some(holder), views: self.views.clone(), ..self.lease() }
    }

    /// The same buffer, for one holder of a pool slot: it shares the
    /// buffer's mappings but counts its own views, so that the slot can
    /// refuse its release while views made through it are alive, and it is
    /// closed (no new views) once the slot is released.
    pub(crate) fn lease(&self) -> Self {
        let open = self.lock();
        PyDmaBuf {
            size: self.size,
            kind: self.kind.clone(),
            is_dmabuf: self.is_dmabuf,
            pooled: true,
            read_only: false,
            holder: None,
            views: Arc::new(AtomicUsize::new(0)),
            state: Mutex::new(Open { buf: open.buf.clone(), rw: open.rw.clone(), ro: open.ro.clone(), syncing: None }),
        }
    }

    /// Ends a lease: no new views (map() says it is closed).
    pub(crate) fn end_lease(&self) {
        *self.lock() = Open::default();
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Open> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn describe(&self) -> String {
        format!("DmaBuf({} bytes, {})", self.size, self.kind)
    }

    pub(crate) fn buf(&self) -> PyResult<Arc<DmaBuf>> {
        self.lock().buf.clone().ok_or_else(|| error(ErrorKind::Closed, format!("{} is closed", self.describe())))
    }

    fn mapping(&self, access: Access) -> PyResult<Arc<KnownMapping>> {
        let mut open = self.lock();
        let buf = open
            .buf
            .clone()
            .ok_or_else(|| error(ErrorKind::Closed, format!("cannot map {}: it is closed", self.describe())))?;
        let slot = match access {
            Access::ReadWrite => &mut open.rw,
            Access::ReadOnly => &mut open.ro,
        };
        if let Some(m) = slot {
            return Ok(m.clone());
        }
        let mapping = buf.map_all(access).py_err()?;
        // The buffer's identity for the aliasing rule: two fds (an import, a
        // dup) of one DMA-BUF or memfd share its inode.
        let st = rustix::fs::fstat(buf.fd())
            .map_err(|e| crate::buffer::Error::from_errno(e, "fstat of a mapped buffer failed"))
            .py_err()?;
        #[allow(clippy::unnecessary_cast)] // their types differ between architectures
        let (dev, ino) = (st.st_dev as u64, st.st_ino as u64);
        let entry = alias::register_mapping(mapping.as_ptr(), mapping.len(), dev, ino, 0);
        let m = Arc::new(KnownMapping { _entry: entry, mapping });
        *slot = Some(m.clone());
        Ok(m)
    }

    pub(super) fn refuse_if_busy(&self, open: &Open, what: &str) -> PyResult<()> {
        let views = self.views.load(Ordering::SeqCst);
        if views > 0 {
            return Err(error(
                ErrorKind::Busy,
                format!(
                    "cannot {what} {}: {views} numpy view(s) of its memory are still alive \
                     (delete them, e.g. `del array`, first)",
                    self.describe()
                ),
            ));
        }
        if open.syncing.is_some() {
            return Err(error(
                ErrorKind::Busy,
                format!("cannot {what} {}: a cpu_access bracket is still open", self.describe()),
            ));
        }
        Ok(())
    }
}

#[pymethods]
impl PyDmaBuf {
    /// Wraps an fd made elsewhere (a DMA-BUF, a memfd or a regular file):
    /// duplicated by default, or owned from now on with take_ownership=True.
    /// A memfd or file not sealed against shrinking is only mapped with
    /// trust_size=True (a peer that truncates it would crash us with SIGBUS).
    #[staticmethod]
    #[pyo3(signature = (fd, *, take_ownership = false, trust_size = false))]
    fn from_fd(fd: &Bound<'_, PyAny>, take_ownership: bool, trust_size: bool) -> PyResult<Self> {
        let raw = match fd.extract::<i32>() {
            Ok(n) => Some(n).filter(|&n| n >= 0),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(fd.py()) => None,
            Err(e) => return Err(e),
        }
        .ok_or_else(|| invalid(format!("fd {fd} is not a valid file descriptor number")))?;
        // SAFETY: the fd is only borrowed for the duration of this call;
        // `from_fd` validates it with fstat before any other use and fails
        // with EBADF (a clear error) if it is not open.
        let borrowed = unsafe { BorrowedFd::borrow_raw(raw) };
        let buf = DmaBuf::from_fd(borrowed, take_ownership, trust_size).py_err()?;
        Ok(PyDmaBuf::wrap(Arc::new(buf), false))
    }

    /// The fd (owned by this object: use export() for one you own).
    #[getter]
    fn fd(&self) -> PyResult<i32> {
        Ok(self.buf()?.fd().as_raw_fd())
    }

    #[getter]
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    #[getter]
    fn kind(&self) -> &str {
        &self.kind
    }

    #[getter]
    fn is_dmabuf(&self) -> bool {
        self.is_dmabuf
    }

    #[getter]
    fn closed(&self) -> bool {
        self.lock().buf.is_none()
    }

    /// Number of numpy views of this buffer that are alive.
    #[getter]
    pub(crate) fn views(&self) -> usize {
        self.views.load(Ordering::SeqCst)
    }

    /// A numpy array that shares the buffer's memory (no copy).
    /// writable=None: writable, unless the buffer is read-only (a camera frame's).
    #[pyo3(signature = (dtype = None, shape = None, offset = Count(0), *, writable = None),
           text_signature = "($self, dtype=None, shape=None, offset=0, *, writable=None)")]
    fn map<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        shape: Option<&Bound<'py, PyAny>>,
        offset: Count,
        writable: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let this = slf.get();
        let writable = match (writable, this.read_only) {
            (Some(true), true) => {
                return Err(invalid(format!(
                    "{} is a camera frame's buffer, which the driver writes: map it read-only (writable=False)",
                    this.describe()
                )))
            }
            (w, read_only) => w.unwrap_or(!read_only),
        };
        let keep = match &this.holder {
            Some(frame) if !frame.bind(py).getattr("held")?.is_truthy()? => {
                return Err(error(
                    ErrorKind::Closed,
                    format!("cannot map {}: its frame was released (the driver may be writing it)", this.describe()),
                ))
            }
            holder => holder.as_ref().map(|h| h.clone_ref(py)),
        };
        let np = py.import("numpy")?;
        let dtype = match dtype {
            Some(d) => np
                .getattr("dtype")?
                .call1((d,))
                .map_err(|e| invalid(format!("cannot map with dtype {d}: numpy says {e}")))?,
            None => np.getattr("dtype")?.call1(("uint8",))?,
        };
        if dtype.getattr("hasobject")?.extract::<bool>()? {
            return Err(invalid(format!("cannot map with dtype {dtype}: a buffer holds numbers, not Python objects")));
        }
        let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
        if itemsize == 0 {
            return Err(invalid(format!("cannot map with dtype {dtype}: it has no size")));
        }
        let size = this.size;
        let offset = Some(offset.0)
            .filter(|&o| o <= size)
            .ok_or_else(|| invalid(format!("offset {} is outside the {size}-byte buffer", offset.0)))?;
        let (dims, nbytes): (Vec<usize>, usize) = match shape {
            Some(shape) => {
                let items: Vec<Bound<'py, PyAny>> = match shape.extract::<Vec<Bound<'py, PyAny>>>() {
                    Ok(items) => items,
                    Err(_) => vec![shape.clone()],
                };
                let dims = items
                    .iter()
                    .map(|d| {
                        non_negative(d, "a dimension of shape").map_err(|e| {
                            if e.is_instance_of::<PyTypeError>(py) {
                                invalid(format!("shape must be a tuple of non-negative ints, got {shape}"))
                            } else {
                                e
                            }
                        })
                    })
                    .collect::<PyResult<Vec<usize>>>()?;
                let nbytes = dims
                    .iter()
                    .try_fold(itemsize, |acc, &d| acc.checked_mul(d))
                    .ok_or_else(|| invalid(format!("shape {dims:?} is too large")))?;
                (dims, nbytes)
            }
            None => {
                let left = size - offset;
                if !left.is_multiple_of(itemsize) {
                    return Err(invalid(format!(
                        "the {left} bytes from offset {offset} are not a whole number of {dtype} items \
                         ({itemsize} bytes each): give a shape"
                    )));
                }
                (vec![left / itemsize], left)
            }
        };
        if offset.checked_add(nbytes).is_none_or(|end| end > size) {
            return Err(invalid(format!(
                "shape {dims:?} of {dtype} needs {nbytes} bytes from offset {offset}, \
                 but the buffer has {size} bytes"
            )));
        }
        let bytes = this.byte_view(py, offset, nbytes, writable, keep)?;
        let typed = bytes.call_method1("view", (dtype,))?;
        let shape = PyTuple::new(py, &dims)?;
        typed.call_method1("reshape", (shape,))
    }

    /// A CPU-access bracket (DMA_BUF_IOCTL_SYNC start on enter, end on exit).
    /// With a timeout, entering first waits for the buffer's fences (see wait)
    /// and raises FenceTimeoutError instead of blocking in the kernel.
    #[pyo3(signature = (mode = "rw", *, timeout = None))]
    fn cpu_access(slf: &Bound<'_, Self>, mode: &str, timeout: Option<Timeout>) -> PyResult<PyCpuAccess> {
        let mode = SyncMode::parse(mode).py_err()?;
        let timeout = fence::timeout_arg(timeout);
        slf.get().buf()?;
        Ok(PyCpuAccess { buffer: slf.clone().unbind(), mode, timeout, active: AtomicBool::new(false) })
    }

    /// Waits until a device's fences allow CPU access in `mode`: "read" waits
    /// for writers, "write"/"rw" for every reader and writer. timeout=None
    /// waits as long as they take; FenceTimeoutError when they are late.
    /// Returns at once for memory that is not a DMA-BUF (no fences exist).
    #[pyo3(signature = (mode = "read", timeout = None))]
    fn wait(&self, py: Python<'_>, mode: &str, timeout: Option<Timeout>) -> PyResult<()> {
        let mode = fence::mode_arg(mode)?;
        let timeout = fence::timeout_arg(timeout);
        let buf = self.buf()?;
        fence::wait(py, &buf, mode, timeout)
    }

    /// The fences that `mode` access would wait for, as a sync_file fd the
    /// caller owns (closes): readable once they have signalled. Linux 6.0+.
    #[pyo3(signature = (mode = "read"))]
    fn export_sync_file(&self, mode: &str) -> PyResult<i32> {
        let mode = fence::mode_arg(mode)?;
        Ok(self.buf()?.export_sync_file(mode).py_err()?.into_raw_fd())
    }

    /// A new fd for the same memory, with CLOEXEC; the caller owns (closes) it.
    fn export(&self) -> PyResult<i32> {
        Ok(self.buf()?.export().py_err()?.into_raw_fd())
    }

    /// Closes the fd and unmaps. Refused while views or a bracket are alive.
    fn close(&self) -> PyResult<()> {
        if self.pooled {
            return Err(invalid(format!(
                "{} belongs to a BufferPool: release it to the pool; pool.close() closes all",
                self.describe()
            )));
        }
        self.close_now()
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.get().buf()?;
        Ok(slf)
    }

    /// Closes the buffer; when an exception is leaving the block, a buffer
    /// that cannot close yet (a view is alive) stays open until it is
    /// dropped, and the exception in flight is what the caller sees.
    #[pyo3(signature = (*args))]
    fn __exit__(&self, args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if !self.pooled {
            let in_flight = args.get_item(0).is_ok_and(|exc| !exc.is_none());
            match self.close_now() {
                Err(_) if in_flight => {}
                result => result?,
            }
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.lock().buf.as_ref() {
            Some(b) => format!("<DmaBuf fd={} size={} kind={:?}>", b.fd().as_raw_fd(), self.size, self.kind),
            None => format!("<DmaBuf closed size={} kind={:?}>", self.size, self.kind),
        }
    }
}

impl PyDmaBuf {
    /// A flat uint8 array over `nbytes` from `offset` (checked by the caller
    /// to lie inside the buffer), whose base keeps the mapping and `keep` alive.
    pub(crate) fn byte_view<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        nbytes: usize,
        writable: bool,
        keep: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        if offset.checked_add(nbytes).is_none_or(|end| end > self.size) {
            return Err(invalid(format!(
                "{nbytes} bytes at offset {offset} are outside the {}-byte buffer",
                self.size
            )));
        }
        let access = if writable { Access::ReadWrite } else { Access::ReadOnly };
        let mapping = self.mapping(access)?;
        // SAFETY: offset + nbytes <= size == mapping.len(), so the pointer and
        // length stay inside the live mapping; the mapping is kept alive by the
        // `_Mapping` base object for as long as the array exists.
        let view = unsafe { ArrayView1::from_shape_ptr(nbytes, mapping.mapping.as_ptr().add(offset)) };
        let owner = Bound::new(py, PyMapping { _mapping: mapping, _token: ViewToken::new(&self.views), _keep: keep })?;
        // SAFETY: `borrow_from_array` makes numpy point at the view's memory
        // with `owner` as the array's base, which keeps the mapping alive.
        let bytes = unsafe { PyArray1::<u8>::borrow_from_array(&view, owner.into_any()) };
        if !writable {
            bytes.call_method("setflags", (), Some(&[("write", false)].into_py_dict(py)?))?;
        }
        Ok(bytes)
    }

    /// Ends a bracket whose CpuAccess was dropped without `__exit__`: a
    /// quick ioctl, no GIL needed; nothing to report to, the owner is gone.
    pub(super) fn end_abandoned_bracket(&self, mode: SyncMode) {
        let buf = {
            let mut open = self.lock();
            open.syncing = None;
            open.buf.clone()
        };
        if let Some(buf) = buf {
            let _ = buf.sync(mode, false);
        }
    }

    pub(crate) fn close_now(&self) -> PyResult<()> {
        let mut open = self.lock();
        if open.buf.is_none() {
            return Ok(());
        }
        self.refuse_if_busy(&open, "close")?;
        *open = Open::default();
        Ok(())
    }

    pub(super) fn sync(&self, mode: SyncMode, start: bool, py: Python<'_>) -> PyResult<()> {
        let buf = {
            let mut open = self.lock();
            let buf =
                open.buf.clone().ok_or_else(|| error(ErrorKind::Closed, format!("{} is closed", self.describe())))?;
            match (start, open.syncing) {
                (true, Some(_)) => {
                    return Err(error(
                        ErrorKind::Busy,
                        format!("a cpu_access bracket is already open on {}", self.describe()),
                    ))
                }
                (true, None) => open.syncing = Some(mode),
                (false, _) => open.syncing = None,
            }
            buf
        };
        py.detach(|| buf.sync(mode, start)).py_err()
    }
}

/// The context manager returned by `DmaBuf.cpu_access(mode)`.
#[pyclass(frozen, name = "CpuAccess", module = "npu_zc._core")]
pub struct PyCpuAccess {
    buffer: Py<PyDmaBuf>,
    mode: SyncMode,
    /// Wait this long for fences before the sync start (None: the kernel waits).
    timeout: Option<Duration>,
    active: AtomicBool,
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
