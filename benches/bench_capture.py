"""Camera to model input: npu_zc against what a user writes today (a benchmark, not a test).

Per frame, from the frame's dequeue (DQBUF) to the model input written:

* ``opencv``: ``cv2.VideoCapture(dev, cv2.CAP_V4L2)`` (which converts YUYV to
  BGR into its own frame), ``cvtColor`` BGR->RGB, ``resize`` to 224x224 and the
  numpy normalisation ``(x - mean) / std`` into planar float (NCHW), the
  composition found in most camera + model examples;
* ``npu_zc RGBx``: ``npu_zc.Camera`` (the driver writes our DMA-BUFs) and the
  camera preprocess into the packed RGBx input a zero-copy model reads
  (the model normalises);
* ``npu_zc RGBP_FLOAT``: the same writing normalised planar float, the input
  the OpenCV composition writes.

Each is timed in two parts: waiting for and dequeuing the frame (``grab()`` /
``read()``) and the rest (retrieve or convert, resize, normalise). The
memcpy/memmove bytes per frame over both parts are counted with the LD_PRELOAD
counter of npu_zc/memcount (the script builds it and runs itself under it).

Run it inside the test VM (the host has no camera) and compare ratios only:
the VM's CPU is emulated.

    scripts/vm-run.sh bash -c '.venv/bin/python benches/bench_capture.py --frames 30'

On a machine without a camera, ``--synthetic 1920x1080`` times the conversion
part alone from a YUYV frame in memory (a real CPU, no VideoCapture).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import results
from npu_zc import memcount

MEAN = np.array([123.675, 116.28, 103.53], np.float32)
STD = np.array([58.395, 57.12, 57.375], np.float32)
SIZE = 224


def find_camera() -> str:
    """vivid's single-planar capture node, else /dev/video0."""
    for name_file in sorted(Path("/sys/class/video4linux").glob("*/name")):
        if name_file.read_text().strip() == "vivid-000-vid-cap":
            return f"/dev/{name_file.parent.name}"
    return "/dev/video0"


def measure(label: str, frames: int, grab: Callable[[], Any], rest: Callable[[Any], None],
            copies: memcount.Counter) -> dict[str, Any]:  # fmt: skip
    clock = time.perf_counter_ns
    waits: list[int] = []
    works: list[int] = []
    for i in range(frames + 3):  # 3 warm-up frames
        if i == 3:
            copies.reset()
            waits.clear()
            works.clear()
        copies.start()
        t0 = clock()
        item = grab()
        t1 = clock()
        rest(item)
        t2 = clock()
        copies.stop()
        del item
        waits.append(t1 - t0)
        works.append(t2 - t1)
    counts = copies.counts()
    return {
        "path": label,
        "dequeue_ms": float(np.median(waits)) / 1e6,
        "to_input_ms": float(np.median(works)) / 1e6,
        "total_ms": float(np.median(np.add(waits, works))) / 1e6,
        "copied_bytes_per_frame": counts.bytes / frames,
        "largest_copy": counts.largest,
    }


def bench(device: str, frames: int) -> list[dict[str, Any]]:
    import cv2

    import npu_zc
    from npu_zc.pipeline.camera import CameraPreprocessor
    from npu_zc.pipeline.preprocess import PreprocessSpec

    copies = memcount.preloaded()
    if copies is None:
        raise SystemExit("bench_capture: the memcpy counter is not preloaded (LD_PRELOAD)")
    results = []

    # What a user writes today.
    cap = cv2.VideoCapture(device, cv2.CAP_V4L2)
    cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*"YUYV"))
    cap.set(cv2.CAP_PROP_FRAME_WIDTH, 640)
    cap.set(cv2.CAP_PROP_FRAME_HEIGHT, 480)
    if not cap.isOpened():
        sys.exit(f"OpenCV cannot open {device}")

    def opencv_grab() -> bool:
        return bool(cap.grab())

    def opencv_rest(_: Any) -> None:
        ok, bgr = cap.retrieve()
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        small = cv2.resize(rgb, (SIZE, SIZE))
        x = ((small.astype(np.float32) - MEAN) / STD).transpose(2, 0, 1)[None]
        opencv_rest.last = np.ascontiguousarray(x)  # type: ignore[attr-defined]

    results.append(measure("opencv: VideoCapture + cvtColor + resize + numpy", frames, opencv_grab, opencv_rest,
                           copies))
    cap.release()

    # npu_zc: the driver writes our DMA-BUFs; the preprocess reads them in place.
    for fmt, mean, std in (("RGBx", None, None), ("RGBP_FLOAT", tuple(MEAN), tuple(STD))):
        shape = (1, SIZE, SIZE, 4) if fmt == "RGBx" else (1, 3, SIZE, SIZE)
        spec = PreprocessSpec(fmt, shape, SIZE, SIZE, mean=mean, scale=std, fit="stretch")
        dst_buf = npu_zc.alloc(spec.nbytes)
        dst = dst_buf.map(spec.dtype, spec.shape)
        with npu_zc.Camera(device, 640, 480, "YUYV", buffers=4) as cam:
            pre = CameraPreprocessor(spec, 640, 480, "YUYV", heap="auto")

            def ours_rest(frame: Any) -> None:
                with frame:
                    pre(frame, dst)

            label = f"npu_zc {fmt} ({cam.memory} {cam.heap})"
            results.append(measure(label, frames, lambda: cam.read(), ours_rest, copies))
            pre.close()
        del dst
        dst_buf.close()
    return results


