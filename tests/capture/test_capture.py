"""Cameras: V4L2 capture into DMA-BUFs against the kernel's vivid driver.

The tests marked ``kernel`` run inside the test VM (scripts/vm-run.sh loads
vivid: one single-planar and one multi-planar instance) and fail there when
vivid is missing; elsewhere they skip. vivid's default picture is the 75%
colour bars: eight bands across the frame, white, yellow, cyan, green,
magenta, red, blue, black, which must come out in RGB at 75% of 255.
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import threading
import time

import cv2
import numpy as np
import pytest

import npu_zc
from conftest import MEMCOUNT, mapping_count, open_fds, vivid_nodes

W, H = 640, 480
BARS_RGB = [
    (191, 191, 191),  # white (75%)
    (191, 191, 0),  # yellow
    (0, 191, 191),  # cyan
    (0, 191, 0),  # green
    (191, 0, 191),  # magenta
    (191, 0, 0),  # red
    (0, 0, 191),  # blue
    (0, 0, 0),  # black
]


def band_colours(rgb: np.ndarray) -> list[tuple[int, ...]]:
    """The colour at the centre of each of the eight bands, on the middle row."""
    h, w, _ = rgb.shape
    return [tuple(int(v) for v in rgb[h // 2, (2 * k + 1) * w // 16]) for k in range(8)]


def assert_colour_bars(frame: npu_zc.Frame) -> None:
    codes = {"YUYV": cv2.COLOR_YUV2RGB_YUYV, "UYVY": cv2.COLOR_YUV2RGB_UYVY, "I420": cv2.COLOR_YUV2RGB_I420, "NV12": cv2.COLOR_YUV2RGB_NV12}
    with frame.buffer.cpu_access("read"):
        rgb = cv2.cvtColor(frame.array(), codes[frame.format])
    got = band_colours(rgb)
    for k, (g, want) in enumerate(zip(got, BARS_RGB)):
        assert max(abs(a - b) for a, b in zip(g, want)) <= 6, f"band {k}: got {g}, want {want} (all: {got})"


@pytest.fixture(autouse=True)
def _collect() -> None:
    # Frames go back to the driver when collected: count fds after a collection.
    gc.collect()


def test_missing_node_is_a_clear_error_and_leaks_nothing() -> None:
    before = open_fds()
    with pytest.raises(npu_zc.CameraNotFoundError, match="/dev/video-npu-zc-none") as e:
        npu_zc.Camera("/dev/video-npu-zc-none")
    assert isinstance(e.value, FileNotFoundError) and e.value.errno == 2
    assert "cameras()" in str(e.value)
    assert open_fds() == before


def test_a_node_that_is_not_v4l2_is_refused() -> None:
    before = open_fds()
    with pytest.raises(npu_zc.NotACameraError, match="/dev/null is not a V4L2 device"):
        npu_zc.Camera("/dev/null")
    assert open_fds() == before


def test_bad_arguments_are_refused_before_opening() -> None:
    with pytest.raises(npu_zc.InvalidArgumentError, match="when_full"):
        npu_zc.Camera("/dev/null", when_full="sometimes")
    with pytest.raises(npu_zc.InvalidArgumentError, match="memory"):
        npu_zc.Camera("/dev/null", memory="userptr")
    with pytest.raises(npu_zc.InvalidArgumentError, match="timeout"):
        npu_zc.Camera("/dev/null", timeout=-1)
    with pytest.raises(npu_zc.CameraFormatError, match="pixel format"):
        npu_zc.Camera("/dev/null", format="TOOLONG")


@pytest.mark.kernel
def test_cameras_lists_vivid_with_formats_and_sizes(vivid: dict[str, str]) -> None:
    found = {c.path: c for c in npu_zc.cameras()}
    assert vivid["single"] in found and vivid["multi"] in found
    assert vivid["output"] not in found  # an output node is not a camera
    single, multi = found[vivid["single"]], found[vivid["multi"]]
    assert single.driver == "vivid" and not single.multiplanar and multi.multiplanar
    formats = {f.fourcc: f for f in single.formats}
    assert {"YUYV", "UYVY", "I420", "NV12"} <= set(formats)
    assert (640, 480) in formats["YUYV"].sizes and (1920, 1080) in formats["YUYV"].sizes
    # What the layout engine reads in place, by its name; OpenCV-only formats have none.
    assert (formats["NV12"].source_format, formats["RGB3"].source_format, formats["YVYU"].source_format) == ("NV12", "RGB", None)
    # vivid has no 10-bit YUV: P010 is tested on a real frame off the kernel (test_capture_p010.py).
    assert "P010" not in formats and "P010" not in {f.fourcc for f in multi.formats}
    assert all("\ufffd" not in f.fourcc for f in single.formats)  # big-endian twins by name ("Y16-BE")
    lines = npu_zc.capture.describe_cameras()
    assert any(line.startswith(vivid["single"]) for line in lines)
    assert any(line.strip().startswith("NV12") and "(layout engine: NV12)" in line for line in lines)


def capture_and_check(cam: npu_zc.Camera, n: int = 3) -> list[int]:
    sequences = []
    for _ in range(n):
        with cam.read() as frame:
            assert frame.width == W and frame.height == H and frame.format == "YUYV"
            assert frame.bytesperline == 2 * W and frame.bytesused == 2 * W * H
            assert frame.buffer.is_dmabuf and frame.timestamp_ns > 0 and not frame.corrupt
            assert_colour_bars(frame)
            sequences.append(frame.sequence)
    return sequences


@pytest.mark.kernel
@pytest.mark.parametrize("api", ["single", "multi"])
@pytest.mark.parametrize("heap", ["system", "udmabuf"])
def test_dmabuf_capture_into_our_heap_buffers(vivid: dict[str, str], api: str, heap: str) -> None:
    fds, maps = open_fds(), mapping_count()
    with npu_zc.Camera(vivid[api], W, H, "YUYV", memory="dmabuf", heap=heap, buffers=3) as cam:
        assert cam.memory == "dmabuf" and cam.multiplanar == (api == "multi")
        assert cam.sizeimage == 2 * W * H
        kinds = {b.kind for b in cam.buffers}
        assert kinds == {"dma-heap:system" if heap == "system" else "udmabuf"}
        assert all(b.size >= cam.sizeimage for b in cam.buffers)
        sequences = capture_and_check(cam, 4)
        assert sequences == sorted(sequences) and len(set(sequences)) == 4
        assert cam.frames == 4 and cam.held == 0
    assert cam.closed and cam.buffers == []
    gc.collect()
    assert open_fds() == fds and mapping_count() == maps


@pytest.mark.kernel
@pytest.mark.parametrize("api", ["single", "multi"])
def test_mmap_capture_exports_the_drivers_buffers(vivid: dict[str, str], api: str) -> None:
    fds, maps = open_fds(), mapping_count()
    with npu_zc.Camera(vivid[api], W, H, "YUYV", memory="mmap", buffers=3) as cam:
        assert cam.memory == "mmap" and cam.heap == "v4l2:vivid"
        assert all(b.is_dmabuf and b.kind == "v4l2:vivid" for b in cam.buffers)
        sequences = capture_and_check(cam, 3)
        assert sequences == sorted(sequences) and len(set(sequences)) == 3
    gc.collect()
    assert open_fds() == fds and mapping_count() == maps


@pytest.mark.kernel
@pytest.mark.parametrize("fmt", ["UYVY", "I420", "NV12"])
def test_other_camera_formats(vivid: dict[str, str], fmt: str) -> None:
    with npu_zc.Camera(vivid["single"], W, H, fmt, buffers=2) as cam:
        assert cam.format == fmt
        assert cam.sizeimage == (2 * W * H if fmt == "UYVY" else W * H * 3 // 2)
        with cam.read() as frame:
            assert frame.array().shape == ((H, W, 2) if fmt == "UYVY" else (H * 3 // 2, W))
            assert_colour_bars(frame)


@pytest.mark.kernel
@pytest.mark.parametrize("fmt", ["YUYV", "UYVY", "I420", "NV12"])
def test_a_frame_of_the_models_size_goes_into_the_input_in_one_pass(vivid: dict[str, str], fmt: str) -> None:
    """No resize needed: the layout engine writes the model input straight from the driver's buffer."""
    from npu_zc.pipeline.camera import CameraPreprocessor
    from npu_zc.pipeline.preprocess import PreprocessSpec

    spec = PreprocessSpec("RGBx", (1, H, W, 4), H, W, fit="stretch")
    code = {"YUYV": cv2.COLOR_YUV2RGB_YUYV, "UYVY": cv2.COLOR_YUV2RGB_UYVY, "I420": cv2.COLOR_YUV2RGB_I420,
            "NV12": cv2.COLOR_YUV2RGB_NV12}[fmt]  # fmt: skip
    dst = np.full(spec.shape, 7, np.uint8)
    with npu_zc.Camera(vivid["single"], W, H, fmt, buffers=2) as cam:
        pre = CameraPreprocessor(spec, W, H, fmt)
        assert pre._one_pass is not None and pre.bgr is None
        with cam.read() as frame:
            pre(frame, dst)
            with frame.buffer.cpu_access("read"):
                want = cv2.cvtColor(frame.array(), code)
        pre.close()
    assert np.array_equal(dst[0, :, :, :3], want) and (dst[0, :, :, 3] == 0).all()
    got = band_colours(dst[0, :, :, :3])
    assert all(max(abs(a - b) for a, b in zip(g, w)) <= 6 for g, w in zip(got, BARS_RGB)), got


