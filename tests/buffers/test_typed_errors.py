"""Raw built-ins where npu_zc.Error is documented: each of these
raised TypeError, ValueError, OverflowError or UnicodeEncodeError before."""

from __future__ import annotations

import numpy as np
import pytest

import npu_zc
from npu_zc import InvalidArgumentError


def test_convert_simd_must_be_a_name() -> None:
    src, dst = np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2, 4), np.uint8)
    for simd in (3, b"avx2", "avx\udc80"):
        with pytest.raises(InvalidArgumentError):
            npu_zc.convert(src, dst, "BGR", "RGBx", simd=simd)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            npu_zc.Converter("BGR", "RGBx", 2, 2, simd=simd)  # type: ignore[arg-type]


def test_a_surrogate_in_a_format_name() -> None:
    src, dst = np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2, 4), np.uint8)
    with pytest.raises(InvalidArgumentError):
        npu_zc.convert(src, dst, "BG\udc80R", "RGBx")
    with pytest.raises(InvalidArgumentError):
        npu_zc.convert(src, dst, "BGR", "RGB\udc80x")
    with pytest.raises(InvalidArgumentError):
        npu_zc.layout.describe_conversion("BG\udc80R", "RGBx")


def test_pad_out_of_float_range() -> None:
    src, dst = np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2, 4), np.uint8)
    for pad in (10**400, float("nan"), "0"):
        with pytest.raises(InvalidArgumentError):
            npu_zc.convert(src, dst, "BGR", "RGBx", pad=pad)  # type: ignore[arg-type]


def test_a_plane_pair_for_a_single_buffer_format() -> None:
    y, uv = np.zeros((4, 4), np.uint8), np.zeros((2, 4), np.uint8)
    dst = np.zeros((4, 4, 4), np.uint8)
    with pytest.raises(InvalidArgumentError, match=r"only NV12, NV21 and P010 take a \(Y, UV\) pair"):
        npu_zc.convert((y, uv), dst, "BGR", "RGBx")
    with pytest.raises(InvalidArgumentError, match=r"\(Y, U, V\) planes, not 2 arrays"):
        npu_zc.convert((y, uv), dst, "I420", "RGBx")


def test_transform_points_must_be_numbers() -> None:
    src, dst = np.zeros((4, 8, 3), np.uint8), np.zeros((4, 4, 4), np.uint8)
    transform = npu_zc.convert(src, dst, "BGR", "RGBx", fit="letterbox")
    for points in ("abcd", ["a", "b"], object()):
        with pytest.raises(InvalidArgumentError):
            transform.to_source(points)
    assert transform.to_source([[0.0, 0.0]]).shape == (1, 2)


def test_map_refuses_object_and_unknown_dtypes() -> None:
    with npu_zc.alloc(4096, "memfd") as buf:
        for dtype in ("O", object, "no-such-dtype", [("a", "O")]):
            with pytest.raises(InvalidArgumentError):
                buf.map(dtype)


def test_camera_sizes_out_of_range() -> None:
    for kwargs in ({"width": -1}, {"height": -1}, {"width": 2**40}, {"buffers": -1}):
        with pytest.raises(InvalidArgumentError):
            npu_zc.Camera("/dev/null", **kwargs)  # type: ignore[arg-type]


def test_mmap_enodev_is_not_a_missing_heap() -> None:
    """A sysfs attribute has a size but no mmap: ENODEV, which is not HeapNotFoundError."""
    import glob
    import os

    candidates = [p for p in glob.glob("/sys/kernel/mm/*/enabled") + ["/sys/kernel/profiling"] if os.path.isfile(p)]
    if not candidates:
        pytest.skip("no sysfs attribute to try")
    fd = os.open(candidates[0], os.O_RDONLY)
    try:
        buf = npu_zc.DmaBuf.from_fd(fd, trust_size=True)
        with pytest.raises(InvalidArgumentError, match="does not support mmap") as info:
            buf.map(writable=False)
        assert not isinstance(info.value, npu_zc.HeapNotFoundError)
        buf.close()
    finally:
        os.close(fd)
