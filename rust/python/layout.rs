//! Python bindings of the layout engine: numpy arrays in, the core's checked
//! row views out, the GIL released around the work.
//!
//! Frame functions take uint8 views (`npu_zc.layout` makes them); this layer
//! works out, from each array's shape and strides, which bytes are the frame's
//! rows and refuses any layout whose rows would leave the array's memory.
//! numpy's borrow checker (rust-numpy) refuses a read-only destination and a
//! destination that is also being read (an overlap with the source).

use numpy::{
    BorrowError, PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyReadwriteArrayDyn, PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use super::alias::{self, Region};
use super::errors::{error, invalid, Count};
use crate::buffer::ErrorKind;
use crate::layout::{self, ElementType, Format, FrameGeometry, LayoutError, Options, Rows, RowsMut, SimdLevel};

fn value_error(e: LayoutError) -> PyErr {
    if e.out_of_memory {
        return error(ErrorKind::OutOfMemory, e.message);
    }
    invalid(e.message)
}

trait OrValueError<T> {
    fn or_value_error(self) -> PyResult<T>;
}

impl<T> OrValueError<T> for Result<T, LayoutError> {
    fn or_value_error(self) -> PyResult<T> {
        self.map_err(value_error)
    }
}

fn parse<T: std::str::FromStr<Err: Into<LayoutError>>>(name: &str) -> PyResult<T> {
    name.parse::<T>().map_err(Into::into).or_value_error()
}

fn borrow_error(what: &str, e: BorrowError) -> PyErr {
    match e {
        BorrowError::NotWriteable => {
            invalid(format!("the {what} is read-only: pass a writable array (a DmaBuf mapped for writing, or a copy)"))
        }
        // The aliasing rule passed (alias.rs): another call, or another
        // extension, holds numpy's borrow of this array's memory.
        _ => error(
            ErrorKind::Busy,
            format!(
                "the {what} is in use by another call (or numpy cannot tell its bytes from another \
                 argument's): give each call memory of its own"
            ),
        ),
    }
}

fn read<'py, T: numpy::Element>(a: &Bound<'py, PyArrayDyn<T>>, what: &str) -> PyResult<PyReadonlyArrayDyn<'py, T>> {
    a.try_readonly().map_err(|e| borrow_error(what, e))
}

fn write<'py, T: numpy::Element>(a: &Bound<'py, PyArrayDyn<T>>, what: &str) -> PyResult<PyReadwriteArrayDyn<'py, T>> {
    a.try_readwrite().map_err(|e| borrow_error(what, e))
}

/// The bytes an array spans (alias::extent).
fn extent<T: numpy::Element>(a: &Bound<'_, PyArrayDyn<T>>) -> Region {
    alias::extent(a.as_untyped())
}

/// Claims one source and one destination under the aliasing rule (alias.rs).
fn claim_pair(src: Region, dst: Region) -> PyResult<alias::Claim> {
    alias::claim(&[(src, "source")], &[(dst, "destination")])
}

/// Where a frame's planes start in an array, and their row pitch.
struct Placement {
    starts: Vec<*mut u8>,
    pitch: usize,
}

