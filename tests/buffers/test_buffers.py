"""The buffer API on every backend: memfd anywhere, dma-heap and udmabuf on a
real kernel (the `heap` fixture skips those outside the VM, fails inside it)."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

import npu_zc
from conftest import mapping_count, open_fds

PAGE = os.sysconf("SC_PAGE_SIZE")


def expected_kind(heap: str) -> str:
    return {"memfd": "memfd", "udmabuf": "udmabuf"}.get(heap, f"dma-heap:{heap}")


def test_alloc_reports_backend_and_rounds_to_page(heap: str) -> None:
    with npu_zc.alloc(1000, heap) as b:
        assert b.kind == expected_kind(heap)
        assert b.is_dmabuf == (heap != "memfd")
        assert b.size == PAGE
        assert os.fstat(b.fd)  # a real, open fd


def test_map_shares_memory_between_views(heap: str) -> None:
    b = npu_zc.alloc(3 * PAGE, heap)
    raw = b.map()
    floats = b.map("float32", (PAGE // 4,), offset=PAGE)
    assert raw.dtype == np.uint8 and raw.shape == (3 * PAGE,)
    # Same memory, no copy: the float view starts one page into the bytes.
    assert floats.ctypes.data == raw.ctypes.data + PAGE
    floats[:] = np.arange(PAGE // 4, dtype=np.float32)
    assert np.array_equal(raw[PAGE : 2 * PAGE].view(np.float32), np.arange(PAGE // 4, dtype=np.float32))
    # A second map of the whole buffer is the same memory again.
    assert b.map().ctypes.data == raw.ctypes.data
    del raw, floats
    gc.collect()
    b.close()


def test_writes_are_visible_through_an_independent_mapping() -> None:
    b = npu_zc.alloc(PAGE, "memfd")
    b.map()[:5] = [1, 2, 3, 4, 5]
    # An mmap made outside npu_zc sees the bytes: the memory really is the fd's.
    import mmap

    with mmap.mmap(b.fd, PAGE, mmap.MAP_SHARED, mmap.PROT_READ) as m:
        assert m[:5] == bytes([1, 2, 3, 4, 5])
    gc.collect()
    b.close()


def test_read_only_view_refuses_writes() -> None:
    b = npu_zc.alloc(PAGE, "memfd")
    ro = b.map(writable=False)
    assert not ro.flags.writeable
    with pytest.raises(ValueError):
        ro[0] = 1
    del ro
    gc.collect()
    b.close()


def test_view_outlives_the_buffer_object_safely() -> None:
    b = npu_zc.alloc(PAGE, "memfd")
    view = b.map("uint32")
    view[:] = 7
    del b
    gc.collect()
    # The mapping is owned by the view's base: still valid, no dangling pointer.
    assert int(view.sum()) == 7 * (PAGE // 4)
    owner = view
    while getattr(owner, "base", None) is not None:
        owner = owner.base
    assert type(owner).__name__ == "_Mapping"  # the numpy base chain ends at the mapping


def test_close_with_live_views_is_refused_and_loses_nothing() -> None:
    b = npu_zc.alloc(PAGE, "memfd")
    view = b.map()
    view[:3] = [9, 8, 7]
    sliced = view[1:]
    del view
    with pytest.raises(npu_zc.BufferInUseError, match="view"):
        b.close()
    with pytest.raises(BufferError):  # the built-in it also is
        b.close()
    assert not b.closed and b.views == 1
    assert list(sliced[:2]) == [8, 7]  # still readable: nothing was unmapped
    del sliced
    gc.collect()
    assert b.views == 0
    b.close()
    assert b.closed


def test_closed_buffer_gives_clear_errors() -> None:
    b = npu_zc.alloc(PAGE, "memfd")
    b.close()
    b.close()  # closing twice is harmless, like a file
    for action in (lambda: b.fd, b.map, b.export, lambda: b.cpu_access("read")):
        with pytest.raises(npu_zc.BufferClosedError, match="closed"):
            action()
    assert "closed" in repr(b)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dtype": "float32", "shape": (PAGE,)}, "needs"),
        ({"offset": PAGE + 1}, "outside"),
        ({"offset": -1}, "0 or more"),
        ({"dtype": "float32", "offset": 2}, "whole number"),
        ({"shape": "nonsense"}, "shape"),
    ],
)
def test_bad_map_arguments(kwargs: dict, message: str) -> None:
    b = npu_zc.alloc(PAGE, "memfd")
    with pytest.raises(npu_zc.InvalidArgumentError, match=message):
        b.map(**kwargs)
    assert b.views == 0  # a refused map leaves nothing behind
    b.close()


def test_bad_dtype_is_an_invalid_argument() -> None:
    b = npu_zc.alloc(PAGE, "memfd")
    with pytest.raises(npu_zc.InvalidArgumentError, match="numpy says"):
        b.map("not-a-dtype")
    b.close()


@pytest.mark.parametrize("size", [0, -1])
def test_bad_sizes(size: int) -> None:
    with pytest.raises(npu_zc.InvalidArgumentError):
        npu_zc.alloc(size)


def test_absurd_size_is_memory_error_and_leaks_nothing() -> None:
    before = open_fds()
    with pytest.raises(MemoryError) as e:
        npu_zc.alloc(1 << 50, "memfd")
    assert isinstance(e.value, npu_zc.OutOfMemoryError) and e.value.errno == 12
    assert open_fds() == before


@pytest.mark.parametrize("name", ["system", "cma", "linux,cma", "/dev/dma_heap/nope"])
def test_missing_heap_is_file_not_found_and_never_falls_back(name: str) -> None:
    if os.path.exists("/dev/dma_heap"):
        pytest.skip("this kernel has dma-buf heaps")
    with pytest.raises(FileNotFoundError) as e:
        npu_zc.alloc(PAGE, name)
    assert isinstance(e.value, npu_zc.HeapNotFoundError)
    assert "dma_heap" in str(e.value) or "heap" in str(e.value)


@pytest.mark.parametrize("name", ["/tmp/x", "a/b", ""])
def test_bad_heap_names(name: str) -> None:
    with pytest.raises(npu_zc.InvalidArgumentError):
        npu_zc.alloc(PAGE, name)


def test_heaps_and_auto_choice_describe_this_machine() -> None:
    infos = {h.name: h for h in npu_zc.heaps()}
    assert infos["memfd"].usable and infos["memfd"].backend == "memfd"
    assert "udmabuf" in infos
    if not os.path.exists("/dev/udmabuf"):
        assert not infos["udmabuf"].usable and "udmabuf" in infos["udmabuf"].reason
    choice = npu_zc.auto_choice()
    with npu_zc.alloc(PAGE) as b:
        assert b.kind == expected_kind(choice.heap)


def test_export_import_round_trip() -> None:
    b = npu_zc.alloc(PAGE, "memfd")
    b.map()[:4] = [1, 2, 3, 4]
    fd = b.export()
    assert fd != b.fd and os.get_inheritable(fd) is False  # CLOEXEC
    imported = npu_zc.DmaBuf.from_fd(fd)  # dup: fd stays ours
    assert imported.kind == "imported" and imported.size == PAGE and not imported.is_dmabuf
    assert list(imported.map()[:4]) == [1, 2, 3, 4]
    gc.collect()
    imported.close()
    os.fstat(fd)  # still open: it was duplicated
    owned = npu_zc.DmaBuf.from_fd(fd, take_ownership=True)
    assert owned.fd == fd
    owned.close()
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with the buffer that owned it
    gc.collect()
    b.close()


def test_import_refuses_what_is_not_memory(tmp_path) -> None:
    r, w = os.pipe()
    s1, s2 = socket.socketpair()
    dirfd = os.open(tmp_path, os.O_RDONLY)
    devnull = os.open("/dev/null", os.O_RDWR)
    empty = os.open(tmp_path / "empty", os.O_RDWR | os.O_CREAT)
    closed = os.dup(r)
    os.close(closed)
    cases = {r: "pipe", s1.fileno(): "socket", dirfd: "directory", devnull: "character device", empty: "empty", closed: "not an open", -1: "not a valid"}
    try:
        before = open_fds()
        for fd, message in cases.items():
            with pytest.raises(npu_zc.InvalidArgumentError, match=message):
                npu_zc.DmaBuf.from_fd(fd)
        assert open_fds() == before
    finally:
        for fd in (r, w, dirfd, devnull, empty):
            os.close(fd)
        s1.close()
        s2.close()


def test_import_regular_file_is_shared_memory_but_not_a_dmabuf(tmp_path) -> None:
    path = tmp_path / "frame"
    path.write_bytes(bytes(range(16)) * 256)
    fd = os.open(path, os.O_RDWR)
    with npu_zc.DmaBuf.from_fd(fd) as untrusted:  # anyone who can write the file could shrink it
        with pytest.raises(npu_zc.InvalidArgumentError, match="not sealed against shrinking.*trust_size=True"):
            untrusted.map()
    with npu_zc.DmaBuf.from_fd(fd, take_ownership=True, trust_size=True) as b:
        assert not b.is_dmabuf and b.size == 4096
        v = b.map()
        assert v[17] == 1
        del v
        gc.collect()


def test_cpu_access_bracket(heap: str) -> None:
    b = npu_zc.alloc(PAGE, heap)
    with b.cpu_access("write") as access:
        assert access.mode == "write"
        b.map()[:] = 0xAB
        # A second bracket on the same buffer is refused (as Android's CpuSyncStart).
        with pytest.raises(npu_zc.BufferInUseError):
            with b.cpu_access("read"):
                pass
        with pytest.raises(npu_zc.BufferInUseError, match="bracket|view"):
            b.close()
    with b.cpu_access("read"):
        assert int(b.map()[PAGE - 1]) == 0xAB
    gc.collect()
    b.close()


def test_cpu_access_bad_mode() -> None:
    with npu_zc.alloc(PAGE, "memfd") as b:
        with pytest.raises(npu_zc.InvalidArgumentError, match="mode"):
            b.cpu_access("sideways")


def test_send_and_receive_in_one_process() -> None:
    a, z = socket.socketpair()
    bufs = [npu_zc.alloc(PAGE, "memfd"), npu_zc.alloc(2 * PAGE, "memfd")]
    bufs[1].map()[:3] = [5, 6, 7]
    npu_zc.send_buffers(a, bufs, {"shape": [2, 3], "format": "RGBx"})
    got, meta = npu_zc.recv_buffers(z)
    assert meta == {"shape": [2, 3], "format": "RGBx"}
    assert [g.size for g in got] == [PAGE, 2 * PAGE]
    assert list(got[1].map()[:3]) == [5, 6, 7]
    # Shared, not copied: a write on one side shows on the other.
    got[0].map()[0] = 42
    assert bufs[0].map()[0] == 42
    gc.collect()
    for b in got + bufs:
        b.close()
    a.close()
    z.close()


def test_send_refuses_unserialisable_meta() -> None:
    a, z = socket.socketpair()
    with npu_zc.alloc(PAGE, "memfd") as b, pytest.raises(npu_zc.InvalidArgumentError, match="JSON"):
        npu_zc.send_buffers(a, [b], {"x": object()})
    a.close()
    z.close()


CHILD = textwrap.dedent(
    """
    import socket, sys
    import numpy as np
    import npu_zc
    sock = socket.socket(fileno=int(sys.argv[1]))
    bufs, meta = npu_zc.recv_buffers(sock)
    for i, b in enumerate(bufs):
        view = b.map("uint32")
        with b.cpu_access("rw"):
            view[:] = view * 2 + meta["add"] + i   # read what the parent wrote, write back
    del view
    sock.sendall(b"done " + ",".join(b.kind + ":" + str(b.is_dmabuf) for b in bufs).encode())
    """
)


def test_child_process_writes_into_received_buffers(heap: str) -> None:
    parent, child = socket.socketpair()
    bufs = [npu_zc.alloc(PAGE, heap) for _ in range(3)]
    for i, b in enumerate(bufs):
        b.map("uint32")[:] = np.arange(PAGE // 4, dtype=np.uint32) + i
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(child.fileno())], pass_fds=[child.fileno()])
    child.close()
    npu_zc.send_buffers(parent, bufs, {"add": 1000})
    reply = parent.recv(1024)
    assert proc.wait(timeout=60) == 0
    assert reply.startswith(b"done ")
    assert reply.count(f"imported:{heap != 'memfd'}".encode()) == 3
    for i, b in enumerate(bufs):
        expected = (np.arange(PAGE // 4, dtype=np.uint32) + i) * 2 + 1000 + i
        with b.cpu_access("read"):
            assert np.array_equal(b.map("uint32"), expected)
    gc.collect()
    for b in bufs:
        b.close()
    parent.close()


def test_peer_that_closes_gives_peer_error() -> None:
    a, z = socket.socketpair()
    a.close()
    with pytest.raises(npu_zc.PeerError, match="closed"):
        npu_zc.recv_buffers(z)
    with pytest.raises(ConnectionError):
        npu_zc.recv_buffers(z)
    z.close()


def test_peer_that_dies_with_our_messages_unread_gives_peer_error() -> None:
    """A peer closing with unread data resets the connection (ECONNRESET):
    that is the same "the sender is gone", not an OS error."""
    a, z = socket.socketpair()
    z.sendall(b"release 3")  # what a consumer sends back, never read
    a.close()
    with pytest.raises(npu_zc.PeerError, match="closed"):
        npu_zc.recv_buffers(z)
    z.close()


def test_garbage_on_the_socket_is_refused() -> None:
    a, z = socket.socketpair()
    a.sendall(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(npu_zc.PeerError, match="did not send"):
        npu_zc.recv_buffers(z)
    a.close()
    z.close()


def test_leak_free_over_many_cycles() -> None:
    # Warm up once so that lazily created module state is not counted.
    with npu_zc.alloc(PAGE, "memfd") as b:
        v = b.map()
        del v
    gc.collect()
    fds, maps = open_fds(), mapping_count()
    for _ in range(10_000):
        b = npu_zc.alloc(PAGE, "memfd")
        v = b.map("uint32")
        v[0] = 1
        del v
        b.close()
    gc.collect()
    assert open_fds() == fds
    assert mapping_count() == maps
