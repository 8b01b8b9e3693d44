"""One check for every path that takes normalisation or a fill, never
silently wrong: NaN, inf, numbers too large for a float, strings, mappings
and sets are refused with InvalidArgumentError, never iterated or run."""

from __future__ import annotations

import math

import numpy as np
import pytest

import npu_zc
from npu_zc import InvalidArgumentError

BAD_MEANS = [
    (math.nan, 0.0, 0.0),
    (0.0, math.inf, 0.0),
    -math.inf,
    math.nan,
    10**400,
    (1e39, 0.0, 0.0),  # finite in Python, inf in the float32 the model computes in
    "123",
    "1",
    b"123",
    {1: 2, 3: 4, 5: 6},
    {1.0, 2.0, 3.0},
    ("1", "2", "3"),
    (True, False, True),
]


@pytest.mark.parametrize("mean", BAD_MEANS, ids=repr)
def test_convert_refuses_bad_mean_and_scale(mean: object) -> None:
    src = np.zeros((2, 2, 3), np.uint8)
    dst = np.zeros((2, 2, 4), np.float16)
    with pytest.raises(InvalidArgumentError):
        npu_zc.convert(src, dst, "BGR", "RGBx_FP16", mean=mean)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        npu_zc.convert(src, dst, "BGR", "RGBx_FP16", scale=mean)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        npu_zc.Converter("BGR", "RGBx_FP16", 2, 2, mean=mean)  # type: ignore[arg-type]


@pytest.mark.parametrize("fill", ["114", "1", {114: 1}, (math.nan, 0, 0), 10**400, -1, 256, ("1", "1", "4")], ids=repr)
def test_fill_refuses_strings_and_non_pixels(fill: object) -> None:
    src = np.zeros((4, 8, 3), np.uint8)
    dst = np.zeros((4, 4, 4), np.uint8)
    with pytest.raises(InvalidArgumentError):
        npu_zc.convert(src, dst, "BGR", "RGBx", fit="letterbox", fill=fill)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        npu_zc.Converter("BGR", "RGBx", 4, 4, src_size=(8, 4), fit="letterbox", fill=fill)  # type: ignore[arg-type]


def test_good_values_still_work() -> None:
    src = np.full((2, 2, 3), 100, np.uint8)
    # one value or three, as a number, list, tuple or numpy array: (100 - 50) / 2 = 25
    for mean in (50, [50], (50, 50, 50), np.array([50.0, 50.0, 50.0]), np.float32(50), np.array(50.0)):
        out = np.zeros((3, 2, 2), np.float32)
        npu_zc.convert(src, out, "BGR", "RGBP_FLOAT", mean=mean, scale=[2])
        assert np.all(out == 25), mean
    letterboxed = np.zeros((4, 4, 4), np.uint8)
    npu_zc.convert(np.zeros((2, 4, 3), np.uint8), letterboxed, "BGR", "RGBx", fit="letterbox", fill=114)
    assert letterboxed[0, 0, 0] == 114 and letterboxed[2, 2, 0] == 0


ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")


@pytest.mark.parametrize("mean", [(math.nan, 0.0, 0.0), "123", {1: 1}, 10**400], ids=repr)
def test_pipeline_refuses_bad_normalisation_before_reading_the_model(mean: object) -> None:
    from npu_zc.pipeline import Pipeline
    from npu_zc.runtime import compile_model

    # A model path that does not exist: the normalisation check comes first.
    with pytest.raises(InvalidArgumentError):
        Pipeline("/nonexistent/model.xml", "CPU", mean=mean)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        Pipeline("/nonexistent/model.xml", "CPU", scale=mean)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        compile_model("efficientnet-lite0", "CPU", mean=mean)  # type: ignore[arg-type]


def test_preprocess_spec_fill_must_be_a_pixel_integer() -> None:
    from npu_zc.pipeline import PreprocessSpec

    for fill in ("114", 114.5, True, 300):
        with pytest.raises(InvalidArgumentError):
            PreprocessSpec("RGBx", (1, 4, 4, 4), 4, 4, fit="letterbox", fill=fill)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["nan", "inf,0,0", "1e39", "-inf"])
def test_cli_refuses_non_finite_mean(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    from npu_zc.cli.main import main

    with pytest.raises(SystemExit) as exit:
        main(["run", f"--mean={value}", "-d", "CPU"])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert "finite" in err and "Traceback" not in err
