"""Two processes: a producer decodes and preprocesses into pooled buffers, the inference process reads them in place.

The inference process (the consumer) compiles the model, starts the producer
(``python -m npu_zc.pipeline.producer``) with one end of a Unix socket pair,
and sends it the :class:`PreprocessSpec`. The producer allocates a
:class:`npu_zc.BufferPool` of input buffers and sends all of them once
(SCM_RIGHTS); the consumer binds each as the model input of its own request.
Then, per frame, the producer preprocesses into a free buffer and sends only
its index; the consumer infers on it in place, postprocesses, and answers
"done", upon which the producer releases the buffer to the pool.

Messages (the metadata of :func:`npu_zc.send_buffers`, all with a ``kind``)::

    consumer -> producer   spec   {spec, depth, heap, source, limit}
    producer -> consumer   pool   the buffers, {frames}
    producer -> consumer   frame  {slot, sequence, name, decode_ns, preprocess_ns}
    consumer -> producer   done   {slot}
    producer -> consumer   end    {frames}   or   error {message}

After "end" the producer keeps its end open, reading "done"s, until the
consumer closes its own: frames still in flight may take any time to infer.
A producer that dies mid-stream closes its end of the socket: the consumer
raises :class:`ProducerError` naming what happened, after unbinding and
closing every buffer it received.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from ..errors import Error, InvalidArgumentError, PeerError
from ..layout import Transform
from .pipeline import Pipeline
from .postprocess import for_frame
from .preprocess import PreprocessSpec
from .single_stream import STREAM_STAGES, FrameResult, StreamReport
from .timing import FENCE_TIMEOUT_S, Timings, progress_bar

DEFAULT_DEPTH = 4
"""Buffers in the producer's pool: frames that may be preprocessed ahead of inference."""


class ProducerError(Error, ConnectionError):
    """The producer process failed or went away before the end of the stream."""


def run_two_process(
    pipeline: Pipeline,
    source: str | os.PathLike[str],
    *,
    depth: int = DEFAULT_DEPTH,
    limit: int | None = None,
    progress: bool | None = None,
    on_result: Callable[[FrameResult], None] | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
    keep_results: bool = True,
) -> StreamReport:
    """Stream ``source`` (a video or a folder of images) with decode and preprocess in a separate producer process.

    ``on_start`` receives the producer's ``Popen`` once it runs (tests use it to kill it).
    """
    if not pipeline.zero_copy:
        raise InvalidArgumentError("the two-process pipeline hands the producer's buffers to the model as they are: zero-copy mode only")
    consumer_end, producer_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    errors = tempfile.TemporaryFile()
    try:
        with producer_end:
            process = subprocess.Popen(
                [sys.executable, "-m", "npu_zc.pipeline.producer", "--fd", str(producer_end.fileno())],
                pass_fds=[producer_end.fileno()],
                stdin=subprocess.DEVNULL,
                stderr=errors,
            )
        with consumer_end:
            if on_start is not None:
                on_start(process)
            consumer = _Consumer(pipeline, consumer_end, process, errors)
            try:
                return consumer.run(os.fspath(source), depth, limit, progress, on_result, keep_results)
            finally:
                consumer.close()
    finally:
        errors.close()


