//! Python types over the buffer core: `DmaBuf`, its numpy views, the CPU-access
//! guard, `BufferPool` and its slots, and fd passing.
//!
//! Safety of views (the rust-numpy model): a numpy array made by `map()` has a
//! `_Mapping` object as its base, which owns the mmap; the memory lives as long
//! as any array (or slice of one) does. Each `_Mapping` also holds a token
//! that counts live views, and `close()` refuses while the count is not zero.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use numpy::ndarray::ArrayView1;
use numpy::PyArray1;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBytes, PyInt, PyList, PyTuple};
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd};

use super::errors::{error, invalid, non_negative, Count, IntoPyResult};
use super::fence;
use crate::buffer::{self, Access, DmaBuf, ErrorKind, HeapSpec, Mapping, SyncMode, Wait};

/// Decrements the owning buffer's view count when the last array is gone.
struct ViewToken(Arc<AtomicUsize>);

impl ViewToken {
    fn new(count: &Arc<AtomicUsize>) -> Self {
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
    _mapping: Arc<Mapping>,
    _token: ViewToken,
    /// Anything else the view keeps alive (a camera frame: while a view of
    /// it lives, the driver does not get the buffer back).
    _keep: Option<Py<PyAny>>,
}

#[derive(Default)]
struct Open {
    buf: Option<Arc<DmaBuf>>,
    /// One mapping of the whole buffer per access mode, made on first use and
    /// shared by every view: per-frame `map()` calls cost no syscall.
    rw: Option<Arc<Mapping>>,
    ro: Option<Arc<Mapping>>,
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
    is_dmabuf: bool,
    /// Buffers of a pool are closed with the pool, never one by one.
    pooled: bool,
}

impl PyDmaBuf {
    pub(crate) fn wrap(buf: Arc<DmaBuf>, pooled: bool) -> Self {
        PyDmaBuf {
            size: buf.size(),
            kind: buf.kind().to_string(),
            is_dmabuf: buf.is_dmabuf(),
            pooled,
            views: Arc::new(AtomicUsize::new(0)),
            state: Mutex::new(Open { buf: Some(buf), ..Default::default() }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn describe(&self) -> String {
        format!("DmaBuf({} bytes, {})", self.size, self.kind)
    }

    pub(crate) fn buf(&self) -> PyResult<Arc<DmaBuf>> {
        self.lock().buf.clone().ok_or_else(|| error(ErrorKind::Closed, format!("{} is closed", self.describe())))
    }

    fn mapping(&self, access: Access) -> PyResult<Arc<Mapping>> {
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
        let m = Arc::new(buf.map_all(access).py_err()?);
        *slot = Some(m.clone());
        Ok(m)
    }

    fn refuse_if_busy(&self, open: &Open, what: &str) -> PyResult<()> {
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
    fn size(&self) -> usize {
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
    #[pyo3(signature = (dtype = None, shape = None, offset = Count(0), *, writable = true),
           text_signature = "($self, dtype=None, shape=None, offset=0, *, writable=True)")]
    fn map<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        shape: Option<&Bound<'py, PyAny>>,
        offset: Count,
        writable: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let this = slf.get();
        let np = py.import("numpy")?;
        let dtype = match dtype {
            Some(d) => np.getattr("dtype")?.call1((d,))?,
            None => np.getattr("dtype")?.call1(("uint8",))?,
        };
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
        let bytes = this.byte_view(py, offset, nbytes, writable, None)?;
        let typed = bytes.call_method1("view", (dtype,))?;
        let shape = PyTuple::new(py, &dims)?;
        typed.call_method1("reshape", (shape,))
    }

    /// A CPU-access bracket (DMA_BUF_IOCTL_SYNC start on enter, end on exit).
    /// With a timeout, entering first waits for the buffer's fences (see wait)
    /// and raises FenceTimeoutError instead of blocking in the kernel.
    #[pyo3(signature = (mode = "rw", *, timeout = None))]
    fn cpu_access(slf: &Bound<'_, Self>, mode: &str, timeout: Option<f64>) -> PyResult<PyCpuAccess> {
        let mode = SyncMode::parse(mode).py_err()?;
        let timeout = fence::timeout_arg(timeout)?;
        slf.get().buf()?;
        Ok(PyCpuAccess { buffer: slf.clone().unbind(), mode, timeout, active: AtomicBool::new(false) })
    }

    /// Waits until a device's fences allow CPU access in `mode`: "read" waits
    /// for writers, "write"/"rw" for every reader and writer. timeout=None
    /// waits as long as they take; FenceTimeoutError when they are late.
    /// Returns at once for memory that is not a DMA-BUF (no fences exist).
    #[pyo3(signature = (mode = "read", timeout = None))]
    fn wait(&self, py: Python<'_>, mode: &str, timeout: Option<f64>) -> PyResult<()> {
        let mode = fence::mode_arg(mode)?;
        let timeout = fence::timeout_arg(timeout)?;
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

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if !self.pooled {
            self.close_now()?;
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
        let view = unsafe { ArrayView1::from_shape_ptr(nbytes, mapping.as_ptr().add(offset)) };
        let owner = Bound::new(py, PyMapping { _mapping: mapping, _token: ViewToken::new(&self.views), _keep: keep })?;
        // SAFETY: `borrow_from_array` makes numpy point at the view's memory
        // with `owner` as the array's base, which keeps the mapping alive.
        let bytes = unsafe { PyArray1::<u8>::borrow_from_array(&view, owner.into_any()) };
        if !writable {
            bytes.call_method("setflags", (), Some(&[("write", false)].into_py_dict(py)?))?;
        }
        Ok(bytes)
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

    fn sync(&self, mode: SyncMode, start: bool, py: Python<'_>) -> PyResult<()> {
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

/// Allocates a buffer of at least `size` bytes (rounded up to a page).
#[pyfunction]
#[pyo3(signature = (size, heap = "auto"))]
fn alloc(py: Python<'_>, size: &Bound<'_, PyAny>, heap: &str) -> PyResult<PyDmaBuf> {
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
fn heaps(py: Python<'_>) -> Vec<PyHeapInfo> {
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
fn auto_plan(py: Python<'_>) -> Vec<(String, Option<String>)> {
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

/// The fd of a socket object or an int; a closed socket (whose fileno() is -1)
/// or a negative fd is EBADF, as the socket module says it.
fn socket_fd(sock: &Bound<'_, PyAny>) -> PyResult<i32> {
    let fd = if sock.is_instance_of::<PyInt>() {
        sock.clone()
    } else {
        sock.call_method0("fileno")
            .map_err(|_| PyTypeError::new_err(format!("expected a socket or an fd, got {sock}")))?
    };
    match fd.extract::<i32>() {
        Ok(n) if n >= 0 => Ok(n),
        _ => Err(buffer::Error::from_errno(
            rustix::io::Errno::BADF,
            format_args!("fd {fd} is not an open socket (a closed socket's fileno() is -1)"),
        ))
        .py_err(),
    }
}

/// A timeout in seconds: None, inf or more than a Duration holds waits for ever.
fn timeout_arg(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    match timeout {
        None => Ok(None),
        Some(t) if t >= 0.0 => Ok(Duration::try_from_secs_f64(t).ok()),
        Some(t) => Err(invalid(format!("timeout must be >= 0 seconds or None, got {t}"))),
    }
}

/// Runs a socket call with the GIL released. A signal that interrupts its
/// wait runs Python's handlers; if one raises (Ctrl-C: KeyboardInterrupt),
/// the call stops and that exception is what Python sees.
fn socket_call<T: Send>(
    py: Python<'_>,
    call: impl FnOnce(buffer::transfer::Interrupted<'_>) -> buffer::Result<T> + Send,
) -> PyResult<T> {
    let mut raised: Option<PyErr> = None;
    let result = py.detach(|| {
        let mut interrupted = || {
            Python::attach(|py| match py.check_signals() {
                Ok(()) => false,
                Err(e) => {
                    raised = Some(e);
                    true
                }
            })
        };
        call(&mut interrupted)
    });
    match raised {
        Some(e) => Err(e),
        None => result.py_err(),
    }
}

/// Sends the buffers' fds and `payload` as one message over a Unix socket.
#[pyfunction]
#[pyo3(signature = (sock, buffers, payload, *, timeout = None))]
fn send_fds(
    py: Python<'_>,
    sock: &Bound<'_, PyAny>,
    buffers: Vec<Py<PyDmaBuf>>,
    payload: &[u8],
    timeout: Option<f64>,
) -> PyResult<()> {
    let sock = socket_fd(sock)?;
    let timeout = timeout_arg(timeout)?;
    let bufs = buffers.iter().map(|b| b.get().buf()).collect::<PyResult<Vec<_>>>()?;
    let payload = payload.to_vec();
    socket_call(py, |interrupted| {
        // SAFETY: the socket fd is borrowed only for this call; a closed or
        // foreign fd makes sendmsg fail with a clear error (EBADF/ENOTSOCK).
        let sock = unsafe { BorrowedFd::borrow_raw(sock) };
        let fds: Vec<BorrowedFd<'_>> = bufs.iter().map(|b| b.fd()).collect();
        buffer::transfer::send_fds_within(sock, &fds, &payload, timeout, interrupted)
    })
}

/// Receives one message sent by `send_fds`: the buffers (imported) and the payload.
#[pyfunction]
#[pyo3(signature = (sock, *, timeout = None, trust_size = false))]
fn recv_fds<'py>(
    py: Python<'py>,
    sock: &Bound<'py, PyAny>,
    timeout: Option<f64>,
    trust_size: bool,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyBytes>)> {
    let sock = socket_fd(sock)?;
    let timeout = timeout_arg(timeout)?;
    let (fds, payload) = socket_call(py, |interrupted| {
        // SAFETY: as in send_fds.
        let sock = unsafe { BorrowedFd::borrow_raw(sock) };
        buffer::transfer::recv_fds_within(sock, timeout, interrupted)
    })?;
    let mut bufs = Vec::with_capacity(fds.len());
    for fd in fds {
        bufs.push(PyDmaBuf::wrap(Arc::new(DmaBuf::from_fd(fd.as_fd(), false, trust_size).py_err()?), false));
        // `fd` drops here: from_fd kept a dup, so each received fd is closed once.
    }
    let list = PyList::empty(py);
    for b in bufs {
        list.append(Bound::new(py, b)?)?;
    }
    Ok((list, PyBytes::new(py, &payload)))
}

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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDmaBuf>()?;
    m.add_class::<PyMapping>()?;
    m.add_class::<PyCpuAccess>()?;
    m.add_class::<PyHeapInfo>()?;
    m.add_class::<PyBufferPool>()?;
    m.add_class::<PySlot>()?;
    m.add_function(wrap_pyfunction!(alloc, m)?)?;
    m.add_function(wrap_pyfunction!(heaps, m)?)?;
    m.add_function(wrap_pyfunction!(auto_plan, m)?)?;
    m.add_function(wrap_pyfunction!(send_fds, m)?)?;
    m.add_function(wrap_pyfunction!(recv_fds, m)?)?;
    m.add("PAGE_SIZE", buffer::page_size())?;
    Ok(())
}
