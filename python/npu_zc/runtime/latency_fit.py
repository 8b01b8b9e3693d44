"""Fitting the CPU plugin's streams to a latency budget.

Under the throughput hint the CPU plugin runs as many inferences side by side
as it has cores (``NUM_STREAMS``), each on one core: the most frames a second,
but every frame waits for the whole model on a single core. A model whose one
inference takes most of a live stream's budget there cannot hold any stream;
fewer streams give each inference more threads: lower latency, fewer frames a
second.

:func:`fit_streams` halves ``NUM_STREAMS`` (doubling the threads of each
inference) while one inference, measured on the compiled model, takes more
than :data:`LATENCY_SHARE` of the budget, down to one stream. Only a model that
alone takes more than 70% of the budget is fitted, and fitting stops at the
first count within it: fewer streams carry fewer frames a second. On the Xeon
a model timed at up to about three quarters of the budget held as many live
streams with the hint's streams as fitted, or more, and one from about 80% held
more fitted; 70% sits where both held alike (``docs/streams.md``, "Detectors
and the latency budget", which also says how much the timing moves between
fits).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

LATENCY_SHARE = 0.7
"""The part of the latency budget one inference, timed alone, may take before the streams are fitted (the rest:
decoding, the queue, delivery and the plugin's tail under load)."""

MEASURE_RUNS = 7
"""Timed inferences per candidate (after one warm-up), fewer for a slow model: see :data:`MEASURE_SECONDS`."""

MEASURE_SECONDS = 1.0
"""Per candidate, timing stops after this long once three inferences are timed."""

Compiled = TypeVar("Compiled")


@dataclass(frozen=True)
class StreamsFit:
    """What :func:`fit_streams` tried, in order: ``(NUM_STREAMS, median ms of one inference)``; the last is kept."""

    budget_ms: float
    tried: tuple[tuple[int, float], ...]

    @property
    def num_streams(self) -> int:
        return self.tried[-1][0]

    @property
    def latency_ms(self) -> float:
        """One inference's median time with :attr:`num_streams`."""
        return self.tried[-1][1]

    @property
    def limit_ms(self) -> float:
        """What one inference may take: :data:`LATENCY_SHARE` of the budget."""
        return self.budget_ms * LATENCY_SHARE

    @property
    def fits(self) -> bool:
        return self.latency_ms <= self.limit_ms

    @property
    def changed(self) -> bool:
        """Whether fewer streams were chosen than the hint's own."""
        return len(self.tried) > 1

    def to_dict(self) -> dict[str, object]:
        return {"budget_ms": self.budget_ms, "limit_ms": round(self.limit_ms, 3), "num_streams": self.num_streams,
                "fits": self.fits, "tried": [{"num_streams": n, "latency_ms": round(ms, 3)} for n, ms in self.tried]}  # fmt: skip

    def __str__(self) -> str:
        steps = ", ".join(f"{n}: {ms:.1f} ms" for n, ms in self.tried)
        verdict = "within" if self.fits else "still above"
        return (f"NUM_STREAMS {self.num_streams}: one inference {self.latency_ms:.1f} ms, {verdict} "
                f"{self.limit_ms:.1f} ms ({LATENCY_SHARE:.0%} of the {self.budget_ms:g} ms budget; tried NUM_STREAMS {steps})")  # fmt: skip


def fit_streams(
    compiled: Compiled,
    streams: int,
    recompile: Callable[[int], Compiled],
    measure_ms: Callable[[Compiled], float],
    budget_ms: float,
) -> tuple[Compiled, StreamsFit]:
    """Halve ``streams`` while one inference takes more than :data:`LATENCY_SHARE` of ``budget_ms``, down to 1.

    ``compiled`` was compiled with ``streams`` streams; ``recompile(n)`` compiles
    with ``n``; ``measure_ms`` times one inference of a compiled model. Returns
    the last compiled model and what was tried.
    """
    if not budget_ms > 0:
        raise ValueError(f"a latency budget must be positive, got {budget_ms}")
    limit = budget_ms * LATENCY_SHARE
    tried = [(streams, measure_ms(compiled))]
    while tried[-1][1] > limit and streams > 1:
        streams = max(1, streams // 2)
        compiled = recompile(streams)
        tried.append((streams, measure_ms(compiled)))
    return compiled, StreamsFit(budget_ms, tuple(tried))


def median_inference_ms(*infers: Callable[[], object], runs: int = MEASURE_RUNS) -> float:
    """The median time of one call over ``runs`` calls taken in turn from ``infers`` (at least three, fewer than all
    when they pass :data:`MEASURE_SECONDS`), each called once untimed first (those that warm-up reaches within
    :data:`MEASURE_SECONDS`, at least one).

    The fit gives one request's inference. Several (a request per stream, ``benches/fit_timings.py --per-stream``)
    time more of the plugin's streams: it may keep one request on the same cores, some slower than others."""
    if not infers:
        raise ValueError("nothing to time: no inference given")
    warm: list[Callable[[], object]] = []
    started = time.perf_counter()
    for infer in infers:
        infer()
        warm.append(infer)
        if time.perf_counter() - started >= MEASURE_SECONDS:
            break
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < runs and (len(times) < 3 or time.perf_counter() - started < MEASURE_SECONDS):
        infer = warm[len(times) % len(warm)]
        t0 = time.perf_counter()
        infer()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)
