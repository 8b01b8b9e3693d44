"""Where results go: each sink is called with every :class:`~npu_zc.pipeline.streams.StreamResult` and closed once.

A sink is any object with ``__call__(result)`` and ``close()`` (:class:`Sink`);
:meth:`npu_zc.Streams.run` takes sinks (or plain callables) as its outputs and
calls them on its delivery threads, each stream's results in frame order,
results of different streams possibly at once from different threads (a sink
that keeps state across streams locks it). Closing is the caller's, after the
run: a sink does not know when the last stream has ended.

* :class:`JsonLines` (:mod:`.jsonl`): one strict JSON object per result, a line each.
* :class:`AnnotatedVideos` (:mod:`.video`): an H.264 video per stream, each frame drawn.
* :class:`MqttSink` (:mod:`.mqtt`, settings :class:`MqttConfig`): results and events to an MQTT broker (paho-mqtt).
* :class:`Metrics` (:mod:`.metrics`, settings :class:`MetricsConfig`): Prometheus metrics (prometheus-client).
* :class:`LiveView` (:mod:`.live`, settings :class:`LiveConfig`): each stream's newest result drawn, as JPEG.

The last three are imported on first use (``npu_zc.sinks.MqttSink``), so that ``import npu_zc`` needs neither
paho-mqtt nor prometheus-client (both in the ``serve`` extra: ``pip install 'npu_zc[serve]'``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..pipeline.streams import StreamResult
from .jsonl import JsonLines, finite, strict_json
from .video import AnnotatedVideos, draw_prediction, draw_top_label


@runtime_checkable
class Sink(Protocol):
    """Where a :class:`StreamResult` goes: called per result (on a delivery thread), closed once after the run."""

    def __call__(self, result: StreamResult) -> None: ...

    def close(self) -> None: ...


if TYPE_CHECKING:
    from .live import LiveConfig, LiveView
    from .metrics import Metrics, MetricsConfig
    from .mqtt import MqttConfig, MqttSink, TlsConfig

# Imported on first use: their modules need the serve extra's packages (paho-mqtt when started, prometheus-client).
_LAZY = {"MqttSink": "mqtt", "MqttConfig": "mqtt", "TlsConfig": "mqtt", "Metrics": "metrics",
         "MetricsConfig": "metrics", "LiveView": "live", "LiveConfig": "live"}  # fmt: skip


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = ["AnnotatedVideos", "JsonLines", "LiveConfig", "LiveView", "Metrics", "MetricsConfig", "MqttConfig", "MqttSink",
           "Sink", "TlsConfig", "draw_prediction", "draw_top_label", "finite", "strict_json"]  # fmt: skip
