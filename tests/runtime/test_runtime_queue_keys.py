"""An AsyncQueue with several delivery threads (``deliverers=N``) and keyed submissions, as npu_zc.Streams uses it:
each key's results in its submission order and one at a time, a key's result held up only by its own key's earlier
results (never by another key's slow callback), a failing callback reported, close() delivering what is pending,
and one delivery thread keeping the global submission order."""

from __future__ import annotations

import collections
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")

import npu_zc
from npu_zc.runtime import Session
from queue_models import doubling_session, slow_session  # noqa: E402


@pytest.fixture(scope="module")
def session() -> Session:
    return doubling_session()


class Recorder:
    """The callback: checks each result's value, records each key's order, and that no key is delivered by two
    threads at once; ``delay(key, index)`` seconds of work (or a wait) inside."""

    def __init__(self, delay=lambda key, index: 0.0) -> None:  # type: ignore[no-untyped-def]
        self.delay = delay
        self.lock = threading.Lock()
        self.order: list[tuple[int, int]] = []
        self.by_key: dict[int, list[int]] = collections.defaultdict(list)
        self.inside: collections.Counter[int] = collections.Counter()
        self.overlaps: list[tuple[int, int]] = []
        self.wrong: list[tuple[int, int, float]] = []
        self.threads: set[str] = set()

    def __call__(self, result) -> None:  # type: ignore[no-untyped-def]
        key, index = result.userdata
        value = float(result.outputs[0].reshape(-1)[0])
        with self.lock:
            self.inside[key] += 1
            if self.inside[key] > 1:
                self.overlaps.append((key, index))
            self.threads.add(threading.current_thread().name)
        if value != 2 * (key * 1000 + index):
            self.wrong.append((key, index, value))
        try:
            pause = self.delay(key, index)
            if pause:
                time.sleep(pause)
        except BaseException:
            with self.lock:
                self.inside[key] -= 1
            raise
        with self.lock:
            self.inside[key] -= 1
            self.order.append((key, index))
            self.by_key[key].append(index)


def submit(queue, key: int, index: int) -> None:  # type: ignore[no-untyped-def]
    frame = queue.acquire(timeout=30)
    frame.inputs[0][...] = key * 1000 + index
    try:
        queue.submit(frame, (key, index), key)
    except BaseException:  # e.g. a failure reported here: the frame goes back
        queue.discard(frame)
        raise


