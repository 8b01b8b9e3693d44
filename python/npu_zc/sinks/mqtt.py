"""Results and events to an MQTT broker with paho-mqtt: what a site's other systems (Home Assistant, Node-RED,
a historian) listen to.

* ``{prefix}/{stream}/detections``: each result (every ``detections_every``-th of a stream) as JSON, in the
  shape ``npu-zc stream --json`` writes, plus ``time``; QoS 0, sent only while the broker is there (a result
  is stale a second later). At most ``detections_queue`` of them wait in paho's outgoing buffer (handed over,
  not yet written to the socket): past that, while the broker is connected but does not keep up, a result's
  message is dropped and counted (``npu_zc_mqtt_detections_dropped_total``).
* ``{prefix}/{stream}/events``: each line crossing and zone entry or exit; QoS 1 (at least once: a consumer
  that must count each once keeps ``seq``, unique per process and topic prefix).
* ``{prefix}/status``: ``online``, retained; ``offline`` on a clean stop, and as the broker's last will when
  the process dies.

Events never wait on the broker: :meth:`MqttSink.event` appends to a bounded queue and returns; a thread hands
them to paho while the broker is connected, at most :data:`WINDOW` unacknowledged (paho sends those again
after a reconnect). While the broker is away the queue holds ``mqtt.queue`` events; past that the oldest are
dropped and counted (``npu_zc_mqtt_events_dropped_total``). paho reconnects on its own, with back-off
(:data:`RECONNECT_MIN_S` doubling to :data:`RECONNECT_MAX_S`).
"""

from __future__ import annotations

import collections
import json
import logging
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    from ..pipeline.streams import StreamResult
    from .metrics import Metrics

log = logging.getLogger("npu_zc.sinks.mqtt")

WINDOW = 100
"""Events handed to paho and not yet acknowledged by the broker, at most."""
RECONNECT_MIN_S = 1
RECONNECT_MAX_S = 30
CONNECT_TIMEOUT_S = 5.0
"""The first connection at start: how long to wait for the broker's answer."""

@dataclass
class TlsConfig:
    ca: str | None = None
    """The CA certificate that signed the broker's (None: the system's)."""
    cert: str | None = None
    key: str | None = None
    insecure: bool = False
    """Skip the host name check (a test broker's certificate made for another name)."""


@dataclass
class MqttConfig:
    """The sink's settings (the service's ``mqtt:`` section, each key a field)."""

    host: str = "127.0.0.1"
    port: int = 1883
    prefix: str = "npu_zc"
    username: str | None = None
    password: str | None = None
    tls: TlsConfig | None = None
    client_id: str | None = None
    keepalive: int = 30
    queue: int = 10000
    """Events held while the broker is away; past this the oldest are dropped (and counted)."""
    detections_every: int = 1
    """Publish every Nth result of each stream on {prefix}/{stream}/detections (0: none)."""
    detections_queue: int = 100
    """Detection messages waiting in paho's outgoing buffer, at most; past this a result's message is dropped."""
    drain_timeout: float = 5.0
    """At a stop: seconds queued events may take to reach the broker before they are given up."""

    def check(self) -> None:
        """Refuse settings the sink cannot run with (:class:`~npu_zc.InvalidArgumentError`, naming the key)."""
        if not 1 <= self.port <= 65535:
            raise InvalidArgumentError(f"mqtt.port must be from 1 to 65535, got {self.port}")
        prefix = self.prefix.strip("/")
        if not prefix or any(c in prefix for c in "+#") or "//" in prefix:
            raise InvalidArgumentError(f"mqtt.prefix {self.prefix!r} must be topic levels without '+', '#' or empty levels")
        if self.password is not None and self.username is None:
            raise InvalidArgumentError("mqtt.password is given without mqtt.username")
        for key, low in (("keepalive", 5), ("queue", 1), ("detections_every", 0), ("detections_queue", 1)):
            if getattr(self, key) < low:
                raise InvalidArgumentError(f"mqtt.{key} must be at least {low}, got {getattr(self, key)}")
        if not self.drain_timeout >= 0:
            raise InvalidArgumentError(f"mqtt.drain_timeout must be at least 0, got {self.drain_timeout}")


# MQTT 3.1.1 CONNACK codes and MQTT 5 reason codes that mean "your credentials or certificate are refused".
_REFUSED = {4, 5, 134, 135, 138}


