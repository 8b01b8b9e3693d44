"""Detections.polygons against Ultralytics' Results.masks.xy.

The fixture (tests/detect/fixtures/segment_polygons.npz, made by scripts/make_yolo_fixtures.py with
Ultralytics 8.4.190) holds a segmentation output whose masks have holes and several parts, and what
Ultralytics made of it: ``process_mask`` at the model input, then ``Masks.xy`` (``masks2segments``,
strategy "all", and ``scale_coords`` to the frame) and the "largest" strategy. Below, Ultralytics'
``masks2segments`` + ``scale_coords`` is also written out once with the same cv2 calls, to check the
tracing on each box's pixels against the tracing on the whole mask, for every mask npu_zc makes."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from npu_zc import Transform, YoloLayout, decode_yolo

from test_yolo_golden import letterbox

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def case() -> dict:
    f = dict(np.load(FIXTURES / "segment_polygons.npz"))
    for key in ("output", "protos"):
        f[key] = f[key].astype(np.float32)  # float16 values, as Ultralytics read them
    for strategy in ("all", "largest"):
        cuts = np.cumsum(f[f"{strategy}_counts"])[:-1]
        f[strategy] = np.split(f[f"{strategy}_points"], cuts)
    return f


@pytest.fixture(scope="module")
def detections(case: dict):  # type: ignore[no-untyped-def]
    layout = YoloLayout.from_outputs([case["output"].shape, case["protos"].shape])
    return decode_yolo([case["output"], case["protos"]], layout, transform=letterbox())


def reference_polygons(masks: np.ndarray, strategy: str, t: Transform) -> list[np.ndarray]:
    """Ultralytics' ops.masks2segments (with data.converter.merge_multi_segment) and ops.scale_coords,
    written out with the same cv2 and numpy calls, on whole (n, H, W) masks at the model input."""
    def merge(segments: list[np.ndarray]) -> list[np.ndarray]:
        s: list[np.ndarray] = []
        segments = [np.array(i).reshape(-1, 2) for i in segments]
        idx_list: list[list[int]] = [[] for _ in range(len(segments))]
        for i in range(1, len(segments)):
            dis = ((segments[i - 1][:, None, :] - segments[i][None, :, :]) ** 2).sum(-1)
            idx1, idx2 = np.unravel_index(np.argmin(dis, axis=None), dis.shape)
            idx_list[i - 1].append(int(idx1))
            idx_list[i].append(int(idx2))
        for k in range(2):
            if k == 0:
                for i, idx in enumerate(idx_list):
                    if len(idx) == 2 and idx[0] > idx[1]:
                        idx = [len(segments[i]) - 1 - x for x in idx]
                        segments[i] = segments[i][::-1, :]
                    segments[i] = np.roll(segments[i], -idx[0], axis=0)
                    segments[i] = np.concatenate([segments[i], segments[i][:1]])
                    if i in {0, len(idx_list) - 1}:
                        s.append(segments[i])
                    else:
                        idx = [0, idx[1] - idx[0]]
                        s.append(segments[i][idx[0]: idx[1] + 1])
            else:
                for i in range(len(idx_list) - 1, -1, -1):
                    if i not in {0, len(idx_list) - 1}:
                        idx = idx_list[i]
                        nidx = abs(idx[1] - idx[0])
                        s.append(segments[i][nidx:])
        return s

    out = []
    w0, h0 = t.roi[2], t.roi[3]
    for x in np.ascontiguousarray(masks.astype("uint8")):
        c = cv2.findContours(x, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)[0]
        if c:
            if strategy == "all":
                c = np.concatenate(merge([x.reshape(-1, 2) for x in c])) if len(c) > 1 else c[0].reshape(-1, 2)
            else:
                c = np.array(c[np.array([len(x) for x in c]).argmax()]).reshape(-1, 2)
        else:
            c = np.zeros((0, 2))
        xy = c.astype("float32")
        xy[..., 0] -= t.offset[0]
        xy[..., 1] -= t.offset[1]
        xy[..., 0] /= t.scale[0]
        xy[..., 1] /= t.scale[1]
        xy[..., 0] = xy[..., 0].clip(0, w0)
        xy[..., 1] = xy[..., 1].clip(0, h0)
        out.append(xy)
    return out


def whole_masks(d) -> np.ndarray:  # type: ignore[no-untyped-def]
    """npu_zc's masks at the model input, each box's pixels put back into a whole input plane."""
    imgsz = int(np.load(FIXTURES / "letterbox.npz")["imgsz"])
    planes = np.zeros((len(d), imgsz, imgsz), np.uint8)
    for i in range(len(d)):
        m, x, y = d.input_masks.mask(i)
        planes[i, y:y + m.shape[0], x:x + m.shape[1]] = m
    return planes


def test_boxes_and_input_masks_are_ultralytics(case: dict, detections) -> None:  # type: ignore[no-untyped-def]
    d = detections
    assert len(d) == len(case["scores"]) > 40
    np.testing.assert_array_equal(d.class_ids, case["classes"])
    expected = np.unpackbits(case["input_masks"], axis=-1)[..., : whole_masks(d).shape[-1]].astype(bool)
    ours = whole_masks(d).astype(bool)
    for i in range(len(d)):
        inter, union = (ours[i] & expected[i]).sum(), (ours[i] | expected[i]).sum()
        assert inter / union >= 0.99, i


@pytest.mark.parametrize("strategy", ["all", "largest"])
def test_tracing_box_pixels_equals_tracing_the_whole_mask(strategy: str, detections) -> None:  # type: ignore[no-untyped-def]
    """Exact: the points from each box's pixels are Ultralytics' code on the whole input mask."""
    d = detections
    ours = d.input_masks.polygons(strategy) if strategy != "all" else d.polygons
    reference = reference_polygons(whole_masks(d), strategy, letterbox())
    assert len(ours) == len(reference) == len(d)
    for i, (a, b) in enumerate(zip(ours, reference)):
        assert a.dtype == np.float32 and a.shape[1:] == (2,)
        np.testing.assert_array_equal(a, b, err_msg=f"detection {i}")


@pytest.mark.parametrize("strategy", ["all", "largest"])
def test_polygons_match_ultralytics_masks_xy(strategy: str, case: dict, detections) -> None:  # type: ignore[no-untyped-def]
    """Against Ultralytics' own: the same points where the masks at the input agree to the pixel (nearly
    all; a pixel whose value is ~0 can flip with the summation order), the same area otherwise."""
    d = detections
    ours = d.polygons if strategy == "all" else d.input_masks.polygons(strategy)
    theirs = case[strategy]
    assert len(ours) == len(theirs)
    assert sum(len(p) for p in theirs) > 20 * len(theirs)  # shapes, not rectangles
    assert any(len(a) != len(b) for a, b in zip(case["all"], case["largest"]))  # several parts merged
    exact = 0
    w0, h0 = (int(v) for v in np.load(FIXTURES / "letterbox.npz")["frame"])
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape == b.shape and np.allclose(a, b, atol=1e-3):
            exact += 1
            continue
        fill = [np.zeros((h0, w0), np.uint8) for _ in range(2)]
        for canvas, p in zip(fill, (a, b)):
            cv2.fillPoly(canvas, [np.round(p).astype(np.int32)], 1)
        inter, union = np.logical_and(*fill).sum(), np.logical_or(*fill).sum()
        assert inter / union >= 0.95, f"detection {i}: polygon IoU {inter / union}"
    assert exact >= 0.9 * len(theirs), f"{exact} of {len(theirs)} polygons point for point"


def test_polygons_follow_selection_tracks_and_json(detections) -> None:  # type: ignore[no-untyped-def]
    d = detections
    some = d[np.arange(len(d)) % 3 == 1]
    assert len(some.polygons) == len(some)
    for a, b in zip(some.polygons, d.polygons[1::3]):
        np.testing.assert_array_equal(a, b)
    tracked = d.with_tracks(np.arange(len(d)) + 1)
    np.testing.assert_array_equal(tracked.polygons[5], d.polygons[5])
    items = json.loads(json.dumps(d.to_dict()))["detections"]
    np.testing.assert_allclose(np.array(items[0]["polygon"]), d.polygons[0], atol=0.01)
    with pytest.raises(ValueError, match="strategy"):
        d.input_masks.polygons("biggest")


def test_other_tasks_have_no_polygons() -> None:
    out = np.zeros((1, 84, 2100), np.float32)
    out[0, :4, 7] = (100, 100, 50, 50)
    out[0, 4, 7] = 0.9
    d = decode_yolo([out], YoloLayout.from_outputs([out.shape]))
    assert len(d) == 1 and d.polygons is None and "polygon" not in d.to_dict()["detections"][0]
