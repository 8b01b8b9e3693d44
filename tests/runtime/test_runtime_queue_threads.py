"""An AsyncQueue fed by several threads at once (as npu_zc.Streams' feeding threads do): every frame's result is
its own, each thread's results come in its own order, and no thread is refused a request another one is starting."""

from __future__ import annotations

import math
import threading

import pytest

pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")

from npu_zc import InvalidArgumentError
from npu_zc.runtime import Session
from queue_models import doubling_session  # noqa: E402


@pytest.fixture(scope="module")
def session() -> Session:
    return doubling_session()


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_several_threads_submit_to_one_queue(session: Session, depth: int) -> None:
    """Six threads, 150 frames each, on 1, 2 or 4 requests with one spare set of buffers per thread: with few
    requests a thread often finds the last idle one being started by another (once refused as a missing request)."""
    threads, frames = 6, 150
    seen: dict[int, list[int]] = {t: [] for t in range(threads)}
    wrong: list[tuple[int, int, float]] = []

    def on_result(result) -> None:  # type: ignore[no-untyped-def]
        thread, index = result.userdata
        value = float(result.outputs[0].reshape(-1)[0])
        if value != 2 * (thread * 1000 + index):
            wrong.append((thread, index, value))
        seen[thread].append(index)

    failures: list[BaseException] = []
    with session.queue(depth, heap="memfd", callback=on_result, buffers=depth + threads + 1) as queue:

        def feed(thread: int) -> None:
            try:
                for index in range(frames):
                    frame = queue.acquire(timeout=30)
                    frame.inputs[0][...] = thread * 1000 + index
                    queue.submit(frame, (thread, index))
            except BaseException as exc:
                failures.append(exc)

        workers = [threading.Thread(target=feed, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert not failures, failures
        assert queue.join(timeout=60)
    assert not wrong, wrong[:5]
    assert all(seen[t] == list(range(frames)) for t in range(threads)), {t: seen[t][:10] for t in seen}


def test_abandon_ends_the_inferences_running_and_takes_no_more(session: Session) -> None:
    """A queue given up to a callback that never returns (a stuck consumer, a second Ctrl-C): abandon() returns once
    no inference of it runs (the process may then exit without the plugin's threads torn down under one), and a
    feeding thread still going is refused its next set or submission, not kept waiting."""
    from npu_zc import Error

    entered, release = threading.Event(), threading.Event()

    def stuck(result) -> None:  # type: ignore[no-untyped-def]
        entered.set()
        release.wait()

    queue = session.queue(2, heap="memfd", callback=stuck, buffers=4)
    for bad in (math.nan, -1.0, None, math.inf):  # unchecked, a NaN waited for ever
        with pytest.raises(InvalidArgumentError):
            queue.abandon(timeout=bad)
    with pytest.raises(TypeError):
        queue.abandon(timeout="1")  # type: ignore[arg-type]
    try:
        frames = [queue.acquire(timeout=30) for _ in range(4)]
        for k, frame in enumerate(frames):
            frame.inputs[0][...] = k
            queue.submit(frame, k)
        assert entered.wait(30)  # the first result is in the callback, for good
        assert queue.abandon(timeout=30)
        assert queue.in_flight == 0
        with pytest.raises(Error):
            queue.acquire(timeout=30)
    finally:
        release.set()


def test_abandon_waits_for_an_inference_being_started(session: Session) -> None:
    """A thread inside submit(), starting its inference, as the queue is given up: abandon() waits for that start and
    then for the inference, so none runs once it returns (one started just after abandon() returned would be running
    as the process exits). Made certain here: the start is held until abandon() either returned or waits."""
    entered, go = threading.Event(), threading.Event()
    queue = session.queue(2, heap="memfd", callback=lambda result: None, buffers=2)
    start = queue._start

    def held_start(*args):  # type: ignore[no-untyped-def]
        entered.set()
        assert go.wait(30)
        return start(*args)

    queue._start = held_start
    frame = queue.acquire(timeout=30)
    frame.inputs[0][...] = 1
    submitter = threading.Thread(target=queue.submit, args=(frame, 0))
    submitter.start()
    try:
        assert entered.wait(30)
        outcome: list[bool] = []
        abandoning = threading.Thread(target=lambda: outcome.append(queue.abandon(timeout=30)))
        abandoning.start()
        while abandoning.is_alive() and not queue._waiters:  # returned, or waiting for the start
            abandoning.join(0.001)
    finally:
        go.set()
    submitter.join(30)
    abandoning.join(30)
    assert outcome == [True]
    assert queue.in_flight == 0
