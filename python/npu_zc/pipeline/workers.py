"""Decoding worker processes for :class:`npu_zc.Streams`: past the one interpreter lock, no frame copied.

One interpreter runs one thread of Python at a time, and a stream's frame
crosses it several times (PyAV's decode call, the hand-over to a lane, the
conversion, the submission, the delivery). With many streams on many cores,
that lock is the cap, not the cores. Here each worker process
(:mod:`.decode_worker`) decodes its share of the video streams and converts
each frame, in place from the decoder's planes, straight into a set of input
buffers of this process's :class:`~npu_zc.runtime.AsyncQueue`: the sets'
buffers (sealed memfds or DMA-BUFs) are shared once, as inherited fds, when the
worker starts, and each frame is then a message of a few dozen bytes naming
the set. This process submits the set's request (bound once, as ever) and
delivers the result; a set is granted to a worker again once free, a few per
worker at a time (:func:`default_worker_credits` beyond its feeding threads).

What a caller sees does not change: each stream's results in its frame order
(one worker reads a stream, its messages come in order, they are submitted in
that order with the stream as the queue's key), drops counted (a worker's live
lane keeps the newest frames, as here), an error per stream, results in frame
pixels. A worker that dies is an error of each of its streams; the others go
on. Stopping tells every worker to stop, takes the frames they have converted,
and waits for each to say bye (then reaps it; one that does not answer is
killed).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable

from ..errors import Error, ModelError
from .decode_worker import FORMATS, FRAME, GRANTS_FLAG, JOIN_S, MAX_PACKET, SET, pack_json, unpack_json
from .scheduler import LIVE_FRAMES

CREDITS = 1
"""Sets of buffers a worker holds beyond one per feeding thread where the model runs on an NPU or a GPU: one ready
while the others are written (:func:`default_worker_credits`)."""

CPU_CREDITS = 8
"""The same where the CPU may run the model, within :data:`AHEAD_BYTES` (:func:`default_worker_credits`)."""

AHEAD_BYTES = 64 << 20
"""The most memory a worker's sets ahead take where the CPU may run the model (one set at least): a set is a
request's inputs and outputs, 0.2 MB for a classifier at 224, 4.5 MB for a detector at 640, about 18 MB at 1280."""

WORKER_NICE = 10
"""Nice levels below the inference process that the workers run at where the model is off the CPU, as batch work
(:func:`npu_zc.pipeline.streams.default_worker_nice`)."""

WORKER_ENTRY = "from npu_zc.pipeline.decode_worker import run; run()"
"""What a worker process runs (``python -c``; see :mod:`.decode_worker`)."""

DELIVER_S = 0.001
"""How long the receiving thread, when it delivers and results are pending, waits for a message before it looks at
their inferences again (a message wakes it at once; a finished inference is seen within this)."""

SEND_S = 30.0
"""How long a message to a worker may wait for room in its socket: a worker reads each at once (between opening
streams), so one that reads none for this long is stuck, and is stopped."""

START_S = 60.0
"""How long a worker may take to start (import numpy and PyAV, map the buffers) and say ready."""


def decodes_in_a_worker(source: Any) -> bool:
    """Whether a worker process can read ``source``: a video file or network stream (:class:`VideoSource` itself,
    rebuilt there from its arguments; a subclass or a source object of one's own is read here)."""
    from ..sources.video import VideoSource

    return type(source) is VideoSource