/// Finds the rows of geometry `g` (pitch from `pitch`, or else the array's
/// strides) in a uint8 array. A C-contiguous array (any shape, e.g. a mapped
/// DmaBuf) holds `planes * rows` rows at the pitch; its size must be the
/// frame's exactly for destinations (`exact`) and at least the last row's
/// end for sources. A strided array must be shaped (rows, ...) or
/// (planes, rows, ...) with each row contiguous.
fn place(
    array: &Bound<'_, PyArrayDyn<u8>>,
    g: &FrameGeometry,
    pitch: Option<usize>,
    exact: bool,
    what: &str,
) -> PyResult<Placement> {
    let base = array.data();
    if array.is_c_contiguous() {
        let pitch = pitch.unwrap_or(g.row_bytes);
        let g = FrameGeometry { pitch, ..*g };
        let len = array.len();
        let needed = (g.planes * g.rows - 1) * pitch + g.row_bytes;
        if exact && len != g.nbytes() {
            return Err(invalid(format!(
                "the {what} holds {len} bytes but the frame takes {} bytes ({} rows of {} bytes, {pitch} bytes apart); \
                 check the format, the size and the stride",
                g.nbytes(),
                g.planes * g.rows,
                g.row_bytes
            )));
        }
        if len < needed {
            return Err(invalid(format!(
                "the {what} holds {len} bytes, too few for {} rows of {} bytes {pitch} bytes apart",
                g.planes * g.rows,
                g.row_bytes
            )));
        }
        let starts = (0..g.planes).map(|p| base.wrapping_add(p * g.plane_pitch())).collect();
        return Ok(Placement { starts, pitch });
    }

    let (shape, strides) = (array.shape(), array.strides());
    let outer = if g.planes > 1 { 2 } else { 1 };
    let not_rows = || {
        invalid(format!(
            "the {what} is not contiguous and its strides do not describe rows of {} bytes: \
             pass an array whose rows are contiguous (e.g. a slice of rows of a larger array) \
             or a contiguous copy (numpy.ascontiguousarray)",
            g.row_bytes
        ))
    };
    if shape.len() < outer || strides.iter().any(|&s| s < 0) {
        return Err(not_rows());
    }
    // The inner axes must be one contiguous run of `row_bytes`.
    let mut expected_stride = 1usize;
    for (&n, &s) in shape[outer..].iter().zip(&strides[outer..]).rev() {
        if n > 1 && s as usize != expected_stride {
            return Err(not_rows());
        }
        expected_stride *= n;
    }
    let counts = if outer == 2 { [g.planes, g.rows] } else { [g.rows, 1] };
    if expected_stride != g.row_bytes || shape[..outer] != counts[..outer] {
        return Err(not_rows());
    }
    let row_pitch = if g.rows > 1 { strides[outer - 1] as usize } else { g.row_bytes };
    if let Some(p) = pitch.filter(|&p| p != row_pitch) {
        return Err(invalid(format!(
            "a stride of {p} bytes was given but the {what}'s rows are {row_pitch} bytes apart: \
             give no stride for a strided array, or pass a flat buffer"
        )));
    }
    let plane_pitch = if outer == 2 { strides[0] as usize } else { 0 };
    let rows_extent = (g.rows - 1) * row_pitch + g.row_bytes;
    if row_pitch < g.row_bytes || (g.planes > 1 && plane_pitch < rows_extent) {
        return Err(not_rows());
    }
    let starts = (0..g.planes).map(|p| base.wrapping_add(p * plane_pitch)).collect();
    Ok(Placement { starts, pitch: row_pitch })
}

/// Read-only rows of a placed source.
///
/// # Safety
/// `placement` must come from `place` on an array that stays borrowed
/// (readonly) for `'a`.
unsafe fn source_rows<'a>(p: &Placement, plane: usize, rows: usize, row_bytes: usize) -> Rows<'a> {
    Rows::from_raw_parts(p.starts[plane], rows, row_bytes, p.pitch)
}

