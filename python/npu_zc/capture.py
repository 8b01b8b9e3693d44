"""Cameras: V4L2 capture straight into DMA-BUFs, with no copy.

``Camera(device, width, height, format)`` opens a capture node (``/dev/videoN``
or its number), sets the format and starts streaming; iterate over it (or call
``read()``) to get :class:`Frame` objects. Each frame is the DMA-BUF the driver
wrote, with its format, geometry, row pitch (``bytesperline``), sequence number
and timestamp; ``camera.colour`` is the colour standard of YUV frames
(``("bt709", "limited")``...) from the negotiated format, as
``npu_zc.layout.convert(..., matrix=, range=)`` takes it. Nothing is copied: ``npu_zc.convert(frame.array(), ...)`` or a
``Pipeline`` reads the driver's buffer in place. ``frame.array()`` is shaped for
the format at the driver's row pitch (``(H * 3 / 2, W)`` uint16 for 10-bit
``P010``, the layout engine's P010 source), checked first: a frame too short
for its rows is a :class:`CameraFormatError`. ``CameraFormat.source_format``
names the layout engine's source format for each camera format (None: not
read in place).

Memory (``memory=``):

* ``"dmabuf"``: the driver writes into our buffers (a dma-heap or udmabuf, or
  the buffers of a ``BufferPool`` given as ``pool=``), imported with
  ``V4L2_MEMORY_DMABUF``; each buffer is checked against the format's
  ``sizeimage`` first.
* ``"mmap"``: the driver allocates; each buffer is exported once with
  ``VIDIOC_EXPBUF`` and shows up as a :class:`DmaBuf` whose ``kind`` names the
  driver (``"v4l2:uvcvideo"``).
* ``"auto"`` (default): ``dmabuf`` where a dma-heap or udmabuf is usable,
  ``mmap`` otherwise (or when the driver refuses to import the buffers).

CPU reads of a frame belong inside ``frame.buffer.cpu_access("read")`` (the
DMA-BUF sync bracket: a no-op on coherent machines, cache maintenance on the
others); the pipeline's camera preprocess does so.

Frames and the driver: a frame's buffer is the application's until the frame is
released (``frame.release()``, ``with frame:``, or when the frame and every
view of it are gone); the driver cannot write it meanwhile. A view made by
``frame.array()`` keeps its frame held, so the driver never overwrites memory
that Python is reading.

When the application holds every frame the driver has nothing to write into.
``when_full`` says what ``read()`` does then, never a silent stall:

* ``"wait"`` (default): wait up to ``timeout`` for another thread to release a
  frame, then raise :class:`FramesHeldError` (a ``TimeoutError``) saying so.
* ``"drop"``: take the oldest held frame back (its ``held`` becomes False and a
  later capture overwrites its memory) and go on; ``camera.reclaimed`` counts it.

``close()`` (or leaving ``with Camera(...)``) stops the stream, takes every
buffer back from the driver and closes the device at once, even while frames
are held: those frames stay readable (the driver no longer writes them) and
their memory goes with the last frame or view. Frames the driver dropped show
up as gaps in ``frame.sequence`` (``frame.dropped_before``, ``camera.dropped``).
"""

from __future__ import annotations

from ._core import CAMERA_SOURCE_FORMATS, Camera, CameraFormat, CameraInfo, Frame, cameras

# CAMERA_SOURCE_FORMATS: the camera formats (``Camera.format``'s names) the layout engine reads in place, each with
# the engine's name for it ({"RGB3": "RGB", "GREY": "GRAY", "NV12": "NV12", ...}); the core's one table, which
# ``CameraFormat.source_format`` also reads.
__all__ = ["CAMERA_SOURCE_FORMATS", "Camera", "CameraFormat", "CameraInfo", "Frame", "cameras", "describe_cameras"]


def describe_cameras(found: list[CameraInfo] | None = None) -> list[str]:
    """One line per capture node and per format: what ``npu-zc info`` prints."""
    lines: list[str] = []
    for cam in cameras() if found is None else found:
        api = "multi-planar" if cam.multiplanar else "single-planar"
        lines.append(f"{cam.path}: {cam.card} ({cam.driver}, {api})")
        for f in cam.formats:
            if f.size_range is not None:
                (w0, h0), (w1, h1), (sw, sh) = f.size_range
                sizes = f"{w0}x{h0} to {w1}x{h1} step {sw}x{sh}"
            else:
                sizes = " ".join(f"{w}x{h}" for w, h in f.sizes) or "sizes not listed"
            extra = " (compressed: not convertible)" if f.compressed else ""
            extra += f" (layout engine: {f.source_format})" if f.source_format else ""
            lines.append(f"  {f.fourcc:<5} {f.description}{extra}: {sizes}")
    return lines
