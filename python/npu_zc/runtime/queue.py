"""An in-order asynchronous queue of inference requests over pooled buffers.

Each input and each output of the model gets a :class:`npu_zc.BufferPool` of
``buffers`` buffers; buffer ``k`` of every pool makes set ``k``, and set ``k``
has its own infer request, whose input and output tensors are set to that
set's buffers once, when the queue is made. A frame is a free set
(:meth:`AsyncQueue.acquire`); the caller writes the input;
:meth:`AsyncQueue.submit` only starts the set's request (no ``set_*_tensor``
per frame: each is a call into the plugin with the GIL held). A set is busy
from its acquire until its result is released (:meth:`Result.release`), so
nothing rewrites an input while the device reads it, nor while its output is
read. Results come out in submission order, or, with several delivery threads,
in submission order per key (``submit(..., key=)``).
"""

from __future__ import annotations

import collections
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

import numpy as np

from .._timeouts import SLICE_S, timeout_seconds
from ..errors import BufferInUseError, InvalidArgumentError, ModelError, PoolExhaustedError
from .binding import BindingReport, BoundBuffer, bind, report
from .target import Target

_SLICE_MS = int(SLICE_S * 1000)

SCAN = 8
"""How many unfinished results :meth:`AsyncQueue.deliver_ready` looks past, at most, for finished ones behind them."""

ABANDON_S = 10.0
"""How long :meth:`AsyncQueue.abandon` waits for the inferences running (one inference's time, at most)."""


def _start_async() -> Callable[[Any, dict[Any, Any], Any], None]:
    """``InferRequest.start_async`` of the bindings, without the Python layer that converts inputs: the queue
    has set the tensors already, and per frame that layer is two Python calls made with the GIL held."""
    try:
        from openvino._pyopenvino import InferRequest
    except ImportError:  # another layout of the bindings: the public method (inputs {} and userdata None work there too)
        return lambda request, inputs, userdata: request.start_async(inputs or None, userdata)
    start: Callable[[Any, dict[Any, Any], Any], None] = InferRequest.start_async
    return start


_NO_INPUTS: dict[Any, Any] = {}


@dataclass(eq=False)
class BufferSet:
    """One set of input and output buffers taken from the queue's pools, bound to its own request.

    Not a decoded or captured frame (``npu_zc.Frame``, ``sources.DecodedFrame``): the memory one frame is
    written into and its result read from, handed out by :meth:`AsyncQueue.acquire`.
    """

    inputs: tuple[np.ndarray, ...]
    """CPU views of the input buffers, shaped and typed as the model's inputs: write the frame here."""
    input_buffers: tuple[Any, ...]
    output_buffers: tuple[Any, ...]
    _set: int
    _submitted: bool = False
    _queue: Any = None  # the queue whose pools the buffers come from

    @property
    def index(self) -> int:
        """Which set of buffers (and so which buffer of every pool, and which request) this is."""
        return self._set


