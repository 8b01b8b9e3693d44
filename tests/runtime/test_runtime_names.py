"""Renamed public names: the new name is the thing, the old one still works for a release and says so."""

from __future__ import annotations

import pytest

import npu_zc.runtime as runtime


def test_queue_buffer_set_is_named_apart_from_frames() -> None:
    assert "BufferSet" in runtime.__all__ and "Frame" not in runtime.__all__
    with pytest.warns(DeprecationWarning, match="BufferSet"):
        old = runtime.Frame
    assert old is runtime.BufferSet


def test_unknown_runtime_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        runtime.Nothing  # noqa: B018


def test_normalised_detection_is_named_apart_from_pixel_detections() -> None:
    import npu_zc.pipeline as pipeline

    assert "NormalisedDetection" in pipeline.__all__ and "Detection" not in pipeline.__all__
    with pytest.warns(DeprecationWarning, match="NormalisedDetection"):
        old = pipeline.Detection
    assert old is pipeline.NormalisedDetection
    box = pipeline.NormalisedDetection(1, "person", 0.9, (0.25, 0.5, 0.75, 1.0))
    assert box.pixels(200, 100) == (50, 50, 150, 100)


def _tiny() -> object:
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, 3, 8, 8], ov.Type.f32, name="x")
    return ov.Model([ops.result(ops.relu(x))], [x], "tiny")


def test_compile_model_takes_colour_and_color_as_its_deprecated_alias() -> None:
    import warnings

    from npu_zc.errors import InvalidArgumentError
    from npu_zc.runtime import CompileOptions, compile_model

    options = CompileOptions(inference_precision="f32", num_threads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compile_model(_tiny(), "CPU", mode="copy", colour="BGR", options=options).normalisation.color == "BGR"
    with pytest.warns(DeprecationWarning, match="use colour="):
        session = compile_model(_tiny(), "CPU", mode="copy", color="BGR", options=options)
    assert session.normalisation.color == "BGR"
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidArgumentError, match="disagree"):
        compile_model(_tiny(), "CPU", mode="copy", colour="RGB", color="BGR", options=options)
