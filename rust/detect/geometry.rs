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

    /// Rotated boxes (cx, cy, w, h) in place, as Ultralytics'
    /// `scale_boxes(..., xywh=True)` maps them: centres mapped, sizes divided by
    /// the scale of their axis, not clipped (the angle stays as the model
    /// wrote it). Returns each box's axis-aligned bounds (x1, y1, x2, y2 of its
    /// corners), clipped to the frame.
    pub fn rotated(&self, boxes: &mut [[f32; 4]], angles: &[f32]) -> Vec<[f32; 4]> {
        let unclipped = Geometry { frame: None, ..*self };
        let clip = |v: f32, axis: usize| match self.frame {
            Some(size) => v.clamp(0.0, size[axis] as f32),
            None => v,
        };
        let mut bounds = Vec::with_capacity(boxes.len());
        for (b, t) in boxes.iter_mut().zip(angles) {
            *b = [
                unclipped.map(b[0], 0),
                unclipped.map(b[1], 1),
                (b[2] as f64 / self.scale[0]) as f32,
                (b[3] as f64 / self.scale[1]) as f32,
            ];
            let (sin, cos) = t.sin_cos();
            let (w, h) = (b[2] / 2.0, b[3] / 2.0);
            let (dx, dy) = ((w * cos).abs() + (h * sin).abs(), (w * sin).abs() + (h * cos).abs());
            bounds.push([clip(b[0] - dx, 0), clip(b[1] - dy, 1), clip(b[0] + dx, 0), clip(b[1] + dy, 1)]);
        }
        bounds
    }
}
