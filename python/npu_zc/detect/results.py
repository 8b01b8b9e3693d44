"""What a detector found: :class:`Detections`, small numpy arrays in frame pixels."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

TASKS = ("detect", "segment", "pose", "obb")
STRATEGIES = ("all", "largest")


@dataclass(frozen=True)
class InputMasks:
    """Each detection's mask at the model input, as Ultralytics' ``process_mask`` leaves it (before
    ``scale_masks``), kept as the box's pixels only: what :attr:`Detections.polygons` are traced on, as
    Ultralytics traces ``Results.masks.xy`` at the model input and scales the points to the frame.

    ``rects``: (n, 4) int64 x, y, width, height of each box's pixels in the model input; ``bits``: their
    0/1 bytes, row after row, one box after another; ``offsets``: (n,) where each box's bytes start;
    ``scale``, ``offset``: the letterbox mapping (``frame = (input - offset) / scale`` per axis);
    ``frame``: (width, height) the points are clipped to (None: not clipped).
    """

    rects: np.ndarray
    bits: np.ndarray
    offsets: np.ndarray
    scale: tuple[float, float] = (1.0, 1.0)
    offset: tuple[float, float] = (0.0, 0.0)
    frame: tuple[float, float] | None = None

    @classmethod
    def of(cls, rects: np.ndarray, bits: np.ndarray, scale: Sequence[float], offset: Sequence[float],
           frame: Sequence[float] | None) -> InputMasks:
        sizes = rects[:, 2] * rects[:, 3]
        offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64) if len(rects) else sizes
        return cls(rects, bits, offsets, (float(scale[0]), float(scale[1])), (float(offset[0]), float(offset[1])),
                   None if frame is None else (float(frame[0]), float(frame[1])))

    def __len__(self) -> int:
        return int(self.rects.shape[0])

    def __getitem__(self, index: Any) -> InputMasks:
        return replace(self, rects=self.rects[index], offsets=self.offsets[index])

    def mask(self, i: int) -> tuple[np.ndarray, int, int]:
        """Detection ``i``'s mask: a (height, width) uint8 0/1 view and its (x, y) in the model input."""
        x, y, w, h = (int(v) for v in self.rects[i])
        start = int(self.offsets[i])
        return self.bits[start:start + w * h].reshape(h, w), x, y

    def polygons(self, strategy: str = "all") -> list[np.ndarray]:
        """Ultralytics' ``Masks.xy``: ``ops.masks2segments`` (cv2 external contours, simple chains; ``"all"``
        merges a mask's contours into one as Ultralytics' default does, ``"largest"`` keeps the one with the
        most points), then ``scale_coords`` to the frame (minus the padding, over the gain, clipped).
        One (k, 2) float32 array per detection, (0, 2) where the mask has no contour."""
        import cv2

        if strategy not in STRATEGIES:
            raise ValueError(f"strategy is one of {', '.join(STRATEGIES)}, got {strategy!r}")
        out = []
        for i in range(len(self)):
            mask, x, y = self.mask(i)
            found = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE, offset=(x, y))[0] if mask.size else ()
            if not found:
                out.append(np.zeros((0, 2), np.float32))
                continue
            if strategy == "largest" or len(found) == 1:
                points = found[int(np.argmax([len(c) for c in found]))].reshape(-1, 2)
            else:
                points = np.concatenate(_merge_multi_segment([c.reshape(-1, 2) for c in found]))
            xy = points.astype(np.float32)
            xy[:, 0] -= np.float32(self.offset[0])
            xy[:, 1] -= np.float32(self.offset[1])
            xy[:, 0] /= np.float32(self.scale[0])
            xy[:, 1] /= np.float32(self.scale[1])
            if self.frame is not None:
                xy[:, 0] = xy[:, 0].clip(0, self.frame[0])
                xy[:, 1] = xy[:, 1].clip(0, self.frame[1])
            out.append(xy)
        return out


