"""Ultralytics YOLO outputs: which family and task a model's output shapes
are (:class:`YoloLayout`), and their decode by Ultralytics' rules in Rust,
read where the model wrote them (:func:`decode_yolo`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np

from .. import _core
from ..errors import DetectError, DetectLayoutError, InvalidArgumentError
from .results import TASKS, Detections, InputMasks

FAMILIES = ("anchor-free", "end2end", "yolov5")
STRIDES = (8, 16, 32)

_EXPECTED = (
    "expected one of: [1, 4+nc, N] (anchor-free detect: YOLOv5u, v8, v9, 11, 12, v10/26 default export), "
    "[1, 4+nc+32, N] with prototypes [1, 32, H/4, W/4] (segment), [1, 4+nc+K*3, N] (pose), "
    "[1, 4+nc+1, N] (obb), [1, K, 6(+extra)] (end-to-end), [1, N, 5+nc] (classic YOLOv5)"
)


def _anchors(input_size: tuple[int, int], per_cell: int = 1) -> int:
    w, h = input_size
    return per_cell * sum((w // s) * (h // s) for s in STRIDES)


@dataclass(frozen=True)
class YoloLayout:
    """What a YOLO model's outputs hold.

    ``family``: "anchor-free" ``[1, 4+nc+extra, N]``, "end2end" ``[1, K, 6+extra]``
    or "yolov5" ``[1, N, 5+nc+extra]``; ``task``: "detect", "segment", "pose"
    or "obb"; ``nc``: classes (0 when an end-to-end output does not say);
    ``kpt_shape``: (K, values per keypoint) for pose; ``nm``: mask
    coefficients for segment; ``output``/``protos``: which output is which;
    ``input_size``: the model input (width, height) when known.
    """

    family: str
    task: str
    nc: int
    kpt_shape: tuple[int, int] | None = None
    nm: int = 0
    output: int = 0
    protos: int | None = None
    input_size: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        # A hand-made layout is checked as the shapes would check it: counts a model can have.
        if self.family not in FAMILIES:
            raise InvalidArgumentError(f"family is one of {', '.join(FAMILIES)}, got {self.family!r}")
        if self.task not in TASKS:
            raise InvalidArgumentError(f"task is one of {', '.join(TASKS)}, got {self.task!r}")
        for what, value in (("nc", self.nc), ("nm", self.nm), ("output", self.output)):
            if not isinstance(value, (int, np.integer)) or not 0 <= value < 2**31:
                raise InvalidArgumentError(f"{what} is a count of channels, from 0 below 2**31, got {value!r}")
        if self.kpt_shape is not None and (
                len(self.kpt_shape) != 2 or not all(isinstance(v, (int, np.integer)) and 0 < v < 2**16 for v in self.kpt_shape)):
            raise InvalidArgumentError(f"kpt_shape is (keypoints, values per keypoint), got {self.kpt_shape!r}")

    @property
    def extra(self) -> int:
        """Values per candidate after the class scores."""
        if self.task == "segment":
            return self.nm
        if self.task == "pose":
            k, d = self.kpt_shape or (17, 3)
            return k * d
        return 1 if self.task == "obb" else 0

    @classmethod
    def from_outputs(
        cls,
        shapes: Sequence[Sequence[int]],
        *,
        task: str | None = None,
        nc: int | None = None,
        kpt_shape: tuple[int, int] | None = None,
        end2end: bool | None = None,
        input_size: tuple[int, int] | None = None,
    ) -> YoloLayout:
        """The layout of outputs of these shapes. ``task``, ``nc``,
        ``kpt_shape``, ``end2end`` (from the model's metadata) settle what the
        shapes alone leave open; ``input_size`` (width, height) checks the
        number of anchors. Raises :class:`DetectLayoutError` saying which
        shapes were expected."""
        shapes = [tuple(int(v) for v in s) for s in shapes]
        got = f"got {', '.join(str(list(s)) for s in shapes) or 'no outputs'}"
        if task is not None and task not in TASKS:
            raise DetectError(f"unknown task {task!r}: use one of {', '.join(TASKS)}")
        if nc is not None and nc < 1:
            raise DetectError(f"nc must be 1 or more, got {nc}")
        if kpt_shape is not None and (len(kpt_shape) != 2 or kpt_shape[0] < 1 or kpt_shape[1] not in (2, 3)):
            raise DetectError(f"kpt_shape must be (keypoints, 2 or 3), got {kpt_shape}")
        mains = [i for i, s in enumerate(shapes) if len(s) in (2, 3) and (len(s) == 2 or s[0] == 1)]
        protos = [i for i, s in enumerate(shapes) if len(s) == 4 and s[0] == 1]
        if len(mains) != 1 or len(protos) > 1 or len(mains) + len(protos) != len(shapes):
            raise DetectLayoutError(f"{_EXPECTED}; {got}")
        out = mains[0]
        a, b = shapes[out][-2:]
        nm = 0
        if protos:
            nm = shapes[protos[0]][1]
            if task not in (None, "segment"):
                raise DetectLayoutError(f"a {task} model has no prototypes output; {got}")
            task = "segment"
        elif task == "segment":
            raise DetectLayoutError(f"a segment model has a prototypes output [1, 32, H/4, W/4] too; {got}")
        if task == "pose" and kpt_shape is None:
            kpt_shape = (17, 3)

        def extra_of(t: str | None) -> int:
            return {"segment": nm, "pose": (kpt_shape or (17, 3))[0] * (kpt_shape or (17, 3))[1], "obb": 1}.get(t or "", 0)

        common = dict(nm=nm, output=out, protos=protos[0] if protos else None, input_size=input_size)
        row_major = a > b
        if nc is not None and not end2end and a == 4 + nc + extra_of(task):
            row_major = False  # few anchors (a small N) but the channels fit
        if end2end or (end2end is None and row_major and b == 6 + extra_of(task)):
            if not row_major and end2end:
                raise DetectLayoutError(f"an end-to-end output is [1, K, 6+extra] with K rows of detections; {got}")
            t = task or "detect"
            if b != 6 + extra_of(t):
                raise DetectLayoutError(f"an end-to-end {t} output is [1, K, {6 + extra_of(t)}]; {got}")
            return cls("end2end", t, nc or 0, kpt_shape if t == "pose" else None, **common)  # type: ignore[arg-type]
        if row_major:
            t = task or "detect"
            classes = b - 5 - extra_of(t)
            if nc is not None and classes != nc:
                raise DetectLayoutError(
                    f"a classic YOLOv5 {t} output of {nc} classes is [1, N, {5 + nc + extra_of(t)}]; {got}")
            if classes < 1:
                raise DetectLayoutError(f"{_EXPECTED}; {got}")
            if input_size is not None and a != _anchors(input_size, 3):
                raise DetectLayoutError(
                    f"a classic YOLOv5 output for a {input_size[0]}x{input_size[1]} input has "
                    f"{_anchors(input_size, 3)} rows; {got}")
            return cls("yolov5", t, classes, kpt_shape if t == "pose" else None, **common)  # type: ignore[arg-type]
        # Anchor-free, channel-major [1, 4+nc+extra, N].
        if task is None and nc is not None:
            rest = a - 4 - nc
            if rest == 0:
                task = "detect"
            elif rest == 1:
                task = "obb"
            elif rest > 0 and kpt_shape is not None and rest == kpt_shape[0] * kpt_shape[1]:
                task = "pose"
            elif rest == 51:  # Ultralytics' default kpt_shape (17, 3)
                task, kpt_shape = "pose", (17, 3)
            else:
                raise DetectLayoutError(
                    f"an anchor-free output of {nc} classes is [1, {4 + nc}, N] (detect), [1, {5 + nc}, N] (obb) "
                    f"or [1, {4 + nc}+K*3, N] (pose); {got}")
        t = task or "detect"
        classes = a - 4 - extra_of(t)
        if nc is not None and classes != nc:
            raise DetectLayoutError(
                f"an anchor-free {t} output of {nc} classes is [1, {4 + nc + extra_of(t)}, N]; {got}")
        if classes < 1:
            raise DetectLayoutError(f"{_EXPECTED}; {got}")
        if input_size is not None and b != _anchors(input_size):
            raise DetectLayoutError(
                f"an anchor-free output for a {input_size[0]}x{input_size[1]} input has N = {_anchors(input_size)} "
                f"anchors (strides 8, 16, 32); {got}")
        return cls("anchor-free", t, classes, kpt_shape if t == "pose" else None, **common)  # type: ignore[arg-type]


def _element(a: np.ndarray, quant: tuple[float, int] | None, what: str) -> tuple[np.ndarray, str]:
    """The array as the binding takes it (16-bit floats as their bits) and its element name."""
    dt = a.dtype
    if dt == np.float32:
        return a, "f32"
    if dt == np.float16:
        return a.view(np.uint16), "f16"
    if dt.name == "bfloat16" or dt == np.uint16:  # ml_dtypes.bfloat16, or its bits
        return a.view(np.uint16), "bf16"
    if dt in (np.int8, np.uint8):
        if quant is None:
            raise DetectError(f"the {what} is {dt}: pass quant=(scale, zero_point), the model's dequantisation")
        return a, "i8" if dt == np.int8 else "u8"
    raise DetectError(
        f"the {what} is {dt}: outputs are read as the model writes them, in float32, float16, "
        "bfloat16 (ml_dtypes or uint16 bits), int8 or uint8")


def decode_yolo(
    outputs: Sequence[Any] | np.ndarray,
    layout: YoloLayout,
    *,
    conf: float = 0.25,
    iou: float = 0.7,
    classes: Sequence[int] | None = None,
    agnostic: bool = False,
    max_det: int = 300,
    max_nms: int = 30000,
    transform: Any = None,
    frame_size: tuple[int, int] | None = None,
    names: Mapping[int, str] | None = None,
    quant: tuple[float, int] | None = None,
) -> Detections:
    """Decodes a YOLO model's outputs by Ultralytics' rules (see docs/detect.md):
    scores strictly above ``conf``, best class per candidate, class-aware NMS
    at IoU ``iou`` (``agnostic``: across classes), ``classes`` kept, the top
    ``max_nms`` candidates into NMS, at most ``max_det`` out. End-to-end
    outputs are only thresholded.

    ``outputs``: the model's output arrays, read in place (any strides), in
    float32, float16, bfloat16 or int8/uint8 with ``quant=(scale, zero_point)``.
    ``transform``: the letterbox :class:`npu_zc.Transform` of the input; boxes,
    keypoints and masks come back in frame pixels, clipped to ``frame_size``
    (width, height; by default the transform's source region). Without a
    transform they stay in model-input pixels.

    Frame after frame with the same settings, :class:`YoloDecoder` checks them once."""
    return YoloDecoder(
        layout, conf=conf, iou=iou, classes=classes, agnostic=agnostic, max_det=max_det, max_nms=max_nms,
        transform=transform, frame_size=frame_size, names=names, quant=quant,
    )(outputs)


class YoloDecoder:
    """:func:`decode_yolo` with its layout, settings and geometry checked once (same arguments, same errors):
    ``decoder(outputs)`` decodes one frame's outputs. A stream's frames of one size share one decoder."""

    __slots__ = ("layout", "names", "quant", "_decoder", "_polygons", "_kpt", "_elements")

    def __init__(
        self,
        layout: YoloLayout,
        *,
        conf: float = 0.25,
        iou: float = 0.7,
        classes: Sequence[int] | None = None,
        agnostic: bool = False,
        max_det: int = 300,
        max_nms: int = 30000,
        transform: Any = None,
        frame_size: tuple[int, int] | None = None,
        names: Mapping[int, str] | None = None,
        quant: tuple[float, int] | None = None,
    ) -> None:
        if names and layout.nc and len(names) != layout.nc:
            raise DetectError(f"the model's output has {layout.nc} classes but {len(names)} names were given")
        if not (0.0 <= conf <= 1.0 and 0.0 <= iou <= 1.0):
            raise DetectError(f"conf and iou must lie in 0..1, got conf={conf}, iou={iou}")
        max_det, max_nms = _count(max_det, "max_det"), _count(max_nms, "max_nms")
        wanted = None if classes is None else [int(c) for c in classes]
        if wanted is not None and any(not 0 <= c < 2**32 for c in wanted):
            raise InvalidArgumentError(f"classes are class ids, each 0 or more and below 2**32, got {wanted}")
        quant = _quant(quant)
        scale, offset, frame, input_wh, image = (1.0, 1.0), (0.0, 0.0), None, None, None
        if transform is not None:
            scale, offset = tuple(transform.scale), tuple(transform.offset)
            dx, dy, dw, dh = transform.dst_rect
            input_wh = (dx + dw, dy + dh)
            x, y, w, h = transform.rect
            image = (x, y, x + w, y + h)
            rx, ry, rw, rh = transform.roi
            frame = (float(rx + rw), float(ry + rh))
        elif layout.input_size is not None:
            input_wh = layout.input_size
        if frame_size is not None:
            frame = _frame_size(frame_size)
        self.layout = layout
        # One read-only mapping shared by every frame's Detections (not a copy per frame).
        self.names: Mapping[int, str] = MappingProxyType(dict(names or {}))
        self.quant = quant
        self._kpt = layout.kpt_shape or (17, 3)
        # Checked once here (Rust): the layout's channel count, the transform, the frame, the input rectangle.
        self._decoder = _core._YoloDecoder(
            layout.family, layout.task, layout.nc, float(conf), float(iou), wanted, bool(agnostic), max_det, max_nms,
            scale, offset, frame, layout.nm or 32, self._kpt, input_wh, image, quant,
        )
        self._polygons: tuple[Sequence[float], Sequence[float], Sequence[float] | None] = (scale, offset, frame)
        self._elements: dict[tuple[Any, Any], tuple[str, str | None]] = {}

    def __call__(self, outputs: Sequence[Any] | np.ndarray) -> Detections:
        layout = self.layout
        if isinstance(outputs, np.ndarray):
            outputs = [outputs]
        if len(outputs) <= max(layout.output, layout.protos or 0):
            raise DetectLayoutError(
                f"the layout reads its detections from output {layout.output} and its prototypes from output "
                f"{layout.protos}, got {len(outputs)} outputs")
        output = outputs[layout.output]
        protos = None if layout.protos is None else outputs[layout.protos]
        if not isinstance(output, np.ndarray) or not (protos is None or isinstance(protos, np.ndarray)):
            output, protos = np.asarray(output), None if protos is None else np.asarray(protos)
        # The element names, by dtype: checked the first time a dtype is seen.
        key = (output.dtype, None if protos is None else protos.dtype)
        elements = self._elements.get(key)
        if elements is None:
            elements = (_element(output, self.quant, "output")[1],
                        None if protos is None else _element(protos, self.quant, "prototypes output")[1])
            self._elements[key] = elements
        element, protos_element = elements
        if element in ("f16", "bf16"):
            output = output.view(np.uint16)
        if protos_element in ("f16", "bf16"):
            protos = protos.view(np.uint16)  # type: ignore[union-attr]
        r = self._decoder.decode(output, element, protos, protos_element)
        if r.masks is None and r.keypoints is None:
            return Detections(r.xyxy, r.scores, r.class_ids, self.names, layout.task, xywhr=r.xywhr)
        kpt = self._kpt
        n = len(r.scores)
        return Detections(
            r.xyxy, r.scores, r.class_ids, self.names, layout.task,
            masks=None if r.masks is None else r.masks.view(np.bool_),
            keypoints=None if r.keypoints is None else r.keypoints.reshape(n, kpt[0], kpt[1]),
            xywhr=r.xywhr,
            input_masks=None if r.input_rects is None or r.input_bits is None
            else InputMasks.of(r.input_rects, r.input_bits, *self._polygons),
        )


def _count(value: Any, what: str) -> int:
    """A count argument (max_det, max_nms): a whole number from 0 below 2**64."""
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"{what} must be a whole number, got {value!r}") from None
    if n != value or not 0 <= n < 2**64:
        raise InvalidArgumentError(f"{what} must be a whole number from 0 below 2**64, got {value!r}")
    return n


def _quant(quant: tuple[float, int] | None) -> tuple[float, int] | None:
    """``quant=(scale, zero_point)`` as numbers the decode can take (the dtype's range is checked in Rust)."""
    if quant is None:
        return None
    try:
        scale, zero_point = float(quant[0]), int(quant[1])
    except (TypeError, ValueError, OverflowError, IndexError):
        raise InvalidArgumentError(f"quant is (scale, zero_point), two numbers, got {quant!r}") from None
    if not -2**31 <= zero_point < 2**31 or zero_point != quant[1]:
        raise InvalidArgumentError(
            f"quant's zero point must be a whole number in -128..127 (int8) or 0..255 (uint8), got {quant[1]!r}")
    return scale, zero_point


def _frame_size(frame_size: Any) -> tuple[float, float]:
    """``frame_size`` (width, height): two finite numbers above 0 (what boxes are clipped to)."""
    try:
        w, h = (float(v) for v in frame_size)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"frame_size is (width, height), two numbers, got {frame_size!r}") from None
    if not (math.isfinite(w) and math.isfinite(h) and w > 0 and h > 0):
        raise InvalidArgumentError(f"frame_size (width, height) must be two finite numbers above 0, got {frame_size!r}")
    return w, h