@pytest.mark.kernel
def test_auto_memory_imports_from_a_heap_in_the_vm(vivid: dict[str, str]) -> None:
    with npu_zc.Camera(vivid["single"], W, H) as cam:
        assert cam.memory == "dmabuf" and cam.heap == "dma-heap:system"


def inject_qbuf_error(node: str) -> None:
    """Presses vivid's "Inject VIDIOC_QBUF Error": the device's next QBUF fails with EINVAL."""
    with npu_zc.Camera(node, W, H, memory="mmap", buffers=2) as cam:
        cam.set_control("Inject VIDIOC_QBUF Error", 1)


@pytest.mark.kernel
def test_an_import_the_driver_refuses(vivid: dict[str, str]) -> None:
    fds, maps = open_fds(), mapping_count()
    inject_qbuf_error(vivid["single"])
    with pytest.raises(npu_zc.CameraFormatError, match=r"could not import dma-heap:system buffer 0.*memory=\"mmap\""):
        npu_zc.Camera(vivid["single"], W, H, memory="dmabuf", heap="system")
    gc.collect()
    assert open_fds() == fds and mapping_count() == maps
    # memory="auto" takes the driver's own buffers instead.
    inject_qbuf_error(vivid["single"])
    with npu_zc.Camera(vivid["single"], W, H) as cam:
        assert cam.memory == "mmap" and cam.heap == "v4l2:vivid"
        with cam.read() as frame:
            assert_colour_bars(frame)


