"""Frame layouts: write the model input in the layout the NPU reads, read results back.

Preprocessing writes the frame straight into the buffer the NPU will read,
already in its native layout, so nothing is converted or copied later::

    import npu_zc
    from npu_zc.layout import convert, select_format, frame_nbytes

    fmt = select_format("bf16", "NHWC", 4)                 # "RGBx_BF16"
    buf = npu_zc.alloc(frame_nbytes(fmt, 224, 224))
    convert(bgr, buf, "BGR", fmt,                           # bgr: (224, 224, 3) uint8
            mean=(123.675, 116.28, 103.53), scale=(58.395, 57.12, 57.375))

:func:`convert` checks every argument on every call, which can cost more than
converting a small frame (with the caches cold, right after an inference).
Converting frames of one size again and again, bind
the arguments once: a :class:`Converter` checks them when it is made, then
each call only checks that its arrays are like ones it has already checked::

    to_input = Converter("BGR", fmt, 224, 224, mean=(123.675, 116.28, 103.53),
                         scale=(58.395, 57.12, 57.375), threads=1)
    to_input(bgr, buf)                                      # every frame

:class:`TopK` does the same for :func:`topk` on the way back.

Format names follow AMD VART (and VVAS for the 3-channel ones). Sources:
``BGR``, ``RGB``, ``BGRA``, ``RGBA``, ``GRAY``, ``NV12`` (and ``RGBx``/``BGRx``,
read like RGBA/BGRA). Destinations: the packed HW layouts ``RGBx``, ``BGRx``
(u8), ``RGBx_BF16``, ``RGBx_FP16``; the planar CPU layouts ``RGBP_FLOAT`` (f32),
``RGBP_FP16``, ``BGRP_FLOAT``, ``BGRP_FP16``; and 3-channel packed ``RGB``,
``BGR`` (u8) and ``RGB_FLOAT``, ``BGR_FLOAT`` (f32) for NHWC CPU inputs.

Normalisation is ``(x - mean) / scale`` per channel, in f32, with ``mean`` and
``scale`` in the destination's channel order; results are bit-exact with the
same arithmetic in numpy followed by a round-to-nearest-even cast (ml_dtypes
for bfloat16). Every argument is checked before anything is written.

bfloat16 arrays are ``ml_dtypes.bfloat16`` (or raw ``uint16`` bits); float16
arrays are ``numpy.float16`` (or ``uint16``). A destination may also be any
object with a ``.map()`` method returning a writable uint8 array (a
:class:`npu_zc.DmaBuf`).
"""

from __future__ import annotations

import math
import operator
import re
from typing import Any, Protocol, Sequence, Union

import numpy as np

from . import _core
from .errors import InvalidArgumentError

__all__ = [
    "Converter",
    "DESTINATION_FORMATS",
    "SOURCE_FORMATS",
    "TopK",
    "check_destination",
    "convert",
    "dequantize",
    "describe_conversion",
    "frame_nbytes",
    "from_float32",
    "packed_to_planar",
    "planar_to_packed",
    "quantize",
    "select_format",
    "simd_levels",
    "to_float32",
    "topk",
]

SOURCE_FORMATS: tuple[str, ...]
DESTINATION_FORMATS: tuple[str, ...]
_sources, _destinations = _core.format_names()
SOURCE_FORMATS, DESTINATION_FORMATS = tuple(_sources), tuple(_destinations)


class Mappable(Protocol):
    """Anything whose memory ``.map()`` exposes as a numpy array (a DmaBuf)."""

    def map(self, *args: Any, **kwargs: Any) -> np.ndarray: ...


ChannelValues = Union[float, Sequence[float], None]

# The element dtype of each destination; "bfloat16" is ml_dtypes' name.
_ELEMENT = {
    "RGBx": "uint8",
    "BGRx": "uint8",
    "RGBx_BF16": "bfloat16",
    "RGBx_FP16": "float16",
    "RGBP_FLOAT": "float32",
    "RGBP_FP16": "float16",
    "BGRP_FLOAT": "float32",
    "BGRP_FP16": "float16",
    "RGB": "uint8",
    "BGR": "uint8",
    "RGB_FLOAT": "float32",
    "BGR_FLOAT": "float32",
}
_SOURCE_CHANNELS = {"BGR": 3, "RGB": 3, "BGRA": 4, "RGBA": 4, "RGBx": 4, "BGRx": 4, "GRAY": 1}
_PLANAR = {"RGBP_FLOAT", "RGBP_FP16", "BGRP_FLOAT", "BGRP_FP16"}
_THREE_CHANNELS = {"RGB", "BGR", "RGB_FLOAT", "BGR_FLOAT"}


