"""Camera streams: frames from a V4L2 camera through a pipeline, in order.

The driver writes each frame into a DMA-BUF (ours in ``dmabuf`` memory, its
own exported in ``mmap`` memory); the preprocess reads that buffer in place
and writes the model's input buffer; the model reads that and writes its
output buffers, which the postprocess reads in place. No byte of the frame or
of the result is copied on the way: ``tests/memcount/camera_loop.py`` counts
the memcpy/memmove bytes per frame from DQBUF to the result.

The frame goes back to the driver as soon as the model input is written, so
the camera keeps capturing while the model infers.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from .. import layout
from ..capture import Camera, Frame
from ..errors import CameraFormatError
from .image import opencv
from .pipeline import Pipeline
from .preprocess import PreprocessSpec, Preprocessor, _three
from .stream import FrameResult, StreamReport, progress_bar
from .timing import Timings

CAMERA_STAGES = ("capture", "preprocess", "infer", "postprocess")
"""``capture``: waiting for the driver's next frame (DQBUF); the rest as for file streams."""

# Camera formats the layout engine converts to BGR itself (SIMD, one pass),
# and those OpenCV converts (cv2.cvtColor codes by name).
_OPENCV_CODES = {
    "YUYV": "COLOR_YUV2BGR_YUYV",
    "UYVY": "COLOR_YUV2BGR_UYVY",
    "YVYU": "COLOR_YUV2BGR_YVYU",
    "I420": "COLOR_YUV2BGR_I420",
    "NV12": "COLOR_YUV2BGR_NV12",
    "NV21": "COLOR_YUV2BGR_NV21",
    "RGB3": "COLOR_RGB2BGR",
    "GREY": "COLOR_GRAY2BGR",
}


# V4L2 names of the camera formats whose layout-engine names differ.
_V4L2_TO_LAYOUT = {"BGR3": "BGR", "RGB3": "RGB", "GREY": "GRAY"}


class CameraPreprocessor:
    """A camera frame (in its driver-written buffer) into the model's input buffer.

    The frame is read in place. When the model sees the whole frame at the
    camera's size, the layout engine converts it into the model input in one
    pass. Otherwise a BGR24 frame goes straight to the ordinary
    :class:`Preprocessor` (resize, then the model's layout); other formats are
    first converted to BGR at the camera's size into a buffer allocated once,
    by the layout engine where it knows the format, else by OpenCV. Nothing is
    allocated or copied per frame.
    """

    def __init__(self, spec: PreprocessSpec, width: int, height: int, fmt: str, *, heap: str = "auto") -> None:
        from ..buffers import alloc

        self.format = fmt
        self.width, self.height = width, height
        self._preprocess = Preprocessor(spec, heap=heap)
        self._direct = fmt == "BGR3"
        engine_name = _V4L2_TO_LAYOUT.get(fmt, fmt)
        # One pass, from the driver's buffer straight into the model input, when the
        # model sees the whole frame at the camera's size: no resize, no BGR in between.
        whole = spec.region(height, width) == (slice(0, height), slice(0, width))
        self._one_pass: Any = None
        if whole and (spec.width, spec.height) == (width, height) and engine_name in layout.SOURCE_FORMATS:
            self._one_pass = layout.Converter(
                engine_name, spec.format, width, height, mean=_three(spec.mean), scale=_three(spec.scale), threads=1
            )
            self._direct = False
        self._buffer = None if (self._direct or self._one_pass is not None) else alloc(height * width * 3, heap)
        self.bgr: np.ndarray | None = None if self._buffer is None else self._buffer.map("uint8", (height, width, 3))
        self._convert: Callable[[np.ndarray], object] = lambda src: None
        if self._direct or self._one_pass is not None:
            pass
        elif engine_name in set(layout.SOURCE_FORMATS) - {"BGR"}:
            converter, bgr = layout.Converter(engine_name, "BGR", width, height, threads=1), self.bgr
            assert bgr is not None
            self._convert = lambda src: converter(src, bgr)
        elif fmt in _OPENCV_CODES:
            cvt, code = opencv().cvtColor, getattr(opencv(), _OPENCV_CODES[fmt])
            self._convert = lambda src: cvt(src, code, dst=self.bgr)
        else:
            self.close()
            supported = sorted(set(_OPENCV_CODES) | {"BGR3"} | {k for k, v in _V4L2_TO_LAYOUT.items() if v in layout.SOURCE_FORMATS})
            raise CameraFormatError(f"the pipeline cannot convert {fmt} camera frames; capture in one of: {', '.join(supported)}")

    def __call__(self, frame: Frame, dst: np.ndarray) -> None:
        src = frame.array()
        with frame.buffer.cpu_access("read"):
            if self._one_pass is not None:
                self._one_pass(src, dst)
                return
            if self._direct:
                self._preprocess(src, dst)
            else:
                self._convert(src)
        del src  # the view keeps the frame from the driver
        if not self._direct:
            assert self.bgr is not None
            self._preprocess(self.bgr, dst)

    def close(self) -> None:
        self._convert = lambda src: None  # its closure may hold a view of the BGR buffer
        self._one_pass = None
        self.bgr = None
        if self._buffer is not None:
            self._buffer.close()
        self._preprocess.close()


def run_camera(
    pipeline: Pipeline,
    camera: Camera,
    *,
    frames: int | None = None,
    progress: bool | None = None,
    on_result: Callable[[FrameResult], None] | None = None,
    keep_results: bool = True,
) -> StreamReport:
    """Run ``frames`` camera frames (None: until the camera closes) through ``pipeline``:
    the camera counterpart of :func:`.stream.run_stream`, with the same report."""
    timings = Timings(CAMERA_STAGES)
    results: list[FrameResult] = []
    preprocess = CameraPreprocessor(pipeline.spec, camera.width, camera.height, camera.format, heap=pipeline.heap)
    bar = progress_bar(frames or 0, f"{pipeline.model_name} ({pipeline.mode})", progress)
    clock = time.perf_counter_ns
    first_dropped = camera.dropped
    started = time.perf_counter()
    count = 0
    try:
        while frames is None or count < frames:
            waited = clock()
            try:
                frame = camera.read()
            except StopIteration:
                break
            captured = clock()
            with frame:
                prediction, pre, infer, post = pipeline.step_with(lambda dst: preprocess(frame, dst), release=frame.release)
            timings.add("capture", captured - waited)
            timings.add("preprocess", pre)
            timings.add("infer", infer)
            timings.add("postprocess", post)
            result = FrameResult(frame.sequence, f"frame {frame.sequence}", prediction)
            if keep_results:
                results.append(result)
            if on_result is not None:
                on_result(result)
            bar.update(1)
            count += 1
    finally:
        bar.close()
        preprocess.close()
    seconds = time.perf_counter() - started
    return StreamReport(
        source=f"camera {camera.device} ({camera.card}, {camera.width}x{camera.height} {camera.format}, "
        f"{camera.memory} {camera.heap})",
        model=pipeline.model_name,
        device=pipeline.device,
        mode=pipeline.mode,
        processes=1,
        frames=count,
        dropped=camera.dropped - first_dropped,
        seconds=seconds,
        stages=timings.stats(),
        results=results,
    )


__all__ = ["CAMERA_STAGES", "CameraPreprocessor", "run_camera"]