@pytest.mark.kernel
def test_a_pool_is_imported_and_held_while_the_camera_runs(vivid: dict[str, str]) -> None:
    pool = npu_zc.BufferPool(3, 2 * W * H, "system")
    with npu_zc.Camera(vivid["single"], W, H, pool=pool) as cam:
        assert pool.free_count == 0  # the camera holds every buffer of its pool
        with cam.read() as frame:
            assert any(frame.buffer.fd == b.fd for b in pool.buffers)  # lent by the frame: the pool's buffer
            assert_colour_bars(frame)
    assert pool.free_count == 3
    pool.close()


@pytest.mark.kernel
def test_pool_buffers_smaller_than_sizeimage_are_refused(vivid: dict[str, str]) -> None:
    pool = npu_zc.BufferPool(3, 4096, "system")
    fds, maps = open_fds(), mapping_count()
    with pytest.raises(npu_zc.CameraFormatError, match=r"4096 bytes.*needs 614400 bytes per frame \(sizeimage\)"):
        npu_zc.Camera(vivid["single"], W, H, pool=pool)
    assert pool.free_count == 3  # given back
    assert open_fds() == fds and mapping_count() == maps
    pool.close()


@pytest.mark.kernel
def test_a_node_that_is_not_a_capture_device_is_refused(vivid: dict[str, str]) -> None:
    fds = open_fds()
    with pytest.raises(npu_zc.NotACameraError, match="is not a video capture device"):
        npu_zc.Camera(vivid["output"], W, H)
    assert open_fds() == fds


@pytest.mark.kernel
def test_unsupported_format_and_size_list_what_is_supported(vivid: dict[str, str]) -> None:
    fds, maps = open_fds(), mapping_count()
    with pytest.raises(npu_zc.CameraFormatError, match=r"does not offer pixel format ABCD; it offers: YUYV, UYVY"):
        npu_zc.Camera(vivid["single"], W, H, "ABCD")
    with pytest.raises(npu_zc.CameraFormatError, match=r"cannot capture 641x480 in YUYV; supported sizes: .*640x480"):
        npu_zc.Camera(vivid["single"], 641, 480, "YUYV")
    assert open_fds() == fds and mapping_count() == maps


