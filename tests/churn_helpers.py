"""Streams that come and go, every result checked: a model that names a frame's colour, clips whose frames are red,
green and blue in turn, and the churn (add, first result, remove the oldest) that ``tests/streams`` and
``scripts/soak_streams.py`` run. OpenVINO and PyAV are imported inside (the portable aarch64 run has neither)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

COLOURS = ((255, 0, 0), (0, 255, 0), (0, 0, 255))
"""The colour model's classes, in its order; frame ``i`` of a colour clip is ``COLOURS[i % 3]``."""
FIRST_RESULT_S = 30.0
"""A bound on the wait for an added stream's first result (never reached unless something is wrong)."""


def colour_model() -> Any:
    """Mean colour -> 3 logits (red, green, blue weighted 1, 2, 3), on a 32 x 32 RGB input: cheap on an emulated
    CPU, real all the same; a pure colour's class is its own."""
    import openvino as ov
    from openvino import opset13 as ops

    image = ops.parameter([1, 3, 32, 32], ov.Type.f32, name="image")
    mean = ops.reduce_mean(image, ops.constant(np.array([2, 3], np.int64)), keep_dims=False)
    logits = ops.multiply(mean, ops.constant(np.array([[1.0, 2.0, 3.0]], np.float32)), name="logits")
    model = ov.Model([logits], [image], "soak-colours")
    model.output(0).get_tensor().set_names({"logits"})
    return model


def colour_clip(path: Path, frames: int) -> Path:
    """A 320x240 H.264 clip whose frame ``i`` is all ``COLOURS[i % 3]``."""
    import av

    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        for i in range(frames):
            rgb = np.empty((240, 320, 3), np.uint8)
            rgb[:] = COLOURS[i % 3]
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


class Checks:
    """An output checking each stream's results as they come (by the stream's id), and each removed stream's
    figures; ``problems`` says what did not hold."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.next_index: dict[int, int] = {}
        self.removed_up_to = -1  # the churn removes the oldest first, and ids only grow
        self.results = 0
        self.problems: list[str] = []

    def problem(self, text: str) -> None:
        with self.lock:
            if len(self.problems) < 20:
                self.problems.append(text)

    def __call__(self, result: Any) -> None:
        """Frames in order from the first with none missing (files lose nothing), each its own frame's colour (a
        set granted twice, or read while it was written, gives another), none after its stream's removal."""
        with self.lock:
            self.results += 1
            gone = result.stream <= self.removed_up_to
            expected = self.next_index.get(result.stream, 0)
            if not gone:
                self.next_index[result.stream] = result.index + 1
        prediction = result.prediction
        top = prediction[0].index if prediction else None
        where = f"{result.name} (id {result.stream}): frame {result.index}"
        if gone:
            self.problem(f"{where} delivered after its removal")
        elif result.index != expected:
            self.problem(f"{where} where {expected} was next")
        if top != result.index % 3:
            self.problem(f"{where} gave class {top}, its colour is {result.index % 3}")

    def removed(self, stats: Any, frames: int) -> None:
        """A stream whose ``remove`` returned (``frames``: its clip's): every result of it in, ``done`` only with all
        of them, never ``error``; none may come after."""
        with self.lock:
            delivered = self.next_index.pop(stats.stream, 0)
            self.removed_up_to = stats.stream
        where = f"{stats.name} (id {stats.stream})"
        if delivered != stats.frames:
            self.problem(f"{where}: {delivered} results delivered, its figures count {stats.frames}")
        if stats.state not in ("done", "stopped") or (stats.state == "done" and stats.frames != frames):
            self.problem(f"{where}: {stats.state} after {stats.frames} of {frames} frames"
                         + (f": {stats.error}" if stats.error else ""))  # fmt: skip


def churn(streams: Any, clips: list[tuple[Path, int]], checks: Checks, *, names: int, keep: int,
          go_on: Callable[[int], bool]) -> dict[str, int]:  # fmt: skip
    """Streams added to a running ``streams`` and removed, while ``go_on(turns so far)``: each turn adds the next of
    ``names`` names (the ``clips``, each ``(path, frames)``, in turn), waits for its first result (so that each one
    decodes and infers), and removes the oldest once more than ``keep`` run; at the end the rest. Returns the counts
    of streams added and removed."""
    if names <= keep:
        raise ValueError(f"{names} names for {keep} streams running at once: a name would be taken when its turn came")
    running: list[tuple[str, int]] = []
    counts = {"added": 0, "removed": 0}

    def remove(name: str, frames: int) -> None:
        checks.removed(streams.remove(name), frames)
        counts["removed"] += 1

    k = 0
    try:
        while go_on(k):
            clip, frames = clips[k % len(clips)]
            stats = streams.add(clip, name=f"cam{k % names}")
            counts["added"] += 1
            running.append((stats.name, frames))
            deadline = time.monotonic() + FIRST_RESULT_S
            while stats.frames == 0 and stats.state == "running" and time.monotonic() < deadline:
                time.sleep(0.002)
            if stats.frames == 0:
                checks.problem(f"{stats.name} (id {stats.stream}): no result within {FIRST_RESULT_S:g} s, "
                               f"{stats.state}")  # fmt: skip
            while len(running) > keep:
                remove(*running.pop(0))
            k += 1
    finally:
        for name, frames in running:
            remove(name, frames)
    return counts
