"""One stream: every frame of a video or a folder of images through a pipeline, in order.

Zero-copy mode runs the frames through the runtime's in-order async queue:
while the device infers one frame, the next is decoded and preprocessed into
another pooled input buffer. Nothing is dropped unless ``drop=True`` (the
behaviour of a live source: a frame that finds every buffer in flight is
skipped and counted). Copy mode processes the frames one after the other.
"""

from __future__ import annotations

import dataclasses

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ..errors import PoolExhaustedError
from ..sources.image import FrameSource
from .pipeline import Pipeline
from .postprocess import Prediction, for_frame
from .timing import FENCE_TIMEOUT_S, StageStats, Timings, progress_bar

STREAM_STAGES = ("decode", "preprocess", "infer", "postprocess")


@dataclass(frozen=True)
class FrameResult:
    """The prediction for one frame of a stream."""

    sequence: int
    """The frame's position in the source (0-based), whether or not frames were dropped before it."""
    name: str
    prediction: Prediction

    def to_dict(self) -> dict[str, Any]:
        if not isinstance(self.prediction, list):  # a detector's Detections
            return {"sequence": self.sequence, "name": self.name, "detections": self.prediction.to_dict()}
        return {"sequence": self.sequence, "name": self.name, "labels": [p.to_dict() for p in self.prediction]}


