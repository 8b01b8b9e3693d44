//! Python binding of the YOLO decoder: `_YoloDecoder` holds a
//! [`crate::detect::Decoder`] built (and checked) once; its `decode` reads
//! each output array where it lies (any strides, no copy) under the overlap
//! rule (`alias.rs`), runs the whole decode with the GIL released, and hands
//! back small numpy arrays (`_YoloOutput`).

use numpy::{
    npyffi, Element as _, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use super::alias;
use super::errors::{error, invalid, Count};
use crate::buffer::ErrorKind;
use crate::detect::{
    self, mask::MaskPatch, Decoder, DetectError, Element, Family, Geometry, Layout, Output, Params, Task, Tensor,
};

fn detect_error(e: DetectError) -> PyErr {
    match e.kind {
        detect::ErrorKind::Memory => error(ErrorKind::OutOfMemory, e.message),
        kind => super::errors::detect(kind == detect::ErrorKind::Layout, e.message),
    }
}

/// An output array as numpy holds it: f32, or the bits of 16-bit floats, or bytes.
#[derive(FromPyObject)]
enum OutputArray<'py> {
    F32(Bound<'py, PyArrayDyn<f32>>),
    U16(Bound<'py, PyArrayDyn<u16>>),
    U8(Bound<'py, PyArrayDyn<u8>>),
    I8(Bound<'py, PyArrayDyn<i8>>),
}

/// A read-only borrow of an output (numpy's borrow flags held while decoding).
enum Borrowed<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    U16(PyReadonlyArrayDyn<'py, u16>),
    U8(PyReadonlyArrayDyn<'py, u8>),
    I8(PyReadonlyArrayDyn<'py, i8>),
}

impl<'py> OutputArray<'py> {
    fn untyped(&self) -> &Bound<'py, PyUntypedArray> {
        match self {
            OutputArray::F32(a) => a.as_untyped(),
            OutputArray::U16(a) => a.as_untyped(),
            OutputArray::U8(a) => a.as_untyped(),
            OutputArray::I8(a) => a.as_untyped(),
        }
    }

    fn borrow(&self) -> PyResult<Borrowed<'py>> {
        let busy = |_| invalid("an output array is being written by another call");
        Ok(match self {
            OutputArray::F32(a) => Borrowed::F32(a.try_readonly().map_err(busy)?),
            OutputArray::U16(a) => Borrowed::U16(a.try_readonly().map_err(busy)?),
            OutputArray::U8(a) => Borrowed::U8(a.try_readonly().map_err(busy)?),
            OutputArray::I8(a) => Borrowed::I8(a.try_readonly().map_err(busy)?),
        })
    }
}

/// The bytes an array's elements span, and where element [0, ...] is in them.
struct Span {
    ptr: *const u8,
    len: usize,
    origin: usize,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

// SAFETY: the span points into an array that the caller keeps borrowed
// (read-only) while the span is used on another thread with the GIL released.
unsafe impl Send for Span {}
// SAFETY: as for Send: the span is only read.
unsafe impl Sync for Span {}

fn span(b: &Borrowed<'_>) -> Span {
    fn of<T: numpy::Element>(a: &PyReadonlyArrayDyn<'_, T>) -> (*const u8, Vec<usize>, Vec<isize>, usize) {
        (a.data() as *const u8, a.shape().to_vec(), a.strides().to_vec(), std::mem::size_of::<T>())
    }
    let (data, shape, strides, size) = match b {
        Borrowed::F32(a) => of(a),
        Borrowed::U16(a) => of(a),
        Borrowed::U8(a) => of(a),
        Borrowed::I8(a) => of(a),
    };
    let (mut lo, mut hi) = (0isize, 0isize);
    if !shape.contains(&0) {
        for (&n, &s) in shape.iter().zip(&strides) {
            let reach = (n as isize - 1) * s;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
    }
    let len = if shape.contains(&0) { 0 } else { (hi - lo) as usize + size };
    Span { ptr: data.wrapping_offset(lo), len, origin: (-lo) as usize, shape, strides }
}

impl Span {
    /// # Safety
    /// The array the span came from must stay borrowed and alive for `'a`.
    unsafe fn tensor<'a>(&self, element: Element) -> detect::Result<Tensor<'a>> {
        // SAFETY: numpy guarantees every element of the array lies in its
        // memory, which is what [ptr, ptr + len) spans; the caller keeps it alive.
        let bytes = if self.len == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(self.ptr, self.len) } };
        Tensor::new(bytes, element, self.origin, &self.shape, &self.strides)
    }
}

fn element_of(a: &OutputArray<'_>, name: &str, quant: Option<(f32, i32)>) -> PyResult<Element> {
    let ok = match a {
        OutputArray::F32(_) => name == "f32",
        OutputArray::U16(_) => name == "f16" || name == "bf16",
        OutputArray::U8(_) => name == "u8",
        OutputArray::I8(_) => name == "i8",
    };
    if !ok {
        return Err(invalid(format!("element {name} does not match the array's dtype")));
    }
    Element::parse(name, quant).map_err(detect_error)
}

fn layout_of(family: &str, task: &str, nc: usize, nm: usize, kpt: (usize, usize)) -> PyResult<Layout> {
    let family = match family {
        "anchor-free" => Family::AnchorFree,
        "end2end" => Family::End2End,
        "yolov5" => Family::Yolov5,
        _ => return Err(invalid(format!("unknown family {family:?}: anchor-free, end2end or yolov5"))),
    };
    let task = match task {
        "detect" => Task::Detect,
        "segment" => Task::Segment { nm },
        "pose" => Task::Pose { k: kpt.0, dim: kpt.1 },
        "obb" => Task::Obb,
        _ => return Err(invalid(format!("unknown task {task:?}: detect, segment, pose or obb"))),
    };
    Ok(Layout { family, task, nc })
}

/// An integer argument that must fit `T` (a count, a class id, a zero
/// point): out of range is an InvalidArgumentError naming it, not PyO3's OverflowError.
fn int_arg<T>(value: &Bound<'_, PyAny>, what: &str, range: &str) -> PyResult<T>
where
    T: for<'a, 'py> FromPyObject<'a, 'py, Error = PyErr>,
{
    match value.extract::<T>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(value.py()) => {
            Err(invalid(format!("{what} must lie in {range}, got {value}")))
        }
        Err(e) => Err(e),
    }
}

/// The decode's settings, checked once; `decode` runs it on one frame's
/// outputs. `npu_zc.YoloDecoder` wraps it.
#[pyclass(module = "npu_zc._core", name = "_YoloDecoder", frozen)]
pub struct PyYoloDecoder {
    decoder: Decoder,
    quant: Option<(f32, i32)>,
}

/// One frame's detections as numpy arrays (`decode`'s result): xyxy (n, 4),
/// scores, class ids, anchors, xywhr (n, 5) for obb, keypoints (n, e), masks
/// (n, h, w) as 0/1 bytes, and each mask at the model input: rects (n, 4) x,
/// y, w, h and their 0/1 bytes, one after another.
#[pyclass(module = "npu_zc._core", name = "_YoloOutput", frozen, get_all)]
pub struct PyYoloOutput {
    xyxy: Py<PyArray2<f32>>,
    scores: Py<PyArray1<f32>>,
    class_ids: Py<PyArray1<i32>>,
    anchors: Py<PyArray1<i64>>,
    xywhr: Option<Py<PyArray2<f32>>>,
    keypoints: Option<Py<PyArray2<f32>>>,
    masks: Option<Py<PyArrayDyn<u8>>>,
    input_rects: Option<Py<PyArray2<i64>>>,
    input_bits: Option<Py<PyArray1<u8>>>,
}

#[pymethods]
impl PyYoloDecoder {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (family, task, nc, conf, iou, classes, agnostic, max_det, max_nms,
        scale, offset, frame=None, nm=None, kpt=None, input=None, image=None, quant=None))]
    fn new(
        family: &str,
        task: &str,
        nc: Count,
        conf: f32,
        iou: f32,
        classes: Option<Vec<Bound<'_, PyAny>>>,
        agnostic: bool,
        max_det: &Bound<'_, PyAny>,
        max_nms: &Bound<'_, PyAny>,
        scale: (f64, f64),
        offset: (f64, f64),
        frame: Option<(f64, f64)>,
        nm: Option<Count>,
        kpt: Option<(Count, Count)>,
        input: Option<(Count, Count)>,
        image: Option<(Count, Count, Count, Count)>,
        quant: Option<(f32, Bound<'_, PyAny>)>,
    ) -> PyResult<Self> {
        let classes = classes
            .map(|c| c.iter().map(|v| int_arg::<u32>(v, "a class id in classes", "0..2**32")).collect())
            .transpose()?;
        let max_det = int_arg::<usize>(max_det, "max_det", "0..2**64")?;
        let max_nms = int_arg::<usize>(max_nms, "max_nms", "0..2**64")?;
        let quant = quant
            .map(|(s, z)| Ok::<_, PyErr>((s, int_arg::<i32>(&z, "quant's zero point", "-2**31..2**31")?)))
            .transpose()?;
        let layout = layout_of(family, task, nc.0, nm.map_or(32, |n| n.0), kpt.map_or((17, 3), |(k, d)| (k.0, d.0)))?;
        let input = input.map(|(w, h)| {
            let (l, t, r, b) = image.unwrap_or((Count(0), Count(0), w, h));
            ([w.0, h.0], [l.0, t.0, r.0, b.0])
        });
        let decoder = Decoder::new(
            layout,
            Params { conf, iou, classes, agnostic, max_det, max_nms },
            Geometry { scale: [scale.0, scale.1], offset: [offset.0, offset.1], frame: frame.map(|f| [f.0, f.1]) },
            input,
        )
        .map_err(detect_error)?;
        Ok(Self { decoder, quant })
    }

    /// Decodes one frame's output (and a segmentation model's prototypes),
    /// read in place with the GIL released.
    #[pyo3(signature = (output, element, protos=None, protos_element=None))]
    fn decode<'py>(
        &self,
        py: Python<'py>,
        output: OutputArray<'py>,
        element: &str,
        protos: Option<OutputArray<'py>>,
        protos_element: Option<&str>,
    ) -> PyResult<PyYoloOutput> {
        let element = element_of(&output, element, self.quant)?;
        let protos_element = match (&protos, protos_element) {
            (Some(p), Some(e)) => Some(element_of(p, e, self.quant)?),
            _ => None,
        };
        // The one overlap rule (alias.rs): no call may be writing what this reads.
        let mut reads = vec![(alias::extent(output.untyped()), "output")];
        if let Some(p) = &protos {
            reads.push((alias::extent(p.untyped()), "prototypes output"));
        }
        let _claim = alias::claim(&reads, &[])?;
        let out_guard = output.borrow()?;
        let protos_guard = protos.as_ref().map(|p| p.borrow()).transpose()?;
        let (out_span, protos_span) = (span(&out_guard), protos_guard.as_ref().map(span));
        let decoder = &self.decoder;
        let r = py
            .detach(|| {
                // SAFETY: both arrays stay borrowed (and claimed) until this returns.
                let output = unsafe { out_span.tensor(element)? };
                let protos = match (&protos_span, protos_element) {
                    // SAFETY: as above.
                    (Some(p), Some(e)) => Some(unsafe { p.tensor(e)? }),
                    _ => None,
                };
                decoder.decode(&output, protos.as_ref())
            })
            .map_err(detect_error)?;
        drop((out_guard, protos_guard));
        arrays(py, r)
    }
}

/// The detections as numpy arrays.
fn arrays(py: Python<'_>, r: Output) -> PyResult<PyYoloOutput> {
    let d = r.decoded;
    let n = d.len();
    let xyxy = PyArray1::from_vec(py, d.boxes.concat()).reshape([n, 4])?;
    let classes: Vec<i32> = d.classes.iter().map(|&c| c as i32).collect();
    let anchors: Vec<i64> = d.anchors.iter().map(|&a| a as i64).collect();
    let xywhr = r.xywhr.map(|v| PyArray1::from_vec(py, v.concat()).reshape([n, 5])).transpose()?;
    let keypoints = r.keypoints.map(|(v, e)| PyArray1::from_vec(py, v).reshape([n, e])).transpose()?;
    let masks = r.masks.map(|(patches, [w, h])| paint_masks(py, &patches, n, w, h)).transpose()?;
    let (mut input_rects, mut input_bits) = (None, None);
    if let Some(m) = r.input_masks {
        let rects: Vec<i64> =
            m.iter().flat_map(|m| [m.x.start, m.y.start, m.x.len(), m.y.len()].map(|v| v as i64)).collect();
        let bits: Vec<u8> = m.into_iter().flat_map(|m| m.bits).collect();
        input_rects = Some(PyArray1::from_vec(py, rects).reshape([n, 4])?.unbind());
        input_bits = Some(PyArray1::from_vec(py, bits).unbind());
    }
    Ok(PyYoloOutput {
        xyxy: xyxy.unbind(),
        scores: PyArray1::from_vec(py, d.scores).unbind(),
        class_ids: PyArray1::from_vec(py, classes).unbind(),
        anchors: PyArray1::from_vec(py, anchors).unbind(),
        xywhr: xywhr.map(Bound::unbind),
        keypoints: keypoints.map(Bound::unbind),
        masks: masks.map(Bound::unbind),
        input_rects,
        input_bits,
    })
}

/// The masks as one `(n, h, w)` array of 0/1 bytes. Numpy's zeroed
/// allocation (calloc: fresh pages are zero without being written) and only
/// the patches written, with the GIL released: the pages no mask reaches are
/// never touched here.
fn paint_masks<'py>(
    py: Python<'py>,
    patches: &[MaskPatch],
    n: usize,
    w: usize,
    h: usize,
) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
    let masks = zeros(py, [n, h, w])?;
    // SAFETY: the array was just made here, C-contiguous, and no one else
    // holds it yet; nothing reads or resizes it while the patches are written.
    let planes = unsafe { masks.as_slice_mut() }.map_err(|_| invalid("the masks array is not contiguous"))?;
    small_pages(planes);
    let planes = Unshared(planes);
    py.detach(|| {
        let Unshared(planes) = planes;
        for (patch, plane) in patches.iter().zip(planes.chunks_exact_mut((w * h).max(1))) {
            patch.paint(plane, w);
        }
    });
    Ok(masks)
}

