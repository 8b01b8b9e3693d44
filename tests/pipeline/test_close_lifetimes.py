"""Closing lets go of everything, no leak and no stuck object:
a closed AsyncQueue holds no view of its buffers, so its pools close and
their fds go; Pipeline.close() is retryable and idempotent."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")

from npu_zc import BufferInUseError
from npu_zc.pipeline import Pipeline
from npu_zc.runtime import CompileOptions, compile_model

F32 = CompileOptions(inference_precision="f32", num_threads=1)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_closed_queues_hold_no_fds() -> None:
    session = compile_model("efficientnet-lite0", "CPU", options=F32)
    with session.queue(depth=2, heap="memfd") as queue:  # warm up whatever OpenVINO opens once
        frame = queue.acquire()
        queue.submit(frame)
        result = queue.get()
        assert result is not None
        result.release()
    def cycle(n: int) -> int:
        for _ in range(n):
            queue = session.queue(depth=2, heap="memfd")
            buffers = [b for pool in queue._in_pools + queue._out_pools for b in pool.buffers]
            queue.close()
            assert all(b.closed for b in buffers), "a closed queue's buffers are closed"
            del buffers, queue
        gc.collect()
        return open_fds()

    settled = cycle(5)  # whatever OpenVINO opens once for the first requests
    after = cycle(20)
    # Each queue holds 4 fds (2 buffers in, 2 out): before the fix, 20 closed queues held 80.
    assert after - settled < 4, f"20 closed queues left {after - settled} fds open"


def test_pipeline_close_is_retryable_and_idempotent() -> None:
    pipeline = Pipeline("efficientnet-lite0", "CPU", options=F32, heap="memfd")
    held = pipeline.input  # the caller keeps a view of the input buffer
    with pytest.raises(BufferInUseError):
        pipeline.close()
    with pytest.raises(BufferInUseError):
        pipeline.close()  # the same refusal again, not an AttributeError
    del held
    pipeline.close()
    pipeline.close()  # idempotent
    assert pipeline._buffers == []


def test_pipeline_refuses_to_run_after_close() -> None:
    pipeline = Pipeline("efficientnet-lite0", "CPU", options=F32, heap="memfd")
    pipeline.close()
    from npu_zc import BufferClosedError

    with pytest.raises(BufferClosedError):
        pipeline.process(np.zeros((32, 32, 3), np.uint8))


def test_leaving_a_pipeline_block_by_an_exception_keeps_that_exception() -> None:
    with pytest.raises(ZeroDivisionError):
        with Pipeline("efficientnet-lite0", "CPU", options=F32, heap="memfd") as pipeline:
            held = pipeline.outputs[0]
            1 / 0
    del held
    pipeline.close()  # the rest of the close, once the view is gone
    assert pipeline._buffers == []
