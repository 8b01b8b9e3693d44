"""Camera frames through the model under LD_PRELOAD=libmemcount.so (run by tests/capture/test_capture.py).

For each frame, every memcpy/memmove is counted from the moment the camera is
asked for the frame (DQBUF) until the postprocess has the result: the frame's
conversion from the driver-written buffer into the model input, the
inference, and the postprocess. Copies that touch the camera's buffers, the
preprocess's buffers or the model's input and output buffers are "frame
bytes"; zero copy means 0 of them. Prints one JSON object.

    python camera_loop.py --device /dev/video0 [--frames N] [--memory dmabuf,mmap] [--heap system] [--model tiny]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from frame_loop import load_counter
from tiny_model import colour_bar_classifier

import npu_zc
from npu_zc.pipeline.camera import CameraPreprocessor
from npu_zc.runtime import CompileOptions


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", required=True)
    parser.add_argument("--frames", type=int, default=3)
    parser.add_argument("--memory", default="dmabuf")
    parser.add_argument("--heap", default="system")
    parser.add_argument("--format", default="YUYV")
    parser.add_argument("--model", default="tiny", help="tiny (tiny_model.py, for emulated CPUs) or a model file/name")
    args = parser.parse_args()
    counter = load_counter()

    # One model for every memory mode: compiling is the slow part on an emulated CPU.
    model = colour_bar_classifier() if args.model == "tiny" else args.model
    pipeline = npu_zc.Pipeline(model, "CPU", options=CompileOptions(inference_precision="f32", num_threads=1), heap=args.heap)
    out = {}
    for memory in args.memory.split(","):
        out[memory] = measure(counter, pipeline, args.device, args.format, memory, args.heap, args.frames)
    pipeline.close()
    print(json.dumps(out))


def measure(counter: Any, pipeline: npu_zc.Pipeline, device: str, fmt: str, memory: str, heap: str, frames: int) -> dict:
    camera = npu_zc.Camera(device, 640, 480, fmt, memory=memory, heap=heap, timeout=30)
    preprocess = CameraPreprocessor(pipeline.spec, camera.width, camera.height, camera.format, heap=heap)
    watched = [v for v in (preprocess.bgr,) if v is not None]  # None: one pass, no BGR image
    watched += [pipeline.input, *pipeline.outputs]
    counter.memcount_unwatch_all()
    for view in watched:
        counter.memcount_watch(view.ctypes.data, view.nbytes)
    for buf in camera.buffers:
        # The read-only mapping frame.array() uses: made once per buffer and kept,
        # so its address holds after this view is gone (a live view would keep frames held).
        view = buf.map(writable=False)
        counter.memcount_watch(view.ctypes.data, view.nbytes)
        del view
    ms: list[float] = []
    labels: list[int] = []
    for i in range(frames + 1):  # 1 warm-up frame, then the steady state
        if i == 1:
            counter.memcount_reset()
            ms.clear()
        started = time.perf_counter()
        counter.memcount_start()
        frame = camera.read()
        prediction, *_ = pipeline.step_with(
            lambda dst: preprocess(frame, dst), frame_size=(camera.width, camera.height), release=frame.release
        )
        counter.memcount_stop()
        ms.append((time.perf_counter() - started) * 1000)
        labels.append(prediction[0].index)
        del frame
    result = {
        "frames": frames,
        "memory": camera.memory,
        "heap": camera.heap,
        "camera_buffer_bytes": camera.sizeimage,
        "bytes_per_frame": counter.memcount_total_bytes() / frames,
        "calls_per_frame": counter.memcount_total_calls() / frames,
        "frame_bytes_per_frame": counter.memcount_watched_bytes() / frames,
        "largest_copy": counter.memcount_largest(),
        "ms_per_frame": sorted(ms)[len(ms) // 2],
        "labels": labels,
    }
    del watched
    preprocess.close()
    camera.close()
    return result


if __name__ == "__main__":
    main()
