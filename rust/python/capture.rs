//! Python types over the capture core: `Camera`, `Frame`, `cameras()`.
//!
//! A `Frame` holds its buffer away from the driver until it is released:
//! explicitly (`release()`, `with frame:`) or when the Frame and every numpy
//! view of it are gone (a view keeps its frame alive, so the driver never
//! writes memory that Python is still reading).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use super::buffer::{PyBufferPool, PyDmaBuf};
use super::errors::{capture_to_py, invalid, Count};
use super::timeout::Timeout;
use crate::buffer::{self, Wait};
use crate::capture::{self, BufferPlan, ErrorKind, Fourcc, FrameSizes, Stream, WhenFull};

trait CaptureResult<T> {
    fn cam_err(self) -> PyResult<T>;
}

impl<T> CaptureResult<T> for capture::Result<T> {
    fn cam_err(self) -> PyResult<T> {
        self.map_err(capture_to_py)
    }
}

fn seconds(t: Timeout) -> Duration {
    // For ever (None, inf, 1e20: timeout.rs) is a wait no camera outlives.
    t.0.unwrap_or(FOREVER)
}

/// What a camera's wait "for ever" is: about a century (a deadline that far
/// is still an Instant).
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A camera streaming into DMA-BUFs.
#[pyclass(frozen, name = "Camera", module = "npu_zc._core")]
pub struct PyCamera {
    stream: Arc<Stream>,
    /// The Python objects of the frame buffers (cleared on close).
    buffers: Mutex<Vec<Py<PyDmaBuf>>>,
    /// A caller's pool whose buffers the camera holds until closed.
    pool: Mutex<Option<Py<PyBufferPool>>>,
    timeout: Duration,
    when_full: WhenFull,
    heap: Option<String>,
}

