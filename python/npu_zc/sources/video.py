"""Video files and network streams (RTSP, HTTP, UDP...) decoded by PyAV, planes handed over in place.

FFmpeg decodes with frame threads (``thread_type = "AUTO"``), the GIL released
while it works. Each decoded frame's planes are numpy views of the decoder's
own buffers, at their line size: NV12 as a ``(Y, UV)`` pair and, where the
layout engine reads I420 planes at a pitch, yuv420p as ``(Y, U, V)``; 10-bit
video (p010le, yuv420p10le: HEVC Main10 and the like) as P010 ``(Y, UV)`` or
I010 ``(Y, U, V)`` planes of uint16; no BGR
image is made and nothing is copied. Other pixel formats (and yuv420p on an
engine that reads I420 only tightly packed) are converted by FFmpeg's swscale
into NV12 first: a copy, flagged on the frame (``copied``) and counted per
stream. The colour matrix and range come from the stream.

A source that reaches its end has ended: a file, and a clip of known length
served over the network (HTTP, or RTSP of a file) once its last frame came.
A network stream that fails, or stops before its end (a live stream has no
end: its peer went away), reconnects with back-off (0.5 s, doubling, up to
8 s), at most ``reconnect`` times; a connection that held for
:data:`STEADY_S` gives the stream its ``reconnect`` attempts back. A URL that
never answers fails after ``timeout`` seconds with
:class:`npu_zc.SourceTimeoutError`.
"""

from __future__ import annotations

import errno
import functools
import inspect
import math
import os
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .._numbers import whole_number
from .._timeouts import timeout_seconds
from ..errors import InvalidArgumentError, SourceError, SourceNotFoundError, SourceTimeoutError
from .frame import DecodedFrame, colour_of
from .hardware import hardware_frame, is_hardware_frame

NETWORK_SCHEMES = ("rtsp", "rtsps", "rtmp", "http", "https", "udp", "tcp", "srt", "rtp")
"""URL schemes read as live network streams (newest frames win, reconnects)."""

BACKOFF_S = (0.5, 8.0)
"""First and longest wait between reconnection attempts (doubling in between)."""

STEADY_S = 30.0
"""How long a connection must hold for the stream to get its ``reconnect`` attempts back: a peer that drops
the stream every few seconds is given up after ``reconnect`` attempts, not reconnected for ever."""


SWSCALE_MATRICES = {"bt601": "itu601", "bt709": "itu709", "bt2020": "bt2020"}
"""PyAV's names (swscale's tables) of the matrices a frame declares."""


def is_network(url: str) -> bool:
    scheme, sep, _ = url.partition("://")
    return bool(sep) and scheme.lower() in NETWORK_SCHEMES


def redact(url: str) -> str:
    """The URL with its password shown as ``***`` (``rtsp://admin:***@10.0.0.5/s``), as names, logs and errors show
    it. Read from the text, not parsed: a URL that urllib cannot parse (an unclosed IPv6 bracket, a bad port) loses
    its password too."""
    scheme, sep, rest = url.partition("://")
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    user, at, host = rest[:end].rpartition("@")
    name, colon, _ = user.partition(":")
    if not (sep and at and colon):
        return url
    return f"{scheme}://{name}:***@{host}{rest[end:]}"