@pytest.fixture
def drops(vivid: dict[str, str]):  # type: ignore[no-untyped-def]
    """Sets vivid's "Percentage of Dropped Buffers" on a camera; resets it after."""
    cams: list[npu_zc.Camera] = []

    def set_drops(cam: npu_zc.Camera, percent: int) -> None:
        cam.set_control("Percentage of Dropped Buffers", percent)
        cams.append(cam)

    yield set_drops
    for cam in cams:
        if not cam.closed:
            cam.set_control("Percentage of Dropped Buffers", 0)
    with npu_zc.Camera(vivid["single"], W, H, memory="mmap", buffers=2) as c:
        c.set_control("Percentage of Dropped Buffers", 0)


@pytest.mark.kernel
def test_no_frame_within_the_timeout_is_a_timeout_error(vivid: dict[str, str], drops) -> None:  # type: ignore[no-untyped-def]
    fds = open_fds()
    with npu_zc.Camera(vivid["single"], W, H, memory="mmap", buffers=2) as cam:
        drops(cam, 100)  # from now on vivid returns no buffer at all
        # Frames filled before the control took effect (at most one per buffer) still come out.
        for _ in range(3):
            t = time.monotonic()
            try:
                cam.read(timeout=0.3).release()
            except npu_zc.CameraTimeoutError as e:
                assert re.search(r"no frame from /dev/video\d+ \(vivid\) within 0.300 s while 2 buffer\(s\) were queued", str(e))
                assert e.errno == 110 and isinstance(e, TimeoutError)
                break
        else:
            pytest.fail("frames kept coming with vivid dropping 100% of its buffers")
        assert 0.25 < time.monotonic() - t < 5
        cam.set_control("Percentage of Dropped Buffers", 0)
        assert cam.read(timeout=5).sequence >= 0  # streaming goes on
    gc.collect()
    assert open_fds() == fds


@pytest.mark.kernel
def test_dropped_frames_show_as_sequence_gaps(vivid: dict[str, str], drops) -> None:  # type: ignore[no-untyped-def]
    """Half of vivid's buffers dropped: each frame's gap in sequence numbers is its ``dropped_before``, and the
    camera's count is their sum. Frames are read until a gap shows (the buffers filled before the control took
    effect come out without one), at least 8 and at most 200 (no gap in 200 frames at 50%: 2^-190)."""
    with npu_zc.Camera(vivid["single"], W, H, memory="mmap", buffers=3) as cam:
        drops(cam, 50)
        gaps = 0
        last = None
        for read in range(200):
            with cam.read(timeout=10) as frame:
                if last is not None:
                    assert frame.dropped_before == frame.sequence - last - 1
                gaps += frame.dropped_before
                last = frame.sequence
            if gaps and read >= 7:
                break
        assert cam.dropped == gaps > 0


@pytest.mark.kernel
@pytest.mark.parametrize("api", ["single", "multi"])
def test_holding_every_frame_with_wait_is_a_frames_held_error(vivid: dict[str, str], api: str) -> None:
    with npu_zc.Camera(vivid[api], W, H, buffers=2, when_full="wait", timeout=0.3) as cam:
        held = [cam.read(), cam.read()]
        assert cam.held == 2
        with pytest.raises(npu_zc.FramesHeldError, match="holds all 2 frames") as e:
            cam.read()
        assert isinstance(e.value, TimeoutError)
        # A release from another thread lets a waiting read go on.
        threading.Timer(0.1, held[0].release).start()
        frame = cam.read(timeout=5)
        assert frame.sequence > held[1].sequence


@pytest.mark.kernel
def test_holding_every_frame_with_drop_takes_the_oldest_back(vivid: dict[str, str]) -> None:
    with npu_zc.Camera(vivid["single"], W, H, buffers=2, when_full="drop") as cam:
        first, second = cam.read(), cam.read()
        third = cam.read()  # the driver had nothing: the oldest held frame was taken back
        assert not first.held and second.held and third.held
        assert third.index == first.index and cam.reclaimed == 1
        first.release()  # a no-op for a frame taken back
        assert third.held