def test_each_key_in_order_one_at_a_time(session: Session) -> None:
    """Four keys from four threads, three delivery threads, callbacks of uneven length: every key's results come in
    its order, never two of one key at once, each value its own frame's, and the work spread over the threads."""
    keys, frames = 4, 60
    recorder = Recorder(lambda key, index: 0.002 if (key + index) % 3 == 0 else 0.0)
    with session.queue(4, heap="memfd", callback=recorder, buffers=4 + keys + 3, deliverers=3) as queue:

        def feed(key: int) -> None:
            for index in range(frames):
                submit(queue, key, index)

        workers = [threading.Thread(target=feed, args=(k,)) for k in range(keys)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert queue.join(timeout=60)
    assert not recorder.wrong, recorder.wrong[:5]
    assert not recorder.overlaps, recorder.overlaps[:5]
    assert {k: recorder.by_key[k] for k in range(keys)} == {k: list(range(frames)) for k in range(keys)}
    assert len(recorder.threads) > 1, recorder.threads  # the deliveries did not all land on one thread


def test_a_key_waits_only_for_its_own_results(session: Session) -> None:
    """Key 0's first result is held in its callback until key 1 has delivered five results: with several delivery
    threads they come (key 1 passes key 0); with one, key 1 waits behind key 0 (the old, global order)."""
    for deliverers, passes in ((2, True), (1, False)):
        key1_done = threading.Event()
        seen: dict[str, bool] = {}

        def delay(key: int, index: int) -> float:
            if key == 0 and index == 0:
                seen["passed"] = key1_done.wait(1.0 if not passes else 20.0)
            if key == 1 and index == 4:
                key1_done.set()
            return 0.0

        recorder = Recorder(delay)
        with session.queue(2, heap="memfd", callback=recorder, buffers=12, deliverers=deliverers) as queue:
            submit(queue, 0, 0)
            for index in range(5):
                submit(queue, 1, index)
            submit(queue, 0, 1)
            assert queue.join(timeout=60)
        assert seen["passed"] is passes, deliverers
        assert recorder.by_key == {0: [0, 1], 1: [0, 1, 2, 3, 4]}
        if passes:
            assert recorder.order.index((1, 4)) < recorder.order.index((0, 0))
        else:
            assert recorder.order == [(0, 0), (1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (0, 1)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.lists(st.integers(0, 3), min_size=1, max_size=40),
    slow=st.sets(st.integers(0, 3), max_size=2),
    deliverers=st.integers(1, 4),
)
def test_any_sequence_of_keys_comes_out_in_order_per_key(session: Session, keys: list[int], slow: set[int], deliverers: int) -> None:
    """Whatever the keys' interleaving, the number of delivery threads and which keys' callbacks are slow: each
    key's results come in its submission order, all of them, and with one thread, all in submission order."""
    counts: collections.Counter[int] = collections.Counter()
    submitted: list[tuple[int, int]] = []
    recorder = Recorder(lambda key, index: 0.003 if key in slow else 0.0)
    with session.queue(2, heap="memfd", callback=recorder, buffers=3 + deliverers, deliverers=deliverers) as queue:
        for key in keys:
            submit(queue, key, counts[key])
            submitted.append((key, counts[key]))
            counts[key] += 1
        assert queue.join(timeout=60)
    assert not recorder.wrong and not recorder.overlaps
    assert dict(recorder.by_key) == {k: list(range(n)) for k, n in counts.items()}
    if deliverers == 1:
        assert recorder.order == submitted


def test_a_failing_callback_is_raised_and_the_rest_delivered(session: Session) -> None:
    """A callback that raises for one result: join() raises it (an npu_zc.ModelError), the other results are still
    handed out in their keys' order, every output buffer comes back, and the queue closes cleanly."""

    def delay(key: int, index: int) -> float:
        if (key, index) == (1, 3):
            raise RuntimeError("the output failed")
        return 0.0

    recorder = Recorder(delay)
    queue = session.queue(2, heap="memfd", callback=recorder, buffers=6, deliverers=3)
    try:
        with pytest.raises(npu_zc.ModelError, match="the output failed"):  # on a submit after it, or on join
            for index in range(8):
                for key in range(3):
                    submit(queue, key, index)
            queue.join(timeout=60)
        queue.join(timeout=60)  # reported once: the queue goes on
        # Every set of buffers came back (the failed result's outputs too).
        frames = [queue.acquire(timeout=5) for _ in range(6)]
        for frame in frames:
            queue.discard(frame)
    finally:
        queue.close()
    assert not recorder.overlaps
    for key, indices in recorder.by_key.items():
        expected = [i for i in range(len(indices) + (key == 1)) if key != 1 or i != 3]
        assert indices == expected, (key, indices)
    assert recorder.by_key[1][:3] == [0, 1, 2]
    assert queue.pending == 0


@pytest.mark.parametrize("way_out", [SystemExit(3), KeyboardInterrupt()])
@pytest.mark.parametrize("deliverers", [1, 2])
def test_a_callbacks_way_out_propagates_as_itself(session: Session, way_out: BaseException, deliverers: int) -> None:
    """SystemExit or KeyboardInterrupt raised in a callback is not an inference error: it comes out of join() (or
    the next submit) as itself, not wrapped in an npu_zc.ModelError."""

    def callback(result) -> None:  # type: ignore[no-untyped-def]
        raise way_out

    queue = session.queue(2, heap="memfd", callback=callback, buffers=4, deliverers=deliverers)
    try:
        with pytest.raises(type(way_out)) as caught:
            submit(queue, 0, 0)
            queue.join(timeout=60)
        assert caught.value is way_out
    finally:
        queue.close()


def test_close_delivers_what_is_pending(session: Session) -> None:
    """close() right after the submissions, with slow callbacks: every result pending is still delivered, each key
    in order, and the delivery threads end."""
    before = threading.active_count()
    recorder = Recorder(lambda key, index: 0.005)
    queue = session.queue(3, heap="memfd", callback=recorder, buffers=10, deliverers=3)
    for index in range(3):
        for key in range(3):
            submit(queue, key, index)
    queue.close()
    assert {k: recorder.by_key[k] for k in range(3)} == {k: [0, 1, 2] for k in range(3)}
    assert not recorder.overlaps
    assert threading.active_count() == before


def test_deliverers_are_checked(session: Session) -> None:
    with pytest.raises(npu_zc.InvalidArgumentError, match="at least one delivery thread"):
        session.queue(2, heap="memfd", callback=lambda r: None, deliverers=-1)
    with pytest.raises(npu_zc.InvalidArgumentError, match="at least one delivery thread"):
        session.queue(2, heap="memfd", deliverers=0)  # no callback: nothing to deliver to
    with pytest.raises(npu_zc.InvalidArgumentError, match="deliverers call a callback"):
        session.queue(2, heap="memfd", deliverers=2)
    with session.queue(2, heap="memfd", callback=lambda r: None, deliverers=1) as threaded:
        with pytest.raises(npu_zc.InvalidArgumentError, match="deliverers=0"):
            threaded.deliver_ready()


def test_the_caller_delivers_with_no_delivery_thread(session: Session) -> None:
    """deliverers=0: nothing is delivered until the caller asks; deliver_ready() hands the finished results to the
    callback on the calling thread, oldest first, each its own frame's value; join() delivers what is left."""
    recorder = Recorder()
    with session.queue(2, heap="memfd", callback=recorder, buffers=6, deliverers=0) as queue:
        assert queue.deliverers == 0
        for index in range(4):
            submit(queue, index % 2, index)
        queue.wait_all()  # every inference done, none delivered: no thread of the queue's calls the callback
        assert recorder.order == [] and queue.pending == 4
        assert queue.deliver_ready() == 4
        assert recorder.order == [(0, 0), (1, 1), (0, 2), (1, 3)]
        assert recorder.threads == {threading.current_thread().name}
        assert queue.deliver_ready() == 0  # nothing pending
        submit(queue, 0, 4)
        submit(queue, 1, 5)
        assert queue.join(timeout=60)
        assert recorder.order[4:] == [(0, 4), (1, 5)] and queue.pending == 0
    assert not recorder.wrong and not recorder.overlaps


def test_deliver_ready_waits_for_the_oldest_up_to_its_timeout(session: Session) -> None:
    """With the oldest inference running, deliver_ready(timeout) waits for it (a generous timeout delivers it), and
    the set a delivery frees is the next acquire's: with one set, each frame needs the last one delivered."""
    recorder = Recorder()
    with session.queue(1, heap="memfd", callback=recorder, buffers=1, deliverers=0) as queue:
        for index in range(3):
            submit(queue, 0, index)
            assert queue.deliver_ready(60.0) == 1
        assert recorder.by_key[0] == [0, 1, 2]
        with pytest.raises(npu_zc.PoolExhaustedError):  # the one set is held until its result is delivered
            frame = queue.acquire()
            queue.submit(frame, (0, 3), 0)
            queue.acquire(timeout=0.05)


def test_deliver_ready_waits_a_timeout_under_a_millisecond() -> None:
    """OpenVINO waits for a request in whole milliseconds: a timeout under one is rounded up, not down to a poll, so
    that a thread that delivers between messages sleeps while the oldest inference runs instead of spinning."""
    with slow_session().queue(1, heap="memfd", callback=lambda result: None, buffers=1, deliverers=0) as queue:
        frame = queue.acquire(timeout=30)
        frame.inputs[0][...] = 1.0
        queue.submit(frame, 0, 0)
        began = time.monotonic()
        assert queue.deliver_ready(0.0004) == 0  # the inference takes far longer than that
        assert time.monotonic() - began >= 0.0004
        assert queue.join(timeout=120)
        assert queue.pending == 0


def test_deliver_ready_passes_over_a_held_key_only(session: Session) -> None:
    """deliverers=0, two callers delivering: while one is inside key 0's first callback, the other delivers key 1's
    finished results (submitted after key 0's) and none of key 0's; key 0's come after, in order."""
    inside, go = threading.Event(), threading.Event()

    def delay(key: int, index: int) -> float:
        if (key, index) == (0, 0):
            inside.set()
            go.wait(60)
        return 0.0

    recorder = Recorder(delay)
    with session.queue(2, heap="memfd", callback=recorder, buffers=8, deliverers=0) as queue:
        for key, index in ((0, 0), (0, 1), (1, 2), (1, 3), (0, 4)):
            submit(queue, key, index)
        queue.wait_all()
        first = threading.Thread(target=queue.deliver_ready)
        first.start()
        assert inside.wait(60)
        assert queue.deliver_ready() == 2  # key 1's two; key 0 is held by the other caller
        assert recorder.by_key == {1: [2, 3]}
        go.set()
        first.join(60)
        assert queue.join(timeout=60)
    assert recorder.by_key == {0: [0, 1, 4], 1: [2, 3]} and not recorder.overlaps


class _Waker:
    def __init__(self) -> None:
        self.released = threading.Event()

    def release(self) -> None:
        self.released.set()


def test_wake_on_submit_wakes_a_sleeping_caller_once(session: Session) -> None:
    """A caller that delivers sleeps only while nothing is pending: wake_on_submit() registers its waker then, a
    submit from another thread releases it, and with results pending it refuses (deliver them first)."""
    recorder = Recorder()
    with session.queue(2, heap="memfd", callback=recorder, buffers=3, deliverers=0) as queue:
        waker = _Waker()
        assert queue.wake_on_submit(waker)
        assert not waker.released.is_set()
        feeder = threading.Thread(target=submit, args=(queue, 3, 0))
        feeder.start()
        assert waker.released.wait(60)
        feeder.join(60)
        again = _Waker()
        assert not queue.wake_on_submit(again)  # a result is pending
        assert queue.join(timeout=60) and recorder.by_key[3] == [0]
        assert queue.wake_on_submit(again)
    assert again.released.is_set()  # close() wakes it too: nothing will come


def test_a_cancelled_waker_is_not_released_by_the_next_submit(session: Session) -> None:
    """A caller woken for something else cancels its waker: its own submit then wakes nobody; asked again while the
    result is pending it is refused, and once delivered it registers again."""
    recorder = Recorder()
    with session.queue(2, heap="memfd", callback=recorder, buffers=3, deliverers=0) as queue:
        waker = _Waker()
        assert queue.wake_on_submit(waker)
        queue.cancel_wake(waker)
        queue.cancel_wake(waker)  # twice: nothing to cancel, no error
        submit(queue, 5, 0)
        assert not waker.released.is_set()
        assert not queue.wake_on_submit(waker)  # a result is pending: deliver it first
        assert queue.join(timeout=60) and recorder.by_key[5] == [0]
        assert queue.wake_on_submit(waker)
        submit(queue, 5, 1)
        assert waker.released.wait(60)  # registered again: released by the next submit
        assert queue.join(timeout=60) and recorder.by_key[5] == [0, 1]


def test_acquire_free_takes_only_the_free_sets_and_never_waits(session: Session) -> None:
    """acquire_free(n): at most n sets, only those free now (none: an empty list at once), each a different set;
    a set freed by a delivered result is taken again; a closed queue refuses."""
    recorder = Recorder()
    with session.queue(2, heap="memfd", callback=recorder, buffers=3, deliverers=0) as queue:
        two = queue.acquire_free(2)
        assert len(two) == 2 and len({frame.index for frame in two}) == 2
        rest = queue.acquire_free(5)
        assert len(rest) == 1 and rest[0].index not in {frame.index for frame in two}
        assert queue.acquire_free(1) == []  # every set taken: nothing, and no wait
        for bad in (-1, 1.5, "2", True, None):
            with pytest.raises(npu_zc.InvalidArgumentError, match="limit must be"):
                queue.acquire_free(bad)
        for k, frame in enumerate(two):
            frame.inputs[0][...] = 1000 + k
            queue.submit(frame, (1, k), 1)
        assert queue.join(timeout=60) and recorder.by_key[1] == [0, 1] and not recorder.wrong
        again = queue.acquire_free(3)  # the two delivered sets are free again; the third is still held
        assert sorted(frame.index for frame in again) == sorted(frame.index for frame in two)
        for frame in again + rest:
            queue.discard(frame)
    with pytest.raises(npu_zc.InvalidArgumentError, match="closed"):
        queue.acquire_free(1)


def test_a_failing_callback_is_raised_by_the_callers_next_call(session: Session) -> None:
    """deliverers=0: a callback that raises is kept and raised by join() (as with delivery threads), the set it held
    freed."""

    def fails(result) -> None:  # type: ignore[no-untyped-def]
        raise ValueError("an output broke")

    with session.queue(1, heap="memfd", callback=fails, buffers=1, deliverers=0) as queue:
        submit(queue, 0, 0)
        with pytest.raises(npu_zc.ModelError, match="an output broke"):
            queue.join(timeout=60)
