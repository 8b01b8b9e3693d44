"""Decoding: images and video frames into BGR u8 arrays with OpenCV, with errors a person can act on.

Decoding happens once per image, outside any timed loop; a stream decodes
each frame as it comes (and times that as its own stage).
"""

from __future__ import annotations

import os
import re
import struct
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .._files import read_regular_file
from ..errors import Error

DEFAULT_MAX_PIXELS = 100_000_000
"""The largest image (width x height) decoded unless raised (``--max-pixels``): 300 MB as BGR.
OpenCV's own limit (OPENCV_IO_MAX_IMAGE_PIXELS) is 2**30, which lets a 1 MB PNG of 20000x20000
pixels take 1.2 GB to decode."""



def _limit_from_environment() -> int:
    """OPENCV_IO_MAX_IMAGE_PIXELS when set (it is how set_max_pixels reaches a producer process), else ours."""
    try:
        return max(1, int(os.environ["OPENCV_IO_MAX_IMAGE_PIXELS"]))
    except (KeyError, ValueError):
        return DEFAULT_MAX_PIXELS


_max_pixels = _limit_from_environment()


def set_max_pixels(pixels: int) -> None:
    """Raise (or lower) the pixel limit of :func:`load_image`, OpenCV's own included where
    ``cv2`` is not imported yet (it reads OPENCV_IO_MAX_IMAGE_PIXELS once)."""
    global _max_pixels
    if pixels < 1:
        raise ImageError(f"the pixel limit must be at least 1, got {pixels}")
    _max_pixels = pixels
    os.environ["OPENCV_IO_MAX_IMAGE_PIXELS"] = str(pixels)


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
    # Formats whose size image_size() does not read (TIFF...) are held to the limit by OpenCV itself.
    os.environ.setdefault("OPENCV_IO_MAX_IMAGE_PIXELS", str(_max_pixels))
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
    data = read_regular_file(p, "the image", ImageError)
    if not data:
        raise ImageError(f"{path} is empty")
    if _truncated(data):
        raise ImageError(f"{path} is truncated: the file ends before the image does")
    size = image_size(data)
    if size is not None and size[0] * size[1] > _max_pixels:
        raise ImageError(
            f"{path} is {size[0]}x{size[1]} pixels, over the limit of {_max_pixels:,} "
            "(decoding it would take a lot of memory); raise the limit with --max-pixels if you mean it"
        )
    try:
        image, warnings = _decode(cv2, data)
    except cv2.error as exc:
        if "MAX_IMAGE_PIXELS" in str(exc):
            raise ImageError(
                f"{path} is over the limit of {_max_pixels:,} pixels (decoding it would take a lot of memory); "
                "raise the limit with --max-pixels if you mean it"
            ) from None
        raise ImageError(f"cannot decode {path}: {_opencv_reason(exc)}") from None
    if warnings and data.startswith(b"\xff\xd8"):
        # libjpeg decodes what it has and fills the rest with grey: refuse rather than infer on it.
        raise ImageError(f"{path} is truncated or corrupt: libjpeg says {warnings.strip().splitlines()[0]!r}")
    if image is None:
        raise ImageError(f"cannot decode {path}: not an image OpenCV reads (JPEG, PNG, BMP, TIFF, WebP, PPM)")
    return np.ascontiguousarray(image)


_stderr_lock = threading.Lock()


def _decode(cv2: Any, data: bytes) -> tuple[np.ndarray | None, str]:
    """``cv2.imdecode`` and what the codec wrote on stderr meanwhile (libjpeg's
    "Corrupt JPEG data: premature end of data segment" is only said there)."""
    if not data.startswith(b"\xff\xd8"):
        return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), ""
    with _stderr_lock, tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(captured.fileno(), 2)
            image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        return image, captured.read().decode(errors="replace")


def _opencv_reason(exc: Exception) -> str:
    """The sentence inside an OpenCV error ("...error: (-215:Assertion failed) X in function 'f'")."""
    text = str(exc).strip()
    return text.split(") ", 1)[-1].split(" in function")[0] if ") " in text else text


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the header of a PNG, JPEG, BMP, WebP or PNM file, without decoding; None otherwise."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    if data.startswith(b"BM") and len(data) >= 26:
        width, height = struct.unpack("<ii", data[18:26])
        return abs(width), abs(height)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
        if chunk == b"VP8 ":
            width, height = struct.unpack("<HH", data[26:30])
            return width & 0x3FFF, height & 0x3FFF
        if chunk == b"VP8L":
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        return None
    pnm = re.match(rb"P[1-7]\s+(?:#[^\n]*\s+)*(\d+)\s+(?:#[^\n]*\s+)*(\d+)", data[:512])
    return (int(pnm[1]), int(pnm[2])) if pnm else None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """The size in a JPEG's start-of-frame segment (the markers before it are skipped by their lengths)."""
    i = 2
    while i + 9 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # no length
            i += 2
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


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
            if not self.path.is_file():  # a FIFO or a device would block or never end
                raise ImageError(f"{path} is not a regular file: give a video file or a folder of images")
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
