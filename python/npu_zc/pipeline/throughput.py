"""Throughput mode: many frames in flight, so that every core the device offers is busy.

With the THROUGHPUT hint the CPU plugin splits the machine into several
streams and asks for OPTIMAL_NUMBER_OF_INFER_REQUESTS requests in flight (16
on a 16-core Xeon). :class:`ThroughputRunner` keeps them all busy:

* an :class:`~npu_zc.runtime.AsyncQueue` of twice that many requests (one
  queued behind each running one, see :func:`default_requests`), over pooled
  buffers bound to the model once (zero copy, as in latency mode), with one
  extra set of buffers per preprocessing worker (and one for the result being
  read), so that frames N+1... are written while the requests infer frames
  N-k...N;
* ``workers`` threads preprocess (the layout engine, from the frame to the
  input in one call, with the GIL released), each with its own
  :class:`.Preprocessor`; a feeding
  thread only hands frames out and submits them, in order (the calling thread
  waits, so that Ctrl-C stops the run cleanly);
* the queue's delivery thread waits for each request (GIL released),
  postprocesses in place and hands the result on, in frame order.

Nothing is allocated per frame and no buffer is rewritten while a request
reads it: a frame's buffers come from the queue's pools, which never hand out
a buffer in flight.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from ..errors import InvalidArgumentError
from .postprocess import Postprocessor, Prediction, to_frame
from .preprocess import PreprocessSpec, Preprocessor
from .timing import FENCE_TIMEOUT_S, StageStats, Timings

THROUGHPUT_STAGES = ("preprocess", "infer", "postprocess", "total")
"""Per frame; ``total`` is their sum (a frame's own time: with frames in flight, the FPS is not 1000 / total)."""


def default_workers() -> int:
    """Preprocessing threads: one per 8 cores (at least 1, at most 4).

    A 1080p frame's crop-resize-convert costs a fraction of a millisecond of
    one core: at 2000 FPS that is well under one core, and every other core
    is the model's.
    """
    return max(1, min(4, (os.cpu_count() or 1) // 8))


def default_requests(optimal: int) -> int:
    """Requests in flight: twice the plugin's optimal number (at least 2).

    Results are taken in submission order, so a request that finishes before an
    older one waits to be reused; with only the optimal number, its stream would
    idle meanwhile. A second request per stream, queued behind the first, keeps
    every stream busy (on the 2-core development machine: 80% of benchmark_app's
    FPS with 2 requests, 95% with 8).
    """
    return max(2, 2 * optimal)


@dataclass
class ThroughputReport:
    """A finished throughput run: frames, wall and CPU time, per-stage times per frame."""

    frames: int
    seconds: float
    cpu_seconds: float
    """User + system time of the whole process (every thread, OpenVINO's included) during the run."""
    requests: int
    buffers: int
    workers: int
    stages: dict[str, StageStats]
    predictions: list[Prediction] = field(default_factory=list)
    """In frame order, when kept."""
    timings: Timings = field(default_factory=lambda: Timings(THROUGHPUT_STAGES), repr=False)
    """The per-frame samples behind :attr:`stages`."""

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_ms_per_frame(self) -> float:
        return 1000 * self.cpu_seconds / self.frames if self.frames else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "seconds": self.seconds,
            "fps": self.fps,
            "cpu_seconds": self.cpu_seconds,
            "cpu_ms_per_frame": self.cpu_ms_per_frame,
            "requests": self.requests,
            "buffers": self.buffers,
            "workers": self.workers,
            "stages_ms": {name: s.to_dict() for name, s in self.stages.items()},
        }


class ThroughputRunner:
    """Runs frames through a zero-copy session with ``requests`` inferences in flight.

    Given what it needs, not the pipeline: the compiled ``session`` (zero-copy),
    the preprocess ``spec`` and the ``postprocess``. ``requests``: default the
    twice the compiled model's OPTIMAL_NUMBER_OF_INFER_REQUESTS (see
    :func:`default_requests`).
    ``workers``: preprocessing threads (default :func:`default_workers`); with
    1 the feeding thread preprocesses. ``Pipeline.run_throughput`` makes one.
    """

    def __init__(
        self,
        session: Any,
        spec: PreprocessSpec,
        postprocess: Postprocessor,
        *,
        heap: str = "auto",
        requests: int | None = None,
        workers: int | None = None,
    ) -> None:
        if session.mode != "zero-copy":
            raise InvalidArgumentError("throughput mode runs zero-copy (its buffers are bound to the model): drop copy mode")
        self.session = session
        self.spec = spec
        self.postprocess = postprocess
        self.heap = heap
        self.requests = int(requests) if requests is not None else default_requests(session.optimal_requests)
        self.workers = int(workers) if workers is not None else default_workers()
        if self.requests < 1 or self.workers < 1:
            raise InvalidArgumentError(f"throughput mode needs at least 1 request and 1 worker, got {self.requests} and {self.workers}")
        # A set per request, one per worker (preprocessing the next frames) and one for the result being read:
        # the calling thread then never waits for a request while a set is only held by the delivery.
        self.buffers = self.requests + self.workers + 1
        self._local = threading.local()
        self._preprocessors: list[Preprocessor] = []
        self._made = threading.Lock()
        self._queue: Any = None  # the queue of the run in progress (tests look at its pools)
        self._feeder_done: threading.Event | None = None  # set when the last run's feeding thread is done

    def run(
        self,
        frames: Iterable[np.ndarray],
        on_result: Callable[[int, Prediction], None] | None = None,
        *,
        keep: bool = False,
    ) -> ThroughputReport:
        """Every frame (BGR u8) of ``frames`` through the model; ``on_result(index, prediction)`` in frame order.

        ``keep``: also return the predictions in the report. An error (from the
        frames, a preprocess, an inference or ``on_result``) or Ctrl-C stops the
        run: frames already submitted finish, nothing more is started, every
        buffer goes back, and the error is raised.

        The frames are taken and submitted by a feeding thread, while the calling
        thread only waits: Ctrl-C (a KeyboardInterrupt, which Python raises in the
        main thread between any two bytecodes) then never lands inside the queue's
        bookkeeping; it asks the feeding thread to stop, and is raised once every
        submitted frame has finished.
        """
        self._wait_for_feeder()
        stop, done = threading.Event(), threading.Event()
        outcome: dict[str, Any] = {}

        def feed() -> None:
            try:
                outcome["report"] = self._feed(frames, on_result, keep, stop)
            except BaseException as exc:  # handed to the calling thread
                outcome["error"] = exc
            finally:
                done.set()

        # Waited for with an Event, not Thread.join: a join interrupted by Ctrl-C can leave is_alive() False
        # while the thread still runs (CPython 3.11/3.12, _wait_for_tstate_lock).
        self._feeder_done = done
        feeder = threading.Thread(target=feed, name="npu_zc-feed", daemon=True)
        interrupted: BaseException | None = None
        while True:
            try:  # everything here may be interrupted: the loop goes on until the feeding thread is done
                if feeder.ident is None:
                    feeder.start()
                if done.wait(0.25):
                    break
            except KeyboardInterrupt as exc:  # stop feeding; what was submitted still finishes
                interrupted = interrupted or exc
                stop.set()
                if feeder.ident is None and not feeder.is_alive():
                    break  # interrupted before the thread started: nothing to wait for
        if feeder.ident is not None:
            try:
                feeder.join()  # done: it only has to return
            except KeyboardInterrupt as exc:
                interrupted = interrupted or exc
        if interrupted is not None:
            raise interrupted
        if "error" in outcome:
            error: BaseException = outcome.pop("error")
            raise error
        report: ThroughputReport = outcome["report"]
        return report

    def _wait_for_feeder(self) -> None:
        """Until the last run's feeding thread has finished (it owns the buffers and the workers' preprocessors)."""
        while self._feeder_done is not None and not self._feeder_done.is_set():
            try:
                self._feeder_done.wait()
            except KeyboardInterrupt:  # already stopping: the wait is for requests in flight, milliseconds
                continue

    def _feed(
        self,
        frames: Iterable[np.ndarray],
        on_result: Callable[[int, Prediction], None] | None,
        keep: bool,
        stop: threading.Event,
    ) -> ThroughputReport:
        """The run itself, on the feeding thread; stops taking frames once ``stop`` is set."""
        postprocess = self.postprocess
        timings = Timings(THROUGHPUT_STAGES)
        predictions: list[Prediction] = []
        lock = threading.Lock()

        def deliver(result: Any) -> None:  # the queue's delivery thread, in submission (= frame) order
            started = time.perf_counter_ns()
            with contextlib.ExitStack() as access:  # a DMA-BUF output is read between sync brackets; memfd needs none
                for buffer in result.output_buffers:
                    if buffer.is_dmabuf:
                        access.enter_context(buffer.cpu_access("read", timeout=FENCE_TIMEOUT_S))
                prediction = postprocess(result.outputs)
            with lock:
                preprocess_ns, transform, frame_size = preprocessed.pop(result.userdata)
            prediction = to_frame(prediction, transform, (self.spec.width, self.spec.height), frame_size)
            with lock:
                timings.add_frame(
                    preprocess=preprocess_ns,
                    infer=int(result.latency_ms * 1e6),
                    postprocess=time.perf_counter_ns() - started,
                )
                if keep:
                    predictions.append(prediction)
            if on_result is not None:
                on_result(result.userdata, prediction)

        # Frame index -> its preprocess time, how the input was made from it and its size, until its result comes.
        preprocessed: dict[int, tuple[int, Any, tuple[int, int]]] = {}

        def prepare(frame: Any, image: np.ndarray, index: int) -> None:
            started = time.perf_counter_ns()
            transform = self._prepare(frame, image)
            with lock:
                preprocessed[index] = (time.perf_counter_ns() - started, transform, (image.shape[1], image.shape[0]))

        cpu_before, wall_before = _cpu_seconds(), time.perf_counter()
        submitted = 0
        queue = self.session.queue(self.requests, heap=self.heap, callback=deliver, buffers=self.buffers)
        self._queue = queue
        executor = ThreadPoolExecutor(self.workers, thread_name_prefix="npu_zc-preprocess") if self.workers > 1 else None
        waiting: collections.deque[tuple[Future[None], Any, int]] = collections.deque()  # preprocessing, in frame order
        try:

            def submit_oldest() -> None:
                nonlocal submitted
                future, frame, index = waiting[0]
                future.result()  # a preprocessing error is raised here
                waiting.popleft()
                queue.submit(frame, index)
                submitted += 1

            for index, image in enumerate(frames):
                if stop.is_set():
                    break
                frame = queue.acquire()
                if executor is None:
                    try:
                        prepare(frame, image, index)
                    except BaseException:
                        queue.discard(frame)
                        raise
                    queue.submit(frame, index)
                    submitted += 1
                    continue
                waiting.append((executor.submit(prepare, frame, image, index), frame, index))
                # Submit in frame order: whatever is ready at the front, and the oldest once every worker is busy.
                while waiting and (waiting[0][0].done() or len(waiting) >= self.workers):
                    submit_oldest()
            while waiting:
                submit_oldest()
            queue.join()
        except BaseException:
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)
                executor = None
            for _, frame, _ in waiting:
                queue.discard(frame)
            waiting.clear()
            raise
        finally:
            if executor is not None:
                executor.shutdown(wait=True)
            queue.close()  # waits for running requests; delivers what was submitted
            self._queue = None
        seconds = time.perf_counter() - wall_before
        return ThroughputReport(
            frames=submitted,
            seconds=seconds,
            cpu_seconds=_cpu_seconds() - cpu_before,
            requests=self.requests,
            buffers=self.buffers,
            workers=self.workers,
            stages=timings.stats(),
            predictions=predictions,
            timings=timings,
        )

    def _prepare(self, frame: Any, image: np.ndarray) -> Any:
        """Preprocess ``image`` into ``frame``'s input buffer with this thread's own
        :class:`.Preprocessor`; returns the transform (for mapping detections back)."""
        preprocess = getattr(self._local, "preprocess", None)
        if preprocess is None:
            preprocess = Preprocessor(self.spec, heap=self.heap)
            with self._made:
                self._preprocessors.append(preprocess)
            self._local.preprocess = preprocess
        buffer = frame.input_buffers[0]
        if buffer.is_dmabuf:
            with buffer.cpu_access("write", timeout=FENCE_TIMEOUT_S):
                preprocess(image, frame.inputs[0])
        else:
            preprocess(image, frame.inputs[0])
        return preprocess.transform

    def close(self) -> None:
        """Free the workers' preprocessors (once a run still stopping has finished)."""
        self._wait_for_feeder()
        with self._made:
            for preprocess in self._preprocessors:
                preprocess.close()
            self._preprocessors.clear()
        self._local = threading.local()

    def __enter__(self) -> "ThroughputRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system

