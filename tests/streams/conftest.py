"""Fixtures of the streams tests (the helpers behind them: streams_helpers.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

pytest.importorskip("av", reason="PyAV (a dependency of npu_zc) is not installed")

from streams_helpers import RtspServer, make_clip, make_clips, picture_model, rtsp_available  # noqa: E402


@pytest.fixture(scope="session")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_clips(tmp_path_factory.mktemp("clips"))


@pytest.fixture(scope="session")
def nv12_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Only the NV12 clip (cheap to make: the camera test runs in an emulated VM)."""
    return make_clip(tmp_path_factory.mktemp("nv12") / "nv12.mkv", "rawvideo", 320, 240, 12, pix_fmt="nv12")


@pytest.fixture(scope="session")
def picture_pipeline() -> Iterator[Any]:
    """One compiled pipeline for the session (throughput hint), its postprocess returning the pooled picture."""
    pytest.importorskip("openvino")
    import npu_zc
    from npu_zc.runtime import CompileOptions

    p = npu_zc.Pipeline(picture_model(), "CPU", hint="throughput", fit="stretch", options=CompileOptions(inference_precision="f32"))
    p.postprocess = lambda outputs: [np.array(outputs[0], np.float32).reshape(3, 14, 14)]
    yield p
    p.close()


@pytest.fixture
def rtsp(clips: dict[str, Path]) -> Iterator[RtspServer]:
    if not rtsp_available():
        pytest.skip("GStreamer's RTSP server is not installed (scripts/setup.sh installs it: gir1.2-gst-rtsp-server-1.0)")
    server = RtspServer({"cam1": clips["h264"], "cam2": clips["hevc"]})
    server.start()
    yield server
    server.stop()
