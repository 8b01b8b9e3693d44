//! Decode: threshold, best class, sort, NMS, read in place from the output.
//!
//! Ultralytics' rules (`ultralytics/utils/nms.py::non_max_suppression`):
//! a candidate's score is its best class score (the first class on ties, as
//! torch's `max`), kept when strictly above `conf`; `classes` filters after the
//! best class is chosen; candidates are sorted by score, highest first, in a
//! stable sort (ties keep the model's anchor order, as torch's CPU sort does),
//! the first `max_nms` go into NMS and the first `max_det` kept come out.
//! End-to-end outputs are only thresholded, in the model's order.
//!
//! NaN scores are ignored: a NaN class score never wins a candidate's best
//! class, and a NaN objectness or end-to-end score is never above `conf`.

use super::error::{bail, Result};
use super::layout::{Family, Layout, Task};
use super::nms::{nms, nms_rotated};
use super::scan::{scan, Hit as Candidate};
use super::tensor::Matrix;

/// The postprocess settings (Ultralytics' predict defaults in `Default`).
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub conf: f32,
    pub iou: f32,
    /// Keep only these class ids (None: all).
    pub classes: Option<Vec<u32>>,
    pub agnostic: bool,
    pub max_det: usize,
    pub max_nms: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params { conf: 0.25, iou: 0.7, classes: None, agnostic: false, max_det: 300, max_nms: 30000 }
    }
}

impl Params {
    pub fn check(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.conf) {
            bail!("conf must lie in 0..1, got {}", self.conf);
        }
        if !(0.0..=1.0).contains(&self.iou) {
            bail!("iou must lie in 0..1, got {}", self.iou);
        }
        Ok(())
    }

    fn wants(&self, class: u32) -> bool {
        self.classes.as_ref().is_none_or(|c| c.contains(&class))
    }
}

/// The detections kept, in order, in model-input pixels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decoded {
    /// x1, y1, x2, y2 (obb: centre x, centre y, width, height).
    pub boxes: Vec<[f32; 4]>,
    pub scores: Vec<f32>,
    pub classes: Vec<u32>,
    /// The candidate (anchor or row) each detection came from.
    pub anchors: Vec<usize>,
    /// Obb only: the angle of each box, radians.
    pub angles: Vec<f32>,
    /// `extra` values per detection after the scores (mask coefficients,
    /// keypoints), row after row; empty for detect and obb.
    pub extra: Vec<f32>,
}

impl Decoded {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// A detection's score, class and anchor (its box and values apart).
    fn push(&mut self, c: &Candidate) {
        self.scores.push(c.score);
        self.classes.push(c.class);
        self.anchors.push(c.anchor);
    }
}

/// Strictly above the threshold (NaN is not).
#[inline]
fn above(v: f32, conf: f32) -> bool {
    v > conf
}

/// Decodes one YOLO output (`output`: as the model wrote it, batch axis dropped).
pub fn decode(output: Matrix<'_>, layout: &Layout, params: &Params) -> Result<Decoded> {
    params.check()?;
    let m = layout.candidates(output)?;
    let mut found = match layout.family {
        Family::AnchorFree => {
            let mut hits = Vec::new();
            scan(output, 4, layout.nc, params.conf, &mut hits);
            hits.retain(|h| params.wants(h.class));
            hits
        }
        Family::Yolov5 => yolov5_candidates(m, layout.nc, params),
        Family::End2End => return Ok(end_to_end(m, layout, params)),
    };
    sort_by_score(&mut found);
    found.truncate(params.max_nms);
    let classes: Vec<u32> = found.iter().map(|c| c.class).collect();
    let mut out = Decoded::default();
    if layout.task == Task::Obb {
        let boxes: Vec<[f32; 5]> = found.iter().map(|c| rotated_box(m, c.anchor, layout)).collect();
        for k in nms_rotated(&boxes, &classes, params.iou, params.agnostic, params.max_det) {
            let r = boxes[k];
            out.boxes.push([r[0], r[1], r[2], r[3]]);
            out.angles.push(r[4]);
            out.push(&found[k]);
        }
    } else {
        let boxes: Vec<[f32; 4]> = found.iter().map(|c| xyxy(m, c.anchor)).collect();
        for k in nms(&boxes, &classes, params.iou, params.agnostic, params.max_det) {
            out.boxes.push(boxes[k]);
            out.push(&found[k]);
        }
        out.extra = gather_extra(m, layout, &out.anchors);
    }
    Ok(out)
}

