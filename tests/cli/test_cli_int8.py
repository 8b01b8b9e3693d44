"""`npu-zc run -m int8_model.xml photo.jpg`: a quantised IR just works, and says with which numbers it quantises."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (a dependency of npu_zc)")

from int8_models import SIZE, quantised_classifier  # noqa: E402
from cli_helpers import fails, ok  # noqa: E402


def test_npu_zc_run_on_an_int8_ir(tmp_path: Path) -> None:
    xml = tmp_path / "int8.xml"
    ov.save_model(quantised_classifier("fake-quantize"), str(xml), compress_to_fp16=False)
    photo = tmp_path / "photo.png"
    cv2.imwrite(str(photo), np.random.default_rng(9).integers(0, 256, (40, 56, 3), np.uint8))
    out = ok("run", "-m", xml, "-i", photo, "-d", "CPU", "-n", "2", "--top", "2")
    assert f"input RGBx_I8 1x{SIZE}x{SIZE}x4" in out
    assert "quant    int8 input: byte q stands for (q - -27) * 0.0208333 (the model's fake-quantize)" in out
    data = json.loads(ok("run", "-m", xml, "-i", photo, "-d", "CPU", "-n", "1", "--json"))
    assert data["input"]["format"] == "RGBx_I8"
    assert data["input"]["quantisation"]["zero_point"] == -27
    floats = json.loads(ok("run", "-m", xml, "-i", photo, "-d", "CPU", "-n", "1", "--json", "--hw-format", "RGBx"))
    assert floats["input"]["quantisation"] is None and floats["input"]["format"] == "RGBx"
    # Both score the model's 4 classes (which wins is the pipeline tests' business, in f32: the CLI runs
    # at the plugin's default precision, bf16 on some CPUs).
    assert sorted(c["index"] for c in data["labels"]) == sorted(c["index"] for c in floats["labels"]) == [0, 1, 2, 3]


def test_an_int8_layout_on_a_float_model_is_one_line(tmp_path: Path) -> None:
    xml = tmp_path / "float.xml"
    ov.save_model(quantised_classifier("float"), str(xml))
    photo = tmp_path / "photo.png"
    cv2.imwrite(str(photo), np.full((20, 20, 3), 90, np.uint8))
    fails("run", "-m", xml, "-i", photo, "-d", "CPU", "-n", "1", "--hw-format", "RGBx_I8", match="not quantised")
