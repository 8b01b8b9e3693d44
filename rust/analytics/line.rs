//! A counting line: a tracked box crosses when all its anchors have gone to the other side
//! (supervision's `LineZone`, rule for rule).
//!
//! * Each frame, a box whose anchors are all between the two perpendiculars through the line's ends
//!   ("in limits") and all on one side is on that side; a box straddling the line, or beyond its ends,
//!   tells nothing that frame.
//! * The first side a track is seen on is its reference. It crosses when it has been seen on the other side
//!   `minimum_crossing_threshold` times in a row (frames where it tells nothing are skipped): "in" when
//!   the new side is the left of start -> end as seen on the screen (y down; a line drawn left to right:
//!   moving up across it), "out" the other way.
//! * A track absent for `max(2, threshold + 1)` frames is forgotten: its next sighting is a new reference.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use super::anchor::{Anchor, LINE_ANCHORS};
use super::tracks::{counted, finite_point, AnalyticsError, Result, Tracks};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    In,
    Out,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

/// (class, count) pairs, by class.
pub type ClassCounts = Vec<(i32, u64)>;

/// One box that crossed this frame: its position in the frame's tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crossing {
    pub index: usize,
    pub track_id: i64,
    pub class: i32,
    pub direction: Direction,
}

#[derive(Debug, Clone)]
pub struct LineCounter {
    start: [f64; 2],
    end: [f64; 2],
    /// The perpendiculars through the ends, each as (origin, direction): they bound where a box counts.
    limits: [([f64; 2], [f64; 2]); 2],
    anchors: Vec<Anchor>,
    classes: Option<Vec<i32>>,
    threshold: usize,
    history_len: usize,
    history: HashMap<i64, VecDeque<bool>>,
    confirmed: HashMap<i64, bool>,
    absent: HashMap<i64, usize>,
    in_counts: BTreeMap<i32, u64>,
    out_counts: BTreeMap<i32, u64>,
}

/// The z of (vector) x (point - origin): supervision's `cross_product`, in the same order of operations.
fn cross(origin: [f64; 2], vector: [f64; 2], p: [f64; 2]) -> f64 {
    vector[0] * (p[1] - origin[1]) - vector[1] * (p[0] - origin[0])
}

impl LineCounter {
    /// `anchors` empty: the four corners. `minimum_crossing_threshold` at least 1.
    pub fn new(
        start: [f64; 2],
        end: [f64; 2],
        anchors: &[Anchor],
        minimum_crossing_threshold: usize,
        classes: Option<Vec<i32>>,
    ) -> Result<Self> {
        finite_point(start, "a line's start")?;
        finite_point(end, "a line's end")?;
        let (dx, dy) = (end[0] - start[0], end[1] - start[1]);
        let magnitude = (dx * dx + dy * dy).sqrt();
        if magnitude == 0.0 {
            return Err(AnalyticsError(format!(
                "a line needs two different points: start and end are both {start:?} (zero length)"
            )));
        }
        if minimum_crossing_threshold < 1 {
            return Err(AnalyticsError("minimum_crossing_threshold must be at least 1, got 0".into()));
        }
        let (ux, uy) = (dx / magnitude, dy / magnitude);
        let (px, py) = (-uy, ux);
        // As supervision builds them: a unit perpendicular from the start, the opposite one from the end.
        let limits = [
            (start, [start[0] + px - start[0], start[1] + py - start[1]]),
            (end, [end[0] - px - end[0], end[1] - py - end[1]]),
        ];
        Ok(Self {
            start,
            end,
            limits,
            anchors: if anchors.is_empty() { LINE_ANCHORS.to_vec() } else { anchors.to_vec() },
            classes,
            threshold: minimum_crossing_threshold,
            history_len: (minimum_crossing_threshold + 1).max(2),
            history: HashMap::new(),
            confirmed: HashMap::new(),
            absent: HashMap::new(),
            in_counts: BTreeMap::new(),
            out_counts: BTreeMap::new(),
        })
    }

