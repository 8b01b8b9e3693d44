"""Cameras, folders of images and single images as sources of the same scheduler as video."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from ..capture import CAMERA_SOURCE_FORMATS
from ..errors import CameraFormatError, SourceError, SourceNotFoundError
from .frame import DecodedFrame
from .image import IMAGE_SUFFIXES, ImageError, load_image

# Frames in a row too short for their format before a camera stream fails: a glitch is skipped, a driver that
# always sends short frames is an error.
SHORT_FRAMES_IN_A_ROW = 30


class CameraSource:
    """A V4L2 camera (:class:`npu_zc.Camera`): live, the driver's buffer read in place and given back once converted.

    Give an open ``Camera`` (it stays the caller's) or a device path with the
    ``Camera`` arguments (``width``, ``height``, ``format``...), opened when the
    stream starts and closed when it ends.
    """

    live = True
    most_held: int | None = None
    """The most of its frames a stream may keep waiting and still leave the driver a buffer to fill (the camera's
    buffers less one), known once the camera is open: a live lane keeps no more, so that a model that stalls holds
    frames, not every buffer (the camera would then end the stream with :class:`~npu_zc.FramesHeldError`)."""

    def __init__(self, camera: Any, *, name: str | None = None, limit: int | None = None, **camera_args: Any) -> None:
        self._camera = None if isinstance(camera, (str, os.PathLike)) else camera
        self._device = os.fspath(camera) if self._camera is None else camera.device
        self._args = camera_args
        self.name = name or self._device
        self.limit = limit
        fmt = self._camera.format if self._camera is not None else camera_args.get("format", "YUYV")
        if fmt not in CAMERA_SOURCE_FORMATS:
            readable = ", ".join(sorted(CAMERA_SOURCE_FORMATS))
            raise SourceError(f"{self.name}: the layout engine reads no {fmt} frames; capture one of {readable}")

    def __repr__(self) -> str:
        return f"<CameraSource {self.name!r}>"

    def frames(self, stop: threading.Event | None = None) -> Iterator[DecodedFrame]:
        from ..capture import Camera

        stop = stop or threading.Event()
        camera = self._camera or Camera(self._device, **self._args)
        try:
            fmt = CAMERA_SOURCE_FORMATS[camera.format]  # checked above, or by the Camera this source opened
            matrix, range_ = getattr(camera, "colour", None) or (None, None)  # what the driver says of its YUV frames
            buffers = getattr(camera, "buffers", None)  # as many as the driver gave
            self.most_held = None if buffers is None else max(1, len(buffers) - 1)
            count = lost = short = 0
            while not stop.is_set() and (self.limit is None or count < self.limit):
                try:
                    frame = camera.read()
                except StopIteration:
                    return
                decoded = time.perf_counter_ns()
                lost += frame.dropped_before
                if frame.corrupt:  # the driver says so (V4L2_BUF_FLAG_ERROR): never read, counted as lost
                    frame.release()
                    lost += 1
                    continue
                try:
                    planes = frame.array()  # checked against the format: too short, it is refused
                except CameraFormatError as exc:
                    frame.release()
                    lost += 1
                    short += 1
                    if short >= SHORT_FRAMES_IN_A_ROW:
                        raise SourceError(f"{self.name}: {short} frames in a row too short for their format: {exc}") from None
                    continue
                short = 0
                item = DecodedFrame(
                    frame.sequence, fmt, planes, camera.width, camera.height, decoded,
                    frame.timestamp if hasattr(frame, "timestamp") else None, matrix, range_,
                    owner=frame, buffer=frame.buffer, _release=frame.release, lost_before=lost,
                )  # fmt: skip
                # No view of the frame may outlive the item's own: the driver's buffer is given back only when none is alive.
                del planes
                yield item
                lost = 0
                count += 1
        finally:
            if self._camera is None:
                camera.close()


class ImageSource:
    """A folder of images (in name order) or one image file, decoded by OpenCV into BGR; never drops."""

    live = False

    def __init__(self, path: str | os.PathLike[str], *, name: str | None = None, limit: int | None = None) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise SourceNotFoundError(f"no such image or folder: {path}")
        if self.path.is_dir():
            self.files = sorted(f for f in self.path.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file())
            if not self.files:
                raise SourceError(f"{path} holds no images ({', '.join(IMAGE_SUFFIXES)})")
        else:
            self.files = [self.path]
        self.files = self.files[:limit] if limit is not None else self.files
        self.name = name or self.path.name

    def __repr__(self) -> str:
        return f"<ImageSource {self.name!r}>"

    def frames(self, stop: threading.Event | None = None) -> Iterator[DecodedFrame]:
        for index, file in enumerate(self.files):
            if stop is not None and stop.is_set():
                return
            try:
                image = load_image(file)
            except ImageError as exc:
                raise SourceError(str(exc)) from None
            yield DecodedFrame(index, "BGR", image, image.shape[1], image.shape[0], time.perf_counter_ns(), owner=image)
