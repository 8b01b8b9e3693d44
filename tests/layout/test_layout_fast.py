"""The opt-in fast rounding of 8-bit 4:2:0 sources (``rounding="fast"``):
NV12, NV21 and I420 into u8 pixels, within 1 level per channel of OpenCV's
``cvtColor`` (BT.601 limited range) on every (Y, U, V) input, the same bytes
on every code path, and refused (typed) wherever it does not apply.

The Rust side proves each SIMD level equal to the fast reference and the
reference within 1 level of the standard's float matrix over all 2^24
inputs (rust/layout/kernels/tests.rs, rust/layout/colour.rs).
"""

from __future__ import annotations

import numpy as np
import pytest

import npu_zc
from npu_zc import layout
from npu_zc.errors import InvalidArgumentError

cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed: the fast rounding is bound to its cvtColor")

LEVELS, BEST = layout.simd_levels()
FAST_DECODER = BEST != "neon"
"""Whether this CPU's best level has a fast decoder (NEON has none: it decodes exactly, the same bytes)."""
SIZE = 4096  # 2048 x 2048 blocks of 2x2 pixels: 65536 (U, V) pairs x 64 blocks x 4 Y values = every input


def every_input_nv12() -> np.ndarray:
    """A 4096x4096 NV12 frame holding every (Y, U, V) once: block b has the
    chroma pair b // 64 and the four Y values 4 (b % 64) + 0..3."""
    blocks = np.arange(SIZE // 2 * SIZE // 2, dtype=np.int64).reshape(SIZE // 2, SIZE // 2)
    pair, first = blocks // 64, 4 * (blocks % 64)
    y = np.empty((SIZE, SIZE), np.uint8)
    for k, (dy, dx) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        y[dy::2, dx::2] = first + k
    uv = np.empty((SIZE // 2, SIZE), np.uint8)
    uv[:, 0::2], uv[:, 1::2] = pair >> 8, pair & 255
    return np.concatenate([y, uv])


CASES = [
    ("NV12", "RGBx", cv2.COLOR_YUV2RGBA_NV12),
    ("NV12", "BGRx", cv2.COLOR_YUV2BGRA_NV12),
    ("NV12", "RGB", cv2.COLOR_YUV2RGB_NV12),
    ("NV12", "BGR", cv2.COLOR_YUV2BGR_NV12),
    ("NV21", "RGBx", cv2.COLOR_YUV2RGBA_NV21),
    ("NV21", "RGB", cv2.COLOR_YUV2RGB_NV21),
    ("I420", "RGBx", cv2.COLOR_YUV2RGBA_I420),
    ("I420", "BGR", cv2.COLOR_YUV2BGR_I420),
]


def as_source(nv12: np.ndarray, fmt: str) -> np.ndarray:
    """The same samples as NV21 (each pair V, U) or I420 (the U plane, then the V plane)."""
    y, uv = nv12[:SIZE], nv12[SIZE:]
    if fmt == "NV21":
        return np.concatenate([y, uv.reshape(-1, 2)[:, ::-1].reshape(uv.shape)])
    if fmt == "I420":
        return np.concatenate([y, uv[:, 0::2].reshape(-1, SIZE), uv[:, 1::2].reshape(-1, SIZE)])
    return nv12


@pytest.fixture(scope="module")
def frame() -> np.ndarray:
    return every_input_nv12()


@pytest.mark.parametrize("src_fmt,dst_fmt,code", CASES)
def test_fast_is_within_one_level_of_opencv_on_every_input(frame, src_fmt, dst_fmt, code):
    src = as_source(frame, src_fmt)
    want = cv2.cvtColor(src, code)
    got = npu_zc.convert(src, np.empty_like(want), src_fmt, dst_fmt, rounding="fast")
    diff = np.abs(got[..., :3].astype(np.int16) - want[..., :3])
    assert diff.max() <= 1, f"{src_fmt} -> {dst_fmt}: {diff.max()} levels"
    # Where a fast decoder runs it differs from the exact one somewhere (else this test proves nothing); NEON's
    # fast rounding is the exact decoding, OpenCV's bytes.
    assert diff.any() == FAST_DECODER, f"fast differs from the exact decoding: {diff.any()}, at {BEST}"
    if dst_fmt.endswith("x"):
        assert (got[..., 3] == 0).all()


@pytest.mark.parametrize("level", LEVELS)
def test_every_level_writes_the_same_bytes(level):
    """Every path equals the scalar one (the reference), tails and odd pair counts included."""
    if level == "neon":
        pytest.skip("NEON decodes exactly: it has no fast decoder")
    rng = np.random.default_rng(7)
    for width, height in ((2, 2), (34, 6), (66, 4), (1920, 8)):
        src = rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8)
        for src_fmt, dst_fmt in (("NV12", "RGBx"), ("NV21", "BGRx"), ("I420", "RGB"), ("NV12", "BGR")):
            channels = 3 if dst_fmt in ("RGB", "BGR") else 4
            out = np.empty((height, width, channels), np.uint8)
            want = np.empty_like(out)
            npu_zc.convert(src, want, src_fmt, dst_fmt, rounding="fast", simd="scalar")
            npu_zc.convert(src, out, src_fmt, dst_fmt, rounding="fast", simd=level)
            assert np.array_equal(out, want), f"{src_fmt} -> {dst_fmt} {width}x{height} at {level}"


def test_converter_takes_the_fast_rounding():
    rng = np.random.default_rng(3)
    nv12 = rng.integers(0, 256, (1080 * 3 // 2, 1920), dtype=np.uint8)
    to_rgb = npu_zc.Converter("NV12", "RGB", 1920, 1080, rounding="fast", threads=1)
    assert to_rgb.rounding == "fast" and ("fast" in to_rgb.kernel) == FAST_DECODER and "rounding='fast'" in repr(to_rgb)
    out = to_rgb(nv12, np.empty((1080, 1920, 3), np.uint8))
    assert np.array_equal(out, npu_zc.convert(nv12, np.empty_like(out), "NV12", "RGB", rounding="fast"))
    exact = npu_zc.convert(nv12, np.empty_like(out), "NV12", "RGB")
    assert np.abs(out.astype(np.int16) - exact).max() == (1 if FAST_DECODER else 0)
    assert ("fast" in layout.describe_conversion("I420", "BGRx", rounding="fast")) == FAST_DECODER
    assert "fast" not in layout.describe_conversion("I420", "BGRx")


@pytest.mark.parametrize(
    "src_fmt,dst_fmt,kwargs",
    [
        ("YUYV", "RGBx", {}),  # a 4:2:2 source
        ("P010", "RGBx", {}),  # a 10-bit one
        ("BGR", "RGBx", {}),  # not YUV
        ("NV12", "RGBx_BF16", {}),  # a float destination
        ("NV12", "RGBx", {"mean": 1.0}),  # normalised
        ("NV12", "RGBx", {"dst_size": True}),  # a resize
    ],
)
def test_fast_is_refused_where_it_does_not_apply(src_fmt, dst_fmt, kwargs):
    kwargs = dict(kwargs)
    resize = kwargs.pop("dst_size", None)
    with pytest.raises(InvalidArgumentError, match='rounding="fast"'):
        layout.Converter(src_fmt, dst_fmt, 16, 16, rounding="fast", src_size=(32, 32) if resize else None, **kwargs)
    if src_fmt != "NV12":
        return
    side = 32 if resize else 16
    dst = np.zeros(layout.frame_nbytes(dst_fmt, 16, 16), np.uint8)
    size = {"dst_size": (16, 16)} if resize else {}
    with pytest.raises(InvalidArgumentError, match='rounding="fast"'):
        npu_zc.convert(np.zeros((side * 3 // 2, side), np.uint8), dst, src_fmt, dst_fmt, rounding="fast", **size, **kwargs)


@pytest.mark.parametrize("value", ["rough", "EXACTLY", 1, None])
def test_unknown_roundings_are_refused(value):
    nv12 = np.zeros((24, 16), np.uint8)
    with pytest.raises(InvalidArgumentError, match="rounding"):
        npu_zc.convert(nv12, np.zeros((16, 16, 4), np.uint8), "NV12", "RGBx", rounding=value)
    with pytest.raises(InvalidArgumentError, match="rounding"):
        npu_zc.Converter("NV12", "RGBx", 16, 16, rounding=value)