#[pymethods]
impl PyCamera {
    #[new]
    #[pyo3(signature = (device, width = Count(640), height = Count(480), format = "YUYV", *, buffers = Count(4), memory = "auto",
                        heap = "auto", timeout = Timeout(Some(Duration::from_secs(5))), when_full = "wait", pool = None),
           text_signature = "(device, width=640, height=480, format='YUYV', *, buffers=4, memory='auto', heap='auto', \
                             timeout=5.0, when_full='wait', pool=None)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        device: &Bound<'_, PyAny>,
        width: Count,
        height: Count,
        format: &str,
        buffers: Count,
        memory: &str,
        heap: &str,
        timeout: Timeout,
        when_full: &str,
        pool: Option<Py<PyBufferPool>>,
    ) -> PyResult<Self> {
        let path: String = match device.extract::<u32>() {
            Ok(n) => format!("/dev/video{n}"),
            Err(_) => device.str()?.extract()?,
        };
        let side = |n: Count, what: &str| {
            u32::try_from(n.0)
                .map_err(|_| invalid(format!("{what} {} is too large for a camera (at most {})", n.0, u32::MAX)))
        };
        let (width, height, buffers) = (side(width, "width")?, side(height, "height")?, buffers.0);
        let timeout = seconds(timeout);
        let when_full = match when_full {
            "wait" => WhenFull::Wait,
            "drop" => WhenFull::Drop,
            other => return Err(invalid(format!("when_full must be \"wait\" or \"drop\", got {other:?}"))),
        };
        let fourcc = Fourcc::parse(format).cam_err()?;
        if buffers == 0 && pool.is_none() {
            return Err(invalid("a camera needs at least 1 buffer, got buffers=0"));
        }
        // What to import, if anything: a caller's pool, a heap, or nothing (mmap).
        let plan = BufferPlan::choose(memory, heap, pool.is_some()).cam_err()?;

        // A caller's pool: take every buffer of it (none may be in use).
        let (pool_bufs, pool_objs) = match &pool {
            Some(p) => {
                let p = p.get();
                let mut taken = Vec::new();
                for _ in 0..p.pool.len() {
                    match p.pool.acquire(Wait::No) {
                        Ok(i) => taken.push(i),
                        Err(e) => {
                            taken.iter().for_each(|&i| drop(p.pool.release(i)));
                            return Err(super::errors::to_py(e.hint("a camera takes every buffer of its pool")));
                        }
                    }
                }
                let objs: Vec<Py<PyDmaBuf>> = p.buffers.iter().map(|b| b.clone_ref(py)).collect();
                let bufs = objs.iter().map(|b| b.get().buf()).collect::<PyResult<Vec<_>>>();
                match bufs {
                    Ok(b) => (Some(b), objs),
                    Err(e) => {
                        taken.iter().for_each(|&i| drop(p.pool.release(i)));
                        return Err(e);
                    }
                }
            }
            None => (None, Vec::new()),
        };
        let release_pool = |py: Python<'_>| {
            if let Some(p) = &pool {
                let p = p.bind(py).get();
                (0..p.pool.len()).for_each(|i| drop(p.pool.release(i)));
            }
        };

        let started = py.detach(|| capture::start(&path, (width, height, fourcc), buffers, &plan, pool_bufs));
        let (stream, heap) = match started {
            Ok(s) => s,
            Err(e) => {
                release_pool(py);
                return Err(capture_to_py(e));
            }
        };
        let objs = if pool.is_some() {
            pool_objs
        } else {
            stream.buffers().into_iter().map(|b| Py::new(py, PyDmaBuf::wrap(b, true))).collect::<PyResult<Vec<_>>>()?
        };
        Ok(PyCamera {
            stream: Arc::new(stream),
            buffers: Mutex::new(objs),
            pool: Mutex::new(pool),
            timeout,
            when_full,
            heap,
        })
    }

    /// The next frame (waits at most `timeout` seconds, the camera's by default).
    #[pyo3(signature = (timeout = None))]
    fn read(slf: &Bound<'_, Self>, timeout: Option<Timeout>) -> PyResult<PyFrame> {
        let this = slf.get();
        let timeout = match timeout {
            Some(t) => seconds(t),
            None => this.timeout,
        };
        let stream = this.stream.clone();
        let when_full = this.when_full;
        let frame = slf.py().detach(|| stream.next_frame(timeout, when_full)).cam_err()?;
        let buffer =
            this.buffers.lock().unwrap_or_else(|p| p.into_inner()).get(frame.index).map(|b| b.clone_ref(slf.py()));
        let Some(buffer) = buffer else {
            // Closed by another thread between the dequeue and now.
            let _ = this.stream.release(frame.index, frame.ticket);
            return Err(capture_to_py(capture::Error::new(ErrorKind::Closed, "the camera was closed")));
        };
        Ok(PyFrame { stream: this.stream.clone(), frame, buffer, released: AtomicBool::new(false) })
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(slf: &Bound<'_, Self>) -> PyResult<PyFrame> {
        if slf.get().stream.is_closed() {
            return Err(PyStopIteration::new_err(()));
        }
        Self::read(slf, None)
    }

    /// Stops streaming, takes every buffer back from the driver and closes
    /// the device. Frames still held stay readable (the driver no longer
    /// writes them); their memory goes when they and their views go.
    fn close(&self, py: Python<'_>) {
        let stream = self.stream.clone();
        py.detach(|| stream.close());
        let objs = std::mem::take(&mut *self.buffers.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some(p) = self.pool.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let p = p.get();
            (0..p.pool.len()).for_each(|i| drop(p.pool.release(i)));
        } else {
            // Close the buffers nobody looks at now; the others close with
            // their last frame or view.
            for b in &objs {
                let b = b.get();
                if b.views() == 0 {
                    let _ = b.close_now();
                }
            }
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    #[getter]
    fn closed(&self) -> bool {
        self.stream.is_closed()
    }

    #[getter]
    fn device(&self) -> String {
        self.stream.info().path.display().to_string()
    }

    #[getter]
    fn driver(&self) -> String {
        self.stream.info().driver.clone()
    }

    #[getter]
    fn card(&self) -> String {
        self.stream.info().card.clone()
    }

    #[getter]
    fn multiplanar(&self) -> bool {
        self.stream.info().multiplanar
    }

    #[getter]
    fn width(&self) -> u32 {
        self.stream.format().width
    }

    #[getter]
    fn height(&self) -> u32 {
        self.stream.format().height
    }

    #[getter]
    fn format(&self) -> String {
        self.stream.format().fourcc.name()
    }

    #[getter]
    fn bytesperline(&self) -> u32 {
        self.stream.format().bytesperline
    }

    #[getter]
    fn sizeimage(&self) -> u32 {
        self.stream.format().sizeimage
    }

    /// The colour standard of YUV frames, from the negotiated format's
    /// colorspace, ycbcr_enc and quantization: (matrix, range) as
    /// `npu_zc.layout.convert` takes them, e.g. ("bt709", "limited"); None
    /// for a standard the layout engine has no matrix for.
    #[getter]
    fn colour(&self) -> Option<(&'static str, &'static str)> {
        self.stream.format().yuv_colour()
    }

    /// "dmabuf" (the driver writes our buffers) or "mmap" (the driver's, exported).
    #[getter]
    fn memory(&self) -> &'static str {
        self.stream.memory().name()
    }

    /// Where the buffers come from: e.g. "dma-heap:system", "udmabuf", "v4l2:vivid".
    #[getter]
    fn heap(&self) -> Option<String> {
        self.heap.clone().or_else(|| self.stream.buffers().first().map(|b| b.kind().to_string()))
    }

    #[getter]
    fn when_full(&self) -> &'static str {
        match self.when_full {
            WhenFull::Wait => "wait",
            WhenFull::Drop => "drop",
        }
    }

    #[getter]
    fn timeout(&self) -> f64 {
        if self.timeout == FOREVER {
            return f64::INFINITY;
        }
        self.timeout.as_secs_f64()
    }

    /// The frame buffers (empty once closed).
    #[getter]
    fn buffers(&self, py: Python<'_>) -> Vec<Py<PyDmaBuf>> {
        self.buffers.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|b| b.clone_ref(py)).collect()
    }

    /// Frames the application holds now.
    #[getter]
    fn held(&self) -> usize {
        self.stream.held()
    }

    /// Frames captured so far.
    #[getter]
    fn frames(&self) -> u64 {
        self.stream.counters().0
    }

    /// Frames the driver dropped (gaps in the sequence numbers).
    #[getter]
    fn dropped(&self) -> u64 {
        self.stream.counters().1
    }

    /// Held frames taken back by when_full="drop".
    #[getter]
    fn reclaimed(&self) -> u64 {
        self.stream.counters().2
    }

    /// The device's controls and their values (None for buttons and
    /// controls that cannot be read).
    fn controls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dev = self.stream.device().cam_err()?;
        let controls = py.detach(|| dev.controls()).cam_err()?;
        let out = PyDict::new(py);
        for c in controls {
            out.set_item(&c.name, dev.control(c.id).ok())?;
        }
        Ok(out)
    }

    /// Sets a control by its name (as `controls()` lists it); a button
    /// control is pressed by any value.
    fn set_control(&self, py: Python<'_>, name: &str, value: i32) -> PyResult<()> {
        let dev = self.stream.device().cam_err()?;
        let controls = py.detach(|| dev.controls()).cam_err()?;
        let Some(c) = controls.iter().find(|c| c.name.eq_ignore_ascii_case(name)) else {
            let names: Vec<&str> = controls.iter().map(|c| c.name.as_str()).collect();
            return Err(invalid(format!("{} has no control {name:?}; it has: {}", self.device(), names.join(", "))));
        };
        py.detach(|| dev.set_control(c.id, value)).cam_err()
    }

    fn __repr__(&self) -> String {
        let f = self.stream.format();
        let state = if self.stream.is_closed() { " closed" } else { "" };
        format!(
            "<Camera {} {}x{} {} memory={} buffers={}{state}>",
            self.device(),
            f.width,
            f.height,
            f.fourcc,
            self.memory(),
            self.buffers.lock().unwrap_or_else(|p| p.into_inner()).len()
        )
    }
}

