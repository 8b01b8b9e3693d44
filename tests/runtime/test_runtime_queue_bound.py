"""An AsyncQueue's requests are bound once: each set of buffers has its own infer request whose input and output
tensors are set when the queue is made, never per frame (``set_*_tensor`` is a call into the plugin with the GIL
held). Counted on real requests of a real compiled model; every result still its own frame's, each key's in order,
under four feeding threads and two delivery threads; a set is not handed out again until its result is released."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
ops = pytest.importorskip("openvino.opset13", reason="OpenVINO is not installed (a dependency of npu_zc)")

import npu_zc
from npu_zc.runtime import CompileOptions, Session, compile_model
from npu_zc.runtime.target import Target


def double_and_square() -> ov.Model:
    """Two outputs: a wrong port or a wrong set's buffer gives a wrong value."""
    x = ops.parameter([1, 3, 4, 4], ov.Type.f32, name="x")
    doubled = ops.multiply(x, ops.constant(np.float32(2)))
    return ov.Model([ops.result(doubled), ops.result(ops.multiply(x, x))], [x], "double_and_square")


@pytest.fixture(scope="module")
def session() -> Session:
    return compile_model(double_and_square(), "CPU", mode="copy", options=CompileOptions(inference_precision="f32"))


class CountingRequest(ov.InferRequest):  # type: ignore[misc]
    """A real request of the compiled model (the same one underneath) that counts its tensors being set."""

    calls: dict[str, int]

    def set_input_tensor(self, *args):  # type: ignore[no-untyped-def]
        self.calls["set_input_tensor"] += 1
        return super().set_input_tensor(*args)

    def set_output_tensor(self, *args):  # type: ignore[no-untyped-def]
        self.calls["set_output_tensor"] += 1
        return super().set_output_tensor(*args)


@pytest.fixture
def counted(session: Session, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"set_input_tensor": 0, "set_output_tensor": 0, "requests": 0}
    create = Target.create_infer_request

    def create_counting(target: Target):  # type: ignore[no-untyped-def]
        request = CountingRequest(create(target))
        request.calls = calls
        calls["requests"] += 1
        return request

    monkeypatch.setattr(Target, "create_infer_request", create_counting)  # the Target is frozen: its class
    return calls


def test_each_request_is_bound_once_and_every_result_is_its_frames(session: Session, counted: dict[str, int]) -> None:
    feeders, deliverers, keys, frames = 4, 2, 6, 60
    got: dict[int, list[int]] = {k: [] for k in range(keys)}
    wrong: list[tuple[int, int, float, float]] = []
    failures: list[BaseException] = []

    def on_result(result) -> None:  # type: ignore[no-untyped-def]
        key, index = result.userdata
        x = float(key * 100 + index)
        doubled, squared = (float(out.reshape(-1)[5]) for out in result.outputs)
        if (doubled, squared) != (2 * x, x * x):
            wrong.append((key, index, doubled, squared))
        got[key].append(index)

    with session.queue(2, heap="memfd", callback=on_result, buffers=2 + feeders + deliverers, deliverers=deliverers) as queue:
        sets = queue.buffers
        assert counted == {"set_input_tensor": sets, "set_output_tensor": 2 * sets, "requests": sets}
        # Each request points at its own set's memory (zero-copy through ordinary memory here).
        for k, request in enumerate(queue._requests):
            assert np.shares_memory(request.get_input_tensor(0).data, queue._set_inputs[k][0])
            for port in range(2):
                assert np.shares_memory(request.get_output_tensor(port).data, queue._set_outputs[k][port])

        def feed(thread: int) -> None:  # each feeding thread owns some keys: a key's frames go in its order
            try:
                for index in range(frames):
                    for key in range(thread, keys, feeders):
                        frame = queue.acquire(timeout=30)
                        frame.inputs[0][...] = key * 100 + index
                        queue.submit(frame, (key, index), key=key)
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=feed, args=(t,)) for t in range(feeders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not failures, failures
        assert queue.join(timeout=60)
        assert queue._free and len(queue._free) == sets  # every set given back
    assert not wrong, wrong[:5]
    assert got == {k: list(range(frames)) for k in range(keys)}
    # Hundreds of frames, and not one more tensor set than at creation.
    assert counted == {"set_input_tensor": sets, "set_output_tensor": 2 * sets, "requests": sets}


def test_a_set_is_taken_until_its_result_is_released(session: Session) -> None:
    with session.queue(1, heap="memfd", buffers=2) as queue:
        first, second = queue.acquire(timeout=0), queue.acquire(timeout=0)
        assert {first.index, second.index} == {0, 1}
        for frame, value in ((first, 1.0), (second, 2.0)):
            frame.inputs[0][...] = value
            queue.submit(frame)
        results = [queue.get(timeout=30), queue.get(timeout=30)]
        assert all(r is not None for r in results)
        with pytest.raises(npu_zc.PoolExhaustedError, match="2 are in flight or hold results"):
            queue.acquire(timeout=0.05)
        # Both results are still readable, each its own (the inputs were not rewritten under them).
        assert [float(r.outputs[0].reshape(-1)[0]) for r in results if r] == [2.0, 4.0]
        results[1].release()  # type: ignore[union-attr]
        again = queue.acquire(timeout=0)
        assert again.index == second.index and queue._state(first.index) == "result"
        queue.discard(again)
        results[0].release()  # type: ignore[union-attr]
        assert sorted(queue._free) == [0, 1]


def test_a_waiting_acquire_gets_the_set_another_thread_releases(session: Session) -> None:
    with session.queue(1, heap="memfd") as queue:
        frame = queue.acquire(timeout=0)
        queue.submit(frame)
        result = queue.get(timeout=30)
        assert result is not None
        taken: list[int] = []
        waiter = threading.Thread(target=lambda: taken.append(queue.acquire(timeout=30).index))
        waiter.start()
        waiter.join(0.2)
        assert waiter.is_alive() and not taken  # waiting: the result holds the only set
        result.release()
        waiter.join(30)
        assert taken == [frame.index]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.sampled_from(["acquire", "submit", "discard", "get", "release"]), max_size=40),
       sets=st.integers(1, 3))  # fmt: skip
