//! Segmentation masks of the boxes kept, as Ultralytics makes them, in frame pixels.
//!
//! Ultralytics 8.4 (`ultralytics/utils/ops.py`): `process_mask(upsample=True)`
//! multiplies each box's coefficients with the prototypes `[nm, mh, mw]`,
//! upsamples bilinearly to the model input, keeps values > 0 and zeroes the
//! input pixels outside the box (`crop_mask`: columns x1 <= c < x2, rows
//! alike); the predictor then drops boxes whose mask is empty. `scale_masks`
//! cuts the letterbox padding off and resizes bilinearly to the frame (here:
//! kept > 0.5). Both resizes are torch's `F.interpolate(mode="bilinear",
//! align_corners=False)`.
//!
//! Only the pixels a box can reach are computed: the input pixels in the box,
//! the prototype pixels their bilinear taps read, and their reach in the frame.

use super::error::{area, bail, try_filled, try_vec, DetectError, ErrorKind, Result};
use super::tensor::Tensor;

/// Where the model input's image lies and the frame it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaskGeometry {
    /// Model input width and height.
    pub input: [usize; 2],
    /// The image's rectangle in the model input: left, top, right, bottom
    /// (Ultralytics' `scale_masks` crop).
    pub image: [usize; 4],
    /// Frame width and height.
    pub frame: [usize; 2],
}

/// A box's mask at the model input, as `process_mask` leaves it (before
/// `scale_masks`): the input pixels `x`, `y` of the box, 0/1 bytes row after
/// row. Ultralytics traces its polygons (`Masks.xy`) on this mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputMask {
    pub x: std::ops::Range<usize>,
    pub y: std::ops::Range<usize>,
    pub bits: Vec<u8>,
}

/// One output index's two bilinear taps, torch's `align_corners=False` rule.
#[derive(Debug, Clone, Copy)]
struct Tap {
    i0: usize,
    i1: usize,
    w0: f32,
    w1: f32,
}

fn taps(in_size: usize, out_size: usize, range: std::ops::Range<usize>) -> Result<Vec<Tap>> {
    let scale = in_size as f32 / out_size as f32;
    let mut taps = try_vec(range.len(), "a mask's resize")?;
    taps.extend(range.map(|d| {
        let src = (scale * (d as f32 + 0.5) - 0.5).max(0.0);
        let i0 = (src as usize).min(in_size - 1);
        let l1 = (src - i0 as f32).clamp(0.0, 1.0);
        let i1 = if i0 < in_size - 1 { i0 + 1 } else { i0 };
        Tap { i0, i1, w0: 1.0 - l1, w1: l1 }
    }));
    Ok(taps)
}

/// Output indices whose taps can read input indices `lo..hi` of `in_size`
/// (a margin of one input pixel each side).
fn reach(lo: usize, hi: usize, in_size: usize, out_size: usize) -> std::ops::Range<usize> {
    let scale = out_size as f64 / in_size as f64;
    let start = ((lo as f64 - 1.0) * scale).floor().max(0.0) as usize;
    let end = (((hi as f64 + 1.0) * scale).ceil() as usize).min(out_size);
    start..end.max(start)
}

/// A region of a plane: rows `y`, columns `x`, values row after row.
struct Patch {
    x: std::ops::Range<usize>,
    y: std::ops::Range<usize>,
    values: Vec<f32>,
}

impl Patch {
    #[inline]
    fn at(&self, x: usize, y: usize) -> f32 {
        if self.x.contains(&x) && self.y.contains(&y) {
            self.values[(y - self.y.start) * self.x.len() + (x - self.x.start)]
        } else {
            0.0
        }
    }

    /// Bilinear resize of the plane this patch lies in (`in_size` -> `out_size`,
    /// (w, h)), over the output pixels the patch reaches, each kept as
    /// `keep(value)` 1.0 or 0.0.
    /// Each value is `keep(value)` as 0 or 1; the memory is asked for first
    /// (a frame far larger than memory is an error, not an abort).
    fn resize(&self, in_size: [usize; 2], out_size: [usize; 2], keep: impl Fn(f32) -> bool) -> Result<MaskPatch> {
        let x = reach(self.x.start, self.x.end, in_size[0], out_size[0]);
        let y = reach(self.y.start, self.y.end, in_size[1], out_size[1]);
        let mut values = try_vec(area(x.len(), y.len(), "a mask's reach in the frame")?, "a mask in the frame")?;
        let (tx, ty) = (taps(in_size[0], out_size[0], x.clone())?, taps(in_size[1], out_size[1], y.clone())?);
        for t in &ty {
            for s in &tx {
                let top = s.w0 * self.at(s.i0, t.i0) + s.w1 * self.at(s.i1, t.i0);
                let bottom = s.w0 * self.at(s.i0, t.i1) + s.w1 * self.at(s.i1, t.i1);
                let v = t.w0 * top + t.w1 * bottom;
                values.push(keep(v) as u8);
            }
        }
        Ok(MaskPatch { x, y, values })
    }
}