/// One captured frame, in its DMA-BUF.
#[pyclass(frozen, name = "Frame", module = "npu_zc._core")]
pub struct PyFrame {
    stream: Arc<Stream>,
    frame: capture::Frame,
    buffer: Py<PyDmaBuf>,
    released: AtomicBool,
}

impl PyFrame {
    fn give_back(&self) -> PyResult<()> {
        if !self.released.swap(true, Ordering::SeqCst) {
            self.stream.release(self.frame.index, self.frame.ticket).cam_err()?;
        }
        Ok(())
    }
}

impl Drop for PyFrame {
    fn drop(&mut self) {
        // A frame nobody refers to any more goes back to the driver.
        let _ = self.give_back();
    }
}

#[pymethods]
impl PyFrame {
    /// The DMA-BUF the driver wrote this frame into, lent by the frame: its
    /// map() is read-only and keeps the frame held, like array().
    #[getter]
    fn buffer(slf: &Bound<'_, Self>) -> PyResult<Py<PyDmaBuf>> {
        Py::new(slf.py(), slf.get().buffer.get().lent_by(slf.clone().into_any().unbind()))
    }

    #[getter]
    fn index(&self) -> usize {
        self.frame.index
    }

    #[getter]
    fn sequence(&self) -> u32 {
        self.frame.sequence
    }

