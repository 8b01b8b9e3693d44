"""npu_zc.layout.convert against independent references: numpy arithmetic in
float32 with ml_dtypes / numpy casts, and OpenCV's NV12 conversion (through a
numpy twin of its integer arithmetic, itself checked against OpenCV where
OpenCV is installed: the aarch64 run under emulation has no OpenCV), on every
code path this CPU has (scalar, AVX2, AVX-512, NEON)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (the bfloat16 reference) is not installed")

import npu_zc
from npu_zc import layout
from npu_zc.errors import InvalidArgumentError

LEVELS, DEFAULT_LEVEL = layout.simd_levels()
# The camera formats (YUYV, UYVY, I420) have their own tests: test_layout_yuv.py; NV21: layout/test_layout_colour.py.
SOURCES = tuple(f for f in layout.SOURCE_FORMATS if f not in ("YUYV", "UYVY", "I420", "NV21", "P010", "I010"))  # (P010, I010: test_layout_p010.py)
DESTINATIONS = tuple(f for f in layout.DESTINATION_FORMATS if not f.endswith("_I8"))  # (int8: test_layout_i8.py)
DTYPE = {
    "RGBx": np.uint8,
    "BGRx": np.uint8,
    "RGBx_BF16": ml_dtypes.bfloat16,
    "RGBx_FP16": np.float16,
    "RGBP_FLOAT": np.float32,
    "RGBP_FP16": np.float16,
    "BGRP_FLOAT": np.float32,
    "BGRP_FP16": np.float16,
    "RGB": np.uint8,
    "BGR": np.uint8,
    "RGB_FLOAT": np.float32,
    "BGR_FLOAT": np.float32,
}
PLANAR = ("RGBP_FLOAT", "RGBP_FP16", "BGRP_FLOAT", "BGRP_FP16")
PADDED = ("RGBx", "BGRx", "RGBx_BF16", "RGBx_FP16")
CHANNELS = {"BGR": 3, "RGB": 3, "BGRA": 4, "RGBA": 4, "RGBx": 4, "BGRx": 4, "GRAY": 1}
IMAGENET: dict[str, Any] = dict(mean=(123.675, 116.28, 103.53), scale=(58.395, 57.12, 57.375))


def random_source(rng: np.random.Generator, fmt: str, width: int, height: int) -> np.ndarray:
    if fmt == "NV12":
        return rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8)
    shape = (height, width) if fmt == "GRAY" else (height, width, CHANNELS[fmt])
    return rng.integers(0, 256, shape, dtype=np.uint8)


def nv12_to_rgb(yuv: np.ndarray) -> np.ndarray:
    """OpenCV's cvtColor(COLOR_YUV2RGB_NV12) in numpy: BT.601 limited range in
    20-bit fixed point (test_numpy_nv12_is_opencvs checks it against OpenCV)."""
    height = yuv.shape[0] // 3 * 2
    luma = np.maximum(yuv[:height].astype(np.int64) - 16, 0) * 1_220_542 + (1 << 19)
    chroma = yuv[height:].reshape(height // 2, -1, 2).astype(np.int64) - 128
    u, v = (chroma[..., c].repeat(2, axis=0).repeat(2, axis=1) for c in (0, 1))
    rgb = [luma + 1_673_527 * v, luma - 852_492 * v - 409_993 * u, luma + 2_116_026 * u]
    return np.stack([np.clip(c >> 20, 0, 255) for c in rgb], axis=2).astype(np.uint8)


def test_numpy_nv12_is_opencvs():
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed: the numpy NV12 reference is checked against it where it is")
    yuv = np.random.default_rng(12).integers(0, 256, (96 * 3 // 2, 128), dtype=np.uint8)
    yuv[:8] = np.arange(256, dtype=np.uint8).reshape(2, 128)[:, None, :].repeat(4, axis=1).reshape(8, 128)
    assert np.array_equal(nv12_to_rgb(yuv), cv2.cvtColor(yuv, cv2.COLOR_YUV2RGB_NV12))


def reference_rgb(src: np.ndarray, fmt: str) -> np.ndarray:
    """(H, W, 3) RGB from a source, by numpy indexing or OpenCV's arithmetic."""
    if fmt == "NV12":
        return nv12_to_rgb(np.ascontiguousarray(src))
    if fmt == "GRAY":
        return np.repeat(src.reshape(src.shape[0], src.shape[1], 1), 3, axis=2)
    rgb = src[..., :3]
    return rgb[..., ::-1] if fmt.startswith("BGR") else rgb


