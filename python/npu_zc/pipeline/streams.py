"""Many streams, one model: N sources decoded side by side, scheduled fairly into one compiled model.

* Each source (a video file or URL through PyAV, a camera, a folder of
  images) decodes on its own thread into a small lane: a **live** source's
  lane keeps only the newest two frames (``live_frames``; an older one goes
  back to the decoder or the driver, counted as a drop); a **file**'s lane
  holds two frames and makes its decoder wait (back-pressure: no frame is
  lost).
* Feeding threads (one per two cores, :func:`default_feeders`) each take a
  free set of bound buffers from the runtime's
  :class:`~npu_zc.runtime.AsyncQueue` (one shared pool, twice the device's
  optimal number of requests as in :mod:`.throughput`, at least one per
  stream; each set has its own
  request, pointed at its buffers once), then the next ready
  lane in round-robin order (a fair share: a fast source cannot starve a slow
  one) that no other feeding thread holds, and convert the decoded frame **in
  place** (the decoder's NV12/I420 planes, the camera's buffer) into the model
  input with one pass of the layout engine (the GIL released), in the
  stream's colour matrix and range; the decoder's buffer is let go at once.
  A lane is held by one feeding thread from taking a frame until its
  submission, so each stream's frames are submitted in their order.
* The queue's delivery threads (:func:`default_deliverers`) read each result
  in place as its request completes, map boxes back to the frame, apply the
  stream's tracker, and hand a :class:`StreamResult` to the outputs. Results
  of a stream come in its frame order: they are submitted in that order with
  the stream as the queue's key, and the queue delivers one key's results one
  at a time in submission order (a result waits only for its own stream's
  earlier ones, never for another stream's). With decoding workers and a model
  that is not on the CPU, the thread that receives the workers' frames
  delivers instead (:func:`default_deliverers`).

A source that fails or ends stops only its own stream (its error is kept in
its :class:`StreamStats`); network streams reconnect on their own.

With ``workers`` (:mod:`.workers`), the video streams' reading and feeding
run in worker processes instead, the same way (:mod:`.feeding`, the same
scheduler), each converted frame named in a message that this process
submits; delivery is the same.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .. import layout
from .._numbers import real_number, whole_number
from ..errors import Error, InvalidArgumentError, ModelError, StreamNotFoundError, StreamsRunError
from .pipeline import DEFAULT_MODEL, Pipeline
from .postprocess import Prediction, ResultReader
from .feeding import convert_frame, converter_for, read_source
from .scheduler import IDLE_CREDIT, LIVE_FRAMES, MAX_LIVE_FRAMES, Lane, Scheduler
from ..runtime.latency_fit import StreamsFit
from ..runtime.session import usable_cores
from ..sources import open_source
from .throughput import STOP_GRACE_S, default_requests
from .timing import FENCE_TIMEOUT_S, StageStats, Timings
from .workers import (
    WORKER_NICE,
    DecodeWorkers,
    decodes_in_a_worker,
    default_worker_credits,
    default_workers,
    off_the_cpu,
)

STREAMS_STAGES = ("preprocess", "infer", "postprocess", "latency")
"""Per frame; ``latency``: from the decoder handing the frame over to its result being ready."""

MAX_CONCURRENCY = 1024
"""The most requests, feeding threads, delivery threads or decoding workers a ``Streams`` takes: past a machine's
means threads and processes fail to start or exhaust its memory, and a mistyped count should say so at once."""

FIGURES_WINDOW = 10_000
"""A persistent run's figures (latency percentiles per stream, the stages) are over its latest frames: between this
many and twice this many (a service runs for days; every frame's sample would grow without bound). Frame counts and
drops stay whole."""

DEFAULT_LATENCY_BUDGET_MS = 100.0
"""Frame to result, for live sources: the CPU plugin's streams are fitted to it (:mod:`npu_zc.runtime.latency_fit`)."""


@dataclass
class StreamResult:
    """One frame's result: which stream, which frame, when, and what the model found."""

    stream: int
    """The stream's id: its position in the list of sources, then counting on for each :meth:`Streams.add`
    (never reused after a :meth:`Streams.remove`)."""
    name: str
    """The stream's name (unique among the streams)."""
    index: int
    """The frame's position in its source (0-based; a live stream's dropped frames leave gaps)."""
    pts: float | None
    """Presentation time in seconds, from the stream."""
    latency_ms: float
    """From the decoder handing the frame over to this result."""
    prediction: Prediction | object
    """What the model found, in frame pixels: a classifier's ``list[ClassScore]``, a detector's
    :class:`npu_zc.Detections` (with ``track_ids`` when the stream's tracker is :class:`npu_zc.Tracker`), an SSD-style
    ``list[NormalisedDetection]``; with a postprocess or tracker of your own, what it returns."""
    frame: Any = field(default=None, repr=False)
    """The decoded frame (:class:`npu_zc.sources.DecodedFrame`), only while an output that draws needs it."""

    def to_dict(self) -> dict[str, Any]:
        prediction = self.prediction
        found = [] if prediction is None else [_plain(p) for p in prediction] if isinstance(prediction, (list, tuple)) \
            else _plain(prediction)  # fmt: skip
        return {"stream": self.stream, "name": self.name, "index": self.index, "pts": self.pts,
                "latency_ms": round(self.latency_ms, 3), "result": found}  # fmt: skip


@dataclass
class StreamStats:
    """One stream's figures so far (or at the end)."""

    stream: int
    name: str
    live: bool
    frames: int = 0
    dropped: int = 0
    """Frames a live stream lost: let go because a newer one came before the model was free, or lost before they
    reached the stream (a camera driver's drops, frames it marked corrupt or sent short)."""
    copied: int = 0
    """Frames FFmpeg had to convert (a copy) before the layout engine could read them."""
    let_go: int = 0
    """Frames decoded and never inferred because the stream was removed (:meth:`Streams.remove`): a stream that let
    frames go did not reach its end, whatever its source did."""
    reconnects: int = 0
    error: str | None = None
    done: bool = False
    """The source ended on its own (a file's last frame)."""
    stopped: bool = False
    """The source was stopped before it ended: :meth:`Streams.stop`, a duration, Ctrl-C, :meth:`Streams.remove`."""
    latencies_ns: list[int] = field(default_factory=list, repr=False)
    first_ns: int | None = None
    last_ns: int | None = None
    _settled: StageStats | None = field(default=None, init=False, repr=False, compare=False)
    """Its latency, summarised when it left a persistent run (its samples then let go)."""

    @property
    def fps(self) -> float:
        if self.frames < 2 or self.first_ns is None or self.last_ns is None or self.last_ns <= self.first_ns:
            return 0.0
        return (self.frames - 1) * 1e9 / (self.last_ns - self.first_ns)

    def latency(self) -> StageStats:
        return self._settled if self._settled is not None else StageStats.of(self.latencies_ns)

    def _settle(self) -> None:
        """Its latency summarised once, its samples let go: a stream that left a persistent run (a service adds and
        removes streams for days, and each one's samples would stay with the report)."""
        self._settled = StageStats.of(self.latencies_ns)
        self.latencies_ns = []

    @property
    def state(self) -> str:
        if self.error:
            return "error"
        if self.done and not self.let_go:
            return "done"
        return "stopped" if self.stopped or self.done else "running"

    def to_dict(self) -> dict[str, Any]:
        lat = self.latency()
        return {"stream": self.stream, "name": self.name, "live": self.live, "state": self.state, "frames": self.frames,
                "dropped": self.dropped, "copied": self.copied, "let_go": self.let_go, "reconnects": self.reconnects,
                "fps": self.fps, "latency_ms": {"p50": lat.median, "p99": lat.p99, "mean": lat.mean}, "error": self.error}  # fmt: skip


@dataclass
class StreamsReport:
    """A finished run: per stream, and per stage over every frame."""

    model: str
    device: str
    requests: int
    seconds: float
    cpu_seconds: float
    streams: list[StreamStats]
    stages: dict[str, StageStats]
    streams_fit: StreamsFit | None = None
    """How the CPU plugin's streams were fitted to the latency budget (:attr:`Streams.streams_fit`)."""

    @property
    def frames(self) -> int:
        return sum(s.frames for s in self.streams)

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @property
    def errors(self) -> list[StreamStats]:
        return [s for s in self.streams if s.error]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "device": self.device, "requests": self.requests, "seconds": self.seconds,
                "cpu_seconds": self.cpu_seconds, "frames": self.frames, "fps": self.fps,
                "streams": [s.to_dict() for s in self.streams],
                "stages_ms": {k: v.to_dict() for k, v in self.stages.items()},
                "streams_fit": None if self.streams_fit is None else self.streams_fit.to_dict()}  # fmt: skip


