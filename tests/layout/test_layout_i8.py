"""Int8 destinations (RGBx_I8, RGB_I8): a quantised model's input.

The reference is numpy's float32 computation, as ONNX QuantizeLinear (and
OpenVINO's FakeQuantize to int8) define it: ``x = (v - mean) / std`` per
channel, then ``clamp(round_half_even(x / quant_scale) + zero_point, -128,
127)``. The engine equals it exactly on every code path, for every source
(YUV ones through their decoded RGB), with and without resizing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npu_zc
from npu_zc import layout
from npu_zc.errors import InvalidArgumentError

LEVELS, _ = layout.simd_levels()


def quantise(rgb: np.ndarray, mean: Any, std: Any, quant_scale: float, zero_point: int) -> np.ndarray:
    """numpy's float32 reference (ONNX QuantizeLinear after the normalisation)."""
    x = (rgb.astype(np.float32) - np.float32(mean)) / np.float32(std)
    q = np.round(x / np.float32(quant_scale)) + np.float32(zero_point)  # numpy rounds half to even
    return np.clip(q, -128, 127).astype(np.int8)


@settings(max_examples=40, deadline=None)
@given(
    width=st.integers(1, 70),
    height=st.integers(1, 5),
    mean=st.tuples(*[st.floats(-50, 300)] * 3),
    std=st.tuples(*[st.floats(0.5, 100)] * 3),
    quant_scale=st.one_of(st.floats(0.002, 0.1), st.floats(0.1, 5)),
    zero_point=st.integers(-128, 127),
    pad=st.integers(-128, 127),
    seed=st.integers(0, 2**32 - 1),
)
def test_packed_sources_equal_numpys_quantisation(
    width: int, height: int, mean: Any, std: Any, quant_scale: float, zero_point: int, pad: int, seed: int
) -> None:
    bgr = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    want = quantise(bgr[..., ::-1], mean, std, quant_scale, zero_point)
    for simd in LEVELS:
        q = dict(mean=mean, scale=std, quant_scale=quant_scale, zero_point=zero_point, simd=simd)
        out = layout.convert(bgr, np.zeros((height, width, 4), np.int8), "BGR", "RGBx_I8", pad=pad, **q)
        np.testing.assert_array_equal(out[..., :3], want, err_msg=simd)
        assert (out[..., 3] == pad).all()
        out3 = layout.convert(bgr, np.zeros((height, width, 3), np.int8), "BGR", "RGB_I8", **q)
        np.testing.assert_array_equal(out3, want, err_msg=simd)


@pytest.mark.parametrize("src_fmt", ["NV12", "I420", "YUYV", "P010", "RGBA", "GRAY"])
def test_every_source_quantises_its_rgb(src_fmt: str) -> None:
    """A YUV source's int8 input is its RGB decoding quantised; through a
    letterbox resize, the resized RGB quantised (the fill too)."""
    width, height = 64, 48
    rng = np.random.default_rng(7)
    if src_fmt == "P010":
        src: Any = rng.integers(0, 1 << 16, (height * 3 // 2, width), dtype=np.uint16)
    elif src_fmt in ("NV12", "I420"):
        src = rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8)
    else:
        channels = {"YUYV": 2, "RGBA": 4, "GRAY": 1}[src_fmt]
        src = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
        src = src[..., 0] if channels == 1 else src
    norm: dict[str, Any] = dict(mean=(123.675, 116.28, 103.53), scale=(58.395, 57.12, 57.375), matrix="bt709")
    rgb = layout.convert(src, np.zeros((height, width, 3), np.uint8), src_fmt, "RGB", matrix="bt709")
    q = dict(quant_scale=0.0175, zero_point=-4)
    want = quantise(rgb, norm["mean"], norm["scale"], **q)  # type: ignore[arg-type]
    for simd in LEVELS:
        got = layout.convert(src, np.zeros((height, width, 4), np.int8), src_fmt, "RGBx_I8", simd=simd, **norm, **q)
        np.testing.assert_array_equal(got[..., :3], want, err_msg=f"{src_fmt} {simd}")
        small = np.zeros((40, 40, 3), np.uint8)
        layout.convert(rgb, small, "RGB", "RGB", fit="letterbox", fill=114, simd=simd)
        got = np.zeros((40, 40, 3), np.int8)
        layout.convert(src, got, src_fmt, "RGB_I8", fit="letterbox", fill=114, simd=simd, **norm, **q)
        np.testing.assert_array_equal(got, quantise(small, norm["mean"], norm["scale"], **q), err_msg=f"{src_fmt} {simd} letterbox")  # type: ignore[arg-type]


def test_converter_and_describe() -> None:
    width, height = 32, 16
    bgr = np.random.default_rng(3).integers(0, 256, (height, width, 3), dtype=np.uint8)
    to_input = npu_zc.Converter("BGR", "RGBx_I8", width, height, mean=127.5, scale=127.5, quant_scale=1 / 127, zero_point=0)
    assert (to_input.quant_scale, to_input.zero_point) == (pytest.approx(1 / 127), 0)
    assert "quant_scale" in repr(to_input)
    want = quantise(bgr[..., ::-1], 127.5, 127.5, 1 / 127, 0)
    for _ in range(3):
        np.testing.assert_array_equal(to_input(bgr, np.zeros((height, width, 4), np.int8))[..., :3], want)
    assert layout.describe_conversion("BGR", "RGB_I8", quant_scale=0.5, zero_point=1)


@pytest.mark.parametrize(
    "kwargs,dst_fmt,words",
    [
        ({}, "RGBx_I8", "quant_scale="),
        ({"quant_scale": 0.0}, "RGBx_I8", "positive"),
        ({"quant_scale": float("nan")}, "RGBx_I8", "positive"),
        ({"quant_scale": 0.1, "zero_point": 128}, "RGBx_I8", "-128..=127"),
        ({"quant_scale": 0.1, "zero_point": 1.5}, "RGBx_I8", "integer"),
        ({"zero_point": 3}, "RGBx_I8", "goes with quant_scale"),
        ({"quant_scale": 0.1}, "RGBx", "int8 destinations"),
        ({"quant_scale": 0.1, "pad": 200}, "RGBx_I8", "-128 to 127"),
    ],
)
def test_bad_quantisation_is_refused_and_nothing_is_written(kwargs: dict[str, Any], dst_fmt: str, words: str) -> None:
    bgr = np.zeros((2, 2, 3), np.uint8)
    out = np.full((2, 2, 4), 7, np.int8 if dst_fmt.endswith("I8") else np.uint8)
    with pytest.raises(InvalidArgumentError, match=words):
        layout.convert(bgr, out, "BGR", dst_fmt, **kwargs)
    assert (out == 7).all()
