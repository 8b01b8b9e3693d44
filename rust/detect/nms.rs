//! Non-maximum suppression as Ultralytics runs it.
//!
//! * Boxes: greedy NMS as `torchvision.ops.nms` (and Ultralytics' `TorchNMS.nms`,
//!   which matches it): visit boxes by score, highest first, keep a box no kept
//!   box overlaps by IoU > `iou`. Class-aware NMS adds `class * 7680` to the
//!   coordinates as Ultralytics does (f32, so the rounding is the same); boxes of
//!   different classes never meet, so only boxes of one class are compared.
//! * Rotated boxes: Ultralytics' `TorchNMS.fast_nms` with `batch_probiou`: a box
//!   goes when any box of higher score, kept or not, overlaps it by probiou >= `iou`.
//!
//! Both take candidates already sorted by score (descending, stable) and stop
//! at `max_det` kept boxes: later boxes cannot change the earlier ones' fate.

/// Ultralytics' `max_wh`: the class offset of class-aware NMS.
pub const MAX_WH: f32 = 7680.0;

/// Indices (into the sorted candidates) of the boxes kept, in order.
/// `boxes`: x1, y1, x2, y2.
pub fn nms(boxes: &[[f32; 4]], classes: &[u32], iou: f32, agnostic: bool, max_det: usize) -> Vec<usize> {
    use crate::simd::{stamp, SimdLevel};
    // Boxes of different classes never meet: NMS per class (a run of the
    // candidates ordered by class, score order kept within it), then the kept
    // boxes of all classes in score order (their index order).
    let class = |i: usize| if agnostic { 0 } else { classes[i] };
    // Unique keys: the unstable sort is the stable order by class.
    let mut order: Vec<u64> = (0..boxes.len()).map(|i| (class(i) as u64) << 32 | i as u64).collect();
    order.sort_unstable();
    let order: Vec<usize> = order.iter().map(|&k| (k & u32::MAX as u64) as usize).collect();
    let mut sides = Sides::default();
    let mut runs = Vec::new();
    for (at, &i) in order.iter().enumerate() {
        if at == 0 || class(i) != class(order[at - 1]) {
            runs.push(at);
        }
        sides.push(boxes[i], class(i) as f32 * MAX_WH);
    }
    runs.push(order.len());
    let greedy = stamp!(
        for SimdLevel::default_level(),
        fn body(sides: &Sides, runs: &[usize], iou: f32, max_det: usize, keep: &mut Vec<usize>) {
            sides.greedy(runs, iou, max_det, keep)
        }
    );
    let mut keep = Vec::new();
    greedy(&sides, &runs, iou, max_det, &mut keep);
    let mut keep: Vec<usize> = keep.into_iter().map(|at| order[at]).collect();
    keep.sort_unstable();
    keep.truncate(max_det);
    keep
}

/// Boxes side by side (one array per coordinate, SIMD over boxes), shifted
/// by their class offset as Ultralytics shifts them, and their areas.
#[derive(Default)]
struct Sides {
    x1: Vec<f32>,
    y1: Vec<f32>,
    x2: Vec<f32>,
    y2: Vec<f32>,
    area: Vec<f32>,
}

impl Sides {
    fn push(&mut self, b: [f32; 4], offset: f32) {
        let (x1, y1, x2, y2) = (b[0] + offset, b[1] + offset, b[2] + offset, b[3] + offset);
        self.x1.push(x1);
        self.y1.push(y1);
        self.x2.push(x2);
        self.y2.push(y2);
        self.area.push((x2 - x1) * (y2 - y1));
    }

    /// Greedy NMS within each run `runs[k]..runs[k + 1]` of boxes (in score
    /// order), at most `max_det` kept per run; the positions kept, into `keep`.
    #[inline(always)]
    fn greedy(&self, runs: &[usize], iou: f32, max_det: usize, keep: &mut Vec<usize>) {
        let mut alive = vec![true; self.x1.len()];
        for run in runs.windows(2) {
            let mut kept = 0;
            for i in run[0]..run[1] {
                if !alive[i] {
                    continue;
                }
                keep.push(i);
                kept += 1;
                if kept >= max_det {
                    break;
                }
                let (a, rest) = (self.x1[i], i + 1..run[1]);
                let (b, c, d, e) = (self.y1[i], self.x2[i], self.y2[i], self.area[i]);
                let others = self.x1[rest.clone()]
                    .iter()
                    .zip(&self.y1[rest.clone()])
                    .zip(&self.x2[rest.clone()])
                    .zip(&self.y2[rest.clone()])
                    .zip(&self.area[rest.clone()]);
                for (alive, ((((&x1, &y1), &x2), &y2), &area)) in alive[rest].iter_mut().zip(others) {
                    let w = (c.min(x2) - a.max(x1)).max(0.0);
                    let h = (d.min(y2) - b.max(y1)).max(0.0);
                    let inter = w * h;
                    // NaN (two empty boxes) compares false: kept, as torchvision keeps it.
                    // No overlap is never above iou >= 0 (0 / union is 0, -0 or NaN):
                    // the division only where boxes meet, the same answer.
                    let over = inter > 0.0 && inter / (e + area - inter) > iou;
                    *alive &= !over;
                }
            }
        }
    }
}

