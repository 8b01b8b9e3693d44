"""A test driver for vgem, the kernel's virtual GEM device (CONFIG_DRM_VGEM).

vgem is a DRM device with no hardware behind it. It can import DMA-BUFs
(PRIME: the import attaches the buffer to a device), export its own buffers
as DMA-BUFs, and attach fences to a buffer that stay unsignalled until user
space signals them (or until 10 s pass: VGEM_FENCE_TIMEOUT in vgem_fence.c).
That is what a camera, GPU or NPU does to a buffer it is writing, so the tests
use it to play "the device".

This is test tooling, not library: it drives vgem with fcntl.ioctl. The ioctl
numbers and struct layouts were computed (not guessed) with a C program from
libdrm-dev's <libdrm/drm.h> and <libdrm/drm_mode.h> (2.4.114) and the
kernel's include/uapi/drm/vgem_drm.h, for x86-64 and every LP64 target:

    DRM_IOCTL_VERSION            = 0xC0406400  struct drm_version (64 bytes)
    DRM_IOCTL_GEM_CLOSE          = 0x40086409  struct drm_gem_close {u32 handle, pad}
    DRM_IOCTL_PRIME_HANDLE_TO_FD = 0xC00C642D  struct drm_prime_handle {u32 handle, flags; s32 fd}
    DRM_IOCTL_PRIME_FD_TO_HANDLE = 0xC00C642E  (same struct)
    DRM_IOCTL_MODE_CREATE_DUMB   = 0xC02064B2  struct drm_mode_create_dumb {u32 height, width, bpp,
                                               flags, handle, pitch; u64 size}
    DRM_IOCTL_MODE_MAP_DUMB      = 0xC01064B3  struct drm_mode_map_dumb {u32 handle, pad; u64 offset}
    DRM_IOCTL_VGEM_FENCE_ATTACH  = 0xC0106441  struct drm_vgem_fence_attach {u32 handle, flags,
                                               out_fence, pad}
    DRM_IOCTL_VGEM_FENCE_SIGNAL  = 0x40086442  struct drm_vgem_fence_signal {u32 fence, flags}
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import struct
from pathlib import Path

DRM_IOCTL_VERSION = 0xC0406400
DRM_IOCTL_GEM_CLOSE = 0x40086409
DRM_IOCTL_PRIME_HANDLE_TO_FD = 0xC00C642D
DRM_IOCTL_PRIME_FD_TO_HANDLE = 0xC00C642E
DRM_IOCTL_MODE_CREATE_DUMB = 0xC02064B2
DRM_IOCTL_MODE_MAP_DUMB = 0xC01064B3
DRM_IOCTL_VGEM_FENCE_ATTACH = 0xC0106441
DRM_IOCTL_VGEM_FENCE_SIGNAL = 0x40086442

VGEM_FENCE_WRITE = 0x1
DRM_CLOEXEC = os.O_CLOEXEC
DRM_RDWR = os.O_RDWR

# struct drm_version: three ints, then (size_t len, char *buf) for name, date and desc.
_VERSION = struct.Struct("iii4xQQQQQQ")
_PRIME = struct.Struct("IIi")
_CREATE_DUMB = struct.Struct("IIIIIIQ")
_MAP_DUMB = struct.Struct("IIQ")
_FENCE_ATTACH = struct.Struct("IIII")
_FENCE_SIGNAL = struct.Struct("II")
_GEM_CLOSE = struct.Struct("II")
assert (_VERSION.size, _PRIME.size, _CREATE_DUMB.size, _MAP_DUMB.size) == (64, 12, 32, 16)


def driver_name(fd: int) -> str:
    """DRM_IOCTL_VERSION's driver name ("vgem" for vgem)."""
    name = ctypes.create_string_buffer(64)
    arg = bytearray(_VERSION.pack(0, 0, 0, len(name), ctypes.addressof(name), 0, 0, 0, 0))
    fcntl.ioctl(fd, DRM_IOCTL_VERSION, arg)
    name_len = _VERSION.unpack(arg)[3]
    return name.raw[: min(name_len, len(name))].decode()


def find_card() -> Path | None:
    """The /dev/dri/card* node whose driver is vgem, or None."""
    for node in sorted(Path("/dev/dri").glob("card*")):
        try:
            fd = os.open(node, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if driver_name(fd) == "vgem":
                return node
        except OSError:
            pass
        finally:
            os.close(fd)
    return None


class Vgem:
    """An open vgem device. Closing it frees its handles and signals its pending fences."""

    def __init__(self, node: Path) -> None:
        self.fd = os.open(node, os.O_RDWR | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Vgem:
        return self

    def __exit__(self, *_args: object) -> None:
        self.close()

    def create_dumb(self, size: int) -> tuple[int, int]:
        """A vgem buffer of at least ``size`` bytes: ``(handle, size)``."""
        width = 1024  # pixels of 32 bits: 4 KiB rows
        height = -(-size // (width * 4))
        arg = bytearray(_CREATE_DUMB.pack(height, width, 32, 0, 0, 0, 0))
        fcntl.ioctl(self.fd, DRM_IOCTL_MODE_CREATE_DUMB, arg)
        _, _, _, _, handle, _, real_size = _CREATE_DUMB.unpack(arg)
        return handle, real_size

    def map_dumb(self, handle: int, size: int) -> mmap.mmap:
        """vgem's own CPU mapping of one of its buffers (mmap of the card fd)."""
        arg = bytearray(_MAP_DUMB.pack(handle, 0, 0))
        fcntl.ioctl(self.fd, DRM_IOCTL_MODE_MAP_DUMB, arg)
        offset = _MAP_DUMB.unpack(arg)[2]
        return mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)

    def export(self, handle: int) -> int:
        """PRIME export: a new DMA-BUF fd (CLOEXEC, read-write) for a vgem buffer; the caller owns it."""
        arg = bytearray(_PRIME.pack(handle, DRM_CLOEXEC | DRM_RDWR, -1))
        fcntl.ioctl(self.fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, arg)
        return int(_PRIME.unpack(arg)[2])

    def import_fd(self, dmabuf_fd: int) -> int:
        """PRIME import: attaches a DMA-BUF to the device; returns vgem's handle for it."""
        arg = bytearray(_PRIME.pack(0, 0, dmabuf_fd))
        fcntl.ioctl(self.fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, arg)
        return int(_PRIME.unpack(arg)[0])

    def close_handle(self, handle: int) -> None:
        fcntl.ioctl(self.fd, DRM_IOCTL_GEM_CLOSE, _GEM_CLOSE.pack(handle, 0))

    def attach_fence(self, handle: int, *, write: bool = True) -> int:
        """An unsignalled fence on the buffer (a write fence: the device writes it; else a read fence)."""
        arg = bytearray(_FENCE_ATTACH.pack(handle, VGEM_FENCE_WRITE if write else 0, 0, 0))
        fcntl.ioctl(self.fd, DRM_IOCTL_VGEM_FENCE_ATTACH, arg)
        return int(_FENCE_ATTACH.unpack(arg)[2])

    def signal(self, fence: int) -> None:
        """The device is done: the fence signals (ETIMEDOUT if vgem's 10 s timer beat us to it)."""
        fcntl.ioctl(self.fd, DRM_IOCTL_VGEM_FENCE_SIGNAL, _FENCE_SIGNAL.pack(fence, 0))
