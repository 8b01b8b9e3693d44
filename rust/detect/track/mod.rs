//! ByteTrack: a track id for each detection of a stream, as Ultralytics' `BYTETracker`.
//!
//! The steps, the Kalman filter (`KalmanFilterXYAH`: centre, aspect ratio, height and
//! their velocities), the costs (IoU distance, fused with the detection score) and the
//! cost-limited assignment (`lap.lapjv(cost, extend_cost=True, cost_limit=thresh)`) are
//! Ultralytics' (`ultralytics/trackers/byte_tracker.py`, `trackers/utils/matching.py`),
//! including its bookkeeping quirks, so that the ids are the same frame by frame
//! (`tests/detect/test_track_ultralytics.py` checks this against fixtures made by
//! Ultralytics itself). Ids start at 1 and are never reused by one tracker.
//!
//! As Ultralytics splits it: the tracker here, the Kalman filter in [`kalman`],
//! the costs and the assignment solver in [`assign`].
//!
//! Oriented boxes (OBB results) are tracked as Ultralytics tracks them: the box in
//! its long-edge form (w >= h, the angle turned by pi/2 where it was not) goes into
//! the same filter, the track keeps the angle of its last detection (in the half-turn
//! form nearest its previous angle, so it never flips), and every overlap (the
//! associations and the duplicate check) is the probabilistic IoU of the rotated
//! boxes (`batch_probiou`, as `matching.iou_distance` uses for boxes with an angle).

use std::collections::{HashSet, VecDeque};
use std::f64::consts::PI;
use std::fmt;

mod assign;
mod bbox;
mod kalman;

use assign::{assign, Costs};
pub use bbox::Bbox;
use kalman::Kalman;

/// What a [`ByteTracker`] is set up with; the defaults are Ultralytics' `bytetrack.yaml`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrackerConfig {
    /// Detections scoring at least this take part in the first association.
    pub track_high_thresh: f32,
    /// Detections scoring above this (and below `track_high_thresh`) in the second.
    pub track_low_thresh: f32,
    /// A detection left unmatched starts a track when it scores at least this.
    pub new_track_thresh: f32,
    /// Frames (at 30 fps) a lost track is kept for re-identification; at another
    /// `frame_rate` it scales as in ByteTrack (Ultralytics 8.4 keeps `track_buffer`
    /// frames whatever the rate: the same at 30 fps).
    pub track_buffer: u32,
    /// The largest cost (1 - IoU, fused with the score) of a first-stage match.
    pub match_thresh: f32,
    /// Multiply the IoU similarity by the detection score before matching.
    pub fuse_score: bool,
    /// The stream's frame rate: `track_buffer` scales with it.
    pub frame_rate: u32,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        Self {
            track_high_thresh: 0.25,
            track_low_thresh: 0.1,
            new_track_thresh: 0.25,
            track_buffer: 30,
            match_thresh: 0.8,
            fuse_score: true,
            frame_rate: 30,
        }
    }
}

/// A setting that makes no tracker (a threshold that is not a number, a zero frame rate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackError(pub String);

impl fmt::Display for TrackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TrackError {}

/// One detection of a frame: its box in pixels, score, class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detection {
    pub bbox: Bbox,
    pub score: f32,
    pub class: i32,
}

/// A detection that belongs to a confirmed track, as Ultralytics reports it: the
/// track's box (the Kalman filter's estimate after this frame's measurement; rotated
/// boxes with the track's angle), its id, and `index`, the position of the detection
/// in the frame's input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tracked {
    pub bbox: Bbox,
    pub track_id: u64,
    pub score: f32,
    pub class: i32,
    pub index: usize,
}

// ---------------------------------------------------------------------------
// Tracks and the tracker.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Tracked,
    Lost,
    Removed,
}

#[derive(Debug, Clone)]
struct Track {
    id: u64,
    kalman: Kalman,
    state: State,
    activated: bool,
    score: f32,
    class: i32,
    index: usize,
    frame_id: u64,
    start_frame: u64,
    /// Rotated boxes: the angle of the last detection, in radians.
    angle: Option<f64>,
}