@dataclass
class StreamReport:
    """A finished stream: how many frames, how fast, per-stage times, and the results in order."""

    source: str
    model: str
    device: str
    mode: str
    processes: int
    frames: int
    dropped: int
    seconds: float
    stages: dict[str, StageStats]
    results: list[FrameResult] = field(default_factory=list)

    @property
    def fps(self) -> float:
        """Frames processed per second of wall time, decode included."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self, *, results: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "model": self.model,
            "device": self.device,
            "mode": self.mode,
            "processes": self.processes,
            "frames": self.frames,
            "dropped": self.dropped,
            "seconds": self.seconds,
            "fps": self.fps,
            "stages_ms": {name: s.to_dict() for name, s in self.stages.items()},
        }
        if results:
            out["results"] = [r.to_dict() for r in self.results]
        return out


def timed_frames(source: FrameSource, timings: Timings) -> Iterator[tuple[int, str, np.ndarray, int]]:
    """``(sequence, name, image, decode ns)`` for each frame, timing the decode."""
    frames = iter(source)
    sequence = 0
    while True:
        started = time.perf_counter_ns()
        try:
            name, image = next(frames)
        except StopIteration:
            return
        decoded = time.perf_counter_ns() - started
        timings.add("decode", decoded)
        yield sequence, name, image, decoded
        sequence += 1


def run_stream(
    pipeline: Pipeline,
    source: FrameSource,
    *,
    depth: int | None = None,
    drop: bool = False,
    progress: bool | None = None,
    on_result: Callable[[FrameResult], None] | None = None,
    keep_results: bool = True,
    tracker: Any = None,
) -> StreamReport:
    """Run every frame of ``source`` through ``pipeline``; results in source order.


    ``depth``: requests in flight (zero-copy; default: the device's optimal
    number, at least 2 so that preprocessing overlaps inference).
    ``on_result`` is called for each result, in order. ``tracker``: a
    :class:`npu_zc.Tracker` that gives a detector's results track ids, frame
    after frame (this stream's own: one tracker per stream).
    """
    timings = Timings(STREAM_STAGES)
    results: list[FrameResult] = []

    def deliver(result: FrameResult) -> None:
        if tracker is not None and not isinstance(result.prediction, list):
            result = dataclasses.replace(result, prediction=tracker.update(result.prediction))
        if keep_results:
            results.append(result)
        if on_result is not None:
            on_result(result)
        bar.update(1)

    bar = progress_bar(len(source), f"{pipeline.model_name} ({pipeline.mode})", progress)
    started = time.perf_counter()
    dropped = 0
    try:
        if pipeline.zero_copy and pipeline.hint == "throughput" and not drop:
            _throughput(pipeline, source, timings, deliver, depth)
        elif pipeline.zero_copy:
            dropped = _zero_copy(pipeline, source, timings, deliver, depth, drop)
        else:
            _copy(pipeline, source, timings, deliver)
    finally:
        bar.close()
    seconds = time.perf_counter() - started
    return StreamReport(
        source=str(source.path),
        model=pipeline.model_name,
        device=pipeline.device,
        mode=pipeline.mode,
        processes=1,
        frames=len(timings.samples["postprocess"]),
        dropped=dropped,
        seconds=seconds,
        stages=timings.stats(),
        results=results,
    )


def _zero_copy(
    pipeline: Pipeline,
    source: FrameSource,
    timings: Timings,
    deliver: Callable[[FrameResult], None],
    depth: int | None,
    drop: bool,
) -> int:
    session = pipeline.session
    depth = depth or max(2, session.optimal_requests)
    dropped = 0
    with session.queue(depth, heap=pipeline.heap) as queue:

        def take(wait: bool) -> bool:
            result = queue.get(timeout=None if wait else 0)
            if result is None:
                return False
            sequence, name, transform, frame_size = result.userdata
            started = time.perf_counter_ns()
            with result, contextlib.ExitStack() as access:  # the output buffers go back to the pool once read
                for buf in result.output_buffers:
                    access.enter_context(buf.cpu_access("read", timeout=FENCE_TIMEOUT_S))
                input_size = (pipeline.spec.width, pipeline.spec.height)
                prediction = for_frame(pipeline.postprocess, result.outputs, transform, input_size, frame_size)
            timings.add("postprocess", time.perf_counter_ns() - started)
            timings.add("infer", int(result.latency_ms * 1e6))
            deliver(FrameResult(sequence, name, prediction))
            return True

        for sequence, name, image, _ in timed_frames(source, timings):
            if drop:
                while take(False):
                    pass
                try:
                    frame = queue.acquire(timeout=0)
                except PoolExhaustedError:  # every buffer in flight: a live source moves on
                    dropped += 1
                    continue
            else:
                while queue.pending >= depth:
                    take(True)
                frame = queue.acquire()
            started = time.perf_counter_ns()
            with frame.input_buffers[0].cpu_access("write", timeout=FENCE_TIMEOUT_S):
                pipeline.preprocess(image, frame.inputs[0])
            timings.add("preprocess", time.perf_counter_ns() - started)
            queue.submit(frame, (sequence, name, pipeline.preprocess.transform, (image.shape[1], image.shape[0])))
        while queue.pending:
            take(True)
    return dropped


def _throughput(
    pipeline: Pipeline, source: FrameSource, timings: Timings, deliver: Callable[[FrameResult], None], depth: int | None
) -> None:
    """Decode here, preprocess in worker threads, the optimal number of requests in flight; results in order."""
    names: dict[int, str] = {}
    lock = threading.Lock()

    def images() -> Iterator[np.ndarray]:
        for sequence, name, image, _ in timed_frames(source, timings):
            with lock:
                names[sequence] = name
            yield image

    def on_result(sequence: int, prediction: Prediction) -> None:
        with lock:
            name = names.pop(sequence)
        deliver(FrameResult(sequence, name, prediction))

    report = pipeline.run_throughput(images(), on_result, requests=depth)
    for stage in ("preprocess", "infer", "postprocess"):
        timings.samples[stage].extend(report.timings.samples[stage])


def _copy(pipeline: Pipeline, source: FrameSource, timings: Timings, deliver: Callable[[FrameResult], None]) -> None:
    for sequence, name, image, _ in timed_frames(source, timings):
        prediction, pre, infer, post = pipeline.step(image)
        timings.add("preprocess", pre)
        timings.add("infer", infer)
        timings.add("postprocess", post)
        deliver(FrameResult(sequence, name, prediction))
