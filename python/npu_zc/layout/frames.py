"""Frames in: :func:`convert` one frame into the layout a model input reads,
and what to know before converting (sizes, formats, the kernels taken)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .. import _core
from ._checks import (
    _PLANAR,
    _THREE_CHANNELS,
    ChannelValues,
    Mappable,
    Rounding,
    _channel_values,
    _chroma_planes,
    _destination_array,
    _destination_bytes,
    _drop_leading_ones,
    _fail,
    _count,
    _format,
    _index,
    _name,
    _pad,
    _quant,
    _simd,
    _source_arrays,
    _threads,
)
from .geometry import FITS, INTERPOLATIONS, FillValues, Transform, _choice, _fill, _rect, _size


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
    roi: tuple[int, int, int, int] | None = None,
    interpolation: str | None = None,
    fit: str | None = None,
    dst_rect: tuple[int, int, int, int] | None = None,
    fill: FillValues = None,
    dst_size: tuple[int, int] | None = None,
    matrix: str = "bt601",
    range: str = "limited",
    quant_scale: float | None = None,
    zero_point: int = 0,
    rounding: Rounding = "exact",
) -> Any:
    """Convert the frame ``src`` into ``dst`` in one pass, resizing if the sizes
    differ. Returns the array written, or a :class:`Transform` when resizing.

    ``src``: uint8, shaped ``(H, W, C)`` (``(H, W)`` for GRAY, ``(H, W, 2)``
    for YUYV and UYVY); NV12 is ``(H * 3 / 2, W)`` or a ``(Y, UV)`` pair (NV21 too: V before U), I420
    ``(H * 3 / 2, W)`` (Y, then U, then V; tightly packed) or ``(Y, U, V)``
    planes, 2-D arrays whose row strides may differ (a decoder's padded planes). A strided view (a crop of a
    larger image) works as it is. ``dst``: a numpy array shaped like the
    destination frame (``(h, w, 4)`` packed, ``(h, w, 3)`` for RGB, BGR,
    RGB_FLOAT and BGR_FLOAT, ``(3, h, w)`` planar, a leading batch axis of 1
    allowed) of the destination's dtype; or a contiguous uint8 buffer of
    exactly the frame's bytes; or a DmaBuf. Nothing is allocated.

    ``mean``/``scale``: one number or three, in the destination's channel
    order; each value becomes ``(x - mean) / scale``. ``pad``: the fourth
    channel of 4-channel layouts (0-255 for RGBx/BGRx, a float otherwise).
    ``src_stride``/``dst_stride``: bytes from one row to the next, for flat
    buffers with padded rows (HW buffers often align rows); with ``size=(width,
    height)`` the source may be a flat buffer too. ``threads``: at most this
    many threads (1: this thread only; None: every core, for large frames).
    ``simd``: force a code path ("scalar", "avx2", "avx512", "neon"); see
    :func:`simd_levels`.

    Geometry (any of these, or a destination of another size, makes it a
    resize): ``dst_size=(w, h)`` for a flat or DmaBuf destination (an array
    shaped like a frame gives its own size); ``roi=(x, y, w, h)``: the source
    region to read (default: all; NV12 needs even values); ``interpolation``:
    ``"bilinear"`` (default; OpenCV's ``INTER_LINEAR``), ``"area"``
    (``INTER_AREA``, best for strong downscales) or ``"nearest"``; ``fit``:
    ``"stretch"`` (default), ``"letterbox"`` (keep the aspect, centre, fill
    the rest: detectors) or ``"crop"`` (keep the aspect, crop the centre:
    classifiers); ``dst_rect=(x, y, w, h)``: write only this rectangle of the
    destination; ``fill``: the letterbox colour as source pixel values
    (0-255, one or three in the destination's channel order, e.g. 114),
    normalised like pixels. The :class:`Transform` maps boxes back to source
    pixels (``Transform.to_source``). u8 results equal OpenCV's ``resize``
    then ``cvtColor`` within 1; float results are that u8 image normalised
    exactly as without resizing.

    Colour standard of a YUV source (NV12, NV21, I420, YUYV, UYVY; ignored for the
    others): ``matrix`` ``"bt601"`` (default: SD video, JPEG, most webcams),
    ``"bt709"`` (HD video) or ``"bt2020"`` (UHD); ``range`` ``"limited"``
    (default: Y 16-235, most video) or ``"full"`` (0-255: JPEG, many cameras).
    The default is OpenCV's ``cvtColor``, bit for bit; see docs/layout.md.
    10-bit sources: P010 (``(H * 3 / 2, W)`` uint16 or a ``(Y, UV)`` pair,
    the value in the top 10 bits) and I010 (FFmpeg's yuv420p10le: one uint16
    buffer or ``(Y, U, V)`` planes), decoded to 8-bit RGB first.
    ``rounding``: ``"exact"`` (default: the standard's fixed-point arithmetic,
    bit-exact as above) or ``"fast"``: a 16-bit arithmetic within 1 level
    (per channel) of the standard's matrix in float and of the exact result,
    faster, for NV12, NV21 and I420 into RGBx, BGRx, RGB, BGR (and their A
    forms) without ``mean``/``scale`` and without resizing; refused
    (:class:`npu_zc.InvalidArgumentError`) anywhere else. See docs/layout.md.

    Int8 destinations (``RGBx_I8``, ``RGB_I8``): ``quant_scale`` and
    ``zero_point``, the model input's quantisation, are required: each
    normalised value ``x`` becomes ``clamp(round(x / quant_scale) +
    zero_point, -128, 127)``, rounded half to even (ONNX QuantizeLinear).

    Raises :class:`npu_zc.InvalidArgumentError` (a ValueError) for any bad
    argument, before writing anything. Converting many frames of one size,
    a :class:`Converter` checks the arguments once.
    """
    src_format = _format(src_format, "source")
    dst_format = _format(dst_format, "destination")
    y, uv, width, height = _source_arrays(src, src_format, size)
    geometry = any(v is not None for v in (roi, interpolation, fit, dst_rect, fill, dst_size))
    out_size = _size(dst_size, "dst_size")
    if out_size is None and isinstance(dst, np.ndarray):
        out_size = _frame_size(dst, dst_format)
    dst_width, dst_height = out_size or (width, height)
    resizing = geometry or (dst_width, dst_height) != (width, height)
    stride = None if dst_stride is None else _count(dst_stride, "dst_stride")
    nbytes = frame_nbytes(dst_format, dst_width, dst_height, stride=stride)
    array, mapped = _destination_array(dst, nbytes)
    dst_bytes = _destination_bytes(array, dst_format, dst_width, dst_height, nbytes, mapped)
    threads = _threads(threads)
    pad_value = _pad(pad)
    extra: dict[str, Any] = {}
    if resizing:
        extra = dict(
            dst_size=(dst_width, dst_height),
            roi=_rect(roi, "roi"),
            dst_rect=_rect(dst_rect, "dst_rect"),
            interpolation=_choice(interpolation or "bilinear", "interpolation", INTERPOLATIONS),
            fit=_choice(fit or "stretch", "fit", FITS),
            fill=_fill(fill),
        )
    transform = _core.convert(
        y,
        src_format,
        dst_bytes,
        dst_format,
        width,
        height,
        src_pitch=None if src_stride is None else _count(src_stride, "src_stride"),
        dst_pitch=stride,
        **_chroma_planes(uv, None if src_stride is None else _count(src_stride, "src_stride")),
        mean=_channel_values(mean, "mean"),
        scale=_channel_values(scale, "scale"),
        pad=pad_value,
        threads=threads,
        simd=_simd(simd),
        matrix=_colour(matrix, "matrix"),
        range=_colour(range, "range"),
        quant=_quant(quant_scale, zero_point),
        rounding=_rounding(rounding),
        **extra,
    )
    return Transform._from_core(transform) if resizing else array


def _colour(value: Any, name: str) -> str:
    """A colour standard's name as given; the core says which names it knows."""
    if not isinstance(value, str):
        raise _fail(f"{name} must be a name such as {'bt709' if name == 'matrix' else 'full'!r}, not {value!r}")
    return value


def _rounding(value: Any) -> Rounding:
    """``"exact"`` or ``"fast"`` (where the fast one applies, the core says)."""
    if value == "exact" or value == "fast":
        return "exact" if value == "exact" else "fast"
    raise _fail(f"rounding must be 'exact' (bit-exact, the default) or 'fast' (NV12, NV21, I420 into u8 pixels), not {value!r}")


def _frame_size(array: np.ndarray, fmt: str) -> tuple[int, int] | None:
    """(width, height) of a destination array shaped like a frame of ``fmt``, else None."""
    framed = _drop_leading_ones(array, 3)
    if framed.ndim != 3:
        return None
    if fmt in _PLANAR:
        return (framed.shape[2], framed.shape[1]) if framed.shape[0] == 3 else None
    channels = 3 if fmt in _THREE_CHANNELS else 4
    return (framed.shape[1], framed.shape[0]) if framed.shape[2] == channels else None


def frame_nbytes(format: str, width: int, height: int, *, stride: int | None = None) -> int:
    """Bytes of a ``width`` x ``height`` frame in ``format`` (every row counting
    its full ``stride``; NV12 as one buffer)."""
    return int(_core.frame_nbytes(_core.format_name(format), _count(width, "width"), _count(height, "height"), None if stride is None else _count(stride, "stride")))


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


def select_format(element_type: Any, layout: Any, channels: int, *, order: str = "RGB", quantised: bool = False) -> str:
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
    ``quantised=True``: an int8 input that carries a scale and zero point
    (``npu_zc.runtime.input_quantisation`` reads them from the model), written
    quantised: ``RGBx_I8`` (NHWC, 4 channels) or ``RGB_I8`` (NHWC, 3; RGB
    order only: the model orders the channels). Without it an int8 input is
    answered as u8 (``RGBx``), as before.
    """
    if order not in ("RGB", "BGR"):
        raise _fail(f"order must be 'RGB' or 'BGR', not {order!r}")
    layout_name = re.sub(r"[^A-Za-z]", "", str(layout))
    if quantised:
        return _quantised_format(_element_name(element_type), layout_name, _count(channels, "channels"), order)
    return str(_core.select_format(_element_name(element_type), layout_name, _count(channels, "channels"), order == "BGR"))


def _quantised_format(element: str, layout_name: str, channels: int, order: str) -> str:
    if element not in ("i8", "int8"):
        raise _fail(f"quantised=True describes an int8 input, not {element}: the int8 layouts quantise with its scale and zero point")
    formats = {("NHWC", 4): "RGBx_I8", ("NHWC", 3): "RGB_I8"}
    fmt = formats.get((layout_name.upper(), channels))
    if fmt is None:
        raise _fail(
            f"no destination format for a quantised int8 {layout_name} input of {channels} channels: "
            "the int8 layouts are RGBx_I8 (NHWC, 4) and RGB_I8 (NHWC, 3)"
        )
    if order != "RGB":
        raise _fail(f"{fmt} has no BGR order: write RGB and let the model order the channels")
    return fmt


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
    matrix: str = "bt601",
    range: str = "limited",
    quant_scale: float | None = None,
    zero_point: int = 0,
    rounding: Rounding = "exact",
) -> str:
    """Which kernels :func:`convert` runs for these arguments, e.g.
    ``"avx512/bf16-native/fma"`` (a SIMD kernel proven exact for these
    parameters) or ``"scalar/lut"``."""
    return str(
        _core.describe_conversion(
            _name(src_format, "the source format", "'BGR'"), _name(dst_format, "the destination format", "'RGBx'"), mean=_channel_values(mean, "mean"), scale=_channel_values(scale, "scale"),
            pad=_pad(pad), simd=_simd(simd), matrix=_colour(matrix, "matrix"), range=_colour(range, "range"),
            quant=_quant(quant_scale, zero_point), rounding=_rounding(rounding),
        )
    )


# --- checked once: a conversion bound to its arguments -----------------------

# Array signatures a Converter or TopK remembers; past this many, it forgets
