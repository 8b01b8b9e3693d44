"""Argument checks shared by the layout functions: every one raises
:class:`npu_zc.InvalidArgumentError` with a sentence saying what to pass
instead, before anything is written."""

from __future__ import annotations

import math
import operator
from typing import Any, Literal, Protocol, Sequence, Union

import numpy as np

from .. import _core
from .._numbers import channel_values
from ..errors import InvalidArgumentError

SOURCE_FORMATS: tuple[str, ...]
DESTINATION_FORMATS: tuple[str, ...]
_sources, _destinations = _core.format_names()
SOURCE_FORMATS, DESTINATION_FORMATS = tuple(_sources), tuple(_destinations)

class Mappable(Protocol):
    """Anything whose memory ``.map()`` exposes as a numpy array (a DmaBuf)."""

    def map(self, *args: Any, **kwargs: Any) -> np.ndarray: ...


ChannelValues = Union[float, Sequence[float], None]
# How a YUV source is rounded (docs/layout.md, "The fast rounding").
Rounding = Literal["exact", "fast"]

# The element dtype of each destination; "bfloat16" is ml_dtypes' name.
_ELEMENT = {
    "RGBx": "uint8",
    "BGRx": "uint8",
    "RGBx_BF16": "bfloat16",
    "RGBx_FP16": "float16",
    "RGBx_I8": "int8",
    "RGB_I8": "int8",
    "RGBP_FLOAT": "float32",
    "RGBP_FP16": "float16",
    "BGRP_FLOAT": "float32",
    "BGRP_FP16": "float16",
    "RGB": "uint8",
    "BGR": "uint8",
    "RGB_FLOAT": "float32",
    "BGR_FLOAT": "float32",
}
_SOURCE_CHANNELS = {"BGR": 3, "RGB": 3, "BGRA": 4, "RGBA": 4, "RGBx": 4, "BGRx": 4, "GRAY": 1, "YUYV": 2, "UYVY": 2}
TEN_BIT = ("P010", "I010")
_PLANAR = {"RGBP_FLOAT", "RGBP_FP16", "BGRP_FLOAT", "BGRP_FP16"}
_THREE_CHANNELS = {"RGB", "BGR", "RGB_FLOAT", "BGR_FLOAT", "RGB_I8"}


def _fail(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message)


def _name(value: Any, what: str, example: str) -> str:
    """A name (of a format, a code path): a str of ASCII letters the core can read."""
    if not isinstance(value, str):
        raise _fail(f"{what} must be a name such as {example}, not {type(value).__name__} {value!r}")
    if not value.isascii():
        raise _fail(f"{what} {value!r} is not a name such as {example}: names are ASCII")
    return value


def _simd(simd: Any) -> str | None:
    return None if simd is None else _name(simd, "simd", "'avx2' or 'scalar'")


def _format(name: str, kind: str) -> str:
    _name(name, f"the {kind} format", "'BGR' or 'RGBx_BF16'")
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


def _asarray(value: Any, what: str) -> np.ndarray:
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as e:
        raise _fail(f"the {what} is not an array numpy can read in place ({e})") from None


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
    if isinstance(pad, (str, bytes)):
        raise _fail(f"pad must be a number, not {pad!r}")
    try:
        value = float(pad)
    except (TypeError, ValueError, OverflowError):
        raise _fail(f"pad must be a number that fits a 32-bit float, not {pad!r}") from None
    if not math.isfinite(value):
        raise _fail(f"pad is {value}: it must be a finite number")
    return value


