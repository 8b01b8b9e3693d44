"""A steady-state frame loop, run under LD_PRELOAD=libmemcount.so by the tests.

For each frame: preprocess the photo into the input buffer (counter off), then
count every memcpy/memmove while the frame goes from preprocess output to
postprocess input (the inference, and in copy mode the copies in and out),
then postprocess (top-5) from the output buffer (counter off). Prints one JSON
object with the bytes per frame.

    python frame_loop.py --mode zero-copy|copy [--frames N] [--queue]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from typing import Callable

import cv2
import numpy as np
import skimage.data

import npu_zc
from npu_zc.runtime import CompileOptions, compile_model


def load_counter() -> ctypes.CDLL:
    lib = ctypes.CDLL(None)  # the preloaded library's symbols are global
    try:
        loaded = lib.memcount_loaded
    except AttributeError:
        sys.exit("libmemcount.so is not preloaded (run with LD_PRELOAD)")
    if not loaded():
        sys.exit("libmemcount.so could not resolve the real memcpy")
    for name in ("memcount_total_bytes", "memcount_total_calls", "memcount_watched_bytes", "memcount_watched_calls", "memcount_largest"):
        getattr(lib, name).restype = ctypes.c_ulonglong
    lib.memcount_watch.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    return lib


def preprocess(photo: np.ndarray, dst: np.ndarray, fmt: str, mean: tuple[float, ...], scale: tuple[float, ...]) -> None:
    """Into ``dst`` in place: RGBx u8 (zero copy) or normalised planar float (copy mode)."""
    size = dst.shape[1] if fmt == "RGBx" else dst.shape[2]
    rgb = cv2.resize(photo, (size, size), interpolation=cv2.INTER_AREA)
    if fmt == "RGBx":
        dst[0, :, :, :3] = rgb
        dst[0, :, :, 3] = 0
    else:
        planar = rgb.transpose(2, 0, 1).astype(np.float32)
        dst[0] = (planar - np.asarray(mean, np.float32)[:, None, None]) / np.asarray(scale, np.float32)[:, None, None]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["zero-copy", "copy"], required=True)
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--queue", action="store_true", help="run through the async queue (zero-copy only)")
    args = parser.parse_args()
    counter = load_counter()

    session = compile_model(
        "efficientnet-lite0", "CPU", mode=args.mode, options=CompileOptions(inference_precision="f32", num_threads=1)
    )
    norm = session.normalisation
    assert norm.mean is not None and norm.scale is not None  # recorded in the built-in model
    photo = skimage.data.coffee()
    in_spec, out_spec = session.inputs[0], session.outputs[0]
    top5: list[int] = []
    infer_ms: list[float] = []

    def window(run: Callable[[], object]) -> None:
        counter.memcount_start()
        t = time.perf_counter()
        run()
        infer_ms.append((time.perf_counter() - t) * 1000)
        counter.memcount_stop()

    if args.queue:
        queue = session.queue(depth=2, heap="memfd")
        for pool_buffers in (queue._in_pools, queue._out_pools):
            for pool in pool_buffers:
                for buf in pool.buffers:
                    view = buf.map()
                    counter.memcount_watch(view.ctypes.data, view.nbytes)
                    del view
        for i in range(args.frames + 2):
            frame = queue.acquire()
            preprocess(photo, frame.inputs[0], session.format, norm.mean, norm.scale)
            if i == 2:
                counter.memcount_reset()
                infer_ms.clear()
            results = []
            window(lambda: results.append(queue.submit(frame, i) and None or queue.get()))
            result = results[0]
            assert result is not None
            top5 = [int(k) for k in np.argsort(-result.outputs[0][0])[:5]]
            result.release()
        queue.close()
    else:
        request = session.create_request()
        in_buf, out_buf = npu_zc.alloc(in_spec.nbytes), npu_zc.alloc(out_spec.nbytes)
        run: Callable[[], object]
        if args.mode == "zero-copy":
            x, y = request.bind_input(in_buf), request.bind_output(out_buf)
            run = request.infer
        else:
            # Same wiring as zero copy (the frame and the result live in mapped buffers);
            # the runtime copies in and out of its own memory.
            x = in_buf.map(dtype=in_spec.dtype, shape=in_spec.shape)
            y = out_buf.map(dtype=out_spec.dtype, shape=out_spec.shape)
            run = lambda: request.infer_copy([x], [y])  # noqa: E731
        counter.memcount_watch(x.ctypes.data, x.nbytes)
        counter.memcount_watch(y.ctypes.data, y.nbytes)
        for i in range(args.frames + 2):  # 2 warm-up frames, then the steady state
            preprocess(photo, x, session.format, norm.mean, norm.scale)
            if i == 2:
                counter.memcount_reset()
                infer_ms.clear()
            window(run)
            top5 = [int(k) for k in np.argsort(-y[0])[:5]]
    frames = args.frames
    print(
        json.dumps(
            {
                "mode": args.mode,
                "queue": args.queue,
                "frames": frames,
                "input_bytes": in_spec.nbytes,
                "output_bytes": out_spec.nbytes,
                "bytes_per_frame": counter.memcount_total_bytes() / frames,
                "calls_per_frame": counter.memcount_total_calls() / frames,
                "frame_bytes_per_frame": counter.memcount_watched_bytes() / frames,
                "frame_calls_per_frame": counter.memcount_watched_calls() / frames,
                "largest_copy": counter.memcount_largest(),
                "infer_ms": float(np.median(infer_ms[-frames:])),
                "top5": top5,
            }
        )
    )


if __name__ == "__main__":
    main()
