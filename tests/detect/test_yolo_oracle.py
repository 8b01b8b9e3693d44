"""decode_yolo against a numpy + cv2.dnn.NMSBoxesBatched oracle on random outputs (hypothesis), every
element type and stride, and its errors."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npu_zc
from npu_zc import DetectError, DetectLayoutError, YoloLayout, decode_yolo


def random_output(seed: int, nc: int, n: int, hot: float, ties: bool) -> np.ndarray:
    """A channel-major [1, 4+nc, n] output: boxes in clusters (so NMS has work), scores mostly low,
    a fraction `hot` of anchors with one high class score (from a few values when `ties`)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((1, 4 + nc, n), np.float32)
    centres = rng.uniform(0, 640, (max(n // 20, 1), 2))
    pick = rng.integers(0, len(centres), n)
    out[0, 0:2] = (centres[pick] + rng.normal(0, 8, (n, 2))).T
    out[0, 2:4] = rng.uniform(4, 120, (2, n))
    out[0, 4:] = rng.uniform(0, 0.2, (nc, n))
    hot_idx = np.nonzero(rng.uniform(0, 1, n) < hot)[0]
    values = rng.choice([0.3, 0.6, 0.9], len(hot_idx)) if ties else rng.uniform(0.2, 1.0, len(hot_idx))
    out[0, 4 + rng.integers(0, nc, len(hot_idx)), hot_idx] = values
    return out


def oracle(out: np.ndarray, conf: float, iou: float, agnostic: bool, max_det: int, max_nms: int,
           classes: list[int] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ultralytics' rules in numpy, NMS by OpenCV."""
    p = out[0].astype(np.float32)
    scores = p[4:]
    best, cls = scores.max(0), scores.argmax(0)  # argmax: the first class on ties
    keep = best > np.float32(conf)
    if classes is not None:
        keep &= np.isin(cls, classes)
    idx = np.nonzero(keep)[0]
    idx = idx[np.argsort(-best[idx], kind="stable")][:max_nms]
    x, y, w, h = p[0, idx], p[1, idx], p[2, idx] / 2, p[3, idx] / 2
    xyxy = np.stack([x - w, y - h, x + w, y + h], 1).astype(np.float32)
    if len(idx) == 0:
        return xyxy, best[idx], cls[idx]
    rects = [(float(a), float(b), float(c - a), float(d - b)) for a, b, c, d in xyxy]
    ids = np.zeros(len(idx), np.int32) if agnostic else cls[idx].astype(np.int32)
    kept = np.asarray(cv2.dnn.NMSBoxesBatched(rects, best[idx].tolist(), ids.tolist(), 0.0, iou), np.int64).reshape(-1)
    kept = kept[:max_det]
    return xyxy[kept], best[idx][kept], cls[idx][kept]


def check(d: npu_zc.Detections, want: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    boxes, scores, classes = want
    assert len(d) == len(scores)
    np.testing.assert_array_equal(d.class_ids, classes)
    np.testing.assert_allclose(d.scores, scores, rtol=1e-6)
    np.testing.assert_allclose(d.xyxy, boxes, atol=1e-3)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    nc=st.sampled_from([1, 2, 80, 300]),
    n=st.sampled_from([1, 7, 100, 2100]),
    hot=st.sampled_from([0.0, 0.05, 0.5]),
    ties=st.booleans(),
    conf=st.sampled_from([0.25, 0.5]),
    iou=st.sampled_from([0.45, 0.7]),
    agnostic=st.booleans(),
    max_det=st.sampled_from([1, 300]),
    max_nms=st.sampled_from([5, 30000]),
    filt=st.booleans(),
)
def test_matches_numpy_and_opencv(seed, nc, n, hot, ties, conf, iou, agnostic, max_det, max_nms, filt) -> None:
    out = random_output(seed, nc, n, hot, ties)
    classes = [0, nc - 1] if filt else None
    layout = YoloLayout.from_outputs([out.shape], nc=nc)
    d = decode_yolo([out], layout, conf=conf, iou=iou, agnostic=agnostic, max_det=max_det, max_nms=max_nms,
                    classes=classes)
    check(d, oracle(out, conf, iou, agnostic, max_det, max_nms, classes))


def test_nothing_above_the_threshold() -> None:
    out = random_output(1, 80, 2100, 0.0, False)
    d = decode_yolo([out], YoloLayout.from_outputs([out.shape]))
    assert len(d) == 0 and d.xyxy.shape == (0, 4) and d.class_ids.dtype == np.int32


def test_everything_above_the_threshold_is_capped_at_max_nms() -> None:
    out = random_output(2, 1, 33600, 1.0, False)
    layout = YoloLayout.from_outputs([out.shape], input_size=(1280, 1280))
    for max_nms in (30000, 100):
        check(decode_yolo([out], layout, max_nms=max_nms), oracle(out, 0.25, 0.7, False, 300, max_nms, None))


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.mark.parametrize("kind", ["f16", "bf16", "i8", "u8"])
def test_every_element_type_decodes_the_values_it_holds(kind: str) -> None:
    out = random_output(3, 80, 2100, 0.05, True)
    quant = None
    if kind == "f16":
        raw = out.astype(np.float16)
        seen = raw.astype(np.float32)
    elif kind == "bf16":
        raw = bf16_bits(out)
        seen = (raw.astype(np.uint32) << 16).view(np.float32)
    else:
        scale, zp = (0.75, -128) if kind == "i8" else (0.75, 3)
        lo, hi = (-128, 127) if kind == "i8" else (0, 255)
        raw = np.clip(np.round(out / scale) + zp, lo, hi).astype(np.int8 if kind == "i8" else np.uint8)
        seen = (raw.astype(np.float32) - zp) * np.float32(scale)
        quant = (scale, zp)
    layout = YoloLayout.from_outputs([out.shape])
    check(decode_yolo([raw], layout, quant=quant, conf=0.2), oracle(seen, 0.2, 0.7, False, 300, 30000, None))


def test_strided_outputs_are_read_in_place() -> None:
    out = random_output(4, 80, 2100, 0.05, False)
    want = decode_yolo([out], YoloLayout.from_outputs([out.shape]))
    # Channel-last memory seen channel-major (a transposed view), and every other row of a larger array.
    transposed = np.ascontiguousarray(out.transpose(0, 2, 1)).transpose(0, 2, 1)
    wide = np.zeros((1, 2 * 84, 2 * 2100), np.float32)
    wide[:, ::2, ::2] = out
    for view in (transposed, wide[:, ::2, ::2], out.astype(np.float16)[:, :, :].view(np.float16)):
        d = decode_yolo([view], YoloLayout.from_outputs([view.shape]))
        np.testing.assert_array_equal(d.class_ids, want.class_ids)
        np.testing.assert_allclose(d.xyxy, want.xyxy, atol=0.5)
    # A reversed view is read too (its anchors in the reversed order).
    rev = out[:, :, ::-1]
    d = decode_yolo([rev], YoloLayout.from_outputs([rev.shape]))
    assert sorted(d.scores.tolist()) == sorted(want.scores.tolist())


def test_nan_and_inf_scores() -> None:
    out = random_output(5, 4, 100, 0.0, False)
    out[0, 4, 0] = np.nan  # ignored
    out[0, 5, 1] = np.inf  # above any threshold
    out[0, 4, 2], out[0, 6, 2] = np.nan, 0.8
    d = decode_yolo([out], YoloLayout.from_outputs([out.shape]))
    assert list(d.scores) == [np.inf, np.float32(0.8)] and list(d.class_ids) == [1, 2]


def test_layouts_from_shapes() -> None:
    f = YoloLayout.from_outputs
    assert (f([(1, 84, 8400)]).family, f([(1, 84, 8400)]).nc) == ("anchor-free", 80)
    assert f([(1, 116, 8400), (1, 32, 160, 160)]).task == "segment"
    assert f([(1, 32, 160, 160), (1, 116, 8400)]).output == 1
    assert (f([(1, 56, 8400)], task="pose").nc, f([(1, 56, 8400)], nc=1).task) == (1, "pose")
    assert (f([(1, 20, 8400)], nc=15).task, f([(1, 20, 8400)], task="obb").nc) == ("obb", 15)
    assert (f([(1, 300, 6)]).family, f([(1, 300, 38), (1, 32, 160, 160)]).family) == ("end2end", "end2end")
    assert f([(1, 300, 57)], task="pose", end2end=True).task == "pose"
    assert (f([(1, 25200, 85)]).family, f([(1, 25200, 85)]).nc) == ("yolov5", 80)
    assert f([(1, 84, 5376)], input_size=(512, 512)).nc == 80


@pytest.mark.parametrize("shapes, kw, words", [
    ([(1, 3, 224, 224)], {}, "[1, 4+nc, N]"),
    ([(1, 1000)], {}, "[1, 4+nc, N]"),
    ([(1, 84, 8400), (1, 84, 8400)], {}, "expected one of"),
    ([(1, 84, 8400)], {"nc": 2}, "2 classes"),
    ([(1, 84, 8400)], {"input_size": (512, 512)}, "5376"),
    ([(1, 84, 8400)], {"task": "segment"}, "prototypes"),
    ([(1, 116, 8400), (1, 32, 160, 160)], {"task": "pose"}, "no prototypes"),
    ([(1, 300, 7)], {"end2end": True}, "[1, K, 6]"),
])
def test_shapes_that_fit_no_family_say_what_was_expected(shapes, kw, words) -> None:
    with pytest.raises(DetectLayoutError, match=None) as e:
        YoloLayout.from_outputs(shapes, **kw)
    assert words in str(e.value)
    assert isinstance(e.value, npu_zc.Error) and isinstance(e.value, ValueError)


def test_bad_arguments_raise_detect_errors() -> None:
    out = random_output(6, 80, 100, 0.1, False)
    layout = YoloLayout.from_outputs([out.shape])
    with pytest.raises(DetectError, match="80 classes but 2 names"):
        decode_yolo([out], layout, names={0: "a", 1: "b"})
    with pytest.raises(DetectError, match="quant"):
        decode_yolo([out.astype(np.int8)], layout)
    with pytest.raises(DetectError, match="zero point"):
        decode_yolo([out.astype(np.int8)], layout, quant=(0.1, 300))
    with pytest.raises(DetectError, match="scale"):
        decode_yolo([out.astype(np.uint8)], layout, quant=(0.0, 0))
    with pytest.raises(DetectError, match="float64"):
        decode_yolo([out.astype(np.float64)], layout)
    with pytest.raises(DetectError, match="conf"):
        decode_yolo([out], layout, conf=1.5)
    with pytest.raises(DetectLayoutError):
        decode_yolo([out[:, :80]], layout)
    with pytest.raises(DetectLayoutError, match="prototypes"):
        decode_yolo([np.zeros((1, 116, 100), np.float32)], YoloLayout("anchor-free", "segment", 80, nm=32, protos=1))


def test_detections_helpers() -> None:
    out = random_output(7, 2, 300, 0.1, False)
    d = decode_yolo([out], YoloLayout.from_outputs([out.shape]), names={0: "cat", 1: "dog"})
    assert len(d) > 0 and set(d.labels()) <= {"cat", "dog"}
    j = d.to_dict()
    assert j["task"] == "detect" and len(j["detections"]) == len(d) and "track_id" not in j["detections"][0]
    t = d.with_tracks(np.arange(len(d)))
    assert t.track_ids is not None and t.to_dict()["detections"][-1]["track_id"] == len(d) - 1
    assert len(d[:1]) == 1 and len(npu_zc.Detections.empty()) == 0
