"""Python work per frame in throughput mode: what holds the GIL, counted where timing is too noisy to tell.

    python3 benches/python_per_frame.py [--frames 400] [--workers 2] [--requests auto]

Two runs of ``Pipeline(hint="throughput").run_throughput`` over the same 1080p frames:

1. with a profile hook on every thread (``threading.setprofile``): Python function calls and C calls made
   from Python per frame, by thread. Deterministic, so it compares versions on a noisy machine; every
   one of these runs with the GIL held.
2. without the hook: FPS, and CPU ms per frame of our threads (``/proc/self/task``). The GIL-held time
   per frame is estimated as our threads' CPU less what the preprocess's Rust conversion costs alone
   (timed here on the calling thread, GIL released inside): the rest is Python and the small native
   calls it makes with the GIL held (OpenVINO's start_async and set_tensor, the pools).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_throughput import MODEL, frames_1080p  # noqa: E402


def thread_ns() -> dict[int, int]:
    """Nanoseconds on a CPU of each thread of this process (``/proc/self/task/*/schedstat``: finer than ticks)."""
    return {tid: on_cpu for tid, (on_cpu, _) in thread_sched().items()}


def thread_sched() -> dict[int, tuple[int, int]]:
    """Each thread of this process: (nanoseconds on a CPU, nanoseconds runnable but waiting for one), the first two
    fields of ``/proc/self/task/*/schedstat``."""
    out: dict[int, tuple[int, int]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                on_cpu, waiting = f.read().split()[:2]
        except (OSError, ValueError):
            continue
        out[int(tid)] = (int(on_cpu), int(waiting))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=400)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--requests", default="auto")
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--convert-threads", type=int, default=None,
                        help="threads of the conversion timed alone (default: --workers, as the runner splits it)")
    args = parser.parse_args()
    args.convert_threads = args.convert_threads or args.workers
    from npu_zc.pipeline import Pipeline

    frames = frames_1080p()
    requests = None if args.requests == "auto" else int(args.requests)

    def source(n: int) -> Any:
        return (frames[i % len(frames)] for i in range(n))

    with Pipeline(MODEL, args.device, hint="throughput") as pipeline:
        pipeline.run_throughput(source(50), workers=args.workers, requests=requests)  # warm-up

        # 1. calls per frame, by thread
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        lock = threading.Lock()

        def hook(frame: Any, event: str, arg: Any) -> None:
            if event in ("call", "c_call"):
                name = threading.current_thread().name.rstrip("0123456789_").rstrip("-")
                with lock:
                    counts[(name, event)] += 1

        threading.setprofile(hook)
        sys.setprofile(hook)
        try:
            pipeline.run_throughput(source(args.frames), workers=args.workers, requests=requests)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
        callers = sorted({name for name, _ in counts})
        print(f"Python calls per frame ({args.frames} frames, {args.workers} workers):")
        total_py = total_c = 0.0
        for name in callers:
            py, c = counts[(name, "call")] / args.frames, counts[(name, "c_call")] / args.frames
            total_py, total_c = total_py + py, total_c + c
            print(f"  {name:24s} {py:7.1f} Python  {c:7.1f} C")
        print(f"  {'all':24s} {total_py:7.1f} Python  {total_c:7.1f} C")

        # 2. FPS and CPU per frame by thread
        names: dict[int, str] = {}
        latest: dict[int, int] = {}

        def sample() -> None:
            for thread in threading.enumerate():
                if thread.native_id is not None and thread is not threading.main_thread():
                    names[thread.native_id] = thread.name.rstrip("0123456789_").rstrip("-")
            latest.update(thread_ns())

        def on_result(index: int, prediction: Any) -> None:
            if index % 20 == 10:
                sample()

        before = thread_ns()
        report = pipeline.run_throughput(source(args.frames), on_result, workers=args.workers, requests=requests)
        ours: dict[str, float] = collections.defaultdict(float)
        for tid, name in names.items():
            ours[name] += (latest[tid] - before.get(tid, 0)) / 1e6 / report.frames
        # the conversion alone, on this thread
        from npu_zc.pipeline.preprocess import Preprocessor

        with pipeline.session.queue(1) as queue:
            frame = queue.acquire()
            threads = {"threads": args.convert_threads} if args.convert_threads != 1 else {}  # older versions: 1
            pre = Preprocessor(pipeline.spec, **threads)
            conv = pre.converter(frames[0].shape[0], frames[0].shape[1])
            for _ in range(20):
                conv(frames[0], frame.inputs[0])
            started, n = time.thread_time(), 200
            for i in range(n):
                conv(frames[i % len(frames)], frame.inputs[0])
            convert_ms = 1000 * (time.thread_time() - started) / n
            queue.discard(frame)
            pre.close()
        cpu_ours = sum(ours.values())
        print(f"FPS {report.fps:.1f} ({report.frames} frames, {report.requests} requests, cpu {report.cpu_ms_per_frame:.3f} ms/frame)")
        print("CPU ms per frame of our threads: " + ", ".join(f"{k} {v:.3f}" for k, v in ours.items()))
        print(f"conversion alone {convert_ms:.3f} ms/frame; our threads {cpu_ours:.3f} ms/frame; "
              f"GIL-held estimate {cpu_ours - convert_ms:.3f} ms/frame")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