def reference(rgb: np.ndarray, dst_fmt: str, mean=None, scale=None, pad: float = 0) -> np.ndarray:
    """What convert must write, computed the way a numpy user would."""
    channels = rgb[..., ::-1] if dst_fmt.startswith("BGR") else rgb
    with np.errstate(over="ignore"):  # huge normalised values overflow to inf, as they must
        return _reference(channels, dst_fmt, mean, scale, pad)


def _reference(channels: np.ndarray, dst_fmt: str, mean, scale, pad: float) -> np.ndarray:
    values: np.ndarray = channels.astype(np.float32)
    if mean is not None:
        values = values - np.asarray(mean, np.float32)
    if scale is not None:
        values = values / np.asarray(scale, np.float32)
    dtype = DTYPE[dst_fmt]
    if dtype == np.uint8:
        out = np.clip(np.rint(values), 0, 255).astype(np.uint8)
    else:
        out = values.astype(dtype)
    if dst_fmt in PLANAR:
        return np.ascontiguousarray(out.transpose(2, 0, 1))
    if dst_fmt not in PADDED:
        return out
    pad_channel = np.full(out.shape[:2] + (1,), pad, dtype=np.float32).astype(dtype)
    return np.concatenate([out, pad_channel], axis=2)


def empty_destination(fmt: str, width: int, height: int, fill: int = 0xA5) -> np.ndarray:
    shape = (3, height, width) if fmt in PLANAR else (height, width, 4 if fmt in PADDED else 3)
    dst = np.empty(shape, DTYPE[fmt])
    dst.view(np.uint8)[...] = fill
    return dst


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