@pytest.mark.kernel
def test_close_with_frames_held_keeps_them_readable_and_leaks_nothing(vivid: dict[str, str]) -> None:
    fds, maps = open_fds(), mapping_count()
    cam = npu_zc.Camera(vivid["single"], W, H, buffers=3)
    frame = cam.read()
    view = frame.array()
    with pytest.raises(npu_zc.BufferInUseError, match="numpy view"):
        frame.release()  # the driver would overwrite what the view shows
    before = view.copy()
    cam.close()
    assert cam.closed and not frame.held
    assert np.array_equal(view, before)  # still mapped, no longer written
    with pytest.raises(npu_zc.CameraClosedError):
        cam.read()
    assert list(cam) == []  # iterating a closed camera ends
    del view, frame
    gc.collect()
    assert open_fds() == fds and mapping_count() == maps


@pytest.mark.kernel
def test_a_view_keeps_its_frame_from_the_driver(vivid: dict[str, str]) -> None:
    with npu_zc.Camera(vivid["single"], W, H, buffers=2, timeout=0.3) as cam:
        view = cam.read().array()  # the Frame object is gone; its view is not
        assert cam.held == 1
        del view
        gc.collect()
        assert cam.held == 0


@pytest.mark.kernel
def test_the_device_disappearing_mid_stream(vivid: dict[str, str]) -> None:
    fds, maps = open_fds(), mapping_count()
    cam = npu_zc.Camera(vivid["multi"], W, H, buffers=3)
    cam.read().release()
    cam.set_control("Disconnect", 1)  # vivid emulates a USB unplug
    with pytest.raises(npu_zc.CameraDisconnectedError, match="the camera is gone") as e:
        cam.read(timeout=2)
    assert e.value.errno == 19  # ENODEV
    with pytest.raises(npu_zc.CameraDisconnectedError):
        cam.read(timeout=2)  # the failure sticks
    cam.close()
    gc.collect()
    assert open_fds() == fds and mapping_count() == maps
    # vivid reconnects once every file handle is closed.
    with npu_zc.Camera(vivid["multi"], W, H) as again:
        again.read().release()


@pytest.mark.kernel
def test_the_driver_unbound_mid_stream(vivid: dict[str, str]) -> None:
    """vivid's platform device (both instances) unbound through sysfs while streaming, then bound again."""
    from pathlib import Path

    driver = Path("/sys/bus/platform/drivers/vivid")
    if not (driver / "vivid.0").exists() or not os.access(driver / "unbind", os.W_OK):
        pytest.fail("vivid.0 cannot be unbound here (the test VM runs as root)")
    fds, maps = open_fds(), mapping_count()
    cam = npu_zc.Camera(vivid["multi"], W, H, buffers=3)
    held = cam.read()
    view = held.array()
    try:
        (driver / "unbind").write_text("vivid.0")
        with pytest.raises(npu_zc.CameraDisconnectedError, match="the camera is gone"):
            cam.read(timeout=2)
        assert view.shape == (H, W, 2) and int(view[0, 0, 0]) >= 0  # still mapped
    finally:
        if not (driver / "vivid.0").exists():
            (driver / "bind").write_text("vivid.0")
    cam.close()
    del view, held
    gc.collect()
    assert open_fds() == fds and mapping_count() == maps
    with npu_zc.Camera(vivid_nodes()["vivid-001-vid-cap"], W, H) as again:  # new nodes after the rebind
        again.read().release()


@pytest.mark.kernel
def test_a_second_process_gets_a_busy_error(vivid: dict[str, str]) -> None:
    child = (
        "import npu_zc, sys\n"
        "try:\n"
        f"    npu_zc.Camera({vivid['single']!r}, {W}, {H})\n"
        "except npu_zc.CameraBusyError as e:\n"
        "    print('busy', e.errno, e); sys.exit(0)\n"
        "sys.exit(3)\n"
    )
    with npu_zc.Camera(vivid["single"], W, H) as cam:
        cam.read().release()
        r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "busy 16" in r.stdout and "another process" in r.stdout
        cam.read().release()  # ours goes on


# --- the camera as a pipeline source (the model runs on OpenVINO's CPU plugin) ---