/// A zeroed C-contiguous u8 array of `dims`, or OutOfMemoryError where numpy
/// cannot have the memory (numpy's own `zeros` would panic on the null it returns).
fn zeros<'py>(py: Python<'py>, dims: [usize; 3]) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
    let too_large =
        || error(ErrorKind::OutOfMemory, format!("the masks array {dims:?} (detections, height, width) is too large"));
    let bytes = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(too_large)?;
    if bytes > isize::MAX as usize || dims.iter().any(|&d| d > isize::MAX as usize) {
        return Err(too_large());
    }
    let mut shape = dims.map(|d| d as npyffi::npy_intp);
    // SAFETY: the shape's 3 dims are valid npy_intp (checked above), the
    // descriptor is a new reference that PyArray_Zeros steals, and a null
    // result (with numpy's MemoryError set) is taken as the error, not used.
    unsafe {
        let ptr = npyffi::PY_ARRAY_API.PyArray_Zeros(py, 3, shape.as_mut_ptr(), u8::get_dtype(py).into_dtype_ptr(), 0);
        match Bound::from_owned_ptr_or_err(py, ptr) {
            Ok(a) => Ok(a.cast_into_unchecked()),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyMemoryError>(py) => Err(too_large()),
            Err(e) => Err(e),
        }
    }
}