normalisations = st.sampled_from(
    [
        {},
        IMAGENET,
        dict(mean=127.5, scale=127.5),
        dict(mean=(0.0, 128.0, 255.0), scale=(1.0, -2.0, 0.25)),
        dict(scale=255.0),
        dict(mean=(10.0, 20.0, 30.0), scale=(1e-3, 3e-38, 7.0)),  # huge and subnormal-adjacent values
    ]
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    src_fmt=st.sampled_from(SOURCES),
    dst_fmt=st.sampled_from(DESTINATIONS),
    width=st.integers(1, 41),
    height=st.integers(1, 9),
    norm=normalisations,
    pad=st.sampled_from([0, 1, 255]),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_pair_matches_numpy_and_opencv(src_fmt, dst_fmt, width, height, norm, pad, seed):
    if src_fmt == "NV12":
        width, height = width + width % 2, height + height % 2
    rng = np.random.default_rng(seed)
    src = random_source(rng, src_fmt, width, height)
    if dst_fmt not in PADDED:
        pad_value: float = 0
    elif DTYPE[dst_fmt] == np.uint8:
        # u8 layouts saturate; normalisations that need floats are fine too.
        pad_value = pad
    else:
        pad_value = [0.0, -1.5, 3e38][[0, 1, 255].index(pad)]
    want = reference(reference_rgb(src, src_fmt), dst_fmt, norm.get("mean"), norm.get("scale"), pad_value)
    for level in LEVELS:
        dst = empty_destination(dst_fmt, width, height)
        out = layout.convert(src, dst, src_fmt, dst_fmt, pad=pad_value, simd=level, **norm)
        assert out is dst
        assert same_bits(dst, want), (level, layout.describe_conversion(src_fmt, dst_fmt, simd=level, **norm))


@pytest.mark.parametrize("dst_fmt", DESTINATIONS)
@pytest.mark.parametrize("src_fmt", SOURCES)
def test_large_frames_on_every_path_and_thread_count(src_fmt, dst_fmt):
    width, height = 1922, 34  # wide enough for every vector loop, with tails
    src = random_source(np.random.default_rng(1), src_fmt, width, height)
    rgb = reference_rgb(src, src_fmt)
    for norm in ({}, IMAGENET):
        want = reference(rgb, dst_fmt, norm.get("mean"), norm.get("scale"))
        for level in LEVELS:
            for threads in (1, 2):
                dst = empty_destination(dst_fmt, width, height)
                layout.convert(src, dst, src_fmt, dst_fmt, threads=threads, simd=level, **norm)
                assert same_bits(dst, want), (level, threads, norm)


def test_simd_paths_are_really_used():
    """The comparisons above exercise vector code, not only the tables."""
    for level in LEVELS:
        for src_fmt, dst_fmt in [("BGR", "RGBx"), ("BGR", "RGBx_BF16"), ("RGBA", "RGBP_FLOAT"), ("NV12", "RGBx")]:
            name = layout.describe_conversion(src_fmt, dst_fmt, simd=level, **IMAGENET if dst_fmt != "RGBx" else {})
            assert name.startswith(level), name
            assert level == "scalar" or "lut" not in name, name


@settings(max_examples=60, deadline=None)
@given(
    dst_fmt=st.sampled_from(DESTINATIONS),
    width=st.integers(1, 40),
    height=st.integers(1, 6),
    src_extra=st.integers(1, 13),
    dst_extra=st.integers(1, 9),
    seed=st.integers(0, 2**32 - 1),
)
def test_row_pitch_on_both_sides(dst_fmt, width, height, src_extra, dst_extra, seed):
    """A cropped source view and a destination that is part of a larger array:
    rows are read and written at their pitch, and nothing else is touched."""
    rng = np.random.default_rng(seed)
    big_src = rng.integers(0, 256, (height + 2, width + src_extra, 3), dtype=np.uint8)
    src = big_src[1 : 1 + height, src_extra:]
    planar = dst_fmt in PLANAR
    depth = 4 if dst_fmt in PADDED else 3
    big_shape = (3, height + 1, width + dst_extra) if planar else (height + 1, width + dst_extra, depth)
    big = np.empty(big_shape, DTYPE[dst_fmt])
    big.view(np.uint8)[...] = 0x5A
    before = big.copy()
    dst = big[:, 1:, :width] if planar else big[1:, :width]
    layout.convert(src, dst, "BGR", dst_fmt, **IMAGENET)
    assert same_bits(np.ascontiguousarray(dst), reference(reference_rgb(src, "BGR"), dst_fmt, **IMAGENET))
    untouched = np.ones(big.shape, bool)
    if planar:
        untouched[:, 1:, :width] = False
    else:
        untouched[1:, :width] = False
    assert np.array_equal(big.view(np.uint8)[untouched.repeat(big.itemsize, axis=-1)],
                          before.view(np.uint8)[untouched.repeat(big.itemsize, axis=-1)])


def test_flat_buffers_with_strides():
    """A flat HW buffer whose rows are padded to 64 bytes, and a flat source with a stride."""
    width, height, pitch = 13, 5, 128
    rng = np.random.default_rng(3)
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    src_pitch = 48
    flat_src = np.zeros(height * src_pitch, np.uint8)
    for r in range(height):
        flat_src[r * src_pitch : r * src_pitch + width * 3] = frame[r].reshape(-1)
    flat = np.full(layout.frame_nbytes("RGBx_BF16", width, height, stride=pitch), 0x77, np.uint8)
    layout.convert(flat_src, flat, "BGR", "RGBx_BF16", size=(width, height), src_stride=src_pitch, dst_stride=pitch, **IMAGENET)
    rows = flat.reshape(height, pitch)
    got = np.ascontiguousarray(rows[:, : width * 8]).view(ml_dtypes.bfloat16).reshape(height, width, 4)
    assert same_bits(got, reference(reference_rgb(frame, "BGR"), "RGBx_BF16", **IMAGENET))
    assert (rows[:, width * 8 :] == 0x77).all()


def test_nv12_pair_and_planes_with_pitch_match_one_buffer():
    width, height = 38, 10
    yuv = random_source(np.random.default_rng(4), "NV12", width, height)
    one = empty_destination("RGBx", width, height)
    layout.convert(yuv, one, "NV12", "RGBx", pad=255)
    y = np.zeros((height, width + 10), np.uint8)[:, :width]
    y[...] = yuv[:height]
    uv = yuv[height:].reshape(height // 2, width // 2, 2)
    pair = empty_destination("RGBx", width, height)
    layout.convert((y, uv), pair, "NV12", "RGBx", pad=255)
    assert same_bits(one, pair)
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed: the last check, against cv2.cvtColor, is left out")
    assert np.array_equal(one, cv2.cvtColor(yuv, cv2.COLOR_YUV2RGBA_NV12))


def test_dmabuf_destination_and_batch_axis():
    width, height = 24, 16
    src = random_source(np.random.default_rng(5), "BGR", width, height)
    want = reference(reference_rgb(src, "BGR"), "RGBx_FP16", **IMAGENET)
    with npu_zc.alloc(layout.frame_nbytes("RGBx_FP16", width, height)) as buf:
        view = layout.convert(src, buf, "BGR", "RGBx_FP16", **IMAGENET)
        assert same_bits(view.view(np.float16).reshape(height, width, 4), want)
        del view
    batched = np.zeros((1, height, width, 4), np.float16)
    layout.convert(src, batched, "BGR", "RGBx_FP16", **IMAGENET)
    assert same_bits(batched[0], want)
    raw = np.zeros((height, width, 4), np.uint16)  # bf16 as raw bits
    layout.convert(src, raw, "BGR", "RGBx_BF16", **IMAGENET)
    assert same_bits(raw.view(ml_dtypes.bfloat16), reference(reference_rgb(src, "BGR"), "RGBx_BF16", **IMAGENET))


def test_threads_convert_concurrently():
    """The GIL is released: threads running convert at once each get the right frame."""
    from concurrent.futures import ThreadPoolExecutor

    frames = [random_source(np.random.default_rng(s), "BGR", 640, 64) for s in range(4)]

    def run(frame: np.ndarray) -> bool:
        dst = empty_destination("RGBP_FLOAT", 640, 64)
        layout.convert(frame, dst, "BGR", "RGBP_FLOAT", threads=1, **IMAGENET)
        return same_bits(dst, reference(reference_rgb(frame, "BGR"), "RGBP_FLOAT", **IMAGENET))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, frames * 3))


