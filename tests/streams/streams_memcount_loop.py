"""A Streams run under LD_PRELOAD=libmemcount.so (run by test_streams_memcount.py); prints one JSON object.

Each decoded frame's planes are watched from the moment the decoder hands the
frame over until its result is delivered: a copy touching them in that
window is a copy of the decoded frame. The source waits for each result
before decoding the next, so nothing else (the decoder) runs in the window.

    python streams_memcount_loop.py CLIP [--frames N] [--control]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "memcount")]

from streams_helpers import picture_model  # noqa: E402
from frame_loop import load_counter  # noqa: E402

import npu_zc  # noqa: E402
from npu_zc.runtime import CompileOptions  # noqa: E402
from npu_zc.sources import DecodedFrame, VideoSource  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("clip")
    parser.add_argument("--frames", type=int, default=10)
    parser.add_argument("--control", action="store_true", help="copy the planes in the window (the counter must see it)")
    args = parser.parse_args()
    counter = load_counter()
    delivered = threading.Event()
    per_frame: list[dict[str, Any]] = []

    class Counted:
        """The clip's frames, each watched and counted from hand-over to result."""

        live = False
        name = "counted"

        def __init__(self) -> None:
            self.inner = VideoSource(args.clip, limit=args.frames)

        def frames(self, stop: Any = None) -> Iterator[DecodedFrame]:
            for frame in self.inner.frames(stop):
                counter.memcount_unwatch_all()
                planes = frame.planes if isinstance(frame.planes, tuple) else (frame.planes,)
                for plane in planes:
                    span = (plane.shape[0] - 1) * plane.strides[0] + plane.shape[1]
                    counter.memcount_watch(plane.ctypes.data, span)
                per_frame.append({"format": frame.format, "copied": frame.copied,
                                  "frame_bytes": int(sum(p.shape[0] * p.shape[1] for p in planes))})  # fmt: skip
                delivered.clear()
                counter.memcount_reset()
                counter.memcount_start()
                if args.control:  # what a BGR image or a packed copy would cost
                    frame.planes = tuple(p.copy() for p in planes) if len(planes) > 1 else planes[0].copy()
                yield frame
                delivered.wait(30)

    def on_result(result: Any) -> None:
        counter.memcount_stop()
        per_frame[result.index].update(
            watched=counter.memcount_watched_bytes(), total=counter.memcount_total_bytes(),
            largest=counter.memcount_largest(), top=float(np.asarray(result.prediction[0]).sum()),
        )  # fmt: skip
        delivered.set()

    pipeline = npu_zc.Pipeline(picture_model(), "CPU", hint="throughput", fit="stretch",
                               options=CompileOptions(inference_precision="f32"))  # fmt: skip
    pipeline.postprocess = lambda outputs: [np.array(outputs[0], np.float32)]
    streams = npu_zc.Streams([Counted()], pipeline, requests=1)
    report = streams.run(on_result)
    streams.close()
    pipeline.close()
    print(json.dumps({"frames": report.frames, "per_frame": per_frame}))


if __name__ == "__main__":
    main()