def _fail(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message)


def _format(name: str, kind: str) -> str:
    if not isinstance(name, str):
        raise _fail(f"the {kind} format must be a name such as 'BGR' or 'RGBx_BF16', not {type(name).__name__}")
    canonical: str = _core.format_name(name)
    allowed = SOURCE_FORMATS if kind == "source" else DESTINATION_FORMATS
    if canonical not in allowed:
        raise _fail(f"{canonical} is not a {kind} format: the {kind} formats are {', '.join(allowed)}")
    return canonical


def _dtype_name(a: np.ndarray) -> str:
    return str(a.dtype.name)


def _bytes_of(a: np.ndarray, what: str) -> np.ndarray:
    """The same memory as a uint8 array (no copy): numpy needs the last axis contiguous."""
    if a.dtype == np.uint8:
        return a
    if a.ndim == 0:
        raise _fail(f"the {what} is a scalar: pass an array")
    if a.shape[-1] > 1 and a.strides[-1] != a.itemsize:
        raise _fail(
            f"the {what} is not contiguous along its last axis (strides {a.strides}): "
            "pass an array whose rows are contiguous, or a copy (numpy.ascontiguousarray)"
        )
    try:
        return a.view(np.uint8)
    except ValueError as e:
        raise _fail(f"the {what} cannot be read as bytes without a copy ({e})") from None


def _drop_leading_ones(a: np.ndarray, ndim: int) -> np.ndarray:
    """Drops a batch axis of 1 (and any other leading axes of 1) beyond `ndim`: a view."""
    while a.ndim > ndim and a.shape[0] == 1:
        a = a[0]
    return a


