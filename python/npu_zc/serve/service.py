"""``npu-zc serve``: one :class:`~npu_zc.Streams` run (every camera into one model, zero copy) with lines and
zones counted per stream, events and results to MQTT, Prometheus metrics, and an HTTP API with a live view.

Start-up checks everything before it starts anything: the config, the HTTP port (bound first), the broker's
answer (refused credentials or TLS stop here; a broker that is not there does not), each source (opened), the
model (compiled), the class names lines and zones count. A failure is one sentence and leaves nothing running.

Per result, on the stream's delivery thread (after the tracker, never on the feeding or inference threads):
the stream's lines and zones (Rust), the metrics, the MQTT sink (events queued, never waited for), the live
view (a frame kept only while a browser watches). A sink that fails is logged, never stops the streams.

Stop (:meth:`Service.stop`, SIGTERM, Ctrl-C): the sources stop, frames in flight finish and are counted,
queued events get a few seconds to reach the broker, ``offline`` is published, the HTTP server closes.
"""

from __future__ import annotations

import collections
import functools
import logging
import os
import re
import signal
import stat
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Mapping

from ..analytics import Event, LineCounter, Zone
from ..detect import Detections
from ..errors import Error, InvalidArgumentError
from ..sources.video import NETWORK_SCHEMES, is_network, redact
from .config import Config, ConfigError, LineConfig, StreamConfig, ZoneConfig, load, parse, stream_config

if TYPE_CHECKING:
    from ..pipeline.streams import StreamResult, Streams, StreamStats
    from .http import HttpServer
    from ..sinks.live import LiveView
    from ..sinks.metrics import Metrics
    from ..sinks.mqtt import MqttSink

log = logging.getLogger("npu_zc.serve")

RECENT_EVENTS = 20
"""Events of each stream the live view and ``GET /streams`` show."""


class ServiceError(InvalidArgumentError):
    """A request the running service refuses (``conflict``: a duplicate name or no room: HTTP 409)."""

    def __init__(self, message: str, *, conflict: bool = False) -> None:
        super().__init__(message)
        self.conflict = conflict


def check_source(text: str, base: Path, where: str = "source") -> str:
    """A source as the CLI takes one, and no more: a network URL of a scheme FFmpeg reads as a stream, a
    V4L2 camera (``/dev/videoN``, a character device), or a regular file or folder. A FIFO, another device
    or an FFmpeg protocol (``file:``, ``pipe:``, ``concat:``...) is refused: the service would block on it
    or read what it should not. Returns the path or URL to open."""

    if is_network(text):
        return text
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", text):
        raise ConfigError(f"{where} {text!r}: only network streams ({', '.join(NETWORK_SCHEMES)}), cameras (/dev/videoN), "
                          "video files and folders of images are read")  # fmt: skip
    path = Path(text) if os.path.isabs(text) else base / text
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigError(f"{where} {text!r}: {exc.strerror or 'cannot be read'}") from None
    if re.fullmatch(r"/dev/video\d+", os.fspath(path)):
        if not stat.S_ISCHR(mode):
            raise ConfigError(f"{where} {text!r} is not a camera (a V4L2 character device)")
        return os.fspath(path)
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return os.fspath(path)
    from .._files import _kind

    raise ConfigError(f"{where} {text!r} is {_kind(mode)}: give a video file, a folder of images, a camera or a URL")


