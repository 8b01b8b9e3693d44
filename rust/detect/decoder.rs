//! One YOLO decode from output to frame: the settings checked once
//! ([`Decoder::new`]), then each frame's output (and a segmentation model's
//! prototypes) decoded, masked and mapped to the frame in one call
//! ([`Decoder::decode`]). The Python binding only reads arrays in and writes
//! arrays out.

use super::decode::{decode, Decoded, Params};
use super::error::{area, bail, DetectError, ErrorKind, Result};
use super::geometry::Geometry;
use super::layout::{Layout, Task};
use super::mask::{self, InputMask, MaskGeometry, MaskPatch};
use super::tensor::Tensor;

/// A decode's settings, checked: the layout, the postprocess, the map to the
/// frame and (for masks) the model input and the image's rectangle in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoder {
    layout: Layout,
    params: Params,
    geometry: Geometry,
    /// Model input (w, h) and the image's rectangle in it (left, top, right, bottom).
    input: Option<([usize; 2], [usize; 4])>,
}

/// One frame's detections, in frame pixels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    pub decoded: Decoded,
    /// Obb: each box as centre, size and angle (`decoded.boxes` then holds its bounds).
    pub xywhr: Option<Vec<[f32; 5]>>,
    /// Pose: the keypoints' values, and how many per detection.
    pub keypoints: Option<(Vec<f32>, usize)>,
    /// Segment: each detection's mask patch, and the frame's (w, h).
    pub masks: Option<(Vec<MaskPatch>, [usize; 2])>,
    /// Segment: each detection's mask at the model input.
    pub input_masks: Option<Vec<InputMask>>,
}

impl Decoder {
    /// Checks everything that does not depend on the output: the layout's
    /// channel count, thresholds, the transform (finite, a positive scale), the
    /// frame's size (finite, 0 or more) and the model input's rectangle.
    pub fn new(
        layout: Layout,
        params: Params,
        geometry: Geometry,
        input: Option<([usize; 2], [usize; 4])>,
    ) -> Result<Decoder> {
        layout.check()?;
        params.check()?;
        let [sx, sy] = geometry.scale;
        if !(sx > 0.0 && sy > 0.0 && sx.is_finite() && sy.is_finite()) {
            bail!("the transform's scale must be positive and finite, got ({sx}, {sy})");
        }
        if !geometry.offset.iter().all(|v| v.is_finite()) {
            bail!("the transform's offset must be finite, got {:?}", geometry.offset);
        }
        if let Some([w, h]) = geometry.frame {
            // The clip to [0, size] needs a size of 0 or more (NaN is none).
            if !(w >= 0.0 && h >= 0.0 && w.is_finite() && h.is_finite()) {
                bail!("frame_size (the frame's width and height) must be finite and 0 or more, got ({w}, {h})");
            }
            // Masks are arrays of frame pixels: each side must be a size an array can have.
            if matches!(layout.task, Task::Segment { .. }) && w.max(h).round() > (isize::MAX / 2) as f64 {
                bail!("frame_size ({w}, {h}) is too large for masks of the frame");
            }
        }
        if let Some(([iw, ih], [left, top, right, bottom])) = input {
            area(iw, ih, "the model input")?;
            if left >= right || top >= bottom || right > iw || bottom > ih {
                bail!(
                    "the image rectangle ({left}, {top}, {right}, {bottom}) (left, top, right, bottom) \
                     does not lie in the {iw}x{ih} model input"
                );
            }
        }
        Ok(Decoder { layout, params, geometry, input })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Decodes one frame: `output` as the model wrote it, `protos` the
    /// prototypes of a segmentation model.
    pub fn decode(&self, output: &Tensor<'_>, protos: Option<&Tensor<'_>>) -> Result<Output> {
        let mut d = decode(output.matrix()?, &self.layout, &self.params)?;
        let mut out = Output::default();
        if let Task::Segment { nm } = self.layout.task {
            let Some(protos) = protos else {
                bail!("a segmentation model needs its prototypes output [1, {nm}, H/4, W/4]");
            };
            let p = protos.squeeze_to(3).map_err(|e| DetectError::new(ErrorKind::Layout, e.message))?;
            if p.shape()[0] != nm {
                bail!("{nm} mask coefficients per box need {nm} prototypes, got shape {:?}", protos.shape());
            }
            let (mw, mh) = (area(p.shape()[2], 4, "the prototypes")?, area(p.shape()[1], 4, "the prototypes")?);
            let (input, image) = self.input.unwrap_or(([mw, mh], [0, 0, mw, mh]));
            let frame = match self.geometry.frame {
                // Checked finite and 0 or more; sizes beyond memory are refused by the masks' checks.
                Some([w, h]) => [w.round() as usize, h.round() as usize],
                None => input,
            };
            let g = MaskGeometry { input, image, frame };
            let found = mask::masks(&p, &d.extra, &d.boxes, &g)?;
            if found.contains(&None) {
                // Ultralytics keeps only the boxes whose mask has a pixel.
                let keep: Vec<bool> = found.iter().map(Option::is_some).collect();
                d = keep_where(d, &keep, nm);
            }
            let (patches, inputs): (Vec<MaskPatch>, Vec<InputMask>) = found.into_iter().flatten().unzip();
            out.masks = Some((patches, frame));
            out.input_masks = Some(inputs);
        }
        if self.layout.task == Task::Obb {
            let bounds = self.geometry.rotated(&mut d.boxes, &d.angles);
            out.xywhr = Some(d.boxes.iter().zip(&d.angles).map(|(b, &t)| [b[0], b[1], b[2], b[3], t]).collect());
            d.boxes = bounds;
        } else {
            self.geometry.boxes(&mut d.boxes);
        }
        if let Task::Pose { k, dim } = self.layout.task {
            let mut values = std::mem::take(&mut d.extra);
            self.geometry.points(&mut values, dim);
            out.keypoints = Some((values, k * dim));
        }
        out.decoded = d;
        Ok(out)
    }
}

/// The detections where `keep` is true (`extra` values per detection).
fn keep_where(d: Decoded, keep: &[bool], extra: usize) -> Decoded {
    let mut out = Decoded::default();
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
