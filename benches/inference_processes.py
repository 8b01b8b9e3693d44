"""Diagnosis (not a bench with targets): the NPU host's case split over P inference processes, each its own
``Pipeline`` (the model that costs nothing) and ``Streams`` over its share of N unpaced 1080p H.264 files, with its
share of the decoding workers. Is one receiving thread what keeps one process below the cores' decode rate, so that
several inference processes would go past it?

    python3 benches/inference_processes.py --streams 16 32 --processes 1 2 4 --rounds 2

Each process waits for a common start, runs its streams for ``--warm`` + ``--seconds`` s and counts the results
delivered within the common window of ``--seconds`` s after the warm-up; the table gives the sum over the processes
(medians of the rounds, alternating), beside the all-core decode rate measured in the same run. Each process gets
``workers / P`` decoding workers (``--workers``, default ``Streams``' own for N streams) and its plugin ``cores / P``
CPU streams. What it leaves out: one process's callback sees only its share of the streams; a service that must
deliver every stream's results in one process pays a hop per frame on top. docs/streams.md has the Xeon's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import results  # noqa: E402

CORES = len(os.sched_getaffinity(0))


def child(clip: str, streams: int, workers: int, processes: int, start_at: float, warm: float, seconds: float) -> dict[str, Any]:
    """One inference process: its figures over the common window."""
    import npu_zc
    from bench_streams_overhead import tiny_model
    from npu_zc.runtime import CompileOptions
    from npu_zc.sources import VideoSource

    extra = {"NUM_STREAMS": max(1, CORES // processes)} if processes > 1 else {}
    pipeline = npu_zc.Pipeline(tiny_model(), "CPU", hint="throughput", fit="stretch", top=3,
                               options=CompileOptions(inference_precision="f32", extra=extra))  # fmt: skip
    npu_zc.Streams([VideoSource(clip, name="w", thread_count=1, limit=30)], pipeline).run()  # first inferences
    sources = [VideoSource(clip, name=f"s{i}", thread_count=1) for i in range(streams)]
    run = npu_zc.Streams(sources, pipeline, workers=workers, deliverers=0)
    lo, hi = start_at + warm, start_at + warm + seconds
    counted = [0]
    clock = time.time

    def count(_: Any) -> None:
        if lo <= clock() < hi:
            counted[0] += 1

    time.sleep(max(0.0, start_at - time.time()))
    report = run.run(count, duration=warm + seconds)
    run.close()
    busy = run.worker_receiving["busy"] / max(1e-9, run.worker_receiving["busy"] + run.worker_receiving["waiting"])
    return {"frames": counted[0], "fps": counted[0] / seconds, "errors": list(report.errors),
            "all_cpu_s": report.cpu_seconds, "all_frames": report.frames, "receiving_busy": busy}  # fmt: skip


def trial(clip: Path, streams: int, processes: int, workers: int, warm: float, seconds: float) -> dict[str, Any]:
    start_at = time.time() + 6.0  # every process compiled and warmed up by then
    share, extra = divmod(streams, processes)
    procs = []
    for p in range(processes):
        args = json.dumps([str(clip), share + (p < extra), max(1, workers // processes), processes, start_at, warm, seconds])
        procs.append(subprocess.Popen([sys.executable, __file__, "--child", args], stdout=subprocess.PIPE, text=True))
    outs = [json.loads(proc.communicate()[0].strip().splitlines()[-1]) for proc in procs]
    for out in outs:
        assert not out["errors"], out["errors"]
    fps = sum(o["fps"] for o in outs)
    cpu_us = 1e6 * sum(o["all_cpu_s"] for o in outs) / max(1, sum(o["all_frames"] for o in outs))
    return {"fps": fps, "cpu_us": cpu_us, "receiving_busy": max(o["receiving_busy"] for o in outs)}


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(*json.loads(sys.argv[2]))), flush=True)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--workers", type=int, default=None, help="decoding workers in all (default: Streams' own)")
    parser.add_argument("--warm", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--frames", type=int, default=3600, help="the clip's length (no stream may end in a trial)")
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="where to write the results (default benches/results/)")
    args = parser.parse_args()
    from timing import decode_rate
    from bench_streams_overhead import make_clip
    from npu_zc.pipeline.workers import default_workers

    width, height = (int(v) for v in args.size.split("x"))
    clip = make_clip(results.scratch("inference_processes-") / "pan.mp4", width, height, args.frames)
    decode, _ = decode_rate(clip, CORES)
    print(f"decode   {decode:.0f} FPS: one single-threaded PyAV decoder per core, {CORES} cores", flush=True)
    configs = [(n, p) for n in args.streams for p in args.processes]
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {c: [] for c in configs}
    for round_ in range(args.rounds):
        for n, p in configs:
            workers = args.workers or default_workers(n, CORES)
            r = trial(clip, n, p, workers, args.warm, args.seconds)
            runs[(n, p)].append(r)
            print(f"round {round_ + 1}: {n} streams over {p} processes ({workers} workers in all): {r['fps']:.0f} FPS "
                  f"({r['fps'] / decode:.0%} of decode), CPU {r['cpu_us']:.0f} us/frame, busiest receiving thread "
                  f"{r['receiving_busy']:.0%}", flush=True)  # fmt: skip
    rows = []
    for n, p in configs:
        fpses = [r["fps"] for r in runs[(n, p)]]
        fps = statistics.median(fpses)
        rows.append([n, p, args.workers or default_workers(n, CORES), round(fps), f"{min(fpses):.0f}-{max(fpses):.0f}",
                     round(fps / decode, 3), round(statistics.median(r["cpu_us"] for r in runs[(n, p)])),
                     round(statistics.median(r["receiving_busy"] for r in runs[(n, p)]), 2)])  # fmt: skip
    table = {"title": f"The NPU host's case over P inference processes: {args.size} H.264 files, unpaced, a 64x64 "
                      "mean-pool model on CPU",
             "note": f"the sum of the processes' results delivered in a common {args.seconds:g} s window; medians of "
                     f"{args.rounds} rounds, alternating; decode rate {decode:.0f} FPS (one single-threaded PyAV decoder "
                     "per core). CPU us a frame: every process and its workers over the whole run. Each process's "
                     "callback sees its share of the streams only.",
             "columns": ["streams", "processes", "workers in all", "FPS", "FPS spread", "of decode rate", "CPU us",
                         "busiest receiving thread busy"],
             "rows": rows}  # fmt: skip
    path = results.save("inference_processes", [table], title="The NPU host's case over several inference processes",
                        path=args.json)
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
