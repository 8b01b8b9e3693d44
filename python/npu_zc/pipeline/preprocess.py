"""Preprocess: a decoded BGR frame into the model's input buffer, in the layout the model reads.

One call, no intermediate image: :func:`npu_zc.layout.convert` (through a
:class:`npu_zc.layout.Converter` per frame size) reads the part of the frame
the model sees (a centre crop for classifiers, the whole frame for
detectors), resizes it (OpenCV's bilinear, area or nearest), converts the
colour, normalises and writes the model's input layout in one pass: the
packed HW layout (RGBx, RGBx_FP16...) in zero-copy mode, where the model
normalises; normalised planar float (RGBP_FLOAT) in copy mode. Detectors
that expect the aspect kept (BlazeFace) get a letterbox, and their boxes are
mapped back to the frame through the conversion's
:class:`npu_zc.layout.Transform`.

A :class:`PreprocessSpec` says all of that in plain data, so that a producer
process can preprocess without OpenVINO (see :mod:`.ipc`).
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .. import layout
from ..errors import InvalidArgumentError, ModelError

Fit = Literal["crop", "stretch", "letterbox"]
"""``crop``: the centre of the frame, as classifiers are evaluated; ``stretch``: the whole frame;
``letterbox``: the whole frame, aspect kept, the rest filled (detectors such as BlazeFace)."""

INTERPOLATIONS = ("linear", "area", "nearest")
"""OpenCV's resize methods by name (``linear`` is ``cv2.resize``'s default), as the layout engine runs them."""
_LAYOUT_INTERPOLATION = {"linear": "bilinear", "area": "area", "nearest": "nearest"}

# Formats the preprocess can write, by the element type of their buffer.
_ELEMENTS = {
    "RGBx": "u8", "BGRx": "u8", "RGB": "u8", "BGR": "u8",
    "RGBx_FP16": "f16", "RGBx_BF16": "bf16", "RGBx_I8": "i8", "RGB_I8": "i8",
    "RGBP_FLOAT": "f32", "BGRP_FLOAT": "f32", "RGB_FLOAT": "f32", "BGR_FLOAT": "f32",
    "RGBP_FP16": "f16", "BGRP_FP16": "f16",
}  # fmt: skip


@dataclass(frozen=True)
class PreprocessSpec:
    """What the preprocess writes: the model input's layout and size, and how to fit the frame to it."""

    format: str
    """The input layout (``session.format``): "RGBx", "RGBx_FP16", "RGBP_FLOAT"..."""
    shape: tuple[int, ...]
    """The input tensor's shape, e.g. (1, 224, 224, 4) or (1, 3, 224, 224)."""
    height: int
    width: int
    mean: tuple[float, ...] | None = None
    """Applied by the preprocess (copy mode); None when the model normalises (zero-copy mode)."""
    scale: tuple[float, ...] | None = None
    fit: Fit = "crop"
    crop_fraction: float = 0.875
    """For ``crop``: the share of the short side kept (224/256, as ImageNet models are evaluated)."""
    interpolation: str = "linear"
    fill: int = 0
    """For ``letterbox``: the pixel value (0-255) of the bars, normalised like pixels."""
    quant_scale: float | None = None
    """For ``RGBx_I8`` / ``RGB_I8``: the model input's scale (``session.quantisation``); None for the others."""
    zero_point: int = 0
    """For ``RGBx_I8`` / ``RGB_I8``: the model input's zero point."""

    def __post_init__(self) -> None:
        if self.format not in _ELEMENTS:
            raise ModelError(
                f"the preprocess cannot write the {self.format} layout from a BGR image "
                f"(it writes {', '.join(_ELEMENTS)}); choose another HW format"
            )
        if self.interpolation not in INTERPOLATIONS:
            raise InvalidArgumentError(f"unknown interpolation {self.interpolation!r}: use one of {', '.join(INTERPOLATIONS)}")
        if self.fit not in ("crop", "stretch", "letterbox"):
            raise InvalidArgumentError(f"unknown fit {self.fit!r}: use 'crop', 'stretch' or 'letterbox'")
        if isinstance(self.fill, bool) or not isinstance(self.fill, (int, np.integer)) or not 0 <= self.fill <= 255:
            raise InvalidArgumentError(f"fill must be a pixel value, an integer from 0 to 255, not {self.fill!r}")
        if not 0 < self.crop_fraction <= 1:
            raise InvalidArgumentError(f"crop_fraction must be in (0, 1], got {self.crop_fraction}")
        if (self.quant_scale is not None) != (self.element_type == "i8"):
            raise ModelError(
                f"the {self.format} layout {'needs' if self.quant_scale is None else 'takes no'} quant_scale "
                "(an int8 model input's scale and zero point, which session.quantisation gives)"
            )

    @classmethod
    def for_session(cls, session: Any, *, fit: Fit = "crop", interpolation: str = "linear") -> "PreprocessSpec":
        """The spec of ``session``'s image input: normalised by the model in zero-copy mode, here in copy mode
        and for an int8 input (quantised here with the model's scale and zero point)."""
        spec = session.inputs[0]
        norm = session.normalisation
        quantisation = session.quantisation
        in_model = session.mode == "zero-copy" and quantisation is None
        mean, scale = norm.mean, norm.scale
        if quantisation is not None and norm.color == "BGR":
            # The int8 layouts are written in RGB order (the model reorders): the model's BGR-order numbers reversed.
            mean, scale = _reversed(mean), _reversed(scale)
        return cls(
            format=session.format,
            shape=tuple(spec.shape),
            height=session.image.height,
            width=session.image.width,
            mean=None if in_model else mean,
            scale=None if in_model else scale,
            fit=fit,
            interpolation=interpolation,
            quant_scale=None if quantisation is None else quantisation.scale,
            zero_point=0 if quantisation is None else quantisation.zero_point,
        )

    @property
    def element_type(self) -> str:
        return _ELEMENTS[self.format]

    @property
    def dtype(self) -> np.dtype:
        if self.element_type == "bf16":
            import ml_dtypes

            bf16: np.dtype = np.dtype(ml_dtypes.bfloat16)  # ml_dtypes ships no types
            return bf16
        return np.dtype({"u8": np.uint8, "i8": np.int8, "f16": np.float16, "f32": np.float32}[self.element_type])

    @property
    def normalisation(self) -> dict[str, Any]:
        """The keyword arguments of :class:`npu_zc.layout.Converter` that normalise (and quantise) as this spec says."""
        norm: dict[str, Any] = dict(mean=_three(self.mean), scale=_three(self.scale))
        if self.quant_scale is not None:
            norm.update(quant_scale=self.quant_scale, zero_point=self.zero_point)
        return norm

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (for the producer process)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PreprocessSpec":
        values = dict(data)
        values["shape"] = tuple(values["shape"])
        for key in ("mean", "scale"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        return cls(**values)

    def converter(
        self,
        fmt: str,
        width: int,
        height: int,
        *,
        matrix: str | None = None,
        range: str | None = None,
        threads: int = 1,
        inspect: bool = False,
        dst_rect: tuple[int, int, int, int] | None = None,
    ) -> layout.Converter:
        """The one-pass conversion of a ``width`` x ``height`` frame in ``fmt`` (``"BGR"``, ``"NV12"``, ``"I420"``,
        a camera's ``"YUYV"``...) into this spec's input: the region the model sees (:meth:`region`, rounded inwards
        to the chroma grid of a subsampled ``fmt``), fitted, resampled and normalised as the spec says.

        ``matrix``/``range``: the frame's colour standard (None: the engine's default, BT.601 limited).
        ``threads``: of each conversion (one by default: a model input is small, and the inference that follows
        wants every core). ``inspect``: into BGR u8 at the input size, un-normalised (what the model sees, for
        people and tests). ``dst_rect``: the letterbox's image rectangle only (its bars left as they are).
        """
        rows, cols = self.region(height, width)
        options: dict[str, Any] = {} if inspect else self.normalisation
        if dst_rect is not None:
            options.update(fit="stretch", dst_rect=dst_rect)
        else:
            options.update(fit="letterbox" if self.fit == "letterbox" else "stretch", fill=self.fill)
        if matrix is not None:
            options["matrix"] = matrix
        if range is not None:
            options["range"] = range
        return layout.Converter(
            fmt, "BGR" if inspect else self.format, self.width, self.height, threads=threads, src_size=(width, height),
            roi=_chroma_grid(fmt, cols.start, rows.start, cols.stop - cols.start, rows.stop - rows.start),
            interpolation=_LAYOUT_INTERPOLATION[self.interpolation], **options,
        )  # fmt: skip

    def region(self, height: int, width: int) -> tuple[slice, slice]:
        """The rows and columns of a ``height`` x ``width`` frame that the model sees."""
        if self.fit in ("stretch", "letterbox"):
            return slice(0, height), slice(0, width)
        # Resize so the short side becomes (model side / crop_fraction), then take the centre:
        # in frame pixels, a window of model size / that factor.
        factor = min(self.height, self.width) / self.crop_fraction / min(height, width)
        rows = max(1, min(height, round(self.height / factor)))
        cols = max(1, min(width, round(self.width / factor)))
        top, left = (height - rows) // 2, (width - cols) // 2
        return slice(top, top + rows), slice(left, left + cols)


class Preprocessor:
    """Writes the model input from a decoded frame in one call; reusable across frames of any size.

    Nothing is allocated per frame: a :class:`npu_zc.layout.Converter` per
    frame size (arguments and geometry checked once) writes the input in place.
    """

    def __init__(self, spec: PreprocessSpec, *, heap: str = "auto", threads: int = 1) -> None:
        self.spec = spec
        self._heap = heap
        self.threads = int(threads)
        """Threads of each conversion (bands of the input, in one call with the GIL released)."""
        self._converters: dict[tuple[int, int], layout.Converter] = {}
        self._inspect: dict[tuple[int, int], layout.Converter] = {}
        self._content: dict[tuple[int, int], layout.Converter] = {}
        # Destination arrays holding a letterbox's bars, by id: the converter that wrote them and a weak
        # reference to the array (the pipeline's buffers must stay free to close; a dead one never matches).
        self._filled: dict[int, tuple[layout.Converter, weakref.ref[Any]]] = {}
        self._last: np.ndarray | None = None
        self._buffer: Any = None
        self._resized: np.ndarray | None = None
        self.transform: layout.Transform | None = None
        """Where the last call read the frame and wrote the input: maps boxes back to the frame."""

    def converter(self, height: int, width: int, *, inspect: bool = False) -> layout.Converter:
        """The conversion of a ``height`` x ``width`` frame (``inspect``: into BGR u8, un-normalised)."""
        cache = self._inspect if inspect else self._converters
        conv = cache.get((height, width))
        if conv is None:
            # One thread by default (the engine's idle helper threads would compete with the inference that
            # follows); throughput mode asks for more.
            conv = self.spec.converter("BGR", width, height, threads=1 if inspect else self.threads, inspect=inspect)
            if len(cache) >= 8:
                cache.clear()
            cache[(height, width)] = conv
        return conv

    def content_converter(self, height: int, width: int) -> layout.Converter:
        """The letterbox conversion of a ``height`` x ``width`` frame without its bars: the same pixels
        into the image's rectangle only (the rest of the input left as it is)."""
        conv = self._content.get((height, width))
        if conv is None:
            full = self.converter(height, width)
            conv = self.spec.converter("BGR", width, height, threads=self.threads, dst_rect=full.transform.rect)
            if len(self._content) >= 8:
                self._content.clear()
            self._content[(height, width)] = conv
        return conv

    def __call__(self, image: np.ndarray, dst: np.ndarray, *, keep_fill: bool = False) -> None:
        """Write ``image`` (BGR u8, any size) into ``dst``, the model input (a mapped buffer's view or an array).

        ``keep_fill``: ``dst`` still holds what this preprocessor last wrote into it (a pipeline's own bound
        input buffers, which only the preprocess writes): a letterbox's bars, written then for a frame of this
        size, are not written again, only the image (the same bytes; a 1080p frame into 640x640 leaves 44% of
        the input as it was)."""
        if not isinstance(image, np.ndarray):
            raise InvalidArgumentError(f"the preprocess takes BGR u8 images (numpy arrays H x W x 3), not {type(image).__name__}")
        shape = image.shape
        if len(shape) != 3 or shape[2] != 3 or image.dtype != np.uint8:
            raise InvalidArgumentError(f"the preprocess takes BGR u8 images (H, W, 3), got {image.dtype} {image.shape}")
        if shape[0] == 0 or shape[1] == 0:
            raise InvalidArgumentError(f"the image is empty ({image.shape[1]}x{image.shape[0]} pixels): nothing to preprocess")
        conv = self.converter(shape[0], shape[1])
        filled = self._filled.get(id(dst)) if keep_fill else None
        if filled is not None and filled[0] is conv and filled[1]() is dst:
            self.content_converter(shape[0], shape[1])(image, dst)
        else:
            conv(image, dst)
            if isinstance(dst, np.ndarray) and conv.transform.rect != conv.transform.dst_rect:
                if len(self._filled) >= 64:
                    self._filled.clear()
                self._filled[id(dst)] = (conv, weakref.ref(dst))
            else:
                self._filled.pop(id(dst), None)
        self._last = image
        self.transform = conv.transform

    @property
    def resized(self) -> np.ndarray:
        """The last frame as the model sees it, BGR u8 at the input size, in a mapped buffer.

        Made on demand, for inspection and tests (the same geometry, resampling
        and fill, without the normalisation): the preprocess itself writes the
        model input in one pass, with no intermediate image.
        """
        if self._resized is None:
            from ..buffers import alloc

            self._buffer = alloc(self.spec.height * self.spec.width * 3, self._heap)
            self._resized = self._buffer.map("uint8", (self.spec.height, self.spec.width, 3))
        if self._last is not None:
            self.converter(self._last.shape[0], self._last.shape[1], inspect=True)(self._last, self._resized)
        return self._resized

    def close(self) -> None:
        self._last = None
        self._filled.clear()
        if self._buffer is not None:
            self._resized = None
            self._buffer.close()
            self._buffer = None


class InputWriter:
    """Writes one source array into input buffers of one spec: a :class:`npu_zc.layout.Converter`.

    ``layout.convert`` checks every argument in Python on each call. Right after an
    inference, with the caches cold, those checks can cost more than the
    conversion itself. The preprocess converts the same array into
    buffers of one shape every frame, so the converter checks the arguments once,
    and each buffer fully only the first time it sees one like it (anything else
    gets ``layout.convert``'s clear errors).
    """

    def __init__(self, spec: PreprocessSpec, source: np.ndarray) -> None:
        self.spec = spec
        self.source = source
        self.converter = layout.Converter(
            "BGR", spec.format, spec.width, spec.height, threads=1, **spec.normalisation
        )

    def __call__(self, dst: np.ndarray) -> None:
        self.converter(self.source, dst)


def _chroma_grid(fmt: str, x: int, y: int, w: int, h: int) -> tuple[int, int, int, int]:
    """A crop rounded inwards to the chroma grid of a subsampled format (even
    columns for 4:2:2, even rows and columns for 4:2:0), at most a pixel a side."""
    ax, ay = {"YUYV": (2, 1), "UYVY": (2, 1), "I420": (2, 2), "NV12": (2, 2), "NV21": (2, 2), "P010": (2, 2)}.get(fmt, (1, 1))
    x2, y2 = -(-x // ax) * ax, -(-y // ay) * ay
    return x2, y2, (x + w - x2) // ax * ax, (y + h - y2) // ay * ay


def _reversed(values: tuple[float, ...] | None) -> tuple[float, ...] | None:
    return None if values is None else tuple(reversed(values))


def _three(values: tuple[float, ...] | None) -> tuple[float, float, float] | None:
    if values is None:
        return None
    a, b, c = values if len(values) == 3 else values * 3
    return float(a), float(b), float(c)
