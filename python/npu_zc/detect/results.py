"""What a detector found: :class:`Detections`, small numpy arrays in frame pixels."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

TASKS = ("detect", "segment", "pose", "obb")


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
    a tracker.
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

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    def labels(self) -> list[str]:
        """Each detection's class name (its id as text where no name is known)."""
        return [self.names.get(int(c), str(int(c))) for c in self.class_ids]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: one dict per detection (masks as their pixel count and
        bounding box, not the bitmap)."""
        items: list[dict[str, Any]] = []
        labels = self.labels()
        for i in range(len(self)):
            item: dict[str, Any] = {
                "box": [round(float(v), 2) for v in self.xyxy[i]],
                "score": round(float(self.scores[i]), 5),
                "class_id": int(self.class_ids[i]),
                "label": labels[i],
            }
            if self.track_ids is not None:
                item["track_id"] = int(self.track_ids[i])
            if self.xywhr is not None:
                item["xywhr"] = [round(float(v), 4) for v in self.xywhr[i]]
            if self.keypoints is not None:
                item["keypoints"] = [[round(float(v), 2) for v in k] for k in self.keypoints[i]]
            if self.masks is not None:
                item["mask_pixels"] = int(np.count_nonzero(self.masks[i]))
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
        )

    @classmethod
    def empty(cls, task: str = "detect", names: Mapping[int, str] | None = None) -> Detections:
        """No detections."""
        return cls(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32), dict(names or {}), task)
