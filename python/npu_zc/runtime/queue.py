"""An in-order asynchronous queue of inference requests over pooled buffers.

Each input and each output of the model gets a :class:`npu_zc.BufferPool` of
``depth`` buffers, all bound to the device once, up front. A frame takes one
buffer from every pool (:meth:`AsyncQueue.acquire`); the caller writes the
input; :meth:`AsyncQueue.submit` marks the buffers in flight and starts an idle
request on them. The pool never hands out a buffer in flight, so nothing
rewrites an input while the device reads it: the input buffers go back to the
pool when their request completes, the output buffers when the caller has read
the result (:meth:`Result.release`). Results come out in submission order.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..errors import BufferInUseError, InvalidArgumentError, ModelError
from .binding import BoundBuffer, bind

if TYPE_CHECKING:
    from .session import Session


@dataclass(eq=False)
class Frame:
    """One set of input and output buffers taken from the queue's pools."""

    inputs: tuple[np.ndarray, ...]
    """CPU views of the input buffers, shaped and typed as the model's inputs: write the frame here."""
    input_buffers: tuple[Any, ...]
    output_buffers: tuple[Any, ...]
    _in_slots: list[Any]
    _out_slots: list[Any]
    _submitted: bool = False

    @property
    def index(self) -> int:
        """Which buffer of the input pool this frame uses."""
        return int(self._in_slots[0].index)