/// One box's mask in the frame: pixels `x` by `y` (0 or 1, row after row);
/// every other pixel of the frame is 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskPatch {
    pub x: std::ops::Range<usize>,
    pub y: std::ops::Range<usize>,
    pub values: Vec<u8>,
}

impl MaskPatch {
    /// Writes the patch into a frame-sized plane of `width` columns (whose
    /// other pixels are left as they are: zero in a fresh plane).
    pub fn paint(&self, plane: &mut [u8], width: usize) {
        let w = self.x.len();
        if w == 0 {
            return;
        }
        for (row, y) in self.values.chunks_exact(w).zip(self.y.clone()) {
            plane[y * width + self.x.start..y * width + self.x.end].copy_from_slice(row);
        }
    }
}

/// Masks of `boxes` (x1, y1, x2, y2 in model-input pixels) from their
/// coefficients (`nm` per box) and `protos` `[nm, mh, mw]` (batch dropped):
/// per box, its patch of the frame and its mask at the model input (what
/// Ultralytics traces polygons on), or None where that mask has no pixel
/// (Ultralytics drops those boxes). Only the pixels a box reaches are
/// computed; the rest of each mask is zero.
pub fn masks(
    protos: &Tensor<'_>,
    coeffs: &[f32],
    boxes: &[[f32; 4]],
    geometry: &MaskGeometry,
) -> Result<Vec<Option<(MaskPatch, InputMask)>>> {
    let p = protos.squeeze_to(3)?;
    let (nm, mh, mw) = (p.shape()[0], p.shape()[1], p.shape()[2]);
    let [iw, ih] = geometry.input;
    let [fw, fh] = geometry.frame;
    let [left, top, right, bottom] = geometry.image;
    if coeffs.len() != boxes.len() * nm {
        bail!("{} boxes need {} mask coefficients each, got {} in all", boxes.len(), nm, coeffs.len());
    }
    if nm == 0 || mh == 0 || mw == 0 || iw == 0 || ih == 0 || fw == 0 || fh == 0 {
        bail!("masks need non-empty prototypes, input and frame, got {nm} prototypes of {mw}x{mh}, input {iw}x{ih}, frame {fw}x{fh}");
    }
    // The masks' planes (one byte per frame pixel per box, which bounds every
    // patch written here) must fit in memory: refused before anything is
    // allocated, rather than written until the machine runs out.
    area(iw, ih, "the model input")?;
    let planes = area(area(fw, fh, "the frame")?, boxes.len(), "the masks (detections x frame pixels)")?;
    if planes > physical_memory() {
        return Err(DetectError::new(
            ErrorKind::Memory,
            format!(
                "the masks of {} detections in a {fw}x{fh} frame need {planes} bytes, more than this machine's memory",
                boxes.len()
            ),
        ));
    }
    if left >= right || top >= bottom || right > iw || bottom > ih {
        bail!(
            "the image rectangle {:?} (left, top, right, bottom) does not lie in the {iw}x{ih} input",
            geometry.image
        );
    }
    // The prototypes as f32 planes: in place when the model wrote packed f32,
    // else read once (they may be f16, strided...).
    let converted;
    let planes: &[f32] = match p.packed_f32() {
        Some(planes) => planes,
        None => {
            let len = if boxes.is_empty() { 0 } else { area(nm, area(mh, mw, "the prototypes")?, "the prototypes")? };
            let mut all = try_filled(0f32, len, "the prototypes as f32")?;
            for (k, plane) in all.chunks_exact_mut((mh * mw).max(1)).enumerate() {
                for (y, row) in plane.chunks_exact_mut(mw).enumerate() {
                    for (x, v) in row.iter_mut().enumerate() {
                        *v = p.get(&[k, y, x]);
                    }
                }
            }
            converted = all;
            &converted
        }
    };
    let identity = geometry.image == [0, 0, iw, ih] && geometry.frame == geometry.input;
    let mut found = Vec::with_capacity(boxes.len());
    for (b, c) in boxes.iter().zip(coeffs.chunks_exact(nm.max(1))) {
        // crop_mask keeps columns c with x1 <= c < x2 (rows alike).
        let first = |v: f32, n: usize| (v.max(0.0).ceil() as usize).min(n);
        let (bx, by) = (first(b[0], iw)..first(b[2], iw), first(b[1], ih)..first(b[3], ih));
        if bx.is_empty() || by.is_empty() || !b.iter().all(|v| v.is_finite()) {
            found.push(None);
            continue;
        }
        let (tx, ty) = (taps(mw, iw, bx.clone())?, taps(mh, ih, by.clone())?);
        let span = |t: &[Tap]| t[0].i0..t[t.len() - 1].i1 + 1;
        let (px, py) = (span(&tx), span(&ty));
        // Coefficients times prototypes, plane by plane (rows of contiguous values).
        let values = try_filled(0f32, area(px.len(), py.len(), "a box's prototypes")?, "a box's prototypes")?;
        let mut proto = Patch { x: px.clone(), y: py.clone(), values };
        for (&w, plane) in c.iter().zip(planes.chunks_exact(mh * mw)) {
            for (y, acc) in py.clone().zip(proto.values.chunks_exact_mut(px.len())) {
                for (a, &v) in acc.iter_mut().zip(&plane[y * mw + px.start..y * mw + px.end]) {
                    *a += w * v;
                }
            }
        }
        // process_mask: upsample to the input, > 0, inside the box.
        // Separable: each prototype row of the patch interpolated along x once
        // (the taps lie in the patch: it spans them).
        let pw = px.len();
        let mut rows = try_filled(0f32, area(py.len(), bx.len(), "a box's mask rows")?, "a box's mask rows")?;
        for (row, src) in rows.chunks_exact_mut(bx.len()).zip(proto.values.chunks_exact(pw)) {
            for (r, s) in row.iter_mut().zip(&tx) {
                *r = s.w0 * src[s.i0 - px.start] + s.w1 * src[s.i1 - px.start];
            }
        }
        let mut on = try_filled(0u8, area(bx.len(), by.len(), "a box's mask")?, "a box's mask at the input")?;
        for (out, t) in on.chunks_exact_mut(bx.len()).zip(&ty) {
            let upper = &rows[(t.i0 - py.start) * bx.len()..][..bx.len()];
            let lower = &rows[(t.i1 - py.start) * bx.len()..][..bx.len()];
            for ((o, u), l) in out.iter_mut().zip(upper).zip(lower) {
                *o = (t.w0 * u + t.w1 * l > 0.0) as u8;
            }
        }
        let any = on.contains(&1);
        if !any {
            found.push(None);
            continue;
        }
        let at_input = InputMask { x: bx.clone(), y: by.clone(), bits: on };
        if identity {
            // Masks at the model input: no second resize.
            let patch = MaskPatch { x: bx, y: by, values: at_input.bits.clone() };
            found.push(Some((patch, at_input)));
            continue;
        }
        // scale_masks: the image's rectangle of the input, resized to the frame.
        let mut values = try_vec(at_input.bits.len(), "a box's mask at the input")?;
        values.extend(at_input.bits.iter().map(|&v| v as f32));
        let input = Patch { x: bx.clone(), y: by.clone(), values };
        let (cx, cy) =
            (input.x.start.max(left)..input.x.end.min(right), input.y.start.max(top)..input.y.end.min(bottom));
        if cx.is_empty() || cy.is_empty() {
            found.push(Some((MaskPatch { x: 0..0, y: 0..0, values: Vec::new() }, at_input)));
            continue;
        }
        let values = try_vec(cx.len() * cy.len(), "a box's mask in the image")?;
        let mut cropped = Patch { x: cx.start - left..cx.end - left, y: cy.start - top..cy.end - top, values };
        for y in cy.clone() {
            for x in cx.clone() {
                cropped.values.push(input.at(x, y));
            }
        }
        let patch = cropped.resize([right - left, bottom - top], [fw, fh], |v| v > 0.5)?;
        found.push(Some((patch, at_input)));
    }
    Ok(found)
}

/// The machine's physical memory in bytes (`usize::MAX` where it cannot be read).
fn physical_memory() -> usize {
    #[cfg(target_os = "linux")]
    {
        let info = rustix::system::sysinfo();
        (info.totalram as u128 * info.mem_unit.max(1) as u128).try_into().unwrap_or(usize::MAX)
    }
    #[cfg(not(target_os = "linux"))]
    {
        usize::MAX
    }
}
