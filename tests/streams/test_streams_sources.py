"""Sources: PyAV's decoded planes handed over in place, colours from the stream, typed errors, hardware boundary."""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import npu_zc
from npu_zc.sources import DecodedFrame, ImageSource, VideoSource, colour_of, open_source
from npu_zc.sources import hardware
from npu_zc.sources.video import engine_reads_i420_planes, plane_view, redact

av = pytest.importorskip("av")


def test_h264_frames_in_order_with_pts(clips: dict[str, Path]) -> None:
    frames = list(VideoSource(clips["h264"]).frames())
    assert [f.index for f in frames] == list(range(45))
    assert [round(f.pts * 30) for f in frames] == list(range(45))
    expected = "I420" if engine_reads_i420_planes() else "NV12"
    assert {(f.format, f.width, f.height, f.matrix, f.range) for f in frames} == {(expected, 320, 240, "bt601", "limited")}
    for f in frames:
        f.release()
        assert f.planes is None and f.owner is None


def test_nv12_planes_are_the_decoders_buffer(clips: dict[str, Path]) -> None:
    """No copy: the Y and UV views start at the decoder's own plane pointers, rows at its line size."""
    with av.open(str(clips["nv12"])) as container:
        reference = [f.to_ndarray() for f in container.decode(video=0)]  # (H*3/2, W), copied by PyAV
    source = VideoSource(clips["nv12"])
    for frame, ref in zip(source.frames(), reference, strict=True):
        y, uv = frame.planes
        assert frame.format == "NV12" and not frame.copied
        assert y.ctypes.data == frame.owner.planes[0].buffer_ptr
        assert uv.ctypes.data == frame.owner.planes[1].buffer_ptr
        assert y.strides == (frame.owner.planes[0].line_size, 1)
        assert not y.flags.writeable and not uv.flags.writeable  # the decoder may still predict from them
        np.testing.assert_array_equal(y, ref[:240])
        np.testing.assert_array_equal(uv, ref[240:])
    assert source.copied == 0


