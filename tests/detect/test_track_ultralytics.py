"""npu_zc.Tracker against Ultralytics' own BYTETracker, frame by frame.

The fixtures (tests/detect/fixtures/bytetrack.npz, and bytetrack_obb.npz for oriented boxes) hold
synthetic detection sequences and what Ultralytics' tracker returned for each frame;
scripts/make_track_fixtures.py made them (it needs ultralytics + torch + lap, in a separate venv; CI only
reads the fixtures).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from npu_zc.detect.track import Tracker

FIXTURE = Path(__file__).parent / "fixtures" / "bytetrack.npz"
FIXTURE_OBB = FIXTURE.with_name("bytetrack_obb.npz")


def sequences(fixture: Path = FIXTURE) -> list[str]:
    with np.load(fixture) as data:
        return sorted({key.split("/")[0] for key in data.files if "/" in key})


def frames(data: np.lib.npyio.NpzFile, name: str, boxes: str = "xyxy"):  # type: ignore[no-untyped-def]
    counts, expected_counts = data[f"{name}/counts"], data[f"{name}/expected_counts"]
    starts, expected_starts = np.r_[0, np.cumsum(counts)], np.r_[0, np.cumsum(expected_counts)]
    for f in range(len(counts)):
        a, b = starts[f], starts[f + 1]
        c, d = expected_starts[f], expected_starts[f + 1]
        yield (
            data[f"{name}/{boxes}"][a:b],
            data[f"{name}/scores"][a:b],
            data[f"{name}/classes"][a:b],
            data[f"{name}/expected"][c:d],
        )


@pytest.mark.parametrize("name", sequences())
def test_ids_match_ultralytics_frame_by_frame(name: str) -> None:
    tracker = Tracker()  # bytetrack.yaml defaults
    with np.load(FIXTURE) as data:
        assert data["ultralytics_version"].item().startswith("8.")
        for f, (xyxy, scores, classes, expected) in enumerate(frames(data, name)):
            boxes, ids, out_scores, out_classes, index = tracker.update_arrays(xyxy, scores, classes)
            where = f"{name} frame {f + 1}"
            np.testing.assert_array_equal(ids, expected[:, 4].astype(np.int64), err_msg=where)
            np.testing.assert_array_equal(index, expected[:, 7].astype(np.int64), err_msg=where)
            np.testing.assert_array_equal(out_classes, expected[:, 6].astype(np.int32), err_msg=where)
            np.testing.assert_array_equal(out_scores, expected[:, 5], err_msg=where)
            # The Kalman estimate: float64 in both, summed in a different order.
            np.testing.assert_allclose(boxes, expected[:, :4], rtol=0, atol=1e-3, err_msg=where)


@pytest.mark.parametrize("name", sequences(FIXTURE_OBB))
def test_oriented_boxes_match_ultralytics_frame_by_frame(name: str) -> None:
    """OBB: long-edge form, the angle's half-turn rule, probiou costs; rows x, y, w, h, angle, id, score,
    class, index."""
    tracker = Tracker()
    with np.load(FIXTURE_OBB) as data:
        for f, (xywhr, scores, classes, expected) in enumerate(frames(data, name, "xywhr")):
            boxes, ids, out_scores, out_classes, index = tracker.update_arrays(xywhr, scores, classes)
            where = f"{name} frame {f + 1}"
            np.testing.assert_array_equal(ids, expected[:, 5].astype(np.int64), err_msg=where)
            np.testing.assert_array_equal(index, expected[:, 8].astype(np.int64), err_msg=where)
            np.testing.assert_array_equal(out_classes, expected[:, 7].astype(np.int32), err_msg=where)
            np.testing.assert_array_equal(out_scores, expected[:, 6], err_msg=where)
            assert boxes.shape == (len(ids), 5)
            np.testing.assert_allclose(boxes[:, :4], expected[:, :4], rtol=0, atol=1e-3, err_msg=where)
            np.testing.assert_allclose(boxes[:, 4], expected[:, 4], rtol=0, atol=1e-6, err_msg=where)


def test_oriented_fixture_turns_flips_and_crosses() -> None:
    """The OBB sequences are not trivial: a box reported in three equivalent forms keeps one id and an
    angle that does not jump by half a turn; two crossing thin boxes keep their ids."""
    with np.load(FIXTURE_OBB) as data:
        rows = data["obb_turning/expected"]
        flipping = rows[rows[:, 7] == 1]
        assert len(np.unique(flipping[:, 5])) == 1 and len(flipping) > 60
        assert np.abs(np.diff(flipping[:, 4])).max() < 0.1  # reported +-pi/2 and -pi: the track's angle is steady
        assert (flipping[:, 2] >= flipping[:, 3]).all()  # long-edge form
        crossing = data["obb_crossing/expected"]
        assert len(np.unique(crossing[crossing[:, 7] == 0][:, 5])) == 2


def test_detections_with_rotated_boxes_are_tracked_as_rotated() -> None:
    import npu_zc

    tracker = Tracker()
    xywhr = np.array([[100, 100, 30, 90, 0.2], [300, 200, 80, 20, 1.0]], np.float32)
    d = npu_zc.Detections(np.zeros((2, 4), np.float32), np.array([0.9, 0.8], np.float32), np.array([0, 1], np.int32),
                          task="obb", xywhr=xywhr)
    out = tracker.update(d)
    assert out.track_ids.tolist() == [1, 2] and out.xywhr is not None
    # Long-edge form: (30, 90, 0.2) is tracked as (90, 30, 0.2 + pi/2).
    np.testing.assert_allclose(out.xywhr[0], [100, 100, 90, 30, 0.2 + np.pi / 2], atol=1e-4)
    np.testing.assert_allclose(out.xyxy[1], [300 - 40 * np.cos(1.0) - 10 * np.sin(1.0), 200 - 40 * np.sin(1.0) - 10 * np.cos(1.0),
                                             300 + 40 * np.cos(1.0) + 10 * np.sin(1.0), 200 + 40 * np.sin(1.0) + 10 * np.cos(1.0)],
                               atol=1e-3)


def test_fixture_exercises_lost_found_and_new_tracks() -> None:
    """The sequences are not trivial: ids are found again after gaps, and new ids appear late."""
    with np.load(FIXTURE) as data:
        ids = data["occlusion/expected"][:, 4]
        counts = data["occlusion/expected_counts"]
        per_frame = np.split(ids, np.cumsum(counts)[:-1])
        assert {1, 2, 3} <= set(per_frame[0].astype(int))
        assert 2 not in per_frame[25] and 2 in per_frame[35]  # hidden 10 frames, found again
        assert 4 in set(ids.astype(int))  # hidden 40 frames: a new id
        assert len(np.unique(data["random_2/expected"][:, 4])) >= 20


def test_reset_and_defaults() -> None:
    tracker = Tracker()
    assert tracker.config == {
        "track_high_thresh": 0.25, "track_low_thresh": 0.1, "new_track_thresh": 0.25, "track_buffer": 30,
        "match_thresh": 0.8, "fuse_score": True, "frame_rate": 30,
    }
    box = np.array([[10, 10, 50, 90]], np.float32)
    for _ in range(3):
        _, ids, *_ = tracker.update_arrays(box, np.array([0.9], np.float32), np.array([0], np.int32))
    assert tracker.frame_id == 3 and ids.tolist() == [1]
    tracker.reset()
    assert tracker.frame_id == 0
    tracker.update_arrays(box + 300, np.array([0.9], np.float32), np.array([0], np.int32))
    _, ids, *_ = tracker.update_arrays(box + 300, np.array([0.9], np.float32), np.array([0], np.int32))
    assert ids.tolist() == [1]


def test_bad_input_is_refused() -> None:
    import npu_zc

    tracker = Tracker()
    with pytest.raises(npu_zc.InvalidArgumentError, match="n scores"):
        tracker.update_arrays(np.zeros((2, 4)), np.zeros(3), np.zeros(2))
    with pytest.raises(npu_zc.InvalidArgumentError, match="finite"):
        Tracker(match_thresh=float("nan"))
    # NaN boxes and scores, boxes without area: ignored, as Ultralytics drops degenerate boxes.
    boxes = np.array([[np.nan, 0, 10, 10], [0, 0, 0, 10], [0, 0, 10, 10]], np.float32)
    _, ids, _, _, index = tracker.update_arrays(boxes, np.array([0.9, 0.9, np.nan], np.float32), np.zeros(3, np.int32))
    assert ids.size == 0 and index.size == 0


@settings(max_examples=60, deadline=None)
@given(
    start=st.tuples(st.floats(0, 1000), st.floats(0, 1000)),
    velocity=st.tuples(st.floats(-0.15, 0.15), st.floats(-0.15, 0.15)),  # per frame, as a fraction of the size
    size=st.tuples(st.floats(10, 300), st.floats(10, 300)),
    score=st.floats(0.6, 1.0),
    frames_=st.integers(2, 60),
)
def test_a_steadily_moving_box_keeps_one_id(start, velocity, size, score, frames_) -> None:  # type: ignore[no-untyped-def]
    """Within what the first-stage cost allows (1 - IoU x score <= 0.8 before the filter knows the speed)."""
    tracker = Tracker()
    for t in range(frames_):
        x, y = start[0] + velocity[0] * size[0] * t, start[1] + velocity[1] * size[1] * t
        box = np.array([[x, y, x + size[0], y + size[1]]], np.float32)
        _, ids, _, _, _ = tracker.update_arrays(box, np.array([score], np.float32), np.zeros(1, np.int32))
        assert ids.tolist() == [1]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.floats(0, 600), st.floats(0, 600), st.floats(1, 200), st.floats(1, 200),
                                   st.floats(0, 1)), max_size=10), min_size=1, max_size=30))
def test_ids_are_never_reused_or_repeated(frames_) -> None:  # type: ignore[no-untyped-def]
    tracker = Tracker()
    seen: set[int] = set()
    for frame in frames_:
        dets = np.array([[x, y, x + w, y + h] for x, y, w, h, _ in frame], np.float32).reshape(-1, 4)
        scores = np.array([s for *_, s in frame], np.float32)
        _, ids, _, _, index = tracker.update_arrays(dets, scores, np.zeros(len(frame), np.int32))
        now = ids.tolist()
        assert len(set(now)) == len(now), "an id twice in one frame"
        assert len(set(index.tolist())) == len(index), "a detection in two tracks"
        assert all(0 <= i < len(frame) for i in index.tolist())
        # A new track's id is larger than every id before it: an id is never handed out twice.
        new = sorted(set(now) - seen)
        assert all(i >= 1 for i in new)
        assert not seen or not new or new[0] > max(seen)
        seen |= set(now)