def synthetic(frames: int, width: int, height: int) -> list[dict[str, Any]]:
    """No camera (the host): the same work from a YUYV frame already in memory, so
    that the figures come from a real CPU. OpenCV's share of ``VideoCapture.read``
    is its YUYV -> BGR conversion (plus a copy of the frame, left out here)."""
    import cv2

    from npu_zc import layout

    cv2.setNumThreads(1)
    frame = np.random.default_rng(0).integers(0, 256, (height, width, 2), dtype=np.uint8)
    bgr = np.empty((height, width, 3), np.uint8)
    clock = time.perf_counter_ns

    def best(fn: Callable[[], object]) -> float:
        samples = []
        for _ in range(frames):
            t = clock()
            fn()
            samples.append(clock() - t)
        return float(np.median(samples)) / 1e6

    def opencv() -> None:
        cv2.cvtColor(frame, cv2.COLOR_YUV2BGR_YUYV, dst=bgr)
        small = cv2.resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), (SIZE, SIZE))
        np.ascontiguousarray(((small.astype(np.float32) - MEAN) / STD).transpose(2, 0, 1)[None])

    results = [{"path": "opencv: cvtColor(YUYV) + cvtColor + resize + numpy", "to_input_ms": best(opencv)}]
    for fmt, norm in (("RGBx", {}), ("RGBP_FLOAT", dict(mean=tuple(MEAN), scale=tuple(STD)))):
        dst = np.empty((SIZE, SIZE, 4) if fmt == "RGBx" else (3, SIZE, SIZE), np.uint8 if fmt == "RGBx" else np.float32)
        conv = layout.Converter("YUYV", fmt, SIZE, SIZE, src_size=(width, height), threads=1, **norm)  # type: ignore[arg-type]
        results.append({"path": f"npu_zc {fmt} (one pass: {conv.kernel})", "to_input_ms": best(lambda: conv(frame, dst))})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", help="capture node (default: vivid's, else /dev/video0)")
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--synthetic", metavar="WxH", help="no camera: time the conversion of a WxH YUYV frame in memory")
    args = parser.parse_args()
    if args.synthetic:
        width, height = (int(v) for v in args.synthetic.lower().split("x"))
        rows = synthetic(args.frames, width, height)
        base = rows[0]["to_input_ms"]
        print(f"{width}x{height} YUYV in memory -> 224x224 model input, median of {args.frames} (ms/frame)")
        for r in rows:
            print(f"{r['path']:<80}{r['to_input_ms']:9.3f}{base / r['to_input_ms']:9.2f}x")
        saved = results.save("bench_capture", [{
            "title": f"A {width}x{height} YUYV camera frame in memory to the 224x224 model input, one thread",
            "note": f"median of {args.frames}; OpenCV (1 thread): cvtColor(YUYV) + cvtColor + resize + numpy "
                    "normalisation into planar float, against npu_zc's one pass",
            "columns": ["path", "ms / frame", "x OpenCV"],
            "rows": [[r["path"], round(r["to_input_ms"], 3), f"{base / r['to_input_ms']:.2f}x"] for r in rows],
        }], title="Camera frames to the model input")
        print(f"results: {saved}")
        return
    if "memcount" not in os.environ.get("LD_PRELOAD", ""):
        try:
            lib = memcount.build()
        except memcount.CounterUnavailableError as exc:
            raise SystemExit(f"bench_capture: {exc}") from None
        env = dict(os.environ, LD_PRELOAD=str(lib), OMP_NUM_THREADS="1")
        sys.exit(subprocess.run([sys.executable, *sys.argv], env=env).returncode)
    device = args.device or find_camera()
    measured = bench(device, args.frames)
    if args.json:
        print(json.dumps({"device": device, "frames": args.frames, "results": measured}))
        return
    base = measured[0]["total_ms"]
    print(f"{device}, 640x480 YUYV -> 224x224 model input, median of {args.frames} frames (ms/frame)")
    print(f"{'path':<52}{'dequeue':>9}{'to input':>10}{'total':>9}{'vs opencv':>11}{'copied B/frame':>16}")
    for r in measured:
        print(
            f"{r['path']:<52}{r['dequeue_ms']:9.2f}{r['to_input_ms']:10.2f}{r['total_ms']:9.2f}"
            f"{base / r['total_ms']:10.2f}x{r['copied_bytes_per_frame']:16.0f}"
        )
    saved = results.save("bench_capture_camera", [{
        "title": f"{device}, 640x480 YUYV to the 224x224 model input",
        "note": f"median of {args.frames} frames; bytes copied per frame counted by the LD_PRELOAD memcpy counter",
        "columns": ["path", "dequeue ms", "to input ms", "total ms", "x OpenCV", "bytes copied / frame"],
        "rows": [[r["path"], round(r["dequeue_ms"], 2), round(r["to_input_ms"], 2), round(r["total_ms"], 2),
                  f"{base / r['total_ms']:.2f}x", round(r["copied_bytes_per_frame"])] for r in measured],
    }], title="Camera capture to the model input")
    print(f"results: {saved}")


if __name__ == "__main__":
    main()
