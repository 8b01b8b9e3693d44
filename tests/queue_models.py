"""The tiny OpenVINO model the AsyncQueue tests run: each output value is twice its input, so a result that is
not its own frame's shows at once. OpenVINO is imported inside (the portable aarch64 run has none)."""

from __future__ import annotations

from typing import Any

import numpy as np


def doubling_session() -> Any:
    """A compiled `x -> 2x` model, (1, 3, 4, 4) f32, in copy mode and f32 precision on the CPU."""
    import openvino as ov
    import openvino.opset13 as ops

    from npu_zc.runtime import CompileOptions, compile_model

    x = ops.parameter([1, 3, 4, 4], ov.Type.f32, name="x")
    model = ov.Model([ops.result(ops.multiply(x, ops.constant(np.float32(2))))], [x], "doubling")
    return compile_model(model, "CPU", mode="copy", options=CompileOptions(inference_precision="f32"))


def slow_session() -> Any:
    """A compiled chain of 40 products of a (1, 3, 256, 256) f32 input with a (256, 256) matrix: some four GFLOP on
    one thread, an inference of tens of milliseconds or more on any CPU however many cores it has, for tests that
    need one still running."""
    import openvino as ov
    import openvino.opset13 as ops

    from npu_zc.runtime import CompileOptions, compile_model

    x = ops.parameter([1, 3, 256, 256], ov.Type.f32, name="x")
    weight = ops.constant(np.full((256, 256), 1.0 / 256, np.float32))
    y: Any = x
    for _ in range(40):
        y = ops.matmul(y, weight, False, False)
    model = ov.Model([ops.result(y)], [x], "slow")
    options = CompileOptions(inference_precision="f32", extra={"INFERENCE_NUM_THREADS": 1})
    return compile_model(model, "CPU", mode="copy", options=options)
