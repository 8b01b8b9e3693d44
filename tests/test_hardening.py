"""What a hostile or careless peer or caller can do to us (issue 12): nothing
crashes the process, every failure is a typed npu_zc error.

Anything that could kill the process (SIGBUS) runs in a child: the test
asserts that the child lives and prints the typed error.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

import npu_zc

PAGE = npu_zc._core.PAGE_SIZE


def run_child(code: str, *args: str, pass_fds: tuple[int, ...] = (), timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        pass_fds=pass_fds,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_lived(proc: subprocess.CompletedProcess[str]) -> None:
    killed = f" (killed by {signal.Signals(-proc.returncode).name})" if proc.returncode < 0 else ""
    assert proc.returncode == 0, f"child exited with {proc.returncode}{killed}; stderr: {proc.stderr[-2000:]}"


# --- 1. a shrunk memfd must not SIGBUS us ------------------------------------

SHRINK_OWN = """
    import os, sys
    import numpy as np
    import npu_zc
    b = npu_zc.alloc(1 << 20, sys.argv[1])
    v = b.map("uint8")
    try:
        os.ftruncate(b.export(), 0)
        print("truncated")
    except OSError as e:
        print("ftruncate refused:", type(e).__name__)
    v[-1] = 7
    src = np.full((4, 4, 3), 9, np.uint8)
    npu_zc.convert(src, v[-64:].reshape(4, 4, 4), "RGB", "RGBx")
    print("alive", int(v[-1]), int(v[-64]))
"""


def test_our_buffers_cannot_be_shrunk_under_a_mapping(heap: str) -> None:
    proc = run_child(SHRINK_OWN, heap)
    assert_lived(proc)
    assert "truncated" not in proc.stdout
    if heap == "memfd":  # sealed with F_SEAL_SHRINK: EPERM
        assert "ftruncate refused: PermissionError" in proc.stdout
    assert "alive 0 9" in proc.stdout


RECEIVER = """
    import socket, sys
    import npu_zc
    sock = socket.socket(fileno=int(sys.argv[1]))
    bufs, meta = npu_zc.recv_buffers(sock, trust_size=sys.argv[2] == "trust")
    try:
        view = bufs[0].map("uint8")
    except npu_zc.Error as e:
        print("map refused:", type(e).__name__, e)
        view = None
    sock.sendall(b"mapped")
    assert sock.recv(16) == b"truncated"
    if view is not None:
        print("last byte", int(view[-1]))
    print("alive")
"""


def _send_then_truncate(fd_to_send: int, trust: str = "no") -> tuple[subprocess.CompletedProcess[str], str]:
    parent, child = socket.socketpair()
    with parent, child:
        proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(RECEIVER), str(child.fileno()), trust],
            pass_fds=[child.fileno()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        child.close()
        npu_zc.send_buffers(parent, [npu_zc.DmaBuf.from_fd(fd_to_send, trust_size=True)])
        assert parent.recv(16) == b"mapped"
        try:
            os.ftruncate(fd_to_send, 0)
            outcome = "truncated"
        except OSError as e:
            outcome = type(e).__name__
        parent.sendall(b"truncated")
        out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), outcome


def test_a_sender_cannot_shrink_our_memfd_under_the_receiver() -> None:
    with npu_zc.alloc(1 << 20, "memfd") as b:
        b.map()[-1] = 5
        fd = b.export()
        try:
            proc, outcome = _send_then_truncate(fd)
        finally:
            os.close(fd)
    assert_lived(proc)
    assert outcome == "PermissionError"  # the seal held
    assert "last byte 5" in proc.stdout


def test_an_unsealed_memfd_from_a_peer_is_not_mapped() -> None:
    fd = os.memfd_create("hostile")
    os.ftruncate(fd, 1 << 20)
    try:
        proc, outcome = _send_then_truncate(fd)
    finally:
        os.close(fd)
    assert_lived(proc)
    assert outcome == "truncated"  # the peer could, and did
    assert "map refused: InvalidArgumentError" in proc.stdout
    assert "trust_size=True" in proc.stdout


def test_a_trusted_memfd_that_shrank_before_mapping_is_refused() -> None:
    fd = os.memfd_create("careless")
    os.ftruncate(fd, 1 << 20)
    try:
        b = npu_zc.DmaBuf.from_fd(fd, trust_size=True)
        os.ftruncate(fd, PAGE)
        with pytest.raises(npu_zc.InvalidArgumentError, match="truncated"):
            b.map()
        b.close()
    finally:
        os.close(fd)
