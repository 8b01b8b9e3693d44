"""Diagnosis (not a bench with targets): PyAV's single-threaded decoders of the 1080p H.264 clip, P processes of T
threads each, all started together. Does a core decoding two streams cost their decoders more CPU a frame than a
core decoding one, and does keeping a process's decoders to S at a time (a semaphore around each frame's decode)
take that back?

    python3 benches/decoders_per_core.py 16x1 32x1 8x2 8x4 8x4x2 --rounds 3

Each SPEC is PROCESSESxTHREADS[xSLOTS] (no slots: every thread decodes when it can). Per spec: frames a second
over the slowest process's wall time, and the decoders' CPU a frame (every process's own, ``process_time``), the
median and range over the rounds, which alternate the specs. A decoding worker of ``Streams`` is a process of
this shape (its readers, a thread per stream); docs/streams.md has the Xeon's figures.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def decode_in_threads(clip: str, threads: int, slots: int, frames: int) -> tuple[int, float, float]:
    """One process: ``threads`` decoders of ``frames`` frames each. Returns (frames, wall s, CPU s)."""
    import av

    gate = threading.Semaphore(slots) if slots else None
    decoded: list[int] = []

    def decode() -> None:
        with av.open(clip) as container:
            stream = container.streams.video[0]
            stream.thread_type = "NONE"
            it, count = iter(container.decode(stream)), 0
            while count < frames:
                if gate is not None:
                    with gate:
                        next(it)
                else:
                    next(it)
                count += 1
        decoded.append(count)

    workers = [threading.Thread(target=decode) for _ in range(threads)]
    wall, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(decoded), time.perf_counter() - wall, time.process_time() - cpu


def run(clip: Path, processes: int, threads: int, slots: int, frames: int) -> tuple[float, float]:
    """(frames a second, CPU ms a frame) of ``processes`` processes decoding side by side."""
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        runs = pool.starmap(decode_in_threads, [(str(clip), threads, slots, frames)] * processes)
    total = sum(f for f, _, _ in runs)
    return total / max(w for _, w, _ in runs), 1000 * sum(c for _, _, c in runs) / total


def spec(text: str) -> tuple[int, int, int]:
    parts = [int(v) for v in text.split("x")]
    if len(parts) not in (2, 3) or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: PROCESSESxTHREADS or PROCESSESxTHREADSxSLOTS, each at least 1")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", type=spec, nargs="+", metavar="SPEC", help="PROCESSESxTHREADS[xSLOTS]")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of every spec (default 3)")
    parser.add_argument("--frames", type=int, default=600, help="frames each decoder decodes (default 600)")
    parser.add_argument("--clip", type=Path, default=None, help="a 1080p H.264 clip (default: made here, 1200 frames)")
    args = parser.parse_args()
    from bench_streams_overhead import make_clip
    from results import scratch

    clip = args.clip or make_clip(scratch("decoders_per_core-") / "pan.mp4", 1920, 1080, 1200)
    results: dict[tuple[int, int, int], list[tuple[float, float]]] = {s: [] for s in args.specs}
    for round_ in range(args.rounds):  # alternating: a shared machine's drift falls on every spec alike
        for processes, threads, slots in args.specs:
            fps, ms = run(clip, processes, threads, slots, args.frames)
            results[(processes, threads, slots)].append((fps, ms))
            print(f"round {round_ + 1}: {processes}x{threads}" + (f"x{slots}" if slots else "")
                  + f": {fps:.0f} FPS, {ms:.3f} ms of CPU a frame", flush=True)  # fmt: skip
    for (processes, threads, slots), runs in results.items():
        cpu = [m for _, m in runs]
        rates = [f for f, _ in runs]
        print(f"{processes} processes x {threads} decoders" + (f", {slots} at a time" if slots else "")
              + f": {statistics.median(cpu):.3f} ms of CPU a frame ({min(cpu):.3f}-{max(cpu):.3f}), "
              f"{min(rates):.0f}-{max(rates):.0f} FPS")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