def _destination_array(dst: np.ndarray | Mappable, nbytes: int) -> tuple[np.ndarray, bool]:
    """The writable array behind `dst`, and whether it came from `.map()`."""
    if isinstance(dst, np.ndarray):
        array, mapped = dst, False
    elif hasattr(dst, "map"):
        size = getattr(dst, "size", None)
        if isinstance(size, int):
            page = int(getattr(_core, "PAGE_SIZE", 4096))
            if size < nbytes or size > -(-nbytes // page) * page:
                raise _fail(
                    f"the destination buffer has {size} bytes but the frame takes {nbytes} bytes "
                    f"(a buffer allocated for it has {-(-nbytes // page) * page}); check the format, "
                    "the size and the stride, or map the part to write yourself (buf.map(shape=...))"
                )
            array = dst.map(shape=(nbytes,))
        else:
            array = dst.map()
        mapped = True
    else:
        raise _fail(
            f"the destination must be a numpy array or a buffer with a .map() method (a DmaBuf), "
            f"not {type(dst).__name__}"
        )
    return _writable_destination(array), mapped


def _writable_destination(array: np.ndarray) -> np.ndarray:
    if not array.flags.writeable:
        raise _fail("the destination is read-only: pass a writable array (a DmaBuf mapped for writing, or a copy)")
    return array


def _threads(threads: int | None) -> int | None:
    if threads is None:
        return None
    if _index(threads, "threads") < 1:
        raise _fail(f"threads must be at least 1 (or None for every core), not {threads}")
    return _index(threads, "threads")


def _pad(pad: float) -> float:
    try:
        return float(pad)
    except (TypeError, ValueError):
        raise _fail(f"pad must be a number, not {pad!r}") from None


def _channel_values(values: ChannelValues, name: str) -> tuple[float, float, float] | None:
    if values is None:
        return None
    if isinstance(values, (int, float, np.integer, np.floating)):
        v = float(values)
        return (v, v, v)
    try:
        items = [float(v) for v in values]
    except (TypeError, ValueError):
        raise _fail(f"{name} must be a number or 3 numbers (one per channel), not {values!r}") from None
    if len(items) != 3:
        raise _fail(f"{name} has {len(items)} values: give one number, or 3 in the destination's channel order")
    return (items[0], items[1], items[2])


def _index(value: Any, name: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise _fail(f"{name} must be an integer, not {value!r}") from None


def _count(value: Any, name: str) -> int:
    """A size, count or pixel dimension: an integer, 0 or more."""
    n = _index(value, name)
    if n < 0:
        raise _fail(f"{name} must be 0 or more, not {n}")
    return n


def _source_arrays(
    src: Any, src_format: str, size: tuple[int, int] | None, *, flat: str = "pass size=(width, height) for a flat buffer"
) -> tuple[np.ndarray, np.ndarray | None, int, int]:
    """(source bytes, UV plane bytes or None, width, height); ``flat`` ends the
    message for a source of the wrong shape (how to pass a flat buffer)."""
    if src_format == "NV12" and isinstance(src, (tuple, list)):
        if len(src) != 2:
            raise _fail(f"an NV12 source is one buffer or a (Y, UV) pair, not {len(src)} arrays")
        y, uv = (np.asarray(p) for p in src)
    else:
        y, uv = np.asarray(src), None
    for plane, what in ((y, "source"), (uv, "UV plane")):
        if plane is not None and plane.dtype != np.uint8:
            raise _fail(f"the {what} has dtype {_dtype_name(plane)}: source frames are uint8")
    if size is not None:
        width, height = (_count(v, "size") for v in size)
        return _bytes_of(y, "source"), None if uv is None else _bytes_of(uv, "UV plane"), width, height

    if src_format == "NV12":
        if y.ndim != 2:
            raise _fail(f"an NV12 source has shape (H * 3 / 2, W) or is a (Y, UV) pair, not shape {y.shape}")
        if uv is None:
            rows, width = y.shape
            if rows % 3 != 0:
                raise _fail(
                    f"an NV12 buffer of {rows} rows is not Y then UV (H * 3 / 2 rows): "
                    "its height must be a multiple of 3"
                )
            height = rows // 3 * 2
        else:
            height, width = y.shape
            if uv.ndim == 3 and uv.shape[2] == 2:
                uv = uv.reshape(uv.shape[0], -1) if uv.flags.c_contiguous else uv
            if uv.shape[:1] != (height // 2,) or math.prod(uv.shape[1:]) != width:
                raise _fail(f"a UV plane for a {width}x{height} NV12 frame has shape ({height // 2}, {width // 2}, 2), not {uv.shape}")
        return y, uv, width, height

    channels = _SOURCE_CHANNELS[src_format]
    if src_format == "GRAY" and y.ndim == 2:
        y = y[:, :, None]
    if y.ndim != 3 or y.shape[2] != channels:
        raise _fail(
            f"a {src_format} source has shape (H, W, {channels}), not {y.shape}; "
            + flat
        )
    height, width = y.shape[:2]
    return y, None, width, height


def _destination_bytes(array: np.ndarray, fmt: str, width: int, height: int, nbytes: int, mapped: bool) -> np.ndarray:
    """The destination as uint8, after checking its dtype and shape."""
    element = _ELEMENT[fmt]
    shape = (3, height, width) if fmt in _PLANAR else (height, width, 3 if fmt in _THREE_CHANNELS else 4)
    framed = _drop_leading_ones(array, len(shape))
    dtype = _dtype_name(array)
    if dtype == element or (dtype == "uint16" and element in ("bfloat16", "float16")):
        if framed.shape == shape:
            return _bytes_of(framed, "destination")
        if not (mapped or dtype == "uint8"):
            raise _fail(f"a {width}x{height} {fmt} destination has shape {shape}, not {array.shape}")
    if dtype == "uint8":
        if array.ndim > 1 and array.nbytes != nbytes:
            raise _fail(
                f"a {width}x{height} {fmt} destination has shape {shape} (or is a contiguous buffer of "
                f"{nbytes} bytes), not {array.shape}"
            )
        if not array.flags.c_contiguous:
            raise _fail(
                f"the destination is a non-contiguous uint8 array of shape {array.shape}, which is not "
                f"shaped like a {fmt} frame {shape}: pass a contiguous buffer, or the frame's own shape"
            )
        return array
    raise _fail(
        f"a {fmt} destination holds {element} values (or raw bytes as uint8), not {dtype}"
        + ("; uint16 arrays also work as raw bits" if element in ("bfloat16", "float16") else "")
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

    ``src``: uint8, shaped ``(H, W, C)`` (``(H, W)`` for GRAY); NV12 is
    ``(H * 3 / 2, W)`` or a ``(Y, UV)`` pair. A strided view (a crop of a
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
    stride = None if dst_stride is None else _count(dst_stride, "dst_stride")
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
        src_pitch=None if src_stride is None else _count(src_stride, "src_stride"),
        dst_pitch=stride,
        uv=uv,
        uv_pitch=None if (uv is None or src_stride is None) else _count(src_stride, "src_stride"),
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
    return str(_core.select_format(_element_name(element_type), layout_name, _count(channels, "channels"), order == "BGR"))


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
# them all and checks again (a pipeline uses a handful of buffers).
_REMEMBERED = 16

# (shape, dtype, strides): what every Python check of an array depends on.
_Signature = tuple[tuple[int, ...], np.dtype, tuple[int, ...]]


def _signature(a: np.ndarray) -> _Signature:
    return a.shape, a.dtype, a.strides


def _remember(seen: dict[Any, Any], key: Any, value: Any) -> None:
    if key not in seen:
        if len(seen) >= _REMEMBERED:
            seen.clear()
        seen[key] = value


class Converter:
    """:func:`convert` with its formats, frame size and parameters checked once.

    ``Converter(src_format, dst_format, width, height, mean=..., ...)`` checks
    every argument as :func:`convert` does (same errors), and builds the plan
    (:attr:`kernel`) at once. Calling it, ``conv(src, dst)``, converts a
    ``width`` x ``height`` frame and returns the array written, like
    ``convert(src, dst, src_format, dst_format, ...)``::

        to_input = Converter("BGR", "RGBx_BF16", 224, 224, mean=(123.675, 116.28, 103.53),
                             scale=(58.395, 57.12, 57.375), threads=1)
        to_input(bgr, buf)                          # every frame: microseconds of checks

    The first call with an array of some shape, dtype and strides checks it
    fully; the Converter remembers those that passed, and later calls whose
    source and destination match one exactly (the destination also writable)
    go straight to the Rust core, which still checks the memory it reads and
    writes. Anything else is checked fully again: a wrong array gets the
    same clear :class:`npu_zc.InvalidArgumentError` as from :func:`convert`,
    and nothing is written.

    ``src`` is shaped like the frame as for :func:`convert` (NV12: one buffer
    or a ``(Y, UV)`` pair), or is a flat (1-D) uint8 buffer with rows
    ``src_stride`` bytes apart; ``dst`` is an array or a DmaBuf (mapped on
    each call). A Converter may be called from several threads at once.
    """

    __slots__ = (
        "_src_format", "_dst_format", "_width", "_height", "_mean", "_scale", "_pad", "_src_stride",
        "_dst_stride", "_threads", "_simd", "_kernel", "_src_nbytes", "_dst_nbytes", "_sources", "_destinations",
    )  # fmt: skip

    def __init__(
        self,
        src_format: str,
        dst_format: str,
        width: int,
        height: int,
        *,
        mean: ChannelValues = None,
        scale: ChannelValues = None,
        pad: float = 0,
        src_stride: int | None = None,
        dst_stride: int | None = None,
        threads: int | None = None,
        simd: str | None = None,
    ) -> None:
        self._src_format = _format(src_format, "source")
        self._dst_format = _format(dst_format, "destination")
        self._width, self._height = _index(width, "width"), _index(height, "height")
        if self._width < 1 or self._height < 1:
            raise _fail(
                f"a {self._dst_format} frame of {self._width}x{self._height} pixels is empty: "
                "width and height must be at least 1"
            )
        self._src_stride = _stride(src_stride, "src_stride")
        self._dst_stride = _stride(dst_stride, "dst_stride")
        self._mean = _channel_values(mean, "mean")
        self._scale = _channel_values(scale, "scale")
        self._pad = _pad(pad)
        self._threads = _threads(threads)
        if simd is not None and not isinstance(simd, str):
            raise _fail(f"simd must be the name of a code path such as 'avx2', not {simd!r}")
        self._simd = simd
        # The plan, as convert makes it: checks the pair of formats, mean, scale, pad and simd.
        self._kernel = describe_conversion(
            self._src_format, self._dst_format, mean=self._mean, scale=self._scale, pad=self._pad, simd=simd
        )
        # Both frames' geometry: checks the strides and the sizes NV12 needs.
        self._src_nbytes = frame_nbytes(self._src_format, self._width, self._height, stride=self._src_stride)
        self._dst_nbytes = frame_nbytes(self._dst_format, self._width, self._height, stride=self._dst_stride)
        # Signatures of the arrays that passed every check: a source (or a (Y, UV) pair of them),
        # and, per destination, how convert takes its bytes: (leading axes to drop, view as uint8).
        self._sources: dict[Any, None] = {}
        self._destinations: dict[_Signature, tuple[int, bool]] = {}

    @property
    def src_format(self) -> str:
        """The source format's canonical name."""
        return self._src_format

    @property
    def dst_format(self) -> str:
        """The destination format's canonical name."""
        return self._dst_format

    @property
    def width(self) -> int:
        """The frame's width in pixels."""
        return self._width

    @property
    def height(self) -> int:
        """The frame's height in pixels."""
        return self._height

    @property
    def mean(self) -> tuple[float, float, float] | None:
        """Per channel, in the destination's order (None: 0)."""
        return self._mean

    @property
    def scale(self) -> tuple[float, float, float] | None:
        """Per channel, in the destination's order (None: 1)."""
        return self._scale

    @property
    def pad(self) -> float:
        """The value of a 4-channel layout's fourth channel."""
        return self._pad

    @property
    def src_stride(self) -> int | None:
        """Bytes between source rows (None: packed)."""
        return self._src_stride

    @property
    def dst_stride(self) -> int | None:
        """Bytes between destination rows (None: packed)."""
        return self._dst_stride

    @property
    def threads(self) -> int | None:
        """At most this many threads (None: every core)."""
        return self._threads

    @property
    def simd(self) -> str | None:
        """The code path asked for (None: the best one)."""
        return self._simd

    @property
    def kernel(self) -> str:
        """The kernels run, as :func:`describe_conversion` says."""
        return self._kernel

    @property
    def src_nbytes(self) -> int:
        """Bytes of a source frame (NV12: both planes)."""
        return self._src_nbytes

    @property
    def dst_nbytes(self) -> int:
        """Bytes of a destination frame: of a DmaBuf to write."""
        return self._dst_nbytes

    @property
    def dst_shape(self) -> tuple[int, ...]:
        """The shape of a destination array: ``(3, H, W)`` planar, ``(H, W, 3)``
        or ``(H, W, 4)`` packed (a batch axis of 1 in front is allowed too)."""
        if self._dst_format in _PLANAR:
            return (3, self._height, self._width)
        return (self._height, self._width, 3 if self._dst_format in _THREE_CHANNELS else 4)

    def __repr__(self) -> str:
        defaults = {"mean": None, "scale": None, "pad": 0.0, "src_stride": None, "dst_stride": None, "threads": None, "simd": None}
        options = "".join(f", {name}={getattr(self, name)!r}" for name, default in defaults.items() if getattr(self, name) != default)
        return f"Converter({self._src_format!r}, {self._dst_format!r}, {self._width}, {self._height}{options})"

    def __call__(self, src: Any, dst: np.ndarray | Mappable) -> np.ndarray:
        """Convert the frame ``src`` into ``dst``; returns the array written (a DmaBuf's mapping)."""
        if isinstance(dst, np.ndarray):
            array, mapped = dst, False
        else:
            array, mapped = _destination_array(dst, self._dst_nbytes)
        how = self._destinations.get((array.shape, array.dtype, array.strides))
        if how is not None and array.flags.writeable:
            y: Any = src
            uv: np.ndarray | None = None
            if isinstance(src, np.ndarray):
                known = (src.shape, src.dtype, src.strides) in self._sources
            elif isinstance(src, (tuple, list)) and len(src) == 2:
                y, uv = src
                known = (
                    isinstance(y, np.ndarray)
                    and isinstance(uv, np.ndarray)
                    and ((y.shape, y.dtype, y.strides), (uv.shape, uv.dtype, uv.strides)) in self._sources
                )
            else:
                known = False
            if known:
                drop, view = how
                out = array[(0,) * drop] if drop else array
                self._run(y, uv, out.view(np.uint8) if view else out)
                return array
        return self._checked(src, array, mapped)

    def _checked(self, src: Any, array: np.ndarray, mapped: bool) -> np.ndarray:
        """Every check of :func:`convert`, then the conversion; remembers the arrays that passed."""
        pair = self._src_format == "NV12" and isinstance(src, (tuple, list))
        source = src if pair else np.asarray(src)
        size = (self._width, self._height) if not pair and source.ndim == 1 else None
        flat = f"or pass a flat (1-D) buffer of {self._src_nbytes} bytes"
        y, uv, width, height = _source_arrays(source, self._src_format, size, flat=flat)
        if (width, height) != (self._width, self._height):
            raise _fail(
                f"the source is a {width}x{height} frame but this Converter converts {self._width}x{self._height} "
                "frames: make one Converter for each frame size"
            )
        _writable_destination(array)
        dst_bytes = _destination_bytes(array, self._dst_format, width, height, self._dst_nbytes, mapped)
        self._run(y, uv, dst_bytes)
        # Only now: the core accepted the memory of both (it checks that too).
        if isinstance(src, np.ndarray):
            _remember(self._sources, _signature(src), None)
        elif pair and len(src) == 2 and all(isinstance(p, np.ndarray) for p in src):
            _remember(self._sources, (_signature(src[0]), _signature(src[1])), None)
        _remember(self._destinations, _signature(array), (array.ndim - dst_bytes.ndim, dst_bytes.dtype != array.dtype))
        return array

    def _run(self, y: np.ndarray, uv: np.ndarray | None, dst: np.ndarray) -> None:
        _core.convert(
            y,
            self._src_format,
            dst,
            self._dst_format,
            self._width,
            self._height,
            src_pitch=self._src_stride,
            dst_pitch=self._dst_stride,
            uv=uv,
            uv_pitch=None if uv is None else self._src_stride,
            mean=self._mean,
            scale=self._scale,
            pad=self._pad,
            threads=self._threads,
            simd=self._simd,
        )


def _stride(value: int | None, name: str) -> int | None:
    if value is None:
        return None
    stride = _index(value, name)
    if stride < 0:  # the core says why 0 or too few bytes will not do
        raise _fail(f"{name} must be the number of bytes from one row to the next, not {stride}")
    return stride


# --- the way back: output buffers -------------------------------------------

_ELEMENT_OF_DTYPE = {"uint8": "u8", "int8": "i8", "bfloat16": "bf16", "float16": "f16", "float32": "f32"}


def _array(a: Any, what: str) -> np.ndarray:
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "map"):
        return a.map()
    raise _fail(f"the {what} must be a numpy array or a buffer with .map(), not {type(a).__name__}")


def _contiguous(a: np.ndarray, what: str) -> np.ndarray:
    if not a.flags.c_contiguous:
        raise _fail(f"the {what} is not contiguous: pass a C-contiguous array (numpy.ascontiguousarray)")
    return a


def _writable(a: np.ndarray, what: str = "destination") -> np.ndarray:
    if not a.flags.writeable:
        raise _fail(f"the {what} is read-only: pass a writable array")
    return _contiguous(a, what)


def _element(a: np.ndarray, what: str, allowed: Sequence[str]) -> str:
    name = _dtype_name(a)
    if name not in allowed:
        raise _fail(f"the {what} has dtype {name}; it must be one of {', '.join(allowed)}")
    return _ELEMENT_OF_DTYPE[name]


def _float32_destination(dst: Any, like: np.ndarray) -> np.ndarray:
    if dst is None:
        return np.empty(like.shape, np.float32)
    out = _writable(_array(dst, "destination"), "destination")
    if out.dtype != np.float32:
        if out.dtype == np.uint8 and out.nbytes == like.size * 4:
            return out.view(np.float32).reshape(like.shape)
        raise _fail(f"the destination has dtype {_dtype_name(out)}; it must be float32")
    if out.size != like.size:
        raise _fail(f"the destination has {out.size} elements but the source {like.size}: they must match")
    return out


def _quantization(
    shape: tuple[int, ...], scale: float | Sequence[float], zero_point: int | Sequence[int], axis: int | None
) -> tuple[list[float], list[int], int]:
    try:
        scales = [float(s) for s in np.atleast_1d(np.asarray(scale, dtype=np.float64))]
    except (TypeError, ValueError):
        raise _fail(f"scale must be a number or a sequence of numbers, not {scale!r}") from None
    try:
        zeros = [_index(z, "zero_point") for z in np.atleast_1d(np.asarray(zero_point)).tolist()]
    except InvalidArgumentError:
        raise _fail(f"zero_point must be an integer or a sequence of integers, not {zero_point!r}") from None
    if any(not -(2**31) <= z < 2**31 for z in zeros):
        raise _fail(f"zero_point {zero_point!r} is out of range for 8-bit quantisation")
    if axis is None:
        if len(scales) != 1 or len(zeros) != 1:
            raise _fail("several scales or zero points need axis= (the channel axis they apply along)")
        return scales, zeros, 1
    if not shape:
        raise _fail("a per-channel axis needs an array with at least one axis")
    axis = _index(axis, "axis")
    if not -len(shape) <= axis < len(shape):
        raise _fail(f"axis {axis} is out of range for shape {shape}")
    axis %= len(shape)
    channels = shape[axis]
    if len(scales) not in (1, channels) or len(zeros) not in (1, channels):
        raise _fail(
            f"axis {axis} has {channels} channels but {len(scales)} scales and {len(zeros)} zero points were given: "
            f"give 1 or {channels} of each"
        )
    if len(scales) == 1:
        scales = scales * channels
    return scales, zeros, math.prod(shape[axis + 1 :])


def quantize(
    src: np.ndarray,
    dst: np.ndarray | Mappable,
    scale: float | Sequence[float],
    zero_point: int | Sequence[int] = 0,
    *,
    axis: int | None = None,
    simd: str | None = None,
) -> np.ndarray:
    """``dst = clip(round_half_even(src / scale) + zero_point)`` into int8 or
    uint8 ``dst`` (a uint8 DmaBuf mapping is uint8); NaN becomes the zero
    point. Per channel: give ``axis`` and one scale (and zero point) per channel."""
    source = _contiguous(np.asarray(src), "source")
    if source.dtype != np.float32:
        raise _fail(f"the source has dtype {_dtype_name(source)}; quantize reads float32")
    out = _writable(_array(dst, "destination"))
    _element(out, "destination", ("int8", "uint8"))
    if out.size != source.size:
        raise _fail(f"the destination has {out.size} elements but the source {source.size}: they must match")
    scales, zeros, inner = _quantization(source.shape, scale, zero_point, axis)
    _core.quantize(source, out, scales, zeros, inner, simd)
    return out


def dequantize(
    src: np.ndarray | Mappable,
    dst: np.ndarray | Mappable | None = None,
    scale: float | Sequence[float] = 1.0,
    zero_point: int | Sequence[int] = 0,
    *,
    axis: int | None = None,
    simd: str | None = None,
) -> np.ndarray:
    """``dst = (src - zero_point) * scale`` in float32, reading the int8/uint8
    ``src`` in place; ``dst`` None makes a new array."""
    source = _contiguous(_array(src, "source"), "source")
    _element(source, "source", ("int8", "uint8"))
    out = _float32_destination(dst, source)
    scales, zeros, inner = _quantization(source.shape, scale, zero_point, axis)
    _core.dequantize(source, out, scales, zeros, inner, simd)
    return out


def to_float32(src: np.ndarray | Mappable, dst: np.ndarray | Mappable | None = None, *, simd: str | None = None) -> np.ndarray:
    """Every element of a bfloat16, float16, int8 or uint8 ``src`` as float32
    (exact), into ``dst`` (None: a new array)."""
    source = _contiguous(_array(src, "source"), "source")
    element = _element(source, "source", ("bfloat16", "float16", "int8", "uint8", "float32"))
    out = _float32_destination(dst, source)
    _core.to_float32(_bytes_of(source.reshape(-1), "source"), element, out, simd)
    return out


def from_float32(src: np.ndarray, dst: np.ndarray | Mappable, *, simd: str | None = None) -> np.ndarray:
    """float32 ``src`` into a bfloat16 or float16 ``dst`` (round to nearest
    even; NaN stays NaN), or int8/uint8 (round half to even, saturate, NaN to 0)."""
    source = _contiguous(np.asarray(src), "source")
    if source.dtype != np.float32:
        raise _fail(f"the source has dtype {_dtype_name(source)}; from_float32 reads float32")
    out = _writable(_array(dst, "destination"))
    element = _element(out, "destination", ("bfloat16", "float16", "int8", "uint8"))
    if out.size != source.size:
        raise _fail(f"the destination has {out.size} elements but the source {source.size}: they must match")
    _core.from_float32(source, _bytes_of(out.reshape(-1), "destination"), element, simd)
    return out


def packed_to_planar(src: np.ndarray | Mappable, dst: np.ndarray | Mappable | None = None, *, planes: int = 3) -> np.ndarray:
    """Packed pixels ``(H, W, C)`` of uint8, int8, bfloat16, float16 or float32
    into float32 planes ``(planes, H, W)``: plane k is channel k (the pad
    channel dropped). A leading batch axis of 1 is allowed on either side."""
    source = _contiguous(_drop_leading_ones(_array(src, "source"), 3), "source")
    element = _element(source, "source", ("uint8", "int8", "bfloat16", "float16", "float32"))
    if source.ndim != 3:
        raise _fail(f"packed pixels have shape (H, W, C), not {source.shape}")
    height, width, channels = source.shape
    planes = _count(planes, "planes")
    if planes > channels:
        raise _fail(f"cannot make {planes} planes from pixels of {channels} channels: use 1 to {channels} planes")
    if dst is None:
        out = np.empty((planes, height, width), np.float32)
    else:
        out = _writable(_drop_leading_ones(_array(dst, "destination"), 3))
        if out.dtype != np.float32 or out.shape != (planes, height, width):
            raise _fail(f"the destination must be float32 of shape {(planes, height, width)}, not {_dtype_name(out)} {out.shape}")
    _core.packed_to_planar(_bytes_of(source.reshape(-1), "source"), element, channels, out, planes)
    return out


def planar_to_packed(src: np.ndarray, dst: np.ndarray | Mappable, *, pad: float = 0.0) -> np.ndarray:
    """float32 planes ``(C, H, W)`` into packed pixels ``(H, W, C')`` of
    float32, bfloat16, float16, uint8 or int8, C' >= C, the extra channels
    set to ``pad``. A leading batch axis of 1 is allowed on either side."""
    source = _contiguous(_drop_leading_ones(np.asarray(src), 3), "source")
    if source.dtype != np.float32 or source.ndim != 3:
        raise _fail(f"the source must be float32 planes (C, H, W), not {_dtype_name(source)} {source.shape}")
    planes, height, width = source.shape
    out = _writable(_drop_leading_ones(_array(dst, "destination"), 3))
    element = _element(out, "destination", ("float32", "bfloat16", "float16", "uint8", "int8"))
    if out.ndim != 3 or out.shape[:2] != (height, width):
        raise _fail(f"the destination must be packed pixels of shape ({height}, {width}, C), not {out.shape}")
    _core.planar_to_packed(source, planes, _bytes_of(out.reshape(-1), "destination"), element, out.shape[2], _pad(pad))
    return out


def topk(
    src: np.ndarray | Mappable,
    k: int,
    *,
    scale: float | None = None,
    zero_point: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest values along the last axis, best first: ``(indices,
    values)`` shaped ``(..., k)``, int64 and float32. Ties go to the lower
    index; NaN ranks last. ``src`` (uint8, int8, bfloat16, float16, float32)
    is read in place. With ``scale``, values are dequantised,
    ``(q - zero_point) * scale`` (the order is the same for a positive scale).
    :class:`TopK` binds ``k`` and checks it once."""
    source = _contiguous(_array(src, "source"), "source")
    element, row_len = _topk_source(source)
    indices, values = _core.topk(_bytes_of(source.reshape(-1), "source"), element, row_len, _count(k, "k"))
    return _topk_result(indices, values, source.shape[:-1] + (int(k),), scale, _index(zero_point, "zero_point"))


def _topk_source(source: np.ndarray) -> tuple[str, int]:
    """The element type and row length of a contiguous top-k source."""
    element = _element(source, "source", ("uint8", "int8", "bfloat16", "float16", "float32"))
    if source.ndim == 0 or source.shape[-1] == 0:
        raise _fail(f"top-k needs values along a last axis, not shape {source.shape}")
    return element, source.shape[-1]


def _topk_scale(scale: float) -> None:
    if not (math.isfinite(scale) and scale > 0):
        raise _fail(f"scale {scale} is not a positive finite number")


def _topk_result(
    indices: np.ndarray, values: np.ndarray, shape: tuple[int, ...], scale: float | None, zero_point: int
) -> tuple[np.ndarray, np.ndarray]:
    if len(shape) > 1:
        indices, values = indices.reshape(shape), values.reshape(shape)
    if scale is not None:
        _topk_scale(scale)
        values = (values - np.float32(zero_point)) * np.float32(scale)
    return indices, values


class TopK:
    """:func:`topk` with ``k`` (and ``scale``, ``zero_point``) bound and checked once.

    ``TopK(5)(scores)`` is ``topk(scores, 5)``. The first call with an array
    of some shape and dtype checks it fully; later calls with a C-contiguous
    array of a shape and dtype seen before go straight to the Rust core.
    Anything else is checked fully again (the same errors as :func:`topk`).
    ``src`` may be a DmaBuf (mapped on each call).
    """

    __slots__ = ("_k", "_scale", "_zero_point", "_sources")

    def __init__(self, k: int, *, scale: float | None = None, zero_point: int = 0) -> None:
        self._k = _index(k, "k")
        if self._k < 1:
            raise _fail(f"k must be at least 1, not {self._k}")
        if scale is not None:
            try:
                scale = float(scale)
            except (TypeError, ValueError):
                raise _fail(f"scale must be a number, not {scale!r}") from None
            _topk_scale(scale)
        self._scale = scale
        self._zero_point = _index(zero_point, "zero_point")
        # (shape, dtype) of the sources that passed every check -> (element, row length, result shape).
        self._sources: dict[tuple[tuple[int, ...], np.dtype], tuple[str, int, tuple[int, ...]]] = {}

    @property
    def k(self) -> int:
        """How many values each row gives."""
        return self._k

    @property
    def scale(self) -> float | None:
        """Dequantise the values with this scale (None: as they are)."""
        return self._scale

    @property
    def zero_point(self) -> int:
        """The zero point of the dequantisation."""
        return self._zero_point

    def __repr__(self) -> str:
        options = "" if self._scale is None else f", scale={self._scale!r}, zero_point={self._zero_point!r}"
        return f"TopK({self._k}{options})"

    def __call__(self, src: np.ndarray | Mappable) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, values)`` of the ``k`` largest values along the last axis of ``src``, best first."""
        source = src if isinstance(src, np.ndarray) else _array(src, "source")
        plan = self._sources.get((source.shape, source.dtype))
        if plan is None or not source.flags.c_contiguous:
            element, row_len = _topk_source(_contiguous(source, "source"))
            plan = (element, row_len, source.shape[:-1] + (self._k,))
            indices, values = _core.topk(_bytes_of(source.reshape(-1), "source"), element, row_len, self._k)
            _remember(self._sources, (source.shape, source.dtype), plan)
        else:
            indices, values = _core.topk(source.reshape(-1).view(np.uint8), plan[0], plan[1], self._k)
        return _topk_result(indices, values, plan[2], self._scale, self._zero_point)
