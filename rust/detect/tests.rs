//! Decode tests: Ultralytics' rules on hand-made outputs.

use super::*;

/// A channel-major `[1, 4+nc, n]` f32 output from per-anchor (box, scores).
fn anchor_free(nc: usize, anchors: &[([f32; 4], Vec<f32>)]) -> Vec<u8> {
    let n = anchors.len();
    let mut values = vec![0f32; (4 + nc) * n];
    for (i, (b, s)) in anchors.iter().enumerate() {
        for k in 0..4 {
            values[k * n + i] = b[k];
        }
        for (c, &v) in s.iter().enumerate() {
            values[(4 + c) * n + i] = v;
        }
    }
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn layout(nc: usize) -> Layout {
    Layout { family: Family::AnchorFree, task: Task::Detect, nc }
}

#[test]
fn anchor_free_threshold_best_class_and_nms() {
    let anchors = vec![
        ([50.0, 50.0, 20.0, 20.0], vec![0.1, 0.9]),
        ([51.0, 50.0, 20.0, 20.0], vec![0.8, 0.85]), // same class as 0, overlaps: suppressed
        ([52.0, 50.0, 20.0, 20.0], vec![0.6, 0.3]),  // other class: kept
        ([200.0, 50.0, 20.0, 20.0], vec![0.25, 0.2]), // not strictly above 0.25
    ];
    let data = anchor_free(2, &anchors);
    let t = Tensor::contiguous(&data, Element::F32, &[1, 6, 4]).unwrap();
    let d = decode(t.matrix().unwrap(), &layout(2), &Params::default()).unwrap();
    assert_eq!(d.anchors, vec![0, 2]);
    assert_eq!(d.classes, vec![1, 0]);
    assert_eq!(d.scores, vec![0.9, 0.6]);
    assert_eq!(d.boxes[0], [40.0, 40.0, 60.0, 60.0]);
}

#[test]
#[ignore]
fn timing() {
    let n = 8400;
    let values: Vec<f32> = (0..84 * n).map(|i| ((i * 7919) % 1000) as f32 / 5000.0).collect();
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let t = Tensor::contiguous(&data, Element::F32, &[1, 84, n]).unwrap();
    let m = t.matrix().unwrap();
    let start = std::time::Instant::now();
    for _ in 0..100 {
        decode(m, &layout(80), &Params::default()).unwrap();
    }
    eprintln!("decode: {:?}", start.elapsed() / 100);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// Ultralytics' rules written plainly: best class, threshold, stable sort, greedy NMS over all pairs.
    fn reference(values: &[f32], nc: usize, n: usize, p: &Params) -> Vec<(usize, u32)> {
        let at = |c: usize, i: usize| values[c * n + i];
        let mut found: Vec<(usize, f32, u32)> = Vec::new();
        for i in 0..n {
            let (mut s, mut k) = (f32::NEG_INFINITY, 0);
            for c in 0..nc {
                if at(4 + c, i) > s {
                    (s, k) = (at(4 + c, i), c as u32);
                }
            }
            if s > p.conf {
                found.push((i, s, k));
            }
        }
        found.sort_by(|a, b| b.1.total_cmp(&a.1));
        found.truncate(p.max_nms);
        let xyxy = |i: usize| {
            let (x, y, w, h) = (at(0, i), at(1, i), at(2, i) / 2.0, at(3, i) / 2.0);
            [x - w, y - h, x + w, y + h]
        };
        let mut keep: Vec<(usize, u32)> = Vec::new();
        for &(i, _, k) in &found {
            let a = xyxy(i);
            let beaten = keep.iter().any(|&(j, kj)| {
                let b = xyxy(j);
                let inter = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0) * (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
                kj == k && inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter) > p.iou
            });
            if !beaten && keep.len() < p.max_det {
                keep.push((i, k));
            }
        }
        keep
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn decode_matches_the_plain_rules(
            nc in prop_oneof![Just(1usize), Just(3), 1usize..300],
            n in 1usize..200,
            seed in any::<u64>(),
            grid in prop_oneof![Just(4u32), Just(1000)],
            max_nms in prop_oneof![Just(5usize), Just(30000)],
            f16 in any::<bool>(),
        ) {
            // Scores on a coarse grid make ties; boxes in a small area make overlaps.
            let mut state = seed | 1;
            let mut next = || { state ^= state << 13; state ^= state >> 7; state ^= state << 17; state };
            let mut values = vec![0f32; (4 + nc) * n];
            for i in 0..n {
                values[i] = (next() % 100) as f32;
                values[n + i] = (next() % 100) as f32;
                values[2 * n + i] = (next() % 40 + 1) as f32;
                values[3 * n + i] = (next() % 40 + 1) as f32;
            }
            for v in &mut values[4 * n..] {
                *v = (next() % grid as u64) as f32 / grid as f32;
            }
            if f16 {
                for v in &mut values { *v = half::f16::from_f32(*v).to_f32(); }
            }
            let p = Params { max_nms, ..Params::default() };
            let want = reference(&values, nc, n, &p);
            let data: Vec<u8> = if f16 {
                values.iter().flat_map(|v| half::f16::from_f32(*v).to_bits().to_ne_bytes()).collect()
            } else {
                values.iter().flat_map(|v| v.to_ne_bytes()).collect()
            };
            let element = if f16 { Element::F16 } else { Element::F32 };
            let t = Tensor::contiguous(&data, element, &[1, 4 + nc, n]).unwrap();
            let d = decode(t.matrix().unwrap(), &layout(nc), &p).unwrap();
            let got: Vec<(usize, u32)> = d.anchors.iter().copied().zip(d.classes.iter().copied()).collect();
            prop_assert_eq!(got, want);
        }
    }
}
