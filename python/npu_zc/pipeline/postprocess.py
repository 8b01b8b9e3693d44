"""Postprocess: read the output buffers in place and turn them into labels or boxes.

The kind of model is read from its outputs:

* classification: one output holding one score per class (``[1, C]``,
  ``[1, C, 1, 1]``...): the top ``k`` classes, with probabilities (a softmax of
  the logits, unless the model ends in a Softmax already);
* detection: an SSD ``DetectionOutput`` (``[1, 1, N, 7]``), or MediaPipe's
  BlazeFace face detector (``regressors`` and ``classificators``);
* YOLO (Ultralytics exports: detect, segment, pose, OBB; see :mod:`.yolo`), from the
  model's metadata or, for a bare model, its output shapes.

Anything else is refused up front with :class:`npu_zc.ModelError`.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence, Union

import numpy as np

from .. import layout
from ..errors import ModelError
from .timing import FENCE_TIMEOUT_S

if TYPE_CHECKING:
    from ..detect.results import Detections

Kind = Literal["classification", "ssd", "blazeface", "yolo"]

# Ops a score vector may pass through after the layer that makes it.
_PASS_THROUGH = {"Convert", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Result"}


@dataclass(frozen=True)
class ClassScore:
    """One of the top classes of a classifier."""

    index: int
    label: str
    score: float
    """A probability (0..1)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.label} ({self.index}) {self.score:.3f}"


@dataclass(frozen=True)
class NormalisedDetection:
    """An object found by an SSD-style detector; ``box`` is (x0, y0, x1, y1) as fractions of the frame.

    Normalised, unlike a YOLO model's :class:`npu_zc.detect.Detections` (boxes in frame pixels): :meth:`pixels`
    gives the box at a frame's size.
    """

    index: int
    label: str
    score: float
    box: tuple[float, float, float, float]

    def pixels(self, width: int, height: int) -> tuple[int, int, int, int]:
        """The box in pixels of a ``width`` x ``height`` frame."""
        x0, y0, x1, y1 = self.box
        return round(x0 * width), round(y0 * height), round(x1 * width), round(y1 * height)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        x0, y0, x1, y1 = self.box
        return f"{self.label} {self.score:.3f} at ({x0:.3f}, {y0:.3f})-({x1:.3f}, {y1:.3f})"


Prediction = Union[list[ClassScore], list[NormalisedDetection], "Detections"]


def model_kind(model: Any) -> Kind:
    """What ``model`` (an ``openvino.Model``) predicts, from its outputs; :class:`ModelError` if none
    (YOLO models are told apart before, by :func:`.yolo.is_yolo`)."""
    outputs = list(model.outputs)
    shapes = [_dims(port) for port in outputs]
    names = [" ".join(sorted(port.get_names())) for port in outputs]
    if len(outputs) == 2 and any("regressors" in n for n in names) and any("classificators" in n for n in names):
        if _is_short_range_blazeface(model, shapes):
            return "blazeface"
    if len(outputs) == 1:
        dims = shapes[0]
        if len(dims) == 4 and dims[-1] == 7 and dims[1] == 1:
            return "ssd"
        if _classes(dims) >= 2:
            return "classification"
    described = ", ".join(f"{n or '#' + str(i)} {_shape_text(d)}" for i, (n, d) in enumerate(zip(names, shapes)))
    raise ModelError(
        f"unsupported model: its outputs ({described}) are neither one score vector (classification) "
        "nor a known detection layout (SSD DetectionOutput [1,1,N,7], BlazeFace short-range 128x128, "
        "YOLO: [1,4+nc,N] with N = sum (H/s)(W/s) over strides 8/16/32, [1,K,6+] end-to-end, [1,N,5+nc] YOLOv5)"
    )


def _is_short_range_blazeface(model: Any, shapes: list[tuple[int, ...]]) -> bool:
    """The anchors and box scale decoded by the zoo are those of the 128x128 short-range model."""
    dims = _dims(model.inputs[0]) if len(model.inputs) == 1 else ()
    return sorted(shapes) == [(1, 896, 1), (1, 896, 16)] and len(dims) == 4 and dims[1:3] == (128, 128)


def _dims(port: Any) -> tuple[int, ...]:
    """Static dimensions, -1 for dynamic ones; a dynamic batch counts as 1."""
    shape = port.get_partial_shape()
    if shape.rank.is_dynamic:
        return ()
    dims = tuple(d.get_length() if d.is_static else -1 for d in shape)
    return (1, *dims[1:]) if dims and dims[0] == -1 else dims


def _classes(dims: tuple[int, ...]) -> int:
    """The number of classes of a score vector shape (one dimension other than 1), else 0."""
    big = [d for d in dims if d != 1]
    return big[0] if len(big) == 1 and big[0] > 0 else 0