impl Track {
    /// The box overlaps are measured on: the filter's estimate (and the angle).
    fn bbox(&self) -> Bbox {
        match self.angle {
            None => Bbox::Xyxy(self.kalman.xyxy()),
            Some(angle) => {
                let [x, y, w, h] = self.kalman.xywh();
                Bbox::Xywhr([x as f32, y as f32, w as f32, h as f32, angle as f32])
            }
        }
    }

    fn update(&mut self, det: &Candidate, frame_id: u64) {
        self.frame_id = frame_id;
        self.kalman.update(det.xyah);
        self.state = State::Tracked;
        self.activated = true;
        self.score = det.score;
        self.class = det.class;
        self.index = det.index;
        // The half-turn form (angle or angle +- pi) nearest the track's angle: it never flips.
        self.angle = match (self.angle, det.angle) {
            (Some(old), Some(new)) => Some(new - PI * ((new - old) / PI).round_ties_even()),
            (_, new) => new,
        };
    }
}

/// A detection as a would-be track (Ultralytics' fresh `STrack`).
#[derive(Debug, Clone, Copy)]
struct Candidate {
    bbox: Bbox,
    xyah: [f32; 4],
    angle: Option<f64>,
    score: f32,
    class: i32,
    index: usize,
}

impl Candidate {
    fn new(det: &Detection, index: usize) -> Self {
        // Ultralytics goes xyxy -> xywh (float32) -> tlwh (float64, stored as float32) -> xyah (float32);
        // a rotated box: xywhr (float64) in its long-edge form -> tlwh (float32) -> xyah.
        let (xywh, angle) = match det.bbox {
            Bbox::Xyxy([x1, y1, x2, y2]) => ([(x1 + x2) / 2.0, (y1 + y2) / 2.0, x2 - x1, y2 - y1], None),
            Bbox::Xywhr([x, y, w, h, r]) if w < h => ([x, y, h, w], Some(f64::from(r) + PI / 2.0)),
            Bbox::Xywhr([x, y, w, h, r]) => ([x, y, w, h], Some(f64::from(r))),
        };
        let [cx, cy, w, h] = xywh;
        let corner = |c: f32, size: f32| (f64::from(c) - f64::from(size) / 2.0) as f32;
        let tlwh = [corner(cx, w), corner(cy, h), w, h];
        let xyah = [tlwh[0] + tlwh[2] / 2.0, tlwh[1] + tlwh[3] / 2.0, tlwh[2] / tlwh[3], tlwh[3]];
        let bbox = match angle {
            None => Bbox::Xyxy([tlwh[0], tlwh[1], tlwh[0] + tlwh[2], tlwh[1] + tlwh[3]]),
            Some(r) => Bbox::Xywhr([xyah[0], xyah[1], w, h, r as f32]),
        };
        Self { bbox, xyah, angle, score: det.score, class: det.class, index }
    }
}

/// Ultralytics keeps this many removed tracks' ids (`merge_track_pools`' `removed_buffer`).
const REMOVED_KEPT: usize = 1000;

/// ByteTrack over one stream: call [`ByteTracker::update`] once per frame.
#[derive(Debug, Clone)]
pub struct ByteTracker {
    config: TrackerConfig,
    max_time_lost: u64,
    frame_id: u64,
    next_id: u64,
    tracked: Vec<Track>,
    lost: Vec<Track>,
    removed: VecDeque<u64>,
}

impl ByteTracker {
    pub fn new(config: TrackerConfig) -> Result<Self, TrackError> {
        let thresholds = [
            ("track_high_thresh", config.track_high_thresh),
            ("track_low_thresh", config.track_low_thresh),
            ("new_track_thresh", config.new_track_thresh),
            ("match_thresh", config.match_thresh),
        ];
        for (name, value) in thresholds {
            if !value.is_finite() {
                return Err(TrackError(format!("{name} must be a finite number, got {value}")));
            }
        }
        if config.frame_rate == 0 {
            return Err(TrackError("frame_rate must be at least 1".into()));
        }
        // int(frame_rate / 30.0 * track_buffer), as ByteTrack.
        let max_time_lost = (f64::from(config.frame_rate) / 30.0 * f64::from(config.track_buffer)) as u64;
        Ok(Self {
            config,
            max_time_lost,
            frame_id: 0,
            next_id: 0,
            tracked: vec![],
            lost: vec![],
            removed: VecDeque::new(),
        })
    }

