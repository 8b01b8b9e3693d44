//! Python binding of the YOLO decoder: each output array is read where it
//! lies (any strides, no copy), the whole decode runs with the GIL released,
//! and small numpy arrays come back.

use numpy::{PyArray1, PyArray2, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::errors::invalid;
use crate::detect::{
    self,
    mask::{InputMask, MaskGeometry, MaskPatch},
    DetectError, Element, ErrorKind, Family, Geometry, Layout, Params, Task, Tensor,
};

fn detect_error(e: DetectError) -> PyErr {
    super::errors::detect(e.kind == ErrorKind::Layout, e.message)
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

/// What `decode` returns: xyxy (n, 4), scores, class ids, anchors,
/// xywhr (n, 5) for obb, extra (n, e) keypoints, masks (n, h, w) as 0/1 bytes,
/// and each mask at the model input: rects (n, 4) x, y, w, h and their 0/1 bytes, one after another.
type Decoded<'py> = (
    Bound<'py, PyArray2<f32>>,
    Bound<'py, PyArray1<f32>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<i64>>,
    Option<Bound<'py, PyArray2<f32>>>,
    Option<Bound<'py, PyArray2<f32>>>,
    Option<Bound<'py, PyArrayDyn<u8>>>,
    Option<(Bound<'py, PyArray2<i64>>, Bound<'py, PyArray1<u8>>)>,
);

struct Request {
    layout: Layout,
    params: Params,
    geometry: Geometry,
    /// Model input (w, h) and the image's rectangle in it, for masks.
    input: Option<([usize; 2], [usize; 4])>,
    element: Element,
    protos_element: Option<Element>,
}

struct Result_ {
    decoded: detect::Decoded,
    xywhr: Option<Vec<[f32; 5]>>,
    keypoints: Option<(Vec<f32>, usize)>,
    /// Each detection's mask patch, and the frame's (w, h).
    masks: Option<(Vec<MaskPatch>, [usize; 2])>,
    input_masks: Option<Vec<InputMask>>,
}

fn run(output: &Span, protos: Option<&Span>, r: &Request) -> detect::Result<Result_> {
    // SAFETY: `decode_yolo` keeps both arrays borrowed until this returns.
    let output = unsafe { output.tensor(r.element)? };
    let mut d = detect::decode(output.matrix()?, &r.layout, &r.params)?;
    let mut masks = None;
    let mut input_masks = None;
    if let Task::Segment { nm } = r.layout.task {
        let (Some(protos), Some(pe)) = (protos, r.protos_element) else {
            detect::bail_value("a segmentation model needs its prototypes output [1, 32, H/4, W/4]")?
        };
        // SAFETY: as above.
        let protos = unsafe { protos.tensor(pe)? };
        let p = protos.squeeze_to(3).map_err(|e| DetectError::new(ErrorKind::Layout, e.message))?;
        if p.shape()[0] != nm {
            detect::bail_value(&format!(
                "{nm} mask coefficients per box need {nm} prototypes, got shape {:?}",
                protos.shape()
            ))?;
        }
        let (input, image) =
            r.input.unwrap_or(([p.shape()[2] * 4, p.shape()[1] * 4], [0, 0, p.shape()[2] * 4, p.shape()[1] * 4]));
        let frame = match r.geometry.frame {
            Some([w, h]) => [w.round() as usize, h.round() as usize],
            None => input,
        };
        let g = MaskGeometry { input, image, frame };
        let found = detect::mask::masks(&p, &d.extra, &d.boxes, &g)?;
        if found.contains(&None) {
            // Ultralytics keeps only the boxes whose mask has a pixel.
            let keep: Vec<bool> = found.iter().map(Option::is_some).collect();
            d = keep_where(d, &keep, nm);
        }
        let (out, inputs): (Vec<MaskPatch>, Vec<InputMask>) = found.into_iter().flatten().unzip();
        masks = Some((out, frame));
        input_masks = Some(inputs);
    }
    let mut xywhr = None;
    if r.layout.task == Task::Obb {
        let bounds = r.geometry.rotated(&mut d.boxes, &d.angles);
        xywhr = Some(d.boxes.iter().zip(&d.angles).map(|(b, &t)| [b[0], b[1], b[2], b[3], t]).collect());
        d.boxes = bounds;
    } else {
        r.geometry.boxes(&mut d.boxes);
    }
    let mut keypoints = None;
    if let Task::Pose { k, dim } = r.layout.task {
        let mut values = std::mem::take(&mut d.extra);
        r.geometry.points(&mut values, dim);
        keypoints = Some((values, k * dim));
    }
    Ok(Result_ { decoded: d, xywhr, keypoints, masks, input_masks })
}

/// The detections where `keep` is true (`extra` values per detection).
fn keep_where(d: detect::Decoded, keep: &[bool], extra: usize) -> detect::Decoded {
    let mut out = detect::Decoded::default();
    for (i, _) in keep.iter().enumerate().filter(|(_, &k)| k) {
        out.boxes.push(d.boxes[i]);
        out.scores.push(d.scores[i]);
        out.classes.push(d.classes[i]);
        out.anchors.push(d.anchors[i]);
        if let Some(&a) = d.angles.get(i) {
            out.angles.push(a);
        }
        out.extra.extend_from_slice(&d.extra[i * extra..(i + 1) * extra]);
    }
    out
}

/// Decodes one YOLO output (and the prototypes of a segmentation model).
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (output, element, family, task, nc, conf, iou, classes, agnostic, max_det, max_nms,
    scale, offset, frame=None, protos=None, protos_element=None, nm=32, kpt=(17, 3), input=None, image=None, quant=None))]