def _shape_text(dims: tuple[int, ...]) -> str:
    return "[" + ",".join("?" if d < 0 else str(d) for d in dims) + "]" if dims else "[dynamic rank]"


def ends_in_softmax(model: Any, index: int = 0) -> bool:
    """True when output ``index`` already holds probabilities (a Softmax or Sigmoid makes it)."""
    node = model.outputs[index].get_node()
    while node.get_type_name() in _PASS_THROUGH and node.get_input_size() > 0:
        node = node.input_value(0).get_node()
    return node.get_type_name() in ("Softmax", "Sigmoid")


class Postprocessor(ABC):
    """Reads a model's outputs in place (the views of the output buffers) and returns the prediction."""

    kind: Kind

    @abstractmethod
    def __call__(self, outputs: Sequence[np.ndarray]) -> Prediction: ...

    def for_frame(
        self, outputs: Sequence[np.ndarray], transform: Any, input_size: tuple[int, int], frame_size: tuple[int, int]
    ) -> Prediction:
        """The prediction with its boxes in the frame that ``transform`` made the ``input_size`` (width,
        height) input from; ``frame_size``: (width, height)."""
        return to_frame(self(outputs), transform, input_size, frame_size)


class TopClasses(Postprocessor):
    """The ``k`` best classes of a score vector, with probabilities."""

    kind: Kind = "classification"

    def __init__(self, labels: Sequence[str], k: int = 5, *, softmax: bool = True) -> None:
        self.labels = tuple(labels)
        self.k = max(1, min(int(k), len(self.labels)))
        self.softmax = softmax
        # k checked once, each output buffer fully only the first time (see preprocess.InputWriter).
        self.topk = layout.TopK(self.k)

    def __call__(self, outputs: Sequence[np.ndarray]) -> list[ClassScore]:
        return self.for_frame(outputs, None, (0, 0), (0, 0))

    def for_frame(
        self, outputs: Sequence[np.ndarray], transform: Any, input_size: tuple[int, int], frame_size: tuple[int, int]
    ) -> list[ClassScore]:
        """Class scores have no geometry: the same in any frame (the work is here, not in ``__call__``: a
        pipeline calls this per frame)."""
        scores = outputs[0].reshape(-1)  # a view: the output buffer, read in place
        best, values = self.topk(scores)
        labels, known = self.labels, len(self.labels)  # names looked up inline, one list made: this runs per frame
        if not self.softmax:
            return [ClassScore(i, labels[i] if i < known else str(i), float(v)) for i, v in zip(best.tolist(), values)]
        # The top value is the maximum: softmax = exp(v - max) / sum(exp(all - max)).
        peak = float(values[0])
        total = float(np.add.reduce(np.exp(scores - peak), dtype=np.float64))  # ndarray.sum's wrapper skipped
        exp = math.exp
        return [
            ClassScore(i, labels[i] if i < known else str(i), exp(float(v) - peak) / total)
            for i, v in zip(best.tolist(), values)
        ]


