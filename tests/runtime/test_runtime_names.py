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