    pub fn config(&self) -> TrackerConfig {
        self.config
    }

    /// Frames seen since creation or the last reset.
    pub fn frame_id(&self) -> u64 {
        self.frame_id
    }

    /// Forget every track; ids start at 1 again.
    pub fn reset(&mut self) {
        *self =
            Self { config: self.config, max_time_lost: self.max_time_lost, ..Self::new(self.config).expect("checked") };
    }

    fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Costs between tracks and candidates: IoU distance, fused with the scores when set.
    fn dists(&self, tracks: &[Bbox], dets: &[&Candidate]) -> Costs {
        let boxes: Vec<Bbox> = dets.iter().map(|d| d.bbox).collect();
        let costs = Costs::iou_distance(tracks, &boxes);
        if self.config.fuse_score {
            costs.fuse_score(&dets.iter().map(|d| d.score).collect::<Vec<_>>())
        } else {
            costs
        }
    }

    /// One frame's detections in; the detections of confirmed tracks out, in
    /// Ultralytics' order. Detections whose score or box is not finite, or whose box
    /// has no area, are ignored.
    pub fn update(&mut self, detections: &[Detection]) -> Vec<Tracked> {
        self.frame_id += 1;
        let frame_id = self.frame_id;
        let cfg = self.config;

        let usable = |d: &Detection| d.score.is_finite() && d.bbox.is_usable();
        let mut high = vec![];
        let mut low = vec![];
        for (index, det) in detections.iter().enumerate().filter(|(_, d)| usable(d)) {
            if det.score >= cfg.track_high_thresh {
                high.push(Candidate::new(det, index));
            } else if det.score > cfg.track_low_thresh {
                low.push(Candidate::new(det, index));
            }
        }

        // Tracked-but-unconfirmed tracks (one frame old) wait aside; the rest and the
        // lost tracks form the pool, predicted one frame ahead.
        let old_order: Vec<u64> = self.tracked.iter().map(|t| t.id).collect();
        let (confirmed, mut unconfirmed): (Vec<Track>, Vec<Track>) =
            std::mem::take(&mut self.tracked).into_iter().partition(|t| t.activated);
        let mut pool = joint(confirmed, std::mem::take(&mut self.lost));
        for track in &mut pool {
            if track.state != State::Tracked {
                track.kalman.mean[7] = 0.0;
            }
            track.kalman.predict();
        }

        let mut activated: Vec<Track> = vec![];
        let mut refound: Vec<Track> = vec![];
        let mut lost_now: Vec<Track> = vec![];
        let mut removed_now: Vec<u64> = vec![];

        // First association: high-score detections against the pool.
        let pool_boxes: Vec<Bbox> = pool.iter().map(Track::bbox).collect();
        let high_refs: Vec<&Candidate> = high.iter().collect();
        let first = assign(&self.dists(&pool_boxes, &high_refs), f64::from(cfg.match_thresh));
        let mut pool: Vec<Option<Track>> = pool.into_iter().map(Some).collect();
        for &(t, d) in &first.matches {
            let mut track = pool[t].take().expect("matched once");
            if track.state == State::Tracked {
                track.update(&high[d], frame_id);
                activated.push(track);
            } else {
                track.update(&high[d], frame_id); // re_activate(new_id=False) is update with a fresh tracklet
                refound.push(track);
            }
        }

        // Second association: the remaining tracked tracks against low-score detections, IoU only.
        let mut rest: Vec<Track> = vec![];
        let mut remaining: Vec<Track> = vec![];
        for &t in &first.unmatched_rows {
            let track = pool[t].take().expect("unmatched once");
            if track.state == State::Tracked {
                rest.push(track);
            } else {
                remaining.push(track); // lost tracks not found again stay lost
            }
        }
        let rest_boxes: Vec<Bbox> = rest.iter().map(Track::bbox).collect();
        let low_boxes: Vec<Bbox> = low.iter().map(|c| c.bbox).collect();
        let second = assign(&Costs::iou_distance(&rest_boxes, &low_boxes), 0.5);
        let mut rest: Vec<Option<Track>> = rest.into_iter().map(Some).collect();
        for &(t, d) in &second.matches {
            let mut track = rest[t].take().expect("matched once");
            track.update(&low[d], frame_id);
            activated.push(track);
        }
        for &t in &second.unmatched_rows {
            let mut track = rest[t].take().expect("unmatched once");
            track.state = State::Lost;
            lost_now.push(track);
        }

        // Unconfirmed tracks against the high-score detections left over.
        let left: Vec<&Candidate> = first.unmatched_cols.iter().map(|&d| &high[d]).collect();
        let unconfirmed_boxes: Vec<Bbox> = unconfirmed.iter().map(Track::bbox).collect();
        let third = assign(&self.dists(&unconfirmed_boxes, &left), 0.7);
        for &(t, d) in &third.matches {
            unconfirmed[t].update(left[d], frame_id);
        }
        let mut third_matched = vec![false; unconfirmed.len()];
        for &(t, _) in &third.matches {
            third_matched[t] = true;
        }
        for (track, matched) in unconfirmed.drain(..).zip(third_matched) {
            if matched {
                activated.push(track);
            } else {
                removed_now.push(track.id);
            }
        }

        // New tracks from what is left; confirmed at once only on the first frame.
        for &d in &third.unmatched_cols {
            let det = left[d];
            if det.score < cfg.new_track_thresh {
                continue;
            }
            let id = self.new_id();
            activated.push(Track {
                id,
                kalman: Kalman::initiate(det.xyah),
                state: State::Tracked,
                activated: frame_id == 1,
                score: det.score,
                class: det.class,
                index: det.index,
                frame_id,
                start_frame: frame_id,
                angle: det.angle,
            });
        }

        // Lost tracks kept too long are removed (they stay in the lost list this
        // frame: Ultralytics subtracts the removed ids of earlier frames only).
        for track in &mut remaining {
            if frame_id - track.frame_id > self.max_time_lost {
                track.state = State::Removed;
                removed_now.push(track.id);
            }
        }

        // The bookkeeping of Ultralytics' step 5, list by list. The tracked list keeps
        // its order: last frame's tracks still tracked, then the new ones, then those
        // found again.
        let mut activated: Vec<Option<Track>> = activated.into_iter().map(Some).collect();
        let mut tracked = vec![];
        for id in &old_order {
            if let Some(slot) = activated.iter_mut().find(|t| t.as_ref().is_some_and(|t| t.id == *id)) {
                tracked.extend(slot.take());
            }
        }
        let tracked = joint(joint(tracked, activated.into_iter().flatten().collect()), refound);
        let tracked_ids: HashSet<u64> = tracked.iter().map(|t| t.id).collect();
        let mut lost: Vec<Track> = remaining.into_iter().filter(|t| !tracked_ids.contains(&t.id)).collect();
        lost.extend(lost_now);
        let removed: HashSet<u64> = self.removed.iter().copied().collect();
        lost.retain(|t| !removed.contains(&t.id));
        let (tracked, lost) = remove_duplicates(tracked, lost);
        self.tracked = tracked;
        self.lost = lost;
        self.removed.extend(removed_now);
        if self.removed.len() > REMOVED_KEPT {
            let extra = self.removed.len() - REMOVED_KEPT;
            self.removed.drain(..extra);
        }

        self.tracked
            .iter()
            .filter(|t| t.activated)
            .map(|t| Tracked { bbox: t.bbox(), track_id: t.id, score: t.score, class: t.class, index: t.index })
            .collect()
    }
}

