//! Counting over a stream's tracks, off the inference path: lines crossed ([`line`]), zones entered and
//! left with the time spent inside ([`zone`]), decided by an anchor point of each tracked box ([`anchor`]).
//!
//! The rules are supervision's (`LineZone`, `PolygonZone`), so that a count here is the count a
//! supervision user gets from the same tracks (tests/analytics checks it against supervision itself).

pub mod anchor;
pub mod line;
pub mod zone;

pub use anchor::Anchor;
pub use line::{ClassCounts, Crossing, Direction, LineCounter};
pub use zone::{Zone, ZoneEvent, ZoneEventKind};

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
fn counted(classes: &Option<Vec<i32>>, class: i32) -> bool {
    classes.as_ref().is_none_or(|c| c.contains(&class))
}

fn finite_point(p: [f64; 2], what: &str) -> Result<()> {
    if p.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(AnalyticsError(format!("{what} must be finite numbers, got {p:?}")))
    }
}

#[cfg(test)]
mod tests;
