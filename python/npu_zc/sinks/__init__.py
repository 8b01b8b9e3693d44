"""Where results go: each sink is called with every :class:`~npu_zc.pipeline.streams.StreamResult` and closed once.

A sink is any object with ``__call__(result)`` and ``close()`` (:class:`Sink`);
:meth:`npu_zc.Streams.run` takes sinks (or plain callables) as its outputs and
calls them on its delivery threads, each stream's results in frame order,
results of different streams possibly at once from different threads (a sink
that keeps state across streams locks it). Closing is the caller's, after the
run: a sink does not know when the last stream has ended.

* :class:`JsonLines` (:mod:`.jsonl`): one strict JSON object per result, a line each.
* :class:`AnnotatedVideos` (:mod:`.video`): an H.264 video per stream, each frame drawn.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..pipeline.streams import StreamResult
from .jsonl import JsonLines, finite, strict_json
from .video import AnnotatedVideos, draw_prediction, draw_top_label


@runtime_checkable
class Sink(Protocol):
    """Where a :class:`StreamResult` goes: called per result (on a delivery thread), closed once after the run."""

    def __call__(self, result: StreamResult) -> None: ...

    def close(self) -> None: ...


__all__ = ["AnnotatedVideos", "JsonLines", "Sink", "draw_prediction", "draw_top_label", "finite", "strict_json"]