def test_sets_follow_their_lifecycle(session: Session, steps: list[str], sets: int) -> None:
    """Any sequence of calls in one thread: the queue's view of each set matches a model of it, and a result
    always carries the values written into its own set."""
    with session.queue(1, heap="memfd", buffers=sets) as queue:
        held: list = []  # acquired frames, not submitted
        results: list = []
        written: dict[int, float] = {}
        submitted = 0
        value = 0.0
        for step in steps:
            if step == "acquire":
                if len(held) + submitted + len(results) < sets:
                    frame = queue.acquire(timeout=0)
                    assert queue._state(frame.index) == "cpu"
                    value += 1
                    frame.inputs[0][...] = value
                    written[frame.index] = value
                    held.append(frame)
                else:
                    with pytest.raises(npu_zc.PoolExhaustedError):
                        queue.acquire(timeout=0)
            elif step in ("submit", "discard") and held:
                frame = held.pop(0)
                if step == "submit":
                    queue.submit(frame, frame.index)
                    submitted += 1
                else:
                    queue.discard(frame)
                    assert queue._state(frame.index) == "free"
            elif step == "get" and submitted:
                result = queue.get(timeout=30)
                assert result is not None and queue._state(result.userdata) == "result"
                assert float(result.outputs[0].reshape(-1)[0]) == 2 * written[result.userdata]
                submitted -= 1
                results.append(result)
            elif step == "release" and results:
                result = results.pop(0)
                result.release()
                assert queue._state(result.userdata) == "free"
            assert len(queue._free) == sets - len(held) - submitted - len(results)
        for frame in held:
            queue.discard(frame)
        for result in results:
            result.release()


def test_closed_queues_that_live_on_hold_no_fds(session: Session) -> None:
    """close() lets go of the pools' fds at once, not when the queue object goes."""
    from conftest import open_fds

    for _ in range(3):  # whatever OpenVINO opens once for the first requests
        session.queue(2, heap="memfd").close()
    before = open_fds()
    kept = []
    for _ in range(10):
        queue = session.queue(2, heap="memfd")
        queue.close()
        kept.append(queue)
    # Each queue has 2 sets of 1 input and 2 output buffers: 6 fds, all given back by close().
    assert open_fds() - before < 4, f"10 closed queues kept alive hold {open_fds() - before} fds"
    with pytest.raises(npu_zc.InvalidArgumentError, match="closed"):
        kept[0].acquire()
