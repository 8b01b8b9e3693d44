"""run_throughput and the preprocess refuse frames that are not images:
a zero-size frame was a ZeroDivisionError, None an AttributeError."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")

from npu_zc import InvalidArgumentError
from npu_zc.pipeline import Pipeline, PreprocessSpec
from npu_zc.pipeline.preprocess import Preprocessor
from npu_zc.runtime import CompileOptions


@pytest.mark.parametrize("frame", [np.zeros((0, 10, 3), np.uint8), np.zeros((10, 0, 3), np.uint8), None, "image"], ids=repr)
def test_preprocess_refuses_empty_and_non_array_frames(frame: object) -> None:
    spec = PreprocessSpec("RGBx", (1, 8, 8, 4), 8, 8)
    dst = np.zeros((1, 8, 8, 4), np.uint8)
    with pytest.raises(InvalidArgumentError):
        Preprocessor(spec, heap="memfd")(frame, dst)  # type: ignore[arg-type]


def test_run_throughput_refuses_an_empty_frame_with_a_typed_error() -> None:
    with Pipeline("efficientnet-lite0", "CPU", hint="throughput", heap="memfd",
                  options=CompileOptions(inference_precision="f32", num_threads=1)) as pipeline:  # fmt: skip
        good = np.zeros((32, 32, 3), np.uint8)
        for bad in (np.zeros((0, 32, 3), np.uint8), None):
            with pytest.raises(InvalidArgumentError):
                pipeline.run_throughput([good, bad, good])
        assert pipeline.run_throughput([good, good]).frames == 2  # usable afterwards
