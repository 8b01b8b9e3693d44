#!/usr/bin/env python3
"""A soak of the service's long life: streams added and removed over REST while it runs, with the process's
resources sampled.

    .venv/bin/python scripts/soak_serve.py --seconds 60        # a minute, on any host
    .venv/bin/python scripts/soak_serve.py --seconds 1800      # by hand, 30 minutes

A real ``Service`` (the tests' red-square YOLOv8 on the CPU in f32, HTTP with a token, MQTT to a local mosquitto
where there is one) starts with no stream. Then, until the time is up, over and over: ``POST /streams`` of the
next of ``--names`` names (a clip of the square going back and forth, each POST with its own line and zone),
``GET /streams`` and ``GET /metrics`` read, and the oldest stream ``DELETE``d once more than ``--keep`` run.
Names come round again, as a site's cameras do; a name never reused keeps its metric series by design
(docs/serve.md), which is not a leak. Every answer must be the expected status.

Every second the process's RSS, open fds, memory mappings, threads and child processes are sampled (the
same samples and limits as ``scripts/soak.py``, children too); RSS after glibc's ``malloc_trim``, so that what
the allocator keeps for its threads is not taken for a leak (the RSS before it is recorded beside). The verdict:
every request answered as expected, the service stopped cleanly with no child left, and the resources flat: after
a warm-up, the median of the last quarter of the samples exceeds that of the first quarter by at most the limits.
Exit status 0 when all holds, 1 otherwise; every sample is written to ``--out``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "tests"), str(ROOT / "tests" / "serve")]

from soak import (LIMITS, children, churn_arguments, conclude, sample_beside, trimmed_sample,  # noqa: E402
                  trimmer, warmup_of)


SOAK_LIMITS = {**LIMITS, "children": 0}


def stream_body(name: str, clip: Path, k: int) -> dict[str, Any]:
    """A stream with its own line and zone, placed a little differently each time."""
    x = 200 + (k * 37) % 240
    return {"name": name, "source": str(clip),
            "lines": [{"name": f"line{k % 7}", "start": [x, 20], "end": [x, 620]}],
            "zones": [{"name": f"zone{k % 5}", "polygon": [[x, 0], [639, 0], [639, 400], [x, 400]]}]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    churn_arguments(parser, "soak_serve")
    args = parser.parse_args(argv)
    warmup = warmup_of(parser, args)

    from conftest import save_red_square_yolo
    from serve_helpers import Broker, back_and_forth, config, square_clip

    from npu_zc.serve import Service

    folder = Path(tempfile.mkdtemp(prefix="npu_zc-soak-serve-"))
    broker = Broker(folder / "broker") if shutil.which("mosquitto") and shutil.which("mosquitto_passwd") else None
    try:
        model = save_red_square_yolo(folder / "red_square_openvino_model")
        clip = square_clip(folder / "square.mp4", back_and_forth(20))
        if broker is not None:
            broker.start()
        return soak(args, warmup, Service(config(model, [], broker, prefix="npu_zc/soak")), clip, broker is not None)
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(folder, ignore_errors=True)


def soak(args: argparse.Namespace, warmup: float, service: Any, clip: Path, mqtt: bool) -> int:
    """Runs the churn beside the sampling until the time is up, stops the service, and gives the verdict."""
    from serve_helpers import TOKEN, http

    service.start()
    port = service.port or 0
    print(f"soak_serve: service on port {port}, MQTT {'on' if mqtt else 'off (no mosquitto)'}", flush=True)
    malloc_trim = trimmer()

    problems: list[str] = []
    counts = {"added": 0, "removed": 0, "reads": 0}
    stop = threading.Event()

    def expect(status: int, wanted: int, what: str, body: Any) -> None:
        if status != wanted and len(problems) < 20:
            problems.append(f"{what}: {status} (wanted {wanted}): {str(body)[:200]}")

    def churn() -> None:
        try:
            turns()
        except Exception as exc:  # noqa: BLE001 - the service stopped answering (refused, timed out): a failure
            problems.append(f"the REST churn stopped: {exc!r}")

    def turns() -> None:
        running: list[str] = []
        k = 0
        while not stop.is_set():
            name = f"cam{k % args.names}"
            if name in running:  # still running from its last turn: take it out first
                running.remove(name)
                status, body = http(port, "DELETE", f"/streams/{name}", token=TOKEN)
                expect(status, 200, f"DELETE {name}", body)
                counts["removed"] += 1
            status, body = http(port, "POST", "/streams", stream_body(name, clip, k), token=TOKEN)
            expect(status, 201, f"POST {name}", body)
            counts["added"] += 1
            running.append(name)
            for path in ("/streams", "/metrics"):
                status, body = http(port, "GET", path, token=TOKEN)
                expect(status, 200, f"GET {path}", body)
                counts["reads"] += 1
            while len(running) > args.keep:
                oldest = running.pop(0)
                status, body = http(port, "DELETE", f"/streams/{oldest}", token=TOKEN)
                expect(status, 200, f"DELETE {oldest}", body)
                counts["removed"] += 1
            k += 1

    started = time.monotonic()
    try:
        samples = sample_beside(churn, stop, args.seconds,
                                lambda: {**trimmed_sample(malloc_trim), "children": len(children())}, problems.append)
    finally:
        service.stop()
    left = len(children()) - mqtt  # the broker, stopped by the caller
    if left:
        problems.append(f"{left} child process(es) left after the service stopped")
    if counts["added"] == 0:
        problems.append("no stream was added")

    figures = {"seconds": args.seconds, "names": args.names, "keep": args.keep, "warmup": warmup, "mqtt": mqtt, **counts}
    summary = (f"soak_serve: {args.seconds:.0f} s; {counts['added']} streams added, {counts['removed']} removed, "
               f"{counts['reads']} reads; {len(samples)} samples")
    return conclude("soak_serve", args.out, samples, started + warmup, SOAK_LIMITS, problems, figures, summary,
                    also=("rss_untrimmed_mib",))


if __name__ == "__main__":
    sys.exit(main())
