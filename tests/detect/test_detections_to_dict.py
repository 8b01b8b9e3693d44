"""Detections.to_dict converts whole arrays at once: its numbers are still exactly Python's round() of each value
(float32 values at the halfway points included), None where a value is not finite."""

from __future__ import annotations

import math

import numpy as np

from npu_zc.detect import Detections


def _expected(value: float, digits: int) -> float | None:
    return round(float(value), digits) if math.isfinite(float(value)) else None


def test_to_dict_numbers_are_pythons_round_of_each_value() -> None:
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 3, 40):  # a few values go one by one, more as arrays: both the same numbers
        xyxy = (rng.standard_normal((n, 4)) * 500).astype(np.float32)
        xyxy.flat[::2] = (rng.integers(-10**6, 10**6, xyxy.size)[::2] / 1000 + 0.005).astype(np.float32)  # halfway
        scores = rng.uniform(0, 1, n).astype(np.float32)
        keypoints = (rng.standard_normal((n, 2, 3)) * 300).astype(np.float32)
        xywhr = (rng.standard_normal((n, 5)) * 100).astype(np.float32)
        if n > 2:
            xyxy[1, 2], scores[2], keypoints[0, 1, 0] = np.nan, np.inf, -np.inf
        d = Detections(xyxy, scores, rng.integers(0, 3, n).astype(np.int32), {0: "a"}, keypoints=keypoints, xywhr=xywhr,
                       track_ids=np.arange(n, dtype=np.int64))  # fmt: skip
        got = d.to_dict()["detections"]
        assert [x["box"] for x in got] == [[_expected(v, 2) for v in row] for row in xyxy]
        assert [x["score"] for x in got] == [_expected(v, 5) for v in scores]
        assert [x["xywhr"] for x in got] == [[_expected(v, 4) for v in row] for row in xywhr]
        assert [x["keypoints"] for x in got] == [[[_expected(v, 2) for v in k] for k in p] for p in keypoints]
        assert [(x["class_id"], x["track_id"]) for x in got] == list(zip(d.class_ids.tolist(), range(n)))
        assert all(type(x["class_id"]) is int and type(x["track_id"]) is int for x in got)
