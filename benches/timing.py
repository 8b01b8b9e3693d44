"""Timing helpers shared by the benchmark scripts.

The scripts run as ``python3 benches/NAME.py``, so this folder is on
``sys.path`` and they ``import timing``. Times are taken with
``perf_counter_ns``; ``STAT`` (best or median of the runs) is chosen once per
script with :func:`use_stat`. :func:`decode_rate` is the machine's all-core
decode rate, the bound the streams benches hold their figures against.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
from pathlib import Path
from typing import Callable

import numpy as np

STAT: Callable[[list[int]], float] = min


def use_stat(name: str) -> None:
    """``"min"`` (the best run: what the code can do) or ``"median"``."""
    global STAT
    STAT = min if name == "min" else statistics.median


def samples_ns(fn: Callable[[], object], runs: int) -> list[int]:
    """``runs`` timings of ``fn`` after one untimed call (caches, page faults, plan caches)."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - start)
    return times


def time_ms(fn: Callable[[], object], runs: int) -> float:
    return STAT(samples_ns(fn, runs)) / 1e6


def paired_ms(a: Callable[[], object], b: Callable[[], object], runs: int, rounds: int) -> tuple[float, float]:
    """Times two functions in alternating blocks, so that a burst of other
    work on the machine falls on both rather than on one of them."""
    block = max(1, runs // rounds)
    ta: list[int] = []
    tb: list[int] = []
    for _ in range(rounds):
        ta += samples_ns(a, block)
        tb += samples_ns(b, block)
    return STAT(ta) / 1e6, STAT(tb) / 1e6


def memcpy_of(nbytes: int) -> Callable[[], object]:
    """A copy of ``nbytes`` (read ``nbytes``, write ``nbytes``)."""
    a = np.ones(nbytes, np.uint8)
    b = np.empty_like(a)
    return lambda: np.copyto(b, a)


def thread_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process, by native thread id."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _decode_all(clip: str) -> tuple[int, float, float]:
    import av

    started, cpu = time.perf_counter(), time.process_time()
    with av.open(clip) as container:
        stream = container.streams.video[0]
        stream.thread_type = "NONE"
        frames = sum(1 for frame in container.decode(stream) if frame.planes)
    return frames, time.perf_counter() - started, time.process_time() - cpu


def decode_rate(clip: Path, cores: int, decoders: int | None = None) -> tuple[float, float]:
    """(frames per second, CPU milliseconds a frame) with ``decoders`` single-threaded PyAV decoders (default: one
    per core), each in its own process, side by side."""
    decoders = decoders or cores
    with multiprocessing.get_context("spawn").Pool(decoders) as pool:
        runs = pool.map(_decode_all, [str(clip)] * decoders)
    return sum(frames / seconds for frames, seconds, _ in runs), 1000 * sum(c for *_, c in runs) / sum(f for f, *_ in runs)
