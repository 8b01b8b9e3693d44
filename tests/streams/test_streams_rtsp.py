"""RTSP from a real server on 127.0.0.1 (GStreamer's): pull, a server that goes away and comes back."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from streams_helpers import RtspServer, by_stream, run_streams

import npu_zc
from npu_zc.sources import VideoSource

pytest.importorskip("openvino")


def test_pull_rtsp_beside_a_file(rtsp: RtspServer, clips: dict[str, Path], picture_pipeline: Any) -> None:
    """Both served clips (H.264 and HEVC) arrive in real time, in order, beside a file; nothing is dropped."""
    sources = [VideoSource(rtsp.url("cam1"), limit=45), VideoSource(rtsp.url("cam2"), limit=30), clips["nv12"]]
    report, results = run_streams(sources, picture_pipeline)
    assert not report.errors, report.errors
    streams = by_stream(results)
    for stream, count in ((0, 45), (1, 30), (2, 12)):
        indices = [r.index for r in streams[stream]]
        assert indices == sorted(set(indices))
        assert report.streams[stream].frames + report.streams[stream].dropped == count
    assert report.streams[0].live and not report.streams[2].live
    cam1 = report.streams[0]
    assert cam1.last_ns is not None and cam1.first_ns is not None
    assert cam1.last_ns - cam1.first_ns > 0.5e9  # paced by the server (1.5 s of video), not decoded at once


def test_server_goes_away_and_comes_back(rtsp: RtspServer, picture_pipeline: Any) -> None:
    source = VideoSource(rtsp.url("cam1"), timeout=2, reconnect=10, limit=60)

    def bounce() -> None:
        time.sleep(0.7)
        rtsp.stop()
        time.sleep(1.0)
        rtsp.start()

    bouncer = threading.Thread(target=bounce)
    bouncer.start()
    try:
        report, results = run_streams([source], picture_pipeline, duration=30)
    finally:
        bouncer.join()
    assert not report.errors, report.errors
    assert source.reconnects >= 1 and report.streams[0].reconnects == source.reconnects
    indices = [r.index for r in results]
    assert indices == sorted(set(indices))
    assert report.streams[0].frames + report.streams[0].dropped == 60


def test_refused_and_silent_urls_are_per_stream_errors(rtsp: RtspServer, clips: dict[str, Path], picture_pipeline: Any) -> None:
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        sources = [VideoSource(f"rtsp://127.0.0.1:{silent.getsockname()[1]}/x", timeout=1, reconnect=0),
                   VideoSource(rtsp.url("nothing-here"), timeout=1, reconnect=0), clips["nv12"]]  # fmt: skip
        report, _ = run_streams(sources, picture_pipeline)
    assert "did not answer within 1 s" in (report.streams[0].error or "")
    assert report.streams[1].error  # the server answers 404
    assert report.streams[2].frames == 12 and not report.streams[2].error
    assert isinstance(npu_zc.SourceTimeoutError("x"), TimeoutError)