/// A source frame's arrays: one array, or planes given apart ((Y, UV) for
/// NV12, NV21 and P010; (Y, U, V) for I420 and I010), each placed (where its
/// rows lie, checked against the frame's geometry).
struct SourcePlanes {
    format: Format,
    width: usize,
    height: usize,
    /// Bytes of one sample: planes given apart are rows of `width * sample` bytes.
    sample: usize,
    /// The first array (the whole frame, or its Y plane) and its (rows, row bytes).
    luma: (Placement, (usize, usize)),
    /// The chroma planes given apart: (place, rows, row bytes, name) each.
    chroma: Vec<(Placement, usize, usize, &'static str)>,
}

impl SourcePlanes {
    /// Places `src` and `[uv, v]` (the planes given apart, if any) with
    /// their pitches, refusing planes that do not go with `format`.
    fn place(
        format: Format,
        (width, height): (usize, usize),
        src: &Bound<'_, PyArrayDyn<u8>>,
        [uv, v]: [Option<&Bound<'_, PyArrayDyn<u8>>>; 2],
        [src_pitch, uv_pitch, v_pitch]: [Option<usize>; 3],
    ) -> PyResult<SourcePlanes> {
        if v.is_some() && !(matches!(format, Format::I420 | Format::I010) && uv.is_some()) {
            return Err(invalid(format!(
                "a separate V plane only goes with an I420 or I010 source given as (Y, U, V) planes, not {format}"
            )));
        }
        let sample = if format.is_10bit() { 2 } else { 1 };
        let mut chroma = Vec::new();
        let luma = match (format, uv) {
            (Format::I420 | Format::I010, Some(u)) => {
                let Some(v) = v else {
                    return Err(invalid(format!(
                        "an {format} source in planes needs its V plane as well as its U plane"
                    )));
                };
                let (cw, ch) = ((width / 2).max(1) * sample, (height / 2).max(1));
                let yg = layout::frame_geometry(Format::Gray, width * sample, height, src_pitch).or_value_error()?;
                let ug = layout::frame_geometry(Format::Gray, cw, ch, uv_pitch).or_value_error()?;
                let vg = layout::frame_geometry(Format::Gray, cw, ch, v_pitch).or_value_error()?;
                chroma.push((place(u, &ug, uv_pitch, false, "U plane")?, ug.rows, ug.row_bytes, "U plane"));
                chroma.push((place(v, &vg, v_pitch, false, "V plane")?, vg.rows, vg.row_bytes, "V plane"));
                (place(src, &yg, src_pitch, false, "Y plane")?, (height, width))
            }
            (Format::Nv12 | Format::Nv21 | Format::P010, Some(uv)) => {
                let yg = layout::frame_geometry(Format::Gray, width * sample, height, src_pitch).or_value_error()?;
                let uvg =
                    layout::frame_geometry(Format::Gray, width * sample, height / 2, uv_pitch).or_value_error()?;
                chroma.push((place(uv, &uvg, uv_pitch, false, "UV plane")?, uvg.rows, uvg.row_bytes, "UV plane"));
                (place(src, &yg, src_pitch, false, "Y plane")?, (height, width))
            }
            (_, Some(_)) => {
                return Err(invalid(format!("a separate UV plane only goes with NV12, NV21 and P010, not {format}")))
            }
            (_, None) => {
                let sg = layout::frame_geometry(format, width, height, src_pitch).or_value_error()?;
                (place(src, &sg, src_pitch, false, "source")?, (sg.rows, sg.row_bytes))
            }
        };
        Ok(SourcePlanes { format, width, height, sample, luma, chroma })
    }

    /// The bytes the source's rows span, each named (for the aliasing rule).
    fn reads(&self) -> Vec<(Region, &'static str)> {
        let (p, (rows, row_bytes)) = &self.luma;
        let mut reads = vec![(Region::rows(p.starts[0], *rows, *row_bytes, p.pitch), "source")];
        for (p, rows, row_bytes, what) in &self.chroma {
            reads.push((Region::rows(p.starts[0], *rows, *row_bytes, p.pitch), *what));
        }
        reads
    }

    /// The layout engine's view of the rows.
    ///
    /// # Safety
    /// The arrays placed must stay borrowed (readonly) and claimed for `'a`.
    unsafe fn source<'a>(&self) -> layout::Result<layout::Source<'a>> {
        let (format, width, height, sample) = (self.format, self.width, self.height, self.sample);
        let (src_place, src_rows) = &self.luma;
        // SAFETY (each `source_rows`): rows checked by `place`; the caller
        // keeps the arrays borrowed and claimed.
        match (format, self.chroma.as_slice()) {
            (Format::I420 | Format::I010, [(up, urows, ubytes, _), (vp, vrows, vbytes, _)]) => {
                let (y, u, v) = unsafe {
                    (
                        source_rows(src_place, 0, height, width * sample),
                        source_rows(up, 0, *urows, *ubytes),
                        source_rows(vp, 0, *vrows, *vbytes),
                    )
                };
                if format == Format::I010 {
                    layout::Source::i010(width, height, y, u, v)
                } else {
                    layout::Source::i420(width, height, y, u, v)
                }
            }
            (_, [(uvp, uvrows, _, _)]) => {
                let row = width * sample;
                let (y, uv) = unsafe { (source_rows(src_place, 0, height, row), source_rows(uvp, 0, *uvrows, row)) };
                layout::Source::from_rows(format, width, height, y, Some(uv))
            }
            _ => {
                let rows = unsafe { source_rows(src_place, 0, src_rows.0, src_rows.1) };
                layout::Source::from_rows(format, width, height, rows, None)
            }
        }
    }
}

/// (x, y, width, height) of a rectangle.
type RectTuple = (usize, usize, usize, usize);
/// ((scale x, scale y), (offset x, offset y), content, destination rectangle, source region).
type TransformTuple = ((f64, f64), (f64, f64), RectTuple, RectTuple, RectTuple);

/// A rectangle argument: negative or too large sides are InvalidArgumentError.
type RectArg = (Count, Count, Count, Count);

fn rect(r: Option<RectArg>) -> Option<layout::Rect> {
    r.map(|(x, y, w, h)| layout::Rect::new(x.0, y.0, w.0, h.0))
}

fn transform_tuple(t: &layout::Transform) -> TransformTuple {
    let r = |r: layout::Rect| (r.x, r.y, r.width, r.height);
    ((t.scale[0], t.scale[1]), (t.offset[0], t.offset[1]), r(t.content), r(t.dst_rect), r(t.source))
}

/// The geometry arguments of a resizing conversion.
fn resize_options(
    roi: Option<RectArg>,
    dst_rect: Option<RectArg>,
    interpolation: &str,
    fit: &str,
    fill: Option<[f32; 3]>,
) -> PyResult<layout::Resize> {
    let fill = match fill {
        None => [0; 3],
        Some(values) => {
            if let Some(v) = values.iter().find(|v| !(0.0..=255.0).contains(*v) || v.fract() != 0.0) {
                return Err(invalid(format!(
                    "fill value {v} is not a pixel value: give integers from 0 to 255 (e.g. 114 for YOLO)"
                )));
            }
            values.map(|v| v as u8)
        }
    };
    Ok(layout::Resize {
        roi: rect(roi),
        dst_rect: rect(dst_rect),
        interpolation: parse(interpolation)?,
        fit: parse(fit)?,
        fill,
    })
}

#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (src, src_format, dst, dst_format, width, height, *, src_pitch=None, dst_pitch=None,
                    uv=None, uv_pitch=None, mean=None, scale=None, pad=0.0, threads=None, simd=None,
                    dst_size=None, roi=None, dst_rect=None, interpolation="bilinear", fit="stretch", fill=None,
                    matrix=None, range=None, v=None, v_pitch=None, quant=None, rounding=None))]
