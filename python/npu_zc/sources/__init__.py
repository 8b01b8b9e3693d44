"""Where frames come from: video files and network streams (PyAV), cameras, folders and images.

A floor below :mod:`npu_zc.pipeline`: nothing here imports it. A new kind of
source goes here, as a class with the :class:`Source` protocol (and a case in
:func:`open_source` when a string should pick it).

Every source has a ``name``, ``live`` (keep only the newest frames when the
model falls behind) and ``frames(stop)``, an iterator of
:class:`DecodedFrame` run on the source's own thread by
:class:`npu_zc.Streams`. A live source that lends few frames says how many
may wait at once (``most_held``, known by its first frame: a camera's buffers
less one); its lane keeps no more. :func:`open_source` picks the source for
a string.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Protocol

from .frame import DecodedFrame, colour_of
from .image import IMAGE_SUFFIXES, FrameSource, ImageError, ImageNotFoundError, load_image
from .others import CameraSource, ImageSource
from .video import VideoSource, is_network


_VIDEO_ONLY = ("live", "realtime", "reconnect", "hardware", "options", "threads")


class Source(Protocol):
    name: str
    live: bool

    def frames(self, stop: Any = None) -> Iterator[DecodedFrame]: ...


def open_source(spec: Any, **options: Any) -> Source:
    """The source for ``spec``: a source object as it is, an open :class:`npu_zc.Camera`, ``/dev/videoN``,
    a folder or image file, or a video file / network URL (``options`` go to its class)."""
    if hasattr(spec, "frames") and hasattr(spec, "live"):
        source: Source = spec
        return source
    if hasattr(spec, "read") and hasattr(spec, "device"):
        return CameraSource(spec, **options)
    text = os.fspath(spec)
    if not is_network(text):
        path = Path(text)
        if text.startswith("/dev/video"):  # the options only a video source takes are not the camera's
            return CameraSource(text, **{k: v for k, v in options.items() if k not in _VIDEO_ONLY})
        if path.is_dir() or path.suffix.lower() in IMAGE_SUFFIXES:
            return ImageSource(path, **{k: v for k, v in options.items() if k in ("name", "limit")})
    return VideoSource(text, **options)


__all__ = ["IMAGE_SUFFIXES", "CameraSource", "DecodedFrame", "FrameSource", "ImageError", "ImageNotFoundError", "ImageSource", "Source",
           "VideoSource", "colour_of", "load_image", "open_source"]