/// Ultralytics' `joint_stracks`: `a`, then the tracks of `b` whose ids `a` lacks.
fn joint(mut a: Vec<Track>, b: Vec<Track>) -> Vec<Track> {
    let ids: HashSet<u64> = a.iter().map(|t| t.id).collect();
    a.extend(b.into_iter().filter(|t| !ids.contains(&t.id)));
    a
}

/// Ultralytics' `remove_duplicate_stracks`: a tracked and a lost track overlapping
/// with IoU (probiou for rotated boxes) above 0.85: the younger one goes.
fn remove_duplicates(a: Vec<Track>, b: Vec<Track>) -> (Vec<Track>, Vec<Track>) {
    let mut drop_a = vec![false; a.len()];
    let mut drop_b = vec![false; b.len()];
    let boxes_b: Vec<Bbox> = b.iter().map(Track::bbox).collect();
    for (p, ta) in a.iter().enumerate() {
        let box_a = ta.bbox();
        for (q, tb) in b.iter().enumerate() {
            if 1.0 - box_a.overlap(&boxes_b[q]) < 0.15 {
                let time_p = ta.frame_id - ta.start_frame;
                let time_q = tb.frame_id - tb.start_frame;
                if time_p > time_q {
                    drop_b[q] = true;
                } else {
                    drop_a[p] = true;
                }
            }
        }
    }
    let keep = |v: Vec<Track>, drop: Vec<bool>| v.into_iter().zip(drop).filter(|(_, d)| !d).map(|(t, _)| t).collect();
    (keep(a, drop_a), keep(b, drop_b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn det(x: f32, y: f32, w: f32, h: f32, score: f32) -> Detection {
        Detection { bbox: Bbox::Xyxy([x, y, x + w, y + h]), score, class: 0 }
    }

    #[test]
    fn assignment_is_optimal_on_a_small_matrix() {
        let costs = Costs { rows: 3, cols: 3, values: vec![4.0, 1.0, 3.0, 2.0, 0.0, 5.0, 3.0, 2.0, 2.0] };
        let a = assign(&costs, 100.0);
        assert_eq!(a.matches, vec![(0, 1), (1, 0), (2, 2)]);
    }

    #[test]
    fn assignment_leaves_pairs_above_the_limit_alone() {
        let costs = Costs { rows: 2, cols: 2, values: vec![0.1, 0.9, 0.9, 0.95] };
        let a = assign(&costs, 0.8);
        assert_eq!(a.matches, vec![(0, 0)]);
        assert_eq!(a.unmatched_rows, vec![1]);
        assert_eq!(a.unmatched_cols, vec![1]);
    }

    #[test]
    fn a_steady_box_keeps_its_id_and_ids_start_at_one() {
        let mut tracker = ByteTracker::new(TrackerConfig::default()).unwrap();
        for frame in 0..50 {
            let out = tracker.update(&[det(10.0 + 3.0 * frame as f32, 20.0, 40.0, 80.0, 0.9)]);
            assert_eq!(out.len(), 1, "frame {frame}");
            assert_eq!(out[0].track_id, 1);
            assert_eq!(out[0].index, 0);
        }
    }

    #[test]
    fn a_new_object_after_the_first_frame_shows_from_its_second_frame() {
        let mut tracker = ByteTracker::new(TrackerConfig::default()).unwrap();
        assert_eq!(tracker.update(&[det(0.0, 0.0, 50.0, 50.0, 0.9)]).len(), 1);
        let two = [det(0.0, 0.0, 50.0, 50.0, 0.9), det(200.0, 200.0, 50.0, 50.0, 0.9)];
        assert_eq!(tracker.update(&two).len(), 1);
        let out = tracker.update(&two);
        assert_eq!(out.iter().map(|t| t.track_id).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn a_lost_track_is_found_again_then_forgotten_after_the_buffer() {
        let mut tracker = ByteTracker::new(TrackerConfig { track_buffer: 5, ..Default::default() }).unwrap();
        let d = [det(100.0, 100.0, 50.0, 50.0, 0.9)];
        tracker.update(&d);
        for _ in 0..3 {
            assert!(tracker.update(&[]).is_empty());
        }
        assert_eq!(tracker.update(&d)[0].track_id, 1);
        for _ in 0..8 {
            tracker.update(&[]);
        }
        tracker.update(&d);
        assert_eq!(tracker.update(&d)[0].track_id, 2);
    }

    #[test]
    fn a_rotated_box_in_any_equivalent_form_keeps_its_id_and_angle() {
        let mut tracker = ByteTracker::new(TrackerConfig::default()).unwrap();
        let half_pi = std::f32::consts::FRAC_PI_2;
        for frame in 0..30 {
            let x = 100.0 + 2.0 * frame as f32;
            let form = match frame % 3 {
                0 => [x, 50.0, 80.0, 20.0, 0.3],
                1 => [x, 50.0, 20.0, 80.0, 0.3 - half_pi], // width and height swapped
                _ => [x, 50.0, 80.0, 20.0, 0.3 - 2.0 * half_pi], // half a turn
            };
            let out = tracker.update(&[Detection { bbox: Bbox::Xywhr(form), score: 0.9, class: 0 }]);
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].track_id, 1);
            let Bbox::Xywhr([_, _, w, h, angle]) = out[0].bbox else { panic!("a rotated box comes back rotated") };
            assert!(w > h && (angle - 0.3).abs() < 1e-5, "frame {frame}: {w} {h} {angle}");
        }
        // Two thin boxes crossing at right angles overlap little as rotated boxes: two tracks.
        let cross = |r: f32| Detection { bbox: Bbox::Xywhr([300.0, 300.0, 200.0, 10.0, r]), score: 0.9, class: 0 };
        let mut tracker = ByteTracker::new(TrackerConfig::default()).unwrap();
        tracker.update(&[cross(0.0), cross(half_pi)]);
        let ids: Vec<u64> = tracker.update(&[cross(0.0), cross(half_pi)]).iter().map(|t| t.track_id).collect();
        assert_eq!(ids, vec![1, 2]);
    }

    #[test]
    fn non_finite_detections_are_ignored() {
        let mut tracker = ByteTracker::new(TrackerConfig::default()).unwrap();
        let out = tracker.update(&[det(f32::NAN, 0.0, 5.0, 5.0, 0.9), det(0.0, 0.0, 5.0, 5.0, f32::INFINITY)]);
        assert!(out.is_empty());
        assert!(ByteTracker::new(TrackerConfig { match_thresh: f32::NAN, ..Default::default() }).is_err());
    }

    #[test]
    fn reset_starts_ids_again() {
        let mut tracker = ByteTracker::new(TrackerConfig::default()).unwrap();
        tracker.update(&[det(0.0, 0.0, 5.0, 5.0, 0.9), det(50.0, 0.0, 5.0, 5.0, 0.9)]);
        tracker.reset();
        assert_eq!(tracker.frame_id(), 0);
        assert_eq!(tracker.update(&[det(0.0, 0.0, 5.0, 5.0, 0.9)])[0].track_id, 1);
    }

    fn brute_force(costs: &Costs) -> f64 {
        fn go(costs: &Costs, row: usize, used: &mut Vec<bool>) -> f64 {
            if row == costs.rows {
                return 0.0;
            }
            let mut best = f64::INFINITY;
            for j in 0..costs.cols {
                if !used[j] {
                    used[j] = true;
                    best = best.min(costs.values[row * costs.cols + j] + go(costs, row + 1, used));
                    used[j] = false;
                }
            }
            best
        }
        go(costs, 0, &mut vec![false; costs.cols])
    }

    proptest! {
        #[test]
        fn assignment_matches_brute_force(n in 1usize..6, seed in proptest::collection::vec(0.0f64..10.0, 36)) {
            let costs = Costs { rows: n, cols: n, values: seed[..n * n].to_vec() };
            let a = assign(&costs, 1e9);
            let total: f64 = a.matches.iter().map(|&(i, j)| costs.values[i * n + j]).sum();
            prop_assert!((total - brute_force(&costs)).abs() < 1e-9);
            prop_assert_eq!(a.matches.len(), n);
        }

        #[test]
        fn ids_are_never_reused(frames in proptest::collection::vec(
            proptest::collection::vec((0.0f32..500.0, 0.0f32..500.0, 5.0f32..100.0, 5.0f32..100.0, 0.0f32..1.0), 0..8), 1..40)) {
            let mut tracker = ByteTracker::new(TrackerConfig::default()).unwrap();
            let mut last_seen = std::collections::HashMap::new();
            for (f, frame) in frames.iter().enumerate() {
                let dets: Vec<Detection> = frame.iter().map(|&(x, y, w, h, s)| det(x, y, w, h, s)).collect();
                let out = tracker.update(&dets);
                let mut ids: Vec<u64> = out.iter().map(|t| t.track_id).collect();
                ids.sort();
                let n = ids.len();
                ids.dedup();
                prop_assert_eq!(ids.len(), n, "an id twice in one frame");
                for t in &out {
                    prop_assert!(t.index < dets.len());
                    prop_assert!(t.track_id >= 1 && t.track_id <= tracker.next_id);
                    last_seen.insert(t.track_id, f);
                }
            }
        }
    }
}
