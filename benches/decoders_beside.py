"""Diagnosis (not a bench with targets): what slows PyAV's single-threaded 1080p H.264 decoders beside other work?
D decoders, each a process kept to a core of its own (0 .. D-1), decode alone, then beside M neighbours kept to the
next M cores, one kind at a time:

    python3 benches/decoders_beside.py --beside spin cache memory convert decode --rounds 3

With ``--same-cores`` each neighbour shares a decoder's core instead (neighbour i on core i mod D), as a worker's
feeding thread and the decoders of a ``Streams`` run take turns on theirs: the decoders' CPU a frame then also
counts what the turns cost them (their caches refilled after the neighbour's time slice).

- ``spin``: a Python loop (the cores busy, no memory traffic: turbo and power limits);
- ``cache``: numpy copies of 1 MiB (each core's own caches busy, little traffic beyond them);
- ``memory``: numpy copies of 64 MiB (the memory bus and the shared last-level cache busy);
- ``convert``: npu_zc's NV12 1080p -> RGBx 224x224 conversion, unpaced, over 16 frames in turn (what Streams does
  beside its decoders, without pause);
- ``decode``: more decoders of the same clip (the all-core decode rate's own neighbours).

Per kind: the decoders' CPU a frame (each decoder's ``thread_time``, the median over the decoders), the median and
range over the rounds, and against alone in the same round: alone is timed first and last in each round, each kind
is against the mean of the two, the kinds' order is reversed every other round, and the summary says how far alone
moved within a round, the resolution of the ratios on a machine whose speed drifts.
In a ``Streams`` run the decoders cost 1.0-1.5x what they cost alone (docs/streams.md, "What limits one process"):
this tells which neighbour reproduces that. Defaults: D half the cores, M the rest.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import statistics
import sys
import time
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

KINDS = ("spin", "cache", "memory", "convert", "decode")


def decoder(clip: str, core: int, frames: int, start: Event, out: Any) -> None:
    """Decodes ``frames`` frames on ``core`` once ``start`` is set; puts its CPU ms a frame, or a sentence."""
    import av

    os.sched_setaffinity(0, {core})
    with av.open(clip) as container:
        stream = container.streams.video[0]
        stream.thread_type = "NONE"
        it = iter(container.decode(stream))
        next(it, None)  # the codec opened and warm before the clock starts
        start.wait()
        cpu = time.thread_time()
        decoded = sum(1 for _ in zip(range(frames), it))
        if decoded < frames:
            out.put(f"{clip} ran out after {decoded} of the {frames} frames timed (and one before them): give a longer "
                    "clip or fewer --frames")
            return
        out.put(1000 * (time.thread_time() - cpu) / frames)


def neighbour(kind: str, clip: str, core: int, stop: Event) -> None:
    """Keeps ``core`` busy with ``kind`` until ``stop`` is set."""
    import numpy as np

    os.sched_setaffinity(0, {core})
    if kind == "spin":
        x = 0
        while not stop.is_set():
            for i in range(100_000):
                x += i
    elif kind in ("cache", "memory"):
        a = np.ones((64 << 20) if kind == "memory" else (1 << 20), np.uint8)
        b = np.empty_like(a)
        while not stop.is_set():
            for _ in range(8):
                np.copyto(b, a)
    elif kind == "convert":
        from npu_zc import Converter

        frames = [np.random.default_rng(i).integers(0, 256, (1620, 1920), np.uint8) for i in range(16)]
        dst = np.empty((224, 224, 4), np.uint8)
        convert = Converter("NV12", "RGBx", 224, 224, src_size=(1920, 1080), threads=1)
        k = 0
        while not stop.is_set():
            convert(frames[k % 16], dst)
            k += 1
    else:
        import av

        while not stop.is_set():
            with av.open(clip) as container:
                stream = container.streams.video[0]
                stream.thread_type = "NONE"
                for _ in container.decode(stream):
                    if stop.is_set():
                        break


def trial(clip: Path, kind: str, decoders: int, neighbours: int, frames: int, same_cores: bool) -> float:
    """The decoders' median CPU ms a frame beside ``neighbours`` of ``kind`` (none for ``alone``)."""
    ctx = multiprocessing.get_context("spawn")
    start, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    others = [] if kind == "alone" else [
        ctx.Process(target=neighbour, args=(kind, str(clip), i % decoders if same_cores else decoders + i, stop))
        for i in range(neighbours)
    ]  # fmt: skip
    ours = [ctx.Process(target=decoder, args=(str(clip), i, frames, start, out)) for i in range(decoders)]
    for p in others + ours:
        p.start()
    try:
        time.sleep(2.0)  # every process started (spawn imports numpy, PyAV) and its neighbour running
        start.set()
        ms = collect(out, ours, deadline=time.monotonic() + 300)
    finally:
        stop.set()
        for p in ours + others:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return statistics.median(ms)


