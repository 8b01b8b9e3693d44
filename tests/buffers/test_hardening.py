"""What a hostile or careless peer or caller can do to us: nothing
crashes the process, every failure is a typed npu_zc error.

Anything that could kill the process (SIGBUS) runs in a child: the test
asserts that the child lives and prints the typed error.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import npu_zc
from conftest import open_fds

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


# --- 2. no input from Python may panic ---------------------------------------

from extreme_cases import CASES  # noqa: E402


@pytest.fixture(scope="module")
def extreme_outcomes() -> dict[str, str]:
    """Runs every case in one child: a crash cannot take pytest with it."""
    script = os.path.join(os.path.dirname(__file__), "extreme_cases.py")
    proc = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300)
    outcomes: dict[str, str] = {}
    last = None
    for line in proc.stdout.splitlines():
        case, outcome = line.split("\t", 1)
        if outcome == "start":
            last = case
        else:
            outcomes[case] = json.loads(outcome)
            last = None
    if last is not None:  # the child died in this case
        outcomes[last] = f"the process died (exit status {proc.returncode}): {proc.stderr[-500:]}"
    return outcomes


ALLOWED = ("npu_zc.errors.", "builtins.TypeError")


@pytest.mark.parametrize("case", CASES)
def test_extreme_arguments_give_typed_errors(case: str, extreme_outcomes: dict[str, str]) -> None:
    assert case in extreme_outcomes, "not reached: the child died in an earlier case"
    outcome = extreme_outcomes[case]
    assert outcome == "ok" or outcome.startswith(ALLOWED), outcome
    assert "PanicException" not in outcome and "SystemError" not in outcome


# --- 5. each failure in its own class ---------------------------------------


def test_mmap_refused_by_the_kernel_is_not_a_heap_permission_error(tmp_path) -> None:
    path = tmp_path / "frame"
    path.write_bytes(bytes(PAGE))
    read_only = os.open(path, os.O_RDONLY)
    sealed = os.memfd_create("sealed", os.MFD_ALLOW_SEALING)
    os.ftruncate(sealed, PAGE)
    import fcntl

    fcntl.fcntl(sealed, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    try:
        for fd in (read_only, sealed):
            with npu_zc.DmaBuf.from_fd(fd, trust_size=True) as b:
                with pytest.raises(npu_zc.BufferPermissionError, match="writable=False") as info:
                    b.map()
                assert not isinstance(info.value, npu_zc.HeapPermissionError)
                assert isinstance(info.value, PermissionError) and info.value.errno in (1, 13)
                assert b.map(writable=False)[0] == 0  # read-only works
    finally:
        os.close(read_only)
        os.close(sealed)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: npu_zc.BufferPool(1, PAGE, "memfd").state(-1), "index must be 0 or more"),
        (lambda: npu_zc.topk(np.zeros(10, np.float32), -1), "k must be 0 or more"),
        (lambda: npu_zc.convert(np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 4), np.uint8), "RGB", "RGBx", dst_stride=-4), "dst_stride"),
        (lambda: npu_zc.frame_nbytes("RGBx", -1, 5), "width must be 0 or more"),
        (lambda: npu_zc.alloc(2**63), "too large"),
        (lambda: npu_zc.alloc(-1), "size must be 0 or more"),
        (lambda: npu_zc.alloc(2**64), "too large"),
        (lambda: npu_zc.DmaBuf.from_fd(2**40), "not a valid file descriptor"),
    ],
)
def test_negative_and_huge_integers_are_invalid_arguments(call, message: str) -> None:
    with pytest.raises(npu_zc.InvalidArgumentError, match=message):
        call()


@pytest.mark.parametrize("fd", [-5, -1, 2**40])
def test_a_bad_socket_is_ebadf_not_an_invalid_argument(fd: int) -> None:
    for call in (lambda: npu_zc.send_buffers(fd, []), lambda: npu_zc.recv_buffers(fd)):
        with pytest.raises(npu_zc.BufferOSError) as info:
            call()
        assert info.value.errno == errno.EBADF and not isinstance(info.value, ValueError)
    closed = socket.socket(socket.AF_UNIX)
    closed.close()
    with pytest.raises(npu_zc.BufferOSError, match="not an open socket"):
        npu_zc.recv_buffers(closed)


def test_a_pool_buffer_is_released_through_its_slot_only() -> None:
    pool = npu_zc.BufferPool(1, PAGE, "memfd")
    mine = pool.acquire()
    with pytest.raises(npu_zc.InvalidArgumentError, match="slot.release"):
        pool.release(mine.index)  # by index: it could be someone else's buffer
    assert pool.state(mine.index) == "cpu"
    mine.release()
    theirs = pool.acquire()  # the same buffer, now another caller's
    assert theirs.index == mine.index
    with pytest.raises(npu_zc.InvalidArgumentError, match="released already"):
        mine.release()
    with pytest.raises(npu_zc.InvalidArgumentError, match="released already"):
        mine.submit()
    assert pool.state(theirs.index) == "cpu"  # untouched
    theirs.release()


# --- 3. receiving honours time limits and never leaves half a message --------


def _frame(meta: dict) -> tuple[bytes, bytes]:
    """What send_buffers writes for ``meta`` and no fds: (header, payload)."""
    payload = json.dumps({"v": 1, "buffers": [], "meta": meta}).encode()
    return b"NZC1" + (0).to_bytes(4, "little") + len(payload).to_bytes(4, "little"), payload


def _later(seconds: float, action) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_silent_peer_times_out_after_the_sockets_timeout_and_the_stream_survives() -> None:
    a, z = socket.socketpair()
    with a, z:
        z.settimeout(0.5)
        started = time.monotonic()
        with pytest.raises(npu_zc.PeerTimeoutError, match="sent nothing") as info:
            npu_zc.recv_buffers(z)
        assert 0.45 <= time.monotonic() - started < 5  # it waited, not EAGAIN at once
        assert isinstance(info.value, TimeoutError) and info.value.errno == errno.ETIMEDOUT
        npu_zc.send_buffers(a, [], {"n": 1})
        assert npu_zc.recv_buffers(z) == ([], {"n": 1})


def test_timeout_argument_on_a_blocking_socket() -> None:
    a, z = socket.socketpair()
    with a, z:
        assert z.gettimeout() is None
        started = time.monotonic()
        with pytest.raises(npu_zc.PeerTimeoutError):
            npu_zc.recv_buffers(z, timeout=0.3)
        assert 0.25 <= time.monotonic() - started < 5
        with pytest.raises(npu_zc.PeerTimeoutError):
            npu_zc.recv_buffers(z.fileno(), timeout=0)
        with pytest.raises(npu_zc.InvalidArgumentError):
            npu_zc.recv_buffers(z, timeout=-1)


def test_a_body_that_comes_late_but_in_time_is_received_whole() -> None:
    a, z = socket.socketpair()
    with a, z:
        z.settimeout(2)
        header, payload = _frame({"late": True})
        a.sendall(header)
        _later(0.3, lambda: a.sendall(payload + b"".join(_frame({"next": 2}))))
        assert npu_zc.recv_buffers(z) == ([], {"late": True})
        assert npu_zc.recv_buffers(z) == ([], {"next": 2})  # still in step


@pytest.mark.parametrize("sent", ["half a header", "a header"])
def test_a_timeout_mid_message_closes_the_stream_instead_of_desynchronising_it(sent: str) -> None:
    a, z = socket.socketpair()
    with a, z:
        header, payload = _frame({"n": 1})
        a.sendall(header[:6] if sent == "half a header" else header)
        with pytest.raises(npu_zc.PeerError, match="middle of a message.*closed"):
            npu_zc.recv_buffers(z, timeout=0.3)
        try:  # the rest arrives too late: it must never be read as a message
            a.sendall(header[6:] + payload if sent == "half a header" else payload)
        except OSError:
            pass
        with pytest.raises(npu_zc.PeerError, match="closed"):
            npu_zc.recv_buffers(z, timeout=1)


def test_sending_into_a_full_socket_times_out_with_a_typed_error() -> None:
    a, z = socket.socketpair()
    with a, z:
        meta = {"filler": "x" * 100_000}
        started = time.monotonic()
        with pytest.raises((npu_zc.PeerTimeoutError, npu_zc.PeerError)):
            for _ in range(1000):  # nobody reads z: the socket fills up
                npu_zc.send_buffers(a, [], meta, timeout=0.2)
        assert time.monotonic() - started < 30


def test_ctrl_c_interrupts_a_receive_that_waits_for_ever() -> None:
    code = """
        import socket, sys
        import npu_zc
        a, z = socket.socketpair()
        print("waiting", flush=True)
        try:
            npu_zc.recv_buffers(z)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "waiting"
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "interrupted" in out


