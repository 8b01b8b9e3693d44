"""Zero copy from the decoder's buffer to the result, measured from outside with the memcpy counter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from npu_zc.sources.video import engine_reads_i420_planes

HERE = Path(__file__).parent


def run_loop(memcount: Path, clip: Path, *extra: str) -> dict:
    env = dict(os.environ, LD_PRELOAD=str(memcount), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, str(HERE / "streams_memcount_loop.py"), str(clip), "--frames", "8", *extra],
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_no_frame_copied(out: dict) -> None:
    assert out["frames"] == 8
    for frame in out["per_frame"]:
        assert not frame["copied"]
        assert frame["watched"] == 0, frame  # no memcpy/memmove touched the decoded planes
        assert frame["largest"] < frame["frame_bytes"] // 4, frame  # nor any other copy of frame size


def test_nv12_decoded_frames_are_never_copied(memcount: Path, clips: dict[str, Path]) -> None:
    pytest.importorskip("openvino")
    check_no_frame_copied(run_loop(memcount, clips["nv12"]))


def test_h264_decoded_frames_are_never_copied(memcount: Path, clips: dict[str, Path]) -> None:
    pytest.importorskip("openvino")
    if not engine_reads_i420_planes():
        pytest.skip("this layout engine reads I420 only tightly packed: yuv420p frames go through FFmpeg's NV12 (a copy)")
    check_no_frame_copied(run_loop(memcount, clips["h264"]))


def test_the_counter_sees_a_copy_of_the_planes(memcount: Path, clips: dict[str, Path]) -> None:
    """The control: the same run with the planes copied inside the window counts every byte of them."""
    pytest.importorskip("openvino")
    out = run_loop(memcount, clips["nv12"], "--control")
    for frame in out["per_frame"]:
        assert frame["watched"] >= frame["frame_bytes"], frame


def test_no_frame_is_copied_in_a_decoding_worker(memcount: Path, tmp_path: Path) -> None:
    """Across processes: a 720p H.264 clip decoded and converted in a worker process (Streams(workers=1)), both
    processes under the counter. From ready to bye the worker copied, in all its copies together, less than a quarter
    of a decoded frame per frame (the compressed packets and the messages), and never a quarter of a frame at once:
    the decoded planes went into the shared input in one pass. The counter was live there (it counted calls)."""
    pytest.importorskip("openvino")
    from streams_helpers import make_clip

    clip = make_clip(tmp_path / "hd.mp4", "libx264", 1280, 720, 12)
    env = dict(os.environ, LD_PRELOAD=str(memcount), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, str(HERE / "streams_memcount_workers.py"), str(clip)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["frames"] == 12 and out["copied"] == 0 and out["error"] is None, out
    frame_bytes = 1280 * 720 * 3 // 2
    worker = out["worker"]
    assert worker is not None and worker["calls"] > 0, out  # the counter ran in the worker
    assert worker["largest"] < frame_bytes // 4, out
    assert worker["bytes"] < out["frames"] * frame_bytes // 4, out