def test_callers_that_each_split_their_frame_share_the_band_pool():
    """Frames large enough to be cut into bands, converted on several threads
    each, from several Python threads at once: one call has the band pool,
    the others run on their own thread, and every frame comes out right."""
    from concurrent.futures import ThreadPoolExecutor

    frames = [random_source(np.random.default_rng(s), "BGR", 1280, 360) for s in range(4)]
    wants = [reference(reference_rgb(frame, "BGR"), "RGBx") for frame in frames]

    def run(i: int) -> bool:
        dst = empty_destination("RGBx", 1280, 360)
        layout.convert(frames[i], dst, "BGR", "RGBx", threads=4)
        return same_bits(dst, wants[i])

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, list(range(4)) * 10))


def test_a_forked_child_converts_without_the_parents_workers():
    """fork copies the band pool's bookkeeping but not its threads: the
    child's calls must not wait for workers it does not have."""
    frame = random_source(np.random.default_rng(5), "BGR", 1280, 360)
    want = reference(reference_rgb(frame, "BGR"), "RGBx")
    layout.convert(frame, empty_destination("RGBx", 1280, 360), "BGR", "RGBx", threads=4)  # the pool is up
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        dst = empty_destination("RGBx", 1280, 360)
        layout.convert(frame, dst, "BGR", "RGBx", threads=4)
        os.write(write, b"1" if same_bits(dst, want) else b"0")
        os._exit(0)
    os.close(write)
    import select

    ready, _, _ = select.select([read], [], [], 30)
    if not ready:
        os.kill(pid, 9)
    os.waitpid(pid, 0)
    result = os.read(read, 1) if ready else b""
    os.close(read)
    assert ready, "the forked child did not finish its conversion in 30 s"
    assert result == b"1"


