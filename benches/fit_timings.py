"""Diagnosis (not a bench with targets): one inference of a model on the CPU plugin, timed as the latency fit times
it (``runtime/latency_fit.py``), at the throughput hint's own ``NUM_STREAMS`` and at each halving down to one.

    python3 benches/fit_timings.py yolo896.xml --repeat 2

Each repeat compiles every count afresh (the fit's own path, with a budget nothing meets), so the spread between
two fits shows; then which count the fit would keep at ``--budget``. ``--per-stream`` also times each count, compiled
again, round a request per stream (up to :data:`PER_STREAM_REQUESTS`, each warmed up once) instead of one request:
the fit's one request may be kept on slower cores than the rest, and this shows how far its timing sits from the
streams' median. ``--together`` times each count, compiled again, with a request per stream (every stream, up to
:data:`TOGETHER_REQUESTS`) started at once, :data:`TOGETHER_ROUNDS` times after a warm-up: an inference's time with
every stream busy, as under a full load of live streams (each request's own time, as OpenVINO measures it). With
the streams each count holds (``bench_streams.py --at ... --config NUM_STREAMS=N``) it places a model against the
fit's limit: docs/streams.md, "Detectors and the latency budget", has the Xeon's table made this way.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

PER_STREAM_REQUESTS = 15
"""``--per-stream``: requests timed in turn at most (the Xeon's 15 CPU streams under the hint)."""
TOGETHER_REQUESTS = 64
"""``--together``: requests started at once at most (one per CPU stream below that)."""
TOGETHER_ROUNDS = 5
"""``--together``: times every request is started at once and timed, after one untimed round."""


def main() -> int:
    from npu_zc.cli.arguments import positive

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a model file, or a built-in model's name")
    parser.add_argument("--repeat", type=positive, default=2, help="fits, each compiling every count (default 2)")
    parser.add_argument("--budget", type=float, default=None, metavar="MS",
                        help="the budget whose kept count is said (default: Streams' own, 100)")
    parser.add_argument("--per-stream", action="store_true",
                        help=f"also time each count round a request per stream (up to {PER_STREAM_REQUESTS}), "
                        "compiled again")  # fmt: skip
    parser.add_argument("--together", action="store_true",
                        help="also time each count with a request per stream started at once, compiled again")
    args = parser.parse_args()

    import npu_zc
    from npu_zc.pipeline.streams import DEFAULT_LATENCY_BUDGET_MS
    from npu_zc.runtime import CompileOptions
    from npu_zc.runtime.latency_fit import LATENCY_SHARE

    budget = DEFAULT_LATENCY_BUDGET_MS if args.budget is None else args.budget
    if not budget > 0:
        parser.error(f"--budget must be more than 0 ms, got {args.budget}")
    times: dict[int, list[float]] = {}
    per_stream: dict[int, list[float]] = {}
    together: dict[int, list[float]] = {}
    for repeat in range(1, args.repeat + 1):
        # A budget nothing meets: the fit's own timing at every count, down to one stream.
        pipeline = npu_zc.Pipeline(args.model, "CPU", hint="throughput",
                                   options=CompileOptions().with_latency_budget(1e-9))  # fmt: skip
        fit = pipeline.session.streams_fit
        pipeline.close()
        if fit is None:
            parser.error("the CPU plugin's streams are not fitted for this model (its options fix them)")
        for streams, ms in fit.tried:
            times.setdefault(streams, []).append(ms)
        print(f"fit {repeat}: " + ", ".join(f"NUM_STREAMS {n}: {ms:.1f} ms" for n, ms in fit.tried), flush=True)
        if args.per_stream:
            for streams, _ in fit.tried:
                per_stream.setdefault(streams, []).append(round_the_streams_ms(args.model, streams))
            print("  round a request per stream: " + ", ".join(f"NUM_STREAMS {n}: {ms[-1]:.1f} ms"
                                                            for n, ms in per_stream.items()), flush=True)  # fmt: skip
        if args.together:
            for streams, _ in fit.tried:
                together.setdefault(streams, []).append(all_streams_at_once_ms(args.model, streams))
            print("  a request per stream at once: " + ", ".join(f"NUM_STREAMS {n}: {ms[-1]:.1f} ms"
                                                                for n, ms in together.items()), flush=True)  # fmt: skip
    limit = budget * LATENCY_SHARE
    medians = {n: statistics.median(ms) for n, ms in times.items()}
    kept = next((n for n, ms in medians.items() if ms <= limit), min(medians))
    spreads = ", ".join(f"{n}: {min(ms):.1f}-{max(ms):.1f} ms" for n, ms in times.items())
    print(f"limit    {limit:g} ms ({LATENCY_SHARE:.0%} of {budget:g}): on these medians the fit keeps NUM_STREAMS "
          f"{kept} ({medians[kept]:.1f} ms); {spreads}")
    if per_stream:
        print("per stream " + ", ".join(f"{n}: {min(ms):.1f}-{max(ms):.1f} ms (median {statistics.median(ms):.1f})"
                                        for n, ms in per_stream.items()))  # fmt: skip
    if together:
        print("at once " + ", ".join(f"{n}: {min(ms):.1f}-{max(ms):.1f} ms (median {statistics.median(ms):.1f})"
                                     for n, ms in together.items()))  # fmt: skip
    return 0


def round_the_streams_ms(model: str, streams: int) -> float:
    """One inference's median time with ``streams`` CPU streams, round a request per stream (up to
    :data:`PER_STREAM_REQUESTS`)."""
    import numpy as np

    import npu_zc
    from npu_zc.runtime import CompileOptions
    from npu_zc.runtime.latency_fit import MEASURE_RUNS, median_inference_ms

    pipeline = npu_zc.Pipeline(model, "CPU", hint="throughput", options=CompileOptions(extra={"NUM_STREAMS": streams}))
    try:
        session = pipeline.session
        requests = [session.create_request() for _ in range(min(streams, PER_STREAM_REQUESTS))]
        zeros: list[Any] = [np.zeros(spec.shape, spec.dtype) for spec in session.inputs]
        infers = [functools.partial(request.infer_copy, zeros) for request in requests]
        return median_inference_ms(*infers, runs=max(MEASURE_RUNS, len(infers)))
    finally:
        pipeline.close()


def all_streams_at_once_ms(model: str, streams: int) -> float:
    """The median time of one inference with ``streams`` CPU streams, a request per stream (up to
    :data:`TOGETHER_REQUESTS`) started at once, over :data:`TOGETHER_ROUNDS` rounds after an untimed one."""
    import numpy as np

    import npu_zc
    from npu_zc.runtime import CompileOptions

    pipeline = npu_zc.Pipeline(model, "CPU", hint="throughput", options=CompileOptions(extra={"NUM_STREAMS": streams}))
    try:
        session = pipeline.session
        requests = [session.create_request() for _ in range(min(streams, TOGETHER_REQUESTS))]
        zeros: list[Any] = [np.zeros(spec.shape, spec.dtype) for spec in session.inputs]
        for request in requests:  # the requests' own input and output tensors set, each warmed up
            request.infer_copy(zeros)
        times: list[float] = []
        for round_ in range(TOGETHER_ROUNDS + 1):
            for request in requests:
                request.request.start_async()
            for request in requests:
                request.wait()
            if round_:
                times.extend(request.latency_ms for request in requests)
        return statistics.median(times)
    finally:
        pipeline.close()


if __name__ == "__main__":
    sys.exit(main())
