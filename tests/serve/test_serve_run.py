"""The service end to end on real components: a clip where a red square crosses a line and passes through a
zone (so the counts are known), the red-square YOLO, ByteTrack, mosquitto with a password (and TLS), the HTTP
API and /metrics parsed with prometheus-client's parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve_helpers import (ENTER_FRAME, LEAVE_FRAME, TOKEN, Broker, broker, Subscriber, across_and_down, back_and_forth, config,
                           http, make_tls, square_clip, wait_for)  # fmt: skip

from npu_zc.serve import ConfigError, Service


def metrics(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    status, text = http(port, "GET", "/metrics", token=TOKEN)
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_a_square_crossing_a_line_and_a_zone_is_counted_everywhere(red_square_yolo: Path, tmp_path: Path, broker: Broker) -> None:
    clip = square_clip(tmp_path / "walk.mp4", across_and_down())
    frames = len(across_and_down())
    sub = Subscriber(broker, ["npu_zc/test/#"])
    service = Service(config(red_square_yolo, [{"name": "gate", "source": str(clip)}], broker))
    service.start()
    try:
        from npu_zc.sinks import Sink

        assert isinstance(service.mqtt, Sink) and isinstance(service.live, Sink)  # the brief's sink protocol
        port = service.port
        assert port
        wait_for(lambda: [s for s in http(port, "GET", "/streams", token=TOKEN)[1]["streams"] if s["frames"] == frames],
                 120, "every frame's result")  # fmt: skip
        (gate,) = http(port, "GET", "/streams", token=TOKEN)[1]["streams"]
        assert gate["frames"] == frames and gate["error"] is None
        assert gate["lines"] == [{"name": "door", "in": 1, "out": 0}]
        assert gate["zones"][0] | {"occupancy": 0} == {"name": "lobby", "occupancy": 0, "entries": 1, "exits": 1}
        events = wait_for(lambda: (e := sub.json("/gate/events")) and len(e) >= 3 and e, 20, "three events")
        kinds = [(e["event"], e.get("direction")) for e in events]
        assert kinds == [("line_crossed", "in"), ("zone_entered", None), ("zone_left", None)]
        entered, left = events[1], events[2]
        assert abs(entered["frame"] - ENTER_FRAME) <= 2 and abs(left["frame"] - LEAVE_FRAME) <= 2
        assert left["dwell_frames"] == left["frame"] - entered["frame"]
        assert left["dwell_s"] == pytest.approx(left["dwell_frames"] / 30, abs=1e-3)  # the clip's pts, 30 fps
        assert {e["track_id"] for e in events} == {events[0]["track_id"]} and events[0]["label"] == "person"
        assert [e["seq"] for e in events] == [1, 2, 3] and service.mqtt.events == 3
        detections = wait_for(lambda: (d := sub.json("/gate/detections")) and len(d) == frames and d, 20, "every result")
        assert [d["index"] for d in detections] == list(range(frames))
        assert all(len(d["result"]["detections"]) == 1 and "track_id" in d["result"]["detections"][0] for d in detections[1:])
        assert sub.texts("npu_zc/test/status")[-1] == "online"

        # The last result's outputs may still run when its frame is counted: wait for its latency sample.
        m = wait_for(lambda: (m := metrics(port)) and m[("npu_zc_latency_seconds_count", (("stream", "gate"),))] == frames and m,
                     20, "the last result's metrics")  # fmt: skip
        assert m[("npu_zc_frames_total", (("stream", "gate"),))] == frames
        assert m[("npu_zc_dropped_frames_total", (("stream", "gate"),))] == 0
        assert m[("npu_zc_line_crossings_total", (("direction", "in"), ("line", "door")))] == 1
        assert m[("npu_zc_line_crossings_total", (("direction", "out"), ("line", "door")))] == 0
        assert m[("npu_zc_zone_entries_total", (("zone", "lobby"),))] == 1
        assert m[("npu_zc_zone_exits_total", (("zone", "lobby"),))] == 1
        assert m[("npu_zc_zone_occupancy", (("zone", "lobby"),))] == 0
        assert m[("npu_zc_latency_seconds_count", (("stream", "gate"),))] == frames
        assert m[("npu_zc_inference_seconds_count", ())] == frames
        assert m[("npu_zc_mqtt_events_published_total", ())] == 3
        assert m[("npu_zc_mqtt_events_dropped_total", ())] == 0

        # Every request carries the token; REST refusals are JSON with the right status, the stream unharmed.
        assert http(port, "GET", "/health")[0] == 401
        assert http(port, "GET", "/metrics", token="x" * 30)[0] == 401
        assert http(port, "GET", "/health", token=TOKEN)[1]["mqtt"] == "connected"
        status, body = http(port, "POST", "/streams", raw=b"{not json", token=TOKEN)
        assert status == 400 and body["error"].startswith("the request body is not JSON")
        status, body = http(port, "POST", "/streams", raw=b"[" * 60000, token=TOKEN)  # nested past the decoder's depth
        assert status == 400 and body["error"].startswith("the request body is not JSON")
        status, body = http(port, "POST", "/streams", {"name": "x", "source": "a.mp4", "\nlevel=ERROR": 1}, token=TOKEN)
        assert status == 422 and "the stream.'\\nlevel=ERROR': unknown key" in body["error"]  # one line, the key quoted
        for source in ["a\0b.mp4", "x" * 5000, "file:///etc/shadow", "-i", "rtsp://u:pw@[::1"]:  # refused at once
            status, body = http(port, "POST", "/streams", {"name": "x", "source": source}, token=TOKEN)
            assert status == 422 and "\n" not in body["error"] and "pw" not in body["error"], (source, status, body)
        status, body = http(port, "POST", "/streams", {"name": "gate", "source": str(clip)}, token=TOKEN)
        assert status == 409 and "already runs" in body["error"]
        status, body = http(port, "POST", "/streams", {"name": "x", "source": "/dev/zero"}, token=TOKEN)
        assert status == 422 and "character device" in body["error"]
        status, body = http(port, "POST", "/streams", {"name": "x", "sauce": "a.mp4"}, token=TOKEN)
        assert status == 422 and "the stream.sauce: unknown key" in body["error"]
        status, body = http(port, "DELETE", "/streams/nope", token=TOKEN)
        assert status == 404 and body == {"error": "no stream is named 'nope'"}
        assert http(port, "GET", "/streams", token=TOKEN)[1]["streams"][0]["frames"] == frames
    finally:
        service.stop()
    wait_for(lambda: sub.texts("npu_zc/test/status")[-1:] == ["offline"], 10, "the offline status")
    sub.close()


def test_without_the_live_view_a_many_core_host_decodes_in_workers(red_square_yolo: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """No HTTP, so no live view (it needs the decoded frames here): on a host of 16 cores (the count stood in for;
    the run is real) the service decodes its two video streams in two worker processes (sized for the streams a
    worker can read, not for the cores: four, nor for a folder of stills beside them, read here) with the delivery
    threads the CPU takes beside workers, and counts the square as in one process; the config's live_frames reaches
    its Streams."""
    import cv2
    import numpy as np

    import npu_zc.runtime.session as session
    from npu_zc.pipeline.streams import default_deliverers

    monkeypatch.setattr(session, "usable_cores", lambda: 16)
    clip = square_clip(tmp_path / "walk.mp4", across_and_down())
    frames = len(across_and_down())
    stills = tmp_path / "stills"
    stills.mkdir()
    for k in range(2):
        cv2.imwrite(str(stills / f"{k}.png"), np.full((64, 64, 3), 90, np.uint8))
    sources = [{"name": "gate", "source": str(clip)}, {"name": "side", "source": str(clip)},
               {"name": "stills", "source": str(stills)}]  # fmt: skip
    service = Service(config(red_square_yolo, sources, None, http=False, live_frames=1))
    service.start()
    try:
        streams = service.streams
        assert streams is not None and service.live is None and streams.live_frames == 1
        assert streams.workers == 2 and streams.deliverers == default_deliverers(3, workers=2, device="CPU") == 2
        wait_for(lambda: [s["frames"] for s in service.streams_info()] == [frames, frames, 2], 120, "every frame's result")
        assert [lane.worker is not None for lane in streams.lanes] == [True, True, False]  # the videos decoded there
        gate, side, still = service.streams_info()
        assert gate["error"] is None and side["error"] is None and still["error"] is None
        assert gate["lines"] == [{"name": "door", "in": 1, "out": 0}]
        assert gate["zones"][0] | {"occupancy": 0} == {"name": "lobby", "occupancy": 0, "entries": 1, "exits": 1}
    finally:
        service.stop()


def test_the_broker_goes_away_and_every_event_arrives_when_it_is_back(red_square_yolo: Path, tmp_path: Path, broker: Broker) -> None:
    """Killed (SIGTERM) after the first event, restarted once events have queued: every event the analytics
    counted arrives, each once by its seq (QoS 1 may repeat one), none dropped."""
    clip = square_clip(tmp_path / "pace.mp4", back_and_forth(6), fps=30)
    sub = Subscriber(broker, ["npu_zc/test/+/events"])
    service = Service(config(red_square_yolo, [{"name": "gate", "source": str(clip), "realtime": True}], broker,
                             mqtt=broker.mqtt("npu_zc/test", detections_every=0)))  # fmt: skip
    service.start()
    try:
        assert service.mqtt is not None
        wait_for(lambda: sub.json("/events"), 60, "the first event")
        broker.stop()
        wait_for(lambda: service.mqtt is not None and service.mqtt.queued >= 2, 60, "events to queue while the broker is away")
        assert not service.mqtt.connected
        broker.start()
        # The paced stream has ended (a loaded machine may have dropped some of its frames: not every frame is awaited).
        wait_for(lambda: service.streams is not None and service.streams.stats[0].state == "done", 120,
                 "the stream's end")  # fmt: skip
        counted = service.mqtt.events
        assert counted >= 4  # a paced stream may drop frames (and a track with them): the count is what was counted
        wait_for(lambda: {e["seq"] for e in sub.json("/events")} >= set(range(1, counted + 1)), 60, "every event")
        assert service.mqtt.dropped == 0
    finally:
        service.stop()
        sub.close()


def test_past_the_bound_the_oldest_events_are_dropped_and_counted(red_square_yolo: Path, tmp_path: Path) -> None:
    """No broker at start (the service runs and queues), a queue of 2: the oldest go, counted in the metric."""
    from streams_helpers import free_port

    from serve_helpers import http as get

    clip = square_clip(tmp_path / "pace.mp4", back_and_forth(3))
    absent = {"host": "127.0.0.1", "port": free_port(), "prefix": "p", "queue": 2}
    service = Service(config(red_square_yolo, [{"name": "gate", "source": str(clip)}], None, mqtt=absent))
    service.start()
    try:
        wait_for(lambda: service.streams is not None and service.streams.stats[0].frames == len(back_and_forth(3)), 120,
                 "every frame's result")  # fmt: skip
        assert service.mqtt is not None and service.mqtt.queued == 2 and service.mqtt.dropped == 3 * 4 - 2
        m = metrics(service.port or 0)
        assert m[("npu_zc_mqtt_events_dropped_total", ())] == 10
        assert m[("npu_zc_mqtt_connected", ())] == 0
        assert get(service.port or 0, "GET", "/health", token=TOKEN)[1]["mqtt"] == "disconnected"
        # Months of frames: a persistent Streams keeps its latest samples (Timings.trim on delivery), and the
        # inference summary's count and sum go on rising over the ones it let go.
        from npu_zc.pipeline.streams import FIGURES_WINDOW

        assert service.streams is not None
        frames = m[("npu_zc_inference_seconds_count", ())]
        service.streams.timings.samples["infer"].extend([1_000_000] * (3 * FIGURES_WINDOW))
        service.streams.timings.trim(FIGURES_WINDOW)
        assert len(service.streams.timings.samples["infer"]) == FIGURES_WINDOW
        after = metrics(service.port or 0)
        assert after[("npu_zc_inference_seconds_count", ())] == frames + 3 * FIGURES_WINDOW
        assert after[("npu_zc_inference_seconds_sum", ())] >= 3 * FIGURES_WINDOW * 1e-3
    finally:
        service.stop()


def test_credentials_the_broker_refuses_stop_the_start(red_square_yolo: Path, tmp_path: Path, broker: Broker) -> None:
    clip = square_clip(tmp_path / "walk.mp4", across_and_down()[:3])
    bad = broker.mqtt("p")
    bad["password"] = "wrong"
    service = Service(config(red_square_yolo, [{"name": "gate", "source": str(clip)}], None, mqtt=bad))
    with pytest.raises(ConfigError, match=r"^mqtt: the broker at 127\.0\.0\.1:\d+ refused the connection \(.*\): check mqtt\.username"):
        service.start()
    assert service.streams is None and service.http is None and not service.started


def test_tls_with_a_certificate_made_here(red_square_yolo: Path, tmp_path: Path) -> None:
    import ssl

    certs = make_tls(tmp_path / "certs")
    broker = Broker(tmp_path / "tls-broker", tls=certs)
    broker.start()
    try:
        sub = Subscriber(broker, ["npu_zc/tls/#"], client_id="tls-sub", ca_certs=str(certs / "ca.crt"), cert_reqs=ssl.CERT_REQUIRED)
        clip = square_clip(tmp_path / "walk.mp4", across_and_down())
        tls = broker.mqtt("npu_zc/tls", tls={"ca": str(certs / "ca.crt")})
        service = Service(config(red_square_yolo, [{"name": "gate", "source": str(clip)}], None, mqtt=tls))
        service.start()
        try:
            events = wait_for(lambda: (e := sub.json("/gate/events")) and len(e) >= 3 and e, 120, "the events over TLS")
            assert [e["event"] for e in events] == ["line_crossed", "zone_entered", "zone_left"]
        finally:
            service.stop()
        sub.close()
        # Without the CA the handshake fails: one sentence, nothing started.
        plain = Service(config(red_square_yolo, [{"name": "gate", "source": str(clip)}], None,
                               mqtt=broker.mqtt("p", tls=True)))  # fmt: skip
        with pytest.raises(ConfigError, match=r"^mqtt\.tls: the TLS handshake with the broker at 127\.0\.0\.1:\d+ failed"):
            plain.start()
        assert plain.streams is None
    finally:
        broker.stop()
