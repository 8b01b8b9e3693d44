"""The producer process of the two-process pipeline (see :mod:`.ipc`): decode and preprocess, no OpenVINO.

Started by the inference process as ``python -m npu_zc.pipeline.producer --fd N``
with its end of a Unix socket pair.
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import sys
import threading
import time
from typing import Any, Sequence

from ..buffers import BufferPool, recv_buffers, send_buffers
from ..errors import Error, PeerError, PoolExhaustedError
from ..sources.image import FrameSource
from .preprocess import PreprocessSpec, Preprocessor
from .single_stream import timed_frames
from .timing import FENCE_TIMEOUT_S, Timings


def produce(sock: socket.socket) -> int:
    """Serve one stream to the consumer at the other end of ``sock``; returns the number of frames sent."""
    _, request = recv_buffers(sock)
    if not request or request.get("kind") != "spec":
        raise PeerError("the consumer did not start with a spec")
    spec = PreprocessSpec.from_dict(request["spec"])
    source = FrameSource(request["source"], limit=request.get("limit"))
    pool = BufferPool(int(request["depth"]), spec.nbytes, request.get("heap", "auto"))
    views = [buf.map(spec.dtype, spec.shape) for buf in pool.buffers]
    preprocess = Preprocessor(spec, heap=request.get("heap", "auto"))
    send_buffers(sock, pool.buffers, {"kind": "pool", "frames": len(source)})

    consumer_gone = threading.Event()
    # The slots in flight, by index: a "done" releases the slot this process
    # submitted, never whatever a bare index would name.
    in_flight: dict[int, Any] = {}
    in_flight_lock = threading.Lock()

    def read_dones() -> None:
        # The consumer answers each frame once it has read the buffer: it may be written again.
        try:
            while True:
                _, message = recv_buffers(sock)
                if message and message.get("kind") == "done":
                    index = message.get("slot")
                    with in_flight_lock:
                        done = in_flight.pop(index, None) if isinstance(index, int) else None
                    if done is None:
                        raise PeerError(f"the consumer answered done for slot {message.get('slot')!r}, which is not in flight")
                    done.release()
        except (PeerError, OSError):
            consumer_gone.set()

    reader = threading.Thread(target=read_dones, name="npu-zc-producer-dones", daemon=True)
    reader.start()
    sent = 0
    for sequence, name, image, decode_ns in timed_frames(source, Timings()):
        slot = _acquire(pool, consumer_gone)
        started = time.perf_counter_ns()
        with slot.buffer.cpu_access("write", timeout=FENCE_TIMEOUT_S):
            preprocess(image, views[slot.index])
        preprocess_ns = time.perf_counter_ns() - started
        with in_flight_lock:
            in_flight[slot.index] = slot
        slot.submit()  # in flight until the consumer says done
        meta = {"kind": "frame", "slot": slot.index, "sequence": sequence, "name": name,
                "decode_ns": decode_ns, "preprocess_ns": preprocess_ns,
                # How the input was made from the frame: the consumer maps boxes back with it.
                "frame_size": [image.shape[1], image.shape[0]],
                "transform": None if preprocess.transform is None else dataclasses.asdict(preprocess.transform)}  # fmt: skip
        send_buffers(sock, [], meta)
        sent += 1
    send_buffers(sock, [], {"kind": "end", "frames": sent})
    # The consumer is still inferring on the last frames and answers "done" for each: stay until it
    # closes its end (it does once finished, or the kernel does if it dies), however long that takes.
    # A time limit here made a slow consumer (an emulated CPU, a busy device) find the connection
    # closed under its last "done" and report an incomplete stream.
    reader.join()
    return sent


def _acquire(pool: BufferPool, consumer_gone: threading.Event) -> Any:
    while True:
        try:
            return pool.acquire(timeout=0.2)
        except PoolExhaustedError:
            if consumer_gone.is_set():
                raise PeerError("the inference process closed the connection") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npu_zc.pipeline.producer", description=__doc__)
    parser.add_argument("--fd", type=int, required=True, help="this process's end of the Unix socket pair")
    args = parser.parse_args(argv)
    with socket.socket(fileno=args.fd) as sock:
        try:
            produce(sock)
        except PeerError as exc:
            print(f"npu-zc producer: {exc}", file=sys.stderr)
            return 1
        except Error as exc:  # e.g. an unreadable frame: tell the consumer, which reports it
            try:
                send_buffers(sock, [], {"kind": "error", "message": str(exc)})
            except PeerError:
                pass
            print(f"npu-zc producer: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
