"""The camera formats YUYV, UYVY (packed 4:2:2) and I420 (planar 4:2:0) as
layout sources, on every code path this CPU has.

OpenCV's ``cvtColor`` decodes YUYV, UYVY, I420 and NV12 with one fixed-point
BT.601 arithmetic, so the engine decodes them with its NV12 kernels after
rearranging the rows (rust/layout/kernels: `splitter`, `interleaver`) and must be bit-exact with
``COLOR_YUV2RGB_YUYV``, ``_UYVY`` and ``_I420`` (no ±1 anywhere: these tests
compare exactly). The numpy twins below are checked against OpenCV where it
is installed, as test_layout.py does for NV12; every destination is then the
RGB reference put through test_layout's numpy normalisation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_zc import layout
from npu_zc.errors import InvalidArgumentError
from test_layout import DESTINATIONS, IMAGENET, LEVELS, PADDED, DTYPE, empty_destination, normalisations, reference, same_bits

CAMERA_FORMATS = ("YUYV", "UYVY", "I420")


def random_camera_frame(rng: np.random.Generator, fmt: str, width: int, height: int) -> np.ndarray:
    if fmt == "I420":
        return rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8)
    return rng.integers(0, 256, (height, width, 2), dtype=np.uint8)


def _bt601(y: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """OpenCV's YUV -> RGB in 20-bit fixed point, with full-size U and V."""
    luma = np.maximum(y.astype(np.int64) - 16, 0) * 1_220_542 + (1 << 19)
    u, v = u.astype(np.int64) - 128, v.astype(np.int64) - 128
    rgb = [luma + 1_673_527 * v, luma - 852_492 * v - 409_993 * u, luma + 2_116_026 * u]
    return np.stack([np.clip(c >> 20, 0, 255) for c in rgb], axis=2).astype(np.uint8)


