"""The YOLO postprocess of the pipeline: Ultralytics exports recognised, decoded in place, mapped to the frame.

A model is served as a YOLO detector when its metadata says so (``metadata.yaml`` beside the IR, ONNX
metadata, the IR's ``model_info``: see :mod:`npu_zc.detect.metadata`) or, for a bare model, when its output
shapes fit a YOLO family (:class:`npu_zc.detect.yolo.YoloLayout`). The preprocess is Ultralytics' static
``LetterBox`` (centred, 114 grey, bilinear, RGB, /255 inside the compiled model): ``npu_zc.convert(...,
fit="letterbox", fill=114)`` writes the same bytes (tests/detect/test_yolo_letterbox.py). Boxes go back to the
frame with Ultralytics' ``scale_boxes`` arithmetic (gain and rounded padding), so they are Ultralytics' own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from ..errors import DetectLayoutError, InvalidArgumentError, ModelError
from .postprocess import Postprocessor

if TYPE_CHECKING:
    from ..detect.metadata import YoloMetadata
    from ..detect.results import Detections
    from ..detect.yolo import YoloDecoder

YOLO_TASKS = ("detect", "segment", "pose", "obb")
YOLO_FILL = 114


@dataclass(frozen=True)
class DetectOptions:
    """Ultralytics' predict settings (its defaults) and what the user says about the model."""

    conf: float = 0.25
    """Keep candidates scoring strictly above this."""
    iou: float = 0.7
    classes: tuple[int, ...] | None = None
    """Only these class ids."""
    agnostic: bool = False
    """NMS across classes."""
    max_det: int = 300
    task: str | None = None
    """Override the task: detect, segment, pose, obb."""
    names: Mapping[int, str] | None = field(default=None, hash=False)
    """Override the class names."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.conf <= 1.0 or not 0.0 <= self.iou <= 1.0:
            raise InvalidArgumentError(f"conf and iou are between 0 and 1, got conf {self.conf}, iou {self.iou}")
        if not isinstance(self.max_det, int) or not 1 <= self.max_det < 2**63:
            raise InvalidArgumentError(f"max_det must be a whole number from 1 below 2**63, got {self.max_det!r}")
        if self.classes is not None and any(not isinstance(c, int) or not 0 <= c < 2**32 for c in self.classes):
            raise InvalidArgumentError(f"classes are class ids, whole numbers from 0 below 2**32, got {self.classes}")
        if self.task is not None and self.task not in YOLO_TASKS:
            raise InvalidArgumentError(f"unknown task {self.task!r}: use one of {', '.join(YOLO_TASKS)}")


def ultralytics_transform(transform: Any, frame_size: tuple[int, int], input_size: tuple[int, int]) -> Any:
    """The letterbox ``transform`` with Ultralytics' ``scale_boxes`` arithmetic (8.4, ``ratio_pad=None``):
    ``gain = min(input / frame)``, the image ``round(frame * gain)`` (as ``LetterBox`` rounds each side),
    per-axis gains ``new / frame`` and ``pad = round((input - new) / 2 - 0.1)``; boxes map back as
    ``(x - pad) / gain``. This is what the preprocess's own letterbox writes (its ``Transform`` is the
    same numbers); written out here so that the decode follows Ultralytics whatever made the input.
    (Ultralytics before 8.4 divided by the single ``gain``: up to half an input pixel apart.)"""
    (fw, fh), (iw, ih) = frame_size, input_size
    gain = min(ih / fh, iw / fw)
    new_w, new_h = max(round(fw * gain), 1), max(round(fh * gain), 1)
    pad = (float(round((iw - new_w) / 2 - 0.1)), float(round((ih - new_h) / 2 - 0.1)))
    return replace(transform, scale=(new_w / fw, new_h / fh), offset=pad)


def output_shapes(model: Any) -> list[tuple[int, ...]]:
    from .postprocess import _dims

    return [_dims(port) for port in model.outputs]


def input_size_of(model: Any) -> tuple[int, int] | None:
    """(height, width) of a model's one image input, when static."""
    from .postprocess import _dims

    dims = _dims(model.inputs[0]) if len(model.inputs) == 1 else ()
    if len(dims) == 4 and dims[1] in (1, 3) and dims[2] > 0 and dims[3] > 0:
        return dims[2], dims[3]
    return None


def is_yolo(model: Any, meta: YoloMetadata | None, task: str | None = None) -> bool:
    """True when ``model`` is served as a YOLO detector: the metadata or ``task`` names a YOLO task, or
    (a bare model) its output shapes fit a YOLO family."""
    wanted = task or (meta.task if meta is not None else None)
    if wanted is not None:
        return wanted in YOLO_TASKS
    try:
        layout_for(model, meta, None)
    except (ModelError, ValueError, ImportError):
        return False
    return True


