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
    if agnostic {
        let all: Vec<usize> = (0..boxes.len()).collect();
        return greedy(boxes, &all, 0.0, iou, max_det);
    }
    // Boxes of different classes never meet: NMS per class, then the kept
    // boxes of all classes in score order (their index order).
    let mut by_class: Vec<(u32, Vec<usize>)> = Vec::new();
    let mut sorted: Vec<usize> = (0..boxes.len()).collect();
    sorted.sort_by_key(|&i| classes[i]); // stable: score order within a class
    for i in sorted {
        match by_class.last_mut() {
            Some((c, members)) if *c == classes[i] => members.push(i),
            _ => by_class.push((classes[i], vec![i])),
        }
    }
    let mut keep: Vec<usize> =
        by_class.iter().flat_map(|(c, members)| greedy(boxes, members, *c as f32 * MAX_WH, iou, max_det)).collect();
    keep.sort_unstable();
    keep.truncate(max_det);
    keep
}

/// Greedy NMS over `members` (indices in score order), coordinates shifted by
/// `offset` as Ultralytics shifts them; at most `max_det` kept.
fn greedy(boxes: &[[f32; 4]], members: &[usize], offset: f32, iou: f32, max_det: usize) -> Vec<usize> {
    let shifted: Vec<[f32; 4]> = members
        .iter()
        .map(|&i| {
            let b = boxes[i];
            [b[0] + offset, b[1] + offset, b[2] + offset, b[3] + offset]
        })
        .collect();
    let areas: Vec<f32> = shifted.iter().map(|b| (b[2] - b[0]) * (b[3] - b[1])).collect();
    let mut suppressed = vec![false; members.len()];
    let mut keep = Vec::new();
    for i in 0..members.len() {
        if suppressed[i] {
            continue;
        }
        keep.push(members[i]);
        if keep.len() >= max_det {
            break;
        }
        let a = shifted[i];
        for j in i + 1..members.len() {
            if suppressed[j] {
                continue;
            }
            let b = shifted[j];
            let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
            let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
            let inter = w * h;
            // NaN (two empty boxes) compares false: kept, as torchvision keeps it.
            if inter / (areas[i] + areas[j] - inter) > iou {
                suppressed[j] = true;
            }
        }
    }
    keep
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
