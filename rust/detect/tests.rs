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

/// `cargo test --release --lib detect::tests::timing -- --ignored --nocapture`:
/// the scan and the whole decode on an `[1, 84, 8400]` output with 373 anchors
/// above the threshold, per element type (figures for docs/detect.md).
#[test]
#[ignore]
fn timing() {
    let (nc, n) = (80, 8400);
    let mut state = 7u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 10_000) as f32 / 10_000.0
    };
    let mut values = vec![0f32; (4 + nc) * n];
    for i in 0..n {
        values[i] = next() * 640.0;
        values[n + i] = next() * 640.0;
        values[2 * n + i] = 8.0 + next() * 150.0;
        values[3 * n + i] = 8.0 + next() * 150.0;
    }
    for v in &mut values[4 * n..] {
        *v = next() * 0.05;
    }
    for i in (0..n).step_by(n / 373) {
        values[(4 + (i % nc)) * n + i] = 0.26 + next() * 0.7;
    }
    let f32s: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let f16s: Vec<u8> = values.iter().flat_map(|v| half::f16::from_f32(*v).to_bits().to_ne_bytes()).collect();
    let bf16s: Vec<u8> = values.iter().flat_map(|v| half::bf16::from_f32(*v).to_bits().to_ne_bytes()).collect();
    for (name, data, element) in
        [("f32", &f32s, Element::F32), ("f16", &f16s, Element::F16), ("bf16", &bf16s, Element::Bf16)]
    {
        let t = Tensor::contiguous(data, element, &[1, 84, n]).unwrap();
        let m = t.matrix().unwrap();
        // The best of many runs: the host is shared, the minimum is what the code does.
        let best_of = |f: &mut dyn FnMut()| {
            (0..300)
                .map(|_| {
                    let t = std::time::Instant::now();
                    f();
                    t.elapsed()
                })
                .min()
                .unwrap()
        };
        let mut hits = Vec::new();
        let scan_time = best_of(&mut || {
            hits.clear();
            scan::scan(m, 4, nc, 0.25, &mut hits);
        });
        let mut kept = 0;
        let decode_time = best_of(&mut || kept = decode(m, &layout(nc), &Params::default()).unwrap().len());
        let mut copy = vec![0u8; data.len()];
        let copy_time = best_of(&mut || copy.copy_from_slice(data));
        eprintln!("  memcpy of the output {copy_time:?}");
        eprintln!("{name}: scan {scan_time:?} ({} hits), decode {decode_time:?} ({kept} kept)", hits.len());
    }
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
            n in prop_oneof![1usize..200, 200usize..1100],
            seed in any::<u64>(),
            grid in prop_oneof![Just(4u32), Just(1000)],
            max_nms in prop_oneof![Just(5usize), Just(30000)],
            element in prop_oneof![Just(Element::F32), Just(Element::F16), Just(Element::Bf16)],
            specials in prop_oneof![Just(false), Just(true)],
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
                if specials {
                    // NaN, infinities, negatives and signed zeros among the scores.
                    *v = match next() % 16 {
                        0 => f32::NAN,
                        1 => -f32::NAN,
                        2 => f32::INFINITY,
                        3 => f32::NEG_INFINITY,
                        4 => -*v,
                        5 => -0.0,
                        _ => *v,
                    };
                }
            }
            let narrow = |v: f32| match element {
                Element::F16 => half::f16::from_f32(v).to_bits(),
                _ => half::bf16::from_f32(v).to_bits(),
            };
            if element != Element::F32 {
                for v in &mut values {
                    let bits = narrow(*v);
                    *v = if element == Element::F16 { half::f16::from_bits(bits).to_f32() } else { half::bf16::from_bits(bits).to_f32() };
                }
            }
            let p = Params { max_nms, ..Params::default() };
            let want = reference(&values, nc, n, &p);
            let data: Vec<u8> = if element == Element::F32 {
                values.iter().flat_map(|v| v.to_ne_bytes()).collect()
            } else {
                values.iter().flat_map(|v| narrow(*v).to_ne_bytes()).collect()
            };
            let t = Tensor::contiguous(&data, element, &[1, 4 + nc, n]).unwrap();
            let d = decode(t.matrix().unwrap(), &layout(nc), &p).unwrap();
            let got: Vec<(usize, u32)> = d.anchors.iter().copied().zip(d.classes.iter().copied()).collect();
            prop_assert_eq!(got, want);
        }
    }
}

#[test]
fn a_layout_whose_channel_count_overflows_is_refused_not_wrapped() {
    let data = anchor_free(2, &[([50.0, 50.0, 20.0, 20.0], vec![0.1, 0.9])]);
    let t = Tensor::contiguous(&data, Element::F32, &[1, 6, 1]).unwrap();
    // 4 + (2**64 - 2) + 0 would wrap to 6 channels, the output's shape.
    let huge = Layout { family: Family::AnchorFree, task: Task::Detect, nc: usize::MAX - 1 };
    assert_eq!(huge.channels(), usize::MAX);
    assert!(decode(t.matrix().unwrap(), &huge, &Params::default()).is_err());
    let pose = Layout { family: Family::End2End, task: Task::Pose { k: usize::MAX / 2, dim: 3 }, nc: 1 };
    assert!(pose.check().is_err());
}

#[test]
fn a_decoder_refuses_frames_no_clip_can_take() {
    let l = layout(2);
    for frame in [[-5.0, -5.0], [f64::NAN, 10.0], [f64::INFINITY, 10.0]] {
        let g = Geometry { frame: Some(frame), ..Geometry::default() };
        let e = Decoder::new(l, Params::default(), g, None).unwrap_err();
        assert!(e.message.contains("frame_size"), "{}", e.message);
    }
    let g = Geometry { scale: [0.0, 1.0], ..Geometry::default() };
    assert!(Decoder::new(l, Params::default(), g, None).is_err());
}
