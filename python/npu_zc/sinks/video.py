"""Results drawn onto their frames: an H.264 video per stream (PyAV's libx264)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..pipeline.streams import StreamResult


def draw_top_label(bgr: np.ndarray, prediction: Any) -> np.ndarray:
    """A classifier's overlay: the top label and its score in the top-left corner (in place)."""
    import cv2

    if prediction is None or len(prediction) == 0:
        return bgr
    best = prediction[0]
    text = f"{getattr(best, 'label', best)} {getattr(best, 'score', 0):.0%}"
    scale = max(0.4, bgr.shape[0] / 720)
    cv2.putText(bgr, text, (8, int(24 * scale)), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), 4, cv2.LINE_AA)
    cv2.putText(bgr, text, (8, int(24 * scale)), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1, cv2.LINE_AA)
    return bgr


def draw_prediction(bgr: np.ndarray, prediction: Any) -> np.ndarray:
    """The default overlay: what the model gives, drawn: a detector's :class:`npu_zc.Detections` with
    :func:`npu_zc.draw` (boxes, labels, track ids, masks, keypoints), a classifier's top label otherwise."""
    from ..detect import Detections, draw

    if isinstance(prediction, Detections):
        return draw(np.ascontiguousarray(bgr), prediction)
    return draw_top_label(bgr, prediction)


class AnnotatedVideos:
    """An H.264 video per stream in ``directory`` (PyAV's libx264), each frame drawn by ``overlay``.

    Needs the decoded frames (``Streams(..., keep_frames=True)``); the drawing
    works on a BGR copy, off the inference path.
    """

    def __init__(self, directory: str | os.PathLike[str], *, fps: float = 30.0,
                 overlay: Callable[[np.ndarray, Any], np.ndarray] = draw_prediction) -> None:  # fmt: skip
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fps = fps
        self.overlay = overlay
        self._writers: dict[int, tuple[Any, Any]] = {}
        self.paths: dict[int, Path] = {}

    def __call__(self, result: StreamResult) -> None:
        import av

        if result.frame is None or result.frame.planes is None:
            return
        bgr = self.overlay(result.frame.bgr(), result.prediction)
        writer = self._writers.get(result.stream)
        if writer is None:
            path = self.directory / f"{result.stream:02d}-{_safe(result.name)}.mp4"
            container = av.open(str(path), "w")
            stream = container.add_stream("libx264", rate=round(self.fps))
            stream.width, stream.height, stream.pix_fmt = bgr.shape[1] & ~1, bgr.shape[0] & ~1, "yuv420p"
            writer = self._writers[result.stream] = (container, stream)
            self.paths[result.stream] = path
        container, stream = writer
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(bgr[: stream.height, : stream.width]), format="bgr24")
        for packet in stream.encode(frame):
            container.mux(packet)

    def close(self) -> None:
        for container, stream in self._writers.values():
            for packet in stream.encode():
                container.mux(packet)
            container.close()
        self._writers.clear()


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[-60:] or "stream"


__all__ = ["AnnotatedVideos", "draw_prediction", "draw_top_label"]
