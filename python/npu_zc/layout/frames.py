"""Frames in: :func:`convert` one frame into the layout a model input reads,
and what to know before converting (sizes, formats, the kernels taken)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .. import _core
from ._checks import (
    ChannelValues,
    Mappable,
    _channel_values,
    _destination_array,
    _destination_bytes,
    _fail,
    _format,
    _index,
    _pad,
    _source_arrays,
    _threads,
)


def convert(
    src: Any,
    dst: np.ndarray | Mappable,
    src_format: str,
    dst_format: str,
    *,
    mean: ChannelValues = None,
    scale: ChannelValues = None,
    pad: float = 0,
    src_stride: int | None = None,
    dst_stride: int | None = None,
    size: tuple[int, int] | None = None,
    threads: int | None = None,
    simd: str | None = None,
) -> np.ndarray:
    """Convert the frame ``src`` into ``dst`` in one pass; returns the array written.

    ``src``: uint8, shaped ``(H, W, C)`` (``(H, W)`` for GRAY, ``(H, W, 2)``
    for YUYV and UYVY); NV12 is ``(H * 3 / 2, W)`` or a ``(Y, UV)`` pair, I420
    ``(H * 3 / 2, W)`` (Y, then U, then V; tightly packed). A strided view (a crop of a
    larger image) works as it is. ``dst``: a numpy array shaped like the
    frame (``(H, W, 4)`` packed, ``(H, W, 3)`` for RGB, BGR, RGB_FLOAT and
    BGR_FLOAT, ``(3, H, W)`` planar, a leading batch axis of 1 allowed) of the
    destination's dtype; or a contiguous uint8 buffer of exactly the frame's
    bytes; or a DmaBuf. Nothing is allocated.

    ``mean``/``scale``: one number or three, in the destination's channel
    order; each value becomes ``(x - mean) / scale``. ``pad``: the fourth
    channel of 4-channel layouts (0-255 for RGBx/BGRx, a float otherwise).
    ``src_stride``/``dst_stride``: bytes from one row to the next, for flat
    buffers with padded rows (HW buffers often align rows); with ``size=(width,
    height)`` the source may be a flat buffer too. ``threads``: at most this
    many threads (1: this thread only; None: every core, for large frames).
    ``simd``: force a code path ("scalar", "avx2", "avx512", "neon"); see
    :func:`simd_levels`.

    Raises :class:`npu_zc.InvalidArgumentError` (a ValueError) for any bad
    argument, before writing anything. Converting many frames of one size,
    a :class:`Converter` checks the arguments once.
    """
    src_format = _format(src_format, "source")
    dst_format = _format(dst_format, "destination")
    y, uv, width, height = _source_arrays(src, src_format, size)
    stride = None if dst_stride is None else _index(dst_stride, "dst_stride")
    nbytes = frame_nbytes(dst_format, width, height, stride=stride)
    array, mapped = _destination_array(dst, nbytes)
    dst_bytes = _destination_bytes(array, dst_format, width, height, nbytes, mapped)
    threads = _threads(threads)
    pad_value = _pad(pad)
    _core.convert(
        y,
        src_format,
        dst_bytes,
        dst_format,
        width,
        height,
        src_pitch=None if src_stride is None else _index(src_stride, "src_stride"),
        dst_pitch=stride,
        uv=uv,
        uv_pitch=None if (uv is None or src_stride is None) else _index(src_stride, "src_stride"),
        mean=_channel_values(mean, "mean"),
        scale=_channel_values(scale, "scale"),
        pad=pad_value,
        threads=threads,
        simd=simd,
    )
    return array


def frame_nbytes(format: str, width: int, height: int, *, stride: int | None = None) -> int:
    """Bytes of a ``width`` x ``height`` frame in ``format`` (every row counting
    its full ``stride``; NV12 as one buffer)."""
    return int(_core.frame_nbytes(_core.format_name(format), _index(width, "width"), _index(height, "height"), stride))


def check_destination(
    dst: np.ndarray | Mappable | int, format: str, width: int, height: int, *, stride: int | None = None
) -> None:
    """Raise :class:`npu_zc.InvalidArgumentError` unless ``dst`` (an array, a
    DmaBuf or a byte count) has exactly the bytes of such a frame (a DmaBuf may
    have up to one page more, as allocations round up to pages)."""
    nbytes = frame_nbytes(_format(format, "destination"), width, height, stride=stride)
    if isinstance(dst, (int, np.integer)):
        have = int(dst)
    elif isinstance(dst, np.ndarray):
        have = dst.nbytes
    else:
        have = int(getattr(dst, "size", -1))
        page = int(getattr(_core, "PAGE_SIZE", 4096))
        if nbytes <= have <= -(-nbytes // page) * page:
            return
    if have != nbytes:
        raise _fail(
            f"the destination holds {have} bytes but a {format} frame of {width}x{height} pixels"
            + (f" with rows {stride} bytes apart" if stride else "")
            + f" takes {nbytes} bytes; check the format, the frame size and the stride"
        )


def _element_name(element_type: Any) -> str:
    if hasattr(element_type, "get_type_name"):  # an openvino.Type
        return str(element_type.get_type_name())
    if isinstance(element_type, str):
        return element_type
    try:
        return str(np.dtype(element_type).name)
    except TypeError:
        raise _fail(f"cannot read an element type from {element_type!r}: use a name such as 'bf16' or a numpy dtype") from None


def select_format(element_type: Any, layout: Any, channels: int, *, order: str = "RGB") -> str:
    """The destination format preprocessing must write for a model input.

    In the spirit of VART's NPU Format Selection Guide: a channels-last
    (``NHWC``) input of 4 channels is a packed HW layout picked by element
    type (u8/i8: ``RGBx`` or, with ``order="BGR"``, ``BGRx``; bf16:
    ``RGBx_BF16``; f16: ``RGBx_FP16``); an NHWC input of 3 channels is ``RGB``
    (u8/i8) or ``RGB_FLOAT`` (f32); a channels-first (``NCHW``) input of 3
    channels is planar (f32: ``RGBP_FLOAT``; f16: ``RGBP_FP16``). With
    ``order="BGR"`` the BGR twin of each (none for bf16 and f16 packed).
    ``element_type``: a name ("bf16", "float32"...), a numpy dtype or an
    OpenVINO ``Type``; ``layout``: "NHWC"/"NCHW" or an OpenVINO ``Layout``.
    """
    if order not in ("RGB", "BGR"):
        raise _fail(f"order must be 'RGB' or 'BGR', not {order!r}")
    layout_name = re.sub(r"[^A-Za-z]", "", str(layout))
    return str(_core.select_format(_element_name(element_type), layout_name, _index(channels, "channels"), order == "BGR"))


def simd_levels() -> tuple[list[str], str]:
    """(the code paths this CPU can run, scalar first; the one used by default).
    ``NPU_ZC_SIMD=scalar`` (or ``avx2``...) in the environment changes the default."""
    levels, default = _core.simd_levels()
    return list(levels), str(default)


def describe_conversion(
    src_format: str,
    dst_format: str,
    *,
    mean: ChannelValues = None,
    scale: ChannelValues = None,
    pad: float = 0,
    simd: str | None = None,
) -> str:
    """Which kernels :func:`convert` runs for these arguments, e.g.
    ``"avx512/bf16-native/fma"`` (a SIMD kernel proven exact for these
    parameters) or ``"scalar/lut"``."""
    return str(
        _core.describe_conversion(
            src_format, dst_format, mean=_channel_values(mean, "mean"), scale=_channel_values(scale, "scale"),
            pad=float(pad), simd=simd,
        )
    )


# --- checked once: a conversion bound to its arguments -----------------------

# Array signatures a Converter or TopK remembers; past this many, it forgets
