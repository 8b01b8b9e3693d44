//! A zone: a polygon, the tracks whose anchor is inside it, who entered and left, and for how long.
//!
//! Inside or not is supervision's `PolygonZone` test: each anchor rounded to the nearest pixel (ties to
//! even, as `np.rint`), inside when that pixel is inside the polygon or on its edge (`cv2.fillPoly`
//! fills the edge pixels). With the polygon's corners on whole pixels and its edges level, upright or at
//! 45 degrees, that is exactly the pixel mask supervision tests; along other slopes the two may disagree
//! on a pixel of the edge. Several anchors: inside when any one is.
//!
//! Per track: entered on the first frame it is inside (a track first seen inside enters then), left on
//! the first frame it is seen outside again, or, when it vanishes while inside, once it has been gone
//! `lost_frames` frames (its dwell then ends at the last frame it was seen). Dwell runs from the frame it
//! entered to the frame it left, in frames and in the times the caller gives with each frame.

use std::collections::HashMap;

use super::anchor::{Anchor, ZONE_ANCHOR};
use super::tracks::{counted, finite_point, AnalyticsError, Result, Tracks};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneEventKind {
    Entered,
    Left,
}

impl ZoneEventKind {
    pub fn name(self) -> &'static str {
        match self {
            ZoneEventKind::Entered => "zone_entered",
            ZoneEventKind::Left => "zone_left",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ZoneEvent {
    pub kind: ZoneEventKind,
    /// Its position in this frame's tracks (None: a track that vanished).
    pub index: Option<usize>,
    pub track_id: i64,
    pub class: i32,
    /// The frame (and its time) of the event: for a vanished track, the last frame it was seen.
    pub frame: i64,
    pub time: f64,
    /// On leaving: frames and seconds from the frame it entered.
    pub dwell_frames: i64,
    pub dwell_seconds: f64,
}

#[derive(Debug, Clone, Copy)]
struct TrackState {
    entered_frame: i64,
    entered_time: f64,
    last_frame: i64,
    last_time: f64,
    class: i32,
    gone: u32,
}

#[derive(Debug, Clone)]
pub struct Zone {
    polygon: Vec<[f64; 2]>,
    anchors: Vec<Anchor>,
    classes: Option<Vec<i32>>,
    lost_frames: u32,
    inside: HashMap<i64, TrackState>,
    occupancy: usize,
    entries: u64,
    exits: u64,
}

/// Twice the signed area of triangle (a, b, c).
fn orient(a: [f64; 2], b: [f64; 2], c: [f64; 2]) -> f64 {
    (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
}

fn on_segment(a: [f64; 2], b: [f64; 2], p: [f64; 2]) -> bool {
    orient(a, b, p) == 0.0
        && p[0] >= a[0].min(b[0])
        && p[0] <= a[0].max(b[0])
        && p[1] >= a[1].min(b[1])
        && p[1] <= a[1].max(b[1])
}

fn segments_meet(a: [f64; 2], b: [f64; 2], c: [f64; 2], d: [f64; 2]) -> bool {
    let (o1, o2, o3, o4) = (orient(a, b, c), orient(a, b, d), orient(c, d, a), orient(c, d, b));
    if ((o1 > 0.0 && o2 < 0.0) || (o1 < 0.0 && o2 > 0.0)) && ((o3 > 0.0 && o4 < 0.0) || (o3 < 0.0 && o4 > 0.0)) {
        return true;
    }
    on_segment(a, b, c) || on_segment(a, b, d) || on_segment(c, d, a) || on_segment(c, d, b)
}

impl Zone {
    /// `anchors` empty: the bottom centre. `lost_frames` at least 1.
    pub fn new(
        polygon: Vec<[f64; 2]>,
        anchors: &[Anchor],
        lost_frames: u32,
        classes: Option<Vec<i32>>,
    ) -> Result<Self> {
        if polygon.len() < 3 {
            return Err(AnalyticsError(format!("a zone's polygon needs at least three points, got {}", polygon.len())));
        }
        for p in &polygon {
            finite_point(*p, "a zone's points")?;
        }
        let n = polygon.len();
        for i in 0..n {
            let (a, b) = (polygon[i], polygon[(i + 1) % n]);
            if a == b {
                return Err(AnalyticsError(format!("a zone's polygon repeats point {a:?} (an edge of zero length)")));
            }
            for j in i + 1..n {
                let (c, d) = (polygon[j], polygon[(j + 1) % n]);
                let adjacent = j == i + 1 || (i == 0 && j == n - 1);
                let meet = if adjacent {
                    // Neighbours share a corner; they may not fold back over each other.
                    let shared = if j == i + 1 { b } else { a };
                    let (other_ab, other_cd) = if j == i + 1 { (a, d) } else { (b, c) };
                    orient(other_ab, shared, other_cd) == 0.0
                        && (on_segment(other_ab, shared, other_cd) || on_segment(shared, other_cd, other_ab))
                } else {
                    segments_meet(a, b, c, d)
                };
                if meet {
                    return Err(AnalyticsError(format!(
                        "a zone's polygon crosses itself: edge {a:?}-{b:?} meets edge {c:?}-{d:?}"
                    )));
                }
            }
        }
        let area: f64 = (0..n).map(|i| orient([0.0, 0.0], polygon[i], polygon[(i + 1) % n])).sum();
        if area == 0.0 {
            return Err(AnalyticsError("a zone's polygon encloses no area (its points are on one line)".into()));
        }
        if lost_frames < 1 {
            return Err(AnalyticsError("lost_frames must be at least 1, got 0".into()));
        }
        Ok(Self {
            polygon,
            anchors: if anchors.is_empty() { vec![ZONE_ANCHOR] } else { anchors.to_vec() },
            classes,
            lost_frames,
            inside: HashMap::new(),
            occupancy: 0,
            entries: 0,
            exits: 0,
        })
    }

    pub fn polygon(&self) -> &[[f64; 2]] {
        &self.polygon
    }

    pub fn anchors(&self) -> &[Anchor] {
        &self.anchors
    }

    /// Tracks inside on the last frame.
    pub fn occupancy(&self) -> usize {
        self.occupancy
    }

    pub fn entries(&self) -> u64 {
        self.entries
    }

    pub fn exits(&self) -> u64 {
        self.exits
    }

    /// The tracks inside now (those gone for fewer than `lost_frames` frames included), sorted.
    pub fn tracks_inside(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.inside.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    pub fn reset(&mut self) {
        self.inside.clear();
        self.occupancy = 0;
        self.entries = 0;
        self.exits = 0;
    }

    /// Point `p`, rounded to its pixel, inside the polygon or on an edge.
    pub fn contains(&self, p: [f64; 2]) -> bool {
        let q = [p[0].round_ties_even(), p[1].round_ties_even()];
        let n = self.polygon.len();
        let mut inside = false;
        for i in 0..n {
            let (a, b) = (self.polygon[i], self.polygon[(i + 1) % n]);
            if on_segment(a, b, q) {
                return true;
            }
            if (a[1] > q[1]) != (b[1] > q[1]) {
                let x = a[0] + (q[1] - a[1]) * (b[0] - a[0]) / (b[1] - a[1]);
                if q[0] < x {
                    inside = !inside;
                }
            }
        }
        inside
    }

    fn box_inside(&self, b: &[f32; 4]) -> bool {
        self.anchors.iter().any(|a| self.contains(a.point(b)))
    }

    /// One frame's tracks; returns whether each is inside (false for classes not counted) and the events.
    pub fn trigger(&mut self, tracks: Tracks<'_>, frame: i64, time: f64) -> (Vec<bool>, Vec<ZoneEvent>) {
        let mut flags = vec![false; tracks.len()];
        let mut events = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, flag) in flags.iter_mut().enumerate() {
            let (id, class) = (tracks.ids[i], tracks.classes[i]);
            if id < 0 || !counted(&self.classes, class) {
                continue;
            }
            let now = self.box_inside(&tracks.boxes[i]);
            *flag = now;
            seen.insert(id);
            match (self.inside.get_mut(&id), now) {
                (Some(state), true) => {
                    state.last_frame = frame;
                    state.last_time = time;
                    state.gone = 0;
                }
                (None, true) => {
                    self.inside.insert(
                        id,
                        TrackState {
                            entered_frame: frame,
                            entered_time: time,
                            last_frame: frame,
                            last_time: time,
                            class,
                            gone: 0,
                        },
                    );
                    self.entries += 1;
                    events.push(ZoneEvent {
                        kind: ZoneEventKind::Entered,
                        index: Some(i),
                        track_id: id,
                        class,
                        frame,
                        time,
                        dwell_frames: 0,
                        dwell_seconds: 0.0,
                    });
                }
                (Some(state), false) => {
                    let state = *state;
                    self.inside.remove(&id);
                    self.exits += 1;
                    events.push(ZoneEvent {
                        kind: ZoneEventKind::Left,
                        index: Some(i),
                        track_id: id,
                        class,
                        frame,
                        time,
                        dwell_frames: frame - state.entered_frame,
                        dwell_seconds: time - state.entered_time,
                    });
                }
                (None, false) => {}
            }
        }
        let mut vanished = Vec::new();
        for (id, state) in self.inside.iter_mut() {
            if !seen.contains(id) {
                state.gone += 1;
                if state.gone >= self.lost_frames {
                    vanished.push(*id);
                }
            }
        }
        vanished.sort_unstable();
        for id in vanished {
            if let Some(state) = self.inside.remove(&id) {
                self.exits += 1;
                events.push(ZoneEvent {
                    kind: ZoneEventKind::Left,
                    index: None,
                    track_id: id,
                    class: state.class,
                    frame: state.last_frame,
                    time: state.last_time,
                    dwell_frames: state.last_frame - state.entered_frame,
                    dwell_seconds: state.last_time - state.entered_time,
                });
            }
        }
        self.occupancy = flags.iter().filter(|&&f| f).count();
        (flags, events)
    }
}