    /// The driver's timestamp in nanoseconds (CLOCK_MONOTONIC for most drivers).
    #[getter]
    fn timestamp_ns(&self) -> u64 {
        self.frame.timestamp_ns
    }

    #[getter]
    fn bytesused(&self) -> usize {
        self.frame.bytesused
    }

    /// Where the image starts in the buffer.
    #[getter]
    fn offset(&self) -> usize {
        self.frame.offset
    }

    #[getter]
    fn corrupt(&self) -> bool {
        self.frame.corrupt
    }

    /// Frames the driver dropped just before this one.
    #[getter]
    fn dropped_before(&self) -> u32 {
        self.frame.dropped_before
    }

    #[getter]
    fn width(&self) -> u32 {
        self.stream.format().width
    }

    #[getter]
    fn height(&self) -> u32 {
        self.stream.format().height
    }

    #[getter]
    fn format(&self) -> String {
        self.stream.format().fourcc.name()
    }

    /// Row pitch in bytes (of the luma plane for planar formats).
    #[getter]
    fn bytesperline(&self) -> u32 {
        self.stream.format().bytesperline
    }

    /// True until released (or taken back by when_full="drop" or close()).
    #[getter]
    fn held(&self) -> bool {
        !self.released.load(Ordering::SeqCst) && self.stream.is_held(self.frame.index, self.frame.ticket)
    }

    /// Gives the buffer back to the driver. Views made by array() keep the
    /// frame held, so release() refuses while any is alive.
    fn release(&self) -> PyResult<()> {
        let views = self.buffer.get().views();
        if views > 0 && self.held() {
            return Err(super::errors::error(
                buffer::ErrorKind::Busy,
                format!(
                    "cannot release frame {} (buffer {}): {views} numpy view(s) of it are alive; \
                     delete them first (the driver would overwrite what they show)",
                    self.frame.sequence, self.frame.index
                ),
            ));
        }
        self.give_back()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.release()?;
        Ok(false)
    }

    /// A read-only numpy view of the image (no copy), shaped for its format
    /// at the driver's row pitch: (H, W, 2) for YUYV/UYVY, (H*3/2, W) for
    /// NV12/NV21 and I420 (I420 only unpadded), (H*3/2, W) uint16 for P010,
    /// (H, W, 3) for RGB3/BGR3, (H, W) for GREY, else the flat bytes. A frame
    /// too short for its rows at that pitch is a CameraFormatError. The view
    /// keeps the frame held: the driver gets the buffer back when the frame
    /// and every view are gone (or at release()).
    fn array<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let this = slf.get();
        let buffer = this.buffer.get();
        let offset = this.frame.offset;
        // What the frame has: the driver's bytesused (0: not said), within its buffer.
        let in_buffer = buffer.size().saturating_sub(offset);
        let available = match this.frame.bytesused {
            0 => in_buffer,
            n => n.min(in_buffer),
        };
        let view = this.stream.format().view(available).map_err(|e| {
            capture_to_py(capture::Error::new(
                e.kind,
                format!("frame {} of {}: {}", this.frame.sequence, this.stream.info().path.display(), e.message),
            ))
        })?;
        let bytes = buffer.byte_view(py, offset, view.span, false, Some(slf.clone().into_any().unbind()))?;
        let samples = match view.sample_bytes {
            2 => bytes.call_method1("view", ("<u2",))?,
            _ => bytes.into_any(),
        };
        let tricks = py.import("numpy.lib.stride_tricks")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("shape", PyTuple::new(py, &view.shape)?)?;
        kwargs.set_item("strides", PyTuple::new(py, &view.strides)?)?;
        kwargs.set_item("writeable", false)?;
        tricks.getattr("as_strided")?.call((samples,), Some(&kwargs))
    }

    fn __repr__(&self) -> String {
        let f = self.stream.format();
        format!(
            "<Frame seq={} {}x{} {} buffer={}{}>",
            self.frame.sequence,
            f.width,
            f.height,
            f.fourcc,
            self.frame.index,
            if self.held() { "" } else { " released" }
        )
    }
}