def collect(out: Any, ours: list[Any], deadline: float) -> list[float]:
    """Each decoder's result; a decoder that reports a problem, dies without a result or outlasts the deadline ends
    the run with one sentence."""
    results: list[float] = []
    while len(results) < len(ours):
        try:
            got = out.get(timeout=1)
        except queue.Empty:
            dead = [p.exitcode for p in ours if p.exitcode not in (None, 0)]
            if dead:
                raise SystemExit(f"a decoder exited with status {dead[0]} before its result (its error is above)")
            if time.monotonic() > deadline:
                raise SystemExit("the decoders did not finish within 300 s") from None
            continue
        if isinstance(got, str):
            raise SystemExit(got)
        results.append(got)
    return results


def main() -> int:
    from npu_zc.cli.arguments import positive

    cores = len(os.sched_getaffinity(0))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--beside", nargs="+", choices=KINDS, default=list(KINDS), help="the neighbours' kinds")
    parser.add_argument("--decoders", type=positive, default=max(1, cores // 2),
                        help="decoders (default half the cores)")
    parser.add_argument("--neighbours", type=positive, default=None,
                        help="neighbours (default the other cores; with --same-cores, one a decoder)")
    parser.add_argument("--same-cores", action="store_true", help="each neighbour on a decoder's core")
    parser.add_argument("--rounds", type=positive, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--frames", type=positive, default=600, help="frames each decoder decodes (default 600)")
    parser.add_argument("--clip", type=Path, default=None, help="a 1080p H.264 clip (default: made here, 900 frames)")
    args = parser.parse_args()
    if args.decoders > cores - (0 if args.same_cores else 1):
        parser.error(f"--decoders {args.decoders}: each takes a core, and the neighbours need "
                     f"{'those' if args.same_cores else 'one more at least'}, of the {cores} cores here")
    if args.neighbours is not None:
        neighbours = args.neighbours
    else:
        neighbours = args.decoders if args.same_cores else cores - args.decoders
    if not args.same_cores and args.decoders + neighbours > cores:
        parser.error(f"{args.decoders} decoders and {neighbours} neighbours, each on a core of its own, need more "
                     f"than the {cores} cores here")
    from bench_streams_overhead import make_clip
    from results import scratch

    clip = args.clip or make_clip(scratch("decoders_beside-") / "pan.mp4", 1920, 1080, 900)
    where = "the decoders' cores" if args.same_cores else f"cores {args.decoders}-{args.decoders + neighbours - 1}"
    print(f"{args.decoders} decoders on cores 0-{args.decoders - 1}, {neighbours} neighbours on {where}; "
          f"{args.frames} frames a decoder", flush=True)  # fmt: skip
    kinds = ["alone", *args.beside]
    ms: dict[str, list[float]] = {k: [] for k in kinds}
    ratio: dict[str, list[float]] = {k: [] for k in kinds}
    drift: list[float] = []
    for round_ in range(args.rounds):
        # Alone at both ends of the round, each kind against their mean, the kinds' order reversed every other
        # round: a lent instance's own speed can move within a round by more than a neighbour's effect.
        order = args.beside if round_ % 2 == 0 else args.beside[::-1]
        first = trial(clip, "alone", args.decoders, neighbours, args.frames, args.same_cores)
        beside = {kind: trial(clip, kind, args.decoders, neighbours, args.frames, args.same_cores) for kind in order}
        last = trial(clip, "alone", args.decoders, neighbours, args.frames, args.same_cores)
        alone = (first + last) / 2
        drift.append(last / first)
        for kind, value in {"alone": alone, **beside}.items():
            ms[kind].append(value)
            ratio[kind].append(value / alone)
        print(f"round {round_ + 1}: alone {first:.3f} then {last:.3f}, "
              + ", ".join(f"{k} {beside[k]:.3f}" for k in order) + " ms a frame", flush=True)
    for kind in kinds:
        r, m = ratio[kind], ms[kind]
        print(f"{kind:8} {statistics.median(m):.3f} ms a frame ({min(m):.3f}-{max(m):.3f}), "
              f"{statistics.median(r):.2f}x alone ({min(r):.2f}-{max(r):.2f})")  # fmt: skip
    moved = max(abs(d - 1) for d in drift)
    print(f"alone moved by up to {100 * moved:.0f}% within a round (its last timing against its first): a ratio "
          f"nearer 1 than that is not a neighbour's effect")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
