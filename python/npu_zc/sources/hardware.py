"""Hardware decoding: FFmpeg decodes on a GPU (VA-API, QSV, DRM) and its DRM PRIME frames come in as DmaBufs.

The path, faithful to FFmpeg's API: ``av.open(url, hwaccel=HWAccel(kind,
device="/dev/dri/renderD128", allow_software_fallback=False,
is_hw_owned=True))`` keeps the decoded surfaces on the device; a frame in
the ``drm_prime`` pixel format carries, in ``data[0]``, an
``AVDRMFrameDescriptor`` (libavutil/hwcontext_drm.h): up to 4 objects (a
DMA-BUF fd and its size) and layers of planes (object index, offset, pitch).
:func:`drm_planes` reads that descriptor, imports each object as a
:class:`npu_zc.DmaBuf` (a dup of FFmpeg's fd) and hands the layout engine the
NV12 planes as views of those mappings, at their pitch: the GPU's buffer is
read in place.

Where there is no GPU (no ``/dev/dri/renderD*``) or the FFmpeg build lacks the
device type, :func:`hwaccel` refuses with one sentence
(:class:`npu_zc.HardwareDecodeError`).
"""

from __future__ import annotations

import ctypes
import glob
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import HardwareDecodeError, InvalidArgumentError
from .frame import DecodedFrame

KINDS = ("vaapi", "qsv", "drm")

AV_DRM_MAX_PLANES = 4
DRM_FORMAT_NV12 = int.from_bytes(b"NV12", "little")


class _Object(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_int), ("size", ctypes.c_size_t), ("format_modifier", ctypes.c_uint64)]


class _Plane(ctypes.Structure):
    _fields_ = [("object_index", ctypes.c_int), ("offset", ctypes.c_ssize_t), ("pitch", ctypes.c_ssize_t)]


class _Layer(ctypes.Structure):
    _fields_ = [("format", ctypes.c_uint32), ("nb_planes", ctypes.c_int), ("planes", _Plane * AV_DRM_MAX_PLANES)]


class AVDRMFrameDescriptor(ctypes.Structure):
    """libavutil/hwcontext_drm.h, field for field."""

    _fields_ = [
        ("nb_objects", ctypes.c_int),
        ("objects", _Object * AV_DRM_MAX_PLANES),
        ("nb_layers", ctypes.c_int),
        ("layers", _Layer * AV_DRM_MAX_PLANES),
    ]


def render_nodes() -> list[str]:
    return sorted(glob.glob("/dev/dri/renderD*"))


def hwaccel(kind: str, device: str | None = None) -> Any:
    """PyAV's ``HWAccel`` for decoding on ``kind``, frames kept on the device; refused where there is none."""
    import av
    from av.codec.hwaccel import HWAccel, hwdevices_available

    if kind not in KINDS:
        raise InvalidArgumentError(f"unknown hardware decoder {kind!r}: use one of {', '.join(KINDS)}")
    offered = hwdevices_available()
    if kind not in offered:
        raise HardwareDecodeError(
            f"hardware decoding through {kind} is not in this FFmpeg build (PyAV {av.__version__} offers "
            f"{', '.join(offered) or 'none'}): decode in software (leave hardware unset)"
        )
    nodes = [device] if device else render_nodes()
    if not nodes or not os.path.exists(nodes[0]):
        raise HardwareDecodeError(
            f"hardware decoding through {kind} needs a GPU render node (/dev/dri/renderD*) and this machine has none: "
            "decode in software (leave hardware unset)"
        )
    return HWAccel(kind, device=nodes[0], allow_software_fallback=False, is_hw_owned=True)


def is_hardware_frame(frame: Any) -> bool:
    return frame.format.name in ("drm_prime", "vaapi", "qsv")


@dataclass
class DrmPlanes:
    """NV12 planes of a DRM PRIME frame, in place in DmaBufs imported from FFmpeg's fds."""

    buffers: list[Any]
    y: np.ndarray
    uv: np.ndarray

    def close(self) -> None:
        del self.y, self.uv
        for buffer in self.buffers:
            buffer.close()


