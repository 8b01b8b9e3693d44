//! Python binding of ByteTrack (`npu_zc.Tracker` wraps it with `Detections`).

use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::errors::invalid;
use crate::detect::track::{ByteTracker, Detection, TrackerConfig};

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
        track_buffer: u32,
        match_thresh: f32,
        fuse_score: bool,
        frame_rate: u32,
    ) -> PyResult<Self> {
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

    /// Boxes (n, 4) f32 corners, scores (n,) f32, classes (n,) i32 in; the
    /// confirmed tracks' boxes, ids, scores, classes and input positions out.
    fn update<'py>(
        &mut self,
        py: Python<'py>,
        xyxy: PyReadonlyArray2<'py, f32>,
        scores: PyReadonlyArray1<'py, f32>,
        class_ids: PyReadonlyArray1<'py, i32>,
    ) -> PyResult<Tracks<'py>> {
        let n = xyxy.shape()[0];
        if xyxy.shape()[1] != 4 || scores.len() != n || class_ids.len() != n {
            return Err(invalid(format!(
                "a tracker takes n boxes (n, 4), n scores and n class ids; got boxes {:?}, {} scores, {} class ids",
                xyxy.shape(),
                scores.len(),
                class_ids.len()
            )));
        }
        let (boxes, scores, classes) = (xyxy.as_array(), scores.as_array(), class_ids.as_array());
        let detections: Vec<Detection> = (0..n)
            .map(|i| Detection {
                xyxy: [boxes[[i, 0]], boxes[[i, 1]], boxes[[i, 2]], boxes[[i, 3]]],
                score: scores[i],
                class: classes[i],
            })
            .collect();
        let tracker = &mut self.inner;
        let tracked = py.detach(|| tracker.update(&detections));
        let m = tracked.len();
        let flat: Vec<f32> = tracked.iter().flat_map(|t| t.xyxy).collect();
        let out_boxes = PyArray1::from_vec(py, flat).reshape([m, 4])?;
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