/// Numpy asks for transparent huge pages on arrays of 4 MiB and more: the
/// first write into a 2 MiB page then makes the kernel zero all of it, which
/// for masks (small patches spread over large planes) is most of the time.
/// Asking for small pages again before anything is written keeps the pages no
/// patch reaches untouched. Only advice: where it fails nothing changes.
#[cfg(target_os = "linux")]
fn small_pages(planes: &mut [u8]) {
    const PAGE: usize = 4096;
    if planes.len() < 4 << 20 {
        return;
    }
    let start = (planes.as_mut_ptr() as usize).next_multiple_of(PAGE);
    let end = (planes.as_mut_ptr() as usize + planes.len()) / PAGE * PAGE;
    // SAFETY: the range lies inside the array's own memory (page-aligned
    // within it); MADV_NOHUGEPAGE changes how pages are backed, not their contents.
    let _ = unsafe { rustix::mm::madvise(start as *mut _, end - start, rustix::mm::Advice::LinuxNoHugepage) };
}

#[cfg(not(target_os = "linux"))]
fn small_pages(_planes: &mut [u8]) {}

/// A slice of a fresh numpy array only this call holds, written with the GIL released.
struct Unshared<'a>(&'a mut [u8]);
// SAFETY: the slice is the only reference to the array's memory while the
// GIL is released (see paint_masks).
unsafe impl Send for Unshared<'_> {}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyYoloDecoder>()?;
    m.add_class::<PyYoloOutput>()?;
    Ok(())
}