fn convert(
    py: Python<'_>,
    src: Bound<'_, PyArrayDyn<u8>>,
    src_format: &str,
    dst: Bound<'_, PyArrayDyn<u8>>,
    dst_format: &str,
    width: Count,
    height: Count,
    src_pitch: Option<Count>,
    dst_pitch: Option<Count>,
    uv: Option<Bound<'_, PyArrayDyn<u8>>>,
    uv_pitch: Option<Count>,
    mean: Option<[f32; 3]>,
    scale: Option<[f32; 3]>,
    pad: f32,
    threads: Option<Count>,
    simd: Option<&str>,
    dst_size: Option<(Count, Count)>,
    roi: Option<RectArg>,
    dst_rect: Option<RectArg>,
    interpolation: &str,
    fit: &str,
    fill: Option<[f32; 3]>,
    matrix: Option<&str>,
    range: Option<&str>,
    v: Option<Bound<'_, PyArrayDyn<u8>>>,
    v_pitch: Option<Count>,
    quant: Option<(f32, i32)>,
    rounding: Option<&str>,
) -> PyResult<TransformTuple> {
    let (width, height, threads) = (width.0, height.0, threads.map(|t| t.0));
    let (src_pitch, dst_pitch, uv_pitch) = (src_pitch.map(|p| p.0), dst_pitch.map(|p| p.0), uv_pitch.map(|p| p.0));
    let dst_size = dst_size.map(|(w, h)| (w.0, h.0));
    let (src_format, dst_format) = (parse::<Format>(src_format)?, parse::<Format>(dst_format)?);
    let simd = simd.map(parse::<SimdLevel>).transpose()?;
    let resize = resize_options(roi, dst_rect, interpolation, fit, fill)?;
    let colour = layout::Colour::parse(matrix, range).or_value_error()?;
    let rounding = rounding.map(parse::<layout::Rounding>).transpose()?.unwrap_or_default();
    let options = Options { mean, scale, pad, threads, simd, resize, colour, quant, rounding };
    let (dst_width, dst_height) = dst_size.unwrap_or((width, height));
    if !src_format.is_source() || !dst_format.is_destination() {
        // The core says which formats are which.
        layout::describe(src_format, dst_format, &options).or_value_error()?;
    }

    // Where each argument's rows are, from its shape and strides (nothing read yet).
    let dg = layout::frame_geometry(dst_format, dst_width, dst_height, dst_pitch).or_value_error()?;
    let dst_place = place(&dst, &dg, dst_pitch, true, "destination")?;
    let src_planes = SourcePlanes::place(
        src_format,
        (width, height),
        &src,
        [uv.as_ref(), v.as_ref()],
        [src_pitch, uv_pitch, v_pitch.map(|p| p.0)],
    )?;

    // The aliasing rule (alias.rs): the destination's rows share no byte with
    // the source's, and no other call is writing either right now.
    let reads = src_planes.reads();
    let writes: Vec<_> = dst_place
        .starts
        .iter()
        .map(|&start| (Region::rows(start, dg.rows, dg.row_bytes, dst_place.pitch), "destination"))
        .collect();
    let _claim = alias::claim(&reads, &writes)?;

    // numpy's borrow flags as well (read-only arrays; other extensions' borrows).
    let _src_guard = read(&src, "source")?;
    let _uv_guard = uv.as_ref().map(|a| read(a, "UV plane")).transpose()?;
    let _v_guard = v.as_ref().map(|a| read(a, "V plane")).transpose()?;
    let _dst_guard = write(&dst, "destination")?;

    // SAFETY: `place` checked that each plane's rows lie inside the array, do
    // not overlap, and are the array's own bytes; the claim and the readwrite
    // borrow held in `_dst_guard` make them exclusively ours until this
    // function returns (the claim: no source shares a byte with them).
    let planes = dst_place
        .starts
        .iter()
        .map(|&start| unsafe { RowsMut::from_raw_parts(start, dg.rows, dg.row_bytes, dst_place.pitch) })
        .collect();
    let destination = layout::Destination::from_planes(dst_format, dst_width, dst_height, planes).or_value_error()?;

    // SAFETY: the arrays stay borrowed (readonly: the guards above) and
    // claimed until we return.
    let source = unsafe { src_planes.source() }.or_value_error()?;

    let transform = py.detach(|| layout::convert(&source, destination, &options)).or_value_error()?;
    Ok(transform_tuple(&transform))
}

