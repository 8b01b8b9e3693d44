"""`npu-zc run --count-copies`: the pipeline under the memcpy counter.

The command re-runs itself in a child process with the counter
(:mod:`npu_zc.memcount`) in LD_PRELOAD; the child preprocesses each frame
with counting off, counts every memcpy/memmove in the process while the
frame goes from the preprocess output to the postprocess input (the
inference, and in copy mode the runtime's copies in and out), and prints the
bytes copied per frame. Zero copy reads 0 frame bytes; a runtime that copied
the frame (a shadow copy) shows its bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any, Callable

CHILD = "NPU_ZC_COUNT_COPIES_CHILD"
WARMUP = 2
"""Frames before counting starts: first inferences allocate and copy what the steady state does not."""


def run(args: argparse.Namespace, make_pipeline: Callable[[argparse.Namespace, Any], Any]) -> int:
    """``make_pipeline(args, mode)``: the pipeline `npu-zc run` would build (given by the caller: no import back)."""
    if os.environ.get(CHILD) == "1":
        return _count(args, make_pipeline)
    from ..memcount import build

    lib = build()
    preload = " ".join(p for p in (str(lib), os.environ.get("LD_PRELOAD", "")) if p)
    env = dict(os.environ, LD_PRELOAD=preload, **{CHILD: "1"})
    return subprocess.run([sys.executable, "-m", "npu_zc", *args.argv], env=env).returncode


def _count(args: argparse.Namespace, make_pipeline: Callable[[argparse.Namespace, Any], Any]) -> int:
    from ..memcount import CounterUnavailableError, preloaded
    from ..pipeline import load_image
    from ..runtime.model import Mode

    counter = preloaded()
    if counter is None:
        raise CounterUnavailableError("the memcpy counter is not loaded in this process (LD_PRELOAD did not take)")
    image = load_image(args.image)
    mode: Mode = "copy" if args.non_zero_copy else "zero-copy"
    with make_pipeline(args, mode) as pipeline:
        for address, nbytes in [(a.ctypes.data, a.nbytes) for a in (pipeline.input, *pipeline.outputs)]:
            counter.watch(address, nbytes)
        for i in range(WARMUP + args.runs):
            if i == WARMUP:
                counter.reset()
            _frame(pipeline, image, counter)
        counts = counter.counts()
        frames = args.runs
        result: dict[str, Any] = {
            "model": pipeline.model_name,
            "device": pipeline.device,
            "mode": pipeline.mode,
            "buffers": pipeline.buffer_kind,
            "frames": frames,
            "input_bytes": int(pipeline.input.nbytes),
            "output_bytes": int(sum(o.nbytes for o in pipeline.outputs)),
            "bytes_per_frame": counts.bytes / frames,
            "calls_per_frame": counts.calls / frames,
            "frame_bytes_per_frame": counts.watched_bytes / frames,
            "largest_copy": counts.largest,
        }
    if args.json:
        print(json.dumps(result))
    else:
        print(text(result))
    return 0


def _frame(pipeline: Any, image: Any, counter: Any) -> None:
    """Preprocess (not counted), infer (counted), postprocess (not counted)."""
    if pipeline._sync_input is None:
        pipeline.preprocess(image, pipeline.input)
    else:
        with pipeline._sync_input.cpu_access("write"):
            pipeline.preprocess(image, pipeline.input)
    counter.start()
    try:
        pipeline.infer()
    finally:
        counter.stop()
    pipeline.postprocess(pipeline.outputs)


def text(r: dict[str, Any]) -> str:
    verdict = (
        "zero copy: no byte of the frame or the result was copied"
        if r["frame_bytes_per_frame"] == 0
        else "the frame or the result was copied"
    )
    return "\n".join(
        [
            f"model    {r['model']} on {r['device']}, {r['mode']}, buffers: {r['buffers']}",
            f"frames   {r['frames']} counted after {WARMUP} warm-up frames; input {r['input_bytes']:,} bytes, "
            f"outputs {r['output_bytes']:,} bytes",
            f"copied   {r['bytes_per_frame']:,.0f} bytes / frame in {r['calls_per_frame']:,.1f} memcpy/memmove calls "
            f"(largest copy {r['largest_copy']:,} bytes)",
            f"frame    {r['frame_bytes_per_frame']:,.0f} bytes / frame copied from or into the frame's own buffers: "
            + verdict,
        ]
    )
