"""Every public function and method of npu_zc, fed the extreme values of each
argument type. Imported by test_hardening.py for the case
names; run as a script in a child process, which calls each case and prints
one line per case: ``name<TAB>outcome``, where outcome is ``ok`` or the
exception's module and class. A crash (a segfault, an abort) stops the child
and names the case it was running, instead of killing pytest.
"""

from __future__ import annotations

import json
import math
import socket
import sys
from typing import Any, Callable

import numpy as np

import npu_zc
from npu_zc._timeouts import timeout_seconds

INTS = {"-1": -1, "-2**63": -(2**63), "2**63": 2**63, "2**64": 2**64, "10**30": 10**30}
FLOATS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan, "1e20": 1e20, "-1.5": -1.5}
OTHERS: dict[str, Any] = {"None": None, "str": "x", "list": [1, 2], "huge-shape": (2**62, 2**62)}
VALUES: dict[str, Any] = {**INTS, **FLOATS, **OTHERS}


class World:
    """The objects the cases act on, made fresh for each case."""

    def __init__(self) -> None:
        self.buf = npu_zc.alloc(4096, "memfd")
        self.pool = npu_zc.BufferPool(2, 4096, "memfd")
        self.a, self.b = socket.socketpair()
        self.rgb = np.zeros((4, 4, 3), np.uint8)
        self.rgbx = np.zeros((4, 4, 4), np.uint8)
        self.scores = np.arange(10, dtype=np.float32)

    def pending(self) -> socket.socket:
        """The receiving end, with one message waiting (so no case waits forever)."""
        npu_zc.send_buffers(self.a, [self.buf], {"n": 1})
        return self.b

    def close(self) -> None:
        self.a.close()
        self.b.close()


def _acquire(w: World, v: Any) -> None:
    w.pool.acquire(v).release()


# name -> (world, value) -> anything. Each takes one argument from VALUES, the rest valid.
FUNCTIONS: dict[str, Callable[[World, Any], object]] = {
    "alloc(size)": lambda w, v: npu_zc.alloc(v),
    "alloc(heap)": lambda w, v: npu_zc.alloc(4096, v),
    "DmaBuf.from_fd(fd)": lambda w, v: npu_zc.DmaBuf.from_fd(v),
    "DmaBuf.map(dtype)": lambda w, v: w.buf.map(v),
    "DmaBuf.map(shape)": lambda w, v: w.buf.map("uint8", v),
    "DmaBuf.map(shape item)": lambda w, v: w.buf.map("uint8", (v, 1)),
    "DmaBuf.map(offset)": lambda w, v: w.buf.map("uint8", None, v),
    "DmaBuf.map(offset, shape)": lambda w, v: w.buf.map("uint8", (2**64 - 1,), v),
    "DmaBuf.cpu_access(mode)": lambda w, v: w.buf.cpu_access(v),
    "BufferPool(count)": lambda w, v: npu_zc.BufferPool(v, 4096, "memfd"),
    "BufferPool(size)": lambda w, v: npu_zc.BufferPool(1, v, "memfd"),
    "BufferPool(heap)": lambda w, v: npu_zc.BufferPool(1, 4096, v),
    "BufferPool.acquire(timeout)": _acquire,
    "BufferPool.state(index)": lambda w, v: w.pool.state(v),
    "BufferPool.release(index)": lambda w, v: w.pool.release(v),
    "send_buffers(sock)": lambda w, v: npu_zc.send_buffers(v, []),
    "send_buffers(buffers)": lambda w, v: npu_zc.send_buffers(w.a, v),
    "send_buffers(meta)": lambda w, v: npu_zc.send_buffers(w.a, [], v),
    "recv_buffers(sock)": lambda w, v: npu_zc.recv_buffers(v),
    "recv_buffers(timeout)": lambda w, v: npu_zc.recv_buffers(w.pending(), timeout=v),
    "send_buffers(timeout)": lambda w, v: npu_zc.send_buffers(w.a, [], {}, timeout=v),
    "convert(size)": lambda w, v: npu_zc.convert(w.rgb.reshape(-1), w.rgbx, "RGB", "RGBx", size=(v, 4)),
    "convert(mean)": lambda w, v: npu_zc.convert(w.rgb, w.rgbx, "RGB", "RGBx", mean=v),
    "convert(scale)": lambda w, v: npu_zc.convert(w.rgb, w.rgbx, "RGB", "RGBx", scale=v),
    "convert(pad)": lambda w, v: npu_zc.convert(w.rgb, w.rgbx, "RGB", "RGBx", pad=v),
    "convert(threads)": lambda w, v: npu_zc.convert(w.rgb, w.rgbx, "RGB", "RGBx", threads=v),
    "convert(src_stride)": lambda w, v: npu_zc.convert(w.rgb, w.rgbx, "RGB", "RGBx", src_stride=v),
    "convert(dst_stride)": lambda w, v: npu_zc.convert(w.rgb, w.rgbx, "RGB", "RGBx", dst_stride=v),
    "convert(src)": lambda w, v: npu_zc.convert(v, w.rgbx, "RGB", "RGBx"),
    "convert(dst)": lambda w, v: npu_zc.convert(w.rgb, v, "RGB", "RGBx"),
    "Converter(width)": lambda w, v: npu_zc.Converter("RGB", "RGBx", v, 4),
    "Converter(height)": lambda w, v: npu_zc.Converter("RGB", "RGBx", 4, v),
    "Converter(threads)": lambda w, v: npu_zc.Converter("RGB", "RGBx", 4, 4, threads=v),
    "Converter(dst_stride)": lambda w, v: npu_zc.Converter("RGB", "RGBx", 4, 4, dst_stride=v),
    "Converter(mean)": lambda w, v: npu_zc.Converter("RGB", "RGBx", 4, 4, mean=v),
    "frame_nbytes(width)": lambda w, v: npu_zc.frame_nbytes("RGBx", v, 5),
    "frame_nbytes(height)": lambda w, v: npu_zc.frame_nbytes("RGBx", 5, v),
    "frame_nbytes(stride)": lambda w, v: npu_zc.frame_nbytes("RGBx", 5, 5, stride=v),
    "check_destination(dst)": lambda w, v: npu_zc.check_destination(v, "RGBx", 4, 4),
    "check_destination(width)": lambda w, v: npu_zc.check_destination(w.rgbx, "RGBx", v, 4),
    "select_format(channels)": lambda w, v: npu_zc.select_format("u8", "NHWC", v),
    "select_format(element)": lambda w, v: npu_zc.select_format(v, "NHWC", 4),
    "topk(k)": lambda w, v: npu_zc.topk(w.scores, v),
    "topk(scale)": lambda w, v: npu_zc.topk(w.scores.astype(np.uint8), 2, scale=v),
    "topk(zero_point)": lambda w, v: npu_zc.topk(w.scores.astype(np.uint8), 2, scale=1.0, zero_point=v),
    "TopK(k)": lambda w, v: npu_zc.TopK(v),
    "quantize(scale)": lambda w, v: npu_zc.quantize(w.scores, np.zeros(10, np.int8), v),
    "quantize(zero_point)": lambda w, v: npu_zc.quantize(w.scores, np.zeros(10, np.int8), 1.0, v),
    "quantize(axis)": lambda w, v: npu_zc.quantize(w.scores, np.zeros(10, np.int8), [1.0] * 10, axis=v),
    "dequantize(scale)": lambda w, v: npu_zc.dequantize(np.zeros(10, np.int8), None, v),
    "dequantize(zero_point)": lambda w, v: npu_zc.dequantize(np.zeros(10, np.int8), None, 1.0, v),
    "to_float32(src)": lambda w, v: npu_zc.to_float32(v),
    "from_float32(dst)": lambda w, v: npu_zc.from_float32(w.scores, v),
    "packed_to_planar(planes)": lambda w, v: npu_zc.packed_to_planar(w.rgbx.astype(np.float32), planes=v),
    "planar_to_packed(pad)": lambda w, v: npu_zc.planar_to_packed(np.zeros((3, 4, 4), np.float32), w.rgbx, pad=v),
}

