"""decode_yolo against Ultralytics itself: raw outputs and what Ultralytics' non_max_suppression,
scale_boxes, process_mask + scale_masks, scale_coords and rotated NMS made of them
(tests/detect/fixtures, made by scripts/make_yolo_fixtures.py; CI needs no torch).

Tolerances: boxes within 0.5 px, scores 1e-4 relative, masks IoU >= 0.99, the same order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import npu_zc
from npu_zc import Transform, YoloLayout, decode_yolo

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> dict:
    f = dict(np.load(FIXTURES / f"{name}.npz"))
    if "source" in f:
        f["output"] = np.load(FIXTURES / f"{f['source']}.npz")["output"]
    return f


def letterbox() -> Transform:
    """The Transform of Ultralytics' LetterBox for the fixtures' frame (as npu_zc.convert returns it)."""
    lb = np.load(FIXTURES / "letterbox.npz")
    (gx, gy), (px, py), (nw, nh) = lb["gain"], lb["pad"], lb["new"]
    imgsz = int(lb["imgsz"])
    w0, h0 = (int(v) for v in lb["frame"])
    return Transform((float(gx), float(gy)), (float(px), float(py)), (int(px), int(py), int(nw), int(nh)),
                     (0, 0, imgsz, imgsz), (0, 0, w0, h0))


def same(d: npu_zc.Detections, f: dict, boxes: np.ndarray) -> None:
    assert len(d) == len(f["scores"]), (len(d), len(f["scores"]))
    np.testing.assert_array_equal(d.class_ids, f["classes"])
    np.testing.assert_allclose(d.scores, f["scores"], rtol=1e-4)
    np.testing.assert_allclose(d.xyxy, boxes, atol=0.5)


@pytest.mark.parametrize("tag", ["", "_agnostic", "_classes", "_maxdet"])
def test_detect_synthetic_matches_ultralytics(tag: str) -> None:
    f = load(f"detect_synth{tag}")
    conf, iou, agnostic, max_det = f["params"]
    layout = YoloLayout.from_outputs([f["output"].shape])
    assert (layout.family, layout.task, layout.nc) == ("anchor-free", "detect", 80)
    classes = [int(c) for c in f["classes_filter"]] or None
    d = decode_yolo([f["output"]], layout, conf=float(conf), iou=float(iou), agnostic=bool(agnostic),
                    max_det=int(max_det), classes=classes)
    same(d, f, f["boxes"])
    framed = decode_yolo([f["output"]], layout, conf=float(conf), iou=float(iou), agnostic=bool(agnostic),
                         max_det=int(max_det), classes=classes, transform=letterbox())
    same(framed, f, f["frame_boxes"])


@pytest.mark.parametrize("name", ["detect_synth_f16", "detect_synth_i8", "detect_cap"])
def test_element_types_match_ultralytics(name: str) -> None:
    f = load(name)
    quant = (float(f["quant"][0]), int(f["quant"][1])) if "quant" in f else None
    layout = YoloLayout.from_outputs([f["output"].shape])
    same(decode_yolo([f["output"]], layout, quant=quant), f, f["boxes"])


def test_detect_cap_is_fed_more_than_max_nms() -> None:
    f = load("detect_cap")
    assert f["output"].shape[-1] > 30000 and (f["output"][0, 4].astype(np.float32) > 0.25).all()


@pytest.mark.parametrize("conf", ["25", "05"])
def test_real_trained_detector_matches_ultralytics(conf: str) -> None:
    f = load(f"detect_real_conf{conf}")
    gx, gy, px, py, nw, nh = f["letterbox"]
    w0, h0 = (int(v) for v in f["frame"])
    t = Transform((gx, gy), (px, py), (int(px), int(py), int(nw), int(nh)), (0, 0, 640, 640), (0, 0, w0, h0))
    layout = YoloLayout.from_outputs([f["output"].shape], input_size=(640, 640), nc=2)
    d = decode_yolo([f["output"]], layout, conf=float(f["conf"]), transform=t, names={0: "fall", 1: "person"})
    assert len(d) > 0
    same(d, f, f["frame_boxes"])


def unpack(bits: np.ndarray, width: int) -> np.ndarray:
    return np.unpackbits(bits, axis=-1)[..., :width].astype(bool)


def test_segment_masks_match_ultralytics() -> None:
    f = load("segment")
    layout = YoloLayout.from_outputs([f["output"].shape, f["protos"].shape])
    assert (layout.task, layout.nc, layout.nm, layout.protos) == ("segment", 80, 32, 1)
    t = letterbox()
    d = decode_yolo([f["output"], f["protos"]], layout, transform=t)
    same(d, f, f["frame_boxes"])
    w0, h0 = t.roi[2], t.roi[3]
    expected = unpack(f["frame_masks"], w0)
    assert d.masks is not None and d.masks.shape == expected.shape and d.masks.dtype == np.bool_
    for got, want in zip(d.masks, expected):
        iou = (got & want).sum() / max((got | want).sum(), 1)
        assert iou >= 0.99, iou
    # Without a transform: masks at the model input, as process_mask returns them.
    d_in = decode_yolo([f["output"], f["protos"]], layout)
    same(d_in, f, f["boxes"])
    want_in = unpack(f["input_masks"], 320)
    for got, want in zip(d_in.masks, want_in):
        assert (got & want).sum() / max((got | want).sum(), 1) >= 0.99


def test_pose_keypoints_match_ultralytics() -> None:
    f = load("pose")
    layout = YoloLayout.from_outputs([f["output"].shape], task="pose", kpt_shape=(17, 3))
    assert (layout.task, layout.nc) == ("pose", 1)
    d = decode_yolo([f["output"]], layout, transform=letterbox())
    same(d, f, f["frame_boxes"])
    assert d.keypoints is not None and d.keypoints.shape == f["frame_keypoints"].shape
    np.testing.assert_allclose(d.keypoints[..., :2], f["frame_keypoints"][..., :2], atol=0.5)
    np.testing.assert_allclose(d.keypoints[..., 2], f["frame_keypoints"][..., 2], rtol=1e-4)


def test_obb_rotated_nms_matches_ultralytics() -> None:
    f = load("obb")
    layout = YoloLayout.from_outputs([f["output"].shape], task="obb")
    d = decode_yolo([f["output"]], layout)
    assert len(d) == len(f["scores"])
    np.testing.assert_array_equal(d.class_ids, f["classes"])
    np.testing.assert_allclose(d.scores, f["scores"], rtol=1e-4)
    np.testing.assert_allclose(d.xywhr[:, :4], f["xywhr"][:, :4], atol=0.5)
    np.testing.assert_allclose(d.xywhr[:, 4], f["xywhr"][:, 4], atol=1e-5)
    framed = decode_yolo([f["output"]], layout, transform=letterbox())
    np.testing.assert_allclose(framed.xywhr[:, :4], f["frame_xywhr"][:, :4], atol=0.5)


@pytest.mark.parametrize("tag", ["", "_classes"])
def test_end_to_end_is_thresholded_only(tag: str) -> None:
    f = load(f"end2end{tag}")
    layout = YoloLayout.from_outputs([f["output"].shape])
    assert layout.family == "end2end"
    classes = [int(c) for c in f["classes_filter"]] or None
    same(decode_yolo([f["output"]], layout, classes=classes), f, f["boxes"])


def test_classic_yolov5_matches_its_nms() -> None:
    f = load("yolov5")
    layout = YoloLayout.from_outputs([f["output"].shape])
    assert (layout.family, layout.nc) == ("yolov5", 80)
    conf, iou = f["params"]
    same(decode_yolo([f["output"]], layout, conf=float(conf), iou=float(iou)), f, f["boxes"])