/// The kernels and the transform of a conversion of a `src_size` frame into a
/// `dst_size` one: checks every argument (geometry included) without converting.
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (src_format, dst_format, src_size, dst_size, *, mean=None, scale=None, pad=0.0, simd=None,
                    roi=None, dst_rect=None, interpolation="bilinear", fit="stretch", fill=None, matrix=None, range=None,
                    quant=None, rounding=None))]
fn describe_resize(
    src_format: &str,
    dst_format: &str,
    src_size: (Count, Count),
    dst_size: (Count, Count),
    mean: Option<[f32; 3]>,
    scale: Option<[f32; 3]>,
    pad: f32,
    simd: Option<&str>,
    roi: Option<RectArg>,
    dst_rect: Option<RectArg>,
    interpolation: &str,
    fit: &str,
    fill: Option<[f32; 3]>,
    matrix: Option<&str>,
    range: Option<&str>,
    quant: Option<(f32, i32)>,
    rounding: Option<&str>,
) -> PyResult<(String, TransformTuple)> {
    let simd = simd.map(parse::<SimdLevel>).transpose()?;
    let resize = resize_options(roi, dst_rect, interpolation, fit, fill)?;
    let colour = layout::Colour::parse(matrix, range).or_value_error()?;
    let rounding = rounding.map(parse::<layout::Rounding>).transpose()?.unwrap_or_default();
    let options = Options { mean, scale, pad, threads: None, simd, resize, colour, quant, rounding };
    let (name, transform) = layout::describe_resize(
        parse(src_format)?,
        parse(dst_format)?,
        (src_size.0 .0, src_size.1 .0),
        (dst_size.0 .0, dst_size.1 .0),
        &options,
    )
    .or_value_error()?;
    Ok((name, transform_tuple(&transform)))
}

