"""Prometheus metrics with prometheus-client, in a registry of their own (two services in one process, or
a test, never share one): what the service's ``GET /metrics`` serves, and a sink usable alone
(``Metrics()(result)`` per result, ``text()`` the exposition, ``watch(stats, inference)`` for a run's figures).

Per result (the sink, on the delivery threads): ``npu_zc_latency_seconds{stream}`` (a histogram: decoder to
result). Per event: ``npu_zc_line_crossings_total{line,direction}``, ``npu_zc_zone_entries_total{zone}``,
``npu_zc_zone_exits_total{zone}``, ``npu_zc_zone_dwell_seconds{zone}``, ``npu_zc_zone_occupancy{zone}``.
Read from the streams' own figures at each scrape (nothing counted twice): ``npu_zc_frames_total{stream}``,
``npu_zc_dropped_frames_total{stream}``, ``npu_zc_reconnects_total{stream}``, ``npu_zc_stream_up{stream}``,
``npu_zc_inference_seconds`` (a summary: every inference's count and total time) and
``npu_zc_inference_quantile_seconds`` (the recent ones' median and p99).
The MQTT side: ``npu_zc_mqtt_connected``, ``npu_zc_mqtt_events_queued``, ``npu_zc_mqtt_events_published_total``,
``npu_zc_mqtt_events_dropped_total``, ``npu_zc_mqtt_detections_dropped_total``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from ..analytics import Event
from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    from ..pipeline.streams import StreamResult, StreamStats

LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)
DWELL_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


@dataclass
class MetricsConfig:
    """The sink's settings: the histograms' bucket bounds, in seconds (rising)."""

    latency_buckets: tuple[float, ...] = LATENCY_BUCKETS
    dwell_buckets: tuple[float, ...] = DWELL_BUCKETS

    def check(self) -> None:
        for key in ("latency_buckets", "dwell_buckets"):
            b = getattr(self, key)
            if not b or any(not (x > 0) for x in b) or any(y <= x for x, y in zip(b, b[1:])):
                raise InvalidArgumentError(f"metrics.{key} must be rising numbers above 0, got {list(b)}")


class _StreamFigures(Collector):
    """The streams' counters as they stand, read at each scrape from :attr:`Streams.stats` (and the stage
    timings), so they can never disagree with ``GET /streams``."""

    def __init__(self, stats: Callable[[], list[StreamStats]], inference: Callable[[], tuple[int, float, Any] | None]) -> None:
        self._stats = stats
        self._inference = inference

    def collect(self) -> Iterable[Metric]:
        frames = CounterMetricFamily("npu_zc_frames", "Frames inferred, per stream", labels=["stream"])
        dropped = CounterMetricFamily("npu_zc_dropped_frames", "Frames a live stream lost before the model took them",
                                      labels=["stream"])  # fmt: skip
        reconnects = CounterMetricFamily("npu_zc_reconnects", "Times a network stream reconnected", labels=["stream"])
        up = GaugeMetricFamily("npu_zc_stream_up", "1 while the stream runs, 0 once it ended or failed", labels=["stream"])
        fps = GaugeMetricFamily("npu_zc_stream_fps", "Frames a second, over the stream's run", labels=["stream"])
        for s in self._stats():
            frames.add_metric([s.name], s.frames)
            dropped.add_metric([s.name], s.dropped)
            reconnects.add_metric([s.name], s.reconnects)
            up.add_metric([s.name], 1.0 if s.state == "running" else 0.0)
            fps.add_metric([s.name], s.fps)
        yield from (frames, dropped, reconnects, up, fps)
        inference = self._inference()
        if inference is not None and inference[0]:
            count, seconds, recent = inference
            yield SummaryMetricFamily("npu_zc_inference_seconds", "Inferences (the runtime's own time of each)",
                                      count_value=count, sum_value=seconds)  # fmt: skip
            quantiles = GaugeMetricFamily("npu_zc_inference_quantile_seconds", "The recent inferences' median and p99",
                                          labels=["quantile"])  # fmt: skip
            quantiles.add_metric(["0.5"], recent.median / 1e3)
            quantiles.add_metric(["0.99"], recent.p99 / 1e3)
            yield quantiles


class Metrics:
    """A :class:`~npu_zc.sinks.Sink`: ``__call__(result)`` observes its latency, ``events(events)`` counts
    analytics events, ``text()`` is the Prometheus exposition of :attr:`registry`."""

    def __init__(self, config: MetricsConfig | None = None) -> None:
        config = config or MetricsConfig()
        config.check()
        self.config = config
        self.registry = CollectorRegistry()
        r = self.registry
        self.latency = Histogram("npu_zc_latency_seconds", "Decoder to result, per frame", ["stream"],
                                 buckets=config.latency_buckets, registry=r)  # fmt: skip
        self._latency: dict[str, Any] = {}
        self.crossings = Counter("npu_zc_line_crossings", "Boxes that crossed a line", ["line", "direction"], registry=r)
        self.entries = Counter("npu_zc_zone_entries", "Tracks that entered a zone", ["zone"], registry=r)
        self.exits = Counter("npu_zc_zone_exits", "Tracks that left a zone", ["zone"], registry=r)
        self.dwell = Histogram("npu_zc_zone_dwell_seconds", "Time a track spent in a zone", ["zone"], buckets=config.dwell_buckets, registry=r)
        self.occupancy = Gauge("npu_zc_zone_occupancy", "Tracks inside a zone now", ["zone"], registry=r)
        self.mqtt_connected = Gauge("npu_zc_mqtt_connected", "1 while the MQTT broker is connected", registry=r)
        self.mqtt_queued = Gauge("npu_zc_mqtt_events_queued", "Events waiting for the broker", registry=r)
        self.mqtt_published = Counter("npu_zc_mqtt_events_published", "Events handed to the broker", registry=r)
        self.mqtt_dropped = Counter("npu_zc_mqtt_events_dropped", "Events dropped, oldest first, past the queue's bound", registry=r)
        self.mqtt_detections_dropped = Counter("npu_zc_mqtt_detections_dropped",
                                               "Detection messages dropped while paho's outgoing buffer held mqtt.detections_queue",
                                               registry=r)  # fmt: skip

    def watch(self, stats: Callable[[], list[StreamStats]], inference: Callable[[], tuple[int, float, Any] | None]) -> None:
        """Read the streams' figures at each scrape."""
        self.registry.register(_StreamFigures(stats, inference))

    def add_line(self, name: str) -> None:
        for direction in ("in", "out"):  # both series from the start: a rate() over a counter that appears later misses its first step
            self.crossings.labels(name, direction)

    def add_zone(self, name: str, occupancy: Callable[[], float] | None = None) -> None:
        """A zone's series; ``occupancy`` (e.g. ``lambda: zone.occupancy``) is read at each scrape, else the
        gauge is set by the caller."""
        self.entries.labels(name)
        self.exits.labels(name)
        gauge = self.occupancy.labels(name)
        if occupancy is not None:
            gauge.set_function(occupancy)  # read when scraped: nothing to set per result
        else:
            gauge.set(0)

    def __call__(self, result: StreamResult) -> None:
        # Each stream's histogram looked up once: ``labels()`` checks and locks on every call, paid per result.
        child = self._latency.get(result.name)
        if child is None:
            child = self._latency[result.name] = self.latency.labels(result.name)
        child.observe(result.latency_ms / 1e3)

    def close(self) -> None:
        """Nothing to let go: the registry stays readable (a last scrape after the run)."""

    def events(self, events: list[Event]) -> None:
        for e in events:
            if e.kind == "line_crossed":
                self.crossings.labels(e.name, e.direction or "in").inc()
            elif e.kind == "zone_entered":
                self.entries.labels(e.name).inc()
            else:
                self.exits.labels(e.name).inc()
                if e.dwell_s is not None:
                    self.dwell.labels(e.name).observe(max(0.0, e.dwell_s))

    def text(self) -> bytes:
        return generate_latest(self.registry)


__all__ = ["DWELL_BUCKETS", "LATENCY_BUCKETS", "Metrics", "MetricsConfig"]
