"""Streams added and removed over REST while the others run; the live view in a real browser (Debian's
chromium, headless); `npu-zc serve` as a process: SIGTERM drains and publishes offline, two processes
publish into one broker under their own prefixes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from serve_helpers import LINE, TOKEN, ZONE, Broker, broker, Subscriber, across_and_down, back_and_forth, config, http, metrics_value, needs, square_clip, wait_for

from npu_zc.serve import Service


def names(port: int) -> list[str]:
    return [s["name"] for s in http(port, "GET", "/streams", token=TOKEN)[1]["streams"]]


def test_streams_come_and_go_over_rest_while_the_others_keep_their_order(red_square_yolo: Path, tmp_path: Path, broker: Broker) -> None:
    long = square_clip(tmp_path / "long.mp4", back_and_forth(8))
    short = square_clip(tmp_path / "short.mp4", across_and_down())
    sub = Subscriber(broker, ["npu_zc/test/+/detections"])
    c = config(red_square_yolo, [{"name": "a", "source": str(long)}, {"name": "b", "source": str(long)}], broker)
    c["http"]["max_streams"] = 3
    service = Service(c)
    service.start()
    try:
        port = service.port or 0
        # A stream may bring its own line and zone (as in the config, less "stream"); their names are unique.
        zero = {"name": "c", "source": str(short), "lines": [{"name": "c-door", "start": [5, 5], "end": [5, 5]}]}
        status, body = http(port, "POST", "/streams", zero, token=TOKEN)
        assert status == 422 and body["error"] == "the stream.lines[0]: start and end are the same point [5.0, 5.0] (a line of zero length)"
        taken = {"name": "c", "source": str(short), "lines": [{**LINE}]}
        status, body = http(port, "POST", "/streams", taken, token=TOKEN)
        assert status == 409 and body["error"] == "the stream.lines[0].name 'door': another line has that name"
        own = {"name": "c", "source": str(short), "lines": [{**LINE, "name": "c-door"}], "zones": [{**ZONE, "name": "c-lobby"}]}
        status, added = http(port, "POST", "/streams", own, token=TOKEN)
        assert status == 201 and added["name"] == "c"
        status, removed = http(port, "DELETE", "/streams/b", token=TOKEN)
        assert status == 200 and removed["name"] == "b"
        assert names(port) == ["a", "c"]
        # A thousand adds: past the bound each is refused (409, JSON), the running streams unharmed.
        http(port, "POST", "/streams", {"name": "d", "source": str(short)}, token=TOKEN)
        refused = [http(port, "POST", "/streams", {"name": f"x{k}", "source": str(short)}, token=TOKEN) for k in range(1000)]
        assert {s for s, _ in refused} == {409} and "its most (http.max_streams)" in refused[0][1]["error"]
        assert names(port) == ["a", "c", "d"]
        assert http(port, "DELETE", "/streams/b", token=TOKEN)[0] == 404
        frames = {"a": len(back_and_forth(8)), "c": len(across_and_down()), "d": len(across_and_down())}
        wait_for(lambda: all(s["frames"] == frames[s["name"]] for s in http(port, "GET", "/streams", token=TOKEN)[1]["streams"]),
                 180, "every frame of a, c and d")  # fmt: skip
        results = wait_for(lambda: (r := sub.json("/detections")) and len([d for d in r if d["name"] == "a"]) == frames["a"] and r,
                           30, "a's results")  # fmt: skip
        for name in ("a", "c", "d"):
            assert [d["index"] for d in results if d["name"] == name] == list(range(frames[name]))
        (c,) = [s for s in http(port, "GET", "/streams", token=TOKEN)[1]["streams"] if s["name"] == "c"]
        assert c["lines"] == [{"name": "c-door", "in": 1, "out": 0}]
        assert c["zones"] == [{"name": "c-lobby", "occupancy": 0, "entries": 1, "exits": 1}]
        wait_for(lambda: len([d for d in sub.json("/detections") if d["name"] == "b"]) >= removed["frames"], 30, "b's results")
        b = [d["index"] for d in sub.json("/detections") if d["name"] == "b"]
        assert b == list(range(len(b))) and len(b) == removed["frames"]  # in order up to its removal, each once
    finally:
        service.stop()
        sub.close()


def test_a_removed_streams_zone_reads_empty_not_its_last_count(red_square_yolo: Path, tmp_path: Path) -> None:
    """A zone is watched through its stream: once the stream is removed its occupancy gauge reads 0, not the tracks
    that were inside at the removal (a dashboard would count people nobody sees), and its counters keep their counts."""
    inside = square_clip(tmp_path / "inside.mp4", [(30, 12)] * 60)  # bottom centre (488, 232): in the zone throughout
    service = Service(config(red_square_yolo, [{"name": "a", "source": str(inside)}], None))
    service.start()
    try:
        port = service.port or 0
        occupancy = lambda: metrics_value(port, "npu_zc_zone_occupancy", TOKEN, zone="lobby")  # noqa: E731
        wait_for(lambda: occupancy() == 1, 120, "the square in the zone")
        assert http(port, "DELETE", "/streams/a", token=TOKEN)[0] == 200
        assert occupancy() == 0
        assert metrics_value(port, "npu_zc_zone_entries_total", TOKEN, zone="lobby") == 1
        assert metrics_value(port, "npu_zc_zone_exits_total", TOKEN, zone="lobby") == 0
    finally:
        service.stop()


def chromium(url: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    needs("chromium")
    command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
               f"--user-data-dir={out.parent / 'profile'}", "--virtual-time-budget=8000", *args, url]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_the_live_view_in_a_browser_shows_every_stream_with_its_boxes(red_square_yolo: Path, tmp_path: Path) -> None:
    import cv2

    # Files, not paced: no frame is dropped, so the square is tracked on every frame (a live stream's drops
    # can lose its track for a frame or two, and that frame's tile then has no box).
    clip = square_clip(tmp_path / "pace.mp4", back_and_forth(30))
    streams = [{"name": "left", "source": str(clip)}, {"name": "right", "source": str(clip)}]
    service = Service(config(red_square_yolo, streams, None))
    service.start()
    try:
        port = service.port or 0
        for name in ("left", "right"):  # watched: the service draws their tiles from now on
            wait_for(lambda n=name: http(port, "GET", f"/live/{n}.jpg", token=TOKEN)[0] == 200, 60, f"{name}'s first tile")
        tile = cv2.imdecode(np.frombuffer(http(port, "GET", "/live/left.jpg", token=TOKEN)[1], np.uint8), cv2.IMREAD_COLOR)
        assert tile.shape == (640, 640, 3)
        url = f"http://127.0.0.1:{port}/?token={TOKEN}"
        dom = chromium(url, tmp_path / "dom", "--dump-dom")
        assert dom.returncode == 0, dom.stderr
        for name in ("left", "right"):
            assert f'data-stream="{name}"' in dom.stdout and f"/live/{name}.jpg?token=" in dom.stdout
        shot = tmp_path / "shot.png"
        done = chromium(url, tmp_path / "shot", f"--screenshot={shot}", "--window-size=800,1000")
        assert done.returncode == 0 and shot.exists(), done.stderr
        picture = cv2.imread(str(shot))
        # The class-0 box and its label are drawn in Ultralytics' first colour, BGR (255, 42, 4): in each
        # tile (two columns at this width), pixels of it, where the red square is.
        box = np.all(np.abs(picture.astype(int) - (255, 42, 4)) < 40, axis=2)
        red = np.all(np.abs(picture.astype(int) - (0, 0, 255)) < 40, axis=2)
        half = picture.shape[1] // 2
        for columns in (slice(0, half), slice(half, None)):
            assert box[:, columns].sum() > 50, "no drawn box in a tile"
            assert red[:, columns].sum() > 200, "no red square in a tile"
    finally:
        service.stop()


def serve_process(config_path: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "npu_zc", "serve", "--config", str(config_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip


def test_two_serve_processes_into_one_broker_and_sigterm_drains(red_square_yolo: Path, tmp_path: Path, broker: Broker) -> None:
    import yaml

    clip = square_clip(tmp_path / "walk.mp4", across_and_down())
    sub = Subscriber(broker, ["site/#"])
    processes = []
    for box in ("box1", "box2"):
        c = config(red_square_yolo, [{"name": "gate", "source": str(clip)}], broker, prefix=f"site/{box}")
        c["http"] = {"port": 0}
        c["mqtt"]["detections_every"] = 1 if box == "box1" else 10  # box2 thins its results to one in ten
        path = tmp_path / f"{box}.yaml"
        path.write_text(yaml.safe_dump(c))
        processes.append(serve_process(path))
    try:
        for box in ("box1", "box2"):
            events = wait_for(lambda b=box: len(sub.json(f"site/{b}/gate/events")) >= 3 and sub.json(f"site/{b}/gate/events"),
                              180, f"{box}'s events")  # fmt: skip
            assert [e["event"] for e in events] == ["line_crossed", "zone_entered", "zone_left"]
            assert sub.texts(f"site/{box}/status")[-1] == "online"
        frames = len(across_and_down())
        wait_for(lambda: len(sub.json("site/box1/gate/detections")) == frames, 30, "box1's results")
        wait_for(lambda: len(sub.json("site/box2/gate/detections")) == len(range(0, frames, 10)), 30, "box2's results")
        assert [d["index"] for d in sub.json("site/box2/gate/detections")] == list(range(0, frames, 10))
        for p in processes:
            p.send_signal(signal.SIGTERM)
        for p in processes:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            assert "stopping" in err and "Traceback" not in err
        for box in ("box1", "box2"):
            wait_for(lambda b=box: sub.texts(f"site/{b}/status")[-1:] == ["offline"], 10, f"{box}'s offline status")
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
        sub.close()


def test_a_bad_config_is_one_line_and_no_process_left(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    path.write_text(json.dumps({"model": "m.xml", "streams": [{"name": "a", "source": "a.mp4"}],
                                "lines": [{"name": "l", "stream": "b", "start": [0, 0], "end": [1, 1]}]}))  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "npu_zc", "serve", "--config", str(path)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == "npu-zc: error: lines[0].stream names 'b', which is not in streams (a)"




def test_an_rtsp_camera_added_over_rest_beside_a_file(red_square_yolo: Path, tmp_path: Path, broker: Broker) -> None:
    """GStreamer's RTSP server (the streams tests'): a live stream added over REST, its results on MQTT in order."""
    from streams_helpers import RtspServer, rtsp_available

    if not rtsp_available():
        pytest.fail("GStreamer's RTSP server is missing: scripts/setup.sh installs gir1.2-gst-rtsp-server-1.0")
    clip = square_clip(tmp_path / "walk.mp4", across_and_down())
    server = RtspServer({"cam": clip})
    server.start()
    sub = Subscriber(broker, ["npu_zc/test/cam/detections"])
    service = Service(config(red_square_yolo, [{"name": "gate", "source": str(clip)}], broker))
    service.start()
    try:
        port = service.port or 0
        status, body = http(port, "POST", "/streams", {"name": "cam", "source": server.url("cam")}, token=TOKEN)
        assert status == 201 and body["live"], body
        wait_for(lambda: len(sub.json("/detections")) >= 10, 120, "the camera's results")
        (cam,) = [s for s in http(port, "GET", "/streams", token=TOKEN)[1]["streams"] if s["name"] == "cam"]
        assert cam["live"] and cam["source"] == server.url("cam")
        indices = [d["index"] for d in sub.json("/detections")]
        assert indices == sorted(set(indices))  # in order, each once (a live stream may drop some)
    finally:
        service.stop()
        server.stop()
        sub.close()


def test_a_second_signal_exits_at_once(red_square_yolo: Path, tmp_path: Path, broker: Broker) -> None:
    """The broker frozen (SIGSTOP) with events in flight: the first SIGTERM's drain waits for it (here up to a
    minute); the second signal ends the process at once, status 128 + 15, without the drain's end."""
    import yaml

    from serve_helpers import metrics_value

    clip = square_clip(tmp_path / "pace.mp4", back_and_forth(12))
    c = config(red_square_yolo, [{"name": "gate", "source": str(clip), "realtime": True}], broker)
    c["http"] = {"port": 0}
    c["mqtt"]["drain_timeout"] = 60
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(c))
    process = serve_process(path)
    assert process.stderr is not None
    try:
        port = int(wait_for(lambda: _serving_port(process), 120, "the service to listen"))
        wait_for(lambda: metrics_value(port, "npu_zc_mqtt_events_published_total") >= 1, 120, "a first event")
        assert broker.process is not None
        broker.process.send_signal(signal.SIGSTOP)
        after = metrics_value(port, "npu_zc_mqtt_events_published_total")
        # An event handed to paho after the freeze: unacknowledged, so the drain has something to wait for.
        wait_for(lambda: metrics_value(port, "npu_zc_mqtt_events_published_total") > after, 120, "an event after the freeze")
        process.send_signal(signal.SIGTERM)
        wait_for(lambda: "stopping" in process.stderr.readline(), 30, "the first signal's stop")  # type: ignore[union-attr]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 128 + signal.SIGTERM
        assert "stopped" not in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if broker.process is not None:
            broker.process.send_signal(signal.SIGCONT)


def _serving_port(process: subprocess.Popen[str]) -> int | None:
    """The port from the service's first log line ("serving N streams on http://127.0.0.1:PORT/")."""
    import re

    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    return int(found.group(1)) if found else None