/// The kernels `convert` would run, e.g. "avx512/bf16-native/fma".
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (src_format, dst_format, *, mean=None, scale=None, pad=0.0, simd=None, matrix=None, range=None,
                    quant=None, rounding=None))]
fn describe_conversion(
    src_format: &str,
    dst_format: &str,
    mean: Option<[f32; 3]>,
    scale: Option<[f32; 3]>,
    pad: f32,
    simd: Option<&str>,
    matrix: Option<&str>,
    range: Option<&str>,
    quant: Option<(f32, i32)>,
    rounding: Option<&str>,
) -> PyResult<String> {
    let simd = simd.map(parse::<SimdLevel>).transpose()?;
    let colour = layout::Colour::parse(matrix, range).or_value_error()?;
    let rounding = rounding.map(parse::<layout::Rounding>).transpose()?.unwrap_or_default();
    let options = Options { mean, scale, pad, threads: None, simd, colour, quant, rounding, ..Options::default() };
    layout::describe(parse(src_format)?, parse(dst_format)?, &options).or_value_error()
}

/// The code paths this CPU can run, scalar first, and the default one.
#[pyfunction]
fn simd_levels() -> (Vec<&'static str>, &'static str) {
    let available = SimdLevel::available().into_iter().map(|l| l.name()).collect();
    (available, SimdLevel::default_level().name())
}

/// (source formats, destination formats), by name.
#[pyfunction]
fn format_names() -> (Vec<&'static str>, Vec<&'static str>) {
    (Format::sources().map(|f| f.name()).collect(), Format::destinations().map(|f| f.name()).collect())
}

/// Canonical name of a format, or InvalidArgumentError for an unknown one.
#[pyfunction]
fn format_name(name: &str) -> PyResult<&'static str> {
    Ok(parse::<Format>(name)?.name())
}

#[pyfunction]
#[pyo3(signature = (format, width, height, stride=None))]
fn frame_nbytes(format: &str, width: Count, height: Count, stride: Option<Count>) -> PyResult<usize> {
    layout::frame_nbytes(parse(format)?, width.0, height.0, stride.map(|s| s.0)).or_value_error()
}

#[pyfunction]
#[pyo3(signature = (element_type, layout, channels, bgr=false))]
fn select_format(element_type: &str, layout: &str, channels: Count, bgr: bool) -> PyResult<&'static str> {
    Ok(layout::select_format(parse(element_type)?, parse(layout)?, channels.0, bgr).or_value_error()?.name())
}

/// An 8-bit integer array: uint8 or int8.
#[derive(FromPyObject)]
enum Int8Array<'py> {
    U8(Bound<'py, PyArrayDyn<u8>>),
    I8(Bound<'py, PyArrayDyn<i8>>),
}

impl Int8Array<'_> {
    fn extent(&self) -> Region {
        match self {
            Int8Array::U8(a) => extent(a),
            Int8Array::I8(a) => extent(a),
        }
    }
}

fn contiguous<T>(r: Result<T, numpy::AsSliceError>, what: &str) -> PyResult<T> {
    r.map_err(|_| invalid(format!("the {what} is not contiguous: pass a C-contiguous array (numpy.ascontiguousarray)")))
}

#[pyfunction]
#[pyo3(signature = (src, dst, scale, zero_point, inner, simd=None))]
fn quantize(
    py: Python<'_>,
    src: Bound<'_, PyArrayDyn<f32>>,
    dst: Int8Array<'_>,
    scale: Vec<f32>,
    zero_point: Vec<i32>,
    inner: Count,
    simd: Option<&str>,
) -> PyResult<()> {
    let simd = simd.map(parse::<SimdLevel>).transpose()?;
    let q = layout::Quantization { scale, zero_point, inner: inner.0 };
    let _claim = claim_pair(extent(&src), dst.extent())?;
    let src = read(&src, "source")?;
    let src = contiguous(src.as_slice(), "source")?;
    match dst {
        Int8Array::U8(d) => {
            let mut d = write(&d, "destination")?;
            let d = contiguous(d.as_slice_mut(), "destination")?;
            py.detach(|| layout::quantize(src, d, &q, simd))
        }
        Int8Array::I8(d) => {
            let mut d = write(&d, "destination")?;
            let d = contiguous(d.as_slice_mut(), "destination")?;
            py.detach(|| layout::quantize(src, d, &q, simd))
        }
    }
    .or_value_error()
}