def camera_rgb(src: np.ndarray, fmt: str) -> np.ndarray:
    """(H, W, 3) RGB of a camera frame, as OpenCV decodes it."""
    if fmt == "I420":
        h, w = src.shape[0] // 3 * 2, src.shape[1]
        flat = np.ascontiguousarray(src).reshape(-1)
        u = flat[h * w : h * w + h * w // 4].reshape(h // 2, w // 2)
        v = flat[h * w + h * w // 4 :].reshape(h // 2, w // 2)
        return _bt601(src[:h], u.repeat(2, 0).repeat(2, 1), v.repeat(2, 0).repeat(2, 1))
    pairs = src.reshape(src.shape[0], -1)  # Y U Y V ... (YUYV) or U Y V Y ... (UYVY)
    y, c = (pairs[:, 0::2], pairs[:, 1::2]) if fmt == "YUYV" else (pairs[:, 1::2], pairs[:, 0::2])
    return _bt601(y, c[:, 0::2].repeat(2, 1), c[:, 1::2].repeat(2, 1))


@pytest.mark.parametrize("fmt", CAMERA_FORMATS)
def test_numpy_twin_is_opencvs(fmt: str) -> None:
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed: the numpy reference is checked against it where it is")
    src = random_camera_frame(np.random.default_rng(12), fmt, 128, 96)
    src.reshape(-1)[:512] = np.arange(512) % 256  # every byte value in Y and in U, V
    code = {"YUYV": cv2.COLOR_YUV2RGB_YUYV, "UYVY": cv2.COLOR_YUV2RGB_UYVY, "I420": cv2.COLOR_YUV2RGB_I420}[fmt]
    assert np.array_equal(camera_rgb(src, fmt), cv2.cvtColor(src, code))


@pytest.mark.parametrize("fmt", CAMERA_FORMATS)
def test_bit_exact_with_opencv_on_every_path(fmt: str) -> None:
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed")
    width, height = 1922, 34  # every vector loop, with tails
    src = random_camera_frame(np.random.default_rng(1), fmt, width, height)
    codes = {
        "RGB": {"YUYV": cv2.COLOR_YUV2RGB_YUYV, "UYVY": cv2.COLOR_YUV2RGB_UYVY, "I420": cv2.COLOR_YUV2RGB_I420},
        "BGR": {"YUYV": cv2.COLOR_YUV2BGR_YUYV, "UYVY": cv2.COLOR_YUV2BGR_UYVY, "I420": cv2.COLOR_YUV2BGR_I420},
        "RGBx": {"YUYV": cv2.COLOR_YUV2RGBA_YUYV, "UYVY": cv2.COLOR_YUV2RGBA_UYVY, "I420": cv2.COLOR_YUV2RGBA_I420},
    }
    for dst_fmt, by_format in codes.items():
        want = cv2.cvtColor(src, by_format[fmt])
        for level in LEVELS:
            for threads in (1, 2):
                dst = empty_destination(dst_fmt, width, height)
                layout.convert(src, dst, fmt, dst_fmt, pad=255 if dst_fmt == "RGBx" else 0, simd=level, threads=threads)
                assert np.array_equal(dst, want), (fmt, dst_fmt, level, threads)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    src_fmt=st.sampled_from(CAMERA_FORMATS),
    dst_fmt=st.sampled_from(DESTINATIONS),
    half_width=st.integers(1, 40),
    half_height=st.integers(1, 5),
    norm=normalisations,
    pad=st.sampled_from([0, 1, 255]),
    level=st.sampled_from(LEVELS),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_destination_matches_numpy(src_fmt, dst_fmt, half_width, half_height, norm, pad, level, seed):
    width, height = 2 * half_width, 2 * half_height
    rng = np.random.default_rng(seed)
    src = random_camera_frame(rng, src_fmt, width, height)
    pad_value: float = 0 if dst_fmt not in PADDED else pad if DTYPE[dst_fmt] == np.uint8 else -1.5 * pad
    want = reference(camera_rgb(src, src_fmt), dst_fmt, norm.get("mean"), norm.get("scale"), pad_value)
    dst = empty_destination(dst_fmt, width, height)
    layout.convert(src, dst, src_fmt, dst_fmt, pad=pad_value, simd=level, **norm)
    assert same_bits(dst, want), layout.describe_conversion(src_fmt, dst_fmt, pad=pad_value, simd=level, **norm)
    conv = layout.Converter(src_fmt, dst_fmt, width, height, pad=pad_value, simd=level, **norm)
    again = empty_destination(dst_fmt, width, height)
    conv(src, again)
    assert same_bits(again, want)


@pytest.mark.parametrize("fmt", ["YUYV", "UYVY"])
def test_packed_422_with_a_row_pitch(fmt: str) -> None:
    """A camera buffer whose rows are padded (bytesperline > 2 * width): a view of it, or a flat buffer."""
    width, height, pitch = 22, 6, 64
    rng = np.random.default_rng(3)
    flat = rng.integers(0, 256, height * pitch, dtype=np.uint8)
    view = np.lib.stride_tricks.as_strided(flat, (height, width, 2), (pitch, 2, 1))
    want = reference(camera_rgb(np.ascontiguousarray(view), fmt), "RGBx_BF16", **IMAGENET)
    for src, extra in ((view, {}), (flat, dict(size=(width, height), src_stride=pitch))):
        dst = empty_destination("RGBx_BF16", width, height)
        layout.convert(src, dst, fmt, "RGBx_BF16", **IMAGENET, **extra)
        assert same_bits(dst, want)


def test_kernels_are_the_simd_ones() -> None:
    for level in LEVELS:
        # SIMD levels decode YUYV and UYVY rows as they are, and I420 from its three planes (nothing interleaved).
        for fmt, kernel in (("YUYV", "yuyv"), ("UYVY", "uyvy"), ("I420", "i420")):
            name = layout.describe_conversion(fmt, "RGBx", simd=level)
            if level == "scalar" and fmt != "I420":
                assert name == "scalar/yuv422-split + scalar/nv12", name
                continue
            assert name == f"{level}/{kernel}", name
            normalised = layout.describe_conversion(fmt, "RGBx_BF16", simd=level, **IMAGENET)
            assert level == "scalar" or "lut" not in normalised, normalised


def refused(src: Any, fmt: str, match: str, **kwargs: Any) -> None:
    dst = np.full((4, 6, 4), 7, np.uint8)
    with pytest.raises(InvalidArgumentError, match=match):
        layout.convert(src, dst if "dst" not in kwargs else kwargs.pop("dst"), fmt, "RGBx", **kwargs)
    assert (dst == 7).all()


def test_bad_camera_frames_are_refused_clearly() -> None:
    refused(np.zeros((4, 5, 2), np.uint8), "YUYV", "width must be even", dst=np.zeros((4, 5, 4), np.uint8))
    refused(np.zeros((4, 6, 3), np.uint8), "YUYV", r"a YUYV source has shape \(H, W, 2\)")
    refused(np.zeros((7, 6), np.uint8), "I420", "multiple of 3")
    refused(np.zeros((6, 5), np.uint8), "I420", "must be even", dst=np.zeros((4, 5, 4), np.uint8))
    flat = np.zeros(8 * 6 * 3 // 2 * 2, np.uint8)
    refused(flat, "I420", r"pass its \(Y, U, V\) planes", size=(6, 4), src_stride=12)


def test_frame_sizes() -> None:
    assert layout.frame_nbytes("YUYV", 640, 480) == 614400  # vivid's sizeimage
    assert layout.frame_nbytes("UYVY", 640, 480, stride=1536) == 1536 * 480
    assert layout.frame_nbytes("I420", 640, 480) == 460800


def _nv12_twins(rng: np.random.Generator, width: int, height: int) -> dict[str, np.ndarray]:
    """One picture as NV12, YUYV, UYVY and I420 (4:2:2 chroma repeated on each pair of rows)."""
    y = rng.integers(0, 256, (height, width), dtype=np.uint8)
    uv = rng.integers(0, 256, (height // 2, width), dtype=np.uint8)
    chroma = uv.repeat(2, axis=0)
    yuyv = np.stack([y, chroma], axis=2)
    uyvy = np.stack([chroma, y], axis=2)
    i420 = np.concatenate([y.reshape(-1), uv[:, 0::2].reshape(-1), uv[:, 1::2].reshape(-1)]).reshape(height * 3 // 2, width)
    return {"NV12": np.vstack([y, uv]), "YUYV": yuyv, "UYVY": uyvy, "I420": i420}


@pytest.mark.parametrize("interpolation", ["bilinear", "area", "nearest"])
@pytest.mark.parametrize("fit", ["stretch", "letterbox"])
def test_resizing_equals_nv12_with_the_same_samples(interpolation: str, fit: str) -> None:
    """The one-pass resize reads camera frames as it reads NV12 (whose resize is tested against
    OpenCV in test_layout_resize.py): the same picture gives the same bytes, on every level."""
    frames = _nv12_twins(np.random.default_rng(21), 96, 54)
    for dst_fmt, norm in (("RGBx", {}), ("RGBx_BF16", IMAGENET), ("RGBP_FLOAT", IMAGENET)):
        for level in LEVELS:
            args: dict[str, Any] = dict(roi=(6, 4, 80, 44), interpolation=interpolation, fit=fit, simd=level, threads=1, **norm)
            want = empty_destination(dst_fmt, 40, 30)
            layout.convert(frames["NV12"], want, "NV12", dst_fmt, **args)
            for fmt in CAMERA_FORMATS:
                got = empty_destination(dst_fmt, 40, 30)
                transform = layout.convert(frames[fmt], got, fmt, dst_fmt, **args)
                assert same_bits(got, want), (fmt, dst_fmt, level)
                assert tuple(transform.roi) == (6, 4, 80, 44)


def test_a_strong_shrink_gathers_chroma_groups_and_says_so() -> None:
    """A shrink whose x taps read at most half of the 2-pixel chroma groups decodes only those
    (I420's straight from its planes, no row interleaved; bilinear on x86 in the x pass itself,
    which also takes any shrink by 3 or more, by 3.5 or more with VBMI, whose x pass over decoded
    rows is the faster below): the same bytes as NV12's, on every level, and the kernel name says
    which way ran."""
    frames = _nv12_twins(np.random.default_rng(22), 192, 54)
    for level in LEVELS:
        fused_from = 3.5 if level == "avx512vbmi" else 3
        # (size, taps read at most half of the groups)
        for (width, height), gathered in (((16, 12), True), ((64, 20), False), ((56, 20), False), ((150, 40), False)):
            strong = 192 / width >= fused_from
            for interpolation in ("bilinear", "nearest"):
                args: dict[str, Any] = dict(interpolation=interpolation, simd=level, threads=1)
                want = empty_destination("RGBx", width, height)
                layout.convert(frames["NV12"], want, "NV12", "RGBx", **args)
                for fmt in CAMERA_FORMATS:
                    got = empty_destination("RGBx", width, height)
                    layout.convert(frames[fmt], got, fmt, "RGBx", **args)
                    assert same_bits(got, want), (fmt, level, width, interpolation)
                kernel = layout.Converter("I420", "RGBx", width, height, src_size=(192, 54), **args).kernel
                # A bilinear one on x86 decodes in its x pass, from the planes: nothing gathered first.
                fused = (gathered or strong) and interpolation == "bilinear" and level.startswith("avx")
                assert ("/yuv420-fused" in kernel) == fused, kernel
                assert ("/i420-gather" in kernel) == (gathered and not fused), kernel
                assert ("/i420-interleave" in kernel) == (not gathered and not fused), kernel


def test_a_crop_off_the_chroma_grid_is_refused() -> None:
    src = random_camera_frame(np.random.default_rng(2), "YUYV", 64, 48)
    with pytest.raises(InvalidArgumentError, match="does not start and end on even pixels"):
        layout.convert(src, np.zeros((20, 20, 4), np.uint8), "YUYV", "RGBx", roi=(3, 0, 40, 40))
    # 4:2:2 shares chroma along rows only: an odd row is fine.
    layout.convert(src, np.zeros((20, 20, 4), np.uint8), "YUYV", "RGBx", roi=(2, 1, 40, 39))
