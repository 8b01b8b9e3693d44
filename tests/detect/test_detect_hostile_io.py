"""Tracker, drawing and JSON under hostile inputs: refused with typed errors naming the argument, clipped or
skipped as documented, never a raw ValueError/OverflowError/cv2.error, never a silent reshape or wrap."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import npu_zc
from npu_zc import Detections, InvalidArgumentError, Tracker


@pytest.mark.parametrize(("kwargs", "named"), [
    (dict(track_buffer=-1), "track_buffer"), (dict(track_buffer=2**40), "track_buffer"),
    (dict(frame_rate=0), "frame_rate"), (dict(frame_rate=2**70), "frame_rate"),
    (dict(track_high_thresh=float("nan")), "track_high_thresh"), (dict(match_thresh=float("inf")), "match_thresh"),
    (dict(new_track_thresh=None), "new_track_thresh"), (dict(track_low_thresh="0.1"), "track_low_thresh"),
])
def test_tracker_settings_out_of_range_are_typed_errors(kwargs: dict, named: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InvalidArgumentError, match=named):
        Tracker(**kwargs)


@pytest.mark.parametrize("boxes", [np.zeros((2, 8), np.float32), np.zeros((8,), np.float32), np.zeros((2, 2, 4), np.float32),
                                   np.zeros((2, 3), np.float32)])
def test_the_tracker_refuses_boxes_of_another_shape(boxes: np.ndarray) -> None:
    with pytest.raises(InvalidArgumentError, match="boxes"):
        Tracker().update_arrays(boxes, np.ones(2, np.float32), np.zeros(2, np.int32))


def test_the_tracker_refuses_scores_or_class_ids_of_another_length_or_outside_int32() -> None:
    boxes = np.array([[10, 10, 50, 50], [100, 100, 150, 150]], np.float32)
    with pytest.raises(InvalidArgumentError, match="scores"):
        Tracker().update_arrays(boxes, np.ones(3, np.float32), np.zeros(2, np.int32))
    for ids in (np.array([0, 2**32 + 1], np.int64), np.array([0, -2**31 - 1], np.int64)):
        with pytest.raises(InvalidArgumentError, match="int32"):
            Tracker().update_arrays(boxes, np.ones(2, np.float32), ids)
    with pytest.raises(InvalidArgumentError, match="whole numbers"):
        Tracker().update_arrays(boxes, np.ones(2, np.float32), np.array([0.5, 1.0]))
    # In range, any integer dtype (and an empty frame however its array is made) is taken.
    t = Tracker()
    assert len(t.update_arrays(boxes, np.ones(2, np.float32), np.array([0, 2**31 - 1], np.int64))[1]) == 2
    assert len(t.update_arrays(np.zeros(0, np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64))[1]) == 0


def dets(xyxy: list[list[float]], **kw: object) -> Detections:
    n = len(xyxy)
    return Detections(np.array(xyxy, np.float32).reshape(n, 4), np.full(n, 0.9, np.float32), np.zeros(n, np.int32),
                      {0: "person"}, **kw)  # type: ignore[arg-type]


def test_draw_clips_boxes_outside_the_frame_and_skips_non_finite_ones() -> None:
    pytest.importorskip("cv2")
    frame = np.zeros((100, 120, 3), np.uint8)
    bad = dets([[math.nan, 0, 10, 10], [0, 0, math.inf, 50], [-1e30, -1e30, 1e30, 1e30], [10, 10, 3e9, 40]])
    npu_zc.draw(frame, bad, line_width=2)
    # The last box's sides inside the frame are drawn (its right side, 3e9 pixels away, is clipped off);
    # the frame-sized one's sides lie outside the frame and stay there.
    assert frame[25, 10].any() and frame[10, 110].any() and frame[40, 110].any()
    assert not frame[60:90, 0:2].any()
    lone = np.zeros_like(frame)
    npu_zc.draw(lone, dets([[math.nan, 0, 10, 10], [0, 0, math.inf, 50]]))
    assert not lone.any()  # non-finite boxes are skipped
    rotated = dets([[0, 0, 1, 1], [0, 0, 1, 1]], task="obb",
                   xywhr=np.array([[60, 50, 1e12, 20, 0.3], [math.nan, 1, 2, 3, 0]], np.float32))
    npu_zc.draw(np.zeros_like(frame), rotated)


@pytest.mark.parametrize("lw", [0, -3, 10**12, 2.5, True])
def test_draw_refuses_a_bad_line_width(lw: object) -> None:
    pytest.importorskip("cv2")
    with pytest.raises(InvalidArgumentError, match="line_width"):
        npu_zc.draw(np.zeros((10, 10, 3), np.uint8), dets([[1, 1, 5, 5]]), line_width=lw)  # type: ignore[arg-type]


def test_to_dict_is_strict_json_non_finite_values_are_none() -> None:
    d = dets([[math.nan, 1.0, math.inf, -math.inf]])
    d.scores[0] = np.nan
    out = d.to_dict()
    text = json.dumps(out, allow_nan=False)  # raises on NaN / Infinity
    assert json.loads(text)["detections"][0]["box"] == [None, 1.0, None, None]
    assert out["detections"][0]["score"] is None
    kp = dets([[1, 2, 3, 4]], task="pose", keypoints=np.array([[[math.nan, 2.0, 1.0]]], np.float32))
    assert kp.to_dict()["detections"][0]["keypoints"] == [[None, 2.0, 1.0]]


def test_the_tracker_binding_names_its_counts() -> None:
    from npu_zc._core import _ByteTracker

    for buffer, rate, named in ((-1, 30, "track_buffer"), (2**40, 30, "track_buffer"), (30, 2**70, "frame_rate")):
        with pytest.raises(InvalidArgumentError, match=named):
            _ByteTracker(0.25, 0.1, 0.25, buffer, 0.8, True, rate)
