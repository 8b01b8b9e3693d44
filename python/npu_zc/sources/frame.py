"""One decoded frame as the layout engine reads it: planes in the decoder's (or driver's) memory, in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

MATRICES = ("bt601", "bt709", "bt2020")
RANGES = ("limited", "full")


@dataclass(eq=False)
class DecodedFrame:
    """A frame of one source, ready for the preprocess.

    ``planes`` are read in place by the layout engine: for video, numpy views of
    the decoder's own buffers at their line size (NV12 as a ``(Y, UV)`` pair,
    I420 as ``(Y, U, V)``); for a camera, the driver-written buffer; for images,
    the decoded BGR array. ``owner`` keeps that memory alive (the PyAV frame or
    the camera frame) until :meth:`release`.
    """

    index: int
    """Position in the source (0-based), counting frames dropped before it."""
    format: str
    """The layout engine's source format: "NV12", "I420", "P010", "I010", "YUYV", "BGR"..."""
    planes: Any
    width: int
    height: int
    decoded_ns: int
    """``time.perf_counter_ns()`` when the decoder (or the driver) handed the frame over."""
    pts: float | None = None
    """Presentation time in seconds, from the stream (None when it has none)."""
    matrix: str | None = None
    """Colour matrix of YUV frames: "bt601", "bt709" or "bt2020" (from the stream)."""
    range: str | None = None
    """"limited" (16-235) or "full" (0-255), from the stream."""
    copied: bool = False
    """True when the planes are not the decoder's buffer (a documented fallback made a copy)."""
    owner: Any = None
    buffer: Any = None
    """The DmaBuf the planes live in, when they do (a camera's): read between its CPU-access brackets."""
    _release: Callable[[], None] | None = None
    lost_before: int = 0
    """Frames the source lost just before this one (a camera driver's drops, frames thrown away as corrupt):
    counted among the stream's drops."""

    def release(self) -> None:
        """Let go of the decoder's (or driver's) buffer; the planes must not be read afterwards."""
        release, self._release = self._release, None
        self.planes = None
        self.owner = None
        if release is not None:
            release()

    def bgr(self) -> np.ndarray:
        """A BGR copy of the frame, for drawing and saving (never on the inference path)."""
        import cv2

        if self.format == "BGR":
            return np.ascontiguousarray(self.planes)
        if hasattr(self.owner, "to_ndarray"):  # a PyAV frame: FFmpeg's own conversion, the stream's colours
            return np.ascontiguousarray(self.owner.to_ndarray(format="bgr24"))
        codes = {"YUYV": cv2.COLOR_YUV2BGR_YUYV, "UYVY": cv2.COLOR_YUV2BGR_UYVY, "I420": cv2.COLOR_YUV2BGR_I420,
                 "NV12": cv2.COLOR_YUV2BGR_NV12, "RGB": cv2.COLOR_RGB2BGR, "GRAY": cv2.COLOR_GRAY2BGR}  # fmt: skip
        planes = self.planes
        if self.format not in codes:  # 10-bit (a camera's P010): no OpenCV decoder; the engine, in the frame's colours
            from .. import layout

            out = np.empty((self.height, self.width, 3), np.uint8)
            layout.convert(planes, out, self.format, "BGR", matrix=self.matrix or "bt601", range=self.range or "limited")
            return out
        if isinstance(planes, tuple):
            planes = np.concatenate([np.ascontiguousarray(p).reshape(-1) for p in planes])
            planes = planes.reshape(self.height * 3 // 2, self.width)
        return np.ascontiguousarray(cv2.cvtColor(np.asarray(planes), codes[self.format]))


def colour_of(colorspace: int, color_range: int, height: int, pix_fmt: str) -> tuple[str, str]:
    """(matrix, range) of a decoded frame from FFmpeg's AVColorSpace and AVColorRange.

    A stream that does not say (AVCOL_SPC_UNSPECIFIED, the common case for
    encoders run with their defaults) gets what players assume: BT.709 from
    720 lines up, BT.601 below; limited range unless the pixel format is a
    "yuvj" (JPEG, full-range) one.
    """
    matrix = {1: "bt709", 5: "bt601", 6: "bt601", 4: "bt601", 7: "bt601", 9: "bt2020", 10: "bt2020"}.get(int(colorspace))
    if matrix is None:
        matrix = "bt709" if height >= 720 else "bt601"
    if int(color_range) == 2 or pix_fmt.startswith("yuvj"):
        return matrix, "full"
    return matrix, "limited"


__all__ = ["DecodedFrame", "MATRICES", "RANGES", "colour_of"]
