//! The point of a box that decides which side of a line, or which zone, it is in (supervision's `Position`).

use super::tracks::{AnalyticsError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Center,
    CenterLeft,
    CenterRight,
    TopCenter,
    TopLeft,
    TopRight,
    BottomLeft,
    BottomCenter,
    BottomRight,
}

pub const ANCHOR_NAMES: [(&str, Anchor); 9] = [
    ("center", Anchor::Center),
    ("center_left", Anchor::CenterLeft),
    ("center_right", Anchor::CenterRight),
    ("top_center", Anchor::TopCenter),
    ("top_left", Anchor::TopLeft),
    ("top_right", Anchor::TopRight),
    ("bottom_left", Anchor::BottomLeft),
    ("bottom_center", Anchor::BottomCenter),
    ("bottom_right", Anchor::BottomRight),
];

/// A line's default anchors: the four corners (a box crosses when all of it has).
pub const LINE_ANCHORS: [Anchor; 4] = [Anchor::TopLeft, Anchor::TopRight, Anchor::BottomLeft, Anchor::BottomRight];

/// A zone's default anchor: where an object stands.
pub const ZONE_ANCHOR: Anchor = Anchor::BottomCenter;

impl Anchor {
    /// By name, in any case (`"bottom_center"`, `"BOTTOM_CENTER"`).
    pub fn from_name(name: &str) -> Result<Self> {
        let lower = name.to_ascii_lowercase();
        ANCHOR_NAMES.iter().find(|(n, _)| *n == lower).map(|(_, a)| *a).ok_or_else(|| {
            let names: Vec<&str> = ANCHOR_NAMES.iter().map(|(n, _)| *n).collect();
            AnalyticsError(format!("anchor {name:?} is not one of {}", names.join(", ")))
        })
    }

    pub fn name(self) -> &'static str {
        ANCHOR_NAMES.iter().find(|(_, a)| *a == self).map(|(n, _)| *n).unwrap_or("center")
    }

    /// The point of box `[x1, y1, x2, y2]`. Midpoints are taken in f32, the boxes' own type, as
    /// supervision takes them in the array's dtype (the same value to the last bit).
    pub fn point(self, b: &[f32; 4]) -> [f64; 2] {
        let [x1, y1, x2, y2] = *b;
        let (mx, my) = ((x1 + x2) / 2.0, (y1 + y2) / 2.0);
        let (x, y) = match self {
            Anchor::Center => (mx, my),
            Anchor::CenterLeft => (x1, my),
            Anchor::CenterRight => (x2, my),
            Anchor::TopCenter => (mx, y1),
            Anchor::TopLeft => (x1, y1),
            Anchor::TopRight => (x2, y1),
            Anchor::BottomLeft => (x1, y2),
            Anchor::BottomCenter => (mx, y2),
            Anchor::BottomRight => (x2, y2),
        };
        [f64::from(x), f64::from(y)]
    }
}
