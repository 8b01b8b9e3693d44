"""Fitting the CPU plugin's streams to a latency budget: the halving rule, then real compilations read back."""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np
import pytest

from npu_zc.errors import InvalidArgumentError
from npu_zc.runtime.latency_fit import (
    HINT_SHARE,
    LATENCY_SHARE,
    StreamsFit,
    fit_streams,
    median_busy_ms,
    median_inference_ms,
)

# --- the rule, on a cost model: an inference of W ms of work spread over the threads of one stream of N cores ---


def _fit(work_ms: float, cores: int, budget_ms: float) -> tuple[int, StreamsFit, list[int]]:
    compiled: list[int] = []

    def recompile(streams: int) -> int:
        compiled.append(streams)
        return streams

    kept, fit = fit_streams(cores, cores, recompile, lambda streams: work_ms / (cores // streams), budget_ms)
    return kept, fit, compiled


def test_a_model_within_half_the_budget_keeps_the_hints_streams() -> None:
    kept, fit, compiled = _fit(45.0, 16, 100.0)  # YOLOv8n on one of the Xeon's cores
    assert (kept, compiled, fit.num_streams, fit.changed, fit.fits) == (16, [], 16, False, True)
    assert fit.tried == ((16, 45.0),)
    assert HINT_SHARE == 0.5 and fit.limit_ms == pytest.approx(50.0)


def test_a_model_above_half_the_budget_with_the_hints_streams_is_fitted() -> None:
    # On the Xeon the hint's 15 streams held no live stream where an inference with every stream busy took 57 ms,
    # and 7 streams held five or six.
    kept, fit, compiled = _fit(57.0, 16, 100.0)
    assert (kept, compiled, fit.changed, fit.fits) == (8, [8], True, True)
    assert fit.tried == ((16, 57.0), (8, 28.5))


def test_once_fitted_halving_goes_on_only_above_seventy_percent() -> None:
    # 260 ms on one core: 130 ms on two (above 70), 65 on four: kept there, though above half the budget.
    kept, fit, compiled = _fit(260.0, 16, 100.0)
    assert compiled == [8, 4] and kept == 4
    assert fit.latency_ms == pytest.approx(65.0) and fit.fits and fit.changed
    assert LATENCY_SHARE == 0.7 and fit.limit_ms == pytest.approx(70.0)
    assert "65.0 ms with every stream busy, within 70.0 ms (70% of the 100 ms budget" in str(fit)


def test_a_slow_model_gets_fewer_streams_until_one_inference_fits() -> None:
    # 320 ms on one core: 160 ms on two, 80 on four, 40 on eight (the first within 70% of 100).
    kept, fit, compiled = _fit(320.0, 16, 100.0)
    assert compiled == [8, 4, 2] and kept == 2
    assert [n for n, _ in fit.tried] == [16, 8, 4, 2]
    assert fit.latency_ms == pytest.approx(40.0) and fit.fits and fit.changed


def test_each_limit_itself_fits() -> None:
    kept, fit, compiled = _fit(100.0 * HINT_SHARE, 8, 100.0)
    assert (kept, compiled, fit.fits) == (8, [], True)
    kept, fit, compiled = _fit(2 * 100.0 * LATENCY_SHARE, 8, 100.0)
    assert (kept, compiled, fit.fits) == (4, [4], True)


def test_it_stops_at_one_stream_and_says_it_does_not_fit() -> None:
    kept, fit, compiled = _fit(2000.0, 16, 100.0)
    assert compiled == [8, 4, 2, 1] and kept == 1
    assert not fit.fits and fit.num_streams == 1
    assert "still above" in str(fit) and "tried NUM_STREAMS 16: 2000.0 ms, 8" in str(fit)
    assert fit.to_dict()["tried"][-1] == {"num_streams": 1, "latency_ms": 125.0}
    assert fit.to_dict()["limit_ms"] == pytest.approx(70.0)


def test_odd_core_counts_halve_down_to_one() -> None:
    compiled: list[int] = []
    fit_streams(15, 15, lambda n: compiled.append(n) or n, lambda n: 1e6, 100.0)
    assert compiled == [7, 3, 1]


@pytest.mark.parametrize("budget", [0.0, -5.0, math.nan])
def test_the_rule_refuses_a_budget_that_is_not_positive(budget: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        fit_streams(4, 4, lambda n: n, lambda n: 1.0, budget)


class _Clock:
    """The timing's clock, advanced only by the inferences it times: no test here waits on a real one."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[int] = []

    def perf_counter(self) -> float:
        return self.now

    def infers(self, seconds: list[float]) -> list[Callable[[], None]]:
        """One inference per request, request ``k`` taking ``seconds[k]``."""

        def infer(k: int) -> None:
            self.calls.append(k)
            self.now += seconds[k]

        return [functools.partial(infer, k) for k in range(len(seconds))]


def test_one_request_alone_is_timed_after_a_warm_up_and_a_slow_one_briefly(monkeypatch: pytest.MonkeyPatch) -> None:
    """``fit_timings.py --one-request``'s timing."""
    from npu_zc.runtime import latency_fit
    from npu_zc.runtime.latency_fit import MEASURE_RUNS, MEASURE_SECONDS

    clock = _Clock()
    monkeypatch.setattr(latency_fit, "time", clock)
    assert median_inference_ms(clock.infers([0.002])[0]) == pytest.approx(2.0)
    assert clock.calls == [0] * (1 + MEASURE_RUNS)  # warmed up once, then timed
    clock.calls.clear()
    slow = MEASURE_SECONDS / 2.5  # three of them pass the time allowed
    assert median_inference_ms(clock.infers([slow])[0]) == pytest.approx(slow * 1000)
    assert clock.calls == [0] * (1 + 3)


class _Request:
    """A request of the busy timing: its inferences take ``ms`` in turn (the first, untimed, ``ms[0]``), and the
    clock moves on by the longest of a round's."""

    def __init__(self, clock: _Clock, ms: list[float]) -> None:
        self.clock, self.ms, self.started, self.latency, self.began = clock, ms, 0, math.nan, 0.0
        self.cancelled = 0

    def cancel(self) -> None:
        self.cancelled += 1

    def start_async(self) -> None:
        self.latency = self.ms[min(self.started, len(self.ms) - 1)]
        self.started += 1
        self.began = self.clock.now

    def wait_for(self, timeout: int) -> bool:
        """Done once its inference's time has passed; else the clock moves on by the slice waited."""
        done = self.began + self.latency / 1000
        if self.clock.now >= done:
            return True
        self.clock.now = min(done, self.clock.now + timeout / 1000)
        return self.clock.now >= done


def test_every_request_is_started_at_once_and_its_own_time_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    from npu_zc.runtime import latency_fit
    from npu_zc.runtime.latency_fit import BUSY_ROUNDS

    clock = _Clock()
    monkeypatch.setattr(latency_fit, "time", clock)
    # A first (untimed) round slow; then one stream's core slower than the others': the median is the streams'.
    requests = [_Request(clock, [90.0, 10.0]), _Request(clock, [90.0, 10.0]), _Request(clock, [90.0, 30.0])]
    assert median_busy_ms(requests) == pytest.approx(10.0)
    assert [r.started for r in requests] == [1 + BUSY_ROUNDS] * 3
    with pytest.raises(ValueError, match="nothing to time"):
        median_busy_ms([])


def test_a_slow_model_is_timed_for_three_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    from npu_zc.runtime import latency_fit
    from npu_zc.runtime.latency_fit import MEASURE_SECONDS

    clock = _Clock()
    monkeypatch.setattr(latency_fit, "time", clock)
    slow = MEASURE_SECONDS * 1000 / 2.5  # ms: the untimed round and two timed ones pass the time allowed
    requests = [_Request(clock, [slow]), _Request(clock, [slow])]
    assert median_busy_ms(requests) == pytest.approx(slow)
    assert [r.started for r in requests] == [1 + 3] * 2


def test_an_inference_that_never_finishes_is_an_error_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    from npu_zc.runtime import latency_fit
    from npu_zc.runtime.latency_fit import BUSY_WAIT_S

    clock = _Clock()
    monkeypatch.setattr(latency_fit, "time", clock)
    stuck = 10 * BUSY_WAIT_S * 1000  # ms: it would finish, long after the fit gives up
    requests = [_Request(clock, [10.0]), _Request(clock, [stuck])]
    with pytest.raises(TimeoutError, match="did not finish within"):
        median_busy_ms(requests)
    assert clock.now < 2 * BUSY_WAIT_S
    assert [r.cancelled for r in requests] == [1, 1]  # none left running behind the error


# --- real compilations on the CPU plugin, read back ---

def _model() -> Any:
    """A small real model (a strided convolution over a 224x224 picture): milliseconds on one core."""
    openvino = pytest.importorskip("openvino")  # the rule's tests above need no OpenVINO (the portable aarch64 run)
    import openvino.opset13 as ops

    image = ops.parameter([1, 3, 224, 224], np.float32, name="image")
    weights = ops.constant(np.random.default_rng(0).standard_normal((16, 3, 3, 3)).astype(np.float32))
    conv = ops.convolution(image, weights, [2, 2], [1, 1], [1, 1], [1, 1])
    return openvino.Model([ops.result(ops.relu(conv))], [image], "conv")


def _compile(**options: Any) -> Any:
    from npu_zc.runtime import CompileOptions, compile_model

    hint = options.pop("performance_hint", "THROUGHPUT")
    return compile_model(_model(), "CPU", options=CompileOptions(performance_hint=hint, inference_precision="f32", **options))


def test_a_budget_nothing_meets_leaves_one_stream_compiled() -> None:
    own = int(_compile().property("NUM_STREAMS"))
    session = _compile(latency_budget_ms=1e-6)
    fit = session.streams_fit
    assert fit is not None and not fit.fits
    assert fit.tried[0][0] == own
    assert [n for n, _ in fit.tried] == [max(1, own >> k) for k in range(len(fit.tried))]
    assert fit.num_streams == 1 and int(session.property("NUM_STREAMS")) == 1
    if own > 1:
        assert session.config["NUM_STREAMS"] == 1
    # The kept session infers.
    out = session.create_request().infer_copy([np.full(session.inputs[0].shape, 9, np.uint8)])  # the RGBx input
    assert out[0].shape == (1, 16, 112, 112) and np.isfinite(out[0]).all()


def test_a_generous_budget_keeps_the_hints_streams() -> None:
    own = int(_compile().property("NUM_STREAMS"))
    session = _compile(latency_budget_ms=1e9)
    fit = session.streams_fit
    assert fit is not None and fit.fits and not fit.changed
    assert fit.num_streams == own == int(session.property("NUM_STREAMS"))
    assert fit.latency_ms > 0


def test_an_inference_the_plugin_refuses_while_timed_is_a_model_error() -> None:
    """A model the CPU plugin compiles but cannot run on zero inputs: its scatter's index is |sum of the picture| +
    100, past the end of four elements, which the plugin checks at each inference."""
    pytest.importorskip("openvino")
    import openvino
    import openvino.opset13 as ops

    from npu_zc.errors import ModelError
    from npu_zc.runtime import CompileOptions, compile_model

    image = ops.parameter([1, 3, 8, 8], np.float32, name="image")
    total = ops.abs(ops.reduce_sum(image, ops.constant(np.array([0, 1, 2, 3])), False))
    index = ops.reshape(ops.convert(ops.add(total, ops.constant(np.float32(100))), "i64"), [1], False)
    scatter = ops.scatter_update(ops.constant(np.zeros(4, np.float32)), index, ops.constant(np.ones(1, np.float32)),
                                 ops.constant(np.int64(0)))  # fmt: skip
    model = openvino.Model([ops.result(scatter)], [image], "out_of_range")
    options = CompileOptions(performance_hint="THROUGHPUT", latency_budget_ms=1e9)
    with pytest.raises(ModelError, match=r"^inference failed on CPU: .*ScatterUpdate.*non-existing") as raised:
        compile_model(model, "CPU", options=options)
    assert "\n" not in str(raised.value)
    compile_model(model, "CPU", options=CompileOptions(performance_hint="THROUGHPUT"))  # no fit: no inference, no error


@pytest.mark.parametrize(
    "options",
    [
        {"extra": {"NUM_STREAMS": 2}},
        {"num_threads": 1},
        {"performance_hint": "LATENCY"},
        {},
    ],
    ids=["NUM_STREAMS given", "threads given", "latency hint", "no budget"],
)
def test_no_fit_where_the_streams_are_fixed_or_no_budget_is_asked(options: dict[str, Any]) -> None:
    budget = {} if not options else {"latency_budget_ms": 1e-6}
    assert _compile(**options, **budget).streams_fit is None


def test_with_latency_budget_leaves_fixed_streams_alone() -> None:
    from npu_zc.runtime import CompileOptions

    assert CompileOptions().with_latency_budget(50).latency_budget_ms == 50
    assert CompileOptions(latency_budget_ms=20).with_latency_budget(50).latency_budget_ms == 20
    assert CompileOptions(num_threads=2).with_latency_budget(50).latency_budget_ms is None
    assert CompileOptions(extra={"NUM_STREAMS": 3}).with_latency_budget(50).latency_budget_ms is None


@pytest.mark.parametrize("budget", [0, -1, math.nan, math.inf, "5"])
def test_compile_refuses_a_budget_that_is_not_positive(budget: float) -> None:
    with pytest.raises(InvalidArgumentError, match="latency_budget_ms must be positive"):
        _compile(latency_budget_ms=budget)
