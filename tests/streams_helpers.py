"""Helpers of the streams tests: real clips (PyAV's encoders, a pan over a scikit-image photo), bad files,
a real RTSP server (GStreamer's, under /usr/bin/python3), and a small model whose output is the picture itself."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

# Where PyAV is missing (the aarch64 run with the core dependencies only) every streams test module skips.
av = pytest.importorskip("av", reason="PyAV (a dependency of npu_zc) is not installed")

HERE = Path(__file__).parent / "streams"  # the RTSP server script lives beside the streams tests
FPS = 30


def pan_frames(width: int, height: int, count: int) -> Iterator[np.ndarray]:
    """A camera panning across scikit-image's astronaut photo (RGB), 3 px a frame."""
    import skimage.data

    photo = skimage.data.astronaut()
    scale = max(1, -(-height // photo.shape[0]), -(-(width + 3 * count) // photo.shape[1]))
    if scale > 1:
        photo = np.kron(photo, np.ones((scale, scale, 1), np.uint8))
    for i in range(count):
        x = 3 * i
        yield np.ascontiguousarray(photo[:height, x : x + width])


def make_clip(path: Path, codec: str, width: int, height: int, count: int, pix_fmt: str = "yuv420p") -> Path:
    """Encode the pan with PyAV (libx264, libx265, rawvideo...)."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        if codec == "libx265":
            stream.options = {"x265-params": "log-level=error"}
        for rgb in pan_frames(width, height, count):
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def make_clips(d: Path) -> dict[str, Path]:
    """H.264 and HEVC clips (sizes that are not multiples of 16: padded line sizes), an NV12 one, and bad files."""
    out = {
        "h264": make_clip(d / "pan.mp4", "libx264", 320, 240, 45),
        "hevc": make_clip(d / "pan.mkv", "libx265", 322, 182, 30),
        "h264_odd": make_clip(d / "odd.mp4", "libx264", 250, 138, 20),
        "nv12": make_clip(d / "nv12.mkv", "rawvideo", 320, 240, 12, pix_fmt="nv12"),
    }
    text = d / "notes.mp4"
    text.write_text("this is a text file, not a video\n")
    out["text"] = text
    truncated = d / "truncated.mp4"
    truncated.write_bytes(out["h264"].read_bytes()[: out["h264"].stat().st_size // 2])
    out["truncated"] = truncated
    audio = d / "audio.mkv"
    with av.open(str(audio), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    out["audio"] = audio
    # A codec FFmpeg does not know: the HEVC clip with its Matroska codec id renamed (same length).
    unknown = d / "unknown.mkv"
    data = out["hevc"].read_bytes()
    assert b"V_MPEGH/ISO/HEVC" in data
    unknown.write_bytes(data.replace(b"V_MPEGH/ISO/HEVC", b"V_NPUZC/ISO/NONE"))
    out["unknown"] = unknown
    return out


def reference_frames(path: Path) -> list[np.ndarray]:
    """Every frame of ``path`` as BGR: FFmpeg's planes (as NV12, a lossless repacking of 4:2:0), converted by OpenCV,
    whose YUV conversion the layout engine follows, cut to whole 4:2:0 pairs."""
    import cv2

    out = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            nv12 = frame.reformat(format="nv12").to_ndarray()
            h, w = frame.height & ~1, frame.width & ~1
            nv12 = np.concatenate([nv12[:h, :w], nv12[nv12.shape[0] * 2 // 3 :][: h // 2, :w]])
            out.append(cv2.cvtColor(np.ascontiguousarray(nv12), cv2.COLOR_YUV2BGR_NV12))
    return out


def picture_model() -> Any:
    """A model whose output is the picture: 224x224 RGB averaged over 16x16 cells, [1, 588]."""
    import openvino as ov
    import openvino.opset13 as ops

    image = ops.parameter([1, 3, 224, 224], np.float32, name="image")
    pooled = ops.avg_pool(image, [16, 16], [0, 0], [0, 0], [16, 16], True)
    flat = ops.reshape(pooled, ops.constant(np.array([1, 588], np.int64)), False)
    return ov.Model([ops.result(flat)], [image], "picture")


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RtspServer:
    """GStreamer's RTSP server in a subprocess of /usr/bin/python3 (Debian's python3-gi); stop() and start() again."""

    def __init__(self, mounts: dict[str, Path]) -> None:
        self.port = free_port()
        self.mounts = mounts
        self.process: subprocess.Popen[str] | None = None

    def url(self, mount: str) -> str:
        return f"rtsp://127.0.0.1:{self.port}/{mount}"

    def start(self) -> None:
        args = ["/usr/bin/python3", str(HERE / "rtsp_server.py"), str(self.port)]
        args += [f"/{name}={path}" for name, path in self.mounts.items()]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the RTSP server did not start: {self.process.stderr.read() if self.process.stderr else ''}")
        wait_port(self.port)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def rtsp_available() -> bool:
    if not os.path.exists("/usr/bin/python3"):
        return False
    check = "import gi; gi.require_version('GstRtspServer', '1.0'); from gi.repository import GstRtspServer"
    return subprocess.run(["/usr/bin/python3", "-c", check], capture_output=True).returncode == 0


def run_streams(sources: list[Any], pipeline: Any, **kwargs: Any) -> tuple[Any, list[Any]]:
    """A Streams run over ``sources``; (report, every result in delivery order). ``outputs=[...]``: more outputs."""
    import npu_zc

    results: list[Any] = []
    duration = kwargs.pop("duration", None)
    outputs = kwargs.pop("outputs", [])
    streams = npu_zc.Streams(sources, pipeline, **kwargs)
    report = streams.run([results.append, *outputs], duration=duration)
    streams.close()
    return report, results


def by_stream(results: list[Any]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for r in results:
        out.setdefault(r.stream, []).append(r)
    return out

