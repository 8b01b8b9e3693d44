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
        message = json.loads(payload)
        described = message["buffers"]
        if message.get("v") != _WIRE_VERSION or len(described) != len(buffers):
            raise ValueError("mismatch")
    except (ValueError, KeyError, TypeError):
        for b in buffers:
            b.close()
        raise PeerError("received buffers with metadata that npu_zc.send_buffers did not write") from None
    for b, d in zip(buffers, described):
        if b.size != d["size"]:
            for x in buffers:
                x.close()
            raise PeerError(f"a received buffer has {b.size} bytes, the sender announced {d['size']}")
    return buffers, message["meta"]


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
