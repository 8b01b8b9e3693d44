"""The camera formats the layout engine reads in place come from one table in the core
(``npu_zc.capture.CAMERA_SOURCE_FORMATS``, which ``CameraFormat.source_format`` reads too): the streams' camera
source takes it as it is. No camera needed: a ``CameraSource`` opens its device only when its stream starts."""

from __future__ import annotations

import pytest

import npu_zc
from npu_zc import layout
from npu_zc.capture import CAMERA_SOURCE_FORMATS
from npu_zc.sources import CameraSource


def test_the_table_maps_camera_names_to_layout_sources() -> None:
    assert set(CAMERA_SOURCE_FORMATS.values()) <= set(layout.SOURCE_FORMATS)
    assert (CAMERA_SOURCE_FORMATS["RGB3"], CAMERA_SOURCE_FORMATS["GREY"], CAMERA_SOURCE_FORMATS["I420"]) == ("RGB", "GRAY", "I420")
    assert "MJPG" not in CAMERA_SOURCE_FORMATS and "YVYU" not in CAMERA_SOURCE_FORMATS


@pytest.mark.parametrize("fmt", sorted(CAMERA_SOURCE_FORMATS))
def test_a_camera_source_takes_every_format_of_the_table(fmt: str) -> None:
    assert CameraSource("/dev/no-such-camera", format=fmt).name == "/dev/no-such-camera"


@pytest.mark.parametrize("fmt", ["MJPG", "YVYU", "RGB"])  # compressed; OpenCV-only; the engine's name, not V4L2's
def test_a_camera_source_refuses_what_the_engine_cannot_read_and_names_what_it_can(fmt: str) -> None:
    with pytest.raises(npu_zc.SourceError) as refused:
        CameraSource("/dev/no-such-camera", format=fmt)
    assert f"reads no {fmt} frames" in str(refused.value)
    assert all(name in str(refused.value) for name in CAMERA_SOURCE_FORMATS)