# Every timeout argument: huge, infinite, NaN and negative values give a typed
# error or wait for ever by the documented rule (docs/safety.md). None of these cases may
# wait: each either fails at once or finds what it waits for ready.
TIMEOUTS: dict[str, Any] = {
    **{k: VALUES[k] for k in ("-1", "2**64", "inf", "-inf", "nan", "1e20", "-1.5", "None", "str")},
    "10**400": 10**400,
    "-10**400": -(10**400),
    "1e-9": 1e-9,
}


TIMEOUT_FUNCTIONS: dict[str, Callable[[World, Any], object]] = {
    "DmaBuf.wait(timeout)": lambda w, v: w.buf.wait("read", v),
    "DmaBuf.wait(write, timeout)": lambda w, v: w.buf.wait("rw", timeout=v),
    "DmaBuf.cpu_access(timeout)": lambda w, v: w.buf.cpu_access("rw", timeout=v).__enter__().__exit__(None, None, None),
    "BufferPool.acquire(free, timeout)": _acquire,
    "BufferPool.acquire(exhausted, timeout=0)": lambda w, v: _exhausted(w, v),
    "recv_buffers(ready, timeout)": lambda w, v: npu_zc.recv_buffers(w.pending(), timeout=v),
    "send_buffers(room, timeout)": lambda w, v: npu_zc.send_buffers(w.a, [], {}, timeout=v),
    "Camera(timeout)": lambda w, v: npu_zc.Camera("/nonexistent/video99", timeout=v),
    "the Python side's timeout rule": lambda w, v: timeout_seconds(v),
}


def _exhausted(w: World, v: Any) -> None:
    """An exhausted pool with a timeout that is finite and small, or refused: never a wait for ever."""
    held = [w.pool.acquire(), w.pool.acquire()]
    try:
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if v is not None and (not number or v != v or v < 1):  # refused, or at most a second
            w.pool.acquire(v)
    finally:
        for slot in held:
            slot.release()


VALUES_OF: dict[str, dict[str, Any]] = {
    **{name: VALUES for name in FUNCTIONS},
    **{name: TIMEOUTS for name in TIMEOUT_FUNCTIONS},
}
CALLS = {**FUNCTIONS, **TIMEOUT_FUNCTIONS}
CASES = [f"{function} = {value}" for function, values in VALUES_OF.items() for value in values]


def main() -> None:
    for case in CASES:
        function, value = case.split(" = ", 1)
        print(f"{case}\tstart", flush=True)
        world = World()
        try:
            CALLS[function](world, VALUES_OF[function][value])
            outcome = "ok"
        except BaseException as e:  # noqa: BLE001 - what escapes is the point
            outcome = f"{type(e).__module__}.{type(e).__qualname__}: {str(e)[:200]}"
        finally:
            world.close()
        print(f"{case}\t{json.dumps(outcome)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
