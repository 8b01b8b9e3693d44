//! What every counter reads: one frame's tracks, checked, and the one error shape.

/// A line or zone that cannot be built, or a frame whose arrays disagree: one sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalyticsError(pub String);

impl std::fmt::Display for AnalyticsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AnalyticsError {}

pub type Result<T> = std::result::Result<T, AnalyticsError>;

/// One frame's tracked objects, as parallel slices (boxes `[x1, y1, x2, y2]` in frame pixels).
#[derive(Debug, Clone, Copy)]
pub struct Tracks<'a> {
    pub boxes: &'a [[f32; 4]],
    pub ids: &'a [i64],
    pub classes: &'a [i32],
}

impl<'a> Tracks<'a> {
    /// The slices, checked to be of one length.
    pub fn new(boxes: &'a [[f32; 4]], ids: &'a [i64], classes: &'a [i32]) -> Result<Self> {
        if ids.len() != boxes.len() || classes.len() != boxes.len() {
            return Err(AnalyticsError(format!(
                "a frame's tracks need as many ids and classes as boxes: got {} boxes, {} track ids, {} class ids",
                boxes.len(),
                ids.len(),
                classes.len()
            )));
        }
        Ok(Self { boxes, ids, classes })
    }

    pub fn len(&self) -> usize {
        self.boxes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.boxes.is_empty()
    }
}

/// Which classes count: all (`None`) or those listed.
pub(super) fn counted(classes: &Option<Vec<i32>>, class: i32) -> bool {
    classes.as_ref().is_none_or(|c| c.contains(&class))
}

pub(super) fn finite_point(p: [f64; 2], what: &str) -> Result<()> {
    if p.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(AnalyticsError(format!("{what} must be finite numbers, got {p:?}")))
    }
}