    pub fn start(&self) -> [f64; 2] {
        self.start
    }

    pub fn end(&self) -> [f64; 2] {
        self.end
    }

    pub fn anchors(&self) -> &[Anchor] {
        &self.anchors
    }

    pub fn threshold(&self) -> usize {
        self.threshold
    }

    pub fn in_count(&self) -> u64 {
        self.in_counts.values().sum()
    }

    pub fn out_count(&self) -> u64 {
        self.out_counts.values().sum()
    }

    /// Per class: (class, crossings in), (class, crossings out).
    pub fn counts_per_class(&self) -> (ClassCounts, ClassCounts) {
        (
            self.in_counts.iter().map(|(k, v)| (*k, *v)).collect(),
            self.out_counts.iter().map(|(k, v)| (*k, *v)).collect(),
        )
    }

    /// Forget every track and count.
    pub fn reset(&mut self) {
        self.history.clear();
        self.confirmed.clear();
        self.absent.clear();
        self.in_counts.clear();
        self.out_counts.clear();
    }

    /// Which side the box is on: `Some(true)` left of start -> end as supervision names it (its "in" side),
    /// `Some(false)` the other, `None` when it straddles the line or lies beyond an end.
    fn side(&self, b: &[f32; 4]) -> Option<bool> {
        let (mut any_left, mut any_right) = (false, false);
        let vector = [self.end[0] - self.start[0], self.end[1] - self.start[1]];
        for anchor in &self.anchors {
            let p = anchor.point(b);
            let [(o1, v1), (o2, v2)] = self.limits;
            if (cross(o1, v1, p) > 0.0) != (cross(o2, v2, p) > 0.0) {
                return None; // beyond an end: supervision requires every anchor in limits
            }
            if cross(self.start, vector, p) < 0.0 {
                any_left = true;
            } else {
                any_right = true;
            }
        }
        if any_left && any_right {
            None
        } else {
            Some(any_left)
        }
    }

    /// One frame's tracks (every track of the frame, in any order); returns the boxes that crossed.
    /// Tracks with a negative id (unconfirmed) and classes not counted are left out.
    pub fn trigger(&mut self, tracks: Tracks<'_>) -> Vec<Crossing> {
        let present: Vec<usize> =
            (0..tracks.len()).filter(|&i| tracks.ids[i] >= 0 && counted(&self.classes, tracks.classes[i])).collect();
        self.evict(&present.iter().map(|&i| tracks.ids[i]).collect());
        let mut out = Vec::new();
        for i in present {
            let Some(state) = self.side(&tracks.boxes[i]) else { continue };
            let key = tracks.ids[i];
            let history = self.history.entry(key).or_default();
            if history.len() == self.history_len {
                history.pop_front();
            }
            history.push_back(state);
            let confirmed = *self.confirmed.entry(key).or_insert(state);
            if history.len() < self.history_len || state == confirmed {
                continue;
            }
            if history.iter().skip(1).any(|&s| s != state) {
                continue; // not held for the whole threshold yet
            }
            self.confirmed.insert(key, state);
            let class = tracks.classes[i];
            let direction = if state { Direction::In } else { Direction::Out };
            *match direction {
                Direction::In => self.in_counts.entry(class).or_insert(0),
                Direction::Out => self.out_counts.entry(class).or_insert(0),
            } += 1;
            out.push(Crossing { index: i, track_id: key, class, direction });
        }
        out
    }

    fn evict(&mut self, present: &HashSet<i64>) {
        let keys: Vec<i64> = self.history.keys().copied().collect();
        for key in keys {
            if present.contains(&key) {
                self.absent.remove(&key);
                continue;
            }
            let absent = self.absent.get(&key).copied().unwrap_or(0) + 1;
            if absent >= self.history_len {
                self.history.remove(&key);
                self.confirmed.remove(&key);
                self.absent.remove(&key);
            } else {
                self.absent.insert(key, absent);
            }
        }
    }
}
