//! A tracked box, corner or rotated, and the overlap Ultralytics' matching uses for it.

use crate::detect::nms::probiou;

/// A box in pixels: corners (x1, y1, x2, y2), or a rotated box (centre x, centre y,
/// width, height, angle in radians).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bbox {
    Xyxy([f32; 4]),
    Xywhr([f32; 5]),
}

impl Bbox {
    pub(super) fn is_usable(&self) -> bool {
        // Ultralytics drops boxes without area (their aspect ratio would be infinite).
        match self {
            Bbox::Xyxy(b) => b.iter().all(|v| v.is_finite()) && b[2] > b[0] && b[3] > b[1],
            Bbox::Xywhr(b) => b.iter().all(|v| v.is_finite()) && b[2] > 0.0 && b[3] > 0.0,
        }
    }

    /// The axis-aligned corners, the angle left out (for a tracker fed both kinds).
    pub(super) fn corners(&self) -> [f32; 4] {
        match *self {
            Bbox::Xyxy(b) => b,
            Bbox::Xywhr([x, y, w, h, _]) => [x - w / 2.0, y - h / 2.0, x + w / 2.0, y + h / 2.0],
        }
    }

    /// Ultralytics' overlap of two boxes: probiou when both are rotated, IoU otherwise.
    pub(super) fn overlap(&self, other: &Bbox) -> f32 {
        match (self, other) {
            (Bbox::Xywhr(p), Bbox::Xywhr(q)) => probiou(p, q),
            _ => iou(&self.corners(), &other.corners()),
        }
    }
}

/// IoU of corner boxes in f32 with Ultralytics' epsilon (`bbox_ioa(..., iou=True)`).
pub(super) fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = w * h;
    let area_b = (b[2] - b[0]) * (b[3] - b[1]);
    let area_a = (a[2] - a[0]) * (a[3] - a[1]);
    inter / (area_b + area_a - inter + 1e-7)
}
