"""Frames in, checked once: a :class:`Converter` binds :func:`convert` to its
formats, frame sizes, geometry and parameters."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _core
from ._checks import (
    _PLANAR,
    _THREE_CHANNELS,
    TEN_BIT,
    ChannelValues,
    Mappable,
    Rounding,
    _Signature,
    _channel_values,
    _chroma_planes,
    _destination_array,
    _destination_bytes,
    _fail,
    _format,
    _index,
    _pad,
    _quant,
    _remember,
    _signature,
    _simd,
    _source_arrays,
    _stride,
    _threads,
    _writable_destination,
)
from .frames import _colour, _rounding, describe_conversion, frame_nbytes
from .geometry import FITS, INTERPOLATIONS, FillValues, Transform, _choice, _fill, _rect, _size


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

    ``matrix`` and ``range``: the colour standard of a YUV source, as for
    :func:`convert` (e.g. ``matrix="bt709"`` for HD video; the default is
    OpenCV's BT.601 limited range). An I420 source may also be ``(Y, U, V)``
    planes with strides of their own (a decoder's frame); 10-bit P010 and
    I010 sources are uint16, as for :func:`convert`. ``rounding="fast"``: the
    16-bit decoding of NV12, NV21 and I420 into u8 pixels, within 1 level of
    the exact one, as for :func:`convert` (refused where it does not apply).

    ``quant_scale`` and ``zero_point``: the model input's quantisation, required
    for the int8 destinations ``RGBx_I8`` and ``RGB_I8`` (as for :func:`convert`).

    Resizing: ``width`` x ``height`` is the destination; ``src_size=(W, H)``
    is the source frame when it differs, and ``roi``, ``interpolation``,
    ``fit``, ``dst_rect`` and ``fill`` are as for :func:`convert`, checked
    once; :attr:`transform` maps the destination back to the source::

        to_input = Converter("NV12", "RGBx", 640, 640, src_size=(1920, 1080), fit="letterbox", fill=114)
        to_input(nv12, buf)
        boxes = to_input.transform.to_source(boxes_in_640)
    """

    __slots__ = (
        "_src_format", "_dst_format", "_width", "_height", "_mean", "_scale", "_pad", "_src_stride",
        "_dst_stride", "_threads", "_simd", "_kernel", "_src_nbytes", "_dst_nbytes", "_sources", "_destinations",
        "_src_size", "_geometry", "_transform", "_matrix", "_range", "_quant", "_rounding",
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
        src_size: tuple[int, int] | None = None,
        roi: tuple[int, int, int, int] | None = None,
        interpolation: str | None = None,
        fit: str | None = None,
        dst_rect: tuple[int, int, int, int] | None = None,
        fill: FillValues = None,
        matrix: str = "bt601",
        range: str = "limited",
        quant_scale: float | None = None,
        zero_point: int = 0,
        rounding: Rounding = "exact",
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
        self._simd = simd = _simd(simd)
        self._matrix, self._range = _colour(matrix, "matrix"), _colour(range, "range")
        self._quant = _quant(quant_scale, zero_point)
        self._rounding = _rounding(rounding)
        self._src_size = _size(src_size, "src_size") or (self._width, self._height)
        resizing = any(v is not None for v in (roi, interpolation, fit, dst_rect, fill)) or self._src_size != (
            self._width, self._height
        )
        # The geometry arguments of the core's convert, when it resizes.
        self._geometry: dict[str, Any] = {}
        if resizing:
            self._geometry = dict(
                dst_size=(self._width, self._height),
                roi=_rect(roi, "roi"),
                dst_rect=_rect(dst_rect, "dst_rect"),
                interpolation=_choice(interpolation or "bilinear", "interpolation", INTERPOLATIONS),
                fit=_choice(fit or "stretch", "fit", FITS),
                fill=_fill(fill),
            )
        # The plan, as convert makes it: checks the pair of formats, mean, scale, pad, simd and the geometry.
        kernel, transform = _core.describe_resize(
            self._src_format, self._dst_format, self._src_size, (self._width, self._height), mean=self._mean,
            scale=self._scale, pad=self._pad, simd=simd, matrix=self._matrix, range=self._range, quant=self._quant,
            rounding=self._rounding, **{k: v for k, v in self._geometry.items() if k != "dst_size"},
        )  # fmt: skip
        self._kernel = kernel if resizing else describe_conversion(
            self._src_format, self._dst_format, mean=self._mean, scale=self._scale, pad=self._pad, simd=simd,
            matrix=self._matrix, range=self._range, rounding=self._rounding, **self._quant_kwargs(),
        )  # fmt: skip
        self._transform = Transform._from_core(transform)
        # Both frames' geometry: checks the strides and the sizes NV12 needs.
        self._src_nbytes = frame_nbytes(self._src_format, *self._src_size, stride=self._src_stride)
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
        """The destination frame's width in pixels."""
        return self._width

    @property
    def height(self) -> int:
        """The destination frame's height in pixels."""
        return self._height

    @property
    def src_size(self) -> tuple[int, int]:
        """The source frame's (width, height): the destination's unless it resizes."""
        return self._src_size

    @property
    def transform(self) -> Transform:
        """Where each call reads and writes, and the way back to source pixels
        (:meth:`Transform.to_source`); the identity when it does not resize."""
        return self._transform

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
    def matrix(self) -> str:
        """The colour matrix of a YUV source ("bt601", "bt709", "bt2020")."""
        return self._matrix

    @property
    def range(self) -> str:
        """The colour range of a YUV source ("limited" or "full")."""
        return self._range

    @property
    def rounding(self) -> str:
        """How a YUV source is rounded ("exact" or "fast")."""
        return self._rounding

    @property
    def quant_scale(self) -> float | None:
        """The quantisation scale of an int8 destination (None for the others)."""
        return None if self._quant is None else self._quant[0]

    @property
    def zero_point(self) -> int:
        """The zero point of an int8 destination (0 for the others)."""
        return 0 if self._quant is None else self._quant[1]

    def _quant_kwargs(self) -> dict[str, Any]:
        return {} if self._quant is None else {"quant_scale": self._quant[0], "zero_point": self._quant[1]}

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
        defaults = {
            "mean": None, "scale": None, "pad": 0.0, "src_stride": None, "dst_stride": None, "threads": None, "simd": None,
            "matrix": "bt601", "range": "limited", "quant_scale": None, "zero_point": 0, "rounding": "exact",
        }  # fmt: skip
        options = "".join(f", {name}={getattr(self, name)!r}" for name, default in defaults.items() if getattr(self, name) != default)
        if self._geometry:
            options += f", src_size={self._src_size!r}" + "".join(
                f", {k}={v!r}" for k, v in self._geometry.items() if k != "dst_size" and v is not None
            )
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
            uv: Any = None
            if isinstance(src, np.ndarray):
                known = (src.shape, src.dtype, src.strides) in self._sources
            elif isinstance(src, (tuple, list)) and len(src) == 2:
                y, uv = src
                known = (
                    isinstance(y, np.ndarray)
                    and isinstance(uv, np.ndarray)
                    and ((y.shape, y.dtype, y.strides), (uv.shape, uv.dtype, uv.strides)) in self._sources
                )
            elif isinstance(src, (tuple, list)) and len(src) == 3:  # I420's planes (a decoder's, per video frame)
                y, u, v = src
                uv = (u, v)
                known = (
                    isinstance(y, np.ndarray)
                    and isinstance(u, np.ndarray)
                    and isinstance(v, np.ndarray)
                    and ((y.shape, y.dtype, y.strides), (u.shape, u.dtype, u.strides), (v.shape, v.dtype, v.strides))
                    in self._sources
                )
            else:
                known = False
            if known:
                drop, view = how
                if self._src_format in TEN_BIT:  # uint16 samples, read as their bytes
                    y = y.view(np.uint8)
                    if isinstance(uv, tuple):  # I010's (U, V) planes
                        uv = tuple(plane.view(np.uint8) for plane in uv)
                    elif uv is not None:
                        uv = uv.view(np.uint8)
                out = array[(0,) * drop] if drop else array
                self._run(y, uv, out.view(np.uint8) if view else out)
                return array
        return self._checked(src, array, mapped)

    def _checked(self, src: Any, array: np.ndarray, mapped: bool) -> np.ndarray:
        """Every check of :func:`convert`, then the conversion; remembers the arrays that passed."""
        pair = self._src_format in ("NV12", "NV21", "I420", "P010", "I010") and isinstance(src, (tuple, list))
        source = src if pair else np.asarray(src)
        size = self._src_size if not pair and source.ndim == 1 else None
        flat = f"or pass a flat (1-D) buffer of {self._src_nbytes} bytes"
        y, uv, width, height = _source_arrays(source, self._src_format, size, flat=flat)
        if (width, height) != self._src_size:
            raise _fail(
                f"the source is a {width}x{height} frame but this Converter converts {self._src_size[0]}x{self._src_size[1]} "
                "frames: make one Converter for each frame size (src_size=(w, h) when it resizes)"
            )
        _writable_destination(array)
        dst_bytes = _destination_bytes(array, self._dst_format, self._width, self._height, self._dst_nbytes, mapped)
        self._run(y, uv, dst_bytes)
        # Only now: the core accepted the memory of both (it checks that too).
        if isinstance(src, np.ndarray):
            _remember(self._sources, _signature(src), None)
        elif pair and len(src) == 2 and all(isinstance(p, np.ndarray) for p in src):
            _remember(self._sources, (_signature(src[0]), _signature(src[1])), None)
        elif pair and len(src) == 3 and all(isinstance(p, np.ndarray) for p in src):
            _remember(self._sources, (_signature(src[0]), _signature(src[1]), _signature(src[2])), None)
        _remember(self._destinations, _signature(array), (array.ndim - dst_bytes.ndim, dst_bytes.dtype != array.dtype))
        return array

    def _run(self, y: np.ndarray, uv: Any, dst: np.ndarray) -> None:
        _core.convert(
            y,
            self._src_format,
            dst,
            self._dst_format,
            self._src_size[0],
            self._src_size[1],
            src_pitch=self._src_stride,
            dst_pitch=self._dst_stride,
            **_chroma_planes(uv, self._src_stride),
            mean=self._mean,
            scale=self._scale,
            pad=self._pad,
            threads=self._threads,
            simd=self._simd,
            matrix=self._matrix,
            range=self._range,
            quant=self._quant,
            rounding=self._rounding,
            **self._geometry,
        )