def test_memcpy_limit_for_the_benchmarks():
    from npu_zc import _core

    # A helper for benches/, outside the public surface of _core.
    assert "_bench" not in _core.__all__ and not any("memcpy" in name for name in _core.__all__)
    assert 0 < _core._bench.memcpy_seconds(1 << 20, 2, 3) < 1
    for bad in [(1 << 20, 0, 1), (1 << 20, 257, 1), (1 << 20, 1, 0), ((1 << 28) + 1, 1, 1), (1 << 62, 1, 1)]:
        with pytest.raises(npu_zc.InvalidArgumentError, match="memcpy_seconds takes"):
            _core._bench.memcpy_seconds(*bad)


def test_environment_variable_forces_the_scalar_path():
    code = "from npu_zc import layout; print(layout.simd_levels()[1])"
    env = dict(os.environ, NPU_ZC_SIMD="scalar")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "scalar"


# --- bad input: a clear ValueError, nothing written -------------------------

BGR = np.random.default_rng(9).integers(0, 256, (6, 8, 3), dtype=np.uint8)


def refused(dst: np.ndarray, *args, match: str, **kwargs) -> None:
    before = dst.copy()
    with pytest.raises(InvalidArgumentError, match=match) as info:
        layout.convert(*args, **kwargs)
    assert isinstance(info.value, ValueError) and isinstance(info.value, npu_zc.Error)
    assert same_bits(dst, before), "written despite the error"


def test_bad_formats_dtypes_and_shapes():
    dst = empty_destination("RGBx_BF16", 8, 6)
    refused(dst, BGR, dst, "BGR", "RGBx_BF17", match="unknown format name")
    refused(dst, BGR, dst, "YUV9", "RGBx_BF16", match="unknown format name")
    refused(dst, BGR, dst, "RGBx_BF16", "RGBx", match="not a source format")
    refused(dst, BGR, dst, "BGR", "GRAY", match="not a destination format")
    three = empty_destination("RGB_FLOAT", 8, 6)
    refused(three, BGR, three, "BGR", "RGB_FLOAT", pad=1.0, match="no pad channel")
    refused(dst, BGR.astype(np.float32), dst, "BGR", "RGBx_BF16", match="dtype float32")
    refused(dst, BGR, dst, "BGRA", "RGBx_BF16", match=r"shape \(H, W, 4\)")
    wrong_dtype = np.zeros((6, 8, 4), np.float32)
    refused(wrong_dtype, BGR, wrong_dtype, "BGR", "RGBx_BF16", match="not float32")
    wrong_shape = np.zeros((6, 8, 3), ml_dtypes.bfloat16)
    refused(wrong_shape, BGR, wrong_shape, "BGR", "RGBx_BF16", match="has shape")
    short = np.zeros(8 * 6 * 8 - 1, np.uint8)
    refused(short, BGR, short, "BGR", "RGBx_BF16", match="takes 384 bytes")
    refused(dst, BGR, "not an array", "BGR", "RGBx_BF16", match="numpy array or a buffer")


def test_non_contiguous_read_only_and_overlapping_destinations():
    every_other = np.zeros((6, 16, 4), np.uint8)[:, ::2]
    refused(every_other, BGR, every_other, "BGR", "RGBx", match="not contiguous")
    columns = np.zeros((6, 8, 8), ml_dtypes.bfloat16)[:, :, ::2]
    refused(columns, BGR, columns, "BGR", "RGBx_BF16", match="not contiguous along its last axis")
    frozen = empty_destination("RGBx", 8, 6)
    frozen.setflags(write=False)
    refused(frozen, BGR, frozen, "BGR", "RGBx", match="read-only")
    shared = np.zeros((6, 8, 4), np.uint8)
    refused(shared, shared, shared, "RGBA", "RGBx", match="overlaps the source")


def test_bad_parameters():
    dst = empty_destination("RGBx", 8, 6)
    refused(dst, BGR, dst, "BGR", "RGBx", scale=(1, 0, 1), match=r"scale\[1\] is 0")
    refused(dst, BGR, dst, "BGR", "RGBx", mean=(1, 2), match="has 2 values")
    refused(dst, BGR, dst, "BGR", "RGBx", mean=float("nan"), match="finite")
    refused(dst, BGR, dst, "BGR", "RGBx", pad=256, match="0 to 255")
    refused(dst, BGR, dst, "BGR", "RGBx", threads=0, match="threads")
    refused(dst, BGR, dst, "BGR", "RGBx", dst_stride=31, match="shorter than one row")
    refused(dst, BGR, dst, "BGR", "RGBx", simd="sse9", match="unknown SIMD level")
    missing = next((level for level in ("avx512", "avx2", "neon") if level not in LEVELS), None)
    if missing:
        refused(dst, BGR, dst, "BGR", "RGBx", simd=missing, match="cannot run")