@dataclass(eq=False)
class Result:
    """A finished inference; ``outputs`` are read in place until :meth:`release`."""

    sequence: int
    userdata: Any
    outputs: tuple[np.ndarray, ...]
    output_buffers: tuple[Any, ...]
    latency_ms: float
    _set: int = field(repr=False)
    _queue: Any = field(repr=False)
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Give the set of buffers back to the queue (the views must not be used afterwards)."""
        if not self._released:
            self._released = True
            self._queue._free_set(self._set)

    def __enter__(self) -> "Result":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(eq=False)
class _InFlight:
    sequence: int
    frame: BufferSet
    request: int
    userdata: Any
    key: Hashable = None
    done: bool = False
    completing: bool = False
    delivered: bool = False
    latency_ms: float = 0.0
    error: BaseException | None = None


class AsyncQueue:
    """Sets of bound buffers, each with its own request; results delivered in submission order.

    Create with ``Session.queue()`` (or from a :class:`.Target`). ``depth``: the
    inferences meant to run at once; ``buffers`` (at least ``depth``, default
    ``depth``): the sets of input and output buffers, each bound once to a
    request of its own. A set is busy from :meth:`acquire` until its result is
    released, so sets beyond ``depth`` are those being written or read while
    ``depth`` inferences run.

    Without ``callback``: take results with :meth:`get` and :meth:`Result.release`
    them. With ``callback(result)``: a delivery thread calls it in submission
    order and releases the output buffers when it returns.

    ``deliverers=0`` (with a callback): no delivery thread; the caller hands the
    finished results to the callback with :meth:`deliver_ready`, from a thread
    that also submits (``npu_zc.Streams``' receiving thread with decoding
    workers): submitting and delivering on one thread, the GIL changes hands
    only where it waits. :meth:`join` delivers what is left.

    ``deliverers=N`` (with a callback): N delivery threads, each waiting for a
    result and calling the callback, side by side. Results submitted with the
    same ``key`` (:meth:`submit`; e.g. a stream) are still delivered one at a
    time in their submission order: a result waits only for the earlier results
    of its own key, so a slow callback or a late inference of one key holds up
    only that key. Results of different keys may be delivered concurrently and
    out of submission order. The callback must then be safe to call from several
    threads at once (for different keys).

    Several threads may acquire and submit at once (``npu_zc.Streams``' feeding
    threads do): results then come in the order the submissions finished, and
    what one thread submits comes in its own order.

    Completion is observed with ``InferRequest.wait``/``wait_for`` (the GIL is
    released while waiting), never with OpenVINO completion callbacks: those run
    Python on OpenVINO's threads, which can abort the process when the
    interpreter exits while one is in progress, and they cannot report a failed
    inference. Waiting in submission order loses nothing: results are delivered
    in that order anyway.
    """

    def __init__(
        self,
        target: Target,
        depth: int | None = None,
        *,
        heap: str = "auto",
        callback: Callable[[Result], None] | None = None,
        buffers: int | None = None,
        deliverers: int = 1,
    ) -> None:
        from ..buffers import BufferPool

        depth = target.optimal_requests if depth is None else int(depth)
        if depth < 1:
            raise InvalidArgumentError(f"a queue needs a depth of at least 1, got {depth}")
        deliverers = int(deliverers)
        if deliverers < 0 or (deliverers == 0 and callback is None):
            raise InvalidArgumentError(f"a queue needs at least one delivery thread, got {deliverers}")
        if deliverers > 1 and callback is None:
            raise InvalidArgumentError("deliverers call a callback: give one, or take results with get()")
        buffers = depth if buffers is None else int(buffers)
        if buffers < depth:
            raise InvalidArgumentError(f"a queue of {depth} requests needs at least {depth} sets of buffers, got {buffers}")
        self.target = target
        """What it infers on: the compiled model, its tensor specs, the device."""
        self.depth = depth
        """How many inferences are meant to run at once (at most ``buffers`` can)."""
        self.buffers = buffers
        """Sets of input and output buffers, each with its own request; those beyond ``depth`` are written or
        read while ``depth`` inferences run."""
        self._callback = callback
        self._in_pools = [BufferPool(buffers, spec.nbytes, heap) for spec in target.inputs]
        self._out_pools = [BufferPool(buffers, spec.nbytes, heap) for spec in target.outputs]
        # Bind every pooled buffer once, and point each set's request at its set once: submit only starts it.
        self._bound_in: list[list[BoundBuffer]] = [
            [bind(target.device, target.context, spec, buf) for buf in pool.buffers]
            for spec, pool in zip(target.inputs, self._in_pools)
        ]
        self._bound_out: list[list[BoundBuffer]] = [
            [bind(target.device, target.context, spec, buf) for buf in pool.buffers]
            for spec, pool in zip(target.outputs, self._out_pools)
        ]
        self._requests = [target.create_infer_request() for _ in range(buffers)]
        for k, request in enumerate(self._requests):
            for port, bound in enumerate(self._bound_in):
                request.set_input_tensor(port, bound[k].tensor)
            for port, bound in enumerate(self._bound_out):
                request.set_output_tensor(port, bound[k].tensor)
        self._free: collections.deque[int] = collections.deque(range(buffers))  # sets no frame or result holds
        self._states = ["free"] * buffers  # per set: "free", "cpu" (acquired), "in-flight", "result" (for tests)
        self._running: collections.deque[_InFlight] = collections.deque()  # oldest first
        self._pending: collections.deque[_InFlight] = collections.deque()  # results not taken yet
        self._sequence = 0
        self._delivered = 0  # results handed to the callback (or failed on the way)
        self._delivering: set[Hashable] = set()  # keys whose result a delivery thread holds (each key's order)
        # Idle delivery threads, each asleep on its own locked lock; a new or newly claimable result releases one
        # (a plain lock: one C call to sleep and one to wake, where a Condition costs a dozen Python calls).
        self._sleeping: list[Any] = []
        # State changes under the plain lock (no Python-level calls to take it); the condition over it is
        # waited on and notified only when some thread waits (per frame, the common case is nobody).
        self._mutex = threading.RLock()
        self._lock = threading.Condition(self._mutex)
        self._waiters = 0
        self._starting = 0  # submissions between their check and their entry in _running
        self._start = _start_async()
        # Per set, what a frame and a result hand out: built once.
        self._set_inputs = [tuple([b[k].array for b in self._bound_in]) for k in range(buffers)]
        self._set_outputs = [tuple([b[k].array for b in self._bound_out]) for k in range(buffers)]
        self._set_in_buffers = [tuple([pool.buffers[k] for pool in self._in_pools]) for k in range(buffers)]
        self._set_out_buffers = [tuple([pool.buffers[k] for pool in self._out_pools]) for k in range(buffers)]
        self._failure: BaseException | None = None
        self._closed = False
        self._deliverers: list[threading.Thread] = []
        if callback is not None:
            self._deliverers = [
                threading.Thread(target=self._deliver_loop, name=f"npu_zc-queue{k or ''}", daemon=True)
                for k in range(deliverers)
            ]
            for deliverer in self._deliverers:
                deliverer.start()

    @property
    def deliverers(self) -> int:
        """Delivery threads calling the callback (0: the caller delivers, :meth:`deliver_ready`)."""
        return len(self._deliverers)

    @property
    def closed(self) -> bool:
        """Closed, or given up (:meth:`abandon`): it takes no frame and delivers no result any more."""
        return self._closed

    @property
    def pending(self) -> int:
        """Submitted frames whose results have not been taken yet."""
        with self._mutex:
            return len(self._pending)

    @property
    def dmabuf_outputs(self) -> bool:
        """The output buffers are DMA-BUFs: a result's outputs are read between ``cpu_access("read")`` brackets
        (memfd buffers need none)."""
        return any(pool.buffers[0].is_dmabuf for pool in self._out_pools)

    @property
    def input_buffers(self) -> list[tuple[Any, ...]]:
        """Each set's input buffers, by set index: to share with a process that writes the frames (each set's
        request reads them in place; write one only while its set is acquired)."""
        return list(self._set_in_buffers)

    @property
    def input_arrays(self) -> list[tuple[np.ndarray, ...]]:
        """Each set's CPU views of its input buffers, by set index (shaped and typed as the model's inputs)."""
        return list(self._set_inputs)

    @property
    def in_flight(self) -> int:
        """Requests started and not yet seen complete."""
        with self._mutex:
            return len(self._running)

    def binding_report(self) -> list[BindingReport]:
        """Per input and output of the first set of pooled buffers (every set is bound alike): whether the
        device reads our memory or a copy, and how we know (see :class:`npu_zc.runtime.BindingReport`)."""
        self._check_open()
        device = self.target.device
        return [report(device, "input", i, bound[0]) for i, bound in enumerate(self._bound_in)] + [
            report(device, "output", i, bound[0]) for i, bound in enumerate(self._bound_out)
        ]

    def acquire(self, timeout: float | None = None) -> BufferSet:
        """Take a free set of buffers; waits (up to ``timeout`` s) while every set is in flight or its result unreleased.

        Raises :class:`npu_zc.PoolExhaustedError` on timeout. In a single thread,
        take and release results (:meth:`get`) before acquiring more than ``buffers`` frames.
        """
        if self._closed or self._failure is not None:  # checked inline: this runs per frame
            self._check_open()
        if timeout is not None:
            timeout = timeout_seconds(timeout)
        with self._mutex:  # pure Python while a set is free: no call that gives the GIL up
            if self._free:
                return self._frame(self._free.popleft())
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._mutex:
            while not self._free:
                self._check_open()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise PoolExhaustedError(
                        f"no free set of buffers within {timeout:g} s: all {self.buffers} are in flight or hold "
                        "results not released yet"
                    )
                # In slices: between them Python runs its signal handlers, so Ctrl-C stops the wait.
                self._wait(SLICE_S if left is None else min(SLICE_S, left))
            return self._frame(self._free.popleft())

    def acquire_free(self, limit: int) -> list[BufferSet]:
        """Up to ``limit`` sets of buffers that are free now, without waiting (none: an empty list), taken under
        one lock: for a caller that hands out several at once (``npu_zc.Streams``' grants to its decoding workers)."""
        if self._closed or self._failure is not None:
            self._check_open()
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidArgumentError(f"limit must be a whole number of sets, 0 or more, not {limit!r}")
        frames = []
        with self._mutex:
            free, take = self._free, self._frame
            for _ in range(min(limit, len(free))):
                frames.append(take(free.popleft()))
        return frames

    def submit(self, frame: BufferSet, userdata: Any = None, key: Hashable = None) -> int:
        """Start inference on ``frame``'s buffers; returns its sequence number.

        ``key``: results of one key are delivered in their submission order (all of them, with one delivery
        thread; with several, only those of one key, see :class:`AsyncQueue`)."""
        if self._closed or self._failure is not None:  # checked inline: this runs per frame
            self._check_open()
        if frame._queue is not self:
            raise InvalidArgumentError("this frame was acquired from another queue: submit it to the queue that gave it")
        if frame._submitted:
            raise InvalidArgumentError("this frame was submitted already: acquire a new one")
        index = frame._set
        with self._mutex:  # counted as starting: abandon() waits for it, or this sees the queue given up
            if self._closed:
                self._check_open()
            self._starting += 1
        try:
            self._states[index] = "in-flight"
            self._start(self._requests[index], _NO_INPUTS, None)  # its tensors were set when the queue was made
        except BaseException:
            self._states[index] = "cpu"  # still the caller's: it may discard it
            with self._mutex:
                self._starting -= 1
                self._notify()
            raise
        frame._submitted = True
        with self._mutex:
            self._starting -= 1
            entry = _InFlight(self._sequence, frame, index, userdata, key)
            self._sequence += 1
            self._running.append(entry)
            self._pending.append(entry)
            if self._waiters:  # _notify inline: this runs per frame
                self._lock.notify_all()
            if self._sleeping:
                self._sleeping.pop().release()  # a result to deliver: one idle delivery thread wakes
        return entry.sequence

    def discard(self, frame: BufferSet) -> None:
        """Give back a frame that was acquired and will not be submitted (e.g. when the caller stops on an error)."""
        if frame._queue is not self:
            raise InvalidArgumentError("this frame was acquired from another queue: discard it there")
        if frame._submitted:
            raise InvalidArgumentError("this frame was submitted: its buffers come back when its result is released")
        frame._submitted = True  # nothing can submit it afterwards
        self._free_set(frame._set)

    def join(self, timeout: float | None = None) -> bool:
        """With a callback: wait until every submitted frame's result has been handed to it; False on timeout.

        Raises the first failure of an inference or of the callback.
        """
        if self._callback is None:
            raise InvalidArgumentError("join() waits for a callback's deliveries; without one, get() every result")
        timeout = timeout_seconds(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._deliverers:  # the caller delivers: here, what is left
            while self._delivered < self._sequence and self._failure is None and not self._closed:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                if not self.deliver_ready(0.1 if left is None else min(0.1, left)):
                    with self._mutex:  # another thread delivers the oldest: wait for a change
                        if self._pending and self._pending[0].key in self._delivering:
                            self._wait(0.1)
            self._raise_failure()
            return True
        with self._mutex:
            while self._delivered < self._sequence and self._failure is None:
                if not any(deliverer.is_alive() for deliverer in self._deliverers):
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._wait(0.1 if left is None else min(0.1, left))
        self._raise_failure()
        return True

    def get(self, timeout: float | None = None) -> Result | None:
        """The next result in submission order, waiting for it; None if ``timeout`` s pass first."""
        if self._callback is not None:
            raise InvalidArgumentError("this queue hands results to its callback; get() is for queues without one")
        timeout = timeout_seconds(timeout)
        self._raise_failure()
        with self._mutex:
            entry = self._pending[0] if self._pending else None
        if entry is None or not self._complete(entry, timeout):
            return None
        with self._mutex:
            self._pending.remove(entry)
        return self._result(entry)

    def wait_all(self) -> None:
        """Wait until no request is running (results may still wait to be taken)."""
        while (oldest := self._oldest_running()) is not None:
            self._complete(oldest, None)
        self._raise_failure()

    def abandon(self, timeout: float = ABANDON_S) -> bool:
        """Give the queue up to threads that may never return (a callback that hangs): it takes no more frames, and
        this waits (up to ``timeout`` s) until no inference of it runs; True once none does. Nothing is delivered
        or freed here: its buffers stay with those threads until the process ends. A process must not exit with an
        inference running: the plugin's threads are torn down under it, and that aborts the process."""
        seconds = timeout_seconds(timeout)
        if seconds is None:
            raise InvalidArgumentError("abandon() waits a bounded time: give a finite number of seconds")
        with self._mutex:
            self._closed = True  # acquire and submit refuse from now on; close() has nothing left to do
            self._notify()
            while self._sleeping:
                self._sleeping.pop().release()
        deadline = time.monotonic() + seconds
        with self._mutex:
            while self._starting:  # an inference being started now: once started, it is waited for below
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wait(min(left, SLICE_S))
        while (oldest := self._oldest_running()) is not None:
            left = deadline - time.monotonic()
            try:
                if left <= 0 or not self._complete(oldest, left):
                    return False
            except ModelError:
                pass  # given up: the failure has nowhere to go
        return True

    def close(self) -> None:
        """Wait for running requests, drop unclaimed results and the bindings, and close the pools."""
        if self._closed:
            return
        with self._mutex:
            self._closed = True
            self._notify()
            while self._sleeping:
                self._sleeping.pop().release()
        for deliverer in self._deliverers:
            deliverer.join()
        for entry in list(self._running):
            try:
                self._complete(entry, None)
            except ModelError:
                pass  # closing: the failure has nowhere to go
        with self._mutex:
            leftovers = list(self._pending)
            self._pending.clear()
        for entry in leftovers:
            self._free_set(entry.frame._set)
        # Every view and tensor of the pooled buffers goes before the pools close: the bindings, the
        # per-set tuples of arrays and buffers, and the requests that point at those tensors.
        for holder in (self._bound_in, self._bound_out, self._set_inputs, self._set_outputs):
            holder.clear()
        self._requests.clear()
        for pool in self._in_pools + self._out_pools:
            try:
                pool.close()
            except BufferInUseError:  # the caller still holds views of a frame; freed when they go
                pass
        # A closed pool keeps its fds until it is dropped: the queue lets go of its pools and their buffers, so a
        # closed queue that lives on holds none.
        for pools in (self._in_pools, self._out_pools, self._set_in_buffers, self._set_out_buffers):
            pools.clear()

    def __enter__(self) -> "AsyncQueue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- buffers ---

    def _frame(self, index: int) -> BufferSet:
        """Set ``index``, just taken from the free ones (with the mutex held), handed out."""
        self._states[index] = "cpu"
        return BufferSet(
            inputs=self._set_inputs[index],
            # The pools' buffers, as the queue's own views are: the frame owns them until its result is released.
            input_buffers=self._set_in_buffers[index],
            output_buffers=self._set_out_buffers[index],
            _set=index,
            _queue=self,
        )

    def _free_set(self, index: int) -> None:
        """Set ``index`` is free again: no frame is written into it and no result read from it."""
        with self._mutex:
            self._states[index] = "free"
            self._free.append(index)
            if self._waiters:  # inline: this runs per frame, and most often nobody waits
                self._lock.notify_all()

    def _state(self, index: int) -> str:
        """Set ``index``: "free", "cpu" (acquired), "in-flight" (submitted), or "result" (done, not released)."""
        return self._states[index]

    # --- completion ---

    def _oldest_running(self) -> _InFlight | None:
        with self._mutex:
            return self._running[0] if self._running else None

    def _complete(self, entry: _InFlight, timeout: float | None) -> bool:
        """Wait (up to ``timeout`` s) until ``entry``'s request is done; True once it is.

        One thread waits on a request at a time; the others wait on the
        condition for it to be marked done.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._mutex:
            while entry.completing and not entry.done:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._wait(left)
            if entry.done:
                return self._check(entry)
            entry.completing = True
        request = self._requests[entry.request]
        error: BaseException | None = None
        try:
            # In slices: between them Python runs its signal handlers, so Ctrl-C stops a wait on a request.
            while True:
                # Rounded up: OpenVINO waits whole milliseconds, and a timeout under one must still wait, not poll.
                left_ms = None if deadline is None else max(0, math.ceil((deadline - time.monotonic()) * 1000))
                finished = bool(request.wait_for(_SLICE_MS if left_ms is None else min(_SLICE_MS, left_ms)))
                if finished or (left_ms is not None and left_ms <= _SLICE_MS):
                    break
        except RuntimeError as e:  # OpenVINO reports a failed inference here
            error, finished = e, True
        except BaseException:  # e.g. Ctrl-C while waiting: another thread must be able to wait for it instead
            with self._mutex:
                entry.completing = False
                self._notify()
            raise
        with self._mutex:
            entry.completing = False
            if finished:
                self._finished(entry, error)
            self._notify()
        return self._check(entry) if finished else False

    def _finished(self, entry: _InFlight, error: BaseException | None) -> None:
        """``entry``'s request has finished (with ``error``, if it failed): marked done (with the mutex held)."""
        entry.done = True
        entry.error = error
        entry.latency_ms = float(self._requests[entry.request].latency) if error is None else 0.0
        self._states[entry.request] = "result"  # the set stays taken until the result is released
        self._running.remove(entry)

    def _check(self, entry: _InFlight) -> bool:
        if entry.error is not None:
            raise ModelError(f"inference of frame {entry.sequence} failed: {entry.error}") from entry.error
        return True

    def _claim(self) -> _InFlight | None:
        """The oldest pending result whose key no delivery thread holds, now held (with the mutex held).

        Scanning oldest first, the first entry of a key not held is that key's oldest: each key's results
        are claimed, and so delivered, one at a time in submission order."""
        held = self._delivering
        for entry in self._pending:
            if entry.key not in held:
                held.add(entry.key)
                return entry
        return None

    def _deliver_loop(self) -> None:
        callback = self._callback
        assert callback is not None
        main = threading.main_thread()
        wake = threading.Lock()
        wake.acquire()  # held: acquiring it again sleeps until a submit (or a delivery, or close) releases it
        sleeping = self._sleeping
        while True:
            with self._mutex:
                entry = self._claim()
                if entry is None:
                    if not self._pending and self._closed:
                        return  # closed and nothing left to deliver
                    sleeping.append(wake)
            if entry is None:
                woken = wake.acquire(timeout=0.1)
                with self._mutex:
                    if wake in sleeping:  # timed out, nobody woke it
                        sleeping.remove(wake)
                    elif not woken:  # woken just after the timeout: the lock was released, take it back
                        wake.acquire(blocking=False)
                if not woken and not main.is_alive() and not self._pending:
                    return  # the program is ending and nothing is left to deliver
                continue
            self._deliver(entry, callback)

    def deliver_ready(self, timeout: float = 0.0) -> int:
        """With a callback and no delivery threads (``deliverers=0``): hand every finished result to the callback
        from this thread, each key's in its submission order (a key whose oldest result is not finished waits, the
        others go on), waiting up to ``timeout`` s for the oldest result when none is finished; returns how many
        were delivered. One thread that both submits and delivers hands the GIL to nobody between the two."""
        callback = self._callback
        if callback is None or self._deliverers:
            raise InvalidArgumentError("deliver_ready() is for a queue made with a callback and deliverers=0")
        delivered = self._deliver_finished(callback)
        if delivered or timeout <= 0:
            return delivered
        with self._mutex:
            oldest = self._pending[0] if self._pending and not self._closed else None
        if oldest is None:
            return 0
        try:
            self._complete(oldest, timeout)
        except ModelError:
            pass  # finished, as a failure: delivered as one below
        return self._deliver_finished(callback)

    def _deliver_finished(self, callback: Callable[[Result], None]) -> int:
        """The pending results whose requests have finished, to ``callback``, oldest first; a key is passed over
        from its first result that has not finished (or that another thread holds). The scan ends at the
        :data:`SCAN`-th result not finished: it runs between every few messages, and the later results' turn comes."""
        with self._mutex:
            entries = list(self._pending) if not self._closed else []
        requests, waiting = self._requests, set()
        delivered = unfinished = 0
        for entry in entries:
            key = entry.key
            if key in waiting:
                continue
            error: BaseException | None = None
            if not entry.done:
                try:
                    finished = not entry.completing and bool(requests[entry.request].wait_for(0))
                except RuntimeError as exc:  # OpenVINO reports a failed inference here
                    finished, error = True, exc
                if not finished:
                    waiting.add(key)
                    unfinished += 1
                    if unfinished == SCAN:
                        break
                    continue
            with self._mutex:
                if entry.delivered or entry.completing or key in self._delivering:  # another thread has it
                    waiting.add(key)
                    continue
                self._delivering.add(key)
                if not entry.done:  # (nobody waits for this: the delivery's end below notifies)
                    self._finished(entry, error)
            self._deliver(entry, callback)
            delivered += 1
        return delivered

    def wake_on_submit(self, waker: Any) -> bool:
        """For a caller that delivers (``deliverers=0``) and sleeps while no result is pending: ``waker.release()``
        is called once, at the next submit (or close). False, and nothing registered, when results are pending
        already (deliver them instead of sleeping). True without registering once the queue is closed (nothing
        comes: sleep until something else wakes the caller)."""
        with self._mutex:
            if self._pending:
                return False
            if not self._closed and waker not in self._sleeping:
                self._sleeping.append(waker)
            return True

    def cancel_wake(self, waker: Any) -> None:
        """The caller of :meth:`wake_on_submit` woke for something else: ``waker`` is not released at the next
        submit (the caller's own submits need no wake-up; it asks again before it sleeps)."""
        with self._mutex:
            if waker in self._sleeping:
                self._sleeping.remove(waker)

    def _deliver(self, entry: _InFlight, callback: Callable[[Result], None]) -> None:
        """``entry``'s result to ``callback`` (claimed by this thread), then released; a failure is kept for the
        caller's next call."""
        result: Result | None = None
        failure: BaseException | None = None
        try:
            if not entry.done or entry.error is not None:
                self._complete(entry, None)  # waits for it, or raises its failure
            result = self._result(entry)
            callback(result)
        except BaseException as exc:  # reported to the caller on its next call
            failure = exc
        finally:
            index = entry.frame._set
            with self._mutex:  # the set freed under the same lock as the bookkeeping: this runs per frame
                if result is None or not result._released:  # (None: the inference failed, no output handed out)
                    if result is not None:
                        result._released = True
                    self._states[index] = "free"  # _free_set's work inline, its waiters woken below
                    self._free.append(index)
                entry.delivered = True
                self._pending.remove(entry)
                self._delivering.discard(entry.key)
                self._delivered += 1
                if failure is not None:
                    self._failure = self._failure or failure
                if self._waiters:  # _notify inline
                    self._lock.notify_all()
                if self._deliverers and self._sleeping and self._pending:
                    self._sleeping.pop().release()  # the key's next result may be waiting for another delivery thread

    def _result(self, entry: _InFlight) -> Result:
        index = entry.frame._set
        return Result(
            sequence=entry.sequence,
            userdata=entry.userdata,
            outputs=self._set_outputs[index],
            output_buffers=self._set_out_buffers[index],
            latency_ms=entry.latency_ms,
            _set=index,
            _queue=self,
        )

    def _wait(self, timeout: float | None) -> None:
        """Wait for a change of state (with the mutex held)."""
        self._waiters += 1
        try:
            self._lock.wait(timeout)
        finally:
            self._waiters -= 1

    def _notify(self) -> None:
        """Wake the threads waiting for a change of state, if any (with the mutex held)."""
        if self._waiters:
            self._lock.notify_all()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            if not isinstance(failure, Exception):  # SystemExit, KeyboardInterrupt: a way out, not an error
                raise failure
            raise ModelError(f"an asynchronous inference or its callback failed: {failure}") from failure

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgumentError("the queue is closed")
        self._raise_failure()
