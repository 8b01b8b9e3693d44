"""ByteTrack over a stream's detections: :class:`Tracker` (the work is in Rust, ``rust/detect/track/``).

Ultralytics' ``BYTETracker`` with its ``bytetrack.yaml`` defaults, step for step, so that the ids are
Ultralytics' frame by frame (tests/detect/test_track_ultralytics.py checks fixtures made by Ultralytics).
As in Ultralytics' ``model.track``, :meth:`Tracker.update` returns the detections that belong to a
confirmed track, each with the track's box (the Kalman filter's estimate, close to the detection's)
and its id; a new object shows from its second frame (except on the first frame of a stream).

Oriented boxes (an OBB model's detections, ``xywhr`` set) are tracked as Ultralytics tracks them: the
rotated box in its long-edge form through the filter, the angle of the last detection kept in the
half-turn form nearest the track's, and overlaps measured by probabilistic IoU (``batch_probiou``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from .._core import _ByteTracker
from .._numbers import real_number, whole_number
from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    from .results import Detections


class Tracker:
    """One stream's tracks: call :meth:`update` with each frame's detections, in order."""

    def __init__(
        self,
        track_high_thresh: float = 0.25,
        track_low_thresh: float = 0.1,
        new_track_thresh: float = 0.25,
        track_buffer: int = 30,
        match_thresh: float = 0.8,
        fuse_score: bool = True,
        frame_rate: int = 30,
    ) -> None:
        whole_number(track_buffer, "track_buffer", 0, 2**32 - 1)  # the core's u32
        whole_number(frame_rate, "frame_rate", 1, 2**32 - 1)
        for name, threshold in (("track_high_thresh", track_high_thresh), ("track_low_thresh", track_low_thresh),
                                ("new_track_thresh", new_track_thresh), ("match_thresh", match_thresh)):  # fmt: skip
            real_number(threshold, name)  # NaN would match nothing, without a word
        self.config: dict[str, float | int | bool] = {
            "track_high_thresh": float(track_high_thresh),
            "track_low_thresh": float(track_low_thresh),
            "new_track_thresh": float(new_track_thresh),
            "track_buffer": int(track_buffer),
            "match_thresh": float(match_thresh),
            "fuse_score": bool(fuse_score),
            "frame_rate": int(frame_rate),
        }
        self._inner = _ByteTracker(
            float(track_high_thresh), float(track_low_thresh), float(new_track_thresh), int(track_buffer),
            float(match_thresh), bool(fuse_score), int(frame_rate),
        )

    @property
    def frame_id(self) -> int:
        """Frames seen since creation or the last :meth:`reset`."""
        return int(self._inner.frame_id)

    def reset(self) -> None:
        """Forget every track (a new stream); ids start at 1 again."""
        self._inner.reset()

    def update_arrays(
        self, boxes: np.ndarray, scores: np.ndarray, class_ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One frame as arrays: boxes ``(n, 4)`` corners or ``(n, 5)`` rotated (centre, size, angle in
        radians), scores, class ids. Returns the confirmed tracks' boxes (``(m, 4)`` or ``(m, 5)`` f32, as
        given), track ids ``(m,)`` i64, scores, class ids and ``index``, the position of each one's
        detection in the input. Boxes of another shape, scores or class ids of another length, and class ids
        outside int32 are refused (:class:`~npu_zc.InvalidArgumentError`)."""
        b = np.asarray(boxes, np.float32)
        if b.size == 0 and b.ndim == 1:
            b = b.reshape(0, 4)  # no detections, however the empty array was made
        if b.ndim != 2 or b.shape[1] not in (4, 5):
            raise InvalidArgumentError(
                f"boxes are (n, 4) corners or (n, 5) rotated boxes (centre, size, angle), got shape {b.shape}")
        n = b.shape[0]
        s = np.asarray(scores, np.float32)
        c = np.asarray(class_ids)
        if s.shape != (n,) or c.shape != (n,):
            raise InvalidArgumentError(
                f"n boxes need n scores and n class ids: {n} boxes, scores of shape {s.shape}, class ids of shape {c.shape}")
        if c.dtype.kind not in "iu" and not (c.dtype.kind == "f" and np.all(np.isfinite(c)) and np.all(c == np.round(c))):
            raise InvalidArgumentError(f"class ids are whole numbers, got {c.dtype} values")
        if n and (c.min() < -2**31 or c.max() >= 2**31):
            raise InvalidArgumentError(
                f"class ids must lie in the int32 range, got {c.min()}..{c.max()}: each would be tracked as another id")
        return self._inner.update(np.ascontiguousarray(b), np.ascontiguousarray(s), np.ascontiguousarray(c, np.int32))

    def update(self, detections: Detections) -> Detections:
        """This frame's detections in; those of confirmed tracks out, with ``track_ids`` set. Rotated
        boxes (``xywhr``) are tracked as such; ``xyxy`` then holds the tracked boxes' axis-aligned bounds."""
        given = detections.xywhr if detections.xywhr is not None else detections.xyxy
        boxes, ids, scores, classes, index = self.update_arrays(given, detections.scores, detections.class_ids)
        if detections.xywhr is not None:
            return replace(detections[index], xyxy=_bounds(boxes), xywhr=boxes, scores=scores, track_ids=ids)
        return _select(detections, index, boxes, ids, scores)

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"Tracker({settings})"


def _bounds(xywhr: np.ndarray) -> np.ndarray:
    """The axis-aligned bounds (x1, y1, x2, y2) of rotated boxes (Ultralytics' ``OBB.xyxy``)."""
    x, y, w, h, r = (xywhr[:, i] for i in range(5))
    cos, sin = np.abs(np.cos(r)), np.abs(np.sin(r))
    ex, ey = (w * cos + h * sin) / 2, (w * sin + h * cos) / 2
    return np.stack([x - ex, y - ey, x + ex, y + ey], axis=1).astype(np.float32)


def _select(detections: Detections, index: np.ndarray, boxes: np.ndarray, ids: np.ndarray, scores: np.ndarray) -> Detections:
    """The detections at ``index`` (masks, keypoints with them) with the tracker's boxes, scores and ids."""
    return replace(detections[index], xyxy=boxes, scores=scores, track_ids=ids)
