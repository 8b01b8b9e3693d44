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


class BufferInUseError(Error, BufferError):
    """The buffer still has live views or an open CPU-access bracket."""


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


class DeviceNotFoundError(Error, RuntimeError):
    """The requested inference device (NPU, GPU) is not present or not usable."""


class ModelError(Error, ValueError):
    """A model that cannot be read, or that npu_zc cannot serve."""


__all__ = [
    "Error",
    "HeapNotFoundError",
    "HeapPermissionError",
    "BufferPermissionError",
    "BufferOSError",
    "OutOfMemoryError",
    "InvalidArgumentError",
    "BufferInUseError",
    "BufferClosedError",
    "PoolExhaustedError",
    "FenceTimeoutError",
    "PeerError",
    "PeerTimeoutError",
    "DeviceNotFoundError",
    "ModelError",
]