class MqttSink:
    """A :class:`~npu_zc.sinks.Sink` (``__call__(result)``, ``close()``) publishing to one broker.

    ``start()`` connects; ``event(stream, payload)`` queues an event; ``metrics`` (a :class:`~npu_zc.sinks.Metrics`,
    optional) counts what is published and dropped; ``base`` is the folder relative certificate paths are read from."""

    def __init__(self, config: MqttConfig, metrics: Metrics | None = None, *, base: Path | None = None) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        config.check()
        self.config = config
        self.metrics = metrics
        self.prefix = config.prefix.strip("/")
        self.status_topic = f"{self.prefix}/status"
        self._mqtt = mqtt
        self._queue: collections.deque[tuple[str, bytes]] = collections.deque()
        self._lock = threading.Condition()
        # Events handed to paho, oldest first, until the broker acknowledged them (paho keeps them, and sends them
        # again after a reconnect, till then).
        self._sent: collections.deque[Any] = collections.deque()
        self._connected = False
        self._refused: str | None = None
        self._answered = threading.Event()
        self._closing = False
        self._seq = 0
        self._every: dict[str, int] = {}
        # QoS 0 messages paho has not written to the socket yet: paho's own buffer for them has no bound.
        self._detections: collections.deque[Any] = collections.deque()
        self._detections_lock = threading.Lock()
        self.dropped = 0
        self.detections_dropped = 0
        self.published = 0
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=config.client_id or "",
                             protocol=mqtt.MQTTv311, clean_session=True)  # fmt: skip
        if config.username is not None:
            client.username_pw_set(config.username, config.password)
        if config.tls is not None:
            tls = config.tls

            def path(p: str | None) -> str | None:
                return None if p is None else str((base or Path.cwd()) / p)

            try:
                client.tls_set(ca_certs=path(tls.ca), certfile=path(tls.cert), keyfile=path(tls.key),
                               cert_reqs=ssl.CERT_REQUIRED, tls_version=ssl.PROTOCOL_TLS_CLIENT)  # fmt: skip
            except (OSError, ValueError, ssl.SSLError) as exc:
                raise InvalidArgumentError(f"mqtt.tls: cannot load the certificates: {exc}") from None
            client.tls_insecure_set(tls.insecure)
        client.will_set(self.status_topic, "offline", qos=1, retain=True)
        client.reconnect_delay_set(RECONNECT_MIN_S, RECONNECT_MAX_S)
        client.max_inflight_messages_set(WINDOW)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        self.client = client
        self._thread = threading.Thread(target=self._pump, name="npu_zc-mqtt", daemon=True)

    # --- start and stop ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect (at most :data:`CONNECT_TIMEOUT_S`): refused credentials or a failed TLS handshake are a
        :class:`~npu_zc.InvalidArgumentError` naming the key; a broker that is not there is not (the service runs, events queue, paho retries)."""
        c = self.config
        where = f"{c.host}:{c.port}"
        self.client.connect_timeout = CONNECT_TIMEOUT_S
        try:
            self.client.connect(c.host, c.port, c.keepalive)
        except ssl.SSLError as exc:
            raise InvalidArgumentError(f"mqtt.tls: the TLS handshake with the broker at {where} failed: {exc.reason or exc}") from None
        except OSError as exc:
            log.warning("mqtt: the broker at %s is not there (%s): events queue until it is", where, exc.strerror or exc)
            self.client.connect_async(c.host, c.port, c.keepalive)
        self.client.loop_start()
        self._answered.wait(CONNECT_TIMEOUT_S)
        if self._refused is not None:
            self.client.loop_stop()
            self.client.disconnect()
            raise InvalidArgumentError(f"mqtt: the broker at {where} refused the connection ({self._refused}): "
                              "check mqtt.username, mqtt.password and mqtt.tls")  # fmt: skip
        self._thread.start()

    def close(self) -> None:
        """Queued events get ``mqtt.drain_timeout`` seconds to reach the broker; then ``offline`` (retained), disconnect."""
        deadline = time.monotonic() + self.config.drain_timeout
        with self._lock:
            self._lock.notify_all()
            while (self._queue or self._inflight()) and self._connected and time.monotonic() < deadline:
                self._lock.wait(0.05)
            self._closing = True
            self._lock.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        if self._connected:
            info = self.client.publish(self.status_topic, "offline", qos=1, retain=True)
            try:
                info.wait_for_publish(timeout=2)
            except (RuntimeError, ValueError):
                pass
        self.client.disconnect()
        self.client.loop_stop()

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def events(self) -> int:
        """Events handed to :meth:`event` so far: the last ``seq`` given (each event's is one more)."""
        with self._lock:
            return self._seq

    @property
    def detections_pending(self) -> int:
        """Detection messages handed to paho and not yet written to the socket (at most ``detections_queue``)."""
        with self._detections_lock:
            return self._pending_detections()

    def _pending_detections(self) -> int:
        # paho writes QoS 0 messages in order and marks each written (or lost, at a reconnect): the written ones
        # leave from the left. The count is a bound: one written out of order is let go at the next call.
        pending = self._detections
        while pending and _written(pending[0]):
            pending.popleft()
        return len(pending)

    # --- what the service calls --------------------------------------------------------------------------

    def __call__(self, result: StreamResult) -> None:
        """A result on ``{prefix}/{stream}/detections`` (every Nth; only while connected: QoS 0)."""
        every = self.config.detections_every
        if every == 0 or not self._connected:
            return
        n = self._every.get(result.name, 0)
        self._every[result.name] = n + 1
        if n % every:
            return
        payload = result.to_dict()
        payload["time"] = round(time.time(), 6)
        with self._detections_lock:  # paho's callbacks never take this lock: no lock order with paho's own
            if self._pending_detections() >= self.config.detections_queue:
                self.detections_dropped += 1
                if self.metrics is not None:
                    self.metrics.mqtt_detections_dropped.inc()
                return
            info = self.client.publish(f"{self.prefix}/{result.name}/detections", json.dumps(payload), qos=0)
            if info.rc == self._mqtt.MQTT_ERR_SUCCESS:
                self._detections.append(info)

    def event(self, stream: str, payload: dict[str, Any]) -> None:
        """An event on ``{prefix}/{stream}/events`` (QoS 1), queued: never waits for the broker."""
        with self._lock:
            self._seq += 1
            payload["seq"] = self._seq
            if len(self._queue) >= self.config.queue:
                self._queue.popleft()
                self.dropped += 1
                if self.metrics is not None:
                    self.metrics.mqtt_dropped.inc()
            self._queue.append((f"{self.prefix}/{stream}/events", json.dumps(payload).encode()))
            self._lock.notify_all()

    def status(self, text: str) -> None:
        self.client.publish(self.status_topic, text, qos=1, retain=True)

    # --- paho's callbacks (its network thread) and the pump ------------------------------------------------

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        if reason.is_failure:
            if int(reason.value) in _REFUSED:
                self._refused = str(reason)
            log.warning("mqtt: the broker refused the connection: %s", reason)
            self._answered.set()
            return
        client.publish(self.status_topic, "online", qos=1, retain=True)
        with self._lock:
            self._connected = True
            self._lock.notify_all()
        if self.metrics is not None:
            self.metrics.mqtt_connected.set(1)
        self._answered.set()
        log.info("mqtt: connected to %s:%s", self.config.host, self.config.port)

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        with self._lock:
            self._connected = False
            self._lock.notify_all()
        if self.metrics is not None:
            self.metrics.mqtt_connected.set(0)
        if not self._closing:
            log.warning("mqtt: lost the broker (%s): events queue, reconnecting", reason)

    def _on_publish(self, client: Any, userdata: Any, mid: int, reason: Any, properties: Any) -> None:
        # Called before paho marks the message published: the pump looks again shortly (see _pump's wait).
        # Only while events wait for room in the window is the pump waiting on an acknowledgement: a detection's
        # write wakes no one (a wake-up is a thread switch, paid per result).
        if self._queue and self._sent:
            with self._lock:
                self._lock.notify_all()

    def _inflight(self) -> int:
        """Events handed to paho and not acknowledged yet (under ``_lock``). Counted from paho's own record of
        each message, not from on_publish calls: those come for detections (QoS 0, when written) and the status
        too, and an acknowledgement can come before ``publish`` returns the message's id."""
        sent = self._sent
        while sent and _written(sent[0]):
            sent.popleft()
        return len(sent)

    def _pump(self) -> None:
        """Hands queued events to paho while connected, at most :data:`WINDOW` unacknowledged."""
        while True:
            with self._lock:
                while not self._closing and not (self._connected and self._queue and self._inflight() < WINDOW):
                    self._lock.wait(0.05 if self._connected and self._queue else 0.5)
                if self._closing:
                    return
                topic, payload = self._queue.popleft()
            info = self.client.publish(topic, payload, qos=1)
            with self._lock:
                self._sent.append(info)
            self.published += 1
            if info.rc not in (self._mqtt.MQTT_ERR_SUCCESS, self._mqtt.MQTT_ERR_NO_CONN):
                log.warning("mqtt: publish failed (%s)", self._mqtt.error_string(info.rc))
            if self.metrics is not None:
                self.metrics.mqtt_published.inc()


def _written(info: Any) -> bool:
    """Whether paho is done with a message (a paho ``MQTTMessageInfo``): written (QoS 0), acknowledged (QoS 1),
    lost at a reconnect (QoS 0), or never queued."""
    try:
        return bool(info.is_published())
    except (ValueError, RuntimeError):  # refused or failed at publish: paho holds nothing of it
        return True


__all__ = ["MqttConfig", "MqttSink", "TlsConfig"]
