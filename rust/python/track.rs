//! Python binding of ByteTrack (`npu_zc.Tracker` wraps it with `Detections`).

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::errors::{invalid, non_negative};
use crate::detect::track::{Bbox, ByteTracker, Detection, TrackerConfig};

/// One stream's ByteTrack state.
#[pyclass(module = "npu_zc._core", name = "_ByteTracker")]
pub struct PyByteTracker {
    inner: ByteTracker,
}

type Tracks<'py> = (
    Bound<'py, PyArray2<f32>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<f32>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<i64>>,
);

#[pymethods]
impl PyByteTracker {
    #[new]
    #[pyo3(signature = (track_high_thresh, track_low_thresh, new_track_thresh, track_buffer, match_thresh, fuse_score, frame_rate))]
    fn new(
        track_high_thresh: f32,
        track_low_thresh: f32,
        new_track_thresh: f32,
        track_buffer: &Bound<'_, PyAny>,
        match_thresh: f32,
        fuse_score: bool,
        frame_rate: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        // A count out of u32's range is an InvalidArgumentError naming it, not PyO3's OverflowError.
        let count = |v: &Bound<'_, PyAny>, what: &str| {
            u32::try_from(non_negative(v, what)?).map_err(|_| invalid(format!("{what} must be below 2**32, got {v}")))
        };
        let (track_buffer, frame_rate) = (count(track_buffer, "track_buffer")?, count(frame_rate, "frame_rate")?);
        let config = TrackerConfig {
            track_high_thresh,
            track_low_thresh,
            new_track_thresh,
            track_buffer,
            match_thresh,
            fuse_score,
            frame_rate,
        };
        let inner = ByteTracker::new(config).map_err(|e| invalid(e.0))?;
        Ok(Self { inner })
    }

    /// Boxes (n, 4) f32 corners or (n, 5) rotated (cx, cy, w, h, radians),
    /// scores (n,) f32, classes (n,) i32 in; the confirmed tracks' boxes (of the
    /// same kind), ids, scores, classes and input positions out.
    fn update<'py>(
        &mut self,
        py: Python<'py>,
        boxes: PyReadonlyArray2<'py, f32>,
        scores: PyReadonlyArray1<'py, f32>,
        class_ids: PyReadonlyArray1<'py, i32>,
    ) -> PyResult<Tracks<'py>> {
        let [n, width] = [boxes.shape()[0], boxes.shape()[1]];
        if !(width == 4 || width == 5) || scores.len() != n || class_ids.len() != n {
            return Err(invalid(format!(
                "a tracker takes n boxes ((n, 4) corners or (n, 5) rotated), n scores and n class ids; \
                 got boxes {:?}, {} scores, {} class ids",
                boxes.shape(),
                scores.len(),
                class_ids.len()
            )));
        }
        let (b, scores, classes) = (boxes.as_array(), scores.as_array(), class_ids.as_array());
        let detections: Vec<Detection> = (0..n)
            .map(|i| Detection {
                bbox: if width == 4 {
                    Bbox::Xyxy(std::array::from_fn(|k| b[[i, k]]))
                } else {
                    Bbox::Xywhr(std::array::from_fn(|k| b[[i, k]]))
                },
                score: scores[i],
                class: classes[i],
            })
            .collect();
        let tracker = &mut self.inner;
        let tracked = py.detach(|| tracker.update(&detections));
        let m = tracked.len();
        // Each track's box as it came in (a tracker fed both kinds gives each its own).
        let flat: Vec<f32> = tracked
            .iter()
            .flat_map(|t| match t.bbox {
                Bbox::Xywhr(r) if width == 5 => r.to_vec(),
                Bbox::Xywhr([x, y, w, h, _]) => vec![x - w / 2.0, y - h / 2.0, x + w / 2.0, y + h / 2.0],
                Bbox::Xyxy(c) if width == 4 => c.to_vec(),
                Bbox::Xyxy([x1, y1, x2, y2]) => vec![(x1 + x2) / 2.0, (y1 + y2) / 2.0, x2 - x1, y2 - y1, 0.0],
            })
            .collect();
        let out_boxes = PyArray1::from_vec(py, flat).reshape([m, width])?;
        Ok((
            out_boxes,
            PyArray1::from_vec(py, tracked.iter().map(|t| t.track_id as i64).collect()),
            PyArray1::from_vec(py, tracked.iter().map(|t| t.score).collect()),
            PyArray1::from_vec(py, tracked.iter().map(|t| t.class).collect()),
            PyArray1::from_vec(py, tracked.iter().map(|t| t.index as i64).collect()),
        ))
    }

    fn reset(&mut self) {
        self.inner.reset();
    }

    #[getter]
    fn frame_id(&self) -> u64 {
        self.inner.frame_id()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyByteTracker>()
}