@dataclass(eq=False)
class Result:
    """A finished inference; ``outputs`` are read in place until :meth:`release`."""

    sequence: int
    userdata: Any
    outputs: tuple[np.ndarray, ...]
    output_buffers: tuple[Any, ...]
    latency_ms: float
    _out_slots: list[Any] = field(repr=False)
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Give the output buffers back to the pool (the views must not be used afterwards)."""
        if not self._released:
            self._released = True
            for slot in self._out_slots:
                slot.release()

    def __enter__(self) -> "Result":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(eq=False)
class _InFlight:
    sequence: int
    frame: Frame
    request: int
    userdata: Any
    done: bool = False
    latency_ms: float = 0.0
    error: str | None = None


class AsyncQueue:
    """``depth`` requests in flight at once, results delivered in submission order.

    Without ``callback``: take results with :meth:`get` and :meth:`Result.release`
    them. With ``callback(result)``: it is called in submission order (on
    OpenVINO's completion thread) and the output buffers are released when it
    returns.
    """

    def __init__(
        self,
        session: "Session",
        depth: int | None = None,
        *,
        heap: str = "auto",
        callback: Callable[[Result], None] | None = None,
    ) -> None:
        from ..buffers import BufferPool

        depth = session.optimal_requests if depth is None else int(depth)
        if depth < 1:
            raise InvalidArgumentError(f"a queue needs a depth of at least 1, got {depth}")
        self.session = session
        self.depth = depth
        self._callback = callback
        self._in_pools = [BufferPool(depth, spec.nbytes, heap) for spec in session.inputs]
        self._out_pools = [BufferPool(depth, spec.nbytes, heap) for spec in session.outputs]
        # Bind every pooled buffer once; submit only swaps the tensors a request points at.
        self._bound_in: list[list[BoundBuffer]] = [
            [bind(session.device, session.context, spec, buf) for buf in pool.buffers]
            for spec, pool in zip(session.inputs, self._in_pools)
        ]
        self._bound_out: list[list[BoundBuffer]] = [
            [bind(session.device, session.context, spec, buf) for buf in pool.buffers]
            for spec, pool in zip(session.outputs, self._out_pools)
        ]
        self._requests = [session.compiled.create_infer_request() for _ in range(depth)]
        for i, request in enumerate(self._requests):
            request.set_callback(self._on_done, i)
        self._idle: collections.deque[int] = collections.deque(range(depth))
        self._running: dict[int, _InFlight] = {}
        self._pending: collections.deque[_InFlight] = collections.deque()
        self._sequence = 0
        self._lock = threading.Condition()
        self._deliver_lock = threading.Lock()
        self._failure: BaseException | None = None
        self._closed = False

    @property
    def pending(self) -> int:
        """Submitted frames whose results have not been taken yet."""
        with self._lock:
            return len(self._pending)

    @property
    def in_flight(self) -> int:
        """Requests running on the device now."""
        with self._lock:
            return len(self._running)

    def acquire(self, timeout: float | None = None) -> Frame:
        """Take a free set of buffers; waits (up to ``timeout`` s) while all are in flight or unreleased.

        Raises :class:`npu_zc.PoolExhaustedError` on timeout. In a single thread,
        take and release results (:meth:`get`) before acquiring more than ``depth`` frames.
        """
        self._check_open()
        in_slots: list[Any] = []
        out_slots: list[Any] = []
        try:
            for pool in self._in_pools:
                in_slots.append(pool.acquire(timeout=timeout))
            for pool in self._out_pools:
                out_slots.append(pool.acquire(timeout=timeout))
        except BaseException:
            for slot in in_slots + out_slots:
                slot.release()
            raise
        return Frame(
            inputs=tuple(self._bound_in[p][s.index].array for p, s in enumerate(in_slots)),
            input_buffers=tuple(s.buffer for s in in_slots),
            output_buffers=tuple(s.buffer for s in out_slots),
            _in_slots=in_slots,
            _out_slots=out_slots,
        )

    def submit(self, frame: Frame, userdata: Any = None) -> int:
        """Start inference on ``frame``'s buffers; returns its sequence number."""
        self._check_open()
        if frame._submitted:
            raise InvalidArgumentError("this frame was submitted already: acquire a new one")
        with self._lock:
            if not self._idle:  # cannot happen while frames come from our pools; kept as a guard
                raise InvalidArgumentError("no idle request: frames must come from this queue's acquire()")
            index = self._idle.popleft()
            entry = _InFlight(self._sequence, frame, index, userdata)
            self._sequence += 1
        request = self._requests[index]
        try:
            for port, slot in enumerate(frame._in_slots):
                request.set_input_tensor(port, self._bound_in[port][slot.index].tensor)
            for port, slot in enumerate(frame._out_slots):
                request.set_output_tensor(port, self._bound_out[port][slot.index].tensor)
            for slot in frame._in_slots + frame._out_slots:
                slot.submit()
        except BaseException:
            with self._lock:
                self._idle.appendleft(index)
            raise
        frame._submitted = True
        with self._lock:
            self._running[index] = entry
            self._pending.append(entry)
        request.start_async()
        return entry.sequence

    def get(self, timeout: float | None = None) -> Result | None:
        """The next result in submission order, waiting for it; None if ``timeout`` s pass first."""
        if self._callback is not None:
            raise InvalidArgumentError("this queue hands results to its callback; get() is for queues without one")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while not (self._pending and self._pending[0].done):
                self._raise_failure()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._lock.wait(left)
            entry = self._pending.popleft()
        return self._result(entry)

    def wait_all(self) -> None:
        """Wait until no request is running (results may still wait to be taken)."""
        with self._lock:
            while self._running:
                self._lock.wait()
        self._raise_failure()

    def close(self) -> None:
        """Wait for running requests, drop unclaimed results and the bindings, and close the pools."""
        if self._closed:
            return
        with self._lock:
            while self._running:
                self._lock.wait()
            leftovers = list(self._pending)
            self._pending.clear()
        # `_running` empties inside the completion callback, before OpenVINO's
        # thread has left it; wait() returns only once it has. Destroying the
        # requests (or exiting the interpreter) while a callback thread still
        # holds Python objects aborts the process ("terminate called ...").
        for request in self._requests:
            request.wait()
        for entry in leftovers:
            for slot in entry.frame._out_slots:
                slot.release()
        self._closed = True
        self._bound_in.clear()
        self._bound_out.clear()
        self._requests.clear()
        for pool in self._in_pools + self._out_pools:
            try:
                pool.close()
            except BufferInUseError:  # the caller still holds views of a frame; freed when they go
                pass

    def __enter__(self) -> "AsyncQueue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- completion (OpenVINO's thread) ---

    def _on_done(self, index: int) -> None:
        try:
            with self._lock:
                entry = self._running.pop(index)
                entry.latency_ms = float(self._requests[index].latency)
                entry.done = True
                # The device has finished reading the inputs: they may be written again.
                for slot in entry.frame._in_slots:
                    slot.release()
                self._idle.append(index)
                self._lock.notify_all()
            if self._callback is not None:
                self._deliver()
        except BaseException as exc:  # never let an exception escape into OpenVINO's thread
            with self._lock:
                self._failure = self._failure or exc
                self._lock.notify_all()

    def _deliver(self) -> None:
        assert self._callback is not None
        with self._deliver_lock:  # one thread at a time, so the order holds
            while True:
                with self._lock:
                    if not (self._pending and self._pending[0].done):
                        return
                    entry = self._pending.popleft()
                result = self._result(entry)
                try:
                    self._callback(result)
                finally:
                    result.release()

    def _result(self, entry: _InFlight) -> Result:
        frame = entry.frame
        return Result(
            sequence=entry.sequence,
            userdata=entry.userdata,
            outputs=tuple(self._bound_out[p][s.index].array for p, s in enumerate(frame._out_slots)),
            output_buffers=frame.output_buffers,
            latency_ms=entry.latency_ms,
            _out_slots=frame._out_slots,
        )

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise ModelError(f"an asynchronous inference or its callback failed: {failure}") from failure

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidArgumentError("the queue is closed")
        self._raise_failure()
