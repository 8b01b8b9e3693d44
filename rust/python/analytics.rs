//! Python binding of the analytics room (`npu_zc.LineCounter` and `npu_zc.Zone` wrap these with `Detections`).

use numpy::{PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::errors::invalid;
use crate::analytics::{AnalyticsError, Anchor, ClassCounts, LineCounter, Tracks, Zone};

fn anchors(names: Vec<String>) -> PyResult<Vec<Anchor>> {
    names.iter().map(|n| Anchor::from_name(n).map_err(err)).collect()
}

fn err(e: AnalyticsError) -> PyErr {
    invalid(e.0)
}

/// One frame's boxes (n, 4), ids (n,) and classes (n,), read into the core's slices.
fn rows(boxes: &PyReadonlyArray2<'_, f32>) -> PyResult<Vec<[f32; 4]>> {
    if boxes.shape()[1] != 4 {
        return Err(invalid(format!("boxes must be (n, 4) x1, y1, x2, y2, got {:?}", boxes.shape())));
    }
    let b = boxes.as_array();
    Ok((0..b.nrows()).map(|i| std::array::from_fn(|k| b[[i, k]])).collect())
}

#[pyclass(module = "npu_zc._core", name = "_LineCounter")]
pub struct PyLineCounter {
    inner: LineCounter,
}

#[pymethods]
impl PyLineCounter {
    #[new]
    #[pyo3(signature = (start, end, anchors, minimum_crossing_threshold, classes))]
    fn new(
        start: (f64, f64),
        end: (f64, f64),
        anchors: Vec<String>,
        minimum_crossing_threshold: usize,
        classes: Option<Vec<i32>>,
    ) -> PyResult<Self> {
        let anchors = self::anchors(anchors)?;
        let inner = LineCounter::new([start.0, start.1], [end.0, end.1], &anchors, minimum_crossing_threshold, classes)
            .map_err(err)?;
        Ok(Self { inner })
    }

    /// One frame's tracks in; (index, is "in") of each box that crossed out.
    fn trigger(
        &mut self,
        boxes: PyReadonlyArray2<'_, f32>,
        track_ids: PyReadonlyArray1<'_, i64>,
        class_ids: PyReadonlyArray1<'_, i32>,
    ) -> PyResult<Vec<(usize, bool)>> {
        let b = rows(&boxes)?;
        let ids = track_ids.as_array().to_vec();
        let classes = class_ids.as_array().to_vec();
        let tracks = Tracks::new(&b, &ids, &classes).map_err(err)?;
        Ok(self
            .inner
            .trigger(tracks)
            .into_iter()
            .map(|c| (c.index, c.direction == crate::analytics::Direction::In))
            .collect())
    }

    #[getter]
    fn in_count(&self) -> u64 {
        self.inner.in_count()
    }

    #[getter]
    fn out_count(&self) -> u64 {
        self.inner.out_count()
    }

    /// ((class, in), ...), ((class, out), ...).
    fn counts_per_class(&self) -> (ClassCounts, ClassCounts) {
        self.inner.counts_per_class()
    }

    #[getter]
    fn anchors(&self) -> Vec<&'static str> {
        self.inner.anchors().iter().map(|a| a.name()).collect()
    }

    fn reset(&mut self) {
        self.inner.reset();
    }
}

/// (kind, index or -1, track id, class, frame, time, dwell frames, dwell seconds).
type Event = (&'static str, i64, i64, i32, i64, f64, i64, f64);

#[pyclass(module = "npu_zc._core", name = "_Zone")]
pub struct PyZone {
    inner: Zone,
}

#[pymethods]
impl PyZone {
    #[new]
    #[pyo3(signature = (polygon, anchors, lost_frames, classes))]
    fn new(
        polygon: Vec<(f64, f64)>,
        anchors: Vec<String>,
        lost_frames: u32,
        classes: Option<Vec<i32>>,
    ) -> PyResult<Self> {
        let anchors = self::anchors(anchors)?;
        let points = polygon.into_iter().map(|(x, y)| [x, y]).collect();
        Ok(Self { inner: Zone::new(points, &anchors, lost_frames, classes).map_err(err)? })
    }

    /// One frame's tracks, its index and time in; whether each is inside, and the events, out.
    fn trigger<'py>(
        &mut self,
        py: Python<'py>,
        boxes: PyReadonlyArray2<'py, f32>,
        track_ids: PyReadonlyArray1<'py, i64>,
        class_ids: PyReadonlyArray1<'py, i32>,
        frame: i64,
        time: f64,
    ) -> PyResult<(Bound<'py, PyArray1<bool>>, Vec<Event>)> {
        let b = rows(&boxes)?;
        let ids = track_ids.as_array().to_vec();
        let classes = class_ids.as_array().to_vec();
        let tracks = Tracks::new(&b, &ids, &classes).map_err(err)?;
        let (flags, events) = self.inner.trigger(tracks, frame, time);
        let events = events
            .into_iter()
            .map(|e| {
                let index = e.index.map_or(-1, |i| i as i64);
                (e.kind.name(), index, e.track_id, e.class, e.frame, e.time, e.dwell_frames, e.dwell_seconds)
            })
            .collect();
        Ok((PyArray1::from_vec(py, flags), events))
    }

    fn contains(&self, x: f64, y: f64) -> bool {
        self.inner.contains([x, y])
    }

    #[getter]
    fn occupancy(&self) -> usize {
        self.inner.occupancy()
    }

    #[getter]
    fn entries(&self) -> u64 {
        self.inner.entries()
    }

    #[getter]
    fn exits(&self) -> u64 {
        self.inner.exits()
    }

    #[getter]
    fn tracks_inside(&self) -> Vec<i64> {
        self.inner.tracks_inside()
    }

    #[getter]
    fn anchors(&self) -> Vec<&'static str> {
        self.inner.anchors().iter().map(|a| a.name()).collect()
    }

    fn reset(&mut self) {
        self.inner.reset();
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLineCounter>()?;
    m.add_class::<PyZone>()
}