def drm_planes(descriptor: AVDRMFrameDescriptor, width: int, height: int) -> DrmPlanes:
    """The NV12 planes a DRM frame descriptor points at, as read-only views of imported DmaBufs.

    Every field is checked before use: object count, indices, offsets and pitches against the objects' sizes.
    """
    from ..buffers import DmaBuf

    if not 1 <= descriptor.nb_objects <= AV_DRM_MAX_PLANES or not 1 <= descriptor.nb_layers <= AV_DRM_MAX_PLANES:
        raise HardwareDecodeError(f"a DRM frame descriptor with {descriptor.nb_objects} objects and {descriptor.nb_layers} layers is malformed")
    planes = [(layer.format, layer.planes[i]) for layer in descriptor.layers[: descriptor.nb_layers]
              for i in range(min(layer.nb_planes, AV_DRM_MAX_PLANES))]  # fmt: skip
    if descriptor.nb_layers != 1 or planes[0][0] != DRM_FORMAT_NV12 or len(planes) != 2:
        fourcc = int(descriptor.layers[0].format).to_bytes(4, "little").decode("latin-1")
        raise HardwareDecodeError(f"the GPU decoded into {fourcc!r} with {len(planes)} planes; only NV12 (one layer, two planes) is read in place")
    buffers = [DmaBuf.from_fd(os.dup(descriptor.objects[i].fd), take_ownership=True)
               for i in range(descriptor.nb_objects)]  # fmt: skip
    try:  # every plane checked against its buffer before any is mapped
        shapes = list(zip(planes, (height, height // 2), (width, width)))
        for (_, plane), rows, row_bytes in shapes:
            if not 0 <= plane.object_index < descriptor.nb_objects:
                raise HardwareDecodeError(f"a DRM plane names object {plane.object_index} of {descriptor.nb_objects}")
            size = buffers[plane.object_index].size
            if plane.pitch < row_bytes or plane.offset < 0 or plane.offset + (rows - 1) * plane.pitch + row_bytes > size:
                raise HardwareDecodeError(f"a DRM plane at offset {plane.offset}, pitch {plane.pitch} does not fit a {size}-byte buffer")
    except BaseException:
        for buffer in buffers:
            buffer.close()
        raise
    views = []
    for (_, plane), rows, row_bytes in shapes:
        buffer = buffers[plane.object_index]
        flat = buffer.map("uint8", (buffer.size,), writable=False)
        views.append(np.lib.stride_tricks.as_strided(flat[plane.offset:], (rows, row_bytes), (plane.pitch, 1), writeable=False))
    return DrmPlanes(buffers, views[0], views[1])


def hardware_frame(frame: Any, index: int, decoded_ns: int, seconds: float | None) -> DecodedFrame:
    """A decoded DRM PRIME frame as a :class:`DecodedFrame` over imported DmaBufs (the GPU's memory, in place)."""
    if frame.format.name != "drm_prime":
        raise HardwareDecodeError(
            f"the decoder kept its frames as {frame.format.name} surfaces; map them to DRM PRIME "
            "(FFmpeg's hwmap) to read them in place"
        )
    if not frame.planes:  # PyAV gives a plane per component of the pixel format; DRM PRIME's data[0] is the descriptor
        raise HardwareDecodeError("this PyAV build does not expose a DRM PRIME frame's descriptor (data[0]): cannot read it in place")
    address = frame.planes[0].buffer_ptr
    descriptor = AVDRMFrameDescriptor.from_address(address)
    width, height = frame.width & ~1, frame.height & ~1
    planes = drm_planes(descriptor, width, height)
    from .frame import colour_of

    matrix, rng = colour_of(frame.colorspace, frame.color_range, frame.height, "nv12")
    return DecodedFrame(index, "NV12", (planes.y, planes.uv), width, height, decoded_ns, seconds, matrix, rng,
                        owner=frame, _release=planes.close)  # fmt: skip


__all__ = ["AVDRMFrameDescriptor", "DrmPlanes", "KINDS", "drm_planes", "hardware_frame", "hwaccel", "is_hardware_frame", "render_nodes"]
