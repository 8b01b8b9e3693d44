"""The preprocess writes a letterbox's bars once into a pipeline's own input: later frames of that size write
the image only. The input must hold exactly the bytes a full conversion writes, frame after frame."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from npu_zc.pipeline.preprocess import PreprocessSpec, Preprocessor


def spec(fmt: str, width: int, height: int, fit: str = "letterbox") -> PreprocessSpec:
    shape = (1, height, width, 4) if fmt.endswith("x") or "x_" in fmt else (1, 3, height, width)
    scaled = fmt.endswith("FLOAT")
    return PreprocessSpec(fmt, shape, height, width, mean=(1.0, 2.0, 3.0) if scaled else None,
                          scale=(58.0, 57.0, 56.0) if scaled else None, fit=fit, fill=114)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(
    fmt=st.sampled_from(["RGBx", "RGBx_FP16", "RGBP_FLOAT"]),
    model=st.sampled_from([(64, 64), (96, 64), (48, 80)]),
    sizes=st.lists(st.tuples(st.integers(8, 200), st.integers(8, 200)), min_size=1, max_size=4),
    seed=st.integers(0, 2**31),
)
def test_frames_after_the_first_write_the_same_input(fmt: str, model: tuple[int, int], sizes, seed: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    sp = spec(fmt, *model)
    kept, fresh = Preprocessor(sp), Preprocessor(sp)
    dst = np.full(sp.shape, 7, sp.dtype)
    want = np.empty_like(dst)
    for h, w in sizes * 2:  # each size twice: the second time only the image is written
        frame = rng.integers(0, 256, (h, w, 3), np.uint8)
        kept(frame, dst, keep_fill=True)
        want[...] = 0
        fresh(frame, want)
        np.testing.assert_array_equal(dst.view(np.uint8), want.view(np.uint8), err_msg=f"{w}x{h} into {model}")
        assert kept.transform == fresh.transform


def test_only_the_image_is_written_after_the_first_frame() -> None:
    """A frame of the same size leaves the bars alone (so a buffer another writer touched would keep that)."""
    sp = spec("RGBx", 64, 64)
    pre = Preprocessor(sp)
    dst = np.zeros(sp.shape, np.uint8)
    frame = np.full((32, 64, 3), 200, np.uint8)  # 64x32 into 64x64: bars of 16 rows above and below
    pre(frame, dst, keep_fill=True)
    assert (dst[0, :16, :, :3] == 114).all() and (dst[0, 16:48, :, :3] == 200).all()
    dst[0, :16] = 1  # not the preprocess's doing
    pre(frame, dst, keep_fill=True)
    assert (dst[0, :16] == 1).all() and (dst[0, 16:48, :, :3] == 200).all()
    pre(frame, dst)  # without keep_fill: everything written
    assert (dst[0, :16, :, :3] == 114).all()
    other = np.zeros_like(dst)
    pre(frame, other, keep_fill=True)  # another buffer: its bars are written
    assert (other[0, :16, :, :3] == 114).all()


@pytest.mark.parametrize("fit", ["crop", "stretch"])
def test_fits_without_bars_are_unchanged(fit: str) -> None:
    sp = spec("RGBx", 64, 48, fit)
    pre, fresh = Preprocessor(sp), Preprocessor(sp)
    dst, want = np.zeros(sp.shape, np.uint8), np.zeros(sp.shape, np.uint8)
    frame = np.random.default_rng(1).integers(0, 256, (100, 150, 3), np.uint8)
    for _ in range(2):
        pre(frame, dst, keep_fill=True)
    fresh(frame, want)
    np.testing.assert_array_equal(dst, want)


def test_several_buffers_in_turn_each_keep_their_bars() -> None:
    """Throughput mode: the queue's input buffers in turn, frames of two sizes; each buffer always holds
    exactly what a full conversion writes."""
    sp = spec("RGBx", 64, 64)
    pre, fresh = Preprocessor(sp), Preprocessor(sp)
    buffers = [np.full(sp.shape, 3, np.uint8) for _ in range(3)]
    want = np.empty(sp.shape, np.uint8)
    rng = np.random.default_rng(2)
    for k in range(14):
        h, w = (32, 64) if k % 5 < 3 else (64, 40)
        frame = rng.integers(0, 256, (h, w, 3), np.uint8)
        dst = buffers[k % 3]
        pre(frame, dst, keep_fill=True)
        fresh(frame, want)
        np.testing.assert_array_equal(dst, want, err_msg=f"frame {k}")
