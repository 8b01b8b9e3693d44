"""The service's config: every bad input is one sentence naming the key, before anything
starts; a good one parses to what it says."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("paho.mqtt", reason="the serve extra (paho-mqtt) is not installed")

from npu_zc.serve import ConfigError, Service, load, parse  # noqa: E402
from npu_zc.serve.service import check_source, redact  # noqa: E402

GOOD = """
model: yolo11n_openvino_model/
device: AUTO
options: {PERFORMANCE_HINT_NUM_REQUESTS: 4}
tracker: bytetrack
streams:
  - {name: gate, source: "rtsp://127.0.0.1:8554/cam1"}
  - {name: yard, source: yard.mp4, realtime: true}
lines:
  - {name: door, stream: gate, start: [100, 400], end: [900, 400], classes: [person]}
zones:
  - {name: lobby, stream: yard, polygon: [[0, 0], [640, 0], [640, 360], [0, 360]]}
mqtt: {host: 127.0.0.1, port: 1883, prefix: npu_zc/site1}
http: {host: 127.0.0.1, port: 8080}
"""


def base() -> dict[str, Any]:
    import yaml

    data: dict[str, Any] = yaml.safe_load(GOOD)
    return data


def test_the_issues_example_parses(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    path.write_text(GOOD)
    c = load(path)
    assert c.model == "yolo11n_openvino_model/" and c.base == tmp_path
    assert [s.name for s in c.streams] == ["gate", "yard"] and c.streams[1].realtime
    assert c.lines[0].start == (100.0, 400.0) and c.lines[0].classes == ["person"]
    assert c.lines[0].anchors == ["top_left", "top_right", "bottom_left", "bottom_right"]
    assert c.zones[0].anchor == ["bottom_center"] and len(c.zones[0].polygon) == 4
    assert c.mqtt is not None and c.mqtt.prefix == "npu_zc/site1" and c.mqtt.queue == 10000
    assert c.http is not None and c.http.port == 8080 and c.http.token is None
    assert c.options == {"PERFORMANCE_HINT_NUM_REQUESTS": "4"}
    assert c.live_frames == 2 and parse(change("live_frames", 1)).live_frames == 1


def change(path: str, value: Any) -> dict[str, Any]:
    data = base()
    node: Any = data
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    last = keys[-1]
    if value is KeyError:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


@pytest.mark.parametrize(
    "where, value, sentence",
    [
        ("colour", "red", r"^colour: unknown key \(known: model, "),
        ("lines.0.colour", "red", r"^lines\[0\]\.colour: unknown key"),
        ("mqtt.hots", "x", r"^mqtt\.hots: unknown key"),
        ("model", KeyError, r"^model is required$"),
        ("model", 5, r"^model must be a non-empty string, got int 5"),
        ("streams", {"name": "x"}, r"^streams must be a list"),
        ("streams.0.realtime", "yes", r"^streams\[0\]\.realtime must be true or false"),
        ("streams.1.name", "gate", r"^streams\[1\]\.name 'gate': another stream has that name"),
        ("streams.0.name", "a/b", r"^streams\[0\]\.name 'a/b' may hold only letters"),
        ("lines.0.end", [100, 400], r"^lines\[0\]: start and end are the same point \[100\.0, 400\.0\] \(a line of zero length\)"),
        ("lines.0.start", [1, 2, 3], r"^lines\[0\]\.start must be a point \[x, y\]"),
        ("lines.0.start", ["a", 1], r"^lines\[0\]\.start\[0\] must be a finite number"),
        ("lines.0.stream", "garage", r"^lines\[0\]\.stream names 'garage', which is not in streams \(gate, yard\)"),
        ("zones.0.stream", "garage", r"^zones\[0\]\.stream names 'garage'"),
        ("zones.0.polygon", [[0, 0], [1, 1]], r"^zones\[0\]\.polygon needs at least three points, got 2"),
        ("zones.0.polygon", [[0, 0], [10, 10], [10, 0], [0, 10]], r"^zones\[0\]\.polygon: .*crosses itself"),
        ("zones.0.anchor", "middle", r"^zones\[0\]\.anchor\[0\] must be one of center, "),
        ("mqtt.port", 70000, r"^mqtt\.port must be from 1 to 65535, got 70000"),
        ("mqtt.port", "1883", r"^mqtt\.port must be a whole number"),
        ("mqtt.prefix", "a/#", r"^mqtt\.prefix 'a/#' must be topic levels"),
        ("mqtt.password", "secret", r"^mqtt\.password is given without mqtt\.username"),
        ("mqtt.detections_queue", 0, r"^mqtt\.detections_queue must be from 1 to 1000000, got 0"),
        ("http.host", "0.0.0.0", r"^http\.host 0\.0\.0\.0 is reachable from other machines: set http\.token"),
        ("http.token", "short", r"^http\.token must be at least 16 characters"),
        ("tracker", "sort", r"^tracker must be bytetrack or none"),
        ("conf", 2, r"^conf must be at most 1"),
        ("live_frames", 5, r"^live_frames must be from 1 to 2, got 5"),
        ("live_frames", 1.5, r"^live_frames must be a whole number"),
    ],
)
def test_bad_input_is_one_sentence_naming_the_key(where: str, value: Any, sentence: str) -> None:
    with pytest.raises(ConfigError, match=sentence) as caught:
        parse(change(where, value))
    assert "\n" not in str(caught.value)


def test_a_token_opens_other_hosts() -> None:
    c = parse(change("http", {"host": "0.0.0.0", "token": "x" * 20}))
    assert c.http is not None and c.http.host == "0.0.0.0"


def test_bad_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: a\nstreams: [\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml: .* at line \d+, column \d+"):
        load(broken)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        load(empty)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="is a FIFO"):
        load(fifo)
    with pytest.raises(ConfigError, match="must be a mapping"):
        parse(["model"])


def test_sources_are_checked_as_the_cli_checks_them(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.mp4"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"is a FIFO \(named pipe\)"):
        check_source(str(fifo), tmp_path)
    with pytest.raises(ConfigError, match="is a character device"):
        check_source("/dev/zero", tmp_path)
    with pytest.raises(ConfigError, match="only network streams"):
        check_source("file:/etc/passwd", tmp_path)
    with pytest.raises(ConfigError, match="only network streams"):
        check_source("concat:a.mp4|b.mp4", tmp_path)
    with pytest.raises(ConfigError, match="No such file"):
        check_source("missing.mp4", tmp_path)
    (tmp_path / "clip.mp4").write_bytes(b"x")
    assert check_source("clip.mp4", tmp_path) == str(tmp_path / "clip.mp4")
    assert check_source("rtsp://127.0.0.1:8554/cam", tmp_path) == "rtsp://127.0.0.1:8554/cam"
    assert redact("rtsp://admin:hunter2@10.0.0.5:554/s") == "rtsp://admin:***@10.0.0.5:554/s"


def test_a_port_in_use_stops_the_start_before_anything_runs(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        data = {"model": "no-such-model.xml", "tracker": "none", "streams": [], "http": {"port": port}}
        service = Service(data)
        with pytest.raises(ConfigError, match=rf"^http\.port {port} on 127\.0\.0\.1 is in use"):
            service.start()
        assert service.streams is None and service.http is None and not service.started


# --- any input: taken, or refused with one sentence -----------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from npu_zc.serve.config import stream_config  # noqa: E402

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
"""What YAML's safe_load or a JSON body can give: any nesting of these (huge integers, NaN and infinities too)."""


def leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path to every value inside ``value`` (itself included)."""
    found = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            found += leaves(v, (*path, k))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            found += leaves(v, (*path, k))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = replaced(value[path[0]], path[1:], new)
    return copy


@settings(max_examples=300, deadline=None)
@given(st.data(), JSON)
def test_a_config_with_any_value_anywhere_parses_or_is_one_config_error(data: st.DataObject, new: Any) -> None:
    """The config is untrusted input: any value at any place of a good one (or in place of the whole) is taken or
    refused as a ConfigError naming where, never another exception."""
    good = base()
    path = data.draw(st.sampled_from(leaves(good)))
    try:
        parse(replaced(good, path, new))
    except ConfigError as exc:
        assert str(exc) and "\n" not in str(exc)


@settings(max_examples=300, deadline=None)
@given(st.data(), JSON)
def test_a_stream_body_with_any_value_anywhere_parses_or_is_one_config_error(data: st.DataObject, new: Any) -> None:
    """POST /streams' body, as the service reads it: the same rule."""
    good = {"name": "c", "source": "c.mp4", "realtime": False, "timeout": 2,
            "lines": [{"name": "c-door", "start": [0, 0], "end": [10, 10], "classes": ["person"]}],
            "zones": [{"name": "c-lobby", "polygon": [[0, 0], [9, 0], [9, 9]], "lost_frames": 5}]}  # fmt: skip
    path = data.draw(st.sampled_from(leaves(good)))
    try:
        stream_config(replaced(good, path, new), "the stream", analytics=True)
    except ConfigError as exc:
        assert str(exc) and "\n" not in str(exc)