class VideoSource:
    """A video file or network URL, decoded by PyAV (FFmpeg).

    ``live``: keep only the newest frames when the model falls behind (default:
    network streams yes, files no). ``realtime``: pace a file at its frame rate
    (and treat it as live), as a camera would deliver it. ``timeout``: seconds
    to wait for a network stream to answer or send (the one rule of
    ``docs/safety.md``; None or inf: no limit; NaN, negative or 0 refused). ``reconnect``: attempts
    after a network stream fails or stops before its end (default 5; files 0),
    given back once a connection holds for :data:`STEADY_S`.
    ``hardware``: "vaapi", "qsv" or "drm" to decode on a GPU and import its
    DRM PRIME frames as DmaBufs (:mod:`.hardware`); refused with
    :class:`npu_zc.HardwareDecodeError` where there is none. ``options``:
    FFmpeg options for the container (RTSP is read over TCP by default).
    ``threads``: FFmpeg's ``thread_type`` ("AUTO": frame threads where the codec has them) and ``thread_count``.
    """

    def __init__(
        self,
        url: str | os.PathLike[str],
        *,
        name: str | None = None,
        live: bool | None = None,
        realtime: bool = False,
        timeout: float | None = 5.0,
        reconnect: int | None = None,
        limit: int | None = None,
        hardware: str | None = None,
        options: dict[str, str] | None = None,
        threads: str = "AUTO",
        thread_count: int | None = None,
    ) -> None:
        import av  # noqa: F401  (a clear ModuleNotFoundError here, before any thread starts)

        self.url = os.fspath(url)
        self.network = is_network(self.url)
        if self.network:
            try:  # a URL that cannot be parsed would only fail at each open, backing off as a camera that is down
                urllib.parse.urlsplit(self.url).port
            except ValueError as exc:  # not echoed: it may hold a password
                raise SourceError(f"the {self.url.partition(':')[0]} URL cannot be parsed: {exc}") from None
        else:
            path = Path(self.url)
            if not path.exists():
                raise SourceNotFoundError(f"no such video: {self.url}")
            if path.is_dir():
                raise SourceError(f"{self.url} is a folder, not a video (a folder of images is an ImageSource)")
        seconds = timeout_seconds(timeout)  # the one rule: NaN and negatives refused, None and inf for ever
        if seconds == 0:
            raise InvalidArgumentError("timeout must be more than 0 s (or None: no limit): a stream needs time to answer")
        self.name = name or (redact(self.url) if self.network else Path(self.url).name)
        self.realtime = bool(realtime)
        self.live = (self.network or self.realtime) if live is None else bool(live)
        self.timeout = math.inf if seconds is None else seconds
        """Seconds a network stream may take to answer or stay silent (``inf``: no limit)."""
        self.reconnect = (5 if self.network else 0) if reconnect is None else whole_number(reconnect, "reconnect")
        self.limit = None if limit is None else whole_number(limit, "limit")
        self.threads = threads
        self.thread_count = None if thread_count is None else whole_number(thread_count, "thread_count", 0, 1024)
        """Decoding threads (None: FFmpeg's choice, one per core; :class:`npu_zc.Streams` gives each of N sources a share)."""
        self.options = dict(options or {})
        if self.url.startswith("rtsp") and "rtsp_transport" not in self.options:
            self.options["rtsp_transport"] = "tcp"  # no UDP ports to open; loss-free on a LAN
        self.hardware: Any = None
        self._hardware_name = hardware
        if hardware is not None:
            from .hardware import hwaccel

            self.hardware = hwaccel(hardware)
        self.reconnects = 0
        """Reconnections made (network streams)."""
        self._last_seconds: float | None = None  # the time of the last frame decoded from this connection
        self.copied = 0
        """Frames whose planes FFmpeg had to convert (a copy) before the engine could read them."""

    def spec(self) -> dict[str, Any]:
        """This source's arguments, as JSON-ready data: ``VideoSource(**spec)`` in another process reads the same
        (:mod:`npu_zc.pipeline.workers` decodes there)."""
        return {"url": self.url, "name": self.name, "live": self.live, "realtime": self.realtime,
                "timeout": None if math.isinf(self.timeout) else self.timeout, "reconnect": self.reconnect,
                "limit": self.limit, "hardware": self._hardware_name, "options": dict(self.options),
                "threads": self.threads, "thread_count": self.thread_count}  # fmt: skip

    def __repr__(self) -> str:
        return f"<VideoSource {self.name!r}{' live' if self.live else ''}>"

    def frames(self, stop: threading.Event | None = None) -> Iterator[DecodedFrame]:
        """Decoded frames in order, until the end (or ``stop``); raises a typed :class:`npu_zc.SourceError`."""
        stop = stop or threading.Event()
        index, failures = 0, 0
        while not stop.is_set():
            try:
                container = self._open()
            except SourceError:
                if not self.network or failures >= self.reconnect:
                    raise
                failures = self._back_off(failures, stop)
                continue
            connected = time.monotonic()
            self._last_seconds = None
            try:
                for frame in self._decode(container, index, stop):
                    yield frame
                    index += 1
                    if self.limit is not None and index >= self.limit:
                        return
                if not self.network or self._reached_end(container):
                    return  # the source ended: a file's end, or a served clip's
            except SourceError:
                if not self.network or failures >= self.reconnect:
                    raise
            finally:
                container.close()
            if stop.is_set():
                return
            if time.monotonic() - connected >= STEADY_S:
                failures = 0  # it held a while: a new failure, not the same one again
            if failures >= self.reconnect:
                return  # a live stream that keeps ending: given up
            failures = self._back_off(failures, stop)  # a network stream broke or stopped early: reconnect

    def _reached_end(self, container: Any) -> bool:
        """Whether a network stream that stopped sending had come to its own end: a clip of known length whose
        last frame came. A live stream has no length: its peer went away (as a server killed mid-clip)."""
        import av

        duration, last = container.duration, self._last_seconds
        if not duration or duration <= 0 or last is None:
            return False
        stream = container.streams.video[0]
        rate = float(stream.average_rate or stream.guessed_rate or 0)
        frame_s = 1 / rate if rate > 0 else 0.04
        end = ((container.start_time or 0) + duration) / av.time_base
        # A frame's time is where it starts, and a demuxer's start time may or may not shift frame times:
        # within a few frames of the end is the end.
        return bool(last + frame_s >= end - max(0.25, 3 * frame_s))

    def _back_off(self, failures: int, stop: threading.Event) -> int:
        wait = min(BACKOFF_S[1], BACKOFF_S[0] * 2**failures)
        stop.wait(wait)
        self.reconnects += 1
        return failures + 1

    def _open(self) -> Any:
        import av

        kwargs: dict[str, Any] = {"options": self.options}
        if self.network and math.isfinite(self.timeout):
            kwargs["timeout"] = (self.timeout, self.timeout)
        if self.hardware is not None:
            kwargs["hwaccel"] = self.hardware
        started = time.monotonic()
        try:
            container = av.open(self.url, **kwargs)
        except BaseException as exc:
            if self.network and time.monotonic() - started >= 0.9 * self.timeout and isinstance(exc, av.error.FFmpegError):
                # FFmpeg's RTSP demuxer reports its interrupted wait as invalid data: it was the clock
                raise SourceTimeoutError(f"{self.name} did not answer within {self.timeout:g} s", errno.ETIMEDOUT) from None
            raise self._error(exc, "open") from None
        try:
            if not container.streams.video:
                raise SourceError(f"{self.name} has no video track")
            stream = container.streams.video[0]
            if stream.codec_context is None:
                raise SourceError(f"{self.name}: its video is coded in a format this FFmpeg build cannot decode")
            stream.thread_type = self.threads
            if self.thread_count:
                stream.codec_context.thread_count = self.thread_count
        except BaseException:
            container.close()
            raise
        return container

    def _decode(self, container: Any, first: int, stop: threading.Event) -> Iterator[DecodedFrame]:
        stream = container.streams.video[0]
        clock = time.perf_counter_ns
        started: float | None = None
        first_pts: float | None = None
        index = first
        frames = container.decode(stream)
        while not stop.is_set():
            try:
                frame = next(frames)
            except StopIteration:
                return
            except BaseException as exc:
                raise self._error(exc, "decode") from None
            decoded = clock()
            seconds = frame.time
            if self.realtime and seconds is not None:  # the frame is due at its own time from the first one
                if started is None or first_pts is None:
                    started, first_pts = time.monotonic(), seconds
                delay = started + (seconds - first_pts) - time.monotonic()
                if delay > 0 and stop.wait(delay):
                    return
                decoded = clock()
            if seconds is not None:
                self._last_seconds = seconds
            yield self._frame(frame, index, decoded, seconds)
            index += 1

    def _frame(self, frame: Any, index: int, decoded_ns: int, seconds: float | None) -> DecodedFrame:
        if is_hardware_frame(frame):
            return hardware_frame(frame, index, decoded_ns, seconds)
        name = frame.format.name
        matrix, rng = colour_of(frame.colorspace, frame.color_range, frame.height, name)
        owner, copied = frame, False
        if name in ("yuv420p", "yuvj420p") and engine_reads_i420_planes():
            width, height = frame.width & ~1, frame.height & ~1
            y, u, v = frame.planes  # PyAV makes the plane objects at each read of .planes: once
            planes: Any = (
                plane_view(y, height, width),
                plane_view(u, height // 2, width // 2),
                plane_view(v, height // 2, width // 2),
            )
            return DecodedFrame(index, "I420", planes, width, height, decoded_ns, seconds, matrix, rng, False, owner)
        if name in ("p010le", "yuv420p10le") and engine_reads_ten_bit():  # HEVC Main10, VP9/AV1 profile 2...
            width, height = frame.width & ~1, frame.height & ~1
            if name == "p010le":
                planes = (samples_view(frame.planes[0], height, width), samples_view(frame.planes[1], height // 2, width))
                return DecodedFrame(index, "P010", planes, width, height, decoded_ns, seconds, matrix, rng, False, owner)
            planes = (
                samples_view(frame.planes[0], height, width),
                samples_view(frame.planes[1], height // 2, width // 2),
                samples_view(frame.planes[2], height // 2, width // 2),
            )
            return DecodedFrame(index, "I010", planes, width, height, decoded_ns, seconds, matrix, rng, False, owner)
        if name != "nv12":  # FFmpeg converts (a copy): yuv420p on an engine without I420 planes, 4:2:2, 10 bits...
            keep = {"src_color_range": 2, "dst_color_range": 2} if rng == "full" else {}  # no range squeeze
            # The NV12 is made in the matrix the frame declares (swscale would take BT.601 for a stream that does
            # not say, where HD is read as BT.709); from YUV, the same matrix both sides: no matrix change.
            standard = SWSCALE_MATRICES[matrix]
            owner = frame.reformat(format="nv12", src_colorspace=standard, dst_colorspace=standard, **keep)
            copied = True
            self.copied += 1
        width, height = owner.width & ~1, owner.height & ~1  # 4:2:0 covers whole pairs: an odd last row/column is left out
        planes = (plane_view(owner.planes[0], height, width), plane_view(owner.planes[1], height // 2, width))
        return DecodedFrame(index, "NV12", planes, width, height, decoded_ns, seconds, matrix, rng, copied, owner)

    def _error(self, exc: BaseException, doing: str) -> BaseException:
        """A typed error with one sentence a person can act on, from what PyAV raised."""
        import av

        if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
            return exc
        what = self.name
        code = getattr(exc, "errno", None)
        text = getattr(exc, "strerror", None) or str(exc)
        if isinstance(exc, av.error.FileNotFoundError) and not self.network:
            return SourceNotFoundError(f"no such video: {self.url}")
        if self.network and (
            isinstance(exc, (TimeoutError, av.error.ExitError)) or code in (errno.ETIMEDOUT, errno.EAGAIN)
        ):
            return SourceTimeoutError(f"{what} did not answer within {self.timeout:g} s", errno.ETIMEDOUT)
        if self.network and isinstance(exc, (ConnectionError, av.error.ConnectionRefusedError)):
            return SourceError(f"{what} refused the connection (is the server running?)")
        if isinstance(exc, av.error.InvalidDataError) and doing == "open":
            return SourceError(f"{what} is not a video FFmpeg can read (invalid data, or the file is cut short)")
        if isinstance(exc, av.error.DecoderNotFoundError):
            return SourceError(f"{what}: its video is coded in a format this FFmpeg build cannot decode")
        return SourceError(f"cannot {doing} {what}: {text}")


def plane_view(plane: Any, rows: int, row_bytes: int) -> np.ndarray:
    """The first ``rows`` x ``row_bytes`` of a PyAV plane, in place: rows ``line_size`` bytes apart."""
    flat = np.frombuffer(plane, np.uint8)
    flat.flags.writeable = False  # the decoder may still predict from this frame: nobody writes it
    pitch = plane.line_size
    if pitch < row_bytes or flat.size < (rows - 1) * pitch + row_bytes:
        raise SourceError(f"a decoded plane of {flat.size} bytes at a pitch of {pitch} cannot hold {rows} rows of {row_bytes} bytes")
    if flat.size % pitch == 0:  # the usual plane: whole rows (a reshape costs a tenth of as_strided)
        return flat.reshape(-1, pitch)[:rows, :row_bytes]
    return np.lib.stride_tricks.as_strided(flat, (rows, row_bytes), (pitch, 1), writeable=False)


def samples_view(plane: Any, rows: int, samples: int) -> np.ndarray:
    """As :func:`plane_view`, for planes of little-endian 16-bit samples (10-bit formats): uint16, in place."""
    return plane_view(plane, rows, 2 * samples).view("<u2")


@functools.cache
def engine_reads_ten_bit() -> bool:
    """Whether this build's layout engine reads 10-bit 4:2:0 (P010, I010)."""
    from .. import layout

    return {"P010", "I010"} <= set(layout.SOURCE_FORMATS)


@functools.cache
def engine_reads_i420_planes() -> bool:
    """Whether this build's layout engine reads I420 as three planes at their own pitch (a ``(Y, U, V)`` tuple)."""
    from .. import layout

    y, u, v = np.zeros((2, 64), np.uint8)[:, :2], np.zeros((1, 64), np.uint8)[:, :1], np.zeros((1, 64), np.uint8)[:, :1]
    try:
        layout.convert((y, u, v), np.zeros((2, 2, 4), np.uint8), "I420", "RGBx")
    except Exception:
        return False
    return True


@functools.cache
def engine_takes_colour() -> bool:
    """Whether this build's layout engine takes ``matrix=`` and ``range=`` (colour standards)."""
    from .. import layout

    return "matrix" in inspect.signature(layout.Converter).parameters


__all__ = [
    "NETWORK_SCHEMES",
    "VideoSource",
    "engine_reads_i420_planes",
    "engine_reads_ten_bit",
    "engine_takes_colour",
    "is_network",
    "plane_view",
    "samples_view",
]
