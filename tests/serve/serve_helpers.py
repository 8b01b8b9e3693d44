"""Real components for the service tests: Debian's mosquitto on 127.0.0.1 (a password file made with
mosquitto_passwd, TLS from a certificate made here with openssl), a paho subscriber, clips of a red square
that the red-square YOLO (tests/conftest.py) finds, and bounded waits."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pytest

from streams_helpers import free_port, wait_port

av = pytest.importorskip("av")
mqtt = pytest.importorskip("paho.mqtt.client", reason="the serve extra (paho-mqtt) is not installed")

USER, PASSWORD = "npu", "zc-test-password"
SIZE = 640
"""Clips are 640x640: the red-square model's own input size (no letterbox: frame pixels are input pixels)."""
SQUARE = 64


def needs(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: scripts/setup.sh installs mosquitto, mosquitto-clients, chromium, openssl")


def wait_for(check: Callable[[], Any], timeout: float, what: str, every: float = 0.05) -> Any:
    """Polls ``check`` until it returns something truthy; fails naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


class Broker:
    """mosquitto on 127.0.0.1 with a password file (and TLS when ``tls`` is a folder with ca/server certs);
    persistence on, so that a subscriber's session (and the messages queued for it) survive a restart."""

    def __init__(self, folder: Path, *, tls: Path | None = None) -> None:
        needs("mosquitto", "mosquitto_passwd")
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        passwords = folder / "passwd"
        subprocess.run(["mosquitto_passwd", "-c", "-b", str(passwords), USER, PASSWORD], check=True, capture_output=True)
        lines = [f"listener {self.port} 127.0.0.1", "allow_anonymous false", f"password_file {passwords}",
                 "persistence true", f"persistence_location {folder}/", "log_dest stderr", "log_type error"]  # fmt: skip
        if os.geteuid() == 0:  # as root mosquitto drops to its own user, which cannot read pytest's folders
            lines.append("user root")
        if tls is not None:
            lines += [f"cafile {tls / 'ca.crt'}", f"certfile {tls / 'server.crt'}", f"keyfile {tls / 'server.key'}"]
        self.conf = folder / "mosquitto.conf"
        self.conf.write_text("\n".join(lines) + "\n")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(["mosquitto", "-c", str(self.conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_port(self.port)

    def stop(self) -> None:
        """SIGTERM: the broker saves its sessions, then exits."""
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def mqtt(self, prefix: str, **more: Any) -> dict[str, Any]:
        return {"host": "127.0.0.1", "port": self.port, "prefix": prefix, "username": USER, "password": PASSWORD, **more}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A mosquitto of its own on 127.0.0.1 for a test, stopped after it."""
    b = Broker(tmp_path / "broker")
    b.start()
    yield b
    b.stop()


def make_tls(folder: Path) -> Path:
    """A CA and a server certificate for 127.0.0.1 (openssl)."""
    needs("openssl")
    folder.mkdir(parents=True, exist_ok=True)

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=npu_zc test CA", "-keyout", "ca.key", "-out", "ca.crt")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr")
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
        "-extfile", "san.ext", "-out", "server.crt")  # fmt: skip
    return folder


class Subscriber:
    """A paho client keeping every message of ``topics`` (a persistent session: QoS 1 messages published
    while it was away, the broker restarting included, come when it is back)."""

    def __init__(self, broker: Broker, topics: Iterable[str], client_id: str = "npu_zc-test-sub", **tls: Any) -> None:
        from paho.mqtt.enums import CallbackAPIVersion

        self.messages: list[tuple[str, bytes, bool]] = []
        self.lock = threading.Lock()
        self.topics = list(topics)
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
        c.username_pw_set(USER, PASSWORD)
        if tls:
            c.tls_set(**tls)
        c.on_connect = lambda client, *_: [client.subscribe(t, qos=1) for t in self.topics]
        c.on_message = self._message
        c.reconnect_delay_set(1, 2)
        c.connect("127.0.0.1", broker.port)
        c.loop_start()
        self.client = c
        wait_for(lambda: c.is_connected(), 10, "the subscriber to connect")

    def _message(self, client: Any, userdata: Any, message: Any) -> None:
        with self.lock:
            self.messages.append((message.topic, message.payload, bool(message.retain)))

    def json(self, suffix: str) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(p) for t, p, _ in self.messages if t.endswith(suffix)]

    def texts(self, topic: str) -> list[str]:
        with self.lock:
            return [p.decode() for t, p, _ in self.messages if t == topic]

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


# --- clips of a red square the red-square YOLO finds ------------------------------------------------------


def square_at(col: int, row: int) -> tuple[int, int, int, int]:
    """The red square the model finds at stride-16 anchor (col, row), in frame pixels (640x640 frames)."""
    x1, y1 = 16 * col + 8 - SQUARE // 2, 16 * row + 8 - SQUARE // 2
    return x1, y1, x1 + SQUARE, y1 + SQUARE


def square_clip(path: Path, path_cells: list[tuple[int, int]], fps: int = 30) -> Path:
    """A 640x640 clip (lossless H.264) of one red square on grey at each (col, row) of ``path_cells``, a frame each."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width = stream.height = SIZE
        stream.pix_fmt = "yuv444p"
        stream.options = {"qp": "0", "preset": "ultrafast"}
        for col, row in path_cells:
            rgb = np.full((SIZE, SIZE, 3), 90, np.uint8)
            x1, y1, x2, y2 = square_at(col, row)
            rgb[y1:y2, x1:x2] = (255, 0, 0)
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def across_and_down() -> list[tuple[int, int]]:
    """Right along row 12 from column 4 to 30 (crossing x = 320 at column 20), then down column 30 to row 36:
    into the zone x 400..640, y 0..400 (bottom centre inside from column 25) and out of it below (from row 23)."""
    return [(c, 12) for c in range(4, 31)] + [(30, r) for r in range(13, 37)]


LINE = {"name": "door", "start": [320, 20], "end": [320, 620]}
"""Upright, drawn downwards: "in" is to its right on the screen (the square comes in moving right)."""
ZONE = {"name": "lobby", "polygon": [[400, 0], [639, 0], [639, 400], [400, 400]]}
ENTER_FRAME = 25 - 4
"""The first frame whose square's bottom centre (x = 16 col + 8) is at x >= 400: column 25."""
LEAVE_FRAME = 27 + (23 - 13)
"""The first frame whose bottom (16 row + 40) is below y = 400: row 23 (frames 0-26 are row 12)."""


def back_and_forth(times: int) -> list[tuple[int, int]]:
    """Across x = 320 and back, ``times`` times (each way: columns 12 to 28 on row 12)."""
    cells: list[tuple[int, int]] = []
    for _ in range(times):
        cells += [(c, 12) for c in range(12, 29)] + [(c, 12) for c in range(28, 11, -1)]
    return cells


def http(port: int, method: str, path: str, body: Any = None, token: str | None = None, raw: bytes | None = None) -> tuple[int, Any]:
    """One request to the service; (status, JSON or bytes)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, payload, kind = response.status, response.read(), response.headers.get("content-type", "")
    except urllib.error.HTTPError as exc:
        status, payload, kind = exc.code, exc.read(), exc.headers.get("content-type", "")
    return status, json.loads(payload) if "json" in kind else payload


def metrics_value(port: int, name: str, token: str | None = None, **labels: str) -> float:
    """One sample of GET /metrics (prometheus-client's parser); 0 when absent."""
    from prometheus_client.parser import text_string_to_metric_families

    status, text = http(port, "GET", "/metrics", token=token)
    assert status == 200, text
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


TOKEN = "t0ken-for-the-tests-0123456789"


def config(model: Path, streams: list[dict[str, Any]], broker: Broker | None, prefix: str = "npu_zc/test", **more: Any) -> dict[str, Any]:
    """A service config over the red-square YOLO on the CPU in f32: the line and the zone on the first stream, HTTP
    on any free port with :data:`TOKEN`, MQTT to ``broker`` under ``prefix``."""
    c: dict[str, Any] = {
        "model": str(model), "device": "CPU", "options": {"INFERENCE_PRECISION_HINT": "f32"}, "streams": streams,
        "lines": [{**LINE, "stream": streams[0]["name"], "classes": ["person"]}] if streams else [],
        "zones": [{**ZONE, "stream": streams[0]["name"]}] if streams else [],
        "http": {"port": 0, "token": TOKEN},
    }  # fmt: skip
    if broker is not None:
        c["mqtt"] = broker.mqtt(prefix)
    c.update(more)
    return c