#[pyfunction]
#[pyo3(signature = (src, dst, scale, zero_point, inner, simd=None))]
fn dequantize(
    py: Python<'_>,
    src: Int8Array<'_>,
    dst: Bound<'_, PyArrayDyn<f32>>,
    scale: Vec<f32>,
    zero_point: Vec<i32>,
    inner: Count,
    simd: Option<&str>,
) -> PyResult<()> {
    let simd = simd.map(parse::<SimdLevel>).transpose()?;
    let q = layout::Quantization { scale, zero_point, inner: inner.0 };
    let _claim = claim_pair(src.extent(), extent(&dst))?;
    let mut dst = write(&dst, "destination")?;
    let dst = contiguous(dst.as_slice_mut(), "destination")?;
    match src {
        Int8Array::U8(s) => {
            let s = read(&s, "source")?;
            let s = contiguous(s.as_slice(), "source")?;
            py.detach(|| layout::dequantize(s, dst, &q, simd))
        }
        Int8Array::I8(s) => {
            let s = read(&s, "source")?;
            let s = contiguous(s.as_slice(), "source")?;
            py.detach(|| layout::dequantize(s, dst, &q, simd))
        }
    }
    .or_value_error()
}

/// `src`: a uint8 view of the source elements; `element`: their type.
#[pyfunction]
#[pyo3(signature = (src, element, dst, simd=None))]
fn to_float32(
    py: Python<'_>,
    src: Bound<'_, PyArrayDyn<u8>>,
    element: &str,
    dst: Bound<'_, PyArrayDyn<f32>>,
    simd: Option<&str>,
) -> PyResult<()> {
    let (element, simd) = (parse::<ElementType>(element)?, simd.map(parse::<SimdLevel>).transpose()?);
    let _claim = claim_pair(extent(&src), extent(&dst))?;
    let src = read(&src, "source")?;
    let src = contiguous(src.as_slice(), "source")?;
    let mut dst = write(&dst, "destination")?;
    let dst = contiguous(dst.as_slice_mut(), "destination")?;
    py.detach(|| layout::to_float32(src, element, dst, simd)).or_value_error()
}

/// `dst`: a uint8 view of the destination elements; `element`: their type.
#[pyfunction]
#[pyo3(signature = (src, dst, element, simd=None))]
fn from_float32(
    py: Python<'_>,
    src: Bound<'_, PyArrayDyn<f32>>,
    dst: Bound<'_, PyArrayDyn<u8>>,
    element: &str,
    simd: Option<&str>,
) -> PyResult<()> {
    let (element, simd) = (parse::<ElementType>(element)?, simd.map(parse::<SimdLevel>).transpose()?);
    let _claim = claim_pair(extent(&src), extent(&dst))?;
    let src = read(&src, "source")?;
    let src = contiguous(src.as_slice(), "source")?;
    let mut dst = write(&dst, "destination")?;
    let dst = contiguous(dst.as_slice_mut(), "destination")?;
    py.detach(|| layout::from_float32(src, dst, element, simd)).or_value_error()
}

#[pyfunction]
fn packed_to_planar(
    py: Python<'_>,
    src: Bound<'_, PyArrayDyn<u8>>,
    element: &str,
    channels: Count,
    dst: Bound<'_, PyArrayDyn<f32>>,
    planes: Count,
) -> PyResult<()> {
    let (channels, planes) = (channels.0, planes.0);
    let element = parse::<ElementType>(element)?;
    let _claim = claim_pair(extent(&src), extent(&dst))?;
    let src = read(&src, "source")?;
    let src = contiguous(src.as_slice(), "source")?;
    let mut dst = write(&dst, "destination")?;
    let dst = contiguous(dst.as_slice_mut(), "destination")?;
    py.detach(|| layout::packed_to_planar(src, element, channels, dst, planes)).or_value_error()
}

