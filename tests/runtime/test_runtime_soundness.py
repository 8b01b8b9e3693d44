"""The runtime sound (docs/safety.md): a request's output may not share memory with its
inputs, a frame is submitted only to its own queue, every timeout is checked,
and Ctrl-C stops an acquire past the queue's depth."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
ops = pytest.importorskip("openvino.opset13", reason="OpenVINO is not installed (a dependency of npu_zc)")

import npu_zc
from npu_zc import AliasingError, InvalidArgumentError
from npu_zc.runtime import CompileOptions, Session, compile_model

F32 = CompileOptions(inference_precision="f32", num_threads=1)

TINY = """
import numpy as np
import openvino as ov
import openvino.opset13 as ops
from npu_zc.runtime import CompileOptions, compile_model

def tiny():
    x = ops.parameter([1, 3, 8, 8], ov.Type.f32, name="x")
    return ov.Model([ops.result(ops.relu(x))], [x], "tiny")

session = compile_model(tiny(), "CPU", mode="copy", options=CompileOptions(inference_precision="f32", num_threads=1))
"""


def tiny() -> ov.Model:
    x = ops.parameter([1, 3, 8, 8], ov.Type.f32, name="x")
    return ov.Model([ops.result(ops.relu(x))], [x], "tiny")


@pytest.fixture(scope="module")
def session() -> Session:
    return compile_model(tiny(), "CPU", mode="copy", options=F32)


def test_binding_one_buffer_as_input_and_output_is_refused(session: Session) -> None:
    nbytes = max(session.inputs[0].nbytes, session.outputs[0].nbytes)
    request = session.create_request()
    with npu_zc.alloc(nbytes, "memfd") as b:
        request.bind_input(b)
        with pytest.raises(AliasingError, match="shares memory with a bound input"):
            request.bind_output(b)
        request.unbind()
        request.bind_output(b)
        with pytest.raises(AliasingError, match="shares memory with a bound output"):
            request.bind_input(b)
        request.unbind()


def test_an_input_and_an_output_in_two_buffers_still_bind_and_infer(session: Session) -> None:
    request = session.create_request()
    with npu_zc.alloc(session.inputs[0].nbytes, "memfd") as i, npu_zc.alloc(session.outputs[0].nbytes, "memfd") as o:
        x = request.bind_input(i)
        y = request.bind_output(o)
        x[...] = -1
        x.reshape(-1)[:5] = 2
        request.infer()
        assert float(y.reshape(-1)[0]) == 2 and float(y.reshape(-1)[-1]) == 0
        del x, y
        request.unbind()


def test_a_frame_is_submitted_only_to_the_queue_that_gave_it(session: Session) -> None:
    with session.queue(depth=1, heap="memfd") as q1, session.queue(depth=1, heap="memfd") as q2:
        frame = q2.acquire(timeout=10)
        states = [pool.state(0) for pool in q2._in_pools + q2._out_pools]
        with pytest.raises(InvalidArgumentError, match="another queue"):
            q1.submit(frame)
        with pytest.raises(InvalidArgumentError, match="another queue"):
            q1.discard(frame)
        assert [pool.state(0) for pool in q2._in_pools + q2._out_pools] == states
        assert q1.pending == 0 and q1.in_flight == 0
        q2.discard(frame)


@pytest.mark.parametrize("bad", [math.nan, -1, -math.inf, -(10**400)])
def test_queue_timeouts_are_checked(session: Session, bad) -> None:
    with session.queue(depth=1, heap="memfd") as queue:
        with pytest.raises(InvalidArgumentError, match="seconds"):
            queue.get(timeout=bad)
        with pytest.raises(InvalidArgumentError, match="seconds"):
            queue.acquire(timeout=bad)
    with session.queue(depth=1, heap="memfd", callback=lambda r: None) as queue:
        with pytest.raises(InvalidArgumentError, match="seconds"):
            queue.join(timeout=bad)


@pytest.mark.parametrize("forever", [math.inf, 1e20, 10**400])
def test_queue_timeouts_too_long_mean_no_limit(session: Session, forever) -> None:
    with session.queue(depth=1, heap="memfd") as queue:
        assert queue.get(timeout=forever) is None  # nothing submitted: nothing to wait for
        frame = queue.acquire(timeout=forever)
        queue.submit(frame)
        result = queue.get(timeout=forever)
        assert result is not None
        result.release()


def test_ctrl_c_stops_an_acquire_past_the_queues_depth() -> None:
    code = TINY + textwrap.dedent(
        """
        queue = session.queue(depth=1, heap="memfd")
        held = queue.acquire()
        print("waiting", flush=True)
        try:
            queue.acquire()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "waiting"
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("an acquire past the queue's depth outlived Ctrl-C") from None
    assert "interrupted" in out


def test_bound_views_are_numpy_arrays_of_the_buffers(session: Session) -> None:
    request = session.create_request()
    with npu_zc.alloc(session.inputs[0].nbytes, "memfd") as i:
        x = request.bind_input(i)
        assert isinstance(x, np.ndarray) and npu_zc._core._shares_memory(x, i.map())
        del x
        request.unbind()
