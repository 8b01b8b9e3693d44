//! Model-input pixels back to frame pixels: per axis `src = (dst - offset) / scale`
//! (the letterbox [`crate::layout::Transform`]), then clipped to the frame as
//! Ultralytics' `scale_boxes` / `scale_coords` clip.

/// The map from model input to frame, and the frame's size to clip to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Geometry {
    pub scale: [f64; 2],
    pub offset: [f64; 2],
    /// Frame width and height; None: no clipping.
    pub frame: Option<[f64; 2]>,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry { scale: [1.0, 1.0], offset: [0.0, 0.0], frame: None }
    }
}

impl Geometry {
    #[inline]
    fn map(&self, v: f32, axis: usize) -> f32 {
        let s = (v as f64 - self.offset[axis]) / self.scale[axis];
        match self.frame {
            Some(size) => s.clamp(0.0, size[axis]) as f32,
            None => s as f32,
        }
    }

    /// x1, y1, x2, y2 boxes in place.
    pub fn boxes(&self, boxes: &mut [[f32; 4]]) {
        for b in boxes {
            *b = [self.map(b[0], 0), self.map(b[1], 1), self.map(b[2], 0), self.map(b[3], 1)];
        }
    }

    /// Points of `dim` values (x, y, ...), x and y in place (clipped, as
    /// Ultralytics' `scale_coords` clips keypoints); the rest untouched.
    pub fn points(&self, values: &mut [f32], dim: usize) {
        if dim < 2 {
            return;
        }
        for p in values.chunks_exact_mut(dim) {
            p[0] = self.map(p[0], 0);
            p[1] = self.map(p[1], 1);
        }
    }

    /// Rotated boxes (cx, cy, w, h) and their angles: Ultralytics'
    /// `regularize_rboxes` (angle in [0, pi/2), w and h swapped where the angle
    /// was in [pi/2, pi) modulo pi), centres mapped without clipping, sizes
    /// divided by the mean scale. Returns each box's axis-aligned bounds
    /// (x1, y1, x2, y2 of its corners), clipped to the frame.
    pub fn rotated(&self, boxes: &mut [[f32; 4]], angles: &mut [f32]) -> Vec<[f32; 4]> {
        use std::f32::consts::{FRAC_PI_2, PI};
        let size_scale = (self.scale[0] + self.scale[1]) / 2.0;
        let unclipped = Geometry { frame: None, ..*self };
        let mut bounds = Vec::with_capacity(boxes.len());
        for (b, t) in boxes.iter_mut().zip(angles.iter_mut()) {
            let swap = t.rem_euclid(PI) >= FRAC_PI_2;
            let (w, h) = if swap { (b[3], b[2]) } else { (b[2], b[3]) };
            *t = t.rem_euclid(FRAC_PI_2);
            *b = [
                unclipped.map(b[0], 0),
                unclipped.map(b[1], 1),
                (w as f64 / size_scale) as f32,
                (h as f64 / size_scale) as f32,
            ];
            let (sin, cos) = t.sin_cos();
            let (dx, dy) = (
                (b[2] / 2.0 * cos).abs() + (b[3] / 2.0 * sin).abs(),
                (b[2] / 2.0 * sin).abs() + (b[3] / 2.0 * cos).abs(),
            );
            let clip = |v: f32, axis: usize| match self.frame {
                Some(size) => v.clamp(0.0, size[axis] as f32),
                None => v,
            };
            bounds.push([clip(b[0] - dx, 0), clip(b[1] - dy, 1), clip(b[0] + dx, 0), clip(b[1] + dy, 1)]);
        }
        bounds
    }
}
