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
from ..capture import CAMERA_SOURCE_FORMATS, Camera, Frame
from ..errors import CameraFormatError
from ..sources.image import opencv
from .pipeline import Pipeline
from .preprocess import PreprocessSpec, Preprocessor
from .single_stream import FrameResult, StreamReport
from .timing import Timings, progress_bar

CAMERA_STAGES = ("capture", "preprocess", "infer", "postprocess")
"""``capture``: waiting for the driver's next frame (DQBUF); the rest as for file streams."""

# Camera formats OpenCV converts to BGR (cv2.cvtColor codes by name): the way in for those the layout engine does not
# read in place (CAMERA_SOURCE_FORMATS), e.g. YVYU.
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




class CameraPreprocessor:
    """A camera frame (in its driver-written buffer) into the model's input buffer.

    One pass where the layout engine knows the camera's format (YUYV, UYVY,
    I420, NV12, NV21, 10-bit P010, RGB3, BGR3, GREY): a resizing :class:`npu_zc.layout.Converter`
    reads the part of the frame the model sees straight from the driver's
    buffer, resizes, converts the colour, normalises and writes the model's
    layout. Other formats OpenCV knows are first decoded to BGR into a buffer
    allocated once, then go through the ordinary :class:`Preprocessor`.
    Nothing is allocated or copied per frame. ``colour``: the (matrix,
    range) of YUV frames, as :attr:`npu_zc.Camera.colour` reads them from the
    negotiated V4L2 format (None: BT.601 limited range, OpenCV's).
    """

    def __init__(
        self,
        spec: PreprocessSpec,
        width: int,
        height: int,
        fmt: str,
        *,
        heap: str = "auto",
        colour: tuple[str, str] | None = None,
    ) -> None:
        from ..buffers import alloc

        self.format = fmt
        self.width, self.height = width, height
        self.transform: layout.Transform | None = None
        """Where the last call read the frame and wrote the input (maps detections back)."""
        self._one_pass: Any = None
        self._buffer: Any = None
        self.bgr: np.ndarray | None = None
        self._preprocess: Preprocessor | None = None
        self._convert: Callable[[np.ndarray], object] = lambda src: None
        engine_name = CAMERA_SOURCE_FORMATS.get(fmt)
        matrix, range_ = colour or ("bt601", "limited")
        if engine_name is not None:
            self._one_pass = spec.converter(engine_name, width, height, matrix=matrix, range=range_)
            return
        if fmt not in _OPENCV_CODES:
            supported = sorted(set(_OPENCV_CODES) | set(CAMERA_SOURCE_FORMATS))
            raise CameraFormatError(f"the pipeline cannot convert {fmt} camera frames; capture in one of: {', '.join(supported)}")
        self._buffer = alloc(height * width * 3, heap)
        self.bgr = self._buffer.map("uint8", (height, width, 3))
        self._preprocess = Preprocessor(spec, heap=heap)
        cvt, code = opencv().cvtColor, getattr(opencv(), _OPENCV_CODES[fmt])
        self._convert = lambda src: cvt(src, code, dst=self.bgr)

    def __call__(self, frame: Frame, dst: np.ndarray) -> Any:
        """Writes ``dst`` from ``frame``; returns the conversion's transform."""
        src = frame.array()
        with frame.buffer.cpu_access("read"):
            if self._one_pass is not None:
                self._one_pass(src, dst)
                self.transform = self._one_pass.transform
                return self.transform
            self._convert(src)
        del src  # the view keeps the frame from the driver
        assert self._preprocess is not None and self.bgr is not None
        self._preprocess(self.bgr, dst)
        self.transform = self._preprocess.transform
        return self.transform

    def close(self) -> None:
        self._convert = lambda src: None  # its closure may hold a view of the BGR buffer
        self._one_pass = None
        self.bgr = None
        if self._buffer is not None:
            self._buffer.close()
            self._buffer = None
        if self._preprocess is not None:
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
    preprocess = CameraPreprocessor(
        pipeline.spec, camera.width, camera.height, camera.format, heap=pipeline.heap, colour=getattr(camera, "colour", None)
    )
    bar = progress_bar(frames or 0, f"{pipeline.model_name} ({pipeline.mode})", progress)
    clock = time.perf_counter_ns
    first_dropped = camera.dropped
    started = time.perf_counter()
    count = corrupt = 0
    try:
        while frames is None or count < frames:
            waited = clock()
            try:
                frame = camera.read()
            except StopIteration:
                break
            captured = clock()
            if frame.corrupt:  # the driver says so (V4L2_BUF_FLAG_ERROR): never read, counted as dropped
                frame.release()
                corrupt += 1
                continue
            with frame:
                prediction, pre, infer, post = pipeline.step_with(
                    lambda dst: preprocess(frame, dst), frame_size=(camera.width, camera.height), release=frame.release
                )
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
        dropped=camera.dropped - first_dropped + corrupt,
        seconds=seconds,
        stages=timings.stats(),
        results=results,
    )


__all__ = ["CAMERA_STAGES", "CameraPreprocessor", "run_camera"]
