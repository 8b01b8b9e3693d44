"""Streams' own cost per frame: small clips and a tiny model, unpaced, so that the scheduler is what limits FPS.

    python3 benches/bench_streams_overhead.py [--streams 8 16] [--seconds 6] [--size 320x240] [--feeders 1 2] [--deliverers 1 2]
    python3 benches/bench_streams_overhead.py --size 1920x1080 --frames 1200 --workers 4 --worker-nice 0 5  # workers' priority
    python3 benches/bench_streams_overhead.py --model efficientnet-lite0 --size 1920x1080 --frames 150 --seconds 0 --streams 4
    python3 benches/bench_streams_overhead.py --size 1920x1080 --frames 1200 --workers 4 8 --rounds 3  # medians of 3, alternating
    python3 benches/bench_streams_overhead.py --size 1920x1080 --frames 3600 --warm 2 --seconds 5 --decode-rate  # steady rate

N H.264 clips (a pan across a photo, made once with PyAV's libx264) run as fast as they go through one
``npu_zc.Streams`` into a model that costs next to nothing (a 3x3 average pool of a 64x64 input: three logits),
so that decoding and inference are cheap and the Python and hand-overs of each frame are what is left
(``--model`` and ``--size`` run a real case the same way: where its CPU goes, by thread). That model stands in for
an NPU's, which costs the host's CPU nothing: each run takes the decoding workers Streams chooses where the model
is not on the CPU unless ``--workers`` says, and with workers the delivery threads it chooses there (none: the
receiving thread delivers) unless ``--deliverers`` says, the workers' nice levels it chooses there unless
``--worker-nice`` says, and their feeding threads (one a worker).

Per frame: wall microseconds (1e6 / FPS) and CPU microseconds of the whole process, and of each role of thread
(``/proc/self/task/*/schedstat``, sampled every 50 ms): the sources' threads (PyAV demux + decode + the frame's
plane views), the feeding threads (lane hand-over, the conversion, submit), the queue's delivery thread
(waiting for results, postprocess, outputs), inference (the threads this process's Python never made: OpenVINO's)
and the rest (the workers' FFmpeg and control threads, this process's main thread). "Outside decoding" is every
role but the sources'; "outside decoding and inference" leaves out OpenVINO's threads too, which an NPU's plugin
replaces with its own.
A role whose threads' CPU per frame reaches the wall time per frame (a single thread's) is the serial stage.
Beside them, how busy this process is (its threads' CPU over the wall time), with workers how much of its wall time
the receiving thread is busy and, per frame, how long it ran on a core and how long it was runnable but waited for
one (a serial thread that other threads push off its core runs slower than its own work), and with ``--probe`` how
long a thread that sleeps 1 ms at a time waits to run Python again (for the GIL, or a core): a process whose lock is the cap shows waits of the order of the switch interval, one
that is not a fraction of a millisecond. The probe is one more thread taking the GIL a thousand times a second, so
it is left out unless asked for.

``--warm S`` measures FPS over the ``--seconds`` that follow the run's first S seconds, without the workers' start
(their imports, a fraction of a second of each) and the run's end, as a service that runs for hours sees it (the FPS
over the whole run beside it), with the whole machine's busy cores over that window from ``/proc/stat``: on a
machine nothing else uses, the cores the run keeps busy, and that CPU a frame. The clip must outlast the run.

Beside the CPU, the times each role's threads gave their core up to wait per frame (voluntary context switches:
for the GIL, a lock, a message, a frame, an inference), every process's: each is a hand-over that costs the waker a
wake-up and the sleeper its caches, and unlike the timings it moves little with the machine's load.

Timings on a shared machine move with its load; the Python each frame runs with the GIL held does not: one more
run per count of streams with a profile hook on every thread counts the Python function calls and the C calls
made from Python per frame, by role (deterministic, so it compares versions on a noisy machine). ``--rounds N`` runs
every configuration N times, alternating, and gives each figure's median and the FPS spread: two configurations
whose spreads overlap are not told apart by the run. ``--decode-rate`` measures the all-core decode rate at the start
of every round and compares each run with its own round's rate (a shared machine drifts within one call by as much).

``--config KEY=VALUE`` sets an OpenVINO property of the compiled model (e.g. ``NUM_STREAMS=2`` with
``INFERENCE_NUM_THREADS=2``): the stand-in still runs on the CPU plugin, whose streams' threads the receiving thread
wakes at every ``start_async``, so this shows how much of its time a frame is the plugin behind it. ``--clip PATH``
keeps the clip made there for the next call (calls that compare versions run one clip).

``--contend N`` adds N Python threads that spin through the timed runs. A thread that gives the GIL up (for a
decode, a conversion, a wait for a request, a lock) then waits up to a switch interval (5 ms) to take it back, as
among the Xeon's thirty-odd busy Python threads: the wall time per frame shows how many such hand-overs lie on
each frame's serial path, on a machine with too few cores to show it otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results  # noqa: E402
from python_per_frame import thread_sched  # noqa: E402  (per-thread CPU, written once there)

ROLES = (("npu_zc-src", "sources"), ("npu_zc-feed", "feeders"), ("npu_zc-streams", "feeders"), ("npu_zc-recv", "feeders"),
         ("npu_zc-queue", "delivery"))


SLEEP_ROLES = ("sources", "feeders", "delivery", "inference", "other")


def make_clip(path: Path, width: int, height: int, frames: int) -> Path:
    import av
    import cv2

    from npu_zc.pipeline import sample_photo

    photo = sample_photo("astronaut")
    wide = cv2.resize(photo, (width * 2, height * 2))
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast"}
        for i in range(frames):
            x, y = (2 * i) % width, (i % height)
            image = np.ascontiguousarray(wide[y : y + height, x : x + width], np.uint8)  # (already u8: typed so)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def tiny_model() -> Any:
    """[1, 3, 64, 64] -> three logits (the mean of each channel): inference costs microseconds."""
    import openvino as ov
    import openvino.opset13 as ops

    image = ops.parameter([1, 3, 64, 64], np.float32, name="image")
    pooled = ops.reduce_mean(image, ops.constant(np.array([2, 3], np.int64)), False)
    return ov.Model([ops.result(pooled)], [image], "tiny")


def thread_sleeps() -> dict[int, int]:
    """Each thread of this process: the times it gave its core up to wait (``voluntary_ctxt_switches``)."""
    out: dict[int, int] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                line = next(line for line in f if line.startswith("voluntary_ctxt_switches:"))
        except (OSError, StopIteration):
            continue
        out[int(tid)] = int(line.split()[1])
    return out


class Sampler:
    """CPU nanoseconds of each thread of this process, by role, sampled while a run goes on; and of the receiving
    thread, also the nanoseconds it was runnable but waited for a core (a thread preempted or queued behind others);
    and the times each thread gave its core up to wait (for the GIL, a lock, a message, an inference)."""

    def __init__(self) -> None:
        self.began = time.perf_counter_ns()
        self.wall_ns = 0
        self.before = thread_sched()
        self.slept_before = thread_sleeps()
        self.last: dict[int, tuple[int, int]] = {}
        self.slept: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="sampler", daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(0.05):
            self.sample()

    def sample(self) -> None:
        for t in threading.enumerate():
            if t.native_id is not None:
                self.names.setdefault(t.native_id, t.name)
        self.last.update(thread_sched())
        self.slept.update(thread_sleeps())

    def __enter__(self) -> "Sampler":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.sample()
        self.wall_ns = time.perf_counter_ns() - self.began

    def by_role(self, sleeps: bool = False) -> dict[str, int]:
        """CPU nanoseconds by role (``sleeps``: the times its threads gave a core up to wait); a thread Python never
        knew (none of this process's roles, made by a library) counts as inference: OpenVINO's threads, as PyAV
        decodes here on one thread (``thread_count=1``)."""
        out = {"sources": 0, "feeders": 0, "delivery": 0, "inference": 0, "other": 0}
        sampler = self.thread.native_id
        counts = self.slept if sleeps else {tid: ns for tid, (ns, _) in self.last.items()}
        before = self.slept_before if sleeps else {tid: ns for tid, (ns, _) in self.before.items()}
        for tid, count in counts.items():
            name = self.names.get(tid)
            if tid == sampler or (name or "").startswith(("spinner", "probe", "window")):
                continue
            out["inference" if name is None else role_of(name)] += count - before.get(tid, 0)
        return out

    def of_threads(self, prefix: str) -> tuple[int, int]:
        """(nanoseconds on a CPU, nanoseconds waiting for one) of the threads whose name starts with ``prefix``."""
        on_cpu = waiting = 0
        for tid, (ns, wait_ns) in self.last.items():
            if self.names.get(tid, "").startswith(prefix):
                before = self.before.get(tid, (0, 0))
                on_cpu, waiting = on_cpu + ns - before[0], waiting + wait_ns - before[1]
        return on_cpu, waiting


def role_of(name: str) -> str:
    return next((r for prefix, r in ROLES if name.startswith(prefix)), "other")


def count_calls(pipeline: Any, clip: Path, streams: int, frames: int, feeders: int | None,
                deliverers: int | None = None, workers: int | None = None) -> dict[str, float]:
    """Python calls (function and C calls made from Python) per frame, by role, over ``frames`` frames of each stream."""
    import collections

    import npu_zc
    from npu_zc.sources import VideoSource

    counts: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            role = role_of(threading.current_thread().name)
            with lock:
                counts[role] += 1

    sources = [VideoSource(clip, name=f"s{i}", thread_count=1, limit=frames) for i in range(streams)]
    run = npu_zc.Streams(sources, pipeline, **threads_of(feeders, deliverers, workers))
    npu_host_workers_as_chosen(run)
    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        report = run.run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        run.close()
    n = max(1, report.frames)
    return {role: counts[role] / n for role in ("sources", "feeders", "delivery")}


class StreamsCounts(TypedDict, total=False):
    """Streams' keyword arguments that threads_of gives."""

    feeders: int
    deliverers: int
    workers: int
    worker_nice: int


def threads_of(feeders: int | None, deliverers: int | None, workers: int | None = None,
               worker_nice: int | None = None) -> StreamsCounts:
    """Streams' thread and process counts, and the workers' nice level, where set (left out otherwise: an older
    Streams takes neither deliverers nor workers)."""
    counts = (("feeders", feeders), ("deliverers", deliverers), ("workers", workers), ("worker_nice", worker_nice))
    return cast(StreamsCounts, {k: v for k, v in counts if v is not None})


def npu_host_worker_nice() -> int | None:
    """The decoding workers' nice levels Streams chooses where the model is not on the CPU (None from a Streams that
    has no such choice)."""
    from npu_zc.pipeline import streams

    choose = getattr(streams, "default_worker_nice", None)
    return None if choose is None else int(choose("NPU"))


def npu_host_workers_as_chosen(run: Any) -> None:
    """The workers' feeding threads and sets ahead Streams chooses where the model is not on the CPU (a Streams
    without such a choice is left as it is)."""
    from npu_zc.pipeline import streams, workers

    feeders = getattr(streams, "default_worker_feeders", None)
    if feeders is not None:
        run.worker_feeders = feeders("NPU")
    credits = getattr(workers, "default_worker_credits", None)
    if credits is not None:
        run.worker_credits = credits("NPU")


def npu_host_workers(streams: int) -> int | None:
    """The decoding workers Streams chooses for ``streams`` where the model is not on the CPU (None from a Streams
    whose choice does not depend on the device: its own)."""
    from npu_zc.pipeline.workers import default_workers
    from npu_zc.runtime.session import usable_cores

    try:
        return int(default_workers(streams, usable_cores(), "NPU"))
    except TypeError:
        return None


def npu_host_deliverers(asked: int | None, workers: int | None, streams: int) -> int | None:
    """The delivery threads of a run: those asked for, else Streams' choice where the model is not on the CPU (the
    model here stands in for an NPU's, which costs this machine's CPU nothing): none with decoding workers (the
    receiving thread delivers), Streams' own otherwise."""
    from npu_zc.pipeline.streams import default_deliverers
    from npu_zc.pipeline.workers import default_workers
    from npu_zc.runtime.session import usable_cores

    if asked is not None:
        return asked
    planned = default_workers(streams, usable_cores()) if workers is None else workers
    return default_deliverers(streams, workers=planned, device="NPU") if planned else None


def probe_gil(stop: threading.Event, late: list[float]) -> None:
    """Sleeps 1 ms at a time and records how late it runs Python again: a wait for the GIL (or for a core)."""
    while not stop.is_set():
        began = time.perf_counter()
        time.sleep(0.001)
        late.append(time.perf_counter() - began - 0.001)


def spin(stop: threading.Event) -> None:
    """Python that wants the GIL all the time (as the Xeon's thirty-odd Python threads together did)."""
    while not stop.is_set():
        sum(range(200))


def machine_jiffies() -> tuple[int, int]:
    """(busy, all) clock ticks of every CPU of the machine so far (``/proc/stat``: all but idle and iowait is busy)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


class Window:
    """The frames delivered, and the machine's busy CPU, over the ``seconds`` s that follow a run's first ``warm`` s:
    the steady rate, without the workers' start and the end of the run."""

    def __init__(self, warm: float, seconds: float) -> None:
        self.warm, self.seconds = warm, seconds
        self.frames = 0
        self.edges: list[tuple[float, float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="window", daemon=True)

    def count(self, _: Any) -> None:
        self.frames += 1

    def _loop(self) -> None:
        for wait in (self.warm, self.seconds):
            if self.stop.wait(wait):
                return
            self.edges.append((time.perf_counter(), machine_jiffies()[0] / os.sysconf("SC_CLK_TCK"), self.frames))

    def __enter__(self) -> "Window":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def figures(self) -> tuple[float, float] | None:
        """(frames a second, the machine's busy cores) over the window; None if the run ended before it did."""
        if len(self.edges) < 2:
            return None
        (t0, busy0, n0), (t1, busy1, n1) = self.edges
        return (n1 - n0) / (t1 - t0), (busy1 - busy0) / (t1 - t0)


def run(pipeline: Any, clip: Path, streams: int, seconds: float | None, feeders: int | None,
        deliverers: int | None = None, contend: int = 0, workers: int | None = None, probe: bool = False,
        worker_nice: int | None = None, warm: float = 0.0) -> dict[str, Any]:
    """One run of ``streams`` streams; with ``warm`` (and ``seconds``), ``seconds`` s measured after ``warm`` s."""
    import npu_zc
    from npu_zc.sources import VideoSource

    sources = [VideoSource(clip, name=f"s{i}", thread_count=1) for i in range(streams)]
    run = npu_zc.Streams(sources, pipeline, **threads_of(feeders, deliverers, workers, worker_nice))
    npu_host_workers_as_chosen(run)
    stop = threading.Event()
    helpers = [threading.Thread(target=spin, args=(stop,), name=f"spinner{k}", daemon=True) for k in range(contend)]
    for helper in helpers:
        helper.start()
    late: list[float] = []
    if probe:
        helpers.append(threading.Thread(target=probe_gil, args=(stop, late), name="probe", daemon=True))
        helpers[-1].start()
    window = Window(warm, seconds) if warm and seconds else None
    try:
        with Sampler() as sampler, window or contextlib.nullcontext():
            report = run.run(window.count if window else None,
                             duration=window.warm + window.seconds if window else seconds)
    finally:
        stop.set()
        for thread in helpers:
            thread.join()
    run.close()
    assert not report.errors, report.errors
    frames = max(1, report.frames)
    ns = sampler.by_role()
    here = sum(ns.values()) / max(1, sampler.wall_ns)  # this process alone: the workers' CPU is added below
    # The decoding workers' threads (other processes), by role: their reader threads decode, their feeding threads
    # convert; the rest of them (FFmpeg's, the control thread) is "other".
    elsewhere = getattr(run, "worker_cpu", None) or {}
    if elsewhere:
        ns["sources"] += int(1e9 * elsewhere["sources"])
        ns["feeders"] += int(1e9 * elsewhere["feeders"])
        rest = elsewhere["total"] - elsewhere["sources"] - elsewhere["feeders"] - elsewhere.get("start", 0.0)
        ns["other"] += int(1e9 * max(0.0, rest))
    roles = {k: v / 1000 / frames for k, v in ns.items()}
    slept = sampler.by_role(sleeps=True)
    away = getattr(run, "worker_sleeps", None) or {}
    if away:
        slept["sources"] += away["sources"]
        slept["feeders"] += away["feeders"]
        slept["other"] += max(0, away["total"] - away["sources"] - away["feeders"] - away.get("start", 0))
    sleeps = {k: v / frames for k, v in slept.items()}
    # A worker's start (its imports, once a run) is left out of the per-frame figures: said beside them.
    started = elsewhere.get("start", 0.0) if elsewhere else 0.0
    late.sort()
    # With workers: the wall time of this process's receiving thread (reading every worker's frames, submitting them,
    # granting sets), busy or waiting for a message.
    receiving = getattr(run, "worker_receiving", None) or {}
    spent = receiving.get("busy", 0.0) + receiving.get("waiting", 0.0)
    received = max(1, receiving.get("frames", 0))
    on_cpu_ns, queued_ns = sampler.of_threads("npu_zc-recv")
    steady = window.figures() if window else None
    if window and steady is None:
        raise SystemExit(f"the run ended within its {warm:g} s warm-up and {seconds:g} s window, after {report.frames} "
                         "frames: make the clip longer (--frames), or the warm-up and window shorter")
    fps = steady[0] if steady else report.fps
    return {"fps": fps, "run_fps": report.fps, "wall_us": 1e6 / max(fps, 1e-9), "here_cores": here,
            "machine_cores": steady[1] if steady else None,
            "machine_cpu_us": 1e6 * steady[1] / steady[0] if steady else None,
            "receiving_busy": receiving["busy"] / spent if spent else None,
            "receiving_us": 1e6 * receiving["busy"] / received if spent else None,
            "receiving_cpu_us": on_cpu_ns / 1000 / received if spent else None,
            "receiving_queued_us": queued_ns / 1000 / received if spent else None,
            "probe_ms": (1e3 * late[len(late) // 2], 1e3 * late[int(0.9 * len(late))]) if late else None,
            "cpu_us": 1e6 * (report.cpu_seconds - started) / frames, "start_s": started,
            "workers": getattr(run, "workers", 0), "sleeps": sleeps, **roles}  # fmt: skip


def spread(values: list[Any], form: str) -> str | None:
    """The lowest and highest of a figure over the rounds (None with one round, or without the figure)."""
    if len(values) < 2 or any(v is None for v in values):
        return None
    return f"{form.format(min(values))}-{form.format(max(values))}"


def decode_span(decodes: list[tuple[float, float]]) -> str:
    """The decode rates of the rounds, as the table's note gives them."""
    fps, ms = [d[0] for d in decodes], [d[1] for d in decodes]
    return (f"{spread(fps, '{:.0f}') or f'{fps[0]:.0f}'} FPS, {spread(ms, '{:.2f}') or f'{ms[0]:.2f}'} ms of CPU a "
            "frame" + (" over the rounds" if len(decodes) > 1 else ""))


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over ``runs`` (one configuration's rounds; a figure absent from a run stays absent)."""
    merged: dict[str, Any] = {}
    for key, value in runs[0].items():
        values = [r[key] for r in runs]
        if value is None or any(v is None for v in values):
            merged[key] = None
        elif all(v == value for v in values):  # a setting (the workers), or a figure that did not move
            merged[key] = value
        elif isinstance(value, tuple):
            merged[key] = tuple(statistics.median(v[k] for v in values) for k in range(len(value)))
        elif isinstance(value, dict):
            merged[key] = {k: statistics.median(v[k] for v in values) for k in value}
        elif isinstance(value, (int, float)):
            merged[key] = statistics.median(values)
        else:
            merged[key] = value
    return merged


def main() -> int:
    from npu_zc.cli import arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=arguments.positive, nargs="+", default=[8, 16])
    parser.add_argument("--seconds", type=arguments.seconds(zero=True), default=6.0,
                        help="each run's length (0: until the clips end)")
    parser.add_argument("--warm", type=arguments.seconds(zero=True), default=0.0,
                        help="measure FPS over --seconds s after this many s of the run (the workers started, every "
                        "stream under way), with the machine's busy CPU; 0: FPS over the whole run (default)")
    parser.add_argument("--size", default="320x240")
    parser.add_argument("--frames", type=arguments.positive, default=3000,
                        help="the clip's length in frames (default 3000)")
    parser.add_argument("--clip", type=Path, default=None,
                        help="the clip's file: made there with --size and --frames unless it exists, then reused "
                        "(calls that compare versions run the same clip without making it again)")
    parser.add_argument("--model", default=None, help="a model file or efficientnet-lite0 (default: the tiny mean-pool model)")
    parser.add_argument("--config", action="append", type=arguments.setting, default=[], metavar="KEY=VALUE",
                        help="an OpenVINO property of the compiled model, e.g. NUM_STREAMS=4 (repeatable): how much of "
                        "the stand-in's cost is its plugin's threads")
    parser.add_argument("--feeders", type=arguments.positive, nargs="+", default=None,
                        help="feeding threads to compare (default: Streams' own choice only)")
    parser.add_argument("--deliverers", type=arguments.count, nargs="+", default=None,
                        help="delivery threads to compare (default: Streams' own choice only; 1: one serial stage)")
    parser.add_argument("--contend", type=arguments.count, default=0, metavar="N",
                        help="N more Python threads spinning through the timed runs: each GIL hand-over of a frame then "
                        "costs up to a switch interval, as among many busy Python threads (default 0)")
    parser.add_argument("--workers", type=arguments.count, nargs="+", default=None,
                        help="decoding worker processes to compare (default: Streams' own choice where the model is off the "
                        "CPU; 0: none)")
    parser.add_argument("--worker-nice", type=arguments.nice_levels, nargs="+", default=None, metavar="N",
                        help="the decoding workers this many nice levels below this process, to compare (Streams' "
                        "worker_nice; default: Streams' choice where the model is not on the CPU)")
    parser.add_argument("--probe", action="store_true",
                        help="a thread that sleeps 1 ms at a time beside each timed run: how late it runs Python again")
    parser.add_argument("--decode-rate", action="store_true",
                        help="measure the all-core decode rate of the clip (one single-threaded decoder per core) at the "
                        "start of every round: each run is compared with its own round's rate")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every configuration this many times, alternating: the table gives each figure's "
                        "median and the FPS spread (default 1)")
    parser.add_argument("--json", help="where to write the results (default benches/results/)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    width, height = (int(v) for v in args.size.split("x"))

    import npu_zc
    from npu_zc.runtime import CompileOptions

    # Long enough that no stream ends within a trial (every stream restarts nothing: an ended one would idle).
    clip = args.clip or results.scratch("bench_streams_overhead-") / f"pan{width}x{height}.mp4"
    if not clip.exists():
        made = clip.with_name(f".{clip.name}.part{os.getpid()}.mp4")
        clip = make_clip(made, width, height, args.frames).replace(clip)
    if args.model is None:
        pipeline = npu_zc.Pipeline(tiny_model(), "CPU", hint="throughput", fit="stretch", top=3,
                                   options=CompileOptions(inference_precision="f32", extra=dict(args.config)))  # fmt: skip
    else:
        pipeline = npu_zc.Pipeline(args.model, "CPU", hint="throughput", options=CompileOptions(extra=dict(args.config)))
    if args.config:
        print(f"config   {' '.join(f'{k}={v}' for k, v in args.config)}", flush=True)
    decodes: list[tuple[float, float]] = []
    """Per round with --decode-rate: the all-core decode rate (FPS, CPU ms a frame) measured at its start."""
    if args.decode_rate:
        from timing import decode_rate
    cores = len(os.sched_getaffinity(0))
    run(pipeline, clip, 2, 1.0, None)  # warm-up: first inferences, lazy compilation
    seconds = args.seconds or None
    rows, calls, sleeps = [], [], []
    configs = [(feeders, deliverers_asked, npu_host_workers(n) if workers is None else workers, nice, n)
               for feeders, deliverers_asked, workers, nice in itertools.product(
                   args.feeders or [None], args.deliverers or [None], args.workers or [None],
                   args.worker_nice or [npu_host_worker_nice()])
               for n in args.streams]  # fmt: skip
    runs: dict[tuple[Any, ...], list[dict[str, Any]]] = {config: [] for config in configs}
    # Per configuration: the delivery threads it runs with, and the labels of its feeders and those.
    chosen = {config: npu_host_deliverers(config[1], config[2], config[4]) for config in configs}
    labels = {config: ("default" if config[0] is None else str(config[0]),
                       "default" if chosen[config] is None else str(chosen[config])) for config in configs}  # fmt: skip
    for round_ in range(args.rounds):  # alternating: a machine's drift falls on every configuration alike
        decode = decode_ms = 0.0
        if args.decode_rate:  # in every round: a shared machine's speed drifts within a call as much as runs differ
            decode, decode_ms = decode_rate(clip, cores)
            decodes.append((decode, decode_ms))
            print(("" if args.rounds == 1 else f"round {round_ + 1}: ") + f"decode {decode:.0f} FPS, {decode_ms:.2f} "
                  f"ms of CPU a frame: one single-threaded PyAV decoder per core, {cores} cores", flush=True)
        for config in configs:
            feeders, _, workers, nice, n = config
            deliverers, (label, dlabel) = chosen[config], labels[config]
            r = run(pipeline, clip, n, seconds, feeders, deliverers, args.contend, workers, args.probe, nice, args.warm)
            r["of_decode"] = r["fps"] / decode if decode else None
            r["against_alone"] = r["sources"] / 1000 / decode_ms if decode else None
            runs[config].append(r)
            outside = r["cpu_us"] - r["sources"]
            print(("" if args.rounds == 1 else f"round {round_ + 1}: ")
                  + f"{n:>3} streams, feeders {label:>7}, deliverers {dlabel:>7}, workers {r['workers']}"
                  + ("" if nice is None else f" at nice {nice}") + f": {r['fps']:6.0f} FPS"
                  + (f" ({r['of_decode']:.0%} of decode, its decoding {r['against_alone']:.2f}x the CPU a frame of "
                     "decoding alone)" if decode else "")
                  + ("" if r["machine_cores"] is None else f" after {args.warm:g} s ({r['run_fps']:.0f} over the "
                     f"whole run), machine {r['machine_cores']:.1f} cores busy, {r['machine_cpu_us']:.0f} us/frame")
                  + f", wall {r['wall_us']:5.0f} us/frame, CPU {r['cpu_us']:5.0f} us/frame (sources {r['sources']:.0f}, "
                  f"feeders {r['feeders']:.0f}, delivery {r['delivery']:.0f}, inference {r['inference']:.0f}, other "
                  f"{r['other']:.0f}; outside decoding {outside:.0f}, outside decoding and inference "
                  f"{outside - r['inference']:.0f}; "
                  f"workers' start {r['start_s']:.2f} s CPU); this process {r['here_cores']:.2f} cores"
                  + ("" if r["probe_ms"] is None else f", a thread waits to run Python again {r['probe_ms'][0]:.2f} ms "
                     f"(median), {r['probe_ms'][1]:.2f} ms (p90)")
                  + ("" if r["receiving_busy"] is None else f"; receiving thread busy {r['receiving_busy']:.0%} of its "
                     f"time, {r['receiving_us']:.0f} us wall a frame, {r['receiving_cpu_us']:.0f} us on a core, "
                     f"{r['receiving_queued_us']:.0f} us waiting for one"), flush=True)  # fmt: skip
    for config in configs:
        feeders, _, workers, nice, n = config
        deliverers, (label, dlabel) = chosen[config], labels[config]
        r = median_run(runs[config])
        fpses = [x["fps"] for x in runs[config]]
        outside = r["cpu_us"] - r["sources"]
        rows.append([n, label, dlabel, r["workers"], nice, round(r["fps"]),
                     spread(fpses, "{:.0f}"),
                     None if r["of_decode"] is None else round(r["of_decode"], 3),
                     spread([x["of_decode"] for x in runs[config]], "{:.0%}"),
                     round(r["wall_us"]), round(r["cpu_us"]), round(r["sources"]), round(r["feeders"]),
                     round(r["delivery"]), round(r["inference"]), round(r["other"]), round(outside),
                     round(outside - r["inference"]), round(r["here_cores"], 2),
                     *((None, None) if r["probe_ms"] is None else (round(r["probe_ms"][0], 2), round(r["probe_ms"][1], 2))),
                     None if r["receiving_busy"] is None else round(r["receiving_busy"], 2),
                     None if r["receiving_us"] is None else round(r["receiving_us"]),
                     None if r["receiving_cpu_us"] is None else round(r["receiving_cpu_us"]),
                     None if r["receiving_queued_us"] is None else round(r["receiving_queued_us"]),
                     *((None, None, None) if r["machine_cores"] is None else
                       (round(r["run_fps"]), round(r["machine_cores"], 1), round(r["machine_cpu_us"]))),
                     None if r["against_alone"] is None else round(r["against_alone"], 2)])  # fmt: skip
        slept = r["sleeps"]
        sleeps.append([n, label, dlabel, r["workers"], *(round(slept[k], 2) for k in SLEEP_ROLES),
                       round(sum(slept.values()), 2)])  # fmt: skip
        c = count_calls(pipeline, clip, n, 50, feeders, deliverers, workers)
        calls.append([n, label, dlabel, r["workers"], round(c["sources"], 1), round(c["feeders"], 1),
                      round(c["delivery"], 1), round(sum(c.values()), 1)])  # fmt: skip
        print(f"{n:>3} streams, feeders {label}, deliverers {dlabel}, workers {r['workers']}: "
              + (f"median of {len(fpses)} rounds {r['fps']:.0f} FPS ({min(fpses):.0f}-{max(fpses):.0f}); " if len(fpses) > 1 else "")
              + f"Python calls per frame: sources {c['sources']:.1f}, feeders {c['feeders']:.1f}, "
              f"delivery {c['delivery']:.1f}; sleeps per frame: "
              + ", ".join(f"{k} {slept[k]:.2f}" for k in SLEEP_ROLES), flush=True)  # fmt: skip
    pipeline.close()
    tables = [{
        "title": f"Streams' cost per frame: {args.size} H.264 clips, unpaced, "
                 f"{args.model or 'a 64x64 mean-pool model'} on CPU"
                 + (f", {args.contend} Python threads spinning beside (CPU in all counts them)" if args.contend else ""),
        "note": "us per frame; CPU of every process (the decoding workers' too), by role of thread: this process's from "
                "/proc/self/task/*/schedstat, the workers' as each thread counted it; wall = 1e6 / FPS in all. "
                "A single thread whose CPU per frame reaches the wall time per frame is the serial stage. "
                "This process's cores: its threads' CPU over the run's wall time (the workers' not counted); GIL probe (--probe): "
                "how late a thread of this process that sleeps 1 ms at a time runs Python again (a wait for the GIL, or a core); "
                "receiving thread (with workers): the share of its wall time spent reading frames, submitting them and "
                "granting sets rather than waiting for them, and that time per frame; of it, the time the thread ran on a "
                "core and the time it was runnable but waited for one (schedstat's second field: preempted, or queued "
                "behind other threads; the rest of its busy time it was blocked in a call). "
                + (f"FPS over {args.seconds:g} s after the run's first {args.warm:g} s (the workers started, every "
                   "stream under way; FPS over the whole run beside it), and the machine's busy cores over that window "
                   "(/proc/stat: every process) and its CPU us a frame. " if args.warm and args.seconds else "")
                + (f"Each configuration run {args.rounds} times, alternating: every figure is its median over the rounds, "
                   "FPS spread the lowest and highest FPS. " if args.rounds > 1 else "")
                + (f"Decode rate: {decode_span(decodes)} (one single-threaded PyAV decoder per core, {cores} cores), "
                   "measured at the start of every round; of decode rate: FPS over its round's rate; decoding against "
                   "alone: the sources' threads' CPU a frame over its round's (what decoding beside everything else "
                   "costs more)" + ("; each the median over the rounds." if args.rounds > 1 else ".") if decodes else ""),
        "columns": ["streams", "feeders", "deliverers", "workers", "workers' nice", "FPS", "FPS spread", "of decode rate",
                    "of decode rate spread", "wall us", "CPU us",
                    "sources' threads", "feeding", "delivery", "inference (OpenVINO's threads)",
                    "other (FFmpeg, control threads)", "outside decoding", "outside decoding and inference",
                    "this process's cores", "GIL probe median ms", "GIL probe p90 ms", "receiving thread busy",
                    "receiving thread us wall / frame", "receiving thread us on a core / frame",
                    "receiving thread us waiting for a core / frame", "FPS over the whole run", "machine cores busy",
                    "machine CPU us", "decoding against alone"],
        "rows": rows,
    }, {
        "title": "Python calls per frame (run with the GIL held), by role of thread",
        "note": "function calls and C calls made from Python, counted by a profile hook on every thread of this process "
                "(not the decoding workers') over 50 frames of each stream: independent of the machine's load.",
        "columns": ["streams", "feeders", "deliverers", "workers", "sources' threads", "feeding", "delivery", "in all"],
        "rows": calls,
    }, {
        "title": "Sleeps per frame (a thread giving its core up to wait), by role of thread",
        "note": "voluntary context switches of every process's threads per frame delivered: a wait for the GIL, a lock, "
                "a message, a frame or an inference, each a hand-over that wakes the thread again later; this "
                "process's from /proc/self/task/*/status, the workers' as each thread counted it (getrusage), their "
                "start left out; roles as in the first table"
                + (", each the median over the rounds." if args.rounds > 1 else "."),
        "columns": ["streams", "feeders", "deliverers", "workers", "sources' threads", "feeding", "delivery",
                    "inference (OpenVINO's threads)", "other (FFmpeg, control threads)", "in all"],
        "rows": sleeps,
    }]  # fmt: skip
    path = results.save("bench_streams_overhead", tables, title="Streams' cost per frame", path=args.json)
    print(f"results  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