def default_workers(streams: int, cores: int, device: str = "CPU") -> int:
    """Worker processes for ``streams`` video streams on ``cores`` cores, from two streams up and at most one per
    stream. Where the model runs on an NPU or a GPU (``device``), one per core on any machine: one process's lock
    caps its decoders even on two cores, and the cores are all the workers'. Where the CPU may run the model, one
    per two cores, none below eight: its inferences share those cores, and each worker costs a process's memory
    (docs/streams.md, "Default"). Each worker's own lock serves its streams' readers and its feeding threads: with
    fewer, more streams each, its live lanes drop frames first."""
    if streams < 2:
        return 0
    if off_the_cpu(device):
        return max(1, min(streams, cores))
    return min(streams, cores // 2) if cores >= 8 else 0


def default_worker_credits(device: str = "CPU", set_bytes: int = 0) -> int:
    """Sets of buffers each worker holds beyond one per feeding thread: :data:`CREDITS` where the model runs on an
    NPU or a GPU (``device``); where the CPU may run it, :data:`CPU_CREDITS`, or as many sets of ``set_bytes``
    (:attr:`Session.set_bytes <npu_zc.runtime.Session.set_bytes>`) as fit in :data:`AHEAD_BYTES`, one at least.

    A worker's feeding thread that has no set waits for this process's receiving thread to grant one, and
    meanwhile its streams' live lanes drop frames. Where the CPU runs the model, inferences, decoders and the
    receiving thread share the cores, and the grants come late now and then: with sets ahead a worker's frames
    wait converted instead of being dropped (near the cores' limit, paced, fewer frames lost at a given count; the
    largest count held moved within the spread: docs/streams.md, "Sets ahead"). Each set is a request's inputs and
    outputs, so off the CPU, where unpaced files went no faster with more, a worker holds one, and a large model's
    sets ahead are bounded by memory."""
    if off_the_cpu(device):
        return CREDITS
    return max(1, min(CPU_CREDITS, AHEAD_BYTES // set_bytes)) if set_bytes > 0 else CPU_CREDITS


def off_the_cpu(device: str) -> bool:
    """The model runs on an accelerator alone (NPU, GPU, GPU.1): not the CPU, nor AUTO or HETERO, which may use it."""
    return device.upper().split(".")[0] in ("NPU", "GPU")


class WorkerError(Error, RuntimeError):
    """A decoding worker process could not start (it said why, or it did not say ready in time)."""


class _Process:
    """One worker: its process, its ends of the sockets (messages; grants), the sets granted to it, its streams."""

    def __init__(self, number: int, process: subprocess.Popen[bytes], sock: socket.socket, errors: Any,
                 grants: socket.socket | None = None) -> None:  # fmt: skip
        self.number = number
        self.process = process
        self.sock = sock
        self.grants = grants
        """Where its sets are granted, one a packet (its feeding threads read them); None: a peer of a test."""
        self.errors = errors
        self.send_lock = threading.Lock()
        self.granted: dict[int, Any] = {}
        """Sets this worker holds (by index): written by it, named back in a frame or given back."""
        self.lanes: dict[int, Any] = {}
        """Its streams' lanes (this process's), by stream id."""
        self.alive = True
        self.quitting = False
        self.owed = 0
        """Sets it has used and not yet been granted again (none was free)."""
        self.failure: str | None = None
        """What went wrong with it, as a phrase after "its decoding worker (pid N)": a defect its bye reported, or a
        message that broke the protocol (its streams end with it)."""

    def send(self, data: bytes) -> None:
        """``data`` as one message; waits while its socket is full (the receiving thread has made it non-blocking),
        up to SEND_S, then stops the worker (it is stuck) and raises :class:`BrokenPipeError`, as for one gone. A
        worker gone with messages of ours unread (killed, or stopped by another sender's wait) resets its end, which
        the first send after reports as a reset: raised as :class:`BrokenPipeError` too, one error for every way
        it can be gone."""
        with self.send_lock:
            try:
                self._send(self.sock, data)
            except ConnectionResetError as exc:
                raise BrokenPipeError(f"decoding worker {self.number} is gone") from exc

    def grant(self, indices: list[int]) -> None:
        """Sets ``indices`` granted, a packet each (each wakes one feeding thread there), as :meth:`send` sends."""
        assert self.grants is not None
        with self.send_lock:
            try:
                for index in indices:
                    self._send(self.grants, SET.pack(b"G", index))
            except ConnectionResetError as exc:
                raise BrokenPipeError(f"decoding worker {self.number} is gone") from exc

    def _send(self, sock: socket.socket, data: bytes) -> None:
        try:
            sock.send(data)
            return
        except BlockingIOError:
            pass
        deadline = time.monotonic() + SEND_S
        room = select.poll()
        room.register(sock, select.POLLOUT)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.failure = f"read none of its messages for {SEND_S:g} s and was stopped"
                self.process.kill()  # its end closes: the receiving thread ends its streams with that
                raise BrokenPipeError(f"decoding worker {self.number} is stuck")
            room.poll(min(left, 1.0) * 1000)
            try:
                sock.send(data)
                return
            except BlockingIOError:
                continue

    def how_it_ended(self) -> str:
        """What became of the process (it closed the socket without a bye)."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return "stopped answering (killed)"
        if code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        last = _last_line(self.errors)
        return f"exited with status {code}" + (f" ({last})" if last else "")


class DecodeWorkers:
    """``count`` worker processes, decoding and converting into ``queue``'s input buffers for ``spec``.

    ``submit(lane, set, index, pts, decoded_ns, prepared_ns, frame_size, format, dropped)`` is called (on the
    receiving thread, in each stream's order) for every converted frame of a lane that is still taking frames,
    and must submit or discard the set; ``ended(lane, message)`` when a stream's reader ended
    there (``message``: state, error, dropped, reconnects, copied), or when its worker died (state "error");
    ``failed(error)`` when the queue reports a failure (an inference's, an output's) to this thread. ``nice`` and
    ``feeders`` have no defaults here: :class:`~npu_zc.pipeline.streams.Streams` chooses them by device.
    """

    def __init__(self, count: int, spec: Any, queue: Any, *, submit: Callable[..., None],
                 ended: Callable[[Any, dict[str, Any]], None],
                 failed: Callable[[BaseException], None] = lambda exc: None, nice: int,
                 feeders: int, credits: int = CREDITS, live_frames: int = LIVE_FRAMES) -> None:  # fmt: skip
        self.count = count
        self.nice = nice
        """How many nice levels below this process each worker runs (set there before it starts a thread)."""
        self.feeders = feeders
        """Feeding threads in each worker (:func:`npu_zc.pipeline.streams.default_worker_feeders`)."""
        self.credits = credits
        """Sets each worker holds beyond one per feeding thread (:func:`default_worker_credits`)."""
        self.live_frames = live_frames
        """The newest frames a live lane keeps in the workers (:class:`~npu_zc.pipeline.scheduler.Scheduler`)."""
        self.spec = spec
        self.queue = queue
        self._submit = submit
        self._ended = ended
        self._failed = failed
        self.processes: list[_Process] = []
        self.cpu = {"sources": 0.0, "feeders": 0.0, "start": 0.0, "total": 0.0}
        """CPU seconds of every worker that said bye, by role of thread; "start": until it was ready (importing
        numpy and PyAV, mapping the buffers: once per run); "total": the whole processes."""
        self.sleeps = {"sources": 0, "feeders": 0, "start": 0, "total": 0}
        """The same for the times their threads gave a core up to wait (voluntary context switches: a wait for the
        GIL, a lock, a message): the hand-overs a frame costs there."""
        self.receiving = {"frames": 0, "waiting": 0.0, "busy": 0.0, "no_set": 0.0}
        """The receiving thread over a run: frames it submitted or let go, and the seconds of wall time it spent
        waiting for a message ("waiting") or reading and granting ("busy", its GIL hand-overs included): a thread busy
        nearly all the time is the serial stage, whatever its CPU. "no_set": of "busy", the seconds it waited for a
        delivery thread to free a set to grant (every set in flight or held: meanwhile no worker gets one)."""
        self.copies: dict[str, int] | None = None
        """Under the memcpy counter (:mod:`npu_zc.memcount` preloaded): what the workers copied from ready to bye,
        summed ("bytes", "calls") and the largest single copy ("largest"); None otherwise."""
        self.delivers = queue is not None and queue.deliverers == 0
        """The queue has no delivery threads: the receiving thread delivers its results."""
        self._waker = _Waker()
        self._lock = threading.Lock()
        self._stopping = False
        self._receiver: threading.Thread | None = None

    def start(self) -> None:
        """Start the workers and wait for each to be ready; then grant each its sets. Raises :class:`WorkerError`."""
        queue = self.queue
        buffers = {k: inputs[0] for k, inputs in enumerate(queue.input_buffers)}
        spec = self.spec
        view = queue.input_arrays[0][0]
        setup = {"kind": "setup", "spec": spec.to_dict(), "shape": list(view.shape), "dtype": view.dtype.str,
                 "buffers": {str(k): b.fd for k, b in buffers.items()}, "feeders": self.feeders,
                 "nice": self.nice, "live_frames": self.live_frames}  # fmt: skip
        try:
            for number in range(self.count):
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                grants, their_grants = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                grants.setblocking(False)  # a full socket waits in _send, up to SEND_S
                errors = tempfile.TemporaryFile()
                try:
                    process = subprocess.Popen(
                        [sys.executable, "-c", WORKER_ENTRY, "--fd", str(theirs.fileno()),
                         GRANTS_FLAG, str(their_grants.fileno())],
                        pass_fds=[theirs.fileno(), their_grants.fileno(), *(b.fd for b in buffers.values())],
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
                        env=_child_environment(),
                    )  # fmt: skip
                except BaseException:  # not started: nothing else holds these
                    ours.close()
                    grants.close()
                    errors.close()
                    raise
                finally:
                    theirs.close()
                    their_grants.close()
                self.processes.append(_Process(number, process, ours, errors, grants))
                ours.send(pack_json(setup))
            deadline = time.monotonic() + START_S
            for worker in self.processes:
                worker.sock.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    data = _recv(worker.sock)
                except TimeoutError:
                    raise WorkerError(f"a decoding worker (pid {worker.process.pid}) did not start within {START_S:g} s") from None
                message = unpack_json(data) if data[:1] == b"J" else {"kind": "failed", "message": "it closed the connection"}
                if message["kind"] != "ready":
                    raise WorkerError(f"a decoding worker (pid {worker.process.pid}) could not start: "
                                      f"{message.get('message') or worker.how_it_ended()}")  # fmt: skip
                worker.sock.settimeout(None)
            for worker in self.processes:
                self._grant(worker, self.feeders + self.credits)
            self._receiver = threading.Thread(target=self._receive, name="npu_zc-recv", daemon=True)
            self._receiver.start()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def sets_for(count: int, feeders: int, credits: int = CREDITS) -> int:
        """Sets of buffers ``count`` workers of ``feeders`` feeding threads and ``credits`` sets ahead each hold at
        most (a queue needs that many beyond its own)."""
        return count * (feeders + credits)

    def add(self, lane: Any, source: Any) -> bool:
        """Give a stream to the worker with the fewest streams; False when none is running (read it here)."""
        with self._lock:
            running = [w for w in self.processes if w.alive and not w.quitting]
            if not running or self._stopping:
                return False
            worker = min(running, key=lambda w: (len(w.lanes), w.number))
            worker.lanes[lane.stream] = lane
        lane.worker = worker
        try:
            worker.send(pack_json({"kind": "add", "stream": lane.stream, "source": source.spec()}))
        except OSError:
            pass  # it died: its receiver ends the stream with that error
        return True

    def remove(self, lane: Any) -> None:
        worker = getattr(lane, "worker", None)
        if worker is not None and worker.alive:
            try:
                worker.send(SET.pack(b"X", lane.stream))
            except OSError:
                pass

    def finish(self) -> None:
        """Stop every worker: the frames they converted are taken (submitted as usual), each says bye and is reaped."""
        with self._lock:
            self._stopping = True
        self._waker.release()  # a receiving thread that delivers and has no worker left ends now
        for worker in self.processes:
            worker.quitting = True
            if worker.alive:
                try:
                    worker.send(b"Q")
                except OSError:
                    pass
        if self._receiver is not None:
            self._receiver.join(JOIN_S + 5)  # each bye comes once its readers stopped (a network read: its timeout)
        self.close()

    def close(self) -> None:
        """Close the sockets (a worker still running stops on its own then), reap every worker, killing one that
        does not end (idempotent)."""
        for worker in self.processes:
            for sock in (worker.sock, worker.grants):
                try:
                    if sock is not None:
                        sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # closed already
        for worker in self.processes:
            if worker.process.poll() is None:
                try:
                    worker.process.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    worker.process.kill()
                    worker.process.wait()
            worker.sock.close()
            if worker.grants is not None:
                worker.grants.close()
            worker.errors.close()
        self._waker.close()

    # --- the receiving thread (one for every worker) ---

    def _receive(self) -> None:
        """Every worker's messages, on one thread: each ready socket drained, then the sets its frames used granted
        again (one thread and few wake-ups: this process's lock is what the workers relieve).

        With a queue that has no delivery threads (:attr:`delivers`), this thread delivers the results too, between
        the messages, so that the GIL changes hands only where it waits: for a message while no result is pending
        (or for a submit from a feeding thread here, :meth:`AsyncQueue.wake_on_submit`), else for a message up to
        :data:`DELIVER_S`, delivering what has finished after each wait. It then runs until the run stops, workers
        or none, and delivers the last results before it ends."""
        # epoll itself, not `selectors`: a wait there is several Python calls more, on the thread that is every
        # frame's serial stage.
        poller = select.epoll()
        senders: dict[int, _Process | None] = {}
        for worker in self.processes:
            worker.sock.setblocking(False)
            poller.register(worker.sock.fileno(), select.EPOLLIN)
            senders[worker.sock.fileno()] = worker
        running = len(self.processes)
        queue, delivers, waker = self.queue, self.delivers, self._waker
        if delivers:
            poller.register(waker.reader.fileno(), select.EPOLLIN)
            senders[waker.reader.fileno()] = None
        clock, figures = time.perf_counter, self.receiving
        try:
            while running or (delivers and not self._stopping):
                began = clock()
                sleeps = not delivers or queue.wake_on_submit(waker)
                # With results pending, a message wakes it at once and their inferences are looked at every
                # DELIVER_S: a thread that polled them instead would take a core from the decoders it waits for.
                ready = poller.poll(-1 if sleeps else DELIVER_S)
                woke = clock()
                if delivers and sleeps:  # awake now: this thread's own submits below need not wake it again
                    queue.cancel_wake(waker)
                for fd, _ in ready:
                    sender = senders[fd]
                    if sender is None:  # the waker: a submit here, or the run stopping
                        waker.clear()
                        continue
                    worker = sender
                    try:
                        owed, over = self._drain(worker)
                    except OSError:  # its end broke (it died): as closed
                        owed, over = 0, False
                    except (ValueError, TypeError, KeyError, struct.error, Error) as exc:
                        # A message the protocol does not allow: the worker is not trusted further.
                        worker.failure = f"sent a message the protocol does not allow ({exc}) and was stopped"
                        worker.process.kill()
                        owed, over = 0, False
                    figures["frames"] += owed
                    if over is None:
                        self._grant(worker, owed)
                    else:
                        poller.unregister(fd)
                        running -= 1
                        self._gone(worker, bye=over)
                if delivers and not sleeps:
                    if queue.deliver_ready(0):
                        for worker in self.processes:
                            if worker.owed and worker.alive:
                                self._grant(worker, 0)
                figures["waiting"] += woke - began
                figures["busy"] += clock() - woke
            while delivers and queue.pending and not queue.closed:  # the results of the workers' last frames
                queue.deliver_ready(DELIVER_S)
        finally:
            poller.close()

    def _drain(self, worker: _Process) -> tuple[int, bool | None]:
        """The worker's messages waiting now: (the sets its frames used, None while it runs | True after its bye |
        False when its end closed)."""
        sock, granted, lanes = worker.sock, worker.granted, worker.lanes
        unpack, frame_size, submit = FRAME.unpack, FRAME.size, self._submit
        used = 0
        while True:
            try:
                data = sock.recv(MAX_PACKET)
            except BlockingIOError:
                return used, None
            except ConnectionResetError:  # see _recv: its last messages follow
                continue
            if not data:
                return used, False
            kind = data[:1]
            if kind == b"F" and len(data) == frame_size:
                _, stream, index, number, pts, decoded_ns, prepared_ns, width, height, fmt, dropped = unpack(data)
                frame = granted.pop(index, None)
                lane = lanes.get(stream)
                if frame is None or lane is None or fmt >= len(FORMATS):
                    raise Error(f"decoding worker {worker.number} named set {index} of stream {stream}, not its own")
                submit(lane, frame, number, None if pts != pts else pts, decoded_ns, prepared_ns, (width, height),
                       FORMATS[fmt], dropped)  # fmt: skip
                used += 1
            elif kind == b"U":
                frame = granted.pop(SET.unpack(data)[1], None)
                if frame is not None:
                    self.queue.discard(frame)
            elif kind == b"J":
                message = unpack_json(data)
                if message["kind"] == "ended":  # after its last frame: forgotten here
                    counts = [message.get(key) or 0 for key in ("dropped", "reconnects", "copied", "let_go")]
                    if not all(type(count) is int and count >= 0 for count in counts):
                        raise TypeError("an end whose counts are not whole numbers")
                    lane = lanes.pop(int(message["stream"]), None)
                    if lane is not None:
                        self._ended(lane, message)
                elif message["kind"] == "bye":
                    cpu, sleeps = message.get("cpu") or {}, message.get("sleeps") or {}
                    if not isinstance(cpu, dict) or not isinstance(sleeps, dict):
                        raise TypeError("a bye whose figures are not objects")
                    with self._lock:
                        for role in self.cpu:
                            self.cpu[role] += float(cpu.get(role, 0.0))
                            self.sleeps[role] += int(sleeps.get(role, 0))
                    copies = message.get("memcpy")
                    if isinstance(copies, dict):
                        with self._lock:
                            total = self.copies or {"bytes": 0, "calls": 0, "largest": 0}
                            self.copies = {"bytes": total["bytes"] + int(copies["bytes"]),
                                           "calls": total["calls"] + int(copies["calls"]),
                                           "largest": max(total["largest"], int(copies["largest"]))}  # fmt: skip
                    if message.get("failure"):
                        worker.failure = f"failed: {message['failure']}"
                    return used, True
            else:
                raise Error(f"decoding worker {worker.number} sent a message of kind {kind!r}")

    def _grant(self, worker: _Process, count: int) -> None:
        """``count`` more sets to ``worker``; none once it is told to stop. With delivery threads it
        waits for free ones (they free as results are delivered); where this thread delivers, it grants those free
        now and owes the rest (:attr:`_Process.owed`), granted after a delivery frees them."""
        indices: list[int] = []
        waits = not self.delivers  # for a delivery thread to free a set; else this thread frees them
        queue, granted = self.queue, worker.granted
        worker.owed += count
        while worker.owed and not worker.quitting:
            try:
                frames = queue.acquire_free(worker.owed)
                if not frames and waits:  # every set in flight or held: wait for a delivery thread to free one
                    began = time.perf_counter()
                    frames = [queue.acquire(None)]
                    self.receiving["no_set"] += time.perf_counter() - began
            except ModelError as exc:  # an inference or an output failed, reported here: the run's failure
                self._failed(exc)
                break
            except Error:  # the queue closed: the run is ending
                break
            if not frames:  # none free: granted once this thread has delivered results
                break
            worker.owed -= len(frames)
            if worker.quitting:  # told to stop meanwhile: it would only give the sets back
                for frame in frames:
                    queue.discard(frame)
                break
            for frame in frames:
                index = frame.index
                granted[index] = frame
                indices.append(index)
        if indices:
            try:
                worker.grant(indices)
            except OSError:
                pass  # gone: its end of the socket closes, and every set granted to it comes back then

    def _gone(self, worker: _Process, *, bye: bool) -> None:
        """The worker said bye (or its end closed): the sets it held come back, its streams still running end."""
        worker.alive = False
        how = None if bye else worker.how_it_ended()  # killed there if it still runs: it is not trusted further
        for frame in worker.granted.values():  # nobody writes them now: it said bye, or it is gone
            self.queue.discard(frame)
        worker.granted.clear()
        said = worker.failure or how
        error = f"its decoding worker (pid {worker.process.pid}) {said}" if said else None
        for lane in list(worker.lanes.values()):
            if not lane.ended:
                self._ended(lane, {"state": "error" if error else "stopped", "error": error})


class _Waker:
    """Wakes the receiving thread from its ``select``: a byte on a socket pair. ``release()`` is safe from any
    thread and after :meth:`close` (a closed socket object refuses; it never writes to a reused fd number)."""

    def __init__(self) -> None:
        self.reader, self._writer = socket.socketpair()
        self.reader.setblocking(False)
        self._writer.setblocking(False)

    def release(self) -> None:
        try:
            self._writer.send(b"\0")
        except OSError:  # full (it wakes anyway) or closed (nothing to wake)
            pass

    def clear(self) -> None:
        try:
            while self.reader.recv(64):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self.reader.close()
        self._writer.close()


def _recv(sock: socket.socket) -> bytes:
    """The worker's next message (b"": it closed its end). A worker that ends with a message of ours unread (a grant
    or a stop that crossed its bye) leaves a reset on this end, reported once and before the messages it sent last
    (its frames, its streams' ends, its bye): read on past it."""
    while True:
        try:
            return sock.recv(MAX_PACKET)
        except ConnectionResetError:
            continue


def _child_environment() -> dict[str, str]:
    """This process's environment, with the package it runs from first on the path (a checkout, a test's)."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([here, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def _last_line(file: Any) -> str:
    file.seek(0)
    lines = [line.strip() for line in file.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


__all__ = ["AHEAD_BYTES", "CPU_CREDITS", "CREDITS", "DecodeWorkers", "WorkerError", "decodes_in_a_worker",
           "default_worker_credits", "default_workers"]
