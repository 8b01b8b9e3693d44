//! What a YOLO output holds: the family (how boxes and scores are laid out)
//! and the task (what follows the scores).

use super::error::{bail, bail_layout, Result};
use super::tensor::Matrix;

/// How boxes and scores are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `[1, 4+nc+extra, N]`, channel-major: box centre and size, then nc
    /// class scores (v5u, v8, v9, 11, 12, and v10/26 in their default export).
    AnchorFree,
    /// `[1, K, 6+extra]`: x1, y1, x2, y2, score, class (NMS done by the model).
    End2End,
    /// `[1, N, 5+nc+extra]`: box centre and size, objectness, nc class scores.
    Yolov5,
}

/// What follows the class scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Detect,
    /// `nm` mask coefficients per box, with prototypes `[1, nm, H/4, W/4]`.
    Segment {
        nm: usize,
    },
    /// `k` keypoints of `dim` values (x, y[, visibility]).
    Pose {
        k: usize,
        dim: usize,
    },
    /// One angle (radians); boxes stay centre and size (end-to-end too).
    Obb,
}

impl Task {
    /// Values per candidate after the scores (`usize::MAX` where the count
    /// does not fit a `usize`: no output has that many, so the shape check refuses it).
    pub fn extra(self) -> usize {
        match self {
            Task::Detect => 0,
            Task::Segment { nm } => nm,
            Task::Pose { k, dim } => k.saturating_mul(dim),
            Task::Obb => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Task::Detect => "detect",
            Task::Segment { .. } => "segment",
            Task::Pose { .. } => "pose",
            Task::Obb => "obb",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub family: Family,
    pub task: Task,
    /// Number of classes (for end-to-end outputs: the class ids' bound, used for checks only).
    pub nc: usize,
}

impl Layout {
    /// Values per candidate: the length of the channel axis (None where the
    /// count overflows a `usize`: a layout no output can have).
    pub fn checked_channels(&self) -> Option<usize> {
        let extra = match self.task {
            Task::Pose { k, dim } => k.checked_mul(dim)?,
            task => task.extra(),
        };
        match self.family {
            Family::AnchorFree => 4usize.checked_add(self.nc)?.checked_add(extra),
            Family::End2End => 6usize.checked_add(extra),
            Family::Yolov5 => 5usize.checked_add(self.nc)?.checked_add(extra),
        }
    }

    /// Values per candidate: the length of the channel axis (`usize::MAX`
    /// where it overflows, which no output's shape matches).
    pub fn channels(&self) -> usize {
        self.checked_channels().unwrap_or(usize::MAX)
    }

    /// Refuses a layout whose channel count overflows (a hand-made `nc`, `nm`
    /// or keypoint shape near `usize::MAX`), before any output is read.
    pub fn check(&self) -> Result<()> {
        if self.checked_channels().is_none() {
            bail!(
                "a {} output of {} classes and {} values per candidate after the scores cannot exist: \
                 nc, nm and the keypoint shape are counts of channels",
                self.task.name(),
                self.nc,
                self.task.extra()
            );
        }
        Ok(())
    }

    /// The output as a matrix of candidates (rows) by channels (columns),
    /// checked against this layout.
    pub fn candidates<'a>(&self, output: Matrix<'a>) -> Result<Matrix<'a>> {
        let m = match self.family {
            Family::AnchorFree => output.transposed(),
            Family::End2End | Family::Yolov5 => output,
        };
        self.check()?;
        if m.cols != self.channels() {
            let (want, got) = match self.family {
                Family::AnchorFree => (format!("[1, {}, N]", self.channels()), [output.rows, output.cols]),
                _ => (format!("[1, N, {}]", self.channels()), [output.rows, output.cols]),
            };
            bail_layout!(
                "a {} {:?} output of {} classes has shape {want}, got [1, {}, {}]",
                self.task.name(),
                self.family,
                self.nc,
                got[0],
                got[1]
            );
        }
        if self.nc == 0 && self.family != Family::End2End {
            bail_layout!("a YOLO output needs at least one class");
        }
        Ok(m)
    }
}
