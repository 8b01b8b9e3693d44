"""Results out: output buffers read in place: (de)quantisation, 16-bit floats
to and from f32, planar <-> packed, and top-k."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .. import _core
from ..errors import InvalidArgumentError
from ._checks import (
    Mappable,
    _array,
    _bytes_of,
    _contiguous,
    _count,
    _drop_leading_ones,
    _dtype_name,
    _element,
    _fail,
    _index,
    _pad,
    _remember,
    _writable,
)


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


def _quantisation(
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
    scales, zeros, inner = _quantisation(source.shape, scale, zero_point, axis)
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
    scales, zeros, inner = _quantisation(source.shape, scale, zero_point, axis)
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
