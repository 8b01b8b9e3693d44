"""Exceptions of npu_zc.

Every error is an :class:`Error` and also the built-in a caller would expect,
so ``except MemoryError`` and ``except npu_zc.Error`` both work. Errors that
come from the kernel carry ``errno``.
"""

from __future__ import annotations

import errno as _errno


class Error(Exception):
    """Base class of every npu_zc error."""

    errno: int | None  # no class-level value: it would hide OSError's own slot

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class _OSErrorMixin(Error):
    # OSError subclasses keep OSError's (errno, strerror) shape, so that
    # str(e) reads "[Errno 13] cannot open ..." and e.errno/e.strerror are set.
    def __init__(self, message: str, errno: int | None = None) -> None:
        OSError.__init__(self, errno if errno is not None else self._default_errno, message)

    _default_errno = _errno.EIO

    def __str__(self) -> str:
        return OSError.__str__(self)


class HeapNotFoundError(_OSErrorMixin, FileNotFoundError):
    """No such heap, device or file."""

    _default_errno = _errno.ENOENT


class BufferPermissionError(_OSErrorMixin, PermissionError):
    """The kernel refused an operation on a buffer (EACCES, EPERM): e.g. mapping
    for writing an fd opened read-only or sealed against writes."""

    _default_errno = _errno.EACCES


class HeapPermissionError(BufferPermissionError):
    """The heap or device exists but this user may not open it."""


class BufferOSError(_OSErrorMixin, OSError):
    """Any other error the kernel reported."""


class OutOfMemoryError(Error, MemoryError):
    """The kernel (or the heap) could not provide the memory."""


class InvalidArgumentError(Error, ValueError):
    """A bad size, fd, range, dtype, shape or format."""


class StreamNotFoundError(InvalidArgumentError, KeyError):
    """No stream of that name or id in a :class:`npu_zc.Streams` (never added, or already removed)."""

    def __str__(self) -> str:  # KeyError's own would quote the sentence
        return str(self.args[0]) if self.args else ""


class StreamsRunError(Error, RuntimeError):
    """:meth:`npu_zc.Streams.run` called while it runs (from another thread or from its own callback), or again
    after its run ended (a :class:`npu_zc.Streams` runs once)."""


class AliasingError(InvalidArgumentError):
    """A call would write memory it also reads (or writes through another
    argument): its destination overlaps a source, whatever the arrays' bases
    are (two maps of one buffer, a memoryview, a DmaBuf). See docs/safety.md."""


class BufferInUseError(Error, BufferError):
    """The buffer still has live views or an open CPU-access bracket, or another
    call is writing (or reading) the memory a call would write (docs/safety.md)."""


class BufferClosedError(Error, ValueError):
    """The buffer was closed already (like I/O on a closed file)."""


class PoolExhaustedError(_OSErrorMixin, TimeoutError):
    """No free buffer in a pool within the time allowed."""

    _default_errno = _errno.ETIMEDOUT


class PeerTimeoutError(_OSErrorMixin, TimeoutError):
    """Nothing arrived from the other process within the time allowed.

    No byte of a message was consumed: the connection is intact and the
    call can be repeated."""

    _default_errno = _errno.ETIMEDOUT


class FenceTimeoutError(_OSErrorMixin, TimeoutError):
    """A device's fence on a DMA-BUF did not signal within the time allowed:
    the device (NPU, camera, GPU) is still writing or reading the buffer."""

    _default_errno = _errno.ETIMEDOUT


class PeerError(_OSErrorMixin, ConnectionError):
    """The other process closed the connection or sent something unexpected."""

    _default_errno = _errno.EPIPE


class CameraError(Error):
    """Base class of camera (V4L2 capture) errors; each is also a built-in."""


class CameraNotFoundError(_OSErrorMixin, CameraError, FileNotFoundError):
    """No such camera node (or nothing behind it)."""

    _default_errno = _errno.ENOENT


class CameraPermissionError(_OSErrorMixin, CameraError, PermissionError):
    """The camera node exists but this user may not open it (the ``video`` group)."""

    _default_errno = _errno.EACCES


class NotACameraError(CameraError, ValueError):
    """The node is not a V4L2 video capture device with streaming I/O."""


class CameraFormatError(CameraError, ValueError):
    """A pixel format, size, memory mode or buffer the camera cannot take; the
    message lists what it supports."""


class CameraBusyError(_OSErrorMixin, CameraError, OSError):
    """Another process (or file handle) is capturing from the camera."""

    _default_errno = _errno.EBUSY


class CameraTimeoutError(_OSErrorMixin, CameraError, TimeoutError):
    """No frame arrived within the timeout."""

    _default_errno = _errno.ETIMEDOUT


class FramesHeldError(CameraTimeoutError):
    """The application held every frame and released none within the timeout
    (``when_full="wait"``): release frames, use more buffers or ``when_full="drop"``."""


class CameraDisconnectedError(_OSErrorMixin, CameraError, OSError):
    """The camera went away mid-stream (unplugged, driver unbound)."""

    _default_errno = _errno.ENODEV


class CameraClosedError(CameraError, ValueError):
    """The camera was closed already."""


class CameraOSError(_OSErrorMixin, CameraError, OSError):
    """Any other error the kernel reported about a camera."""


class DeviceNotFoundError(Error, RuntimeError):
    """The requested inference device (NPU, GPU) is not present or not usable."""


class ModelError(Error, ValueError):
    """A model that cannot be read, or that npu_zc cannot serve."""


class UnsupportedQuantisationError(ModelError):
    """A quantised model input that one int8 scale and zero point cannot express: per-channel numbers,
    FakeQuantize levels other than 256, a range without 0 (a float input then stays float)."""


class SourceError(Error, ValueError):
    """A video file or network stream that cannot be opened or decoded (one stream's error; the others go on)."""


class SourceNotFoundError(SourceError, FileNotFoundError):
    """No file at that path."""


class SourceTimeoutError(_OSErrorMixin, SourceError, TimeoutError):
    """A network stream that did not answer (or stopped sending) within the time allowed."""

    _default_errno = _errno.ETIMEDOUT


class HardwareDecodeError(SourceError, RuntimeError):
    """Hardware decoding (VA-API, QSV, DRM PRIME) asked for on a machine or build that does not offer it."""


class DetectError(Error, ValueError):
    """Detector outputs that cannot be decoded: bad thresholds, quantisation,
    class names that disagree with the model, an element type it cannot read."""


class DetectLayoutError(DetectError):
    """Output shapes that fit no YOLO family (the message lists the shapes
    expected), or not the family or task asked for."""


__all__ = [
    "Error",
    "HeapNotFoundError",
    "HeapPermissionError",
    "BufferPermissionError",
    "BufferOSError",
    "OutOfMemoryError",
    "InvalidArgumentError",
    "StreamNotFoundError",
    "StreamsRunError",
    "BufferInUseError",
    "BufferClosedError",
    "PoolExhaustedError",
    "FenceTimeoutError",
    "PeerError",
    "PeerTimeoutError",
    "DeviceNotFoundError",
    "ModelError",
    "UnsupportedQuantisationError",
    "DetectError",
    "DetectLayoutError",
    "CameraError",
    "CameraNotFoundError",
    "CameraPermissionError",
    "NotACameraError",
    "CameraFormatError",
    "CameraBusyError",
    "CameraTimeoutError",
    "FramesHeldError",
    "CameraDisconnectedError",
    "CameraClosedError",
    "CameraOSError",
    "SourceError",
    "SourceNotFoundError",
    "SourceTimeoutError",
    "HardwareDecodeError",
]