/// The values after the scores (mask coefficients, keypoints) of the
/// candidates `anchors`, detection after detection. Read channel by channel,
/// each in anchor order: a channel-major output's row is then read forwards,
/// which its caches and TLB follow, rather than 50 rows at once.
fn gather_extra(m: Matrix<'_>, layout: &Layout, anchors: &[usize]) -> Vec<f32> {
    let (extra, channels) = (layout.task.extra(), layout.channels());
    if !matches!(layout.task, Task::Segment { .. } | Task::Pose { .. }) || extra == 0 {
        return Vec::new();
    }
    let mut order: Vec<(usize, usize)> = anchors.iter().copied().zip(0..).collect();
    order.sort_unstable();
    let mut values = vec![0f32; anchors.len() * extra];
    if layout.family == Family::AnchorFree {
        // Packed f32 rows read in place: plain loads, many in flight.
        if let Some((rows, stride)) = m.transposed().packed::<f32>(channels - extra, 0, extra, m.rows) {
            for (e, row) in (0..extra).map(|e| (e, &rows[e * stride..])) {
                for &(anchor, i) in &order {
                    values[i * extra + e] = row[anchor];
                }
            }
            return values;
        }
    }
    for (e, k) in (channels - extra..channels).enumerate() {
        for &(anchor, i) in &order {
            values[i * extra + e] = m.get(anchor, k);
        }
    }
    values
}

/// Highest score first, equal scores in anchor order (a stable sort, as
/// torchvision's): unique keys, so the faster unstable sort gives that order.
pub(super) fn sort_by_score(found: &mut Vec<Candidate>) {
    // Scores above conf >= 0: positive, and their bits order them as floats do.
    let mut keys: Vec<u64> =
        found.iter().enumerate().map(|(i, c)| (!c.score.to_bits() as u64) << 32 | i as u64).collect();
    keys.sort_unstable();
    *found = keys.iter().map(|&k| found[(k & u32::MAX as u64) as usize]).collect();
}

/// Ultralytics' `xywh2xyxy` in f32.
fn xyxy(m: Matrix<'_>, anchor: usize) -> [f32; 4] {
    let (x, y) = (m.get(anchor, 0), m.get(anchor, 1));
    let (w, h) = (m.get(anchor, 2) / 2.0, m.get(anchor, 3) / 2.0);
    [x - w, y - h, x + w, y + h]
}

fn rotated_box(m: Matrix<'_>, anchor: usize, layout: &Layout) -> [f32; 5] {
    let angle = m.get(anchor, layout.channels() - 1);
    [m.get(anchor, 0), m.get(anchor, 1), m.get(anchor, 2), m.get(anchor, 3), angle]
}

/// YOLOv5 (its repository's `non_max_suppression`): objectness above `conf`,
/// then class scores times objectness (f32), best class above `conf`.
fn yolov5_candidates(m: Matrix<'_>, nc: usize, params: &Params) -> Vec<Candidate> {
    let mut found = Vec::new();
    for anchor in 0..m.rows {
        let obj = m.get(anchor, 4);
        if !above(obj, params.conf) {
            continue;
        }
        let (mut score, mut class) = (f32::NEG_INFINITY, 0u32);
        for c in 0..nc {
            let v = m.get(anchor, 5 + c) * obj;
            if v > score {
                (score, class) = (v, c as u32);
            }
        }
        if score > params.conf && params.wants(class) {
            found.push(Candidate { anchor, score, class });
        }
    }
    found
}

/// End-to-end: rows with score above `conf` (and a wanted class), in the
/// model's order, at most `max_det`. The class is the row's value rounded; a
/// row whose class is not a number in 0..nc (when nc is known) is skipped.
fn end_to_end(m: Matrix<'_>, layout: &Layout, params: &Params) -> Decoded {
    let mut out = Decoded::default();
    for row in 0..m.rows {
        if out.len() >= params.max_det {
            break;
        }
        let score = m.get(row, 4);
        let class_value = m.get(row, 5);
        // A class id that is not a whole number in range is no detection.
        if !above(score, params.conf) || !(0.0..u32::MAX as f32).contains(&class_value) {
            continue;
        }
        let class = class_value.round() as u32;
        // An id at or above the class count names no class (79.6 of 80 classes
        // rounds to 80): that row is no detection either.
        if layout.nc > 0 && class as usize >= layout.nc || !params.wants(class) {
            continue;
        }
        if layout.task == Task::Obb {
            let r = rotated_box(m, row, layout);
            out.boxes.push([r[0], r[1], r[2], r[3]]);
            out.angles.push(r[4]);
        } else {
            out.boxes.push([m.get(row, 0), m.get(row, 1), m.get(row, 2), m.get(row, 3)]);
        }
        out.push(&Candidate { anchor: row, score, class });
        if matches!(layout.task, Task::Segment { .. } | Task::Pose { .. }) {
            out.extra.extend((6..layout.channels()).map(|k| m.get(row, k)));
        }
    }
    out
}