class _Consumer:
    def __init__(self, pipeline: Pipeline, sock: socket.socket, process: subprocess.Popen[bytes], errors: Any) -> None:
        self.pipeline = pipeline
        self.sock = sock
        self.process = process
        self.errors = errors
        self.buffers: list[Any] = []
        self.requests: list[Any] = []
        self.outputs: list[list[Any]] = []
        self.frames = 0

    def run(
        self,
        source: str,
        depth: int,
        limit: int | None,
        progress: bool | None,
        on_result: Callable[[FrameResult], None] | None,
        keep_results: bool,
    ) -> StreamReport:
        from ..buffers import alloc

        pipeline = self.pipeline
        spec = pipeline.spec
        self._send({"kind": "spec", "spec": spec.to_dict(), "depth": depth, "heap": pipeline.heap, "source": source, "limit": limit})
        buffers, meta = self._receive("pool")
        self.buffers = buffers
        # One request per pooled buffer, each bound once: a frame only names its buffer.
        for buf in buffers:
            request = pipeline.session.create_request()
            self.requests.append(request)
            request.bind_input(buf)
            outs = [alloc(o.nbytes, pipeline.heap) for o in pipeline.session.outputs]
            self.outputs.append(outs)
            for i, out in enumerate(outs):
                request.bind_output(out, i)
        timings = Timings(STREAM_STAGES)
        results: list[FrameResult] = []
        running: collections.deque[dict[str, Any]] = collections.deque()  # frames in flight, in order

        def finish() -> None:
            # The oldest frame: wait for its inference, read the result in place, hand the buffer back.
            message = running.popleft()
            slot = int(message["slot"])
            request = self.requests[slot]
            request.wait()
            started = time.perf_counter_ns()
            with contextlib.ExitStack() as access:
                for out in self.outputs[slot]:
                    access.enter_context(out.cpu_access("read", timeout=FENCE_TIMEOUT_S))
                # The views of the output buffers live only in these calls: a view kept in a local would
                # outlive the frame and keep its buffer from closing.
                count = len(self.outputs[slot])
                if message.get("transform") is not None:
                    transform = Transform(**{k: tuple(v) for k, v in message["transform"].items()})
                    input_size = (pipeline.spec.width, pipeline.spec.height)
                    frame_size = (int(message["frame_size"][0]), int(message["frame_size"][1]))
                    prediction = for_frame(
                        pipeline.postprocess, [request.output_array(i) for i in range(count)], transform, input_size,
                        frame_size,
                    )
                else:
                    prediction = pipeline.postprocess([request.output_array(i) for i in range(count)])
            timings.add("postprocess", time.perf_counter_ns() - started)
            self._send({"kind": "done", "slot": slot})
            timings.add("decode", int(message["decode_ns"]))
            timings.add("preprocess", int(message["preprocess_ns"]))
            timings.add("infer", int(request.latency_ms * 1e6))
            result = FrameResult(int(message["sequence"]), str(message["name"]), prediction)
            self.frames += 1
            if keep_results:
                results.append(result)
            if on_result is not None:
                on_result(result)
            bar.update(1)

        # As many requests in flight as the one-process stream keeps, so the figures compare.
        in_flight = min(len(buffers), max(2, pipeline.session.optimal_requests))
        bar = progress_bar(int(meta.get("frames") or 0), f"{pipeline.model_name} (zero-copy, 2 processes)", progress)
        started = time.perf_counter()
        try:
            while True:
                _, message = self._receive("frame", "end")
                if message["kind"] == "end":
                    break
                self.requests[int(message["slot"])].start()
                running.append(message)
                if len(running) >= in_flight:
                    finish()
            while running:
                finish()
        finally:
            for message in running:  # a failure mid-stream: let the device finish with our buffers
                self.requests[int(message["slot"])].wait()
            bar.close()
        seconds = time.perf_counter() - started
        return StreamReport(
            source=source,
            model=pipeline.model_name,
            device=pipeline.device,
            mode=pipeline.mode,
            processes=2,
            frames=self.frames,
            dropped=0,
            seconds=seconds,
            stages=timings.stats(),
            results=results,
        )

    def _send(self, meta: dict[str, Any]) -> None:
        from ..buffers import send_buffers

        try:
            send_buffers(self.sock, [], meta)
        except PeerError:
            raise self._gone() from None

    def _receive(self, *kinds: str) -> tuple[list[Any], dict[str, Any]]:
        from ..buffers import recv_buffers

        try:
            buffers, meta = recv_buffers(self.sock)
        except PeerError:
            raise self._gone() from None
        meta = meta or {}
        if meta.get("kind") == "error":
            for buf in buffers:
                buf.close()
            raise ProducerError(f"the producer failed: {meta.get('message')}")
        if meta.get("kind") not in kinds:
            for buf in buffers:
                buf.close()
            raise ProducerError(f"the producer sent {meta.get('kind')!r} where {' or '.join(kinds)} was due")
        return buffers, meta

    def _gone(self) -> ProducerError:
        """The producer closed the connection: say how it ended."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            how = "closed the connection but is still running"
        elif code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with status {code}"
            last = _last_line(self.errors)
            if last:
                how += f" ({last})"
        return ProducerError(f"the producer process (pid {self.process.pid}) {how} after {self.frames} frame(s); the stream is incomplete")

    def close(self) -> None:
        """Unbind and close every buffer (ours and the producer's), then reap the producer."""
        for request in self.requests:
            request.unbind()
        self.requests.clear()
        for buf in self.buffers + [b for outs in self.outputs for b in outs]:
            buf.close()
        self.buffers, self.outputs = [], []
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _last_line(file: Any) -> str:
    file.seek(0)
    lines = [line.strip() for line in file.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""
