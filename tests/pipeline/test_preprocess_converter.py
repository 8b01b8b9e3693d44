"""PreprocessSpec.converter: the one factory of the spec -> layout.Converter build (the single-frame preprocess, the
camera's one pass, the many-streams feeders), checked against the engine called by hand."""

from __future__ import annotations

import numpy as np
import pytest

import npu_zc
from npu_zc import layout
from npu_zc.pipeline import PreprocessSpec


def spec(fit: str = "crop", **kwargs: object) -> PreprocessSpec:
    return PreprocessSpec(format="RGBP_FLOAT", shape=(1, 3, 64, 96), height=64, width=96, fit=fit,  # type: ignore[arg-type]
                          mean=(1.0, 2.0, 3.0), scale=(2.0, 2.0, 2.0), **kwargs)  # type: ignore[arg-type]  # fmt: skip


def nv12(width: int, height: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    return rng.integers(0, 256, (height * 3 // 2, width), np.uint8)


def test_a_crop_of_a_subsampled_frame_is_rounded_to_its_chroma_grid() -> None:
    """A centre crop of an NV12 frame starting on an odd pixel: rounded inwards to even rows and columns (the engine
    refuses a crop that splits a chroma pair), and otherwise the region the spec says, normalised as it says."""
    s = spec()
    width, height = 256, 142
    rows, cols = s.region(height, width)
    assert cols.start % 2 == 1 and rows.start % 2 == 1  # the case being tested: odd starts
    conv = s.converter("NV12", width, height)
    x, y = -(-cols.start // 2) * 2, -(-rows.start // 2) * 2
    by_hand = layout.Converter("NV12", "RGBP_FLOAT", 96, 64, threads=1, src_size=(width, height),
                               roi=(x, y, (cols.stop - x) // 2 * 2, (rows.stop - y) // 2 * 2), fit="stretch",
                               interpolation="bilinear", mean=(1.0, 2.0, 3.0), scale=(2.0, 2.0, 2.0))  # fmt: skip
    frame = nv12(width, height)
    got, want = np.zeros((3, 64, 96), np.float32), np.ones((3, 64, 96), np.float32)
    conv(frame, got)
    by_hand(frame, want)
    assert np.array_equal(got, want)
    assert conv.transform.roi == by_hand.transform.roi


def test_bgr_letterbox_inspect_colour_and_content_rectangle() -> None:
    s = spec("letterbox", fill=114)
    bgr = np.random.default_rng(1).integers(0, 256, (50, 200, 3), np.uint8)
    seen = np.zeros((64, 96, 3), np.uint8)
    s.converter("BGR", 200, 50, inspect=True)(bgr, seen)  # what the model sees: bars of the fill value
    assert (seen[0] == 114).all() and (seen[-1] == 114).all()
    full = s.converter("BGR", 200, 50)
    inside = s.converter("BGR", 200, 50, dst_rect=full.transform.rect)
    a, b = np.zeros((3, 64, 96), np.float32), np.full((3, 64, 96), -7, np.float32)
    full(bgr, a)
    inside(bgr, b)
    x, y, w, h = full.transform.rect
    assert np.array_equal(a[:, y : y + h, x : x + w], b[:, y : y + h, x : x + w])
    assert (b[:, :y] == -7).all()  # the bars left as they were
    frame = nv12(96, 64)
    in_709, in_601 = np.zeros((3, 64, 96), np.float32), np.zeros((3, 64, 96), np.float32)
    s.converter("NV12", 96, 64, matrix="bt709", range="full")(frame, in_709)
    s.converter("NV12", 96, 64)(frame, in_601)
    assert not np.array_equal(in_709, in_601)
    with pytest.raises(npu_zc.InvalidArgumentError):
        s.converter("NV12", 96, 64, matrix="bt999")
