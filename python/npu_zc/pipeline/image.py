"""Decoding: images and video frames into BGR u8 arrays with OpenCV, with errors a person can act on.

Decoding happens once per image, outside any timed loop; a stream decodes
each frame as it comes (and times that as its own stage).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import Error

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pnm")
"""Files a folder stream reads; anything else in the folder is left alone."""


class ImageError(Error, ValueError):
    """An image that cannot be read or decoded."""


class ImageNotFoundError(ImageError, FileNotFoundError):
    """No image at that path."""


def opencv() -> Any:
    """The ``cv2`` module, with its own messages silenced: OpenCV, libpng and FFmpeg would print
    them on stderr, where we raise one sentence instead."""
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # AV_LOG_QUIET; read when FFmpeg is first used
    import cv2

    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    return cv2


def load_image(path: str | os.PathLike[str]) -> np.ndarray:
    """The image at ``path`` as a BGR u8 array ``(H, W, 3)``; :class:`ImageError` for anything unusable."""
    cv2 = opencv()
    p = Path(path)
    if not p.exists():
        raise ImageNotFoundError(f"no such image: {path}")
    if p.is_dir():
        raise ImageError(f"{path} is a folder, not an image (npu-zc stream reads folders of images)")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ImageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not data:
        raise ImageError(f"{path} is empty")
    if _truncated(data):
        raise ImageError(f"{path} is truncated: the file ends before the image does")
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ImageError(f"cannot decode {path}: not an image OpenCV reads (JPEG, PNG, BMP, TIFF, WebP, PPM)")
    return np.ascontiguousarray(image)


def _truncated(data: bytes) -> bool:
    """True for a JPEG without its end-of-image marker or a PNG without its IEND chunk."""
    if data.startswith(b"\xff\xd8"):
        # FF D9 never occurs inside entropy-coded data (FF is stuffed there), so its
        # absence from the tail means the scan was cut; some cameras append a short trailer.
        return b"\xff\xd9" not in data[-4096:]
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return b"IEND" not in data[-32:]
    return False


def is_video(path: str | os.PathLike[str]) -> bool:
    """A file that is not one of the image types: treated as a video."""
    p = Path(path)
    return p.is_file() and p.suffix.lower() not in IMAGE_SUFFIXES


class FrameSource:
    """Frames of a video file or a folder of images, in order, as ``(name, BGR array)``.

    ``len()`` is the number of frames when known (a folder, or a video whose
    container says so), else 0.
    """

    def __init__(self, path: str | os.PathLike[str], *, limit: int | None = None) -> None:
        self.path = Path(path)
        self.limit = limit
        if not self.path.exists():
            raise ImageNotFoundError(f"no such video or folder: {path}")
        self._files: list[Path] | None = None
        self._count = 0
        if self.path.is_dir():
            self._files = sorted(f for f in self.path.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file())
            if not self._files:
                raise ImageError(f"{path} holds no images ({', '.join(IMAGE_SUFFIXES)})")
            self._count = len(self._files)
        else:
            capture = self._open_video()
            self._count = max(0, int(capture.get(opencv().CAP_PROP_FRAME_COUNT)))
            capture.release()
        if limit is not None:
            self._count = min(self._count, limit) if self._count else limit

    @property
    def is_folder(self) -> bool:
        return self._files is not None

    def __len__(self) -> int:
        return self._count

    def _open_video(self) -> Any:
        cv2 = opencv()
        capture = cv2.VideoCapture(str(self.path), cv2.CAP_FFMPEG)
        if not capture.isOpened():
            capture.release()
            raise ImageError(f"cannot open {self.path} as a video (or a folder of images)")
        return capture

    def __iter__(self) -> Iterator[tuple[str, np.ndarray]]:
        limit = self.limit if self.limit is not None else -1
        if self._files is not None:
            for n, file in enumerate(self._files):
                if n == limit:
                    return
                yield file.name, load_image(file)
            return
        capture = self._open_video()
        try:
            n = 0
            while n != limit:
                ok, frame = capture.read()
                if not ok:
                    return
                yield f"{self.path.name}#{n}", frame
                n += 1
        finally:
            capture.release()


def sample_photo(name: str = "chelsea") -> np.ndarray:
    """A real photo shipped with scikit-image ("chelsea", "coffee", "astronaut"...), as BGR u8."""
    import cv2
    import skimage.data

    try:
        rgb = getattr(skimage.data, name)()
    except AttributeError:
        raise ImageError(f"scikit-image has no photo named {name!r}") from None
    if rgb.ndim == 2:
        return np.ascontiguousarray(cv2.cvtColor(rgb, cv2.COLOR_GRAY2BGR))
    return np.ascontiguousarray(cv2.cvtColor(rgb[..., :3], cv2.COLOR_RGB2BGR))


def full_hd(image: np.ndarray) -> np.ndarray:
    """``image`` made 1920x1080: cut to 16:9 around its centre, then upscaled (bicubic).

    No 1080p photo ships offline; this is how the benchmark gets one.
    """
    import cv2

    h, w = image.shape[:2]
    if w * 9 > h * 16:  # too wide: keep the full height
        cw, ch = h * 16 // 9, h
    else:
        cw, ch = w, w * 9 // 16
    y, x = (h - ch) // 2, (w - cw) // 2
    return np.ascontiguousarray(cv2.resize(image[y : y + ch, x : x + cw], (1920, 1080), interpolation=cv2.INTER_CUBIC))
