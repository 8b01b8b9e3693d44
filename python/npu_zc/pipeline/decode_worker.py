"""A decoding worker process of :class:`npu_zc.Streams` (:mod:`.workers` starts and drives it): its streams decoded
and converted straight into the inference process's input buffers. No OpenVINO here.

Started as ``python -c "from npu_zc.pipeline.decode_worker import run; run()" --fd N --grants M``
(not ``-m``: the package imports this module, and runpy would run it a second
time) with its ends of two ``SOCK_SEQPACKET`` socket pairs (messages; grants)
and every input buffer's fd inherited. Inside,
the same parts as a one-process run: a reader thread per stream into its lane
(:func:`.feeding.read_source`), the fair :class:`.scheduler.Scheduler`, and
a feeding thread (or the setup's ``feeders``) that converts a lane's frame into
a set of buffers the inference process granted (:func:`.feeding.convert_frame`)
and names it in a few bytes. A frame's pixels never leave the decoder's memory
but into the model input.

Messages, one per packet (``SOCK_SEQPACKET`` keeps them whole and in order)::

    inference -> worker   J {"kind": "setup", spec, shape, dtype, buffers: {set: fd}, feeders}
                          J {"kind": "add", stream, source}      a stream to read (VideoSource's arguments)
                          X stream                    stop reading a stream
                          Q                           stop: every stream, then give unused sets back and say bye
    worker -> inference   J {"kind": "ready"}  or  J {"kind": "failed", message}
                          F stream set index pts decoded_ns prepared_ns width height format dropped
                          J {"kind": "ended", stream, state, error, dropped, reconnects, copied, let_go}
                          U set                       a granted set given back unwritten
                          J {"kind": "bye", cpu: {sources, feeders, start, total}, sleeps: {the same}, failure, memcpy}
    grants, inference -> worker:
                          G set                       a set of buffers granted: write a frame into it

A grant is a packet of its own on a socket of its own, which the feeding
threads read themselves: each grant wakes one of them, or waits for the
first to come back, with no thread between (the main thread reads the
messages, which come a few a stream). Every grant sent before a stop is in
that socket when the stop is read: the stop gives back those not taken.

Ctrl-C reaches this process too (the terminal signals the whole group): it is
ignored here, as the inference process stops its workers itself. When the
inference process goes away (its end of the socket closes), this one stops.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import resource
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any, Sequence

from .. import layout
from ..errors import Error
from .feeding import Converters, convert_frame, converter_for, read_source
from .preprocess import PreprocessSpec
from .scheduler import LIVE_FRAMES, Lane, Scheduler

FRAME = struct.Struct("<1sIIqdqqIIBI")
"""A converted frame: b"F", stream, set, index, pts (NaN: none), decoded_ns, prepared_ns, width, height, format, dropped."""
SET = struct.Struct("<1sI")
"""b"G" (a set granted), b"U" (a set given back unwritten), b"X" (a stream to stop)."""
GRANTS_FLAG = "--grants"
"""The worker's argument naming its end of the grants' socket pair."""
FORMATS = tuple(sorted(layout.SOURCE_FORMATS))
"""The layout engine's source formats: a frame's format travels as its position here (the same package both sides)."""
MAX_PACKET = 1 << 16
"""The largest message either side sends (a JSON one: a source's arguments, an error's sentence)."""
JOIN_S = 10.0
"""How long a stream's reader may take to stop (a network read ends within its timeout)."""


def pack_json(message: dict[str, Any]) -> bytes:
    data = b"J" + json.dumps(message).encode()
    if len(data) > MAX_PACKET:
        raise Error(f"a worker message of {len(data)} bytes is over the {MAX_PACKET}-byte limit")
    return data


def unpack_json(data: bytes) -> dict[str, Any]:
    message = json.loads(data[1:])
    if not isinstance(message, dict) or not isinstance(message.get("kind"), str):
        raise ValueError("a JSON message without a kind")
    return message


class _Figures:
    """A stream's outcome here, sent to the inference process when its reader ends."""

    def __init__(self) -> None:
        self.dropped = 0
        self.reported = 0
        """Of ``dropped``, what the frame messages already carried."""
        self.stopped = self.done = False
        self.error: str | None = None
        self.reconnects = self.copied = self.let_go = 0


class _Stream:
    def __init__(self, lane: Lane, source: Any) -> None:
        self.lane, self.source = lane, source
        self.figures = _Figures()
        self.converters: Converters = {}
        self.reader: threading.Thread | None = None
        self.read = False
        """Its reader has ended: once its lane's last frame is sent, the stream has ended."""
        self.told = False
        """Its end was sent (once)."""


