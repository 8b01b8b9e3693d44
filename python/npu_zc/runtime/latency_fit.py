"""Fitting the CPU plugin's streams to a latency budget.

Under the throughput hint the CPU plugin runs as many inferences side by side
as it has cores (``NUM_STREAMS``), each on one core: the most frames a second,
but every frame waits for the whole model on a single core. A model whose one
inference takes most of a live stream's budget there cannot hold any stream;
fewer streams give each inference more threads: lower latency, fewer frames a
second.

:func:`fit_streams` halves ``NUM_STREAMS`` (doubling the threads of each
inference) while an inference, timed on the compiled model with every stream
busy (:func:`median_busy_ms`: a request per stream started at once), takes more
than :data:`HINT_SHARE` of the budget with the hint's own streams, or more than
:data:`LATENCY_SHARE` once fitted, down to one stream; it stops at the first
count within. On the Xeon (``docs/streams.md``, "Detectors and the latency
budget") the hint's streams held more live streams than half as many where an
inference with every stream busy took 49% of the budget, and none from 55%,
where half as many held four to six; once fitted, halving again held fewer
where an inference took 41-60%. Timed with every stream busy, every core is
timed under load, as live streams run the model: one request timed alone
moved by up to 1.7x between fits of one model on one machine, and did not tell
those cases apart.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, TypeVar

from .._timeouts import SLICE_S

HINT_SHARE = 0.5
"""The part of the latency budget an inference with every stream busy may take before the throughput hint's own
streams are fitted (the rest: decoding, the queue, delivery, and the tail of an inference sharing its one core with
the decoders)."""

LATENCY_SHARE = 0.7
"""Once fitted, the part of the budget an inference with every stream busy may take at the fewer streams kept."""

BUSY_ROUNDS = 5
"""Rounds of a request per stream started at once, timed per candidate after an untimed one (fewer for a slow model:
see :data:`MEASURE_SECONDS`)."""

BUSY_REQUESTS = 64
"""Requests started at once at most (a machine with more CPU streams has some idle while it is timed)."""

BUSY_WAIT_S = 60.0
"""How long a round of the busy timing may take before the fit gives up (a plugin that never finishes)."""

MEASURE_RUNS = 7
"""Timed inferences of :func:`median_inference_ms` (after one warm-up), fewer for a slow model."""

MEASURE_SECONDS = 1.0
"""Per candidate, timing stops after this long once three inferences (or rounds) are timed."""

Compiled = TypeVar("Compiled")


@dataclass(frozen=True)
class StreamsFit:
    """What :func:`fit_streams` tried, in order: ``(NUM_STREAMS, median ms of an inference with every stream busy)``;
    the last is kept."""

    budget_ms: float
    tried: tuple[tuple[int, float], ...]

    @property
    def num_streams(self) -> int:
        return self.tried[-1][0]

    @property
    def latency_ms(self) -> float:
        """An inference's median time with :attr:`num_streams`, every stream busy."""
        return self.tried[-1][1]

    @property
    def share(self) -> float:
        """The part of the budget an inference may take at the count kept: :data:`HINT_SHARE` with the hint's own
        streams, :data:`LATENCY_SHARE` once fitted."""
        return LATENCY_SHARE if self.changed else HINT_SHARE

    @property
    def limit_ms(self) -> float:
        """What an inference may take at the count kept."""
        return self.budget_ms * self.share

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
        return (f"NUM_STREAMS {self.num_streams}: an inference {self.latency_ms:.1f} ms with every stream busy, "
                f"{verdict} {self.limit_ms:.1f} ms ({self.share:.0%} of the {self.budget_ms:g} ms budget; "
                f"tried NUM_STREAMS {steps})")


def fit_streams(
    compiled: Compiled,
    streams: int,
    recompile: Callable[[int], Compiled],
    measure_ms: Callable[[Compiled], float],
    budget_ms: float,
) -> tuple[Compiled, StreamsFit]:
    """Halve ``streams`` while an inference takes more than :data:`HINT_SHARE` of ``budget_ms`` with the hint's
    ``streams``, or more than :data:`LATENCY_SHARE` once halved, down to 1.

    ``compiled`` was compiled with ``streams`` streams (the hint's own); ``recompile(n)`` compiles with ``n``;
    ``measure_ms`` times an inference of a compiled model (the session's: :func:`median_busy_ms`). Returns the last
    compiled model and what was tried.
    """
    if not budget_ms > 0:
        raise ValueError(f"a latency budget must be positive, got {budget_ms}")
    tried = [(streams, measure_ms(compiled))]
    limit = budget_ms * HINT_SHARE
    while tried[-1][1] > limit and streams > 1:
        streams = max(1, streams // 2)
        compiled = recompile(streams)
        tried.append((streams, measure_ms(compiled)))
        limit = budget_ms * LATENCY_SHARE
    return compiled, StreamsFit(budget_ms, tuple(tried))


class Startable(Protocol):
    """What :func:`median_busy_ms` times: an ``openvino.InferRequest``'s three members it uses."""

    def start_async(self) -> None: ...

    def wait_for(self, timeout: int) -> bool: ...

    def cancel(self) -> None: ...

    @property
    def latency(self) -> float: ...


def median_busy_ms(requests: Sequence[Startable], rounds: int = BUSY_ROUNDS) -> float:
    """The median time of an inference with every request started at once, over ``rounds`` rounds after an untimed
    one (at least three, fewer than ``rounds`` once they pass :data:`MEASURE_SECONDS`): each request's own time from
    its start to its completion, as OpenVINO measures it (``InferRequest.latency``, milliseconds).

    The fit gives a request per CPU stream: each stream runs one, so every core is timed under load, as live streams
    run the model."""
    if not requests:
        raise ValueError("nothing to time: no request given")
    times: list[float] = []
    started = time.perf_counter()
    for round_ in range(rounds + 1):
        for request in requests:
            request.start_async()
        try:
            _wait_all(requests)
        except BaseException:
            # The others may still run (a failure, the limit, Ctrl-C): cancelled, so that dropping them does not
            # wait on a plugin that never finishes.
            for request in requests:
                try:
                    request.cancel()
                except RuntimeError:
                    pass
            raise
        if round_:
            times.extend(float(request.latency) for request in requests)
            if round_ >= 3 and time.perf_counter() - started >= MEASURE_SECONDS:
                break
    return statistics.median(times)


def _wait_all(requests: Sequence[Startable]) -> None:
    """Every request's inference done, waited in slices: Ctrl-C is seen between them, and a plugin that never
    finishes is a :class:`TimeoutError` after :data:`BUSY_WAIT_S`, not a hang."""
    deadline = time.perf_counter() + BUSY_WAIT_S
    for request in requests:
        while not request.wait_for(int(SLICE_S * 1000)):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"an inference did not finish within {BUSY_WAIT_S:g} s while it was timed")


def median_inference_ms(infer: Callable[[], object], runs: int = MEASURE_RUNS) -> float:
    """The median time of one call of ``infer`` over ``runs`` calls after an untimed one (at least three, fewer once
    they pass :data:`MEASURE_SECONDS`).

    One request timed alone (``benches/fit_timings.py --one-request`` shows it beside the fit's
    :func:`median_busy_ms`): the plugin may keep it on the same core, and it moves between fits more than the fit's
    timing."""
    infer()
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < runs and (len(times) < 3 or time.perf_counter() - started < MEASURE_SECONDS):
        t0 = time.perf_counter()
        infer()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)
