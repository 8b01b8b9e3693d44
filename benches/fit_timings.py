"""Diagnosis (not a bench with targets): an inference of a model on the CPU plugin, timed as the latency fit times it
(``runtime/latency_fit.py``: a request per stream started at once), at the throughput hint's own ``NUM_STREAMS`` and
at each halving down to one.

    python3 benches/fit_timings.py yolo896.xml --repeat 2
    python3 benches/fit_timings.py yolo896.xml --repeat 2 --one-request

Each repeat compiles every count afresh (the fit's own path, with a budget nothing meets), so the spread between
two fits shows; then which count the fit would keep at ``--budget``. ``--one-request`` also times each count,
compiled again, with one request alone (its median over a few inferences after a warm-up): a timing that moved by
up to 1.7x between fits of one model on the Xeon, shown beside the fit's. With the streams each count holds
(``bench_streams.py --at ... --config NUM_STREAMS=N``) it places a model against the fit's limits: docs/streams.md,
"Detectors and the latency budget", has the Xeon's table made this way.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    from npu_zc.cli.arguments import positive

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a model file, or a built-in model's name")
    parser.add_argument("--repeat", type=positive, default=2, help="fits, each compiling every count (default 2)")
    parser.add_argument("--budget", type=float, default=None, metavar="MS",
                        help="the budget whose kept count is said (default: Streams' own, 100)")
    parser.add_argument("--one-request", action="store_true",
                        help="also time each count with one request alone, compiled again")  # fmt: skip
    args = parser.parse_args()

    import npu_zc
    from npu_zc.pipeline.streams import DEFAULT_LATENCY_BUDGET_MS
    from npu_zc.runtime import CompileOptions
    from npu_zc.runtime.latency_fit import StreamsFit

    budget = DEFAULT_LATENCY_BUDGET_MS if args.budget is None else args.budget
    if not budget > 0:
        parser.error(f"--budget must be more than 0 ms, got {args.budget}")
    times: dict[int, list[float]] = {}
    alone: dict[int, list[float]] = {}
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
        if args.one_request:
            for streams, _ in fit.tried:
                alone.setdefault(streams, []).append(one_request_ms(args.model, streams))
            print("  one request alone: " + ", ".join(f"NUM_STREAMS {n}: {ms[-1]:.1f} ms"
                                                   for n, ms in alone.items()), flush=True)  # fmt: skip
    # What the fit would keep on the medians: the same rule, the medians as its timings.
    medians = [(n, statistics.median(ms)) for n, ms in times.items()]
    kept = next((k for k in range(len(medians)) if StreamsFit(budget, tuple(medians[: k + 1])).fits), len(medians) - 1)
    fit = StreamsFit(budget, tuple(medians[: kept + 1]))
    spreads = ", ".join(f"{n}: {min(ms):.1f}-{max(ms):.1f} ms" for n, ms in times.items())
    print(f"on these medians the fit keeps NUM_STREAMS {fit.num_streams} ({fit.latency_ms:.1f} ms, limit "
          f"{fit.limit_ms:g} ms: {fit.share:.0%} of {budget:g}); with every stream busy {spreads}")
    if alone:
        spreads = ", ".join(f"{n}: {min(ms):.1f}-{max(ms):.1f} ms (median {statistics.median(ms):.1f})"
                            for n, ms in alone.items())  # fmt: skip
        print(f"one request alone {spreads}")
    return 0


def one_request_ms(model: str, streams: int) -> float:
    """One inference's median time with ``streams`` CPU streams, one request alone."""
    import numpy as np

    import npu_zc
    from npu_zc.runtime import CompileOptions
    from npu_zc.runtime.latency_fit import median_inference_ms

    pipeline = npu_zc.Pipeline(model, "CPU", hint="throughput", options=CompileOptions(extra={"NUM_STREAMS": streams}))
    try:
        request = pipeline.session.create_request()
        zeros: list[Any] = [np.zeros(spec.shape, spec.dtype) for spec in pipeline.session.inputs]
        return median_inference_ms(lambda: request.infer_copy(zeros))
    finally:
        pipeline.close()


if __name__ == "__main__":
    sys.exit(main())
