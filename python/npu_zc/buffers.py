"""Buffers: allocation, sharing between processes, pools.

The types and the syscalls are in the Rust core (``npu_zc._core``); this
module adds what is naturally Python: the metadata that travels with buffers
over a socket, and a readable view of ``heap="auto"``'s choice.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any, Sequence

from . import _core
from ._core import BufferPool, CpuAccess, DmaBuf, HeapInfo, PoolSlot, alloc, heaps
from .errors import InvalidArgumentError, PeerError

__all__ = [
    "AutoChoice",
    "BufferPool",
    "CpuAccess",
    "DmaBuf",
    "HeapInfo",
    "PoolSlot",
    "alloc",
    "auto_choice",
    "heaps",
    "recv_buffers",
    "send_buffers",
]

_WIRE_VERSION = 1
MAX_META_DEPTH = 32
"""How deeply ``meta`` may nest dicts and lists (both ways: send refuses, receive refuses)."""


def _timeout(sock: socket.socket | int, timeout: float | None) -> float | None:
    """``timeout``, or else the socket's own (``settimeout``); None waits for ever."""
    if timeout is None and isinstance(sock, socket.socket):
        return sock.gettimeout()
    return timeout


def send_buffers(
    sock: socket.socket | int,
    buffers: Sequence[DmaBuf],
    meta: dict[str, Any] | None = None,
    *,
    timeout: float | None = None,
) -> None:
    """Send ``buffers`` (their fds, sizes and kinds) and ``meta`` over a Unix socket.

    ``meta`` is a small JSON-serialisable dict, e.g. ``{"shape": [224, 224, 4],
    "format": "RGBx"}``. The receiving process gets new fds for the same memory.

    Waits while the socket is full, up to ``timeout`` seconds (default: the
    socket's own timeout; None for a blocking socket or an fd: no limit).
    Raises :class:`PeerTimeoutError` if nothing could be sent in time (the
    connection is intact), :class:`PeerError` if the time ran out in the middle
    of the message (the connection is then shut down, as the receiver could
    not tell the rest of it from the next message).
    """
    buffers = list(buffers) if isinstance(buffers, (list, tuple)) else buffers
    if not isinstance(buffers, list) or not all(isinstance(b, DmaBuf) for b in buffers):
        raise TypeError(f"buffers must be a list of npu_zc.DmaBuf, not {buffers!r}")
    if meta is not None and not isinstance(meta, dict):
        raise InvalidArgumentError(f"meta must be a dict or None, not {type(meta).__name__}")
    if _deeper_than(meta, MAX_META_DEPTH):
        raise InvalidArgumentError(f"meta is nested more than {MAX_META_DEPTH} levels deep: the receiver would refuse it")
    try:
        payload = json.dumps(
            {
                "v": _WIRE_VERSION,
                "buffers": [{"size": b.size, "kind": b.kind} for b in buffers],
                "meta": meta,
            }
        ).encode()
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"meta must be JSON-serialisable: {e}") from None
    _core.send_fds(sock, buffers, payload, timeout=_timeout(sock, timeout))


def recv_buffers(
    sock: socket.socket | int, *, timeout: float | None = None, trust_size: bool = False
) -> tuple[list[DmaBuf], dict[str, Any] | None]:
    """Receive what :func:`send_buffers` sent: ``(buffers, meta)``.

    Each buffer is imported (``kind == "imported"``); ``is_dmabuf`` tells a
    real DMA-BUF from shared memory. Raises :class:`PeerError` when the sender
    closed the connection.

    Waits up to ``timeout`` seconds (default: the socket's own timeout, as set
    by ``sock.settimeout``; None for a blocking socket or an fd: no limit) for
    the whole message. If nothing arrived, :class:`PeerTimeoutError` (a
    TimeoutError): nothing was consumed, call again. If the time ran out in the
    middle of a message, :class:`PeerError`, and the socket is shut down: the
    rest of that message could not be told from the next. Ctrl-C interrupts
    the wait.

    A received memfd or file that is not sealed against shrinking is refused
    by ``map()``: the sender could truncate it and crash this process with
    SIGBUS. npu_zc's own memfds are sealed, and DMA-BUFs cannot shrink; pass
    ``trust_size=True`` only when you trust the sender not to shrink its files.
    """
    buffers, payload = _core.recv_fds(sock, timeout=_timeout(sock, timeout), trust_size=trust_size)
    try:
        meta = _read_message(payload, buffers)
    except PeerError:
        for b in buffers:
            b.close()
        raise
    return buffers, meta


def _read_message(payload: bytes, buffers: list[DmaBuf]) -> dict[str, Any] | None:
    """The meta of a message that passes the wire schema, or PeerError saying what is wrong.

    The schema: ``{"v": 1, "buffers": [{"size": int, "kind": str}, ...], "meta": dict | None}``,
    one entry per fd received, each size that of its fd, the meta at most MAX_META_DEPTH deep.
    (The core limits the payload to 1 MiB.)"""

    def refuse(why: str) -> PeerError:
        return PeerError(f"received buffers with metadata that npu_zc.send_buffers did not write: {why}")

    try:
        message = json.loads(payload)
    except RecursionError:
        raise refuse("it is nested too deeply") from None
    except ValueError as e:  # also UnicodeDecodeError
        raise refuse(f"it is not JSON ({e})") from None
    if not isinstance(message, dict):
        raise refuse(f"the message is a JSON {type(message).__name__}, not an object")
    if message.get("v") != _WIRE_VERSION:
        raise refuse(f"wire version {message.get('v')!r}, expected {_WIRE_VERSION}")
    described = message.get("buffers")
    if not isinstance(described, list) or len(described) != len(buffers):
        raise refuse(f"'buffers' should list the {len(buffers)} fd(s) received, got {str(described)[:80]}")
    for b, d in zip(buffers, described):
        size = d.get("size") if isinstance(d, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or not isinstance(d.get("kind"), str):
            raise refuse(f"a buffer is described as {str(d)[:80]}, not {{'size': int, 'kind': str}}")
        if b.size != size:
            raise PeerError(f"a received buffer has {b.size} bytes, the sender announced {size}")
    meta = message.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise refuse(f"'meta' is a {type(meta).__name__}, not an object or null")
    if _deeper_than(meta, MAX_META_DEPTH):
        raise refuse(f"'meta' is nested more than {MAX_META_DEPTH} levels deep")
    return meta


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and dicts more than ``limit`` levels (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


@dataclass(frozen=True)
class AutoChoice:
    """What ``alloc(..., heap="auto")`` takes on this machine, and why."""

    heap: str
    """The first usable candidate: a dma-heap name, ``"udmabuf"`` or ``"memfd"``."""
    skipped: list[tuple[str, str]]
    """The candidates before it, each with the reason it is unusable."""

    def __str__(self) -> str:
        why = "; ".join(f"{name}: {reason}" for name, reason in self.skipped)
        return f"{self.heap}" + (f" (skipped {why})" if why else "")


def auto_choice() -> AutoChoice:
    """Tell which backend ``heap="auto"`` would take, without allocating."""
    skipped: list[tuple[str, str]] = []
    for name, reason in _core.auto_plan():
        if reason is None:
            return AutoChoice(name, skipped)
        skipped.append((name, reason))
    return AutoChoice("memfd", skipped)
