"""10-bit camera frames (V4L2_PIX_FMT_P010) go into the layout engine in place, as NV12 frames do.

vivid, the kernel's virtual camera in the test VM, has no 10-bit YUV format
(docs/capture.md), so no kernel test captures P010. Here a real P010 frame, a
photo converted by FFmpeg's swscale (PyAV) in the colour standard a camera
states, lies in a real buffer (memfd) at a padded V4L2 pitch with garbage in
the padding, and is shown as ``Frame.array()`` shows a P010 frame: ``(H * 3 /
2, W)`` uint16 at ``bytesperline``, Y rows then UV rows (``Format::view`` in
rust/capture/image.rs, whose Rust tests check that geometry and the frame
checks before it). From there it takes the camera's own code: the pipeline's
camera preprocess (``CameraPreprocessor``) and a camera in ``Streams``
(``CameraSource``).
"""

from __future__ import annotations

import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np
import pytest

import npu_zc
from npu_zc import layout
from npu_zc.pipeline.camera import CameraPreprocessor
from npu_zc.pipeline.preprocess import PreprocessSpec
from npu_zc.sources import CameraSource, ImageSource

av = pytest.importorskip("av", reason="PyAV is not installed")
pytest.importorskip("skimage", reason="scikit-image (the sample photos) is not installed (the [demo] extra)")

W, H = 448, 300
PITCH = 2 * W + 64  # a driver's padded bytesperline, in bytes
ROWS = H * 3 // 2
FFMPEG_SPACES = {"bt601": "ITU601", "bt709": "ITU709", "bt2020": "BT2020"}
FFMPEG_RANGES = {"limited": "MPEG", "full": "JPEG"}
STANDARDS = [("bt709", "limited"), ("bt2020", "full")]


def photo() -> np.ndarray:
    from npu_zc.sources.image import sample_photo

    return np.ascontiguousarray(sample_photo("coffee")[:H, :W])


def p010_frame(bgr: np.ndarray, matrix: str, range_: str) -> Any:
    """The photo as FFmpeg's p010le in that standard (swscale's RGB -> YUV)."""
    frame = av.VideoFrame.from_ndarray(bgr, format="bgr24")
    return frame.reformat(format="p010le", dst_colorspace=FFMPEG_SPACES[matrix], dst_color_range=FFMPEG_RANGES[range_])


