"""Throughput mode: many frames in flight, so that every core the device offers is busy.

With the THROUGHPUT hint the CPU plugin splits the machine into several
streams and asks for OPTIMAL_NUMBER_OF_INFER_REQUESTS requests in flight (about
one per core). :class:`ThroughputRunner` keeps them all busy:

* an :class:`~npu_zc.runtime.AsyncQueue` of twice that many sets of buffers
  in flight (one queued behind each running one, see :func:`default_requests`),
  plus spare sets (one per worker, and one for the result being read), so that
  frame N+1 is written while the requests infer frames N-k...N; every set is
  bound to the model once (zero copy, as in latency mode) and has its own
  request, pointed at it once: a frame's submission only starts it;
* one feeding thread takes each frame, preprocesses it (the layout engine, from
  the frame to the input in one call with the GIL released, the frame split in
  bands among ``workers`` threads of the engine) and submits it, in order (the
  calling thread waits, so that Ctrl-C stops the run cleanly);
* the queue's delivery thread waits for each request (GIL released),
  postprocesses in place and hands the result on, in frame order.

Every thread of the run shares the GIL, so the Python each frame runs with it
held is paid by the whole pipeline: there are only these two Python threads,
no per-frame hand-over between Python threads (no executor, no futures), and
what a result needs travels with its request (no shared table, no lock of
ours). ``benches/python_per_frame.py`` counts that Python per frame.

Nothing is allocated per frame beyond a few small objects and no buffer is
rewritten while a request reads it: a frame's set of buffers comes from the
queue, which hands a set out again only once its result has been released.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from ..errors import InvalidArgumentError
from ..runtime.session import usable_cores
from .postprocess import Postprocessor, Prediction, ResultReader
from .preprocess import PreprocessSpec, Preprocessor
from .timing import FENCE_TIMEOUT_S, StageStats, Timings

THROUGHPUT_STAGES = ("preprocess", "infer", "postprocess", "total")
"""Per frame; ``total`` is their sum (a frame's own time: with frames in flight, the FPS is not 1000 / total)."""

STOP_GRACE_S = 5.0
"""After Ctrl-C, how long a run waits for the frames in flight and their on_result before it stops waiting
(a second Ctrl-C stops it at once): a blocked on_result cannot keep the program from stopping."""


def default_workers() -> int:
    """Preprocessing threads a frame is split among: 1, the feeding thread alone.

    A frame's crop-resize-convert is a fraction of a millisecond of one core.
    Splitting it among more threads wakes the engine's sleeping workers for
    every frame, which costs more than it saves, and those workers take cores
    from the inference: the feeding thread needs a core of its own instead
    (:func:`reserved_cores`). ``benches/bench_throughput.py`` measures it
    (docs/benchmarks.md).
    """
    return 1


def reserved_cores(cores: int | None = None) -> int:
    """Cores the CPU plugin leaves to the feeding thread in throughput mode: 1 from 8 cores up, else 0.

    With the throughput hint the CPU plugin runs one stream per core, each
    thread pinned, so the feeding thread (a fraction of a millisecond of CPU a
    frame, for every frame) has to take its time from an inference thread and
    the whole run waits for it. With many cores the feeding is the limit and a
    core of its own gives more frames a second than the stream it costs; on a
    few cores the inference, not the feeding, is the limit, so nothing is
    reserved there (``benches/bench_throughput.py``, docs/benchmarks.md).
    """
    return 1 if (usable_cores() if cores is None else cores) >= 8 else 0


def default_requests(optimal: int) -> int:
    """Requests in flight: twice the plugin's optimal number (at least 2).

    Results are taken in submission order, so a request that finishes before an
    older one waits to be reused; with only the optimal number, its stream would
    idle meanwhile. A second request per stream, queued behind the first, keeps
    every stream busy (``benches/bench_throughput.py`` compares it with
    benchmark_app's).
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
    interrupted: bool = False
    """Ctrl-C stopped the run (``run(..., partial=True)``): the figures are those of the frames done."""

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
    ``workers``: the threads each frame's preprocess is split among (default
    :func:`default_workers`; with 1 the feeding thread does it alone). ``Pipeline.run_throughput`` makes one.
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
        # A set per request, spares (one per worker: the frame being preprocessed, and slack) and one for the
        # result being read: the feeding thread then never waits for a request while a set is only held by the
        # delivery.
        self.buffers = self.requests + self.workers + 1
        self._preprocess: Preprocessor | None = None
        self._queue: Any = None  # the queue of the run in progress (tests look at its pools)
        self._feeder_done: threading.Event | None = None  # set when the last run's feeding thread is done
        self._abandoned = False  # a run stopped by Ctrl-C left its feeding thread blocked (in on_result)

    def run(
        self,
        frames: Iterable[np.ndarray],
        on_result: Callable[[int, Prediction], None] | None = None,
        *,
        keep: bool = False,
        partial: bool = False,
    ) -> ThroughputReport:
        """Every frame (BGR u8) of ``frames`` through the model; ``on_result(index, prediction)`` in frame order.

        ``partial``: Ctrl-C returns the report of the frames done (``interrupted``
        set) once at least one is done, instead of raising KeyboardInterrupt.

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
        interrupted_at = 0.0
        while True:
            try:  # everything here may be interrupted: the loop goes on until the feeding thread is done
                if feeder.ident is None:
                    feeder.start()
                if done.wait(0.25):
                    break
                if interrupted is not None and time.monotonic() - interrupted_at > STOP_GRACE_S:
                    break  # an on_result (or a request) that does not return: Ctrl-C is not kept waiting for it
            except KeyboardInterrupt as exc:  # stop feeding; what was submitted still finishes
                if interrupted is not None:
                    break  # a second Ctrl-C: stop waiting at once
                interrupted, interrupted_at = exc, time.monotonic()
                stop.set()
                if feeder.ident is None and not feeder.is_alive():
                    break  # interrupted before the thread started: nothing to wait for
        if interrupted is not None and not done.is_set():
            self._abandoned = True  # the feeding thread (a daemon) finishes on its own; close() does not wait for it
            queue = self._queue
            if queue is not None:
                queue.abandon()  # no more frames; the inferences running end before the process may
            raise interrupted
        if feeder.ident is not None:
            try:
                feeder.join()  # done: it only has to return
            except KeyboardInterrupt as exc:
                interrupted = interrupted or exc
        if interrupted is not None:
            done_report: ThroughputReport | None = outcome.get("report")
            if partial and done_report is not None and done_report.frames > 0 and "error" not in outcome:
                done_report.interrupted = True
                return done_report
            raise interrupted
        if "error" in outcome:
            error: BaseException = outcome.pop("error")
            raise error
        report: ThroughputReport = outcome["report"]
        return report

    def _wait_for_feeder(self, *, abandon: bool = False) -> bool:
        """Until the last run's feeding thread has finished (it owns the buffers and the preprocessor);
        with ``abandon``, not past STOP_GRACE_S nor a Ctrl-C. True once it has finished."""
        deadline = time.monotonic() + STOP_GRACE_S
        interrupted: KeyboardInterrupt | None = None
        while self._feeder_done is not None and not self._feeder_done.is_set():
            try:
                self._feeder_done.wait(0.25)
            except KeyboardInterrupt as exc:  # the wait is for requests in flight, milliseconds
                if abandon:
                    return False
                interrupted = exc  # raised once the last run is over: a Ctrl-C here is not lost
                continue
            if abandon and time.monotonic() > deadline:
                return False
        if interrupted is not None:
            raise interrupted
        return True

    def _feed(
        self,
        frames: Iterable[np.ndarray],
        on_result: Callable[[int, Prediction], None] | None,
        keep: bool,
        stop: threading.Event,
    ) -> ThroughputReport:
        """The run itself, on the feeding thread; stops taking frames once ``stop`` is set.

        Per frame, as little Python (run with the GIL held) as can be: the GIL is
        the one thing every thread of the run shares, so each step spent holding it
        is paid by the whole pipeline. One thread takes, preprocesses (the
        conversion splits the frame among ``workers`` threads inside one call, GIL
        released) and submits each frame; the queue's delivery thread reads the
        results. What a result needs (its index, preprocess time, transform, frame
        size) travels with the request, so the two threads share no lock of ours.
        """
        postprocess = self.postprocess
        timings = Timings(THROUGHPUT_STAGES)
        predictions: list[Prediction] = []
        preprocess_ns: list[int] = timings.samples["preprocess"]  # appended to by the delivery thread only
        infer_ns: list[int] = timings.samples["infer"]
        postprocess_ns: list[int] = timings.samples["postprocess"]
        total_ns: list[int] = timings.samples["total"]
        input_size = (self.spec.width, self.spec.height)
        clock = time.perf_counter_ns

        def deliver(result: Any) -> None:  # the queue's delivery thread, in submission (= frame) order
            started = clock()
            index, prepared_ns, transform, frame_size = result.userdata
            prediction = read(result, transform, frame_size)
            infer = int(result.latency_ms * 1e6)
            post = clock() - started
            preprocess_ns.append(prepared_ns)
            infer_ns.append(infer)
            postprocess_ns.append(post)
            total_ns.append(prepared_ns + infer + post)
            if keep:
                predictions.append(prediction)
            if on_result is not None:
                on_result(index, prediction)

        cpu_before, wall_before = _cpu_seconds(), time.perf_counter()
        submitted = 0
        queue = self.session.queue(self.requests, heap=self.heap, callback=deliver, buffers=self.buffers)
        self._queue = queue
        read = ResultReader(postprocess, input_size, dmabuf_outputs=queue.dmabuf_outputs)
        acquire, prepare, submit, stopping = queue.acquire, self._prepare, queue.submit, stop.is_set
        try:
            for index, image in enumerate(frames):
                if stopping():
                    break
                frame = acquire()
                try:
                    started = clock()
                    transform = prepare(frame, image)
                    userdata = (index, clock() - started, transform, (image.shape[1], image.shape[0]))
                except BaseException:
                    queue.discard(frame)
                    raise
                submit(frame, userdata)
                submitted += 1
            queue.join()
        finally:
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
        """Preprocess ``image`` into ``frame``'s input buffer, the conversion split among ``workers`` threads;
        returns the transform (for mapping detections back)."""
        preprocess = self._preprocess
        if preprocess is None:  # one run at a time: the runs share it
            preprocess = self._preprocess = Preprocessor(self.spec, heap=self.heap, threads=self.workers)
        buffer = frame.input_buffers[0]
        # The queue's input buffers are its own: a letterbox's bars, once written into one, stay.
        if buffer.is_dmabuf:
            with buffer.cpu_access("write", timeout=FENCE_TIMEOUT_S):
                preprocess(image, frame.inputs[0], keep_fill=True)
        else:
            preprocess(image, frame.inputs[0], keep_fill=True)
        return preprocess.transform

    def close(self) -> None:
        """Free the preprocessor (once a run still stopping has finished; a run whose on_result does not
        return is left to finish on its own after STOP_GRACE_S, and keeps the preprocessor)."""
        if self._abandoned and not (self._feeder_done is not None and self._feeder_done.is_set()):
            return
        if not self._wait_for_feeder(abandon=True):
            return
        if self._preprocess is not None:
            self._preprocess.close()
            self._preprocess = None

    def __enter__(self) -> "ThroughputRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system