def test_nv12_with_odd_dimensions_or_rows():
    dst = np.zeros((2, 5, 4), np.uint8)
    refused(dst, np.zeros((3, 5), np.uint8), dst, "NV12", "RGBx", match="must be even")
    dst2 = np.zeros((4, 6, 4), np.uint8)
    refused(dst2, np.zeros((7, 6), np.uint8), dst2, "NV12", "RGBx", match="multiple of 3")
    refused(dst2, (np.zeros((4, 6), np.uint8), np.zeros((3, 6), np.uint8)), dst2, "NV12", "RGBx", match="UV plane")


def test_dmabuf_of_the_wrong_size_is_refused():
    with npu_zc.alloc(layout.frame_nbytes("RGBx", 8, 6) + 8192) as buf:
        with pytest.raises(InvalidArgumentError, match="buffer has"):
            layout.convert(BGR, buf, "BGR", "RGBx")
        with pytest.raises(InvalidArgumentError):
            layout.check_destination(buf, "RGBx", 8, 6)
    layout.check_destination(np.zeros((6, 8, 4), np.uint8), "RGBx", 8, 6)
    with pytest.raises(InvalidArgumentError, match="takes 384 bytes"):
        layout.check_destination(100, "RGBx_BF16", 8, 6)


# --- format selection and sizes --------------------------------------------


@pytest.mark.parametrize(
    "element, tensor_layout, channels, order, expected",
    [
        ("bf16", "NHWC", 4, "RGB", "RGBx_BF16"),
        (np.float16, "NHWC", 4, "RGB", "RGBx_FP16"),
        ("int8", "NHWC", 4, "RGB", "RGBx"),
        (np.uint8, "[N,H,W,C]", 4, "BGR", "BGRx"),
        ("f32", "NCHW", 3, "RGB", "RGBP_FLOAT"),
        ("float16", "NCHW", 3, "RGB", "RGBP_FP16"),
        ("f32", "NCHW", 3, "BGR", "BGRP_FLOAT"),
        ("u8", "NHWC", 3, "BGR", "BGR"),
        ("float32", "NHWC", 3, "RGB", "RGB_FLOAT"),
        (ml_dtypes.bfloat16, "NHWC", 4, "RGB", "RGBx_BF16"),
    ],
)
def test_select_format(element, tensor_layout, channels, order, expected):
    fmt = layout.select_format(element, tensor_layout, channels, order=order)
    assert fmt == expected
    # The chosen format's frame matches the model input's byte size.
    itemsize = np.dtype(DTYPE[fmt]).itemsize
    assert layout.frame_nbytes(fmt, 224, 224) == 224 * 224 * channels * itemsize


@pytest.mark.parametrize(
    "args, match",
    [(("f32", "NHWC", 4), "no destination format"), (("bf16", "NCHW", 3), "no destination format"),
     (("bf16", "NHWC", 3), "no destination format"), (("q4", "NHWC", 4), "unknown element type"),
     (("bf16", "NDHWC", 4), "unknown tensor layout")],
)
def test_select_format_refuses_what_has_no_layout(args, match):
    with pytest.raises(InvalidArgumentError, match=match):
        layout.select_format(*args)
    with pytest.raises(InvalidArgumentError, match="BGR order"):
        layout.select_format("bf16", "NHWC", 4, order="BGR")


def test_frame_nbytes():
    assert layout.frame_nbytes("RGBx_BF16", 1920, 1080) == 1920 * 1080 * 8
    assert layout.frame_nbytes("RGBP_FLOAT", 5, 3) == 3 * 5 * 3 * 4
    assert layout.frame_nbytes("NV12", 6, 4) == 36
    assert layout.frame_nbytes("RGBx", 5, 3, stride=64) == 192
    with pytest.raises(InvalidArgumentError, match="even"):
        layout.frame_nbytes("NV12", 5, 4)