def layout_for(model: Any, meta: YoloMetadata | None, options: DetectOptions | None) -> Any:
    """The :class:`YoloLayout` of a model's outputs, told what the metadata and the user know."""
    from ..detect.yolo import YoloLayout

    task = (options.task if options else None) or (meta.task if meta else None)
    names = (options.names if options else None) or (meta.names if meta else None) or None
    # The number of names tells a pose output from a detect one only when the task is unknown; with the
    # task known, a count that disagrees is reported by YoloDetections, naming where the names came from.
    return YoloLayout.from_outputs(
        output_shapes(model),
        task=task,
        nc=len(names) if names and task is None else None,
        kpt_shape=meta.kpt_shape if meta else None,
        end2end=meta.end2end if meta else None,
        input_size=input_size_of(model),
    )


class YoloDetections(Postprocessor):
    """Decodes a YOLO model's outputs where they lie (Rust, the GIL released) into :class:`Detections`."""

    kind = "yolo"

    def __init__(self, model: Any, meta: YoloMetadata | None = None, options: DetectOptions | None = None) -> None:
        self.options = options or DetectOptions()
        try:
            self.layout = layout_for(model, meta, self.options)
        except DetectLayoutError as exc:
            if self.options.task is None and meta is not None and meta.task is not None:
                # A metadata.yaml left in a folder beside another model makes that model a detector: say so.
                stray = "metadata.yaml" in meta.sources
                raise DetectLayoutError(
                    f"{exc}; the task {meta.task!r} is what the model's metadata says ({', '.join(meta.sources)})"
                    + (": if the metadata.yaml beside the model is another model's, give each model a folder of its own"
                       if stray else "")
                ) from None
            raise
        names = dict(self.options.names or (meta.names if meta else {}) or {})
        if self.layout.family == "end2end" and self.layout.nc == 0 and names:
            # An end-to-end output carries each detection's class id, not a score per class: the names say how
            # many classes there are (ids at or above that are no detection).
            self.layout = replace(self.layout, nc=len(names))
        nc = int(self.layout.nc)
        if names and len(names) != nc:
            said = "the names given" if self.options.names else "the model's metadata"
            raise ModelError(f"{said} lists {len(names)} class names; the model's output scores {nc} classes")
        self.names = names or {i: str(i) for i in range(nc)}
        self.input_size = input_size_of(model)
        self.quant = _quantisation(model)
        self._last: tuple[Any, tuple[int, int], tuple[int, int], YoloDecoder] | None = None
        self._plain: YoloDecoder | None = None
        self._decoders: dict[tuple[Any, tuple[int, int], tuple[int, int]], YoloDecoder] = {}

    def __call__(self, outputs: Sequence[np.ndarray]) -> Detections:
        """Detections in model-input pixels (no frame to map them to)."""
        if self._plain is None:
            self._plain = self._decoder(None, None)
        return self._plain(outputs)

    def for_frame(
        self, outputs: Sequence[np.ndarray], transform: Any, input_size: tuple[int, int], frame_size: tuple[int, int]
    ) -> Detections:
        """Detections in frame pixels, clipped to the frame: decoded straight into the frame's coordinates."""
        # The frames of a stream share one size and the preprocess one Transform object: the decoder with
        # their geometry is made (and its settings checked) once, not per frame.
        last = self._last
        if last is not None and last[0] is transform and last[1] == frame_size and last[2] == input_size:
            return last[3](outputs)
        # Several preprocessors (throughput mode) or frame sizes: decoders by the geometry's value.
        key = (transform, frame_size, input_size)
        decoder = self._decoders.get(key)
        if decoder is None:
            geometry = ultralytics_transform(transform, frame_size, input_size) if transform is not None else None
            decoder = self._decoder(geometry, frame_size)
            if len(self._decoders) >= 8:
                self._decoders.clear()
            self._decoders[key] = decoder
        self._last = (transform, frame_size, input_size, decoder)
        return decoder(outputs)

    def _decoder(self, geometry: Any, frame_size: tuple[int, int] | None) -> YoloDecoder:
        from ..detect.yolo import YoloDecoder

        o = self.options
        return YoloDecoder(
            self.layout,
            conf=o.conf,
            iou=o.iou,
            classes=o.classes,
            agnostic=o.agnostic,
            max_det=o.max_det,
            transform=geometry,
            frame_size=frame_size,
            names=self.names,
            quant=self.quant,
        )


def _quantisation(model: Any) -> tuple[float, int] | None:
    """(scale, zero point) of an int8/u8 output, when the model records them in its rt_info."""
    port = model.outputs[0]
    if port.get_element_type().get_type_name() not in ("i8", "u8"):
        return None
    from ..runtime.model import model_info

    info = model_info(model)
    try:
        scale, zero = float(info["output_scale"]), float(info.get("output_zero_point", 0))
    except (KeyError, ValueError, TypeError):
        raise ModelError(
            "the model's output is 8-bit, but it records no output_scale / output_zero_point in its model_info"
        ) from None
    if not (math.isfinite(scale) and scale > 0) or not (math.isfinite(zero) and zero == round(zero) and -128 <= zero <= 255):
        raise ModelError(
            f"the model's model_info records output_scale {scale} and output_zero_point {zero}: an 8-bit output needs "
            "a finite scale above 0 and a whole zero point from -128 to 255"
        )
    return scale, int(zero)
