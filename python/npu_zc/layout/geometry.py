"""Geometry of a conversion that resizes: the :class:`Transform` that
:func:`convert` returns, and the checks of its geometry arguments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, Union

import numpy as np

from .._numbers import channel_values
from ._checks import _fail, _index

Rect = tuple[int, int, int, int]
FillValues = Union[int, Sequence[int], None]

INTERPOLATIONS = ("bilinear", "area", "nearest")
FITS = ("stretch", "letterbox", "crop")


@dataclass(frozen=True)
class Transform:
    """Where a resizing :func:`convert` read and wrote, and how destination
    coordinates map back to the source frame.

    Per axis (x, y): ``dst = src * scale + offset``, in continuous pixel
    coordinates of the whole frames (pixel ``i`` covers ``[i, i + 1)``), so
    ``src = (dst - offset) / scale``. ``rect``: the destination pixels holding
    the image, ``(x, y, w, h)``; ``dst_rect``: the destination rectangle
    written (``rect`` plus the letterbox fill); ``roi``: the source pixels
    read (the ROI, centre-cropped by ``fit="crop"``).
    """

    scale: tuple[float, float]
    offset: tuple[float, float]
    rect: Rect
    dst_rect: Rect
    roi: Rect

    @classmethod
    def _from_core(cls, t: tuple[Any, ...]) -> Transform:
        scale, offset, rect, dst_rect, roi = t
        return cls(
            (float(scale[0]), float(scale[1])), (float(offset[0]), float(offset[1])),
            tuple(rect), tuple(dst_rect), tuple(roi),
        )

    def to_source(self, points: Any) -> np.ndarray:
        """Destination coordinates to source pixels: an array whose last axis
        holds (x, y) points or (x1, y1, x2, y2) boxes (float64 out)."""
        return self._apply(points, lambda v, k: (v - self.offset[k]) / self.scale[k])

    def to_destination(self, points: Any) -> np.ndarray:
        """Source coordinates to destination pixels (the inverse of :meth:`to_source`)."""
        return self._apply(points, lambda v, k: v * self.scale[k] + self.offset[k])

    @staticmethod
    def _apply(points: Any, f: Any) -> np.ndarray:
        try:
            a = np.asarray(points, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise _fail(f"points must be numbers, an array whose last axis holds (x, y) or (x1, y1, x2, y2) ({e})") from None
        if a.ndim == 0 or a.shape[-1] not in (2, 4):
            raise _fail(f"points must have a last axis of 2 (x, y) or 4 (x1, y1, x2, y2), not shape {a.shape}")
        out = np.empty_like(a)
        for i in range(a.shape[-1]):
            out[..., i] = f(a[..., i], i % 2)
        return out


def _rect(value: Any, name: str) -> Rect | None:
    if value is None:
        return None
    try:
        items = [_index(v, name) for v in value]
    except TypeError:
        raise _fail(f"{name} must be (x, y, width, height), not {value!r}") from None
    if len(items) != 4:
        raise _fail(f"{name} must be 4 integers (x, y, width, height), not {value!r}")
    if any(v < 0 for v in items):
        raise _fail(f"{name} {tuple(items)} has a negative value: x, y, width and height are pixels, 0 or more")
    return (items[0], items[1], items[2], items[3])


def _size(value: Any, name: str) -> tuple[int, int] | None:
    if value is None:
        return None
    try:
        w, h = (_index(v, name) for v in value)
    except (TypeError, ValueError):
        raise _fail(f"{name} must be (width, height), not {value!r}") from None
    if w < 1 or h < 1:
        raise _fail(f"{name} ({w}, {h}) is empty: width and height must be at least 1")
    return (w, h)


def _choice(value: Any, name: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        raise _fail(f"unknown {name} {value!r}: use one of {', '.join(repr(a) for a in allowed)}")
    return value.lower()


def _fill(value: FillValues) -> tuple[float, float, float] | None:
    return channel_values(value, "fill", low=0, high=255, what="pixel value")