type Size = (u32, u32);

/// One pixel format of a camera, with its sizes.
#[pyclass(frozen, get_all, name = "CameraFormat", module = "npu_zc._core")]
pub struct PyCameraFormat {
    fourcc: String,
    description: String,
    compressed: bool,
    /// The layout engine's source format for these frames, read in place
    /// ("NV12", "P010", "RGB"...); None where the engine has no decoder.
    source_format: Option<&'static str>,
    /// The discrete sizes; for a range, its smallest and largest size.
    sizes: Vec<(u32, u32)>,
    /// (min, max, step) when the sizes are a range, else None.
    size_range: Option<(Size, Size, Size)>,
}

#[pymethods]
impl PyCameraFormat {
    fn __repr__(&self) -> String {
        let sizes: Vec<String> = self.sizes.iter().map(|(w, h)| format!("{w}x{h}")).collect();
        match self.size_range {
            Some((a, b, s)) => {
                format!("<CameraFormat {} {}x{}..{}x{} step {}x{}>", self.fourcc, a.0, a.1, b.0, b.1, s.0, s.1)
            }
            None => format!("<CameraFormat {} {}>", self.fourcc, sizes.join(" ")),
        }
    }
}

/// A capture node of this machine.
#[pyclass(frozen, get_all, name = "CameraInfo", module = "npu_zc._core")]
pub struct PyCameraInfo {
    path: String,
    driver: String,
    card: String,
    bus_info: String,
    multiplanar: bool,
    formats: Vec<Py<PyCameraFormat>>,
}

#[pymethods]
impl PyCameraInfo {
    fn __repr__(&self) -> String {
        format!("<CameraInfo {} {:?} ({}) {} formats>", self.path, self.card, self.driver, self.formats.len())
    }
}

/// Every V4L2 capture node with its formats and sizes.
#[pyfunction]
fn cameras(py: Python<'_>) -> PyResult<Vec<PyCameraInfo>> {
    let found = py.detach(capture::cameras);
    found
        .into_iter()
        .map(|c| {
            let formats = c
                .formats
                .into_iter()
                .map(|f| {
                    let (sizes, size_range) = match f.sizes {
                        FrameSizes::Discrete(list) => (list, None),
                        FrameSizes::Stepwise { min, max, step } => (vec![min, max], Some((min, max, step))),
                        FrameSizes::Unknown => (Vec::new(), None),
                    };
                    Py::new(
                        py,
                        PyCameraFormat {
                            fourcc: f.fourcc.name(),
                            description: f.description,
                            compressed: f.compressed,
                            source_format: if f.compressed { None } else { f.fourcc.source_format() },
                            sizes,
                            size_range,
                        },
                    )
                })
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyCameraInfo {
                path: c.info.path.display().to_string(),
                driver: c.info.driver,
                card: c.info.card,
                bus_info: c.info.bus_info,
                multiplanar: c.info.multiplanar,
                formats,
            })
        })
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCamera>()?;
    m.add_class::<PyFrame>()?;
    m.add_class::<PyCameraFormat>()?;
    m.add_class::<PyCameraInfo>()?;
    m.add_function(wrap_pyfunction!(cameras, m)?)?;
    let source_formats = PyDict::new(m.py()); // in the table's order
    for (camera, engine) in capture::SOURCE_FORMATS {
        source_formats.set_item(camera, engine)?;
    }
    m.add("CAMERA_SOURCE_FORMATS", source_formats)?;
    Ok(())
}