class Service:
    """The service of one config (a :class:`Config`, a dict as YAML gives, or a path to a YAML file).

    :meth:`start` (returns once everything runs), :meth:`stop` (drains), or :meth:`run` (start, then block
    until SIGTERM or Ctrl-C; returns the exit status). :meth:`add_stream` and :meth:`remove_stream` change
    the streams while it runs (what ``POST /streams`` and ``DELETE /streams/{name}`` call).
    """

    def __init__(self, config: Config | Mapping[str, Any] | str | os.PathLike[str]) -> None:
        if isinstance(config, Config):
            self.config = config
        elif isinstance(config, Mapping):
            self.config = parse(config)
        else:
            self.config = load(config)
        from ..sinks.metrics import Metrics  # the serve extra: imported when a service is made, not with npu_zc

        self.metrics: Metrics = Metrics()
        self.mqtt: MqttSink | None = None
        self.live: LiveView | None = None
        self.http: HttpServer | None = None
        self.streams: Streams | None = None
        self._sources: dict[str, StreamConfig] = {}
        self._lines: dict[str, list[LineCounter]] = {}
        self._zones: dict[str, list[Zone]] = {}
        self._recent: dict[str, collections.deque[dict[str, Any]]] = {}
        self._stream_of: dict[tuple[str, str], str] = {}
        """Each line's and zone's stream, by ("lines" or "zones", its name)."""
        self._added: dict[str, tuple[list[LineCounter], list[Zone]]] = {}
        """The lines and zones a POST /streams brought, by stream: they leave with it."""
        self._names: dict[int, str] = {}
        self._lock = threading.RLock()
        self._stopped = threading.Event()
        self._finished = threading.Event()
        self._runner: threading.Thread | None = None
        self._run_error: BaseException | None = None
        self._t0 = time.monotonic()
        self._signals = 0
        self.started = False

    # --- start ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Check and start everything, or nothing (a :class:`ConfigError` or the source's typed error)."""
        from ..detect.track import Tracker
        from ..pipeline.pipeline import Pipeline
        from ..pipeline.streams import Streams, default_deliverers, default_feeders
        from ..pipeline.workers import decodes_in_a_worker, default_workers
        from ..pipeline.yolo_postprocess import DetectOptions
        from ..runtime import CompileOptions
        from ..runtime.session import usable_cores

        c = self.config
        undo: list[Any] = []
        try:
            sock = None
            if c.http is not None:
                from .http import bind

                sock = bind(c.http)
                undo.append(sock.close)
            if c.mqtt is not None:
                from ..sinks.mqtt import MqttSink

                try:  # the sink's refusals (certificates, credentials) name the mqtt key: the config's error here
                    self.mqtt = MqttSink(c.mqtt, self.metrics, base=c.base)
                    self.mqtt.start()
                except InvalidArgumentError as exc:
                    raise ConfigError(str(exc)) from None
                undo.append(self.mqtt.close)
            opened = []
            for k, s in enumerate(c.streams):
                opened.append(self._open(s, f"streams[{k}].source"))
                undo.append(getattr(opened[-1], "close", lambda: None))
            model = c.base / c.model if (c.base / c.model).exists() else c.model
            options = CompileOptions(extra=dict(c.options))
            if c.latency_budget_ms is not None:  # a service's streams are live: results are waited for
                options = options.with_latency_budget(c.latency_budget_ms)
            try:
                pipeline = Pipeline(model, c.device, hint="throughput", options=options,
                                    detect=DetectOptions(conf=c.conf, iou=c.iou))  # fmt: skip
            except Error as exc:
                raise ConfigError(f"model {c.model}: {exc}") from None
            undo.append(pipeline.close)
            if pipeline.kind != "yolo" and (c.lines or c.zones or c.tracker != "none"):
                raise ConfigError(f"model {c.model} is a {pipeline.kind} model, not a detector: lines, zones and the "
                                  "tracker need one (set tracker: none and drop lines and zones to serve it)")  # fmt: skip
            self._names = dict(getattr(pipeline.postprocess, "names", None) or (pipeline.metadata.names if pipeline.metadata else {}))
            self._build_analytics()
            if c.http is not None:
                from ..sinks.live import LiveConfig, LiveView

                self.live = LiveView(LiveConfig(fps=c.http.live_fps), self.overlays)
                undo.append(self.live.close)
            most = max(len(c.streams), c.http.max_streams if c.http is not None else len(c.streams), 1)
            # Without HTTP no stream comes later: workers for the video streams it has. The live view (with HTTP)
            # needs the decoded frames here: no workers.
            videos = sum(map(decodes_in_a_worker, opened))
            workers = 0 if self.live is not None else default_workers(videos, usable_cores(), pipeline.device)
            try:  # persistent: the service runs on while no stream does (all ended, or none yet)
                self.streams = Streams(opened, pipeline, names=[s.name for s in c.streams], persistent=True,
                                       tracker=Tracker if c.tracker == "bytetrack" else None,
                                       keep_frames=self.live.wants if self.live is not None else False,
                                       live_frames=c.live_frames, feeders=default_feeders(most), workers=workers,
                                       deliverers=default_deliverers(most, workers=workers, device=pipeline.device))  # fmt: skip
            except InvalidArgumentError as exc:
                raise ConfigError(f"streams: {exc}") from None
            for s in c.streams:
                self._sources[s.name] = s
            if c.http is not None and sock is not None:
                from .http import HttpServer, make_app

                self.http = HttpServer(make_app(self, c.http), sock)
                self.http.start()
            self.metrics.watch(self._stats, self._inference)
        except BaseException:
            for step in reversed(undo):
                try:
                    step()
                except Exception:  # undoing: the first error is the one to report
                    pass
            self.mqtt = self.live = self.http = self.streams = None
            self._lines.clear()
            self._zones.clear()
            self._stream_of.clear()
            raise
        self._runner = threading.Thread(target=self._run_streams, name="npu_zc-serve", daemon=True)
        self._runner.start()
        self.started = True
        log.info("serving %d streams%s", len(c.streams), f" on http://{c.http.host}:{self.port}/" if c.http else "")

    @property
    def port(self) -> int | None:
        """The HTTP port (the one bound when the config says 0)."""
        return None if self.http is None else self.http.port

    def _open(self, s: StreamConfig, where: str) -> Any:
        from ..sources import open_source

        path = check_source(s.source, self.config.base, where)
        options: dict[str, Any] = {"name": s.name}
        if not os.path.isdir(path) and not path.startswith("/dev/video"):
            options.update(realtime=s.realtime, timeout=s.timeout)
        try:
            return open_source(path, **options)
        except Error as exc:
            raise type(exc)(f"{where}: {exc}") from None

    def _build_analytics(self) -> None:
        lines, zones = self._analytics(self.config.lines, self.config.zones, "")
        for line in lines:
            self._lines.setdefault(self._stream_of["lines", line.name], []).append(line)
        for zone in zones:
            self._zones.setdefault(self._stream_of["zones", zone.name], []).append(zone)

    def _analytics(self, lines: list[LineConfig], zones: list[ZoneConfig], where: str) -> tuple[list[LineCounter], list[Zone]]:
        """The counters of ``lines`` and ``zones`` (their classes resolved by the model's names), registered
        in the metrics; a name another line or zone has is refused (names are metric labels)."""
        named = [("lines", k, v.name) for k, v in enumerate(lines)] + [("zones", k, v.name) for k, v in enumerate(zones)]
        for kind, k, name in named:
            if (kind, name) in self._stream_of:
                raise ServiceError(f"{where}{kind}[{k}].name {name!r}: another {kind[:-1]} has that name", conflict=True)
        made_lines = [LineCounter(v.start, v.end, anchors=v.anchors, classes=self._class_ids(v.classes, f"{where}lines[{k}].classes"),
                                  minimum_crossing_threshold=v.minimum_crossing_threshold, name=v.name)
                      for k, v in enumerate(lines)]  # fmt: skip
        made_zones = [Zone(v.polygon, anchor=v.anchor, classes=self._class_ids(v.classes, f"{where}zones[{k}].classes"),
                           lost_frames=v.lost_frames, name=v.name) for k, v in enumerate(zones)]  # fmt: skip
        for line in lines:
            self._stream_of["lines", line.name] = line.stream
            self.metrics.add_line(line.name)
        for zone, made in zip(zones, made_zones):
            self._stream_of["zones", zone.name] = zone.stream
            self.metrics.add_zone(zone.name, occupancy=functools.partial(_occupancy, made))
        return made_lines, made_zones

    def _class_ids(self, classes: list[int | str] | None, where: str) -> list[int] | None:
        if classes is None:
            return None
        by_name = {v: k for k, v in self._names.items()}
        out = []
        for c in classes:
            if isinstance(c, int):
                if self._names and c not in self._names:
                    raise ConfigError(f"{where}: class id {c} is not one of this model's ({len(self._names)} classes)")
                out.append(c)
            elif c in by_name:
                out.append(by_name[c])
            else:
                known = ", ".join(list(by_name)[:12]) + (", ..." if len(by_name) > 12 else "")
                raise ConfigError(f"{where}: {c!r} is not a class of this model ({known or 'it names none: give ids'})")
        return out

    # --- the run ----------------------------------------------------------------------------------------

    def _run_streams(self) -> None:
        assert self.streams is not None
        try:
            self.streams.run([self._on_result], tick=self._tick, tick_seconds=1.0)
        except BaseException as exc:  # the streams' failure: the service stops with it
            self._run_error = exc
            log.error("the streams stopped: %s", exc)
            self._stopped.set()
        finally:
            self._finished.set()

    def _on_result(self, result: StreamResult) -> None:
        """A sink of sinks: never raises (a failing sink would stop every stream)."""
        try:
            events = self._analyse(result)
            self.metrics(result)
            if events:
                self.metrics.events(events)
                recent = self._recent.setdefault(result.name, collections.deque(maxlen=RECENT_EVENTS))
                wall = round(time.time(), 6)
                for e in events:
                    payload = e.to_dict()
                    payload["pts"] = payload.pop("time")
                    payload.update(stream=result.name, time=wall)
                    recent.append(payload)
                    if self.mqtt is not None:
                        self.mqtt.event(result.name, dict(payload))
            if self.mqtt is not None:
                self.mqtt(result)
            if self.live is not None:
                self.live(result)
        except Exception:
            log.exception("a result of stream %s could not be handled", result.name)

    def _analyse(self, result: StreamResult) -> list[Event]:
        lines, zones = self._lines.get(result.name), self._zones.get(result.name)
        dets = result.prediction
        if not (lines or zones) or not isinstance(dets, Detections) or dets.track_ids is None:
            return []
        t = result.pts if result.pts is not None else time.monotonic() - self._t0
        events: list[Event] = []
        for line in lines or ():
            events += line.update(dets, result.index, t)
        for zone in zones or ():
            events += zone.update(dets, result.index, t)  # its occupancy gauge reads the zone at each scrape
        return events

    def _tick(self, stats: list[StreamStats]) -> None:
        # The figures stay bounded on their own: a persistent Streams keeps its latest frames' samples.
        if self.mqtt is not None:
            self.metrics.mqtt_queued.set(self.mqtt.queued)

    def _stats(self) -> list[StreamStats]:
        return list(self.streams.stats) if self.streams is not None else []

    def _inference(self) -> tuple[int, float, Any] | None:
        """Inferences so far: (count, seconds in all, the recent ones' :class:`StageStats`)."""
        if self.streams is None:
            return None
        from ..pipeline.timing import StageStats

        timings = self.streams.timings
        count, total_ns = timings.total("infer")
        return count, total_ns / 1e9, StageStats.of(list(timings.samples["infer"]))

    # --- what the HTTP API calls ---------------------------------------------------------------------------

    def stream_names(self) -> list[str]:
        return [s.name for s in self._stats()]

    def overlays(self, stream: str) -> tuple[list[LineCounter], list[Zone]]:
        return list(self._lines.get(stream, ())), list(self._zones.get(stream, ()))

    def health(self) -> dict[str, Any]:
        stats = self._stats()
        return {"status": "stopping" if self._stopped.is_set() else "ok", "streams": len(stats),
                "running": sum(1 for s in stats if s.state == "running"),
                "mqtt": "off" if self.mqtt is None else "connected" if self.mqtt.connected else "disconnected",
                "uptime_s": round(time.monotonic() - self._t0, 3)}  # fmt: skip

    def streams_info(self) -> list[dict[str, Any]]:
        out = []
        for s in self._stats():
            d = s.to_dict()
            del d["stream"]
            source = self._sources.get(s.name)
            d["source"] = redact(source.source) if source is not None else None
            d["lines"] = [{"name": v.name, "in": v.in_count, "out": v.out_count} for v in self._lines.get(s.name, ())]
            d["zones"] = [{"name": z.name, "occupancy": z.occupancy, "entries": z.entries, "exits": z.exits}
                          for z in self._zones.get(s.name, ())]  # fmt: skip
            d["events"] = list(self._recent.get(s.name, ()))
            out.append(d)
        return out

    def add_stream(self, spec: Any) -> dict[str, Any]:
        """A stream added while the others run (``{name, source, realtime, timeout, lines, zones}``; its lines
        and zones as in the config, less ``stream``): checked and opened first."""
        s = stream_config(spec, "the stream", analytics=True)
        with self._lock:
            streams = self.streams
            if streams is None or self._stopped.is_set():
                raise ServiceError("the service is not running", conflict=True)
            names = self.stream_names()
            if s.name in names:
                raise ServiceError(f"a stream named {s.name!r} already runs: remove it first or choose another name", conflict=True)
            most = self.config.http.max_streams if self.config.http is not None else 64
            if len(names) >= most:
                raise ServiceError(f"the service runs {len(names)} streams, its most (http.max_streams): remove one first", conflict=True)
            check_source(s.source, self.config.base)
            for line in self._lines.get(s.name, ()):
                line.reset()  # a new run of the stream: new tracks
            for zone in self._zones.get(s.name, ()):
                zone.reset()
            lines, zones = self._analytics(s.lines, s.zones, "the stream.")
            self._lines[s.name] = [*self._lines.get(s.name, ()), *lines]
            self._zones[s.name] = [*self._zones.get(s.name, ()), *zones]
            self._added[s.name] = (lines, zones)
            try:
                source = self._open(s, "source")
                try:
                    stats = streams.add(source, name=s.name)
                except BaseException:
                    getattr(source, "close", lambda: None)()
                    raise
            except BaseException:
                self._drop_added(s.name)
                raise
            self._sources[s.name] = s
        log.info("stream %s added (%s)", s.name, redact(s.source))
        d: dict[str, Any] = stats.to_dict()
        d.pop("stream", None)
        return d

    def remove_stream(self, name: str) -> dict[str, Any]:
        """A stream removed (its final figures returned); the others run on."""
        with self._lock:
            streams = self.streams
            if streams is None:
                raise ServiceError("the service is not running", conflict=True)
            if name not in self.stream_names():
                raise KeyError(f"no stream is named {name!r}")
            stats = streams.remove(name)
            for zone in self._zones.get(name, ()):
                zone.reset()  # no longer watched: its occupancy gauge reads 0, not the tracks inside at the removal
            self._sources.pop(name, None)
            self._recent.pop(name, None)
            self._drop_added(name)
        if self.live is not None:
            self.live.forget(name)
        log.info("stream %s removed", name)
        d: dict[str, Any] = stats.to_dict()
        d.pop("stream", None)
        return d

    def _drop_added(self, stream: str) -> None:
        """The lines and zones a stream's POST brought leave with it (their metric series stay, as counters do)."""
        lines, zones = self._added.pop(stream, ([], []))
        self._lines[stream] = [v for v in self._lines.get(stream, ()) if v not in lines]
        self._zones[stream] = [v for v in self._zones.get(stream, ()) if v not in zones]
        for key in [("lines", v.name) for v in lines] + [("zones", v.name) for v in zones]:
            self._stream_of.pop(key, None)

    # --- stop ---------------------------------------------------------------------------------------------

    def stop(self, timeout: float = 30.0) -> None:
        """Drain and stop: frames in flight finish (their events counted and queued), events get a few
        seconds to reach the broker, ``offline`` is published, HTTP closes. Safe to call twice."""
        with self._lock:
            if not self.started:
                return
            self.started = False
            self._stopped.set()
        if self.streams is not None:
            self.streams.stop()
        if self._runner is not None:
            self._runner.join(timeout)
        if self.mqtt is not None:
            self.mqtt.close()
        if self.live is not None:
            self.live.close()
        if self.http is not None:
            self.http.stop()
        if self.streams is not None:
            pipeline = self.streams.pipeline
            self.streams.close()
            pipeline.close()
        log.info("stopped")

    def wait(self, timeout: float | None = None) -> bool:
        """Until :meth:`stop` is asked for (or the streams fail); True when it was."""
        return self._stopped.wait(timeout)

    def run(self) -> int:
        """Start, then serve until SIGTERM or Ctrl-C (the first drains and stops; a second exits at once).
        Returns 0 after a clean stop, 1 when the streams failed."""
        self.start()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            while not self._stopped.wait(0.5):
                pass
            self.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 1 if self._run_error is not None else 0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            os._exit(128 + signum)  # a second signal: at once, nothing drained
        log.info("%s: stopping (frames in flight finish; a second signal exits at once)", signal.Signals(signum).name)
        self._stopped.set()

    def __enter__(self) -> Service:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _occupancy(zone: Zone) -> float:
    return zone.occupancy


def serve(config: Config | Mapping[str, Any] | str | os.PathLike[str]) -> int:
    """Run the service of ``config`` until SIGTERM or Ctrl-C: ``npu-zc serve --config FILE`` from Python."""
    return Service(config).run()


__all__ = ["Service", "ServiceError", "check_source", "redact", "serve"]
