"""Preprocess: a decoded BGR frame into the model's input buffer, in the layout the model reads.

Two steps, neither of which allocates:

1. OpenCV resizes the part of the frame the model will see (a centre crop for
   classifiers, the whole frame for detectors) straight into a small mapped
   buffer (BGR u8 at the model's input size). Cropping before resizing gives
   the same picture as resize-then-crop and touches only the pixels kept.
2. :class:`InputWriter` converts that into the model's input with the layout
   engine (:func:`npu_zc.layout.convert`, one pass in the Rust core): the
   packed HW layout (RGBx, RGBx_FP16...) in zero-copy mode, where the model
   normalises; normalised planar float (RGBP_FLOAT) in copy mode.

A :class:`PreprocessSpec` says all of that in plain data, so that a producer
process can preprocess without OpenVINO (see :mod:`.ipc`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .. import layout
from ..errors import InvalidArgumentError, ModelError
from .image import opencv

Fit = Literal["crop", "stretch"]
"""``crop``: the centre of the frame, as classifiers are evaluated; ``stretch``: the whole frame."""

INTERPOLATIONS = ("linear", "area", "cubic", "nearest")
"""OpenCV resize methods by name; ``linear`` is ``cv2.resize``'s default."""

# Formats the preprocess can write, by the element type of their buffer.
_ELEMENTS = {
    "RGBx": "u8", "BGRx": "u8", "RGB": "u8", "BGR": "u8",
    "RGBx_FP16": "f16", "RGBx_BF16": "bf16",
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

    def __post_init__(self) -> None:
        if self.format not in _ELEMENTS:
            raise ModelError(
                f"the preprocess cannot write the {self.format} layout from a BGR image "
                f"(it writes {', '.join(_ELEMENTS)}); choose another HW format"
            )
        if self.interpolation not in INTERPOLATIONS:
            raise InvalidArgumentError(f"unknown interpolation {self.interpolation!r}: use one of {', '.join(INTERPOLATIONS)}")
        if self.fit not in ("crop", "stretch"):
            raise InvalidArgumentError(f"unknown fit {self.fit!r}: use 'crop' or 'stretch'")
        if not 0 < self.crop_fraction <= 1:
            raise InvalidArgumentError(f"crop_fraction must be in (0, 1], got {self.crop_fraction}")

    @classmethod
    def for_session(cls, session: Any, *, fit: Fit = "crop", interpolation: str = "linear") -> "PreprocessSpec":
        """The spec of ``session``'s image input: normalised by the model in zero-copy mode, here in copy mode."""
        spec = session.inputs[0]
        norm = session.normalisation
        in_model = session.mode == "zero-copy"
        return cls(
            format=session.format,
            shape=tuple(spec.shape),
            height=session.image.height,
            width=session.image.width,
            mean=None if in_model else norm.mean,
            scale=None if in_model else norm.scale,
            fit=fit,
            interpolation=interpolation,
        )

    @property
    def element_type(self) -> str:
        return _ELEMENTS[self.format]

    @property
    def dtype(self) -> np.dtype:
        if self.element_type == "bf16":
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype({"u8": np.uint8, "f16": np.float16, "f32": np.float32}[self.element_type])

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

    def region(self, height: int, width: int) -> tuple[slice, slice]:
        """The rows and columns of a ``height`` x ``width`` frame that the model sees."""
        if self.fit == "stretch":
            return slice(0, height), slice(0, width)
        # Resize so the short side becomes (model side / crop_fraction), then take the centre:
        # in frame pixels, a window of model size / that factor.
        factor = min(self.height, self.width) / self.crop_fraction / min(height, width)
        rows = max(1, min(height, round(self.height / factor)))
        cols = max(1, min(width, round(self.width / factor)))
        top, left = (height - rows) // 2, (width - cols) // 2
        return slice(top, top + rows), slice(left, left + cols)


class Preprocessor:
    """Resizes into a mapped buffer, then writes the model input; reusable across frames of any size.

    Nothing is allocated per frame: the resize target is allocated once
    (``heap``, like the model's buffers) and the input is written in place.
    """

    def __init__(self, spec: PreprocessSpec, *, heap: str = "auto") -> None:
        from ..buffers import alloc

        cv2 = opencv()
        self.spec = spec
        self._interpolation = {
            "linear": cv2.INTER_LINEAR,
            "area": cv2.INTER_AREA,
            "cubic": cv2.INTER_CUBIC,
            "nearest": cv2.INTER_NEAREST,
        }[spec.interpolation]
        self._buffer = alloc(spec.height * spec.width * 3, heap)
        self.resized: np.ndarray = self._buffer.map("uint8", (spec.height, spec.width, 3))
        """The frame at the model's input size, BGR u8: what the last call resized."""
        self._regions: dict[tuple[int, int], tuple[slice, slice]] = {}
        self._resize = cv2.resize
        self._write = InputWriter(spec, self.resized)

    def __call__(self, image: np.ndarray, dst: np.ndarray) -> None:
        """Write ``image`` (BGR u8, any size) into ``dst``, the model input (a mapped buffer's view or an array)."""
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise InvalidArgumentError(f"the preprocess takes BGR u8 images (H, W, 3), got {image.dtype} {image.shape}")
        key = (image.shape[0], image.shape[1])
        region = self._regions.get(key)
        if region is None:
            region = self._regions[key] = self.spec.region(*key)
        self._resize(image[region], (self.spec.width, self.spec.height), dst=self.resized, interpolation=self._interpolation)
        self._write(dst)

    def close(self) -> None:
        del self.resized, self._write
        self._buffer.close()


class InputWriter:
    """Writes one source array into input buffers of one spec: a :class:`npu_zc.layout.Converter`.

    ``layout.convert`` checks every argument in Python on each call. Right after an
    inference, with the caches cold, those checks cost about 0.1 ms a frame: more
    than the conversion itself. The preprocess converts the same array into
    buffers of one shape every frame, so the converter checks the arguments once,
    and each buffer fully only the first time it sees one like it (anything else
    gets ``layout.convert``'s clear errors).
    """

    def __init__(self, spec: PreprocessSpec, source: np.ndarray) -> None:
        self.spec = spec
        self.source = source
        # One thread: a model input is small, and the inference that follows wants every core
        # (the engine's idle helper threads would compete with it).
        self.converter = layout.Converter(
            "BGR", spec.format, spec.width, spec.height, mean=_three(spec.mean), scale=_three(spec.scale), threads=1
        )

    def __call__(self, dst: np.ndarray) -> None:
        self.converter(self.source, dst)


def _three(values: tuple[float, ...] | None) -> tuple[float, float, float] | None:
    if values is None:
        return None
    a, b, c = values if len(values) == 3 else values * 3
    return float(a), float(b), float(c)