@pytest.mark.parametrize("clip", ["hevc", "h264_odd"])
def test_padded_line_sizes_read_at_their_pitch(clips: dict[str, Path], clip: str) -> None:
    """Sizes that are not multiples of 16: the planes' line size is larger than the row; the views skip the padding."""
    with av.open(str(clips[clip])) as container:
        reference = [f.reformat(format="nv12").to_ndarray() for f in container.decode(video=0)]
    for frame, ref in zip(VideoSource(clips[clip]).frames(), reference, strict=True):
        h, w = frame.height, frame.width
        if frame.format == "NV12":
            y, uv = frame.planes
            np.testing.assert_array_equal(y, ref[:h, :w])
            np.testing.assert_array_equal(uv, ref[ref.shape[0] * 2 // 3 :][: h // 2, :w])
        else:
            y, u, v = frame.planes
            assert y.strides[0] > w  # the decoder's pitch, not a packed copy
            np.testing.assert_array_equal(y, ref[:h, :w])


def test_plane_view_refuses_a_plane_too_small() -> None:
    class Plane(bytearray):
        line_size = 8

    with pytest.raises(npu_zc.SourceError, match="cannot hold"):
        plane_view(Plane(30), 4, 8)
    assert plane_view(Plane(32), 4, 6).shape == (4, 6)


def test_colour_from_the_stream() -> None:
    assert colour_of(1, 1, 480, "yuv420p") == ("bt709", "limited")
    assert colour_of(5, 2, 1080, "yuv420p") == ("bt601", "full")
    assert colour_of(9, 0, 2160, "yuv420p") == ("bt2020", "limited")
    assert colour_of(2, 0, 1080, "yuv420p") == ("bt709", "limited")  # unspecified: HD is BT.709, as players assume
    assert colour_of(2, 0, 480, "yuvj420p") == ("bt601", "full")


@pytest.mark.parametrize("height", [480, 720, 1080])
@pytest.mark.parametrize("codec, pix_fmt", [("rawvideo", "rgb24"), ("rawvideo", "yuv422p")])
def test_a_converted_frame_is_read_in_the_matrix_it_was_made_in(tmp_path: Path, height: int, codec: str, pix_fmt: str) -> None:
    """A frame FFmpeg converts to NV12 (an RGB-coded video, 4:2:2) is made in the matrix the frame then declares:
    a solid colour arrives as itself, at every height (BT.709 from 720 lines up, BT.601 below)."""
    import av

    from npu_zc import layout
    from npu_zc.sources.video import engine_takes_colour

    if not engine_takes_colour():
        pytest.skip("this layout engine has no colour standards (matrix=, range=)")
    colour, width = (200, 50, 50), height * 4 // 3
    path = tmp_path / f"solid-{height}.nut"
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        rgb = np.empty((height, width, 3), np.uint8)
        rgb[:] = colour
        # YUV made as players assume a stream that does not say: BT.709 from 720 lines up
        made = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        made = made.reformat(format=pix_fmt, dst_colorspace="itu709" if height >= 720 else "itu601")
        for _ in range(2):
            for packet in stream.encode(made):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    frames = list(VideoSource(path).frames())
    assert len(frames) == 2
    for frame in frames:
        assert frame.format == "NV12" and frame.copied
        got = np.zeros((height, width, 3), np.uint8)
        layout.convert(frame.planes, got, "NV12", "RGB", matrix=frame.matrix, range=frame.range)
        assert np.abs(got[height // 2, width // 2].astype(int) - colour).max() <= 3, (frame.matrix, got[height // 2, width // 2])
        assert np.abs(frame.bgr()[height // 2, width // 2, ::-1].astype(int) - colour).max() <= 3


@pytest.mark.parametrize(
    "clip, error, message",
    [
        ("text", npu_zc.SourceError, "is not a video FFmpeg can read"),
        ("truncated", npu_zc.SourceError, "is not a video FFmpeg can read"),
        ("audio", npu_zc.SourceError, "has no video track"),
        ("unknown", npu_zc.SourceError, "cannot decode"),
    ],
)
def test_bad_files_fail_with_one_sentence(clips: dict[str, Path], clip: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        list(VideoSource(clips[clip]).frames())
    assert isinstance(caught.value, ValueError)  # also the built-in a caller expects
    assert "\n" not in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(npu_zc.SourceNotFoundError, match="no such video") as caught:
        VideoSource(tmp_path / "none.mp4")
    assert isinstance(caught.value, FileNotFoundError)


def test_a_url_that_never_answers_times_out() -> None:
    """A server that accepts the connection and never says a word: SourceTimeoutError after the timeout."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        source = VideoSource(f"rtsp://127.0.0.1:{port}/cam", timeout=1.0, reconnect=0)
        started = time.monotonic()
        with pytest.raises(npu_zc.SourceTimeoutError, match="did not answer within 1 s") as caught:
            list(source.frames())
        assert time.monotonic() - started < 10
        assert isinstance(caught.value, TimeoutError) and caught.value.errno == errno.ETIMEDOUT


@pytest.mark.parametrize("timeout", [float("nan"), -1.0, float("-inf"), 0, -(10**400)])
def test_a_timeout_that_is_no_number_of_seconds_is_refused(timeout: float) -> None:
    """The one timeout rule: NaN would compare false with everything and so never time out."""
    for url in ("rtsp://127.0.0.1:9/cam", "http://127.0.0.1:9/clip.mp4"):
        with pytest.raises(npu_zc.InvalidArgumentError, match="timeout"):
            VideoSource(url, timeout=timeout)
    with pytest.raises(TypeError, match="timeout"):
        VideoSource("rtsp://127.0.0.1:9/cam", timeout="5")  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [None, float("inf"), 10**400])
def test_no_limit_is_said_as_the_rule_says(timeout: float | None) -> None:
    assert VideoSource("rtsp://127.0.0.1:9/cam", timeout=timeout).timeout == float("inf")


class _Http:
    """A real HTTP server on 127.0.0.1 in a thread: ``serve(name, data, length=)`` then ``url(name)``."""

    def __init__(self) -> None:
        import http.server

        files: dict[str, tuple[bytes, bool]] = {}
        self.files, self.requests = files, 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                data, length = files[self.path.lstrip("/")]
                self.send_response(200)
                self.send_header("Content-Type", "video/mp4" if length else "video/mp2t")
                if length:  # a file of known size; else a live stream, ended by closing the connection
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def serve(self, name: str, data: bytes, length: bool = True) -> str:
        self.files[name] = (data, length)
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def http_server() -> Any:
    server = _Http()
    yield server
    server.close()


def test_a_clip_served_over_http_ends_once(clips: dict[str, Path], http_server: _Http) -> None:
    """A finite clip over HTTP is a network source that ends: its frames once, no reconnection."""
    url = http_server.serve("pan.mp4", clips["h264"].read_bytes())
    source = VideoSource(url, timeout=5, limit=200)  # the limit: what a source replayed for ever would reach
    assert source.network
    frames = [(frame.index, frame.pts) for frame in source.frames()]
    assert [index for index, _ in frames] == list(range(45))
    times = [t for _, t in frames]
    assert times == sorted(times) and len(set(times)) == 45  # no restart of the clip's times
    assert source.reconnects == 0 and http_server.requests == 1


def test_a_stream_that_keeps_ending_is_given_up(http_server: _Http) -> None:
    """A live stream (no length) whose peer closes it after each second: ``reconnect`` attempts, then the end."""
    import io

    import av
    from streams_helpers import FPS, pan_frames

    data = io.BytesIO()
    with av.open(data, "w", format="mpegts") as out:
        stream = out.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        for rgb in pan_frames(160, 120, 20):
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    source = VideoSource(http_server.serve("live.ts", data.getvalue(), length=False), timeout=5, reconnect=2, limit=1000)
    indices: list[int] = []
    try:
        indices.extend(frame.index for frame in source.frames())
    except npu_zc.SourceError:
        pass  # FFmpeg may call the closed connection an I/O error: a failure as good as an end
    assert source.reconnects == 2 and http_server.requests == 3
    assert 3 <= len(indices) <= 60 and indices == list(range(len(indices)))


def test_realtime_paces_a_file(clips: dict[str, Path]) -> None:
    source = VideoSource(clips["nv12"], realtime=True)
    assert source.live
    started = time.monotonic()
    count = sum(1 for f in source.frames())
    assert count == 12
    assert time.monotonic() - started >= 11 / 30 * 0.9


def test_stop_ends_a_source(clips: dict[str, Path]) -> None:
    stop = threading.Event()
    frames = VideoSource(clips["h264"]).frames(stop)
    next(frames)
    stop.set()
    assert list(frames) == []


def test_open_source_picks_by_kind(clips: dict[str, Path], tmp_path: Path) -> None:
    import cv2

    cv2.imwrite(str(tmp_path / "a.png"), np.zeros((8, 8, 3), np.uint8))
    assert isinstance(open_source(clips["h264"]), VideoSource)
    assert isinstance(open_source(tmp_path), ImageSource)
    assert isinstance(open_source(tmp_path / "a.png"), ImageSource)
    assert open_source("rtsp://127.0.0.1:9/x").live
    frames = list(open_source(tmp_path).frames())
    assert [(f.format, f.width, f.height) for f in frames] == [("BGR", 8, 8)]


# --- hardware decoding: to the boundary ---


def test_hardware_decoding_refused_without_the_build() -> None:
    offered = av.codec.hwaccel.hwdevices_available()
    if "vaapi" in offered:
        pytest.skip("this FFmpeg build has VA-API")
    with pytest.raises(npu_zc.HardwareDecodeError) as caught:
        hardware.hwaccel("vaapi")
    assert str(caught.value) == (
        f"hardware decoding through vaapi is not in this FFmpeg build (PyAV {av.__version__} offers "
        f"{', '.join(offered)}): decode in software (leave hardware unset)"
    )


def test_hardware_decoding_refused_without_a_gpu(clips: dict[str, Path]) -> None:
    if hardware.render_nodes():
        pytest.skip("this machine has a GPU render node")
    kind = next((k for k in ("qsv", "drm", "vaapi") if k in av.codec.hwaccel.hwdevices_available()), None)
    if kind is None:
        pytest.skip("this FFmpeg build offers no hardware decoder npu_zc reads")
    with pytest.raises(npu_zc.HardwareDecodeError) as caught:
        VideoSource(clips["h264"], hardware=kind)
    assert str(caught.value) == (
        f"hardware decoding through {kind} needs a GPU render node (/dev/dri/renderD*) and this machine has none: "
        "decode in software (leave hardware unset)"
    )
    with pytest.raises(npu_zc.InvalidArgumentError, match="unknown hardware decoder"):
        hardware.hwaccel("cuda-ish")


def _descriptor(fd: int, size: int, y_pitch: int, uv_offset: int, uv_pitch: int) -> hardware.AVDRMFrameDescriptor:
    d = hardware.AVDRMFrameDescriptor()
    d.nb_objects = 1
    d.objects[0].fd, d.objects[0].size = fd, size
    d.nb_layers = 1
    d.layers[0].format = hardware.DRM_FORMAT_NV12
    d.layers[0].nb_planes = 2
    d.layers[0].planes[0].object_index, d.layers[0].planes[0].offset, d.layers[0].planes[0].pitch = 0, 0, y_pitch
    d.layers[0].planes[1].object_index, d.layers[0].planes[1].offset, d.layers[0].planes[1].pitch = 0, uv_offset, uv_pitch
    return d


def test_drm_prime_descriptor_imported_in_place() -> None:
    """FFmpeg's AVDRMFrameDescriptor, built as FFmpeg lays it out, over a real fd: the planes are read in place
    from the imported buffer and convert exactly as the same NV12 rows from ordinary memory."""
    w, h, pitch = 64, 32, 128
    rng = np.random.default_rng(1)
    y, uv = rng.integers(0, 256, (h, w), np.uint8), rng.integers(0, 256, (h // 2, w), np.uint8)
    uv_offset = pitch * h + 4096
    buf = npu_zc.alloc(uv_offset + pitch * h // 2, "memfd")
    mem = buf.map("uint8", (buf.size,))
    mem[: pitch * h].reshape(h, pitch)[:, :w] = y
    mem[uv_offset : uv_offset + pitch * h // 2].reshape(h // 2, pitch)[:, :w] = uv
    del mem
    planes = hardware.drm_planes(_descriptor(buf.fd, buf.size, pitch, uv_offset, pitch), w, h)
    try:
        np.testing.assert_array_equal(planes.y, y)
        np.testing.assert_array_equal(planes.uv, uv)
        assert planes.y.strides == (pitch, 1)
        got = npu_zc.convert((planes.y, planes.uv), np.zeros((h, w, 4), np.uint8), "NV12", "RGBx")
        want = npu_zc.convert((y, uv), np.zeros((h, w, 4), np.uint8), "NV12", "RGBx")
        np.testing.assert_array_equal(got, want)
    finally:
        planes.close()
        buf.close()
    small = npu_zc.alloc(8192, "memfd")
    try:
        with pytest.raises(npu_zc.HardwareDecodeError, match="does not fit"):
            hardware.drm_planes(_descriptor(small.fd, small.size, pitch, 1 << 20, pitch), w, h)
    finally:
        small.close()


def test_a_malformed_drm_descriptor_is_refused() -> None:
    d = hardware.AVDRMFrameDescriptor()
    d.nb_objects = 9
    with pytest.raises(npu_zc.HardwareDecodeError, match="malformed"):
        hardware.drm_planes(d, 64, 32)
    assert ctypes.sizeof(hardware.AVDRMFrameDescriptor) == 4 + 4 + 4 * 24 + 4 + 4 + 4 * (8 + 4 * 24)


def test_decoded_frame_release_is_idempotent() -> None:
    calls = []
    f = DecodedFrame(0, "BGR", np.zeros((2, 2, 3), np.uint8), 2, 2, 0, _release=lambda: calls.append(1))
    f.release()
    f.release()
    assert calls == [1]


@pytest.mark.parametrize("key", ["reconnect", "limit", "thread_count"])
def test_a_video_sources_counts_are_whole_numbers(clips: dict[str, Path], key: str) -> None:
    """reconnect, limit and thread_count: NaN, inf, 2.5, True, text or a negative count is one sentence naming it."""
    from npu_zc.sources import VideoSource

    for junk in [float("nan"), float("inf"), 2.5, True, "3", -1, [1]]:
        with pytest.raises(npu_zc.InvalidArgumentError, match=f"^{key} must be"):
            VideoSource(clips["h264"], **{key: junk})
    assert getattr(VideoSource(clips["h264"], **{key: np.int64(3)}), key) == 3


def test_a_network_url_that_cannot_be_parsed_is_refused_at_once() -> None:
    """Not taken, to fail at every open and back off as a camera that is down: one sentence, without the URL (it
    may hold a password). URLs FFmpeg takes that have no host (a UDP listener) are taken."""
    from npu_zc.sources import VideoSource

    for url, why in [("rtsp://u:pw@[::1/cam", "Invalid IPv6 URL"), ("rtsp://h:99999/cam", "Port out of range"),
                     ("http://h:x/cam", "Port could not be cast")]:  # fmt: skip
        with pytest.raises(npu_zc.SourceError, match=f"URL cannot be parsed: {why}") as refused:
            VideoSource(url)
        assert "pw" not in str(refused.value)
    assert VideoSource("udp://@:1234").network and VideoSource("http://[::1]:80/x").network


def test_a_network_source_named_by_its_url_does_not_show_its_password() -> None:
    """The name is in the source's errors, the run's figures and the service's logs: the password is not."""
    source = VideoSource("rtsp://admin:hunter2@127.0.0.1:9/cam", timeout=1, reconnect=0)
    assert source.name == "rtsp://admin:***@127.0.0.1:9/cam" and "hunter2" not in repr(source)
    with pytest.raises(npu_zc.SourceError, match=r"^rtsp://admin:\*\*\*@127\.0\.0\.1:9/cam refused the connection"):
        next(source.frames())
    assert VideoSource("rtsp://127.0.0.1:9/cam", name="door").name == "door"
    for url, shown in [("rtsp://u:p@ss@[::1]:554/s?a=b@c", "rtsp://u:***@[::1]:554/s?a=b@c"),
                       ("http://u:pw@[::1/cam", "http://u:***@[::1/cam"), ("rtsp://u:pw@h:99999", "rtsp://u:***@h:99999"),
                       ("rtsp://u@h/s", "rtsp://u@h/s"), ("rtsp://h/a:b@c", "rtsp://h/a:b@c"), ("clip.mp4", "clip.mp4")]:
        assert redact(url) == shown