class Worker:
    """This process's streams, decoded and converted into the granted sets of buffers."""

    def __init__(self, sock: socket.socket, grants: socket.socket, setup: dict[str, Any]) -> None:
        from ..buffers import DmaBuf

        self.sock = sock
        self.grant_sock = grants
        """Where the feeding threads take their grants, one a packet (read by whichever of them is free)."""
        self.send_lock = threading.Lock()
        self.spec = PreprocessSpec.from_dict(setup["spec"])
        shape, dtype = tuple(int(v) for v in setup["shape"]), str(setup["dtype"])
        self.buffers: dict[int, Any] = {}
        self.views: dict[int, Any] = {}
        for index, fd in dict(setup["buffers"]).items():
            buffer = DmaBuf.from_fd(int(fd), take_ownership=True)  # sealed memfds and DMA-BUFs only (no trust_size)
            self.buffers[int(index)] = buffer
            self.views[int(index)] = buffer.map(dtype, shape)
        live_frames = int(setup.get("live_frames", LIVE_FRAMES))
        self.scheduler: Scheduler[Lane] = Scheduler(persistent=True, live_frames=live_frames)  # streams come and go
        self.streams: dict[int, _Stream] = {}
        self.grants: collections.deque[int] = collections.deque()
        """Grants taken from the socket and handed back unwritten (a frame the engine refused), taken first."""
        self.grants_lock = threading.Lock()
        self.unused: list[int] = []
        self.cpu = {"sources": 0.0, "feeders": 0.0}
        self.sleeps = {"sources": 0, "feeders": 0}
        """Times its threads of each role gave their core up to wait (voluntary context switches: for the GIL, a
        lock, a message), as the CPU beside them."""
        self.cpu_lock = threading.Lock()
        self.failure: str | None = None
        self.started_cpu = 0.0
        """CPU seconds this process took to be ready (imports, mapping the buffers)."""
        self.started_sleeps = 0
        self.counter: Any = None
        self.feeders = [threading.Thread(target=self._feed, name=f"npu_zc-feed{k}", daemon=True)
                        for k in range(max(1, int(setup.get("feeders", 1))))]  # fmt: skip

    def count_copies(self) -> None:
        """Under the memcpy counter (``LD_PRELOAD``, :mod:`npu_zc.memcount`): count from now to the bye, which says
        what was copied (zero copy, proven across processes)."""
        from ..memcount import preloaded

        self.counter = preloaded()
        if self.counter is not None:
            self.counter.reset()
            self.counter.start()

    def send(self, data: bytes) -> None:
        with self.send_lock:
            self.sock.send(data)

    # --- control, on the main thread ---

    def serve(self) -> None:
        """Follow the inference process's messages until it says stop (or goes away)."""
        for feeder in self.feeders:
            feeder.start()
        while True:
            try:
                data = self.sock.recv(MAX_PACKET)
            except OSError:
                data = b""
            if not data:  # the inference process is gone: nobody reads what this one would make
                self._stop_streams()
                return
            kind = data[:1]
            if kind == b"J":
                message = unpack_json(data)
                if message["kind"] == "add":
                    self._add(int(message["stream"]), dict(message["source"]))
            elif kind == b"X":
                self._remove(SET.unpack(data)[1])
            elif kind == b"Q":
                self._quit()
                return

    def _add(self, stream: int, arguments: dict[str, Any]) -> None:
        from ..sources.video import VideoSource

        try:
            source = VideoSource(**arguments)
        except Error as exc:  # checked in the inference process already: a file gone since, say
            self.send(pack_json({"kind": "ended", "stream": stream, "state": "error", "error": str(exc), "dropped": 0,
                                 "reconnects": 0, "copied": 0}))  # fmt: skip
            return
        lane = Lane(stream, source.name, source.live, self.scheduler.lock)
        entry = self.streams[stream] = _Stream(lane, source)
        self.scheduler.add(lane)
        entry.reader = threading.Thread(target=self._read, args=(entry,), name=f"npu_zc-src{stream}", daemon=True)
        entry.reader.start()

    def _remove(self, stream: int) -> None:
        entry = self.streams.get(stream)
        if entry is not None:
            entry.figures.stopped = True
            entry.figures.let_go += self.scheduler.remove(entry.lane)

    def _end_streams(self) -> None:
        """Every reader stopped and joined, the frames never taken let go, each stream's end said."""
        self.scheduler.stop()
        deadline = time.monotonic() + JOIN_S
        for entry in list(self.streams.values()):
            if entry.reader is not None:
                entry.reader.join(max(0.0, deadline - time.monotonic()))
        self.scheduler.drain()  # frames decoded and never taken: nobody will convert them now
        for entry in list(self.streams.values()):
            self._end_if_sent(entry)

    def _stop_streams(self) -> None:
        self._end_streams()
        try:  # a feeding thread waiting for a grant reads the end of them (grants sent already stay readable)
            self.grant_sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass
        for feeder in self.feeders:
            feeder.join(JOIN_S)

    def _quit(self) -> None:
        self._stop_streams()
        with self.grants_lock:
            unused = [*self.unused, *self.grants]
            self.unused, self.grants = [], collections.deque()
        while (index := self._read_grant()) is not None:  # granted before the stop, never taken
            unused.append(index)
        for index in unused:
            self.send(SET.pack(b"U", index))
        times = os.times()
        with self.cpu_lock:
            cpu = {**self.cpu, "start": self.started_cpu, "total": times.user + times.system}
            sleeps = {**self.sleeps, "start": self.started_sleeps, "total": _sleeps(resource.RUSAGE_SELF)}
        copies = None
        if self.counter is not None:
            self.counter.stop()
            counts = self.counter.counts()
            copies = {"bytes": counts.bytes, "calls": counts.calls, "largest": counts.largest}
        self.send(pack_json({"kind": "bye", "cpu": cpu, "sleeps": sleeps, "failure": self.failure, "memcpy": copies}))

    # --- the streams' threads ---

    def _read(self, entry: _Stream) -> None:
        started, slept = time.thread_time(), _sleeps(resource.RUSAGE_THREAD)
        try:
            read_source(self.scheduler, entry.lane, entry.source, entry.figures)
        finally:
            entry.read = True
            self._end_if_sent(entry)
            with self.cpu_lock:
                self.cpu["sources"] += time.thread_time() - started
                self.sleeps["sources"] += _sleeps(resource.RUSAGE_THREAD) - slept

    def _end_if_sent(self, entry: _Stream) -> None:
        """Say the stream ended once its reader has and its lane's frames are all sent (or let go): after its last
        frame's message, so the inference process has every frame of it when it reads the end."""
        lane = entry.lane
        with self.scheduler.lock:
            if entry.told or not entry.read or lane.frames or lane.owned:
                return  # a frame still to send (a feeding thread holds it, or will take it; or drained at a stop)
            entry.told = True
            self.streams.pop(lane.stream, None)  # nothing more of it: forgotten (a service's streams come and go)
        figures = entry.figures
        state = "error" if figures.error else "done" if figures.done else "stopped"
        try:
            self.send(pack_json({"kind": "ended", "stream": lane.stream, "state": state, "error": figures.error,
                                 "dropped": figures.dropped, "reconnects": figures.reconnects,
                                 "copied": figures.copied, "let_go": figures.let_go}))  # fmt: skip
        except OSError:
            pass  # the inference process is gone

    def _take_grant(self) -> int | None:
        """The next set granted (None once this process stops, or the inference process is gone)."""
        with self.grants_lock:
            if self.grants:
                return self.grants.popleft()
        return self._read_grant()

    def _read_grant(self) -> int | None:
        """A grant from the socket, waiting for one until its reading end is shut (then None, once those sent before
        are read)."""
        try:
            data = self.grant_sock.recv(SET.size + 1)
        except OSError:  # gone: nobody would read what a grant would make
            return None
        if not data:
            return None
        if len(data) != SET.size or data[:1] != b"G":
            raise Error(f"the inference process sent a grant of {len(data)} bytes starting {data[:1]!r}")
        index = int(SET.unpack(data)[1])
        if index not in self.views:
            raise Error(f"the inference process granted set {index}, which it never shared")
        return index

    def _feed(self) -> None:
        started, slept = time.thread_time(), _sleeps(resource.RUSAGE_THREAD)
        clock = time.perf_counter_ns
        try:
            while True:
                index = self._take_grant()
                if index is None:
                    return
                picked = self.scheduler.next()
                if picked is None:
                    with self.grants_lock:
                        self.unused.append(index)
                    return
                lane, frame = picked
                entry = self.streams[lane.stream]
                try:
                    began = clock()
                    try:
                        convert_frame(entry.converters, self._converter, frame, self.views[index], self.buffers[index])
                    except Error as exc:  # a frame the engine refuses: this stream's error
                        frame.release()
                        with self.grants_lock:
                            self.grants.appendleft(index)
                        entry.figures.error = str(exc)
                        self.scheduler.fail(lane)
                        continue
                    prepared = clock() - began
                    figures = entry.figures
                    dropped, figures.reported = figures.dropped - figures.reported, figures.dropped
                    pts = math.nan if frame.pts is None else float(frame.pts)
                    message = FRAME.pack(b"F", lane.stream, index, frame.index, pts, frame.decoded_ns, prepared,
                                         frame.width, frame.height, FORMATS.index(frame.format), dropped)  # fmt: skip
                    frame.release()  # the decoder's buffer goes back: the input holds the frame now
                    self.send(message)
                finally:
                    self.scheduler.let_go(lane)
                if entry.read:
                    self._end_if_sent(entry)
        except BaseException as exc:  # a defect: each stream's error, said in the bye (and on stderr); they stop
            self.failure = f"{type(exc).__name__}: {exc}"
            print(f"npu-zc decode worker: {self.failure}", file=sys.stderr, flush=True)
            said = f"its decoding worker (pid {os.getpid()}) failed: {self.failure}"
            for entry in list(self.streams.values()):
                entry.figures.error = entry.figures.error or said
            self._end_streams()  # no feeding thread may be left to take the frames waiting and say the ends
        finally:
            with self.cpu_lock:
                self.cpu["feeders"] += time.thread_time() - started
                self.sleeps["feeders"] += _sleeps(resource.RUSAGE_THREAD) - slept

    def _converter(self, frame: Any) -> layout.Converter:
        return converter_for(self.spec, frame)


