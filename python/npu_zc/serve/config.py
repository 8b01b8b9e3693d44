"""The service's configuration: a YAML file (PyYAML's ``safe_load``) or a dict, checked whole before anything
starts. Every refusal is one sentence naming the key (``lines[0].start``) and what is wrong with it; unknown
keys are refused, so that a misspelt key never silently does nothing."""

from __future__ import annotations

import ipaddress
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..analytics import ANCHORS, LINE_ANCHORS, LOST_FRAMES, ZONE_ANCHOR
from ..errors import InvalidArgumentError
from ..pipeline.scheduler import LIVE_FRAMES, MAX_LIVE_FRAMES
from ..sinks.mqtt import MqttConfig, TlsConfig

MAX_CONFIG_BYTES = 1 << 20
"""A config file larger than this is refused before it is parsed (no YAML a person writes is that long)."""

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
"""Stream, line and zone names: they become MQTT topic levels and metric labels (no '/', '+', '#', spaces)."""


class ConfigError(InvalidArgumentError):
    """A configuration that cannot run: one sentence naming the key."""


@dataclass
class StreamConfig:
    name: str
    source: str
    realtime: bool = False
    timeout: float = 5.0
    lines: list[LineConfig] = field(default_factory=list)
    """A POST /streams body's own lines (their ``stream`` is this one)."""
    zones: list[ZoneConfig] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "realtime": self.realtime, "timeout": self.timeout}


@dataclass
class LineConfig:
    name: str
    stream: str
    start: tuple[float, float]
    end: tuple[float, float]
    classes: list[int | str] | None = None
    anchors: list[str] = field(default_factory=lambda: list(LINE_ANCHORS))
    minimum_crossing_threshold: int = 1


@dataclass
class ZoneConfig:
    name: str
    stream: str
    polygon: list[tuple[float, float]]
    classes: list[int | str] | None = None
    anchor: list[str] = field(default_factory=lambda: [ZONE_ANCHOR])
    lost_frames: int = LOST_FRAMES


@dataclass
class HttpConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    max_streams: int = 64
    """Streams the service runs at most (a POST past it is refused with 409)."""
    live_fps: float = 2.0
    """Frames a second each stream's tile in the live view is drawn at, at most (drawing is off the inference
    path: only while a browser watches)."""


@dataclass
class Config:
    model: str
    device: str = "AUTO"
    options: dict[str, str] = field(default_factory=dict)
    tracker: str = "bytetrack"
    conf: float = 0.25
    iou: float = 0.7
    latency_budget_ms: float | None = 100.0
    live_frames: int = LIVE_FRAMES
    """The newest frames each stream's lane keeps for the model (``Streams(live_frames=)``)."""
    streams: list[StreamConfig] = field(default_factory=list)
    lines: list[LineConfig] = field(default_factory=list)
    zones: list[ZoneConfig] = field(default_factory=list)
    mqtt: MqttConfig | None = None
    http: HttpConfig | None = field(default_factory=HttpConfig)
    base: Path = field(default_factory=Path.cwd)
    """The folder relative paths (model, sources, certificates) are read from: the config file's."""


# --- checks: each names its key --------------------------------------------------------------------------