fn decode_yolo<'py>(
    py: Python<'py>,
    output: OutputArray<'py>,
    element: &str,
    family: &str,
    task: &str,
    nc: usize,
    conf: f32,
    iou: f32,
    classes: Option<Vec<u32>>,
    agnostic: bool,
    max_det: usize,
    max_nms: usize,
    scale: (f64, f64),
    offset: (f64, f64),
    frame: Option<(f64, f64)>,
    protos: Option<OutputArray<'py>>,
    protos_element: Option<&str>,
    nm: usize,
    kpt: (usize, usize),
    input: Option<(usize, usize)>,
    image: Option<(usize, usize, usize, usize)>,
    quant: Option<(f32, i32)>,
) -> PyResult<Decoded<'py>> {
    let request = Request {
        layout: layout_of(family, task, nc, nm, kpt)?,
        params: Params { conf, iou, classes, agnostic, max_det, max_nms },
        geometry: Geometry {
            scale: [scale.0, scale.1],
            offset: [offset.0, offset.1],
            frame: frame.map(|f| [f.0, f.1]),
        },
        input: input.map(|i| {
            let image = image.unwrap_or((0, 0, i.0, i.1));
            ([i.0, i.1], [image.0, image.1, image.2, image.3])
        }),
        element: element_of(&output, element, quant)?,
        protos_element: match (&protos, protos_element) {
            (Some(p), Some(e)) => Some(element_of(p, e, quant)?),
            _ => None,
        },
    };
    if !(scale.0 > 0.0 && scale.1 > 0.0 && scale.0.is_finite() && scale.1.is_finite()) {
        return Err(invalid(format!("the transform's scale must be positive, got {scale:?}")));
    }
    let out_guard = output.borrow()?;
    let protos_guard = protos.as_ref().map(|p| p.borrow()).transpose()?;
    let (out_span, protos_span) = (span(&out_guard), protos_guard.as_ref().map(span));
    let r = py.detach(|| run(&out_span, protos_span.as_ref(), &request)).map_err(detect_error)?;
    drop((out_guard, protos_guard));

    let d = r.decoded;
    let n = d.len();
    let xyxy = PyArray1::from_vec(py, d.boxes.concat()).reshape([n, 4])?;
    let classes: Vec<i32> = d.classes.iter().map(|&c| c as i32).collect();
    let anchors: Vec<i64> = d.anchors.iter().map(|&a| a as i64).collect();
    let xywhr = r.xywhr.map(|v| PyArray1::from_vec(py, v.concat()).reshape([n, 5])).transpose()?;
    let keypoints = r.keypoints.map(|(v, e)| PyArray1::from_vec(py, v).reshape([n, e])).transpose()?;
    let masks = r.masks.map(|(patches, [w, h])| paint_masks(py, &patches, n, w, h)).transpose()?;
    let input_masks = r
        .input_masks
        .map(|m| -> PyResult<_> {
            let rects: Vec<i64> =
                m.iter().flat_map(|m| [m.x.start, m.y.start, m.x.len(), m.y.len()].map(|v| v as i64)).collect();
            let bits: Vec<u8> = m.into_iter().flat_map(|m| m.bits).collect();
            Ok((PyArray1::from_vec(py, rects).reshape([n, 4])?, PyArray1::from_vec(py, bits)))
        })
        .transpose()?;
    Ok((
        xyxy,
        PyArray1::from_vec(py, d.scores),
        PyArray1::from_vec(py, classes),
        PyArray1::from_vec(py, anchors),
        xywhr,
        keypoints,
        masks,
        input_masks,
    ))
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
    let masks = PyArrayDyn::<u8>::zeros(py, vec![n, h, w], false);
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
    m.add_function(wrap_pyfunction!(decode_yolo, m)?)?;
    Ok(())
}