def topk(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and values of the ``k`` largest values of a 1-D array, largest first (read in place)."""
    indices, values = layout.topk(scores, k)
    return indices, values


class SsdDetections(Postprocessor):
    """Rows ``[image, label, score, x0, y0, x1, y1]`` of a DetectionOutput, above ``min_score``."""

    kind: Kind = "ssd"

    def __init__(self, labels: Sequence[str] | None = None, *, min_score: float = 0.5, k: int = 100) -> None:
        self.labels = tuple(labels or ())
        self.min_score = min_score
        self.k = k

    def __call__(self, outputs: Sequence[np.ndarray]) -> list[NormalisedDetection]:
        rows = outputs[0].reshape(-1, 7)
        end = np.flatnonzero(rows[:, 0] < 0)  # image id -1 ends the list
        rows = rows[: end[0]] if end.size else rows
        keep = np.flatnonzero(rows[:, 2] >= self.min_score)
        keep = keep[np.argsort(-rows[keep, 2], kind="stable")][: self.k]
        found = []
        for row in rows[keep]:
            index = int(row[1])
            name = self.labels[index] if index < len(self.labels) else str(index)
            found.append(NormalisedDetection(index, name, float(row[2]), _box(*row[3:7])))
        return found


class FaceDetections(Postprocessor):
    """BlazeFace: faces decoded from the anchors (:mod:`npu_zc.runtime.zoo.face_detection`)."""

    kind: Kind = "blazeface"

    def __init__(self, regressors: int, classificators: int, *, min_score: float = 0.5, k: int = 100) -> None:
        self.ports = (regressors, classificators)
        self.min_score = min_score
        self.k = k

    def __call__(self, outputs: Sequence[np.ndarray]) -> list[NormalisedDetection]:
        from ..runtime.zoo import face_detection

        faces = face_detection.decode(outputs[self.ports[0]], outputs[self.ports[1]], min_score=self.min_score)
        return [
            NormalisedDetection(0, "face", f.score, _box(f.xmin, f.ymin, f.xmax, f.ymax)) for f in faces[: self.k]
        ]


def for_frame(
    postprocess: Callable[[Sequence[np.ndarray]], Prediction],
    outputs: Sequence[np.ndarray],
    transform: Any,
    input_size: tuple[int, int],
    frame_size: tuple[int, int],
) -> Prediction:
    """``postprocess``'s prediction in frame pixels: a :class:`Postprocessor` maps its own boxes (a detector
    decodes straight into the frame); any other callable (a user's function) gets :func:`to_frame`."""
    own = getattr(postprocess, "for_frame", None)
    if own is not None:
        return own(outputs, transform, input_size, frame_size)  # type: ignore[no-any-return]
    return to_frame(postprocess(outputs), transform, input_size, frame_size)


class ResultReader:
    """A finished inference's outputs, read in place, into the frame's prediction: the one result reader of the
    many-frames paths (:mod:`.throughput`, :mod:`.streams`), called on the queue's delivery threads.

    ``dmabuf_outputs`` (:attr:`npu_zc.runtime.AsyncQueue.dmabuf_outputs`): the outputs are read between
    ``cpu_access("read")`` brackets (each a sync ioctl; memfd buffers need none, so they are skipped there).
    """

    def __init__(self, postprocess: Callable[[Sequence[np.ndarray]], Prediction], input_size: tuple[int, int], *,
                 dmabuf_outputs: bool) -> None:  # fmt: skip
        self.postprocess = postprocess
        self.input_size = input_size
        """The model input's (width, height)."""
        self.dmabuf_outputs = dmabuf_outputs
        self._own = getattr(postprocess, "for_frame", None)  # looked up once: it runs per frame

    def __call__(self, result: Any, transform: Any, frame_size: tuple[int, int]) -> Prediction:
        """``result`` (an :class:`npu_zc.runtime.queue.Result`)'s prediction in the pixels of the ``frame_size``
        (width, height) frame that ``transform`` made the input from."""
        if self.dmabuf_outputs:
            with contextlib.ExitStack() as access:
                for buffer in result.output_buffers:
                    access.enter_context(buffer.cpu_access("read", timeout=FENCE_TIMEOUT_S))
                return for_frame(self.postprocess, result.outputs, transform, self.input_size, frame_size)
        if self._own is not None:
            return self._own(result.outputs, transform, self.input_size, frame_size)  # type: ignore[no-any-return]
        return to_frame(self.postprocess(result.outputs), transform, self.input_size, frame_size)


def to_frame(prediction: Prediction, transform: Any, input_size: tuple[int, int], frame_size: tuple[int, int]) -> Prediction:
    """Detections' boxes from fractions of the model input to fractions of the
    frame, through the preprocess's :class:`npu_zc.layout.Transform` (the crop,
    letterbox or stretch that made the input); class scores as they are."""
    if transform is None or not isinstance(prediction, list) or not prediction or not isinstance(prediction[0], NormalisedDetection):
        return prediction
    (iw, ih), (fw, fh) = input_size, frame_size
    boxes = np.array([d.box for d in prediction], np.float64) * (iw, ih, iw, ih)
    frame = transform.to_source(boxes) / (fw, fh, fw, fh)
    return [replace(d, box=_box(*b)) for d, b in zip(prediction, frame)]


def _box(x0: float, y0: float, x1: float, y1: float) -> tuple[float, float, float, float]:
    """A box clipped to the frame."""

    def clip(v: float) -> float:
        return min(1.0, max(0.0, float(v)))

    return clip(x0), clip(y0), clip(x1), clip(y1)


def postprocessor_for(
    model: Any,
    kind: Kind,
    *,
    labels: Sequence[str] | None = None,
    top: int = 5,
    min_score: float = 0.5,
) -> Postprocessor:
    """The postprocess of a compiled model's outputs (``model`` is the prepared ``openvino.Model``);
    a YOLO model's is :class:`.yolo.YoloDetections`."""
    if kind == "classification":
        from ..runtime.labels import labels_for

        classes = _classes(_dims(model.outputs[0]))
        names = tuple(labels) if labels is not None else labels_for(classes)
        if labels is not None and len(names) < classes:
            raise ModelError(f"the labels file names {len(names)} classes; the model scores {classes}")
        return TopClasses(names, top, softmax=not ends_in_softmax(model))
    if kind == "ssd":
        return SsdDetections(labels, min_score=min_score, k=top)
    port_names = [" ".join(port.get_names()) for port in model.outputs]
    regressors = next(i for i, n in enumerate(port_names) if "regressors" in n)
    return FaceDetections(regressors, 1 - regressors, min_score=min_score, k=top)
