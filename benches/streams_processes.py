"""Diagnosis (not a bench with targets): P processes started together, each its own ``Pipeline`` (throughput hint)
and ``Streams`` over N paced 1080p30 H.264 streams. Does splitting the streams over processes, each with its own
GIL, raise the total rate past one process's?

    python3 benches/streams_processes.py --model efficientnet-lite0.xml 1x24 2x12 2x16 2x20 4x8 4x10
    python3 benches/streams_processes.py --model efficientnet-lite0.xml --share-cores 1x24 2x20

Each SPEC is PROCESSESxSTREAMS. ``--share-cores`` gives each process's plugin its share of the cores
(``INFERENCE_NUM_THREADS`` = cores / P); without it every plugin is sized for all of them. Each process gets
max(1, cores / 2 / P) feeding threads. Per spec: held (bench_streams' rule, in every process), the total FPS,
drops, worst p99 and CPU a frame of each process. docs/streams.md has the Xeon's figures.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

CORES = len(os.sched_getaffinity(0))


def worker(model: str, clip: Path, streams: int, seconds: float, start_at: float, processes: int, share: bool,
           out: Any) -> None:  # fmt: skip
    import npu_zc
    import bench_streams
    from npu_zc.runtime import CompileOptions

    extra = {"INFERENCE_NUM_THREADS": max(1, CORES // processes)} if share and processes > 1 else {}
    pipeline = npu_zc.Pipeline(model, "CPU", hint="throughput", options=CompileOptions(extra=extra))
    feeders = max(1, CORES // 2 // processes)
    bench_streams.run_ours(pipeline, clip, 1, 1.5, True, None, feeders, None)  # first inferences outside the trial
    time.sleep(max(0.0, start_at - time.time()))
    r = bench_streams.run_ours(pipeline, clip, streams, seconds, True, None, feeders, None)
    out.put({"held": r["held"], "fps": r["fps"], "dropped": sum(s["dropped"] for s in r["streams"]),
             "p99": max(s["p99"] for s in r["streams"]), "cpu": r["cpu_ms_per_frame"]})  # fmt: skip


def trial(model: str, clip: Path, processes: int, streams: int, seconds: float, share: bool, start_in: float) -> None:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + start_in  # every process compiled and warm before the trial starts
    children = [ctx.Process(target=worker, args=(model, clip, streams, seconds, start_at, processes, share, out))
                for _ in range(processes)]  # fmt: skip
    for child in children:
        child.start()
    got = [out.get(timeout=start_in + seconds + 120) for _ in children]
    for child in children:
        child.join(timeout=60)
    held = all(r["held"] for r in got)
    print(f"{processes} x {streams} = {processes * streams} streams: {'held' if held else 'not held'}; "
          f"{sum(r['fps'] for r in got):.0f} FPS; dropped {[r['dropped'] for r in got]}; "
          f"p99 ms {[round(r['p99']) for r in got]}; CPU ms a frame {[round(r['cpu'], 1) for r in got]}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", nargs="+", metavar="PxN", help="processes x streams each, e.g. 2x16")
    parser.add_argument("--model", default="efficientnet-lite0")
    parser.add_argument("--seconds", type=float, default=5.0, help="each trial's length (default 5)")
    parser.add_argument("--share-cores", action="store_true", help="each plugin limited to cores / P threads")
    parser.add_argument("--start-in", type=float, default=25.0, help="seconds for every process to compile and warm up")
    args = parser.parse_args()
    import bench_streams
    import results

    clip = bench_streams.make_clip(results.scratch("streams_processes-") / "pan.mp4", args.seconds + 3,
                                   "veryfast")  # fmt: skip
    for spec in args.specs:
        processes, streams = (int(v) for v in spec.lower().split("x"))
        trial(args.model, clip, processes, streams, args.seconds, args.share_cores, args.start_in)
    return 0


if __name__ == "__main__":
    sys.exit(main())
