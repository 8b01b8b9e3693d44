"""The live view's frames: each stream's newest result drawn (boxes, track ids, lines and zones with their
counts) with npu_zc.draw and OpenCV, encoded as JPEG: the service's ``GET /live/{stream}.jpg``, and a sink
usable alone (``LiveView()(result)`` per result, ``jpeg(stream)`` the newest tile).

Drawing is off the inference path and costs nothing while no browser watches: the sink keeps a stream's
frame (a BGR copy) only when one has asked for that stream in the last :data:`WATCH_S` seconds and the
stream's last tile is older than ``1 / live_fps``; one drawing thread turns the newest kept frame of each
stream into a JPEG (a newer frame replaces one not drawn yet). Given as ``Streams(keep_frames=live.wants)``,
the same choice is made as each frame is submitted, so the decoder's buffers are held only for those frames.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    from ..pipeline.streams import StreamResult

WATCH_S = 10.0
"""A stream is drawn while its tile was asked for within this many seconds."""
JPEG_QUALITY = 80
TILE_WIDTH = 960
"""Tiles wider than this are scaled down after drawing (a browser's grid shows them smaller still)."""
LINE_BGR = (0, 255, 255)
ZONE_BGR = (255, 160, 0)


@dataclass
class LiveConfig:
    """The sink's settings."""

    fps: float = 2.0
    """Tiles a second per stream, at most."""
    watch_s: float = WATCH_S
    """A stream is drawn while its tile was asked for within this many seconds (``float('inf')``: always)."""
    jpeg_quality: int = JPEG_QUALITY
    tile_width: int = TILE_WIDTH

    def check(self) -> None:
        if not 0 < self.fps <= 60:
            raise InvalidArgumentError(f"live.fps must be more than 0 and at most 60, got {self.fps}")
        if not self.watch_s > 0:
            raise InvalidArgumentError(f"live.watch_s must be more than 0, got {self.watch_s}")
        if not 1 <= self.jpeg_quality <= 100:
            raise InvalidArgumentError(f"live.jpeg_quality must be from 1 to 100, got {self.jpeg_quality}")
        if self.tile_width < 16:
            raise InvalidArgumentError(f"live.tile_width must be at least 16, got {self.tile_width}")


def no_overlays(stream: str) -> tuple[list[Any], list[Any]]:
    return [], []


class LiveView:
    """A :class:`~npu_zc.sinks.Sink`: ``__call__(result)`` keeps frames to draw, ``jpeg(stream)`` gives the
    newest tile. ``overlays(stream)`` returns the stream's lines and zones (objects with ``start``/``end``
    and ``in_count``/``out_count``, or ``polygon`` and ``occupancy``)."""

    def __init__(self, config: LiveConfig | None = None,
                 overlays: Callable[[str], tuple[list[Any], list[Any]]] = no_overlays) -> None:  # fmt: skip
        config = config or LiveConfig()
        config.check()
        self.config = config
        self.interval = 1.0 / config.fps
        self.watch_s = config.watch_s
        self.overlays = overlays
        self._lock = threading.Condition()
        self._pending: dict[str, tuple[np.ndarray, Any]] = {}
        self._tiles: dict[str, bytes] = {}
        self._kept_at: dict[str, float] = {}
        self._watched: dict[str, float] = {}
        self._asked_at: dict[str, float] = {}
        self._asking = False
        """Set at the first :meth:`wants`: the frames that come were chosen there."""
        self._closed = False
        self._thread = threading.Thread(target=self._draw_loop, name="npu_zc-live", daemon=True)
        self._thread.start()

    def wants(self, stream: str) -> bool:
        """Whether the stream's next frame is to be drawn (watched, and its last one at least ``1 / fps`` ago):
        ``Streams(keep_frames=live.wants)`` keeps only those frames, every other one's buffer goes back at once."""
        self._asking = True
        now = time.monotonic()
        if now - self._watched.get(stream, -self.watch_s) > self.watch_s or now - self._asked_at.get(stream, -1e9) < self.interval:
            return False
        self._asked_at[stream] = now
        return True

    def __call__(self, result: StreamResult) -> None:
        frame = result.frame
        if frame is None or getattr(frame, "planes", None) is None:
            return
        name = result.name
        now = time.monotonic()
        # Frames chosen by wants() come already thinned; otherwise every result brings its frame: thinned here.
        if not self._asking and (now - self._watched.get(name, -self.watch_s) > self.watch_s
                                 or now - self._kept_at.get(name, -1e9) < self.interval):  # fmt: skip
            return
        self._kept_at[name] = now
        bgr = frame.bgr()  # a copy: the decoder's buffer goes back when this call returns
        if getattr(frame, "format", None) == "BGR":
            bgr = bgr.copy()  # an image source's own array: drawn on, it must be ours
        with self._lock:
            self._pending[name] = (bgr, result.prediction)
            self._lock.notify()

    def jpeg(self, stream: str) -> bytes | None:
        """The stream's newest tile (None before its first); marks it watched."""
        now = time.monotonic()
        self._watched[stream] = now
        return self._tiles.get(stream)

    def forget(self, stream: str) -> None:
        with self._lock:
            self._pending.pop(stream, None)
            self._tiles.pop(stream, None)
            self._watched.pop(stream, None)
            self._kept_at.pop(stream, None)
            self._asked_at.pop(stream, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._thread.join(timeout=5)

    def _draw_loop(self) -> None:
        import cv2

        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._lock.wait(1.0)
                if self._closed:
                    return
                name, (bgr, prediction) = self._pending.popitem()
            try:
                canvas = self.draw(name, np.ascontiguousarray(bgr), prediction)
                if canvas.shape[1] > self.config.tile_width:
                    height = round(canvas.shape[0] * self.config.tile_width / canvas.shape[1])
                    canvas = cv2.resize(canvas, (self.config.tile_width, height), interpolation=cv2.INTER_AREA)
                ok, encoded = cv2.imencode(".jpg", canvas, [cv2.IMWRITE_JPEG_QUALITY, self.config.jpeg_quality])
            except Exception:  # a frame that cannot be drawn loses its tile, never the service
                continue
            if ok:
                self._tiles[name] = encoded.tobytes()

    def draw(self, name: str, canvas: np.ndarray, prediction: Any) -> np.ndarray:
        """Zones (outline and occupancy), the detections (boxes, labels, track ids), lines (with an arrow
        pointing to their "in" side and the counts)."""
        import cv2

        from ..detect.draw import draw
        from ..detect.results import Detections

        lines, zones = self.overlays(name)
        lw = max(round(sum(canvas.shape[:2]) / 2 * 0.003), 2)
        scale = lw / 3
        for zone in zones:
            points = np.round(np.asarray(zone.polygon, np.float64)).astype(np.int32)
            cv2.polylines(canvas, [points], True, ZONE_BGR, lw, cv2.LINE_AA)
            x, y = points.min(axis=0)
            _text(canvas, f"{zone.name}: {zone.occupancy}", (int(x) + lw, int(y) + int(24 * scale)), scale, lw)
        if isinstance(prediction, Detections):
            draw(canvas, prediction)
        for line in lines:
            (x1, y1), (x2, y2) = line.start, line.end
            p1, p2 = (int(round(x1)), int(round(y1))), (int(round(x2)), int(round(y2)))
            cv2.line(canvas, p1, p2, LINE_BGR, lw, cv2.LINE_AA)
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2
            length = max(((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5, 1e-9)
            nx, ny = (y2 - y1) / length, -(x2 - x1) / length  # the "in" side (left of start -> end on screen)
            tip = (int(round(mx + nx * 12 * lw)), int(round(my + ny * 12 * lw)))
            cv2.arrowedLine(canvas, (int(round(mx)), int(round(my))), tip, LINE_BGR, lw, cv2.LINE_AA, tipLength=0.3)
            _text(canvas, f"{line.name}: in {line.in_count} out {line.out_count}", (p1[0] + lw, p1[1] - lw), scale, lw)
        return canvas


def _text(canvas: np.ndarray, text: str, at: tuple[int, int], scale: float, lw: int) -> None:
    import cv2

    x = min(max(at[0], 0), canvas.shape[1] - 1)
    y = min(max(at[1], int(20 * scale)), canvas.shape[0] - 1)
    cv2.putText(canvas, text, (x, y), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), lw + 2, cv2.LINE_AA)
    cv2.putText(canvas, text, (x, y), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), max(lw - 1, 1), cv2.LINE_AA)


__all__ = ["LiveConfig", "LiveView", "WATCH_S"]