@pytest.mark.kernel
@pytest.mark.slow
def test_camera_to_result_copies_no_frame_byte(vivid: dict[str, str], memcount: Path) -> None:
    """vivid -> our heap buffers (or its own, exported) -> model input -> CPU plugin -> output -> top-5:
    0 frame bytes copied from DQBUF to the result (a tiny model: see tests/memcount/tiny_model.py)."""
    pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
    import json
    import os
    from pathlib import Path

    loop = MEMCOUNT / "camera_loop.py"
    env = dict(os.environ, LD_PRELOAD=str(memcount), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, str(loop), "--device", vivid["single"], "--frames", "2", "--memory", "dmabuf,mmap", "--heap", "system"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for memory, r in results.items():
        print(f"\n{memory}: {r['frame_bytes_per_frame']:.0f} frame bytes/frame copied, {r['bytes_per_frame']:.0f} bytes/frame "
              f"in all ({r['calls_per_frame']:.0f} calls, largest {r['largest_copy']}), {r['ms_per_frame']:.0f} ms/frame")
    assert results["dmabuf"]["heap"] == "dma-heap:system" and results["mmap"]["heap"] == "v4l2:vivid"
    for r in results.values():
        # No copy touches the camera's buffers, the preprocess's, or the model's input and output.
        assert r["frame_bytes_per_frame"] == 0
        # What is copied at all is metadata (measured: 1682 bytes a frame in 79 calls, the largest
        # 208): a camera frame is 614400 bytes, a row of it 1280.
        assert r["largest_copy"] < 1024
        assert len(set(r["labels"])) == 1  # the same picture, the same answer


@pytest.mark.kernel
@pytest.mark.slow
def test_a_pipeline_streams_from_a_camera(vivid: dict[str, str]) -> None:
    pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
    from npu_zc.pipeline.camera import run_camera
    from npu_zc.runtime import CompileOptions

    sys.path.insert(0, str(MEMCOUNT))
    from tiny_model import colour_bar_classifier

    options = CompileOptions(inference_precision="f32", num_threads=1)
    model = colour_bar_classifier()  # EfficientNet-Lite0 takes about a minute a frame on the VM's emulated CPU
    with npu_zc.Camera(vivid["multi"], W, H, "YUYV") as cam, npu_zc.Pipeline(model, "CPU", options=options) as p:
        report = run_camera(p, cam, frames=2, progress=False)
    assert report.frames == 2 and report.mode == "zero-copy"
    assert set(report.stages) == {"capture", "preprocess", "infer", "postprocess"}
    assert all(s.count == 2 for s in report.stages.values())
    assert report.source == f"camera {vivid['multi']} (vivid, 640x480 YUYV, dmabuf dma-heap:system)"
    sequences = [r.sequence for r in report.results]
    assert sequences == sorted(sequences) and len(set(sequences)) == 2
    assert len({r.prediction[0].index for r in report.results}) == 1


# --- the command line ---


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    import os

    from pathlib import Path

    script = Path(sys.executable).parent / "npu-zc"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "npu_zc"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_stream_camera_errors_are_one_line() -> None:
    done = cli("stream", "--camera", "/dev/video-npu-zc-none", "--frames", "1")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "npu-zc: error: [Errno 2] cannot open camera /dev/video-npu-zc-none: No such file or directory "
        "(no such device node: npu_zc.cameras() or `npu-zc info` lists the cameras here)"
    ]
    # -i beside --camera is many streams into one model now: tests/streams/test_streams_cli.py.
    done = cli("stream", "-i", "clip.mp4", "--frames", "3")
    assert done.returncode == 1 and "--frames counts camera frames" in done.stderr
    done = cli("stream", "--camera", "/dev/video0", "--size", "640")
    assert done.returncode == 2 and "is not WIDTHxHEIGHT" in done.stderr


@pytest.mark.kernel
@pytest.mark.slow
def test_npu_zc_stream_from_a_camera(vivid: dict[str, str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
    import json

    sys.path.insert(0, str(MEMCOUNT))
    from tiny_model import colour_bar_classifier

    model = tmp_path / "colour-bars.xml"
    ov.save_model(colour_bar_classifier(), model)
    done = cli("stream", "--camera", vivid["single"], "-m", str(model), "-d", "CPU", "--frames", "2", "--heap", "udmabuf", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["frames"] == 2 and report["mode"] == "zero-copy"
    assert report["source"] == f"camera {vivid['single']} (vivid, 640x480 YUYV, dmabuf udmabuf)"
    assert list(report["stages_ms"]) == ["capture", "preprocess", "infer", "postprocess"]
    assert len(report["results"]) == 2


@pytest.mark.kernel
def test_info_lists_the_cameras(vivid: dict[str, str]) -> None:
    from npu_zc.cli import info

    cams = {c["path"]: c for c in info._cameras()}
    assert cams[vivid["single"]]["driver"] == "vivid" and cams[vivid["multi"]]["multiplanar"]
    yuyv = next(f for f in cams[vivid["single"]]["formats"] if f["fourcc"] == "YUYV")
    assert [640, 480] in yuyv["sizes"]