/// Ultralytics' covariance of a rotated box (`_get_covariance_matrix`).
fn covariance(b: &[f32; 5]) -> (f32, f32, f32) {
    let (a, bb) = (b[2] * b[2] / 12.0, b[3] * b[3] / 12.0);
    let (sin, cos) = b[4].sin_cos();
    let (cos2, sin2) = (cos * cos, sin * sin);
    (a * cos2 + bb * sin2, a * sin2 + bb * cos2, (a - bb) * cos * sin)
}

/// Ultralytics' `probiou` of two rotated boxes (cx, cy, w, h, angle), eps 1e-7.
pub fn probiou(p: &[f32; 5], q: &[f32; 5]) -> f32 {
    const EPS: f32 = 1e-7;
    let (x1, y1, x2, y2) = (p[0], p[1], q[0], q[1]);
    let (a1, b1, c1) = covariance(p);
    let (a2, b2, c2) = covariance(q);
    let (sa, sb, sc) = (a1 + a2, b1 + b2, c1 + c2);
    let den = sa * sb - sc * sc;
    let t1 = ((sa * (y1 - y2).powi(2) + sb * (x1 - x2).powi(2)) / (den + EPS)) * 0.25;
    let t2 = ((sc * (x2 - x1) * (y1 - y2)) / (den + EPS)) * 0.5;
    let t3 =
        (den / (4.0 * ((a1 * b1 - c1 * c1).max(0.0) * (a2 * b2 - c2 * c2).max(0.0)).sqrt() + EPS) + EPS).ln() * 0.5;
    let bd = (t1 + t2 + t3).clamp(EPS, 100.0);
    let hd = (1.0 - (-bd).exp() + EPS).sqrt();
    1.0 - hd
}

/// Indices (into the sorted candidates) of the rotated boxes kept, in order.
/// `boxes`: cx, cy, w, h, angle.
pub fn nms_rotated(boxes: &[[f32; 5]], classes: &[u32], iou: f32, agnostic: bool, max_det: usize) -> Vec<usize> {
    // Ultralytics offsets only the centre by the class.
    let shifted: Vec<[f32; 5]> = boxes
        .iter()
        .zip(classes)
        .map(|(b, &c)| {
            let o = if agnostic { 0.0 } else { c as f32 * MAX_WH };
            [b[0] + o, b[1] + o, b[2], b[3], b[4]]
        })
        .collect();
    let mut keep = Vec::new();
    for j in 0..shifted.len() {
        let beaten = (0..j).any(|i| (agnostic || classes[i] == classes[j]) && probiou(&shifted[i], &shifted[j]) >= iou);
        if !beaten {
            keep.push(j);
            if keep.len() >= max_det {
                break;
            }
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_nms_keeps_what_no_kept_box_overlaps() {
        // 0 and 1 overlap (IoU 0.81), 1 and 2 overlap, 0 and 2 do not: 2 survives
        // because 1 was suppressed.
        let boxes = [[0.0, 0.0, 10.0, 10.0], [1.0, 0.0, 11.0, 10.0], [9.5, 0.0, 19.5, 10.0]];
        assert_eq!(nms(&boxes, &[0, 0, 0], 0.5, false, 300), vec![0, 2]);
        assert_eq!(nms(&boxes, &[0, 1, 0], 0.5, false, 300), vec![0, 1, 2]);
        assert_eq!(nms(&boxes, &[0, 1, 0], 0.5, true, 300), vec![0, 2]);
        assert_eq!(nms(&boxes, &[0, 1, 2], 0.5, false, 2), vec![0, 1]);
    }

    #[test]
    fn probiou_of_a_box_with_itself_is_one_and_far_boxes_zero() {
        let b = [50.0, 40.0, 20.0, 10.0, 0.3];
        assert!((probiou(&b, &b) - 1.0).abs() < 1e-3);
        let far = [500.0, 40.0, 20.0, 10.0, 0.3];
        assert!(probiou(&b, &far) < 1e-3);
        // Fast NMS: 2 goes because 1 overlaps it, though 1 itself went
        // (greedy NMS would keep 2).
        let boxes = [[0.0, 0.0, 10.0, 10.0, 0.0], [1.0, 0.0, 10.0, 10.0, 0.0], [2.0, 0.0, 10.0, 10.0, 0.0]];
        let (near, far) = (probiou(&boxes[0], &boxes[1]), probiou(&boxes[0], &boxes[2]));
        assert!(far < near && (probiou(&boxes[1], &boxes[2]) - near).abs() < 1e-6);
        let between = (near + far) / 2.0;
        assert_eq!(nms_rotated(&boxes, &[0, 0, 0], between, false, 300), vec![0]);
        assert_eq!(nms_rotated(&boxes, &[0, 1, 0], between, false, 300), vec![0, 1, 2]);
        assert_eq!(nms_rotated(&boxes, &[0, 0, 0], near + 1e-3, false, 300), vec![0, 1, 2]);
    }
}