#[allow(clippy::too_many_arguments)]
#[pyfunction]
fn planar_to_packed(
    py: Python<'_>,
    src: Bound<'_, PyArrayDyn<f32>>,
    planes: Count,
    dst: Bound<'_, PyArrayDyn<u8>>,
    element: &str,
    channels: Count,
    pad: f32,
) -> PyResult<()> {
    let (channels, planes) = (channels.0, planes.0);
    let element = parse::<ElementType>(element)?;
    let _claim = claim_pair(extent(&src), extent(&dst))?;
    let src = read(&src, "source")?;
    let src = contiguous(src.as_slice(), "source")?;
    let mut dst = write(&dst, "destination")?;
    let dst = contiguous(dst.as_slice_mut(), "destination")?;
    py.detach(|| layout::planar_to_packed(src, planes, dst, element, channels, pad)).or_value_error()
}

/// For the benchmarks: seconds per copy of `nbytes` split over `threads`
/// threads, each copying its part `repeat` times (the machine's limit).
#[pyfunction]
fn memcpy_seconds(py: Python<'_>, nbytes: Count, threads: Count, repeat: Count) -> PyResult<f64> {
    let (nbytes, threads, repeat) = (nbytes.0, threads.0, repeat.0);
    // It allocates twice `nbytes`: a cap well below what could exhaust memory
    // (an allocation failure aborts the process).
    if nbytes > 1 << 28 || !(1..=256).contains(&threads) || !(1..=10_000).contains(&repeat) {
        return Err(invalid(format!(
            "memcpy_seconds takes up to 256 MiB, 1 to 256 threads and 1 to 10000 repeats, got {nbytes}, {threads}, {repeat}"
        )));
    }
    Ok(py.detach(|| layout::memcpy_seconds(nbytes, threads, repeat)))
}

/// Sources from this size on are scanned with the GIL released.
const TOPK_DETACH_BYTES: usize = 256 * 1024;

/// Top-k of each row of `row_len` elements: (indices as int64, values as f32).
#[allow(clippy::type_complexity)]
#[pyfunction]
fn topk<'py>(
    py: Python<'py>,
    src: Bound<'py, PyArrayDyn<u8>>,
    element: &str,
    row_len: Count,
    k: Count,
) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<f32>>)> {
    let (row_len, k) = (row_len.0, k.0);
    let element = parse::<ElementType>(element)?;
    let _claim = alias::claim(&[(extent(&src), "source")], &[])?;
    let guard = read(&src, "source")?;
    let bytes = contiguous(guard.as_slice(), "source")?;
    // A classifier's scores (thousands of values) take about a microsecond: less than giving the GIL up and
    // waiting to take it back among busy threads. Large outputs (a detector's) are scanned without it.
    let (indices, values) = if bytes.len() >= TOPK_DETACH_BYTES {
        py.detach(|| layout::topk(bytes, element, row_len, k))
    } else {
        layout::topk(bytes, element, row_len, k)
    }
    .or_value_error()?;
    let indices: Vec<i64> = indices.into_iter().map(|i| i as i64).collect();
    Ok((PyArray1::from_vec(py, indices), PyArray1::from_vec(py, values)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add_function(wrap_pyfunction!(describe_conversion, m)?)?;
    m.add_function(wrap_pyfunction!(describe_resize, m)?)?;
    m.add_function(wrap_pyfunction!(simd_levels, m)?)?;
    m.add_function(wrap_pyfunction!(format_names, m)?)?;
    m.add_function(wrap_pyfunction!(format_name, m)?)?;
    m.add_function(wrap_pyfunction!(frame_nbytes, m)?)?;
    m.add_function(wrap_pyfunction!(select_format, m)?)?;
    m.add_function(wrap_pyfunction!(quantize, m)?)?;
    m.add_function(wrap_pyfunction!(dequantize, m)?)?;
    m.add_function(wrap_pyfunction!(to_float32, m)?)?;
    m.add_function(wrap_pyfunction!(from_float32, m)?)?;
    m.add_function(wrap_pyfunction!(packed_to_planar, m)?)?;
    m.add_function(wrap_pyfunction!(planar_to_packed, m)?)?;
    m.add_function(wrap_pyfunction!(topk, m)?)?;
    // Helpers for benches/, not API: `npu_zc._core._bench`, an attribute left
    // out of `_core.__all__` and of the stubs.
    let bench = PyModule::new(m.py(), "_bench")?;
    bench.add_function(wrap_pyfunction!(memcpy_seconds, &bench)?)?;
    m.setattr("_bench", bench)?;
    Ok(())
}
