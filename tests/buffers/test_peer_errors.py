"""Everything wrong that comes from a peer is a PeerError, never an error
of another type: fds that are not buffers, more fds than one message may
carry, an empty SEQPACKET message; and a send that times out says the peer is
not reading."""

from __future__ import annotations

import array
import os
import socket
import tempfile

import pytest

import npu_zc

HEADER_MAGIC = b"NZC1"


def _header(nfds: int, payload: bytes) -> bytes:
    return HEADER_MAGIC + nfds.to_bytes(4, "little") + len(payload).to_bytes(4, "little")


def _send_raw(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], ancillary)


def _payload(n: int) -> bytes:
    import json

    return json.dumps({"v": 1, "buffers": [{"size": 4096, "kind": "memfd"}] * n, "meta": None}).encode()


def _fd_of(kind: str, stack: list[int]) -> int:
    if kind == "pipe":
        r, w = os.pipe()
        stack.append(w)
        return r
    if kind == "devnull":
        return os.open("/dev/null", os.O_RDWR)
    if kind == "directory":
        return os.open(tempfile.gettempdir(), os.O_RDONLY | os.O_DIRECTORY)
    if kind == "empty-memfd":
        return os.memfd_create("empty")
    if kind == "o-path":
        return os.open("/etc/hostname" if os.path.exists("/etc/hostname") else "/etc/passwd", os.O_PATH)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["pipe", "devnull", "directory", "empty-memfd", "o-path"])
def test_a_received_fd_that_is_not_a_buffer_is_a_peer_error(kind: str) -> None:
    a, z = socket.socketpair()
    extra: list[int] = []
    fd = _fd_of(kind, extra)
    try:
        with a, z:
            payload = _payload(1)
            _send_raw(a, _header(1, payload) + payload, [fd])
            before = len(os.listdir("/proc/self/fd"))
            with pytest.raises(npu_zc.PeerError, match="not a buffer"):
                npu_zc.recv_buffers(z)
            assert len(os.listdir("/proc/self/fd")) <= before, "the received fd was closed"
    finally:
        for f in [fd, *extra]:
            os.close(f)


def test_a_header_split_over_many_sends_cannot_pass_more_fds_than_one_message_carries() -> None:
    a, z = socket.socketpair()
    memfds = [os.memfd_create(f"m{i}") for i in range(200)]
    try:
        with a, z:
            payload = _payload(2400)
            message = _header(2400, payload)
            # 12 sends of one byte of header each, every one carrying 200 fds: 2400 in all.
            for i in range(12):
                _send_raw(a, message[i : i + 1], memfds)
            before = len(os.listdir("/proc/self/fd"))
            with pytest.raises(npu_zc.PeerError, match="253"):
                npu_zc.recv_buffers(z, timeout=5)
            assert len(os.listdir("/proc/self/fd")) <= before + 1, "the fds received were closed"
    finally:
        for f in memfds:
            os.close(f)


def test_an_empty_seqpacket_message_is_not_a_closed_connection() -> None:
    a, z = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, z:
        a.send(b"")
        with pytest.raises(npu_zc.PeerError, match="empty message"):
            npu_zc.recv_buffers(z, timeout=5)
        npu_zc.send_buffers(a, [], {"n": 1})  # the connection still works
        assert npu_zc.recv_buffers(z, timeout=5) == ([], {"n": 1})
    b, y = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with y:
        b.close()
        with pytest.raises(npu_zc.PeerError, match="closed the connection"):
            npu_zc.recv_buffers(y, timeout=5)


def test_a_send_timeout_says_the_peer_is_not_reading() -> None:
    # SEQPACKET: a message goes whole or not at all, so the time runs out before any byte moved.
    a, z = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with a, z:
        with pytest.raises(npu_zc.PeerTimeoutError) as info:
            for _ in range(100_000):  # until the peer's buffer is full
                npu_zc.send_buffers(a, [], {"fill": "x" * 1000}, timeout=0.2)
        assert "not reading" in str(info.value) and "sent nothing" not in str(info.value)
