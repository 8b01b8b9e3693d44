"""Lines and zones over a stream's tracks: :class:`LineCounter` and :class:`Zone` (the work is in Rust,
``rust/analytics/``).

Usable alone over any tracked :class:`~npu_zc.Detections` (``track_ids`` set, e.g. by
:class:`npu_zc.Tracker`), frame after frame, and what ``npu-zc serve`` counts with. The rules are
supervision's ``LineZone`` and ``PolygonZone`` with their defaults, so that the counts are the ones a
supervision user gets from the same tracks (docs/analytics.md):

* a line is crossed when all four corners of a box have gone to its other side (``anchors``),
  "in" to the left of start -> end as seen on the screen, "out" back;
* a zone holds the tracks whose bottom centre (``anchor``) is inside its polygon; each track enters,
  leaves, and its dwell runs from the first frame inside to the frame it leaves.
"""

from __future__ import annotations

from collections.abc import Iterable as AnyIterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from ._core import _LineCounter, _Zone
from ._numbers import whole_number
from .errors import InvalidArgumentError

_MOST = 2**31 - 1
"""The largest count or class id a line or a zone takes (the core's class ids are i32)."""

if TYPE_CHECKING:
    from .detect.results import Detections

ANCHORS = ("center", "center_left", "center_right", "top_center", "top_left", "top_right", "bottom_left",
           "bottom_center", "bottom_right")  # fmt: skip
LINE_ANCHORS = ("top_left", "top_right", "bottom_left", "bottom_right")
"""A line's default anchors (supervision's ``LineZone``): a box crosses when all of it has."""
ZONE_ANCHOR = "bottom_center"
"""A zone's default anchor (supervision's ``PolygonZone``): where an object stands."""
LOST_FRAMES = 30
"""Frames a track inside a zone may go unseen before it has left (ByteTrack's default ``track_buffer``)."""


@dataclass(frozen=True)
class Event:
    """Something a line or zone saw: ``kind`` is ``"line_crossed"`` (with ``direction`` ``"in"`` or
    ``"out"``), ``"zone_entered"`` or ``"zone_left"`` (with ``dwell_s`` and ``dwell_frames``)."""

    kind: str
    name: str
    """The line's or zone's name."""
    track_id: int
    class_id: int
    label: str
    frame: int
    """The frame's index in its stream (for a track that vanished inside a zone: the last frame it was seen)."""
    time: float | None
    """The frame's time in seconds (its ``pts``, or what the caller gave), None when unknown."""
    direction: str | None = None
    dwell_s: float | None = None
    dwell_frames: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.kind, "name": self.name, "track_id": self.track_id,
                               "class_id": self.class_id, "label": self.label, "frame": self.frame, "time": self.time}  # fmt: skip
        if self.direction is not None:
            out["direction"] = self.direction
        if self.kind == "zone_left":
            out["dwell_s"] = self.dwell_s
            out["dwell_frames"] = self.dwell_frames
        return out


def _point(value: Any, what: str) -> tuple[float, float]:
    try:
        x, y = (float(v) for v in value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what} must be a point [x, y], got {value!r}") from None
    return x, y


def _anchors(values: Iterable[str] | str, what: str) -> list[str]:
    if not isinstance(values, (str, AnyIterable)):
        raise InvalidArgumentError(f"{what}'s anchors are names, one of {', '.join(ANCHORS)}, got {values!r}")
    names = [values] if isinstance(values, str) else list(values)
    if not names:
        raise InvalidArgumentError(f"{what} needs at least one anchor, one of {', '.join(ANCHORS)}")
    for name in names:
        if not isinstance(name, str) or name.lower() not in ANCHORS:
            raise InvalidArgumentError(f"{what}: anchor {name!r} is not one of {', '.join(ANCHORS)}")
    return [name.lower() for name in names]


def _classes(classes: Iterable[int] | None) -> list[int] | None:
    if classes is None:
        return None
    if isinstance(classes, (str, bytes)) or not isinstance(classes, AnyIterable):
        raise InvalidArgumentError(f"classes are class ids (a list of whole numbers), got {classes!r}")
    return [whole_number(c, "a class id", 0, _MOST) for c in classes]


def _arrays(detections: Detections) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if detections.track_ids is None:
        raise InvalidArgumentError("lines and zones count tracks: give tracked detections (npu_zc.Tracker().update(...))")
    boxes = np.ascontiguousarray(np.asarray(detections.xyxy, np.float32).reshape(-1, 4))
    ids = np.ascontiguousarray(detections.track_ids, np.int64).reshape(-1)
    classes = np.ascontiguousarray(detections.class_ids, np.int32).reshape(-1)
    return boxes, ids, classes


def _label(detections: Detections, class_id: int) -> str:
    return detections.names.get(class_id, str(class_id)) if detections.names else str(class_id)


