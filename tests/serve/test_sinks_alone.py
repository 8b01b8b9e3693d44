"""The service's sinks used without the service: MqttSink into a real mosquitto (frozen with SIGSTOP while
connected, so that nothing it is sent is read), Metrics and LiveView on StreamResults made here."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest

from serve_helpers import PASSWORD, USER, Broker, wait_for

from npu_zc import InvalidArgumentError
from npu_zc.pipeline.streams import StreamResult
from npu_zc.sinks import LiveConfig, LiveView, Metrics, MqttConfig, MqttSink, Sink
from npu_zc.sinks.mqtt import WINDOW

PAYLOAD = 256 * 1024
"""Bytes of each detection message: a few of them fill the socket's buffers."""


def kernel_bytes() -> int:
    """What the kernel can hold of a loopback TCP connection whose reader reads nothing, at most: the writer's
    send buffer and the reader's receive buffer at their largest (doubled, as the kernel doubles a set size)."""

    def most(*files: str) -> int:
        return max(int(Path(f).read_text().split()[-1]) for f in files)

    return 2 * most("/proc/sys/net/ipv4/tcp_wmem", "/proc/sys/net/core/wmem_max") + 2 * most(
        "/proc/sys/net/ipv4/tcp_rmem", "/proc/sys/net/core/rmem_max"
    )


def result(index: int, size: int = PAYLOAD) -> StreamResult:
    return StreamResult(stream=0, name="cam", index=index, pts=None, latency_ms=1.0, prediction="x" * size)


def test_a_broker_that_reads_nothing_while_connected_holds_at_most_the_bounds(tmp_path: Path) -> None:
    """Detections (QoS 0) past ``detections_queue`` in paho's buffer are dropped and counted; events (QoS 1)
    handed to paho stay at :data:`WINDOW` however many detections paho writes meanwhile."""
    broker = Broker(tmp_path / "broker")
    broker.start()
    assert broker.process is not None
    bound, extra = 8, 5
    metrics = Metrics()
    sink = MqttSink(MqttConfig(port=broker.port, username=USER, password=PASSWORD, prefix="alone", keepalive=3600,
                               detections_queue=bound), metrics)  # fmt: skip
    assert isinstance(sink, Sink)
    sink.start()
    try:
        assert sink.connected
        broker.process.send_signal(signal.SIGSTOP)  # connected, reading nothing
        for k in range(WINDOW + extra):
            sink.event("cam", {"event": "line_crossed", "k": k})
        wait_for(lambda: sink.queued == extra, 30, f"the pump to hand {WINDOW} events to paho")
        # Enough that the kernel's buffers fill whatever their size: the rest wait in paho's, or are dropped.
        n = bound + kernel_bytes() // PAYLOAD + 4
        for k in range(n):
            sink(result(k))
            assert sink.detections_pending <= bound
            # paho's own buffer of packets not yet written (events may wait there too): its QoS 0 PUBLISHes
            assert sum(p["command"] & 0xF0 == 0x30 and p["qos"] == 0 for p in list(sink.client._out_packet)) <= bound
        assert sink.detections_dropped >= 1
        assert metrics.registry.get_sample_value("npu_zc_mqtt_detections_dropped_total") == sink.detections_dropped
        # The detections' writes (on_publish calls) opened no room for more events: none was acknowledged
        # (paho may also hold the retained "online", sent at the connection and perhaps not acknowledged yet).
        assert sink.queued == extra and len(sink.client._out_messages) <= WINDOW + 1
        broker.process.send_signal(signal.SIGCONT)
        wait_for(lambda: sink.detections_pending == 0, 60, "paho to write the detections it holds")
        dropped = sink.detections_dropped
        sink(result(n, 10))
        assert sink.detections_dropped == dropped
        wait_for(lambda: sink.queued == 0, 60, "the queued events to reach the broker")
    finally:
        broker.process.send_signal(signal.SIGCONT)
        sink.close()
        broker.stop()


def test_mqtt_settings_are_refused_naming_the_key() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^mqtt\.detections_queue must be at least 1, got 0$"):
        MqttSink(MqttConfig(detections_queue=0))
    with pytest.raises(InvalidArgumentError, match=r"^mqtt\.prefix 'a/\+' must be topic levels"):
        MqttSink(MqttConfig(prefix="a/+"))


def test_metrics_alone_count_results() -> None:
    metrics = Metrics()
    assert isinstance(metrics, Sink)
    for k in range(3):
        metrics(StreamResult(stream=0, name="cam", index=k, pts=None, latency_ms=20.0, prediction=[]))
    metrics.close()
    assert metrics.registry.get_sample_value("npu_zc_latency_seconds_count", {"stream": "cam"}) == 3
    assert b'npu_zc_latency_seconds_bucket{le="0.02",stream="cam"} 3.0' in metrics.text()


def test_the_live_view_alone_draws_a_watched_stream() -> None:
    from npu_zc.sources.frame import DecodedFrame

    image = np.zeros((120, 160, 3), np.uint8)
    frame = DecodedFrame(index=0, format="BGR", planes=image, width=160, height=120, decoded_ns=0)
    live = LiveView(LiveConfig(fps=60, watch_s=float("inf")))
    assert isinstance(live, Sink)
    with pytest.raises(InvalidArgumentError, match=r"^live\.fps must be more than 0"):
        LiveView(LiveConfig(fps=0))
    try:
        live(StreamResult(stream=0, name="cam", index=0, pts=None, latency_ms=1.0, prediction=[], frame=frame))
        tile = wait_for(lambda: live.jpeg("cam"), 30, "the live view's first tile")
        assert tile[:2] == b"\xff\xd8"  # a JPEG
    finally:
        live.close()


def test_the_live_view_wants_only_a_watched_streams_frames_once_a_tile_interval() -> None:
    """What ``Streams(keep_frames=live.wants)`` asks as each frame is submitted: no frame of a stream no one
    watches, then one per ``1 / fps``, none once the stream is forgotten; the frames it chose are all drawn."""
    from npu_zc.sources.frame import DecodedFrame

    live = LiveView(LiveConfig(fps=0.001, watch_s=3600))  # a tile interval of 1000 s: one frame is due
    try:
        assert not live.wants("cam")
        assert live.jpeg("cam") is None  # asked for: watched from now on
        assert live.wants("cam")
        assert not live.wants("cam") and not live.wants("other")
        live.forget("cam")
        assert not live.wants("cam")
        assert live.jpeg("cam") is None and live.wants("cam")
        image = np.zeros((120, 160, 3), np.uint8)
        for k in range(2):  # chosen by wants(): not thinned again, though they come closer than 1 / fps
            frame = DecodedFrame(index=k, format="BGR", planes=image, width=160, height=120, decoded_ns=0)
            live(StreamResult(stream=0, name="cam", index=k, pts=None, latency_ms=1.0, prediction=[], frame=frame))
        assert wait_for(lambda: live.jpeg("cam"), 30, "the chosen frame's tile")[:2] == b"\xff\xd8"
    finally:
        live.close()
