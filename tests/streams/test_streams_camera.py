"""A camera in the same scheduler as a file: vivid inside the test VM (scripts/vm-run.sh), skipped elsewhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streams_helpers import by_stream, run_streams

from npu_zc.sources import CameraSource

pytest.importorskip("openvino")


@pytest.mark.kernel
def test_camera_beside_a_file(vivid: dict[str, str], nv12_clip: Path, picture_pipeline: Any) -> None:
    """vivid's frames (YUYV, read in place from the driver's buffers) and a file's, one model: the camera is live
    (its frames go back to the driver when dropped; it lends its buffers less one), the file loses nothing."""
    camera = CameraSource(vivid["single"], width=640, height=480, format="YUYV", limit=8, timeout=30)
    report, results = run_streams([camera, nv12_clip], picture_pipeline)
    assert not report.errors, report.errors
    cam, file = report.streams
    assert cam.live and 0 < cam.frames <= 8 and cam.frames + cam.dropped <= 8
    assert camera.most_held is not None and camera.most_held >= 3  # four buffers asked for (a driver may add some)
    indices = [r.index for r in by_stream(results)[0]]
    assert indices == sorted(set(indices))
    assert file.frames == 12 and file.dropped == 0
    assert max(r.prediction[0].max() for r in by_stream(results)[0]) > 0  # a picture, not an empty buffer