def planes(frame: Any) -> tuple[np.ndarray, np.ndarray]:
    """(Y, UV) uint16 rows of a p010le frame, without its line padding."""
    y, uv = (np.frombuffer(p, np.uint8).reshape(-1, p.line_size)[:, : 2 * W].copy().view("<u2") for p in frame.planes)
    return y[:H], uv[: H // 2]


def swscale_rgb(frame: Any, matrix: str, range_: str) -> np.ndarray:
    """FFmpeg's own decoding of the frame (point-sampled chroma, as a 2x2-block decoder reads it)."""
    return frame.reformat(format="rgb24", src_colorspace=FFMPEG_SPACES[matrix], src_color_range=FFMPEG_RANGES[range_],
                          dst_color_range="JPEG", interpolation="POINT").to_ndarray()  # fmt: skip


class DriverFrame:
    """A P010 frame as a driver leaves it: Y rows then UV rows at ``PITCH`` in one buffer; ``array()`` is
    ``npu_zc.Frame.array()``'s view of it (shape, strides and span of ``Format::view``)."""

    def __init__(self, y: np.ndarray, uv: np.ndarray, sequence: int = 0, *, corrupt: bool = False,
                 dropped_before: int = 0, short: bool = False) -> None:
        self.sequence, self.corrupt, self.dropped_before, self.short = sequence, corrupt, dropped_before, short
        self.views: list[weakref.ref[np.ndarray]] = []
        self.buffer = npu_zc.alloc(PITCH * ROWS, "memfd")
        rows = self.buffer.map("uint8", (ROWS, PITCH), writable=True)
        rows[:, 2 * W :] = 0xEE  # the pitch's padding: a reader that strays into it sees garbage
        rows[:H, : 2 * W] = y.view(np.uint8)
        rows[H:, : 2 * W] = uv.view(np.uint8)
        del rows
        self.released = False
        self.on_release: Callable[[], None] | None = None
        """Called once released: the driver has its buffer back."""

    def array(self) -> np.ndarray:
        if self.short:  # what Frame.array() says of a frame whose bytesused is short of its rows
            raise npu_zc.CameraFormatError(f"{W}x{H} P010: the frame holds fewer bytes than its {ROWS} rows need")
        span = PITCH * (ROWS - 1) + 2 * W
        words = self.buffer.map("uint8", writable=False)[:span].view("<u2")
        view = np.lib.stride_tricks.as_strided(words, shape=(ROWS, W), strides=(PITCH, 2), writeable=False)
        self.views.append(weakref.ref(view))
        return view

    def release(self) -> None:
        # As npu_zc.Frame.release: refused while a view of the frame is alive (the driver would overwrite it).
        alive = sum(v() is not None for v in self.views)
        if alive:
            raise npu_zc.BufferInUseError(f"cannot release frame {self.sequence}: {alive} numpy view(s) of it are alive")
        self.released = True
        if self.on_release is not None:
            self.on_release()


class P010Camera:
    """What ``CameraSource`` reads of an open ``npu_zc.Camera`` negotiated at P010, with its colour standard."""

    format, width, height, device = "P010", W, H, "p010-camera"

    def __init__(self, frames: list[DriverFrame], colour: tuple[str, str]) -> None:
        self.frames, self.colour = list(frames), colour

    def read(self) -> DriverFrame:
        if not self.frames:
            raise StopIteration
        return self.frames.pop(0)

    def close(self) -> None:
        pass


class BufferedCamera(P010Camera):
    """A camera with ``buffers`` driver buffers: a frame read takes one until it is released; with every buffer
    held, ``read()`` waits up to ``timeout`` for one and then raises ``FramesHeldError``, as ``npu_zc.Camera`` does
    (``when_full="wait"``)."""

    def __init__(self, buffers: int, timeout: float) -> None:
        super().__init__([], ("bt709", "limited"))
        self.buffers = [object() for _ in range(buffers)]  # what CameraSource counts (npu_zc.Camera: its DmaBufs)
        self.timeout, self.held = timeout, 0
        self.given_back = threading.Condition()

    def send(self, frames: list[DriverFrame]) -> None:
        for frame in frames:
            frame.on_release = self._given_back
        self.frames += frames

    def _given_back(self) -> None:
        with self.given_back:
            self.held -= 1
            self.given_back.notify_all()

    def read(self) -> DriverFrame:
        with self.given_back:
            if not self.given_back.wait_for(lambda: self.held < len(self.buffers), self.timeout):
                raise npu_zc.FramesHeldError(f"all {len(self.buffers)} buffers held for {self.timeout} s")
            frame = super().read()
            self.held += 1
            return frame


def test_p010_is_a_camera_format_the_engine_reads() -> None:
    assert "P010" in layout.SOURCE_FORMATS
    with pytest.raises(npu_zc.CameraNotFoundError):  # the name parses: the device is what is missing
        npu_zc.Camera("/dev/video-npu-zc-missing", W, H, "P010")


@pytest.mark.parametrize("matrix,range_", STANDARDS)
def test_a_p010_frame_becomes_the_model_input_in_one_pass(matrix: str, range_: str) -> None:
    """No resize: the engine decodes the driver's rows in place, skipping the pitch's padding, in the camera's
    colour standard: exactly its P010 decoder on the packed samples, within swscale's 4 levels (3 full range)
    of FFmpeg's own decoding, and near the photo. Read as BT.601 limited (no colour given) it is not."""
    bgr = photo()
    frame_av = p010_frame(bgr, matrix, range_)
    y, uv = planes(frame_av)
    frame = DriverFrame(y, uv)
    spec = PreprocessSpec("RGBx", (1, H, W, 4), H, W, fit="stretch")
    pre = CameraPreprocessor(spec, W, H, "P010", colour=(matrix, range_))
    assert pre._one_pass is not None and pre.bgr is None  # the engine reads it: no OpenCV stage
    dst = np.full(spec.shape, 7, np.uint8)
    pre(frame, dst)
    pre.close()
    got = dst[0, :, :, :3]
    assert (dst[0, :, :, 3] == 0).all()
    want = layout.convert(np.concatenate([y, uv]), np.zeros((H, W, 3), np.uint8), "P010", "RGB", matrix=matrix, range=range_)
    np.testing.assert_array_equal(got, want)
    theirs = swscale_rgb(frame_av, matrix, range_).astype(int)
    assert np.abs(got.astype(int) - theirs).max() <= (4 if range_ == "limited" else 3)
    assert np.abs(got.astype(int) - bgr[..., ::-1]).mean() < 2.5

    wrong = CameraPreprocessor(spec, W, H, "P010")  # no colour: BT.601 limited
    wrong(frame, dst)
    wrong.close()
    assert np.abs(dst[0, :, :, :3].astype(int) - theirs).max() > 8


@pytest.mark.parametrize("fit", ["letterbox", "crop"])
def test_a_p010_frame_resized_into_the_model_input(fit: str) -> None:
    """Resizing (letterbox, centre crop): the camera path equals ``convert`` of the packed samples with the
    same geometry, transform included; the crop is rounded to the 4:2:0 chroma grid."""
    matrix, range_ = "bt709", "limited"
    y, uv = planes(p010_frame(photo(), matrix, range_))
    frame = DriverFrame(y, uv)
    spec = PreprocessSpec("RGBx", (1, 224, 224, 4), 224, 224, fit=fit, interpolation="linear")
    pre = CameraPreprocessor(spec, W, H, "P010", colour=(matrix, range_))
    dst = np.zeros(spec.shape, np.uint8)
    transform = pre(frame, dst)
    pre.close()
    rows, cols = spec.region(H, W)
    x, y0 = -(-cols.start // 2) * 2, -(-rows.start // 2) * 2
    roi = (x, y0, (cols.stop - x) // 2 * 2, (rows.stop - y0) // 2 * 2)
    want = np.zeros((224, 224, 4), np.uint8)
    want_t = layout.convert(np.concatenate([y, uv]), want, "P010", "RGBx", roi=roi, matrix=matrix, range=range_,
                            fit="letterbox" if fit == "letterbox" else "stretch", fill=spec.fill, interpolation="bilinear")  # fmt: skip
    np.testing.assert_array_equal(dst[0], want)
    assert transform.scale == pytest.approx(want_t.scale) and transform.offset == pytest.approx(want_t.offset)


def test_a_p010_camera_source_hands_its_frames_over_in_place() -> None:
    """``CameraSource``: format P010, the driver's view itself (no copy), the camera's colours; ``bgr()``
    (drawing, saving) decodes with the engine in those colours; each frame goes back to the driver."""
    matrix, range_ = "bt2020", "full"
    y, uv = planes(p010_frame(photo(), matrix, range_))
    frames = [DriverFrame(y, uv, sequence=s) for s in (3, 4)]
    source = CameraSource(P010Camera(frames, (matrix, range_)), name="cam10")
    seen = []
    for decoded in source.frames():
        assert (decoded.format, decoded.width, decoded.height, decoded.copied) == ("P010", W, H, False)
        assert (decoded.matrix, decoded.range) == (matrix, range_)
        assert decoded.buffer is frames[len(seen)].buffer
        assert decoded.planes.dtype == np.uint16 and decoded.planes.shape == (ROWS, W) and decoded.planes.strides == (PITCH, 2)
        want = layout.convert(np.concatenate([y, uv]), np.zeros((H, W, 3), np.uint8), "P010", "BGR", matrix=matrix, range=range_)
        np.testing.assert_array_equal(decoded.bgr(), want)
        seen.append(decoded.index)
        decoded.release()
    assert seen == [3, 4] and all(f.released for f in frames)


def test_a_p010_camera_in_streams_sees_the_photo(picture_pipeline: Any, tmp_path: Path) -> None:
    """A P010 camera (BT.2020 full range) beside the same photo as a file, one model whose output is the
    picture (224x224 averaged over 16x16 cells): the camera's pictures are the photo's (swscale's
    encoding aside: within half a level on average, 2 at most)."""
    from streams_helpers import run_streams

    matrix, range_ = "bt2020", "full"
    bgr = photo()
    y, uv = planes(p010_frame(bgr, matrix, range_))
    camera = CameraSource(P010Camera([DriverFrame(y, uv, sequence=s) for s in range(2)], (matrix, range_)), name="cam10")
    cv2.imwrite(str(tmp_path / "photo.png"), bgr)
    report, results = run_streams([camera, ImageSource(tmp_path / "photo.png")], picture_pipeline)
    assert not report.errors, report.errors
    cam = [r.prediction[0] for r in results if r.stream == 0]
    (still,) = [r.prediction[0] for r in results if r.stream == 1]
    stats = report.streams[0]
    assert stats.live and len(cam) == stats.frames >= 1 and stats.frames + stats.dropped == 2  # a live source may drop
    for picture in cam:  # read as BT.601 limited, the pixels would be ~8 levels off on average
        off = np.abs(picture - still)
        assert off.mean() < 0.5 and off.max() < 2.0, (off.mean(), off.max())


def test_a_camera_source_skips_frames_it_cannot_read_and_counts_them() -> None:
    """A frame the driver marks corrupt (V4L2_BUF_FLAG_ERROR) is never read and a frame too short for its format
    is refused by ``Frame.array()``: both go back to the driver and are counted, with the frames the driver itself
    dropped, as lost before the next frame that is read; the stream goes on."""
    y, uv = planes(p010_frame(photo(), "bt709", "limited"))
    frames = [DriverFrame(y, uv, sequence=0), DriverFrame(y, uv, sequence=1, corrupt=True),
              DriverFrame(y, uv, sequence=2, short=True), DriverFrame(y, uv, sequence=5, dropped_before=2),
              DriverFrame(y, uv, sequence=6)]  # fmt: skip
    source = CameraSource(P010Camera(frames, ("bt709", "limited")), name="glitchy")
    seen = []
    for decoded in source.frames():
        seen.append((decoded.index, decoded.lost_before))
        decoded.release()
    assert seen == [(0, 0), (5, 4), (6, 0)]  # 1 corrupt + 1 short + 2 the driver dropped
    assert all(f.released for f in frames)


def test_a_camera_that_only_sends_short_frames_is_a_stream_error() -> None:
    """A glitch is skipped; a driver whose frames are always short for their format fails the stream, in one
    sentence, after ``SHORT_FRAMES_IN_A_ROW`` of them (each given back)."""
    from npu_zc.sources.others import SHORT_FRAMES_IN_A_ROW

    y, uv = planes(p010_frame(photo(), "bt709", "limited"))
    frames = [DriverFrame(y, uv, sequence=s, short=True) for s in range(SHORT_FRAMES_IN_A_ROW + 5)]
    source = CameraSource(P010Camera(frames, ("bt709", "limited")), name="short")
    with pytest.raises(npu_zc.SourceError, match=f"short: {SHORT_FRAMES_IN_A_ROW} frames in a row too short"):
        list(source.frames())
    assert all(f.released for f in frames[:SHORT_FRAMES_IN_A_ROW]) and not frames[SHORT_FRAMES_IN_A_ROW].released


def test_frames_a_camera_lost_are_the_streams_drops(picture_pipeline: Any) -> None:
    """In ``Streams``, what the camera lost before a frame (a corrupt frame, the driver's drops) counts among the
    stream's drops: every frame the driver sent is either a result or a drop."""
    from streams_helpers import run_streams

    y, uv = planes(p010_frame(photo(), "bt709", "limited"))
    frames = [DriverFrame(y, uv, sequence=0), DriverFrame(y, uv, sequence=1, corrupt=True),
              DriverFrame(y, uv, sequence=4, dropped_before=2)]  # fmt: skip
    report, results = run_streams([CameraSource(P010Camera(frames, ("bt709", "limited")), name="cam")], picture_pipeline)
    assert not report.errors, report.errors
    stats = report.streams[0]
    assert len(results) == stats.frames and stats.frames + stats.dropped == 5  # sequences 0-4
    assert stats.dropped >= 3  # the corrupt frame and the driver's two, whatever the model's pace dropped besides


def test_a_stalled_model_holds_frames_not_every_buffer_of_a_camera(picture_pipeline: Any) -> None:
    """A camera of two buffers in ``Streams`` (whose live lanes keep two frames): while the output holds the first
    result the model's sets fill and no frame is converted, yet the camera is read through (its lane keeps one
    frame, leaving its driver the other buffer), every frame a result or a drop; with both buffers waiting in the
    lane the camera would have ended the stream (``FramesHeldError``)."""
    camera = BufferedCamera(buffers=2, timeout=5.0)
    streams = npu_zc.Streams([CameraSource(camera, name="cam")], picture_pipeline)
    # More frames than the run's sets of buffers can take while the first result is held: the lane must fill.
    count = streams.requests + streams.feeders + streams.deliverers + 20
    y, uv = planes(p010_frame(photo(), "bt709", "limited"))
    camera.send([DriverFrame(y, uv, sequence=s) for s in range(count)])
    results: list[Any] = []

    def output(result: Any) -> None:
        if not results:  # held until the camera has sent every frame (or long past its timeout)
            deadline = time.monotonic() + 6 * camera.timeout
            while camera.frames and time.monotonic() < deadline:
                time.sleep(0.01)
        results.append(result)

    report = streams.run(output)
    streams.close()
    stats = report.streams[0]
    assert (stats.state, stats.error) == ("done", None)
    assert not camera.frames and camera.held == 0
    assert stats.frames == len(results) and stats.frames + stats.dropped == count and stats.dropped > 0