def _merge_multi_segment(segments: list[np.ndarray]) -> list[np.ndarray]:
    """Ultralytics' ``data.converter.merge_multi_segment``: contours joined at their closest points by a thin
    line (each walked forward, then the middle ones back), as ``masks2segments(strategy="all")`` does."""
    def closest(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
        d = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        i, j = np.unravel_index(np.argmin(d, axis=None), d.shape)
        return int(i), int(j)

    out: list[np.ndarray] = []
    segments = [np.asarray(s).reshape(-1, 2) for s in segments]
    idx_list: list[list[int]] = [[] for _ in segments]
    for i in range(1, len(segments)):
        a, b = closest(segments[i - 1], segments[i])
        idx_list[i - 1].append(a)
        idx_list[i].append(b)
    last = len(idx_list) - 1
    for i, idx in enumerate(idx_list):
        if len(idx) == 2 and idx[0] > idx[1]:
            idx = [len(segments[i]) - 1 - v for v in idx]
            segments[i] = segments[i][::-1, :]
        segments[i] = np.roll(segments[i], -idx[0], axis=0)
        segments[i] = np.concatenate([segments[i], segments[i][:1]])
        if i in (0, last):
            out.append(segments[i])
        else:
            out.append(segments[i][0:idx[1] - idx[0] + 1])
    for i in range(last, -1, -1):
        if i not in (0, last):
            out.append(segments[i][abs(idx_list[i][1] - idx_list[i][0]):])
    return out


def _finite(value: Any, digits: int) -> float | None:
    """``value`` rounded to ``digits``, or None where it is not a finite number (strict JSON has no NaN)."""
    v = float(value)
    return round(v, digits) if math.isfinite(v) else None


def _each(values: Any, digits: int) -> Any:
    return [_each(v, digits) for v in values] if isinstance(values, list) else _finite(values, digits)


def _rounded(values: np.ndarray, digits: int) -> list[Any]:
    """``values`` as nested lists of :func:`_finite`'s numbers, the whole array at once (a service writes every
    result as JSON). For float32, numpy's rounding (times 10**digits, to even, divided back) equals ``round``'s:
    the product is exact in float64, so both give the double nearest the same decimal."""
    a = np.asarray(values)
    if a.dtype != np.float32 or digits > 5 or a.size <= 8:  # a few values: one by one costs less than numpy's calls
        return _each(a.tolist(), digits)  # type: ignore[no-any-return]
    scale = 10.0**digits
    out = a.astype(np.float64)
    out *= scale
    np.rint(out, out=out)  # np.round's steps, without its wrapper's cost
    out /= scale
    if np.isfinite(a).all():
        return out.tolist()  # type: ignore[no-any-return]
    kept = out.astype(object)
    kept[~np.isfinite(out)] = None
    return kept.tolist()  # type: ignore[no-any-return]


@dataclass
class Detections:
    """Detections of one frame, best first (the order Ultralytics returns).

    ``xyxy``: (n, 4) float32 boxes, frame pixels (model-input pixels when no
    transform was given); ``scores``: (n,) float32; ``class_ids``: (n,) int32;
    ``names``: class id -> name (may be empty); ``task``: "detect", "segment",
    "pose" or "obb"; ``masks``: (n, H, W) bool in frame pixels (segment);
    ``keypoints``: (n, K, 3) float32 x, y, visibility (pose); ``xywhr``:
    (n, 5) float32 centre, size and angle in radians (obb; ``xyxy`` then holds
    each rotated box's axis-aligned bounds); ``track_ids``: (n,) int64, set by
    a tracker; ``input_masks``: the masks at the model input (segment), which
    :attr:`polygons` are traced on.
    """

    xyxy: np.ndarray
    scores: np.ndarray
    class_ids: np.ndarray
    names: Mapping[int, str] = field(default_factory=dict)
    task: str = "detect"
    masks: np.ndarray | None = None
    keypoints: np.ndarray | None = None
    xywhr: np.ndarray | None = None
    track_ids: np.ndarray | None = None
    input_masks: InputMasks | None = None
    _polygons: list[np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def polygons(self) -> list[np.ndarray] | None:
        """Each mask's outline in frame pixels, Ultralytics' ``Results.masks.xy``: a (k, 2) float32 array of
        x, y per detection (segment; None for other tasks). Traced once, on first use."""
        if self.input_masks is None:
            return None
        if self._polygons is None:
            self._polygons = self.input_masks.polygons()
        return self._polygons

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    def labels(self) -> list[str]:
        """Each detection's class name (its id as text where no name is known)."""
        return [self.names.get(int(c), str(int(c))) for c in self.class_ids]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: one dict per detection (masks as their pixel count and
        bounding box, not the bitmap; their outlines as ``polygon``). Strict
        JSON: a value that is not a finite number (NaN, infinity) is ``None``
        (``null``), never the ``NaN`` / ``Infinity`` tokens that JSON parsers refuse."""
        items: list[dict[str, Any]] = []
        labels = self.labels()
        polygons = self.polygons
        # Each array converted once (not value by value): the same numbers, at a fraction of the calls.
        boxes, scores, class_ids = _rounded(self.xyxy, 2), _rounded(self.scores, 5), self.class_ids.tolist()
        track_ids = None if self.track_ids is None else self.track_ids.tolist()
        xywhr = None if self.xywhr is None else _rounded(self.xywhr, 4)
        keypoints = None if self.keypoints is None else _rounded(self.keypoints, 2)
        for i in range(len(self)):
            item: dict[str, Any] = {"box": boxes[i], "score": scores[i], "class_id": int(class_ids[i]), "label": labels[i]}
            if track_ids is not None:
                item["track_id"] = int(track_ids[i])
            if xywhr is not None:
                item["xywhr"] = xywhr[i]
            if keypoints is not None:
                item["keypoints"] = keypoints[i]
            if self.masks is not None:
                item["mask_pixels"] = int(np.count_nonzero(self.masks[i]))
            if polygons is not None:
                item["polygon"] = [[_finite(x, 2), _finite(y, 2)] for x, y in polygons[i]]
            items.append(item)
        return {"task": self.task, "detections": items}

    def with_tracks(self, track_ids: Any) -> Detections:
        """A copy carrying ``track_ids`` ((n,) int64); the arrays are shared,
        not copied (they are small and never written in place)."""
        ids = np.asarray(track_ids, dtype=np.int64).reshape(-1)
        if ids.shape[0] != len(self):
            raise ValueError(f"{ids.shape[0]} track ids for {len(self)} detections")
        return replace(self, track_ids=ids)

    def __getitem__(self, index: Any) -> Detections:
        """The detections selected by a slice, a boolean mask or indices."""
        def pick(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[index]

        return Detections(
            self.xyxy[index], self.scores[index], self.class_ids[index], self.names, self.task,
            pick(self.masks), pick(self.keypoints), pick(self.xywhr), pick(self.track_ids),
            None if self.input_masks is None else self.input_masks[index],
        )

    @classmethod
    def empty(cls, task: str = "detect", names: Mapping[int, str] | None = None) -> Detections:
        """No detections."""
        return cls(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32), dict(names or {}), task)