def _keys(value: Any, where: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping (key: value), got {_kind(value)}")
    for key in value:
        if key not in allowed:
            raise ConfigError(f"{_at(where, key)}: unknown key (known: {', '.join(allowed)})")
    for key in required:
        if key not in value or value[key] is None:
            raise ConfigError(f"{_at(where, key)} is required")
    return dict(value)


def _at(where: str, key: Any) -> str:
    key = _key(key)
    return key if not where or where == "the config" else f"{where}.{key}"


def _key(key: Any) -> str:
    """A key as a sentence shows it: as written where it is a plain name, else quoted (the input's own, it may hold
    anything, a line break too, and the sentence goes to a log and an HTTP client)."""
    return key if isinstance(key, str) and key.isidentifier() else repr(key)


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"[:80]


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be a non-empty string, got {_kind(value)}")
    return value


def _name(value: Any, where: str) -> str:
    text = _str(value, where)
    if not NAME.match(text):
        raise ConfigError(f"{where} {text!r} may hold only letters, digits, '_', '-' and '.' (1 to 64): it names MQTT topics and metrics")
    return text


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, got {_kind(value)}")
    return value


def _int(value: Any, where: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where} must be a whole number, got {_kind(value)}")
    if value < low or (high is not None and value > high):
        raise ConfigError(f"{where} must be from {low} to {high}, got {value}" if high is not None
                          else f"{where} must be at least {low}, got {value}")  # fmt: skip
    return value


def _number(value: Any, where: str, low: float | None = None, high: float | None = None, *, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where} must be a finite number, got {_kind(value)}")
    v = float(value)
    if low is not None and (v < low or (open_low and v == low)):
        raise ConfigError(f"{where} must be {'more than' if open_low else 'at least'} {low:g}, got {v:g}")
    if high is not None and v > high:
        raise ConfigError(f"{where} must be at most {high:g}, got {v:g}")
    return v


def _point(value: Any, where: str) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ConfigError(f"{where} must be a point [x, y], got {_kind(value)}")
    return _number(value[0], f"{where}[0]"), _number(value[1], f"{where}[1]")


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list, got {_kind(value)}")
    return value


def _classes(value: Any, where: str) -> list[int | str] | None:
    if value is None:
        return None
    out: list[int | str] = []
    for k, c in enumerate(_list(value, where)):
        if isinstance(c, bool) or not isinstance(c, (int, str)) or (isinstance(c, int) and c < 0) or c == "":
            raise ConfigError(f"{where}[{k}] must be a class name or id (0 or more), got {_kind(c)}")
        out.append(c)
    if not out:
        raise ConfigError(f"{where} is empty: leave it out to count every class")
    return out


def _anchors(value: Any, where: str) -> list[str]:
    names = [value] if isinstance(value, str) else _list(value, where)
    if not names:
        raise ConfigError(f"{where} needs at least one anchor, one of {', '.join(ANCHORS)}")
    for k, a in enumerate(names):
        if not isinstance(a, str) or a.lower() not in ANCHORS:
            raise ConfigError(f"{where}[{k}] must be one of {', '.join(ANCHORS)}, got {_kind(a)}")
    return [a.lower() for a in names]


def _host(value: Any, where: str) -> str:
    text = _str(value, where)
    if any(c.isspace() for c in text) or "/" in text:
        raise ConfigError(f"{where} must be a host name or an IP address, got {text!r}")
    return text


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and ``localhost``: what only this machine reaches."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- the sections ----------------------------------------------------------------------------------------

STREAM_KEYS = ("name", "source", "realtime", "timeout")


def stream_config(value: Any, where: str, *, analytics: bool = False) -> StreamConfig:
    """One stream (``streams[i]`` of the file, or a POST /streams body: ``analytics`` lets it carry its own
    ``lines`` and ``zones``, each as in the file less ``stream``)."""
    d = _keys(value, where, STREAM_KEYS + (("lines", "zones") if analytics else ()), ("name", "source"))
    name = _name(d["name"], f"{where}.name")

    def own(item: Any) -> Any:
        return {**item, "stream": name} if isinstance(item, Mapping) and "stream" not in item else item

    stream = StreamConfig(
        name=name,
        source=_str(d["source"], f"{where}.source"),
        realtime=_bool(d.get("realtime", False), f"{where}.realtime"),
        timeout=_number(d.get("timeout", 5.0), f"{where}.timeout", 0.0, 3600.0, open_low=True),
        lines=[_line(own(v), f"{where}.lines[{k}]") for k, v in enumerate(_list(d.get("lines"), f"{where}.lines"))],
        zones=[_zone(own(v), f"{where}.zones[{k}]") for k, v in enumerate(_list(d.get("zones"), f"{where}.zones"))],
    )
    owners = [("lines", k, v.stream) for k, v in enumerate(stream.lines)] + [("zones", k, v.stream) for k, v in enumerate(stream.zones)]
    for kind, k, owner in owners:
        if owner != name:
            raise ConfigError(f"{where}.{kind}[{k}].stream must be this stream ({name!r}) or left out")
    _unique([v.name for v in stream.lines], f"{where}.lines", "line")
    _unique([v.name for v in stream.zones], f"{where}.zones", "zone")
    return stream


def _line(value: Any, where: str) -> LineConfig:
    d = _keys(value, where, ("name", "stream", "start", "end", "classes", "anchors", "minimum_crossing_threshold"),
              ("name", "stream", "start", "end"))  # fmt: skip
    start, end = _point(d["start"], f"{where}.start"), _point(d["end"], f"{where}.end")
    if start == end:
        raise ConfigError(f"{where}: start and end are the same point {list(start)} (a line of zero length)")
    return LineConfig(
        name=_name(d["name"], f"{where}.name"), stream=_name(d["stream"], f"{where}.stream"), start=start, end=end,
        classes=_classes(d.get("classes"), f"{where}.classes"),
        anchors=_anchors(d.get("anchors", list(LINE_ANCHORS)), f"{where}.anchors"),
        minimum_crossing_threshold=_int(d.get("minimum_crossing_threshold", 1), f"{where}.minimum_crossing_threshold", 1, 1000),
    )  # fmt: skip


def _zone(value: Any, where: str) -> ZoneConfig:
    from ..analytics import Zone

    d = _keys(value, where, ("name", "stream", "polygon", "classes", "anchor", "lost_frames"), ("name", "stream", "polygon"))
    points = [_point(p, f"{where}.polygon[{k}]") for k, p in enumerate(_list(d["polygon"], f"{where}.polygon"))]
    if len(points) < 3:
        raise ConfigError(f"{where}.polygon needs at least three points, got {len(points)}")
    zone = ZoneConfig(
        name=_name(d["name"], f"{where}.name"), stream=_name(d["stream"], f"{where}.stream"), polygon=points,
        classes=_classes(d.get("classes"), f"{where}.classes"), anchor=_anchors(d.get("anchor", ZONE_ANCHOR), f"{where}.anchor"),
        lost_frames=_int(d.get("lost_frames", LOST_FRAMES), f"{where}.lost_frames", 1, 100000),
    )  # fmt: skip
    try:  # the core's own checks (crossing itself, no area): the sentence it gives, under this key
        Zone(points, anchor=zone.anchor)
    except InvalidArgumentError as exc:
        raise ConfigError(f"{where}.polygon: {str(exc).removeprefix('zone zone: ')}") from None
    return zone


def _tls(value: Any, where: str) -> TlsConfig | None:
    if value is None or value is False:
        return None
    if value is True:
        return TlsConfig()
    d = _keys(value, where, ("ca", "cert", "key", "insecure"))
    tls = TlsConfig(
        ca=None if d.get("ca") is None else _str(d["ca"], f"{where}.ca"),
        cert=None if d.get("cert") is None else _str(d["cert"], f"{where}.cert"),
        key=None if d.get("key") is None else _str(d["key"], f"{where}.key"),
        insecure=_bool(d.get("insecure", False), f"{where}.insecure"),
    )
    if (tls.cert is None) != (tls.key is None):
        raise ConfigError(f"{where}: give cert and key together (a client certificate and its key)")
    return tls


def _mqtt(value: Any, where: str = "mqtt") -> MqttConfig | None:
    if value is None:
        return None
    d = _keys(value, where, ("host", "port", "prefix", "username", "password", "tls", "client_id", "keepalive", "queue",
                             "detections_every", "detections_queue", "drain_timeout"))  # fmt: skip
    prefix = _str(d.get("prefix", "npu_zc"), f"{where}.prefix").strip("/")
    if any(c in prefix for c in "+#") or not prefix or "//" in prefix:
        raise ConfigError(f"{where}.prefix {prefix!r} must be topic levels without '+', '#' or empty levels")
    username = None if d.get("username") is None else _str(d["username"], f"{where}.username")
    password = None if d.get("password") is None else _str(d["password"], f"{where}.password")
    if password is not None and username is None:
        raise ConfigError(f"{where}.password is given without {where}.username")
    return MqttConfig(
        host=_host(d.get("host", "127.0.0.1"), f"{where}.host"), port=_int(d.get("port", 1883), f"{where}.port", 1, 65535),
        prefix=prefix, username=username, password=password, tls=_tls(d.get("tls"), f"{where}.tls"),
        client_id=None if d.get("client_id") is None else _str(d["client_id"], f"{where}.client_id"),
        keepalive=_int(d.get("keepalive", 30), f"{where}.keepalive", 5, 3600),
        queue=_int(d.get("queue", 10000), f"{where}.queue", 1, 10_000_000),
        detections_every=_int(d.get("detections_every", 1), f"{where}.detections_every", 0),
        detections_queue=_int(d.get("detections_queue", 100), f"{where}.detections_queue", 1, 1_000_000),
        drain_timeout=_number(d.get("drain_timeout", 5.0), f"{where}.drain_timeout", 0.0, 3600.0),
    )  # fmt: skip


def _http(value: Any, where: str = "http") -> HttpConfig | None:
    if value is False:
        return None
    d = _keys(value if value is not None else {}, where, ("host", "port", "token", "max_streams", "live_fps"))
    http = HttpConfig(
        host=_host(d.get("host", "127.0.0.1"), f"{where}.host"), port=_int(d.get("port", 8080), f"{where}.port", 0, 65535),
        token=None if d.get("token") is None else _str(d["token"], f"{where}.token"),
        max_streams=_int(d.get("max_streams", 64), f"{where}.max_streams", 1, 4096),
        live_fps=_number(d.get("live_fps", 2.0), f"{where}.live_fps", 0.0, 60.0, open_low=True),
    )  # fmt: skip
    if http.token is not None and len(http.token) < 16:
        raise ConfigError(f"{where}.token must be at least 16 characters (e.g. python -c 'import secrets; print(secrets.token_urlsafe())')")
    if not is_loopback(http.host) and http.token is None:
        raise ConfigError(f"{where}.host {http.host} is reachable from other machines: set {where}.token (every request must then carry it), "
                          "or bind 127.0.0.1")  # fmt: skip
    return http


TOP_KEYS = ("model", "device", "options", "tracker", "conf", "iou", "latency_budget_ms", "live_frames", "streams",
            "lines", "zones", "mqtt", "http")  # fmt: skip


def parse(data: Any, base: str | os.PathLike[str] | None = None) -> Config:
    """A config from a dict (what ``safe_load`` gives); relative paths are read from ``base``."""
    d = _keys(data, "the config", TOP_KEYS, ("model",))
    given = d.get("options") or {}
    options = _keys(given, "options", tuple(given) if isinstance(given, Mapping) else ())  # any key: the plugin's
    for key, v in options.items():
        if not isinstance(key, str) or isinstance(v, (list, dict)) or v is None:
            raise ConfigError(f"options.{_key(key)} must be a single value (an OpenVINO property), got {_kind(v)}")
    tracker = _str(d.get("tracker", "bytetrack"), "tracker")
    if tracker not in ("bytetrack", "none"):
        raise ConfigError(f"tracker must be bytetrack or none, got {tracker!r}")
    budget = d.get("latency_budget_ms", 100.0)
    config = Config(
        model=_str(d["model"], "model"), device=_str(d.get("device", "AUTO"), "device"),
        options={str(k): str(v) for k, v in options.items()}, tracker=tracker,
        conf=_number(d.get("conf", 0.25), "conf", 0.0, 1.0), iou=_number(d.get("iou", 0.7), "iou", 0.0, 1.0),
        latency_budget_ms=None if budget is None or budget == 0 else _number(budget, "latency_budget_ms", 0.0, open_low=True),
        live_frames=_int(d.get("live_frames", LIVE_FRAMES), "live_frames", 1, MAX_LIVE_FRAMES),
        streams=[stream_config(s, f"streams[{k}]") for k, s in enumerate(_list(d.get("streams"), "streams"))],
        lines=[_line(v, f"lines[{k}]") for k, v in enumerate(_list(d.get("lines"), "lines"))],
        zones=[_zone(v, f"zones[{k}]") for k, v in enumerate(_list(d.get("zones"), "zones"))],
        mqtt=_mqtt(d.get("mqtt")), http=_http(d.get("http")), base=Path(base) if base is not None else Path.cwd(),
    )  # fmt: skip
    _unique([s.name for s in config.streams], "streams", "stream")
    _unique([v.name for v in config.lines], "lines", "line")
    _unique([v.name for v in config.zones], "zones", "zone")
    names = {s.name for s in config.streams}
    placed: list[tuple[str, int, str]] = [("lines", k, v.stream) for k, v in enumerate(config.lines)]
    placed += [("zones", k, v.stream) for k, v in enumerate(config.zones)]
    for kind, k, stream in placed:
        if stream not in names:
            raise ConfigError(f"{kind}[{k}].stream names {stream!r}, which is not in streams "
                              f"({', '.join(sorted(names)) or 'none'})")  # fmt: skip
    if config.tracker == "none" and (config.lines or config.zones):
        raise ConfigError("tracker: lines and zones count tracks: set tracker: bytetrack (or drop lines and zones)")
    return config


def _unique(names: list[str], where: str, what: str) -> None:
    seen: set[str] = set()
    for k, name in enumerate(names):
        if name in seen:
            raise ConfigError(f"{where}[{k}].name {name!r}: another {what} has that name (names are unique)")
        seen.add(name)


def load(path: str | os.PathLike[str]) -> Config:
    """A config file: YAML (JSON is YAML too), read with ``safe_load``."""
    import yaml

    from .._files import read_regular_file

    p = Path(path)
    text = read_regular_file(p, "config file", ConfigError, limit=MAX_CONFIG_BYTES).decode("utf-8", "replace")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"{p}: {problem}{where}") from None
    if data is None:
        raise ConfigError(f"{p} is empty: it needs at least model: and streams:")
    return parse(data, p.resolve().parent)


__all__ = ["Config", "ConfigError", "HttpConfig", "LineConfig", "MqttConfig", "StreamConfig", "TlsConfig", "ZoneConfig",
           "is_loopback", "load", "parse", "stream_config"]  # fmt: skip
