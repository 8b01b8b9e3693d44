"""Stream density: how many 1080p30 H.264 streams one process holds in real time, against what users write and the bound.

    python3 benches/bench_streams.py [--seconds 10] [--max-streams 128] [--model efficientnet-lite0] [--device CPU]
    python3 benches/bench_streams.py --quick        # a smoke run: short trials, at most 4 streams
    python3 benches/bench_streams.py --model yolov8n.xml --config NUM_STREAMS=4   # the CPU plugin's own settings
    python3 benches/bench_streams.py --out-of-phase   # streams 1/N of a frame apart, as independent cameras run
    python3 benches/bench_streams.py --at 40 46 52 --rounds 2 --workers 4 8   # fixed counts, no search: where it stops
    python3 benches/bench_streams.py --model yolov8n.xml --fps 10 --at 2 3 4   # 10 FPS streams: a small machine

The clip: a pan across a scikit-image photo cut to 16:9 and upscaled to 1920x1080, encoded at 30 FPS (``--fps``)
with PyAV's libx264 (``--preset``, default veryfast), made once in a temporary folder. Every stream opens the clip
itself.

* **npu_zc Streams**, paced: N sources ``VideoSource(clip, realtime=True)`` into one ``npu_zc.Streams`` (one
  compiled model with the throughput hint, its streams fitted to the latency budget as ``Streams`` does for live
  sources (``--latency-budget``, default 100 ms: fewer CPU streams of more threads each where one inference takes
  more than half of it), twice its optimal number of requests, PyAV frame-threaded decoding, the decoder's
  planes converted in place). A count of streams is **held** when, over ``--seconds``, no stream
  dropped more than one frame (the start), every stream delivered at least 90% of the clip's rate (30 FPS unless
  ``--fps`` says) and every stream's p99 latency (decoder hand-over to result) stayed under 100 ms.
* **baseline**, paced: what users write today: a thread per stream with ``cv2.VideoCapture`` (FFmpeg decodes, OpenCV
  converts each frame to BGR), sleeping to the clip's pace, cv2 resize + centre crop + cvtColor + numpy
  normalisation into NCHW float, ``start_async`` on one shared ``ov.AsyncInferQueue`` of the original model compiled
  with the THROUGHPUT hint (under a lock), top-5 in its callback; a thread more than a frame behind its pace drops
  the frame (counted). Held on the same three conditions.
* **bound**: min(``benchmark_app`` FPS on the model npu_zc compiles, the all-core decode rate) / 30 (the all-core
  bound: the 85% target is measured against it). The decode rate: one PyAV decoder per core (one thread each,
  processes side by side) reading the clip's planes, frames summed.
* **shared-core bound**: decoding and inference share the same cores, so a frame costs a core 1/benchmark_app FPS
  plus 1/decode FPS of its time: 1 / (1/benchmark_app + 1/decode) / 30 streams (what one process could hold if
  nothing else cost anything). Reported beside the all-core bound.
* **unpaced**: N files as fast as they go (``Streams`` and the baseline without pacing), FPS in all.

The count of held streams is searched by doubling, then bisection. CPU: whatever this runs on (the table records it).
``--at N...`` runs ``Streams`` alone at those counts instead (no search, no baseline, no bounds), each ``--workers``
and ``--requests`` value in turn, ``--rounds`` times alternating: per trial the drops, the CPU a frame of the whole
process tree (the workers included) and by role of thread, the p99 of the inference and of decode to result, the
receiving thread's busy share and its wait for a set, and how busy the machine's cores were (``/proc/stat`` around
the trial): where and why the count stops. With it, ``--unpaced-too`` runs each count also unpaced, ``--alone``
measures decoding and benchmark_app alone first, ``--worker-nice N`` sets the workers' priority.
A YOLOv8n-sized detector: pass its IR with ``--model`` (made by Ultralytics' exporter at bench time: its exports are
AGPL and never committed); the baseline then runs the same model with a letterbox-free 640 stretch.
``--requests N`` sets ``Streams``' inferences in flight (several values, or ``default``, with ``--at``). ``--config KEY=VALUE`` (repeatable) sets an OpenVINO property of the compiled model for both ``Streams`` and the
baseline (e.g. ``NUM_STREAMS=4``: fewer CPU streams of more threads each, so each inference takes less time, what
a detector's p99 needs); the bound keeps benchmark_app's own choice (the most the device does). ``--fps N`` makes the
clip N FPS instead of 30 (each stream paced at it, held from 90% of it, the bounds divided by it): where a machine
holds no 30 FPS stream of a model.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results  # noqa: E402
from timing import decode_rate  # noqa: E402

FPS = 30
"""The clip's frame rate: each stream's pace (``--fps``)."""
HELD_P99_MS = 100.0
# --at's CPU a frame by role of thread, over every process (see run_ours).
ROLE_COLUMNS = ("decode", "convert", "deliver", "here_other", "workers_other")


def make_clip(path: Path, seconds: float, preset: str) -> Path:
    """1080p H.264 at FPS: a pan across a photo (real texture and motion)."""
    import av
    import cv2

    from npu_zc.pipeline import sample_photo

    photo = sample_photo("astronaut")
    wide = cv2.resize(photo, (2560, 2560), interpolation=cv2.INTER_CUBIC)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 1920, 1080, "yuv420p"
        stream.options = {"preset": preset}
        for i in range(round(seconds * FPS)):
            x, y = (4 * i) % 640, 400 + (2 * i) % 200
            image = np.ascontiguousarray(wide[y : y + 1080, x : x + 1920], np.uint8)  # (already u8: typed so)
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def held(stats: list[dict[str, float]]) -> bool:
    """Every stream kept up: at most one frame dropped (the start: the decoder's frame threads fill before the first
    frame comes out, and a live lane keeps only its newest frames), >= 90% of FPS over the trial (its start
    included), and p99 decode-to-result latency under 100 ms."""
    return all(s["dropped"] <= 1 and s["fps"] >= 0.9 * FPS and s["p99"] < HELD_P99_MS for s in stats)


def run_ours(pipeline: Any, clip: Path, streams: int, seconds: float, paced: bool, threads: int | None = None,
             feeders: int | None = None, deliverers: int | None = None, requests: int | None = None,
             workers: int | None = None, out_of_phase: bool = False, worker_nice: int | None = None,
             live_frames: int | None = None) -> dict[str, Any]:  # fmt: skip
    import npu_zc
    from bench_streams_overhead import Sampler, machine_jiffies, threads_of
    from npu_zc.pipeline.streams import default_deliverers, default_feeders
    from npu_zc.pipeline.workers import default_workers
    from npu_zc.runtime.session import usable_cores
    from npu_zc.sources import VideoSource

    staggered = paced and out_of_phase and streams > 1
    if staggered:  # Streams starts with one stream and takes the others as they come: its N-stream defaults fixed now
        cores = usable_cores()
        threads = threads or max(1, cores // streams)
        workers = default_workers(streams, cores) if workers is None else workers
        if feeders is None and not workers:  # (with workers Streams takes one: every frame comes converted)
            feeders = default_feeders(streams)
        if deliverers is None:
            deliverers = default_deliverers(streams, workers=workers, device=pipeline.device)
    sources = [VideoSource(clip, name=f"s{i}", realtime=paced, live=paced, thread_count=threads) for i in range(streams)]
    # (feeders and deliverers left out where None: Streams' defaults, as None gives them)
    lanes: dict[str, Any] = {} if live_frames is None else {"live_frames": live_frames}  # (unless set: older Streams)
    run = npu_zc.Streams(sources[:1] if staggered else sources, pipeline, requests=requests,
                         **threads_of(feeders, deliverers, workers, worker_nice), **lanes)
    tick = None
    if staggered:
        adder = threading.Thread(target=add_in_turn, args=(run, sources[1:], 1 / FPS / streams), daemon=True)

        def tick(stats: Any) -> None:  # the run is under way: the others join, each 1/N of a frame after the last
            if adder.ident is None:
                adder.start()

    busy_before = machine_jiffies()
    with Sampler() as sampler:
        report = run.run(duration=seconds, tick=tick, tick_seconds=0.05)
    busy_after = machine_jiffies()
    if staggered and adder.ident is not None:
        adder.join()  # (it ended long before: the last stream joins within a frame time and N adds)
    run.close()
    per = [{"dropped": s.dropped, "fps": s.fps, "p99": s.latency().p99, "frames": s.frames} for s in report.streams]
    busy = (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
    frames = max(1, report.frames)
    # CPU a frame by role of thread: this process's (decoding or feeding here, delivery, the rest: OpenVINO's
    # threads and the receiving thread) and the decoding workers' (their readers decode, their feeders convert).
    here = {role: ns / 1e6 / frames for role, ns in sampler.by_role().items()}
    away = {role: 1000 * seconds / frames for role, seconds in run.worker_cpu.items()}
    roles = {"decode": here["sources"] + away.get("sources", 0.0), "convert": here["feeders"] + away.get("feeders", 0.0),
             "deliver": here["delivery"], "here_other": here["other"],
             "workers_other": max(0.0, away.get("total", 0.0) - away.get("sources", 0.0) - away.get("feeders", 0.0)
                                  - away.get("start", 0.0))}  # fmt: skip
    # The workers' receiving thread: the share of its wall time spent reading and granting, and of waiting for a set
    # to grant (every set in flight or held).
    receiving = run.worker_receiving
    spent = receiving.get("busy", 0.0) + receiving.get("waiting", 0.0)
    hand_over = {"receiving_busy": receiving.get("busy", 0.0) / spent if spent else 0.0,
                 "no_set": receiving.get("no_set", 0.0) / spent if spent else 0.0}  # fmt: skip
    # Where a frame's decode-to-result time goes, over every frame: its inference from start to completion (a wait in
    # the plugin's queue included) against the whole; the rest is the hand-over (the lane, a set, the receiving thread)
    # and the wait for a delivery thread.
    samples = run.timings.samples
    p99 = {f"{stage}_p99": float(np.percentile(samples[stage], 99)) / 1e6 if samples.get(stage) else 0.0
           for stage in ("infer", "latency")}  # fmt: skip
    return {"fps": report.fps, "streams": per, "held": held(per), "cpu_ms_per_frame": 1000 * report.cpu_seconds / frames,
            "machine_busy": busy, "roles": roles, **hand_over, **p99}  # fmt: skip


def add_in_turn(run: Any, sources: list[Any], gap: float) -> None:
    """``sources`` added to the running ``run`` one after another, ``gap`` seconds apart (as far as adding one lets)."""
    began = time.monotonic()
    for k, source in enumerate(sources, 1):
        late = began + k * gap - time.monotonic()
        if late > 0:
            time.sleep(late)
        run.add(source)


class Baseline:
    """A thread per stream: cv2.VideoCapture, cv2 + numpy preprocessing, one shared AsyncInferQueue."""

    def __init__(self, model: str, device: str, config: dict[str, str] | None = None) -> None:
        import openvino as ov

        from npu_zc.runtime import core, model_normalisation, read_model

        source = read_model(model)
        norm = model_normalisation(source)
        self.mean = np.asarray(norm.mean if norm.mean is not None else (0.0, 0.0, 0.0), np.float32)
        self.scale = np.asarray(norm.scale if norm.scale is not None else (1.0, 1.0, 1.0), np.float32)
        self.compiled = core().compile_model(source, device, {"PERFORMANCE_HINT": "THROUGHPUT", **(config or {})})
        shape = self.compiled.inputs[0].shape
        self.size = (int(shape[3]), int(shape[2]))
        self.queue = ov.AsyncInferQueue(self.compiled)
        self.queue.set_callback(self._done)
        self.lock = threading.Lock()
        self.latencies: dict[int, list[float]] = {}
        self.frames: dict[int, int] = {}

    def _done(self, request: Any, userdata: Any) -> None:
        stream, read_at = userdata
        logits = request.get_output_tensor(0).data.reshape(-1)
        np.argsort(logits)[::-1][:5]
        self.latencies[stream].append((time.perf_counter() - read_at) * 1000)
        self.frames[stream] += 1

    def _preprocess(self, frame: np.ndarray) -> np.ndarray:
        import cv2

        w, h = self.size
        fh, fw = frame.shape[:2]
        s = max(w, h) / 0.875 / min(fh, fw)
        resized = cv2.resize(frame, (round(fw * s), round(fh * s)))
        y, x = (resized.shape[0] - h) // 2, (resized.shape[1] - w) // 2
        rgb = cv2.cvtColor(resized[y : y + h, x : x + w], cv2.COLOR_BGR2RGB)
        return np.expand_dims(((rgb.astype(np.float32) - self.mean) / self.scale).transpose(2, 0, 1), 0)

    def run(self, clip: Path, streams: int, seconds: float, paced: bool, out_of_phase: bool = False) -> dict[str, Any]:
        import cv2

        self.latencies = {i: [] for i in range(streams)}
        self.frames = {i: 0 for i in range(streams)}
        dropped = [0] * streams
        stop = threading.Event()

        def worker(stream: int) -> None:
            if paced and out_of_phase:  # 1/N of a frame after the stream before
                time.sleep(stream / FPS / streams)
            capture = cv2.VideoCapture(str(clip), cv2.CAP_FFMPEG)
            started, n = time.monotonic(), 0
            while not stop.is_set():
                ok, frame = capture.read()
                if not ok:
                    break
                read_at = time.perf_counter()
                if paced:
                    due = started + n / FPS
                    n += 1
                    late = time.monotonic() - due
                    if late > 1 / FPS:
                        dropped[stream] += 1  # more than a frame behind: the newest frame wins
                        continue
                    if late < 0:
                        time.sleep(-late)
                        read_at = time.perf_counter()
                tensor = self._preprocess(frame)
                with self.lock:
                    self.queue.start_async({0: tensor}, (stream, read_at))
            capture.release()

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(streams)]
        cpu0, t0 = _cpu(), time.perf_counter()
        for t in threads:
            t.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and any(t.is_alive() for t in threads):
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join()
        self.queue.wait_all()
        wall = time.perf_counter() - t0
        total = sum(self.frames.values())
        per = [{"dropped": dropped[i], "fps": self.frames[i] / wall, "frames": self.frames[i],
                "p99": float(np.percentile(self.latencies[i], 99)) if self.latencies[i] else float("inf")}
               for i in range(streams)]  # fmt: skip
        return {"fps": total / wall, "streams": per, "held": held(per), "cpu_ms_per_frame": 1000 * (_cpu() - cpu0) / max(1, total)}


def _requests(text: str) -> int | None:
    """A --requests value: a number, or "default" (Streams' own)."""
    return None if text == "default" else int(text)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def most_held(trial: Any, limit: int) -> tuple[int, dict[int, dict[str, Any]]]:
    """The largest N with trial(N)["held"], by doubling then bisection (held is assumed monotone)."""
    seen: dict[int, dict[str, Any]] = {}

    def ok(n: int) -> bool:
        if n not in seen:
            seen[n] = trial(n)
            s = seen[n]
            print(f"    {n:>3} streams: {'held' if s['held'] else 'not held'} ({s['fps']:.0f} FPS in all, "
                  f"{sum(x['dropped'] for x in s['streams'])} dropped, "
                  f"p99 max {max(x['p99'] for x in s['streams']):.0f} ms)", flush=True)  # fmt: skip
        return bool(seen[n]["held"])

    if not ok(1):
        return 0, seen
    good, n = 1, 2
    while n <= limit and ok(n):
        good, n = n, n * 2
    bad = min(n, limit + 1)
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if ok(mid) else (good, mid)
    return good, seen


def benchmark_app(args: Any, pipeline: Any, folder: Path) -> dict[str, Any]:
    """OpenVINO's benchmark_app (throughput hint) on the model as npu_zc compiles it, at its precision."""
    import openvino as ov
    from bench_throughput import run_benchmark_app

    ours_xml = folder / "npu_zc.xml"
    ov.save_model(pipeline.session.prepared.model, str(ours_xml), compress_to_fp16=False)
    precision = str(pipeline.session.property("INFERENCE_PRECISION_HINT"))
    print("bound    benchmark_app ...", flush=True)
    return run_benchmark_app(ours_xml, args.device, max(3.0, args.seconds), precision, [])


def each_alone(args: Any, pipeline: Any, clip: Path, folder: Path) -> dict[str, Any]:
    """``--alone``: what decoding and inference each cost on this machine when nothing else runs, to set beside the
    roles' CPU a frame in Streams (where both share the cores): decoding with one decoder per core and with as many
    decoders as the largest count (more decoders than cores take turns on them), and benchmark_app."""
    cores = len(os.sched_getaffinity(0))
    rows = []
    for decoders in sorted({cores, max(args.at)}):
        fps, cpu_ms = decode_rate(clip, cores, decoders)
        rows.append([f"decode: {decoders} single-threaded PyAV decoders (processes) on {cores} cores", round(fps), round(cpu_ms, 2)])
    app = benchmark_app(args, pipeline, folder)
    rows.append([f"infer: benchmark_app, throughput hint, {app['precision']}", round(app["fps"]), round(app["cpu_ms_per_frame"], 2)])
    for row in rows:
        print(f"alone    {row[0]}: {row[1]} FPS, {row[2]:.2f} ms CPU a frame", flush=True)
    return {"title": "Each part alone on the same machine, in the same run",
            "note": "CPU a frame: decoding, the decoders' processes' CPU over their frames; benchmark_app, its process's CPU "
                    "(its compilation included) over its iterations. Beside the trials' decode and here_other columns: what "
                    "sharing the cores adds.",
            "columns": ["", "FPS", "CPU ms / frame"], "rows": rows}  # fmt: skip


def live_lanes(args: Any) -> str:
    """A table title's words for the frames a paced stream's live lane keeps: ``--live-frames``, or Streams' default
    (one in trees older than ``LIVE_FRAMES``)."""
    from npu_zc.pipeline import scheduler

    frames = args.live_frames if args.live_frames is not None else getattr(scheduler, "LIVE_FRAMES", 1)
    given = "" if args.live_frames is not None else " (Streams' default)"
    return f", live lanes of {frames} frame{'s' if frames > 1 else ''}{given}"


def results_path(args: Any, config: dict[str, str], kind: str) -> Path:
    """The default results file: one per machine, model, settings that change the figures, and kind of run."""
    tag = "".join(f"--{k}-{v}" for k, v in config.items()).lower()
    tag += f"--switch-{args.switch_interval * 1e3:g}ms" if args.switch_interval is not None else ""
    tag += "--out-of-phase" if args.out_of_phase else ""
    tag += "--ours-only" if args.ours_only else ""
    tag += f"--worker-nice-{args.worker_nice}" if args.worker_nice is not None else ""
    tag += f"--live-frames-{args.live_frames}" if args.live_frames is not None else ""
    tag += "--requests-" + "-".join("default" if r is None else str(r) for r in args.request_counts) if args.request_counts else ""
    return results.RESULTS / f"bench_streams--{results.machine()['slug']}--{Path(args.model).stem}{tag}{kind}.json"


def at_counts(args: Any, pipeline: Any, unpaced_pipeline: Any, clip: Path, worker_counts: list[int | None],
              request_counts: list[int | None], fit: Any, config: dict[str, str], folder: Path) -> int:  # fmt: skip
    """``--at``: Streams alone at fixed counts of paced streams (and with ``--unpaced-too`` the same count of files
    as fast as they go, right after), each workers and requests value in turn, rounds alternating."""
    rows = []
    alone = [each_alone(args, unpaced_pipeline, clip, folder)] if args.alone else []
    pacings = (True, False) if args.unpaced_too else (True,)
    for round_ in range(1, args.rounds + 1):  # alternating: a machine's drift falls on every configuration alike
        for n in args.at:
            for workers, requests, paced in itertools.product(worker_counts, request_counts, pacings):
                r = run_ours(pipeline if paced else unpaced_pipeline, clip, n, args.seconds, paced, args.decoder_threads,
                             args.feeders, args.deliverers, requests, workers, args.out_of_phase,
                             args.worker_nice, args.live_frames)  # fmt: skip
                row = ["default" if workers is None else workers, "default" if requests is None else requests, n,
                       "paced" if paced else "unpaced", round_,
                       r["held"] if paced else None, round(r["fps"], 1), sum(x["dropped"] for x in r["streams"]),
                       round(max(x["p99"] for x in r["streams"]), 1), round(min(x["fps"] for x in r["streams"]), 2),
                       round(r["machine_busy"], 3), round(r["cpu_ms_per_frame"], 2),
                       *(round(r["roles"][k], 2) for k in ROLE_COLUMNS), round(r["infer_p99"], 1),
                       round(r["latency_p99"], 1), round(r["receiving_busy"], 3), round(r["no_set"], 3)]  # fmt: skip
                rows.append(row)
                roles = ", ".join(f"{k} {r['roles'][k]:.2f}" for k in ROLE_COLUMNS)
                print(f"    workers {row[0]!s:>7}, requests {row[1]!s:>7}, {n:>3} streams {row[3]}, round {round_}: "
                      f"{'' if not paced else 'held ' if r['held'] else 'not held '}"
                      f"({row[6]:.0f} FPS in all, {row[7]} dropped, p99 max {row[8]:.0f} ms, machine {100 * row[10]:.0f}% "
                      f"busy, CPU {row[11]:.2f} ms a frame: {roles}; p99 of all frames: inference {row[-4]:.1f} ms "
                      f"of {row[-3]:.1f}; receiving thread busy {100 * row[-2]:.0f}%, "
                      f"waiting for a set {100 * row[-1]:.0f}%)", flush=True)  # fmt: skip
    table = {
        "title": f"Streams at fixed counts, paced 1080p{FPS} H.264, {args.model} on {args.device}"
                 + "".join(f", {k}={v}" for k, v in config.items()) + (", streams out of phase" if args.out_of_phase else "")
                 + live_lanes(args),
        "note": f"{args.seconds:g} s trials, each count, workers and requests value in turn, {args.rounds} round(s) alternating; held as in "
                "the search; CPU a frame: the whole process tree (the decoding workers included); machine busy: the share of "
                "every core's time not idle over the trial (/proc/stat), whatever ran; by role (schedstat of this process's "
                "threads, the workers' own count): decode (the sources' readers, here or in the workers), convert (feeding "
                "threads: conversion, hand-over, submit), deliver (the queue's delivery threads), here_other (the rest of this "
                "process: OpenVINO's threads, the receiving thread), workers_other (the rest of the workers: FFmpeg's, their "
                "control thread; their start left out); with workers, the share of the receiving thread's wall time it was "
                "busy (reading, submitting, granting) and, of it, waiting for a free set to grant (every set in flight or "
                "held: no worker gets one meanwhile); p99 over every frame of its inference (start to completion, a wait "
                "in the plugin's queue included) and of its whole decode-to-result time (the rest: the hand-over and "
                "the wait for a delivery thread). "
                + (f"Decoding workers at nice {args.worker_nice}. " if args.worker_nice is not None else "")
                + (f"Paced Streams: {fit}." if fit is not None else "Paced Streams: the throughput hint's own streams.")
                + (" Unpaced: the throughput hint's own streams." if args.unpaced_too else ""),
        "columns": ["workers", "requests", "streams", "pacing", "round", "held", "FPS in all", "dropped", "worst p99 ms",
                    "slowest stream FPS", "machine busy", "CPU ms / frame", *(f"{k} ms" for k in ROLE_COLUMNS),
                    "inference p99 ms", "decode to result p99 ms", "receiving busy", "waiting for a set"],
        "rows": rows,
    }  # fmt: skip
    default = results_path(args, config, "--at" + ("-alone" if args.alone else "") + ("-unpaced" if args.unpaced_too else ""))
    path = results.save("bench_streams", [table, *alone], title="Stream density at fixed counts", path=args.json or default)
    print(f"results  {path}")
    return 0


def main() -> int:
    global FPS  # --fps: every stage reads the clip's pace from here
    from npu_zc.cli import arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=arguments.seconds(), default=10.0, help="each trial's length (default 10)")
    parser.add_argument("--clip-seconds", type=arguments.seconds(), default=12.0, help="the clip's length (default 12)")
    parser.add_argument("--max-streams", type=arguments.positive, default=128)
    parser.add_argument("--fps", type=arguments.positive, default=FPS,
                        help=f"the clip's frame rate: each stream's pace, held from 90%% of it (default {FPS})")
    parser.add_argument("--model", default="efficientnet-lite0")
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--preset", default="veryfast", help="libx264 preset of the clip (default veryfast)")
    parser.add_argument("--unpaced", type=arguments.positive, default=4, help="files in the unpaced run (default 4)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 s trials, at most 4 streams")
    parser.add_argument("--json", help="where to write the results (default benches/results/)")
    parser.add_argument("--decoder-threads", type=arguments.positive, help="FFmpeg threads per stream (default: Streams' share of the cores)")
    parser.add_argument("--ours-only", action="store_true", help="leave out the baseline (an experiment's quick run; its results file is named after it)")
    parser.add_argument("--feeders", type=arguments.positive, help="Streams' feeding threads (default: its own, one per two cores)")
    parser.add_argument("--deliverers", type=arguments.count,
                        help="Streams' delivery threads (default: its own, default_deliverers(); 1: one serial stage; 0: the "
                        "decoding workers' receiving thread delivers)")
    parser.add_argument("--config", action="append", type=arguments.setting, default=[], metavar="KEY=VALUE",
                        help="an OpenVINO property of the compiled model, e.g. NUM_STREAMS=4 (repeatable; Streams and baseline)")
    parser.add_argument("--workers", type=arguments.count, nargs="+",
                        help="Streams' decoding worker processes (default: its own; 0: none); several only with --at")
    parser.add_argument("--at", type=arguments.positive, nargs="+", metavar="N",
                        help="run Streams at these counts of paced streams only (no search, no baseline, no bounds)")
    parser.add_argument("--rounds", type=int, default=1, help="with --at: each count and --workers value N times, alternating")
    parser.add_argument("--unpaced-too", action="store_true",
                        help="with --at: each count also as that many files as fast as they go (the unpaced CPU a frame "
                             "beside the paced one, by role)")
    parser.add_argument("--alone", action="store_true",
                        help="with --at: first decoding alone and benchmark_app alone, each one's CPU a frame")
    parser.add_argument("--worker-nice", type=arguments.nice_levels, metavar="NICE",
                        help="the decoding workers this many nice levels below this process (Streams' worker_nice; "
                        "default: Streams' choice)")
    parser.add_argument("--live-frames", type=arguments.positive, metavar="N",
                        help="the newest frames each paced stream's live lane keeps (Streams' live_frames; default: "
                        "Streams' own, LIVE_FRAMES)")
    parser.add_argument("--requests", type=_requests, nargs="+",
                        help="Streams' inferences in flight (default: its own, twice the optimal number and at least one "
                             "per stream; 'default' names it beside numbers); several only with --at")
    parser.add_argument("--latency-budget", type=float, default=None, metavar="MS",
                        help="the paced trials' Streams fits the CPU plugin's streams to this budget, as Streams does for "
                             "live sources (default: Streams' own, 100; 0: the throughput hint's own streams)")
    parser.add_argument("--out-of-phase", action="store_true",
                        help="paced streams started one after another, 1/N of a frame apart, as independent cameras run "
                             "(default: all at once, each paced from its first decoded frame)")
    parser.add_argument("--switch-interval", type=arguments.seconds(), metavar="SECONDS",
                        help="Python's GIL switch interval (sys.setswitchinterval) for the whole run, Streams and baseline "
                             "alike (default: Python's, 0.005)")
    args = parser.parse_args()
    FPS = args.fps
    worker_counts = args.workers or [None]
    if len(worker_counts) > 1 and not args.at:
        parser.error("several --workers values need --at")
    if args.rounds < 1 or (args.rounds > 1 and not args.at):
        parser.error("--rounds must be at least 1, and more than 1 needs --at")
    if (args.unpaced_too or args.alone) and not args.at:
        parser.error("--unpaced-too and --alone need --at")
    args.request_counts = args.requests
    request_counts = args.requests or [None]
    if len(request_counts) > 1 and not args.at:
        parser.error("several --requests values need --at")
    args.workers, args.requests = worker_counts[0], request_counts[0]
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    if args.quick:
        args.seconds, args.clip_seconds, args.max_streams, args.unpaced = 2.0, 3.0, 4, 2

    import npu_zc

    cores = len(os.sched_getaffinity(0))
    folder = results.scratch("bench_streams-")
    print(f"clip     1080p{FPS} H.264 ({args.preset}), {args.clip_seconds:g} s, in {folder}", flush=True)
    clip = make_clip(folder / "pan1080.mp4", args.clip_seconds, args.preset)

    from npu_zc.pipeline.streams import DEFAULT_LATENCY_BUDGET_MS
    from npu_zc.runtime import CompileOptions

    config = dict(args.config)
    pipeline = npu_zc.Pipeline(args.model, args.device, hint="throughput", options=CompileOptions(extra=config))
    if config:
        print(f"config   {' '.join(f'{k}={v}' for k, v in config.items())}: "
              f"{pipeline.session.optimal_requests} optimal requests", flush=True)  # fmt: skip
    # The paced trials are live streams: Streams fits the plugin's streams to its latency budget for them (the
    # unpaced files keep the throughput hint's own), unless --config fixes them.
    budget = DEFAULT_LATENCY_BUDGET_MS if args.latency_budget is None else args.latency_budget
    live_pipeline, fit = pipeline, None
    if budget > 0:
        fitted = npu_zc.Pipeline(args.model, args.device, hint="throughput",
                                 options=CompileOptions(extra=config).with_latency_budget(budget))  # fmt: skip
        fit = fitted.session.streams_fit
        if fit is not None and fit.changed:
            live_pipeline = fitted
        else:
            fitted.close()
        print(f"fitted   {fit if fit is not None else 'nothing to fit (--config fixes the streams)'}", flush=True)
    # One untimed trial first, so that first inferences and lazy compilation fall outside the trials.
    run_ours(live_pipeline, clip, 1, 2.0, True, args.decoder_threads, args.feeders, args.deliverers, args.requests, args.workers)
    if args.at:
        return at_counts(args, live_pipeline, pipeline, clip, worker_counts, request_counts, fit, config, folder)
    app = benchmark_app(args, pipeline, folder)
    decode, _ = decode_rate(clip, cores)
    bound = min(app["fps"], decode) / FPS
    shared = 1 / (1 / app["fps"] + 1 / decode) / FPS if app["fps"] > 0 and decode > 0 else 0.0
    print(f"bound    benchmark_app {app['fps']:.0f} FPS, decode on {cores} cores {decode:.0f} FPS: {bound:.1f} streams "
          f"(shared cores: {shared:.1f})", flush=True)  # fmt: skip

    phases = " (out of phase: each stream 1/N of a frame after the one before)" if args.out_of_phase else ""
    print(f"paced    npu_zc Streams{phases} (decoder threads: {args.decoder_threads or 'a share of the cores'}, "
          f"feeding threads: {args.feeders or 'one per two cores'}, "
          f"delivery threads: {'its own' if args.deliverers is None else args.deliverers})", flush=True)  # fmt: skip
    ours_n, ours_runs = most_held(
        lambda n: run_ours(live_pipeline, clip, n, args.seconds, True, args.decoder_threads, args.feeders, args.deliverers,
                           args.requests, args.workers, args.out_of_phase, live_frames=args.live_frames),
        args.max_streams,
    )
    base_runs: dict[int, dict[str, Any]]  # most_held's
    base_n, base_runs, base_rows = 0, {}, []
    if not args.ours_only:
        baseline = Baseline(args.model, args.device, config)
        baseline.run(clip, 1, 2.0, True)
        print(f"paced    baseline (thread per stream, cv2.VideoCapture, AsyncInferQueue){phases}", flush=True)
        base_n, base_runs = most_held(lambda n: baseline.run(clip, n, args.seconds, True, args.out_of_phase), args.max_streams)
    print(f"unpaced  {args.unpaced} files", flush=True)
    ours_free = run_ours(pipeline, clip, args.unpaced, args.seconds, False, None, args.feeders, args.deliverers, args.requests, args.workers)
    if not args.ours_only:
        base_free = baseline.run(clip, args.unpaced, args.seconds, False)
        base_rows = [["baseline: thread per stream, cv2.VideoCapture, AsyncInferQueue", base_n,
                      base_n / bound if bound else 0.0, base_n / shared if shared else 0.0, 1.0, base_free["fps"],
                      base_free["cpu_ms_per_frame"]]]  # fmt: skip
    pipeline.close()
    if live_pipeline is not pipeline:
        live_pipeline.close()

    rows = [
        ["npu_zc Streams", ours_n, ours_n / bound if bound else 0.0, ours_n / shared if shared else 0.0,
         ours_n / base_n if base_n else None, ours_free["fps"], ours_free["cpu_ms_per_frame"]],
        *base_rows,
        [f"bound: min(benchmark_app {app['fps']:.0f}, decode {decode:.0f}) / {FPS}", round(bound, 1), 1.0,
         bound / shared if shared else 0.0, None, None, None],
        [f"shared-core bound: 1 / (1/{app['fps']:.0f} + 1/{decode:.0f}) / {FPS}", round(shared, 1),
         shared / bound if bound else 0.0, 1.0, None, None, None],
    ]  # fmt: skip
    trials = [[who, n, r["held"], r["fps"], sum(s["dropped"] for s in r["streams"]), max(s["p99"] for s in r["streams"]),
               min(s["fps"] for s in r["streams"])]
              for who, runs in (("npu_zc", ours_runs), ("baseline", base_runs)) for n, r in sorted(runs.items())]  # fmt: skip
    tables = [
        {"title": f"Streams held in real time, 1080p{FPS} H.264, {args.model} on {args.device}"
                  + "".join(f", {k}={v}" for k, v in config.items())
                  + (f", switch interval {args.switch_interval * 1e3:g} ms" if args.switch_interval is not None else "")
                  + (", streams out of phase" if args.out_of_phase else "") + live_lanes(args),
         "note": f"held: at most one frame dropped per stream (the start), every stream >= {0.9 * FPS:g} FPS, p99 decode-to-result < 100 ms over {args.seconds:g} s trials; "
                 + ("paced streams out of phase (each started 1/N of a frame after the one before, Streams' taken in "
                    "while it runs); " if args.out_of_phase else "paced streams in step (all started at once); ")
                 + f"unpaced: {args.unpaced} files as fast as they go. Targets: >= 2x the baseline, >= 85% of the bound "
                 f"(the all-core bound: min(benchmark_app, decode) / {FPS}); the shared-core bound (decode and inference on the same "
                 "cores) is the one a process can reach. "
                 + (f"Paced Streams: {fit}." if fit is not None else "Paced Streams: the throughput hint's own streams."),
         "columns": ["", "streams held", "share of bound", "share of shared-core bound", "x baseline",
                     f"unpaced FPS ({args.unpaced} files)", "CPU ms / frame (unpaced)"],
         "rows": rows},
        {"title": "Every trial", "columns": ["", "streams", "held", "FPS in all", "dropped", "worst p99 ms", "slowest stream FPS"],
         "rows": trials},
    ]  # fmt: skip
    # One file per model: the classifier's and the detector's tables side by side.
    default = results_path(args, config, "")
    path = results.save("bench_streams", tables, title="Stream density", path=args.json or default)
    print()
    for row in rows:
        print(f"{row[0]:<64} {row[1]!s:>6} streams")
    print(f"results  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
