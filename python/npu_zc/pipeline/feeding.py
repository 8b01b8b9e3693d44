"""The decode side of a stream, wherever it runs: a source read into its lane, a frame converted into a model input.

:class:`~npu_zc.pipeline.streams.Streams` runs these on its own threads, and
:mod:`.decode_worker` runs the same in a worker process (:mod:`.workers`):
one behaviour, one place. Nothing here knows OpenVINO.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from .. import layout
from ..sources.video import engine_takes_colour
from .preprocess import PreprocessSpec
from .scheduler import Lane, Scheduler
from .timing import FENCE_TIMEOUT_S


def read_source(scheduler: Scheduler[Any], lane: Lane, source: Any, figures: Any) -> None:
    """A source's thread: decode into ``lane`` until the source ends, fails, or the run stops.

    ``figures``: where the stream's outcome goes (a :class:`~npu_zc.pipeline.streams.StreamStats`, or anything with
    its ``dropped``, ``stopped``, ``done``, ``error``, ``reconnects`` and ``copied`` fields)."""
    lock, stop = scheduler.lock, lane.stop
    yielded = 0
    try:
        for frame in source.frames(stop):
            yielded += 1
            with lock:  # the lock itself: entering the condition is a Python call more
                if not scheduler.wait_for_room(lane):
                    frame.release()
                    figures.stopped = True
                    return
                if yielded == 1:  # a source that lends few frames (a camera: its buffers) is known once it is open
                    lends = getattr(source, "most_held", None)
                    if lends is not None:
                        lane.keep = max(1, min(lane.keep, lends))
                figures.dropped += scheduler.arrive(lane, frame)
        if stop.is_set():
            figures.stopped = True
        elif yielded == 0:
            figures.error = f"{lane.name} yielded no frame: nothing in it could be decoded"
        else:
            figures.done = True
    except BaseException as exc:  # this stream's error; the others go on
        figures.error = str(exc) or type(exc).__name__
    finally:
        figures.reconnects = getattr(source, "reconnects", 0)
        figures.copied = getattr(source, "copied", 0)
        scheduler.ended(lane)


Converters = dict[tuple[Any, ...], tuple[layout.Converter, Any]]
"""A stream's converters, per format, size and colours of its frames: the converter and its transform."""


def converter_for(spec: PreprocessSpec, frame: Any) -> layout.Converter:
    """The one-pass conversion of ``frame`` (a :class:`~npu_zc.sources.DecodedFrame`) into ``spec``'s input, in the
    frame's colours where the engine takes them."""
    colour = frame.matrix is not None and engine_takes_colour()
    return spec.converter(frame.format, frame.width, frame.height, matrix=frame.matrix if colour else None,
                          range=frame.range if colour else None)  # fmt: skip


def convert_frame(converters: Converters, make: Callable[[Any], layout.Converter], frame: Any, dst: Any,
                  target: Any) -> Any:  # fmt: skip
    """The decoded frame, read in place, into ``dst`` (a view of the buffer ``target``) in one pass; returns the
    transform (from the frame's pixels to the input's)."""
    key = (frame.format, frame.width, frame.height, frame.matrix, frame.range)
    known = converters.get(key)
    if known is None:
        convert = make(frame)
        known = converters[key] = (convert, convert.transform)
    convert, transform = known
    source = frame.buffer
    if not target.is_dmabuf and (source is None or not source.is_dmabuf):  # memfd, decoder memory: no brackets
        convert(frame.planes, dst)
        return transform
    with contextlib.ExitStack() as access:
        if target.is_dmabuf:
            access.enter_context(target.cpu_access("write", timeout=FENCE_TIMEOUT_S))
        if source is not None and source.is_dmabuf:
            access.enter_context(source.cpu_access("read", timeout=FENCE_TIMEOUT_S))
        convert(frame.planes, dst)
    return transform


__all__ = ["Converters", "convert_frame", "converter_for", "read_source"]