def _sleeps(who: int) -> int:
    """Voluntary context switches of this thread (``RUSAGE_THREAD``) or of the whole process, its ended threads'
    included (``RUSAGE_SELF``)."""
    return resource.getrusage(who).ru_nvcsw


def lower_priority(levels: int) -> None:
    """Every thread of this process ``levels`` nice levels lower and, below the inference process, batch work
    (``SCHED_BATCH``): those running now (numpy's BLAS pool, started at its import) one by one, as Linux sets both
    per thread; those started later (the readers, FFmpeg's threads) inherit them from the thread that starts them.

    A batch thread that wakes does not take the core of a thread running: a feeding thread woken by a grant, or a
    reader by the GIL, waits for the decoder on its core to use its slice up instead of cutting in, and the
    decoders keep their caches (docs/streams.md, "Priority")."""
    if levels <= 0:
        return
    for task in os.listdir("/proc/self/task"):
        try:
            tid = int(task)
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + levels))
        except OSError:  # a thread that ended meanwhile
            continue
        try:
            os.sched_setscheduler(tid, os.SCHED_BATCH, os.sched_param(0))  # (keeps the nice value just set)
        except OSError:  # ended meanwhile, or a sandbox that refuses the call: the nice levels alone
            continue


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the inference process stops this one (see the module's text)
    parser = argparse.ArgumentParser(prog="npu_zc decode worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fd", type=int, required=True, help="this process's end of the messages' SOCK_SEQPACKET pair")
    parser.add_argument(GRANTS_FLAG, type=int, required=True, help="its end of the grants' SOCK_SEQPACKET pair")
    args = parser.parse_args(argv)
    with socket.socket(fileno=args.fd) as sock, socket.socket(fileno=args.grants) as grants:
        try:
            setup = unpack_json(sock.recv(MAX_PACKET))
            lower_priority(int(setup.get("nice", 0)))
            worker = Worker(sock, grants, setup)
        except BaseException as exc:
            with_text = f"{type(exc).__name__}: {exc}" if not isinstance(exc, Error) else str(exc)
            try:
                sock.send(pack_json({"kind": "failed", "message": with_text}))
            except OSError:
                pass
            return 1
        times = os.times()
        worker.started_cpu, worker.started_sleeps = times.user + times.system, _sleeps(resource.RUSAGE_SELF)
        worker.count_copies()
        worker.send(pack_json({"kind": "ready"}))
        try:
            worker.serve()
        except OSError:  # the inference process went away mid-message
            return 1
    return 0


def run() -> None:
    """The process's entry: :func:`main`, then out at once."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # At once: a reader still in a network read (a daemon thread inside FFmpeg) must not meet the interpreter's
    # finalisation; the kernel closes the fds and unmaps the buffers.
    os._exit(code)