class LineCounter:
    """A counting line from ``start`` to ``end`` (frame pixels).

    ``anchors``: the box points that must all have changed side (default the four corners);
    ``minimum_crossing_threshold``: frames on the new side, in a row, before it counts (default 1);
    ``classes``: only these class ids count (default all). Call :meth:`update` (events) or
    :meth:`trigger` (supervision's two arrays) with each frame's tracked detections, in order.
    """

    def __init__(self, start: Sequence[float], end: Sequence[float], *, anchors: Iterable[str] = LINE_ANCHORS,
                 minimum_crossing_threshold: int = 1, classes: Iterable[int] | None = None, name: str = "line") -> None:  # fmt: skip
        minimum_crossing_threshold = whole_number(minimum_crossing_threshold, f"line {name}: minimum_crossing_threshold",
                                                  1, _MOST)  # fmt: skip
        self.name = name
        self.start = _point(start, f"line {name}'s start")
        self.end = _point(end, f"line {name}'s end")
        self.classes = _classes(classes)
        try:
            self._inner = _LineCounter(self.start, self.end, _anchors(anchors, f"line {name}"),
                                       minimum_crossing_threshold, self.classes)  # fmt: skip
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"line {name}: {exc}") from None

    @property
    def anchors(self) -> list[str]:
        return list(self._inner.anchors)

    @property
    def in_count(self) -> int:
        return int(self._inner.in_count)

    @property
    def out_count(self) -> int:
        return int(self._inner.out_count)

    def counts_per_class(self) -> tuple[dict[int, int], dict[int, int]]:
        """(class id -> crossings in, class id -> crossings out)."""
        ins, outs = self._inner.counts_per_class()
        return dict(ins), dict(outs)

    def trigger(self, detections: Detections) -> tuple[np.ndarray, np.ndarray]:
        """supervision's ``LineZone.trigger``: which detections crossed in, which out (two bool arrays)."""
        crossed_in, crossed_out = np.zeros(len(detections), bool), np.zeros(len(detections), bool)
        for index, inward in self._inner.trigger(*_arrays(detections)):
            (crossed_in if inward else crossed_out)[index] = True
        return crossed_in, crossed_out

    def update(self, detections: Detections, frame: int = 0, time: float | None = None) -> list[Event]:
        """One frame's tracked detections; the crossings as :class:`Event` objects."""
        boxes, ids, classes = _arrays(detections)
        return [
            Event("line_crossed", self.name, int(ids[i]), int(classes[i]), _label(detections, int(classes[i])), frame,
                  time, "in" if inward else "out")  # fmt: skip
            for i, inward in self._inner.trigger(boxes, ids, classes)
        ]

    def reset(self) -> None:
        self._inner.reset()

    def __repr__(self) -> str:
        return f"LineCounter({self.name!r}, {self.start} -> {self.end}, in={self.in_count}, out={self.out_count})"


class Zone:
    """A polygon zone (frame pixels, at least three points, not crossing itself).

    ``anchor``: the box point (or points: any one inside) that decides inside (default the bottom centre);
    ``lost_frames``: frames a track inside may go unseen before it has left (default 30);
    ``classes``: only these class ids count. Call :meth:`update` with each frame's tracked detections
    and the frame's index and time: the entries and exits as :class:`Event` objects, each exit with its dwell.
    """

    def __init__(self, polygon: Sequence[Sequence[float]], *, anchor: str | Iterable[str] = ZONE_ANCHOR,
                 lost_frames: int = LOST_FRAMES, classes: Iterable[int] | None = None, name: str = "zone") -> None:  # fmt: skip
        lost_frames = whole_number(lost_frames, f"zone {name}: lost_frames", 1, _MOST)
        self.name = name
        try:
            self.polygon = [_point(p, f"zone {name}'s points") for p in polygon]
        except TypeError:
            raise InvalidArgumentError(f"zone {name}'s polygon must be a list of points [x, y], got {polygon!r}") from None
        self.classes = _classes(classes)
        self._labels: dict[int, str] = {}
        try:
            self._inner = _Zone(self.polygon, _anchors(anchor, f"zone {name}"), lost_frames, self.classes)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"zone {name}: {exc}") from None

    @property
    def anchors(self) -> list[str]:
        return list(self._inner.anchors)

    @property
    def occupancy(self) -> int:
        """Tracks inside on the last frame (supervision's ``current_count``)."""
        return int(self._inner.occupancy)

    @property
    def entries(self) -> int:
        return int(self._inner.entries)

    @property
    def exits(self) -> int:
        return int(self._inner.exits)

    @property
    def tracks_inside(self) -> list[int]:
        return list(self._inner.tracks_inside)

    def contains(self, x: float, y: float) -> bool:
        """Whether point (x, y), rounded to its pixel, is inside (edges included)."""
        return bool(self._inner.contains(float(x), float(y)))

    def trigger(self, detections: Detections, frame: int = 0, time: float | None = None) -> np.ndarray:
        """supervision's ``PolygonZone.trigger``: a bool per detection, inside or not (events are kept for
        :meth:`update`'s callers only: call one of the two per frame)."""
        flags, _ = self._inner.trigger(*_arrays(detections), int(frame), float("nan") if time is None else float(time))
        return np.asarray(flags, bool)

    def update(self, detections: Detections, frame: int = 0, time: float | None = None) -> list[Event]:
        """One frame's tracked detections with its index and time; the entries and exits."""
        boxes, ids, classes = _arrays(detections)
        for c in set(classes.tolist()):
            self._labels[c] = _label(detections, c)
        _, events = self._inner.trigger(boxes, ids, classes, int(frame), float("nan") if time is None else float(time))
        out = []
        for kind, _index, track, class_id, at, when, dwell_frames, dwell_s in events:
            left = kind == "zone_left"
            out.append(Event(
                kind, self.name, track, class_id, self._labels.get(class_id, str(class_id)), at,
                None if when != when else when, None,
                (None if dwell_s != dwell_s else dwell_s) if left else None, dwell_frames if left else None,
            ))  # fmt: skip
        return out

    def reset(self) -> None:
        self._inner.reset()

    def __repr__(self) -> str:
        return f"Zone({self.name!r}, {len(self.polygon)} points, occupancy={self.occupancy})"


__all__ = ["ANCHORS", "Event", "LINE_ANCHORS", "LOST_FRAMES", "LineCounter", "ZONE_ANCHOR", "Zone"]
