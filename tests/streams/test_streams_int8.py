"""A quantised model over video streams: the decoder's NV12 / I420 planes go straight into RGBx_I8
with the model's scale and zero point (streams.py's converter), as the pipeline does for a BGR frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
pytest.importorskip("av", reason="PyAV is not installed (a dependency of npu_zc)")

from streams_helpers import by_stream, reference_frames, run_streams  # noqa: E402

import npu_zc  # noqa: E402
from npu_zc.runtime import CompileOptions  # noqa: E402


def picture_model_int8() -> Any:
    """streams_helpers' picture model (224x224 averaged over 16x16 cells) behind an input FakeQuantize (0..255, 256 levels)."""
    import openvino as ov
    import openvino.opset13 as ops

    image = ops.parameter([1, 3, 224, 224], np.float32, name="image")
    low, high = ops.constant(np.float32(0)), ops.constant(np.float32(255))
    quantised = ops.fake_quantize(image, low, high, low, high, 256)
    pooled = ops.avg_pool(quantised, [16, 16], [0, 0], [0, 0], [16, 16], True)
    flat = ops.reshape(pooled, ops.constant(np.array([1, 588], np.int64)), False)
    return ov.Model([ops.result(flat)], [image], "picture-int8")


def test_streams_write_rgbx_i8_with_the_models_numbers(clips: dict[str, Path]) -> None:
    options = CompileOptions(inference_precision="f32")
    with npu_zc.Pipeline(picture_model_int8(), "CPU", fit="stretch", options=options) as pipeline:
        assert pipeline.spec.format == "RGBx_I8"
        assert (pipeline.spec.quant_scale, pipeline.spec.zero_point) == (1.0, -128)  # byte = pixel - 128
        pipeline.postprocess = lambda outputs: [np.array(outputs[0], np.float32)]
        report, results = run_streams([clips["nv12"], clips["h264"]], pipeline)
        assert not report.errors
        for stream, name in enumerate(("nv12", "h264")):
            reference = reference_frames(clips[name])
            got = by_stream(results)[stream]
            assert [r.index for r in got] == list(range(len(reference)))
            for r, bgr in zip(got[:6], reference):
                want = pipeline.process(bgr)[0]
                # The same pixels (NV12 decoded as OpenCV does; the resize within 1 level): the same cell averages.
                assert np.abs(r.prediction[0] - want).max() < 1.0, (name, r.index)
