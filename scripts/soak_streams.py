#!/usr/bin/env python3
"""A soak of decoding workers' long life: video streams added to and removed from a persistent ``Streams`` while
it runs, every result checked, this process's and the workers' resources sampled.

    .venv/bin/python scripts/soak_streams.py --seconds 60        # a minute, on any host
    .venv/bin/python scripts/soak_streams.py --seconds 1800      # by hand, 30 minutes

A persistent ``Streams`` with ``--workers`` decoding worker processes (a model that names a frame's colour, on the
CPU in f32) starts with no stream. Then, until the time is up, over and over (``tests/churn_helpers.py``, which
``tests/streams`` runs for a few dozen turns): ``add`` of the next of ``--names`` names, in turn a short H.264
clip (which ends on its own) and a long one (which is removed while it runs), its first result waited for, and
``remove`` of the oldest once more than ``--keep`` run. The clips' frames are red, green and blue in turn, so each
result says whether it came from its own frame.

Every result is checked as it comes: its stream's frames in order from the first with none missing (files lose
nothing), the colour of its frame, none after its stream's ``remove`` returned. Every removed stream: as many
results as its figures count, ``done`` only with every frame of its clip, never ``error``. Every second this
process's RSS (after ``malloc_trim``; the RSS as it is beside), fds, mappings and threads are sampled, and the
same of the workers together. The verdict: every check held, the workers the ones that started (none died or
came back), none left after the run, and the resources flat by ``scripts/soak.py``'s limits; the workers' RSS is
measured, not judged (as it is: glibc's arenas in them cannot be trimmed from here, and PyAV leaks a few hundred
bytes with each decode left before its end, docs/soak.md). Exit status 0 when all holds, 1 otherwise;
every sample is written to ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "tests")]

from churn_helpers import Checks, churn, colour_clip, colour_model  # noqa: E402
from soak import (LIMITS, children, churn_arguments, conclude, sample_beside, sample_process,  # noqa: E402
                  trimmed_sample, trimmer, warmup_of)

import npu_zc  # noqa: E402
from npu_zc.cli.arguments import positive  # noqa: E402

SHORT_FRAMES, LONG_FRAMES = 45, 900
WORKER_LIMITS = {f"workers_{key}": limit for key, limit in LIMITS.items() if key != "rss_mib"}
"""The workers' resources, summed over them, judged as this process's are; their RSS is measured, not judged: it
cannot be trimmed from here, and PyAV leaks a little with each decode left before its end (docs/soak.md)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    churn_arguments(parser, "soak_streams")
    parser.add_argument("--workers", type=positive, default=2, help="decoding worker processes (default 2)")
    args = parser.parse_args(argv)
    if args.names <= args.keep:
        parser.error("--names must be more than --keep: a name comes round again only once its stream is removed")
    warmup = warmup_of(parser, args)

    from npu_zc.runtime import CompileOptions

    with tempfile.TemporaryDirectory(prefix="npu_zc-soak-streams-") as folder:
        clips = [(colour_clip(Path(folder) / "short.mp4", SHORT_FRAMES), SHORT_FRAMES),
                 (colour_clip(Path(folder) / "long.mp4", LONG_FRAMES), LONG_FRAMES)]  # fmt: skip
        pipeline = npu_zc.Pipeline(colour_model(), "CPU", hint="throughput", labels=["red", "green", "blue"],
                                   options=CompileOptions(inference_precision="f32"))  # fmt: skip
        try:
            return soak(args, warmup, pipeline, clips)
        finally:
            pipeline.close()


def soak(args: argparse.Namespace, warmup: float, pipeline: Any, clips: list[tuple[Path, int]]) -> int:
    """Runs the churn beside the sampling until the time is up, stops the run, and gives the verdict."""
    streams = npu_zc.Streams([], pipeline, workers=args.workers, persistent=True)
    checks = Checks()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["report"] = streams.run(checks)
        except BaseException as exc:  # noqa: BLE001 - the run's own failure is the soak's finding
            outcome["error"] = exc

    runner = threading.Thread(target=run, name="soak-run", daemon=True)
    runner.start()
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while len(workers) < args.workers and runner.is_alive() and time.monotonic() < deadline:  # started one by one
        workers = children()
        time.sleep(0.05)
    print(f"soak_streams: {len(workers)} worker(s) {workers}", flush=True)

    counts: dict[str, int] = {}
    stop = threading.Event()

    def churning() -> None:
        try:
            counts.update(churn(streams, clips, checks, names=args.names, keep=args.keep,
                                go_on=lambda _: not stop.is_set() and runner.is_alive()))  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - an add or remove that raised: a failure
            checks.problem(f"the churn stopped: {exc!r}")

    malloc_trim = trimmer()

    def take() -> dict[str, float] | None:
        if children() != workers:
            checks.problem(f"the workers changed: {workers} at the start, {children()} now")
            return None
        theirs = [sample_process(pid) for pid in workers]
        together = {f"workers_{key}": sum(s[key] for s in theirs if s is not None) for key in LIMITS}
        return {**trimmed_sample(malloc_trim), **together}

    started = time.monotonic()
    try:
        samples = sample_beside(churning, stop, args.seconds, take, checks.problem)
    finally:
        streams.stop()
        runner.join(timeout=120)
        streams.close()
    if runner.is_alive():
        checks.problem("the run did not end within 120 s of stop()")
    elif "error" in outcome:
        checks.problem(f"the run raised {outcome['error']!r}")
    if len(workers) != args.workers:
        checks.problem(f"{len(workers)} worker(s) started, {args.workers} asked for")
    if children():
        checks.problem(f"child process(es) left after the run: {children()}")
    if not counts.get("removed"):
        checks.problem("no stream was removed")

    figures = {"seconds": args.seconds, "workers": args.workers, "names": args.names, "keep": args.keep,
               "warmup": warmup, **counts, "results": checks.results}  # fmt: skip
    summary = (f"soak_streams: {args.seconds:.0f} s; {counts.get('added', 0)} streams added, "
               f"{counts.get('removed', 0)} removed, {checks.results} results checked; {len(samples)} samples")
    return conclude("soak_streams", args.out, samples, started + warmup, {**LIMITS, **WORKER_LIMITS}, checks.problems,
                    figures, summary, also=("rss_untrimmed_mib", "workers_rss_mib"))


if __name__ == "__main__":
    sys.exit(main())