Overlay = Callable[[np.ndarray, Any], np.ndarray]


class _Lane(Lane):
    """A stream's lane (:class:`~npu_zc.pipeline.scheduler.Lane`) with its source, figures, tracker and converters."""

    def __init__(self, stream: int, name: str, source: Any, error: BaseException | None, tracker: Any,
                 lock: threading.RLock) -> None:  # fmt: skip
        super().__init__(stream, name, bool(getattr(source, "live", False)), lock)
        self.source = source
        self.stats = StreamStats(stream, name, self.live)
        self.ended = error is not None
        if error is not None:
            self.stats.error = str(error)
        self.tracker = tracker
        self.converters: dict[tuple[Any, ...], tuple[layout.Converter, Any]] = {}
        """Per format, size and colours of its frames: the converter and its transform."""
        self.track: Callable[[Any], Any] | None = None if tracker is None else getattr(tracker, "update", tracker)
        """The tracker's update, looked up once (it runs per frame)."""
        self.submitted = 0
        """Frames submitted (by the feeding thread that holds the lane: one at a time)."""
        self.delivered = 0
        """Results handed to the outputs, or lost with their request (one of the lane's results at a time)."""
        self.worker: Any = None
        """The decoding worker process that reads it (:mod:`.workers`), or None: read by a thread here."""