def _channel_values(values: ChannelValues, name: str) -> tuple[float, float, float] | None:
    return channel_values(values, name)


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
) -> tuple[np.ndarray, Any, int, int]:
    """(source bytes, the UV plane (NV12, NV21), the (U, V) planes (I420) or
    None, width, height); ``flat`` ends the message for a source of the wrong
    shape (how to pass a flat buffer)."""
    # 10-bit sources hold uint16 samples; the core reads them as their bytes.
    sample = "uint16" if src_format in TEN_BIT else "uint8"
    if src_format in ("I420", "I010") and isinstance(src, (tuple, list)):
        if len(src) != 3:
            raise _fail(f"an {src_format} source is one buffer or (Y, U, V) planes, not {len(src)} arrays")
        y, u, v = (_asarray(p, "source plane") for p in src)
        for array, what in ((y, "Y plane"), (u, "U plane"), (v, "V plane")):
            if array.dtype != np.dtype(sample) or array.ndim != 2:
                raise _fail(f"the {what} of an {src_format} source is a 2-D {sample} array (rows, columns), not {array.dtype} {array.shape}")
        height, width = y.shape
        for array, what in ((u, "U plane"), (v, "V plane")):
            if array.shape != (height // 2, width // 2):
                raise _fail(f"the {what} of a {width}x{height} {src_format} frame has shape ({height // 2}, {width // 2}), not {array.shape}")
        if src_format == "I010":
            return _bytes_of(y, "Y plane"), (_bytes_of(u, "U plane"), _bytes_of(v, "V plane")), width, height
        return y, (u, v), width, height
    if src_format in ("NV12", "NV21", "P010") and isinstance(src, (tuple, list)):
        if len(src) != 2:
            raise _fail(f"a {src_format} source is one buffer or a (Y, UV) pair, not {len(src)} arrays")
        y, uv = (_asarray(p, "source plane") for p in src)
    elif isinstance(src, (tuple, list)) and any(hasattr(p, "__array_interface__") for p in src):
        raise _fail(
            f"a {src_format} source is one array; only NV12, NV21 and P010 take a (Y, UV) pair, and I420 and I010 (Y, U, V) planes"
        )
    else:
        y, uv = _asarray(src, "source"), None
    if size is not None:
        for plane, what in ((y, "source"), (uv, "UV plane")):
            if plane is not None and plane.dtype not in (np.uint8, np.dtype(sample)):
                raise _fail(f"the {what} has dtype {_dtype_name(plane)}: {src_format} frames are {sample}")
        width, height = (_count(v, "size") for v in size)
        return _bytes_of(y, "source"), None if uv is None else _bytes_of(uv, "UV plane"), width, height
    for plane, what in ((y, "source"), (uv, "UV plane")):
        if plane is not None and plane.dtype != np.dtype(sample):
            raise _fail(f"the {what} has dtype {_dtype_name(plane)}: {src_format} frames are {sample}")

    if src_format in ("NV12", "NV21", "I420", "P010", "I010"):
        if y.ndim != 2:
            pair = " or is a (Y, UV) pair" if src_format != "I420" else ""
            raise _fail(f"an {src_format} source has shape (H * 3 / 2, W){pair}, not shape {y.shape}")
        if uv is None:
            rows, width = y.shape
            if rows % 3 != 0:
                planes = "Y then UV" if src_format != "I420" else "Y, U, then V"
                raise _fail(
                    f"an {src_format} buffer of {rows} rows is not {planes} (H * 3 / 2 rows): "
                    "its height must be a multiple of 3"
                )
            height = rows // 3 * 2
        else:
            height, width = y.shape
            if uv.ndim == 3 and uv.shape[2] == 2:
                uv = uv.reshape(uv.shape[0], -1) if uv.flags.c_contiguous else uv
            if uv.shape[:1] != (height // 2,) or math.prod(uv.shape[1:]) != width:
                raise _fail(f"a UV plane for a {width}x{height} {src_format} frame has shape ({height // 2}, {width // 2}, 2), not {uv.shape}")
        if src_format in TEN_BIT:
            return _bytes_of(y, "source"), None if uv is None else _bytes_of(uv, "UV plane"), width, height
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
        mapped: np.ndarray = a.map()
        return mapped
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



def _chroma_planes(uv: Any, stride: int | None) -> dict[str, Any]:
    """The core's keyword arguments for the chroma planes from :func:`_source_arrays`:
    a UV plane at the source's stride, or I420's U and V planes (2-D arrays: their strides are their pitches)."""
    if isinstance(uv, tuple):
        return {"uv": uv[0], "v": uv[1]}
    return {"uv": uv, "uv_pitch": None if uv is None else stride}


def _quant(quant_scale: Any, zero_point: Any) -> tuple[float, int] | None:
    """The core's ``quant``: (scale, zero point) of an int8 destination, or None."""
    if quant_scale is None:
        if zero_point not in (None, 0):
            raise _fail("zero_point goes with quant_scale: pass both (the model input's quantisation)")
        return None
    try:
        scale = float(quant_scale)
    except (TypeError, ValueError):
        raise _fail(f"quant_scale must be a number, not {quant_scale!r}") from None
    return scale, _index(0 if zero_point is None else zero_point, "zero_point")
