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