def default_deliverers(streams: int, cores: int | None = None, *, workers: int = 0, device: str = "CPU") -> int:
    """Delivery threads: one per four cores, at least two (at most one per stream); with decoding workers, two
    where the CPU runs the model, none where it does not (the receiving thread delivers).

    Each result's postprocess, tracker and outputs run with the GIL held on a
    delivery thread; with one alone, every result of every stream waited for
    the oldest request and then for the GIL behind it: one serial stage for all
    streams. With several, a result waits only for its own stream's earlier
    results, and a thread waiting for the GIL (or for a late request, or in a
    slow output) holds up only its stream. With decoding workers, this
    process's threads are the receiving thread and these, and each one more
    takes the lock from the receiving thread at each of its waits: where the
    model runs on an NPU or a GPU (``device``), this process runs Python only,
    and the receiving thread delivers too; where the CPU runs it, the
    inferences share the cores and finish unevenly, and two delivery threads
    waiting on them hold more streams (docs/streams.md).
    """
    if workers:
        return 0 if off_the_cpu(device) else max(1, min(streams, 2))
    return max(1, min(streams, max(2, (usable_cores() if cores is None else cores) // 4)))


def default_worker_nice(device: str = "CPU") -> int:
    """How many nice levels below this process the decoding workers run: :data:`~npu_zc.pipeline.workers.WORKER_NICE`
    where the model runs on an NPU or a GPU (``device``), 0 where the CPU may run it. Workers below this process run
    as batch work too (``SCHED_BATCH``: a thread of theirs that wakes does not take a running thread's core).

    Off the CPU this process runs only the serial stage of every frame (the receiving thread: each worker's message,
    the request started, the result delivered, the set granted again) and the device's own threads, while the
    workers' decoders fill the cores: lower, the decoders yield a core to it at once instead of taking turns, and
    the same cores deliver more frames a second (docs/streams.md). Where the CPU runs the model, its inferences
    would outrank the decoding of live streams, which then drop frames; nothing was gained there."""
    return WORKER_NICE if off_the_cpu(device) else 0


def default_worker_feeders(device: str = "CPU") -> int:
    """Feeding threads in each decoding worker: one where the model runs on an NPU or a GPU (``device``), two where
    the CPU may run it.

    Off the CPU the workers run as batch work below this process, and one feeding thread keeps up with its worker's
    frames: a second one, overlapping one's Python with the other's conversion, only hands the worker's lock over
    more often. Where the CPU runs the model its inferences take cores from the feeding threads too, and a worker
    with two is not held up whenever one of them waits for a core: near the cores' limit one lost more paced frames
    (docs/streams.md, "One feeding thread a worker off the CPU")."""
    return 1 if off_the_cpu(device) else 2


def default_feeders(streams: int, cores: int | None = None) -> int:
    """Feeding threads: one per two cores (at least one, at most one per stream).

    Each frame's conversion (a frame's crop, resize and YUV decode into the
    model input, the GIL released) and its hand-over run on a feeding thread;
    with one alone, every frame of every stream waits for the same core. Among
    many busy Python threads, each time a feeding thread gives the GIL up (the
    conversion, ``start_async``) it waits to take it back; more feeding threads
    overlap those waits, so they scale with the cores that run the decoders and
    the model (docs/streams.md, ``benches/bench_streams.py``). An idle feeding
    thread sleeps and costs nothing.
    """
    return max(1, min(streams, (usable_cores() if cores is None else cores) // 2))


class Streams:
    """N sources into one compiled model, results per stream in frame order.

    ``sources``: paths of video files, network URLs (``rtsp://...``), folders
    of images, ``/dev/videoN``, open :class:`npu_zc.Camera` objects, or
    source objects (:mod:`npu_zc.sources`). ``model``: a file, the built-in
    ``"efficientnet-lite0"``, or a :class:`Pipeline` (zero-copy; made here with
    the throughput hint otherwise, with ``pipeline_options``).
    ``requests``: inferences in flight (default twice the device's optimal
    number, and at least one per stream given here). ``tracker``: a factory
    called once per stream; what it returns gets each of that stream's
    predictions in order (``update(prediction)``,
    e.g. ``tracker=npu_zc.Tracker``, or a plain callable) and its return value
    replaces the prediction. ``realtime``: pace files at their frame rate as
    live sources. ``source_options``: passed to each :class:`VideoSource`
    (``timeout``, ``reconnect``, ``hardware``...). ``keep_frames``: keep each
    decoded frame until its result is delivered (:attr:`StreamResult.frame`;
    needed to draw; it holds the decoder's buffers longer); or a callable
    asked with the stream's name as each frame is submitted, keeping that
    frame when it returns True (e.g. :meth:`npu_zc.sinks.LiveView.wants`: only
    the frames a viewer will see; an exception there stops the run). ``feeders``:
    threads that convert frames into the model's inputs and submit them, side
    by side (default :func:`default_feeders`: one per two cores).
    ``deliverers``: threads that read the results and call the outputs, side by
    side, each stream's results still in its frame order (default
    :func:`default_deliverers`; with more than one, an output is called from
    several threads at once, for different streams; 0, the default with
    ``workers`` where the model does not run on the CPU: the thread that
    receives the workers' frames calls them). ``workers``: processes
    that decode the video files and network streams and convert each frame
    there, in place, into the model's input buffers (shared as fds; a few bytes
    a frame come back), past this interpreter's lock (:mod:`npu_zc.pipeline.workers`;
    default :func:`npu_zc.pipeline.workers.default_workers`: from two streams
    up, one per core on any machine where the model runs on an NPU or a GPU,
    one per two cores from eight cores up where the CPU may run it, else 0; 0: decode
    here; refused with ``keep_frames``: the frames stay in the workers).
    ``worker_nice``: how many nice levels below this process the workers run
    (0 to 19; from 1, as batch work too, ``SCHED_BATCH``; default
    :func:`default_worker_nice`: 10 where the model runs on an NPU or a GPU,
    0 on the CPU). ``latency_budget_ms``:
    frame to result for live sources; where a live source is among them and
    the model is compiled here for the CPU, the plugin's streams are fitted to
    it (fewer, with more threads each, while an inference with every stream
    busy takes more than half of it, 70% once fitted: :attr:`streams_fit`
    says what was tried); ``None`` keeps the
    throughput hint's own (the most frames a second). Files alone are not
    fitted: nothing waits for their results. ``live_frames``: the newest
    frames a live stream's lane keeps for the model (1 to
    :data:`~npu_zc.pipeline.scheduler.MAX_LIVE_FRAMES`; default 2: a frame
    not taken before the next one comes waits, and the stream falls up to a
    frame time behind; 1 drops it, for the least latency; a camera's lane
    keeps no more than its buffers less one). ``requests``, ``feeders``,
    ``deliverers`` and ``workers`` are whole numbers up to
    :data:`MAX_CONCURRENCY`.

    Use :meth:`run` (blocks, Ctrl-C stops it cleanly) with ``on_result``
    callbacks, and read the :class:`StreamsReport`.

    ``names``: one per source (else each source's own name, numbered where two
    sources share one); names are unique. ``persistent``: the run goes on while
    no stream is running (all ended, or none yet) until :meth:`stop`,
    ``duration`` or Ctrl-C, as a service's does; streams come and go with
    :meth:`add` and :meth:`remove` (both thread-safe, before or during the
    run). Without it an empty list of sources is refused and the run ends when
    every stream has.
    """

    def __init__(
        self,
        sources: Sequence[Any] = (),
        model: str | os.PathLike[str] | Pipeline | Any = DEFAULT_MODEL,
        *,
        names: Sequence[str] | None = None,
        persistent: bool = False,
        device: str = "AUTO",
        requests: int | None = None,
        tracker: Callable[[], Any] | None = None,
        realtime: bool = False,
        source_options: dict[str, Any] | None = None,
        keep_frames: bool | Callable[[str], bool] = False,
        feeders: int | None = None,
        deliverers: int | None = None,
        workers: int | None = None,
        worker_nice: int | None = None,
        latency_budget_ms: float | None = DEFAULT_LATENCY_BUDGET_MS,
        live_frames: int = LIVE_FRAMES,
        **pipeline_options: Any,
    ) -> None:
        sources = list(sources)
        if not sources and not persistent:
            raise InvalidArgumentError("Streams needs at least one source (or persistent=True, to add them later)")
        if names is not None:
            names = list(names)
            if len(names) != len(sources):
                raise InvalidArgumentError(f"names gives {len(names)} names for {len(sources)} sources: one per source")
            for name in names:
                _check_name(name)
            twice = sorted({name for name in names if names.count(name) > 1})
            if twice:
                raise InvalidArgumentError(f"names must be unique: {', '.join(map(repr, twice))} given twice")
        counts = (("requests", requests, 1, MAX_CONCURRENCY), ("feeders", feeders, 1, MAX_CONCURRENCY),
                  ("deliverers", deliverers, 0, MAX_CONCURRENCY), ("workers", workers, 0, MAX_CONCURRENCY),
                  ("worker_nice", worker_nice, 0, 19),  # a process may lower its own priority, not raise it
                  ("live_frames", live_frames, 1, MAX_LIVE_FRAMES))  # fmt: skip
        for count, value, least, most in counts:
            if value is not None:
                whole_number(value, count, least, most)
        if not isinstance(keep_frames, bool) and not callable(keep_frames):
            raise InvalidArgumentError(f"keep_frames is True, False or a callable taking a stream's name, got {keep_frames!r}")
        self.keep_frames = keep_frames
        if workers and keep_frames is not False:
            raise InvalidArgumentError("keep_frames needs each decoded frame in this process: it is not kept with "
                                       "workers (decoding in worker processes); give workers=0")  # fmt: skip
        if latency_budget_ms is not None:  # None: no budget
            real_number(latency_budget_ms, "latency_budget_ms", positive=True)
        options = dict(source_options or {})
        if realtime:
            options["realtime"] = True
        self.persistent = bool(persistent)
        self._options = options
        self._tracker = tracker
        self.live_frames = int(live_frames)
        """The newest frames a live stream's lane keeps (:class:`~npu_zc.pipeline.scheduler.Scheduler`)."""
        self._scheduler: Scheduler[_Lane] = Scheduler(persistent=self.persistent, live_frames=self.live_frames)
        self._lock = self._scheduler.lock
        """The scheduler's (re-entrant) lock: it also guards the run's state and the names here."""
        self._next_id = 0
        self._running = False
        self._ran = False
        self._readers: list[threading.Thread] = []
        self._run_stats: dict[int, StreamStats] = {}
        """Every stream that took part in the current (or last) run, removed ones too: the report's streams."""
        self._left: collections.deque[int] = collections.deque()
        """The ids of the streams removed from a persistent run, oldest first: its report keeps the latest
        :data:`FIGURES_WINDOW` of them."""
        self._abandoned = False
        self._delivering = threading.local()
        """Set on a delivery thread while it runs the outputs (:meth:`remove` called there does not wait for them)."""
        lanes: list[_Lane] = []
        for k, spec in enumerate(sources):
            source, error = None, None
            try:
                source = open_source(spec, **options) if isinstance(spec, (str, os.PathLike)) else open_source(spec)
            except Error as exc:  # this stream's error; the others go on
                error = exc
            shown = source if source is not None else _Named(spec)
            name = names[k] if names is not None else self._free_name(_name_of(shown), [lane.name for lane in lanes])
            lanes.append(_Lane(self._new_id(), name, shown, error, tracker() if tracker is not None else None, self._lock))
        for lane in lanes:
            self._scheduler.add(lane)
        self._owns_pipeline = not isinstance(model, Pipeline)
        if isinstance(model, Pipeline):
            self.pipeline: Pipeline = model
        else:
            # A persistent run is a service's: the streams it will be given are cameras and network streams.
            if latency_budget_ms is not None and (self.persistent or any(lane.live for lane in self.lanes)):
                from ..runtime import CompileOptions

                given = pipeline_options.get("options") or CompileOptions()
                pipeline_options["options"] = given.with_latency_budget(latency_budget_ms)
            self.pipeline = Pipeline(model, device, hint="throughput", **pipeline_options)
        if not self.pipeline.zero_copy:
            raise InvalidArgumentError("Streams runs zero-copy (its buffers are bound to the model): drop copy mode")
        self.streams_fit: StreamsFit | None = self.pipeline.session.streams_fit
        """How the pipeline's NUM_STREAMS was fitted to a latency budget (here: the CPU, a live source, the model
        compiled here; or a pipeline passed in that was compiled with one); else None."""
        # At least one set in flight per stream: a burst of frames then waits in the plugin's queue, not in the lanes,
        # where a live stream's frame is lost once the next one comes.
        self.requests = (int(requests) if requests is not None
                         else max(default_requests(self.pipeline.session.optimal_requests), len(self.lanes)))  # fmt: skip
        # N decoders side by side: each gets its share of the cores (frame threads beyond that only add threads,
        # and each frame thread delays a live stream's output by a frame).
        videos = [lane.source for lane in self.lanes if hasattr(lane.source, "thread_count")]
        for video in videos:
            if video.thread_count is None:
                video.thread_count = max(1, usable_cores() // len(videos))
        # A persistent run's streams are not known yet: as many threads as the cores give (idle ones sleep).
        planned = usable_cores() if self.persistent else len(self.lanes)
        self.feeders = int(feeders) if feeders is not None else default_feeders(planned)
        """Feeding threads of a run."""
        if workers is not None:
            self.workers = int(workers)
        else:
            elsewhere = planned if self.persistent else sum(_decodes_elsewhere(lane) for lane in self.lanes)
            self.workers = default_workers(elsewhere, usable_cores(), self.pipeline.device) if keep_frames is False else 0
        """Decoding worker processes of a run (:mod:`npu_zc.pipeline.workers`): the video files and network streams
        are decoded and converted into the model's inputs there, past this interpreter's lock; 0: on threads here."""
        self.worker_nice = default_worker_nice(self.pipeline.device) if worker_nice is None else int(worker_nice)
        """How many nice levels below this process the decoding workers run (:func:`default_worker_nice`)."""
        self.worker_feeders = default_worker_feeders(self.pipeline.device)
        """Feeding threads in each decoding worker (:func:`default_worker_feeders`)."""
        self.worker_credits = default_worker_credits(self.pipeline.device, self.pipeline.session.set_bytes)
        """Sets of buffers each decoding worker holds beyond one per feeding thread (by device and the model's
        inputs' and outputs' size: :func:`~npu_zc.pipeline.workers.default_worker_credits`)."""
        if deliverers is None:
            deliverers = default_deliverers(planned, workers=self.workers, device=self.pipeline.device)
        self.deliverers = int(deliverers)
        """Delivery threads of a run (each stream's results in order on any of them); 0: the decoding workers'
        receiving thread delivers."""
        if self.deliverers == 0 and not self.workers:
            raise InvalidArgumentError("deliverers=0 leaves the delivering to the decoding workers' receiving thread: "
                                       "give workers=N (N > 0) too, or at least one delivery thread")  # fmt: skip
        self.worker_cpu: dict[str, float] = {}
        """After a run with workers: their CPU seconds, by role of thread ("sources", "feeders"), to be ready
        ("start") and in all ("total")."""
        self.worker_sleeps: dict[str, int] = {}
        """After a run with workers: the times their threads gave a core up to wait (voluntary context switches), by
        the same roles as :attr:`worker_cpu`."""
        self.worker_receiving: dict[str, float] = {}
        """After a run with workers: this process's receiving thread, the frames it took ("frames") and its wall
        seconds waiting for them ("waiting") and handling them ("busy"), of which waiting for a free set to grant
        ("no_set"; see :class:`~npu_zc.pipeline.workers.DecodeWorkers`)."""
        self.worker_copies: dict[str, int] | None = None
        """After a run with workers under the memcpy counter (:mod:`npu_zc.memcount`): what they copied ("bytes",
        "calls", the "largest" copy); None otherwise."""
        self._workers: DecodeWorkers | None = None
        self._queue: Any = None  # the run's AsyncQueue, once made
        if feeders is None and self.workers and not self.persistent and all(map(_decodes_elsewhere, self.lanes)):
            self.feeders = 1  # every frame comes converted from a worker: here one thread only waits for the end
        self.timings = Timings(STREAMS_STAGES)

    def _new_id(self) -> int:
        stream, self._next_id = self._next_id, self._next_id + 1
        return stream

    @staticmethod
    def _free_name(name: str, taken: Sequence[str]) -> str:
        """``name``, or ``name (2)``, ``name (3)``... where a stream already has it."""
        if name not in taken:
            return name
        k = 2
        while f"{name} ({k})" in taken:
            k += 1
        return f"{name} ({k})"

    @property
    def lanes(self) -> list[_Lane]:
        """The streams' lanes now, in the order they came."""
        return self._scheduler.lanes

    @property
    def stats(self) -> list[StreamStats]:
        """Each current stream's figures so far (safe to read while running); a removed stream leaves them."""
        return [lane.stats for lane in self.lanes]

    def add(self, source: Any, *, name: str | None = None, realtime: bool | None = None,
            **source_options: Any) -> StreamStats:  # fmt: skip
        """Add a stream, before or during a run; returns its :class:`StreamStats` (updated as it runs).

        ``source``: as one of ``sources``; ``name``: unique among the streams
        (else the source's own, numbered where taken). ``realtime`` and
        ``source_options`` default to the ones ``Streams`` was given. The source
        is opened first, here: its error is raised and nothing is added. During a
        run its reader starts at once. Thread-safe.
        """
        if name is not None:
            _check_name(name)
            with self._lock:
                if any(lane.name == name for lane in self.lanes):
                    raise InvalidArgumentError(f"a stream named {name!r} is already running: names are unique")
        options = {**self._options, **source_options}
        if realtime is not None:
            options["realtime"] = bool(realtime)
        if isinstance(source, (str, os.PathLike)):
            opened = open_source(source, **options)
        else:
            if source_options or realtime is not None:
                raise InvalidArgumentError("source options and realtime apply to a path or URL, not to a source object")
            opened = open_source(source)
        if hasattr(opened, "thread_count") and opened.thread_count is None:
            videos = 1 + sum(hasattr(lane.source, "thread_count") for lane in self.lanes)
            opened.thread_count = max(1, usable_cores() // videos)
        tracker = self._tracker() if self._tracker is not None else None
        with self._lock:
            taken = [lane.name for lane in self.lanes]
            if name is not None and name in taken:  # added by another thread meanwhile
                raise InvalidArgumentError(f"a stream named {name!r} is already running: names are unique")
            lane = _Lane(self._new_id(), name if name is not None else self._free_name(_name_of(opened), taken),
                         opened, None, tracker, self._lock)  # fmt: skip
            self._scheduler.add(lane)  # level with the others; told to stop at once when the run is ending
            reader = None
            if self._running:
                self._run_stats[lane.stream] = lane.stats
                # A video stream goes to a worker (while they start, to them all once started); else, or when
                # none runs any more, it is read here.
                workers = self._workers
                elsewhere = bool(self.workers) and _decodes_elsewhere(lane)
                if not (elsewhere and (workers is None or workers.add(lane, opened))):
                    reader = self._reader(lane)
        if reader is not None:
            reader.start()
        return lane.stats

    def remove(self, name: str | int) -> StreamStats:
        """Take a stream out, by name or id, before or during a run; returns its final :class:`StreamStats`.

        Its reader stops and its waiting frames are let go; its results already
        in flight are still delivered (waited for here, within the fence
        timeout, except when called from an output). The other streams go on,
        their order and figures untouched. Unknown: :class:`StreamNotFoundError`.
        In a persistent run its latency figures are summarised here and its
        samples let go, and the report keeps the latest :data:`FIGURES_WINDOW`
        streams removed: a service's streams come and go for days.
        """
        with self._lock:
            lane = self._find(name)
            if not lane.ended:
                lane.stats.stopped = True  # its reader, told to stop, may take a moment (a network read) to end
            lane.stats.let_go += self._scheduler.remove(lane)
            running = self._running
            if self._workers is not None:
                self._workers.remove(lane)
        if running and not getattr(self._delivering, "active", False):
            deadline = time.monotonic() + FENCE_TIMEOUT_S
            # A feeding thread may hold one of its frames (then submits it) and results may be in flight.
            while (lane.owned or lane.delivered < lane.submitted) and time.monotonic() < deadline:
                time.sleep(0.005)
        if self.persistent:  # a service's streams come and go for days: what each leaves behind stays small
            lane.stats._settle()
            with self._lock:
                self._left.append(lane.stream)
                while len(self._left) > FIGURES_WINDOW:
                    self._run_stats.pop(self._left.popleft(), None)
        return lane.stats

    def _find(self, name: str | int) -> _Lane:
        """The current lane called ``name`` (a str) or of id ``name`` (an int); the lock held."""
        if isinstance(name, str):
            found = [lane for lane in self.lanes if lane.name == name]
        elif isinstance(name, int) and not isinstance(name, bool):
            found = [lane for lane in self.lanes if lane.stream == name]
        else:
            raise InvalidArgumentError(f"a stream is named by its name (str) or id (int), got {type(name).__name__}")
        if not found:
            raise StreamNotFoundError(f"no stream {name!r}: streams are {[lane.name for lane in self.lanes]}")
        return found[0]

    def _reader(self, lane: _Lane) -> threading.Thread | None:
        """The lane's reader thread, made during a run (the lock held) and started by the caller once the lock is
        let go (a reader's first frame waits for the lock: started under it, the readers would race for it)."""
        if lane.ended:
            return None
        reader = threading.Thread(target=self._read, args=(lane,), name=f"npu_zc-src{lane.stream}", daemon=True)
        # Streams come and go for long: the readers that ended are forgotten.
        self._readers = [other for other in self._readers if other.ident is None or other.is_alive()]
        self._readers.append(reader)
        return reader

    def stop(self) -> None:
        """Ask a run to finish: sources stop, frames in flight are delivered."""
        self._scheduler.stop()

    # --- the run ---

    def run(
        self,
        on_result: Callable[[StreamResult], None] | Iterable[Callable[[StreamResult], None]] | None = None,
        *,
        duration: float | None = None,
        tick: Callable[[list[StreamStats]], None] | None = None,
        tick_seconds: float = 0.5,
    ) -> StreamsReport:
        """Every stream until each ends (or ``duration`` seconds, or :meth:`stop`, or Ctrl-C); with
        ``persistent``, until one of the latter three.

        ``on_result``: one callable or several, called on the delivery threads
        with each result, each stream's in frame order, one result of a stream
        at a time (results of different streams may come at once from
        different threads; an exception there stops the run and is raised). ``tick(stats)`` is called on the calling thread
        every ``tick_seconds`` (a live table). A ``Streams`` runs once: a second
        call, at the same time or after, raises :class:`StreamsRunError`.
        """
        if duration is not None and not duration > 0:  # NaN too
            raise InvalidArgumentError(f"duration must be a positive number of seconds (or None), got {duration}")
        if not 0 < tick_seconds < float("inf"):
            raise InvalidArgumentError(f"tick_seconds must be a positive number of seconds, got {tick_seconds}")
        outputs = [on_result] if callable(on_result) else list(on_result or [])
        with self._lock:
            if self._running:
                raise StreamsRunError("Streams.run is already running (called from another thread or from its own "
                                      "output): one run at a time")  # fmt: skip
            if self._ran:
                raise StreamsRunError("this Streams has already run (its sources were read): make a new Streams to run again")
            self._running = self._ran = True
        outcome: dict[str, Any] = {}
        finished = threading.Event()

        def feed() -> None:
            try:
                self._feed(outputs)
            except BaseException as exc:
                outcome["error"] = exc
            finally:
                finished.set()

        cpu0, wall0 = _cpu_seconds(), time.perf_counter()
        feeder = threading.Thread(target=feed, name="npu_zc-streams", daemon=True)
        interrupted: BaseException | None = None
        try:
            with self._lock:
                self._scheduler.start()
                self._run_stats = {lane.stream: lane.stats for lane in self.lanes}
                # A worker process reads the video streams it can (given to it once the run's queue is made).
                here = [lane for lane in self.lanes if not (self.workers and _decodes_elsewhere(lane))]
                readers = [reader for lane in here if (reader := self._reader(lane)) is not None]
            for reader in readers:
                reader.start()
            feeder.start()
            deadline = None if duration is None else time.monotonic() + duration
            next_tick = time.monotonic() + tick_seconds
            while True:
                now = time.monotonic()
                wait = min(next_tick, deadline if deadline is not None else next_tick) - now
                if finished.wait(max(0.0, wait)):
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    self.stop()
                    deadline = None  # stopping: now only waiting for the frames in flight
                if time.monotonic() >= next_tick:
                    # The next wake-up moves on with or without a tick: left behind, the wait above would be
                    # 0 s and this thread would spin holding the GIL, delaying every hand-over between the
                    # decoding, feeding and delivering threads by up to a switch interval (tens of ms a frame).
                    if tick is not None:
                        tick(self.stats)
                    next_tick = max(next_tick + tick_seconds, time.monotonic())
        except KeyboardInterrupt as exc:
            interrupted = exc
        finally:
            # Frames in flight finish (milliseconds). After a Ctrl-C, an output that does not return (a stuck
            # consumer) is waited for STOP_GRACE_S, or until a second Ctrl-C: then the run's threads (daemons) are
            # left to finish on their own (:attr:`abandoned`), as run_throughput does. Everything here may be
            # interrupted (a Ctrl-C lands between any two bytecodes), stop() too: it is in the loop.
            given_up_at = None if interrupted is None else time.monotonic() + STOP_GRACE_S
            if feeder.ident is None:  # it never started (a Ctrl-C or a failure while starting the readers)
                finished.set()
            stopped = False
            while True:
                try:
                    if not stopped:
                        self.stop()
                        stopped = True
                    if finished.wait(0.25):
                        break
                    if given_up_at is not None and time.monotonic() > given_up_at:
                        self._abandoned = True
                        break
                except KeyboardInterrupt as exc:
                    if interrupted is not None:
                        self._abandoned = True  # a second Ctrl-C: at once
                        break
                    interrupted, given_up_at = exc, time.monotonic() + STOP_GRACE_S
            if not self._abandoned:
                with self._lock:
                    self._running = False
                    readers = list(self._readers)
                for reader in readers:
                    if reader.ident is not None:  # one an add() has not started yet ends at once: its lane is stopped
                        reader.join(timeout=10)  # a network read ends within its timeout
                self._scheduler.drain()  # frames decoded but never taken (a removed lane's went at its removal)
        if self._abandoned and interrupted is not None:
            queue = self._queue
            if queue is not None:
                queue.abandon()  # no more frames; the inferences running end before the process may
            raise interrupted
        seconds = time.perf_counter() - wall0
        with self._lock:  # remove() may let an old entry go meanwhile
            ran = [stats for _, stats in sorted(self._run_stats.items())]
        if tick is not None:
            tick(self.stats)
        if interrupted is not None:
            raise interrupted
        if "error" in outcome:
            raise outcome["error"]
        return StreamsReport(
            model=self.pipeline.model_name, device=self.pipeline.device, requests=self.requests, seconds=seconds,
            cpu_seconds=_cpu_seconds() - cpu0, streams=ran, stages=self.timings.stats(), streams_fit=self.streams_fit,
        )  # fmt: skip

    def _read(self, lane: _Lane) -> None:
        """A source's thread: decode into the lane until the source ends, fails, or the run stops."""
        read_source(self._scheduler, lane, lane.source, lane.stats)

    def _feed(self, outputs: list[Callable[[StreamResult], None]]) -> None:
        """Runs the feeding threads (this one and ``feeders - 1`` more) into one queue, then waits for the results."""
        pipeline = self.pipeline
        session, postprocess = pipeline.session, pipeline.postprocess
        input_size = (pipeline.spec.width, pipeline.spec.height)
        timings = self.timings
        clock = time.perf_counter_ns

        # Per frame, on the delivery threads: names bound once, samples appended to the lists themselves.
        samples = timings.samples
        pre_ns, infer_ns, post_ns, latency_ns = (samples[stage] for stage in STREAMS_STAGES)
        delivering = self._delivering
        window = FIGURES_WINDOW if self.persistent else 0

        def deliver(result: Any) -> None:  # a delivery thread: each stream's results one at a time, in order
            started = clock()
            lane, frame_index, pts, decoded_ns, transform, frame_size, prepared_ns, decoded = result.userdata
            prediction = read(result, transform, frame_size)
            if lane.track is not None:
                prediction = lane.track(prediction)
            done = clock()
            latency = done - decoded_ns
            stats = lane.stats
            stats.frames += 1
            stats.latencies_ns.append(latency)
            if stats.first_ns is None:
                stats.first_ns = done
            stats.last_ns = done
            pre_ns.append(prepared_ns)
            infer_ns.append(int(result.latency_ms * 1e6))
            post_ns.append(done - started)
            latency_ns.append(latency)
            if window and len(stats.latencies_ns) > 2 * window:  # a persistent run: over its latest frames
                del stats.latencies_ns[:-window]
            if window and len(latency_ns) > 2 * window:
                timings.trim(window)
            out = StreamResult(lane.stream, stats.name, frame_index, pts, latency / 1e6, prediction, decoded)
            delivering.active = True
            try:
                for output in outputs:
                    output(out)
            finally:
                delivering.active = False
                lane.delivered += 1
                if decoded is not None:
                    decoded.release()

        # Spare sets of buffers (each with its own request): one being written by each feeding thread (and those
        # the decoding workers hold), one for each result being read; a set is taken from its acquire until its
        # result is released.
        held = DecodeWorkers.sets_for(self.workers, self.worker_feeders, self.worker_credits)
        spare = self.feeders + self.deliverers + held
        queue = session.queue(self.requests, heap=pipeline.heap, callback=deliver, buffers=self.requests + spare,
                              deliverers=self.deliverers)  # fmt: skip
        self._queue = queue
        read = ResultReader(postprocess, input_size, dmabuf_outputs=queue.dmabuf_outputs)
        failures: list[BaseException] = []
        workers = self._start_workers(queue, failures) if self.workers else None

        def feeding() -> None:
            try:
                self._feed_frames(queue)
            except BaseException as exc:  # the run stops: every feeding thread ends, the first failure is raised
                failures.append(exc)
                self.stop()

        helpers = [threading.Thread(target=feeding, name=f"npu_zc-feed{k}", daemon=True) for k in range(1, self.feeders)]
        try:
            for helper in helpers:
                helper.start()
            feeding()  # until every stream has ended (here or in a worker), or the run stops
            for helper in helpers:
                helper.join()
            if workers is not None:
                workers.finish()  # the frames they converted are submitted; each says bye and is reaped
            if failures:
                raise failures[0]
            queue.join()
        finally:
            if workers is not None:
                workers.close()
                self.worker_cpu, self.worker_copies = dict(workers.cpu), workers.copies
                self.worker_sleeps = dict(workers.sleeps)
                self.worker_receiving = dict(workers.receiving)
            queue.close()

    def _start_workers(self, queue: Any, failures: list[BaseException]) -> DecodeWorkers:
        """The decoding workers of a run, started, each given its share of the video streams. A failure of the
        queue (an inference's, an output's) that the receiving thread meets is the run's, as a feeding thread's
        is: kept in ``failures``, and the run stops."""
        transforms: dict[tuple[str, tuple[int, int]], Any] = {}
        spec = self.pipeline.spec
        lock = self._scheduler.lock

        def failed(exc: BaseException) -> None:
            failures.append(exc)
            self.stop()

        def submit(lane: _Lane, frame: Any, index: int, pts: float | None, decoded_ns: int, prepared_ns: int,
                   size: tuple[int, int], fmt: str, dropped: int) -> None:  # fmt: skip
            # A worker's receiving thread, in the stream's order: the frame is in the set's input already.
            lane.stats.dropped += dropped
            with lock:  # held as a feeding thread holds a frame: remove() waits for it, or it sees the removal
                wanted = not (lane.removed or lane.ended)  # not when taken out, or failed, meanwhile
                lane.owned = wanted
                if not wanted and lane.removed:  # converted in its worker, never inferred
                    lane.stats.let_go += 1
            if not wanted:
                queue.discard(frame)
                return
            try:
                transform = transforms.get((fmt, size))
                if transform is None:  # the same for any colours: the frame's geometry only
                    transform = transforms[(fmt, size)] = spec.converter(fmt, size[0], size[1]).transform
                queue.submit(frame, (lane, index, pts, decoded_ns, transform, size, prepared_ns, None), lane)
                lane.submitted += 1
            except ModelError as exc:  # reported here, not the worker's doing: the set goes back, the run stops
                queue.discard(frame)
                failed(exc)
            finally:
                lane.owned = False

        def ended(lane: _Lane, message: dict[str, Any]) -> None:
            stats, state = lane.stats, message.get("state")
            if state == "error":
                stats.error = str(message.get("error") or "its decoding worker failed")
            elif state == "done":
                stats.done = True
            else:
                stats.stopped = True
            stats.dropped = max(stats.dropped, int(message.get("dropped") or 0))
            stats.reconnects = int(message.get("reconnects") or 0)
            stats.copied = int(message.get("copied") or 0)
            stats.let_go += int(message.get("let_go") or 0)
            self._scheduler.ended(lane)

        workers = DecodeWorkers(self.workers, spec, queue, submit=submit, ended=ended, failed=failed,
                                nice=self.worker_nice, feeders=self.worker_feeders,
                                credits=self.worker_credits, live_frames=self.live_frames)  # fmt: skip
        workers.start()
        with self._lock:
            self._workers = workers
            lanes = [lane for lane in self.lanes if not lane.ended and _decodes_elsewhere(lane)]
        for lane in lanes:
            if not workers.add(lane, lane.source):  # none left running (each died at once): read here
                with self._lock:
                    reader = self._reader(lane)
                if reader is not None:
                    reader.start()
        return workers

    def _feed_frames(self, queue: Any) -> None:
        """A feeding thread: a free set of buffers, the next lane's frame converted into it in place, submitted."""
        clock = time.perf_counter_ns
        keep = self.keep_frames
        wants = None if isinstance(keep, bool) else keep  # asked per frame: only the frames an output will draw
        while True:
            slot = queue.acquire()
            picked = self._scheduler.next()
            if picked is None:
                queue.discard(slot)
                return
            lane, frame = picked
            try:
                try:
                    started = clock()
                    transform = self._prepare(lane, frame, slot)
                    prepared = clock() - started
                    kept = bool(wants(lane.name)) if wants is not None else bool(keep)
                except BaseException as exc:
                    queue.discard(slot)
                    frame.release()
                    if isinstance(exc, Error):  # a frame the engine refuses: this stream's error
                        self._fail(lane, exc)
                        continue
                    raise
                userdata = (lane, frame.index, frame.pts, frame.decoded_ns, transform, (frame.width, frame.height),
                            prepared, frame if kept else None)  # fmt: skip
                if not kept:
                    frame.release()  # the decoder's buffer goes back: the input holds the frame now
                queue.submit(slot, userdata, lane)  # the lane as the key: its results in its order
                lane.submitted += 1
            finally:
                self._scheduler.let_go(lane)

    def _fail(self, lane: _Lane, exc: BaseException) -> None:
        lane.stats.error = str(exc)
        self._scheduler.fail(lane)

    def _prepare(self, lane: _Lane, frame: Any, slot: Any) -> Any:
        """The decoded frame, read in place, into the slot's input buffer in one pass; returns the transform."""
        return convert_frame(lane.converters, self._converter, frame, slot.inputs[0], slot.input_buffers[0])

    def _converter(self, frame: Any) -> layout.Converter:
        return converter_for(self.pipeline.spec, frame)

    @property
    def abandoned(self) -> bool:
        """A run given up at Ctrl-C while an output had not returned: its threads (daemons) still hold the
        pipeline's buffers, so :meth:`close` leaves the pipeline to the process's end (and so should its owner)."""
        return self._abandoned

    def close(self) -> None:
        """Free the pipeline (when made here; not after an :attr:`abandoned` run)."""
        if not self._abandoned:  # an abandoned run was told to stop; a Ctrl-C inside that may have left a lock held
            self.stop()
        if self._owns_pipeline and not self._abandoned:
            self.pipeline.close()
        self._owns_pipeline = False  # closed once

    def __enter__(self) -> "Streams":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Named:
    """Stands for a source that could not be opened: its name, in the stats."""

    live = False

    def __init__(self, spec: Any) -> None:
        self.name = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else repr(spec)


def _plain(value: object) -> Any:
    """``value`` as JSON-ready data: its ``to_dict()`` (Detections, ClassScore...), an array's ``tolist()``, else
    itself."""
    to_dict = getattr(value, "to_dict", None)
    if to_dict is not None:
        return to_dict()
    tolist = getattr(value, "tolist", None)
    return tolist() if tolist is not None else value


def _name_of(source: Any) -> str:
    return str(getattr(source, "name", None) or source)


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"a stream's name is a non-empty str, got {name!r}")


def _decodes_elsewhere(lane: _Lane) -> bool:
    """Whether a worker process can read the lane's source (:func:`~.workers.decodes_in_a_worker`), still running."""
    return decodes_in_a_worker(lane.source) and not lane.ended


def _cpu_seconds() -> float:
    """This process's CPU seconds, and its children's that ended (the decoding workers, once reaped)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


__all__ = ["DEFAULT_LATENCY_BUDGET_MS", "FIGURES_WINDOW", "IDLE_CREDIT", "MAX_CONCURRENCY", "STREAMS_STAGES",
           "StreamResult", "StreamStats", "Streams", "StreamsReport", "default_deliverers", "default_feeders"]  # fmt: skip