# --- 4. metadata of the wrong shape is a PeerError ----------------------------

NESTED = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize(
    "payload, fds",
    [
        (b'{"v":1,"buffers":"x"}', 0),
        (b"[7]", 0),
        (b"[{}]", 0),
        (b"7", 0),
        (b"null", 0),
        (NESTED, 0),
        (b'{"v":1,"buffers":[],"meta":' + b"[" * 100 + b"]" * 100 + b"}", 0),
        (b'{"v":1,"buffers":[],"meta":[1,2]}', 0),
        (b'{"v":1,"buffers":[],"meta":' + b'{"a":' * 40 + b"1" + b"}" * 40 + b"}", 0),
        (b'{"v":2,"buffers":[],"meta":null}', 0),
        (b'{"v":1,"buffers":[{}],"meta":null}', 1),
        (b'{"v":1,"buffers":[7],"meta":null}', 1),
        (b'{"v":1,"buffers":[{"size":"4096","kind":"memfd"}],"meta":null}', 1),
        (b'{"v":1,"buffers":[{"size":true,"kind":"memfd"}],"meta":null}', 1),
        (b'{"v":1,"buffers":[],"meta":null}', 1),
        (b"\xff\xfe", 0),
    ],
    ids=lambda p: p[:40].decode(errors="replace") if isinstance(p, bytes) else str(p),
)
def test_metadata_of_the_wrong_shape_is_a_peer_error(payload: bytes, fds: int) -> None:
    a, z = socket.socketpair()
    with a, z, npu_zc.alloc(PAGE, "memfd") as b:
        before = open_fds()
        sender = threading.Thread(target=npu_zc._core.send_fds, args=(a, [b] * fds, payload))  # may not fit the socket
        sender.start()
        with pytest.raises(npu_zc.PeerError, match="did not write|announced"):
            npu_zc.recv_buffers(z, timeout=5)
        sender.join(10)
        assert open_fds() == before  # the received fds were closed
        npu_zc.send_buffers(a, [b], {"ok": [1, {"deep": [2]}]})  # the stream is still in step
        got, meta = npu_zc.recv_buffers(z, timeout=5)
        assert meta == {"ok": [1, {"deep": [2]}]} and got[0].size == PAGE
        got[0].close()


def test_send_refuses_meta_the_receiver_would_refuse() -> None:
    a, z = socket.socketpair()
    with a, z:
        deep: dict = {}
        for _ in range(40):
            deep = {"a": deep}
        for meta in ([1, 2], "x", deep):
            with pytest.raises(npu_zc.InvalidArgumentError, match="meta"):
                npu_zc.send_buffers(a, [], meta)  # type: ignore[arg-type]
