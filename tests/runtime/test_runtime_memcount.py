"""Zero copy, measured from outside: memcpy/memmove bytes per frame under an LD_PRELOAD counter.

The counter (npu_zc/memcount/memcount.c, shipped with the package) is built here and preloaded
into a fresh interpreter running tests/memcount/frame_loop.py, which counts
only while each frame travels from the preprocess output to the postprocess
input. It reports all bytes copied, the bytes of copies that touch the frame's
own input or output buffer, and the largest single copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MEMCOUNT

# Small copies of metadata (a tensor's shape, Python's own bookkeeping) happen on every call;
# a copy this large would be data. The smallest frame tensor here (the logits) is 4000 bytes.
METADATA_BYTES = 1024


def run_loop(memcount: Path, *args: str) -> dict:
    env = dict(os.environ, LD_PRELOAD=str(memcount), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, str(MEMCOUNT / "frame_loop.py"), *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_counter_sees_copies(memcount: Path) -> None:
    """The counter itself: a numpy copy of 1 MiB inside the window is counted."""
    code = (
        "import ctypes, numpy as np\n"
        "lib = ctypes.CDLL(None); lib.memcount_total_bytes.restype = ctypes.c_ulonglong\n"
        "a = np.ones(1 << 20, np.uint8); b = np.empty_like(a)\n"
        "lib.memcount_start(); np.copyto(b, a); lib.memcount_stop()\n"
        "print(lib.memcount_total_bytes())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, LD_PRELOAD=str(memcount)), capture_output=True, text=True, check=True)
    assert int(out.stdout) >= 1 << 20


def test_counter_watches_ranges_until_unwatched(memcount: Path) -> None:
    """The package's Counter: a copy into a watched range counts as watched; after unwatch_all the same copy counts
    in all but not as watched."""
    code = (
        "import json, numpy as np\n"
        "from npu_zc.memcount import preloaded\n"
        "counter = preloaded()\n"
        "a = np.ones(1 << 20, np.uint8); b = np.empty_like(a)\n"
        "counter.watch(b.ctypes.data, b.nbytes)\n"
        "counter.reset(); counter.start(); np.copyto(b, a); counter.stop(); watched = counter.counts()\n"
        "counter.unwatch_all()\n"
        "counter.reset(); counter.start(); np.copyto(b, a); counter.stop(); unwatched = counter.counts()\n"
        "print(json.dumps([watched.bytes, watched.watched_bytes, unwatched.bytes, unwatched.watched_bytes]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, LD_PRELOAD=str(memcount)),
                         capture_output=True, text=True, check=True)  # fmt: skip
    watched_all, watched, unwatched_all, unwatched = json.loads(out.stdout)
    assert watched_all >= 1 << 20 and watched >= 1 << 20
    assert unwatched_all >= 1 << 20 and unwatched == 0


def test_zero_copy_moves_no_frame_bytes(memcount: Path) -> None:
    pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc): the frame loop runs the model")
    zero = run_loop(memcount, "--mode", "zero-copy", "--frames", "20")
    copy = run_loop(memcount, "--mode", "copy", "--frames", "20")
    queued = run_loop(memcount, "--mode", "zero-copy", "--frames", "20", "--queue")
    for name, r in (("zero-copy", zero), ("zero-copy, async queue", queued), ("copy", copy)):
        print(
            f"\n{name:>24}: {r['frame_bytes_per_frame']:>9.0f} frame bytes/frame copied, "
            f"{r['bytes_per_frame']:>9.1f} bytes/frame in all ({r['calls_per_frame']:.1f} calls, "
            f"largest {r['largest_copy']} bytes), infer {r['infer_ms']:.1f} ms, top-5 {r['top5']}"
        )
    for r in (zero, queued):
        assert r["frame_bytes_per_frame"] == 0
        assert r["largest_copy"] < METADATA_BYTES
    # Copy mode copies the planar float frame in and the logits out, every frame.
    assert copy["frame_bytes_per_frame"] >= copy["input_bytes"] + copy["output_bytes"]
    assert copy["largest_copy"] >= copy["input_bytes"]
    assert zero["top5"] == copy["top5"] == queued["top5"]
    assert zero["top5"][0] == 967  # espresso
