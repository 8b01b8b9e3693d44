"""The aliasing rule (docs/safety.md): no call writes memory it reads, whatever
numpy's base objects are, and no call touches memory another call is writing.

Each known way of writing memory while it is read is a test
here; the hypothesis suite draws a source and a destination from one piece of
memory in every way a caller can (views of one mapping, two mappings, a
read-only map, memoryviews, a DmaBuf as the destination, a second import of
the same fd, plain numpy) for every public function that writes, and checks
the refusal against the bytes each argument covers.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npu_zc
from npu_zc import AliasingError, BufferInUseError, InvalidArgumentError
from npu_zc.layout import (
    Converter,
    convert,
    dequantize,
    from_float32,
    packed_to_planar,
    planar_to_packed,
    quantize,
    to_float32,
)

H, W = 6, 8


def memfd(size: int = 4096) -> npu_zc.DmaBuf:
    return npu_zc.alloc(size, "memfd")


def test_aliasing_error_is_an_invalid_argument_and_a_value_error() -> None:
    assert issubclass(AliasingError, InvalidArgumentError)
    assert issubclass(AliasingError, ValueError)


# --- the known reproducers -------------------------------------------------


def test_two_maps_of_one_buffer_are_the_same_memory() -> None:
    buf = memfd()
    a = buf.map(shape=(H, W, 4))
    b = buf.map(shape=(H, W, 4))
    with pytest.raises(AliasingError, match="overlaps the source"):
        convert(a, b, "RGBA", "RGBx")


def test_the_buffer_itself_as_the_destination_of_its_own_map() -> None:
    buf = memfd()
    src = buf.map(shape=(H, W, 3))
    src[:] = np.arange(H * W * 3, dtype=np.uint8).reshape(H, W, 3)
    before = buf.map().copy()
    with pytest.raises(AliasingError):
        convert(src, buf, "BGR", "RGBx")
    with pytest.raises(AliasingError):
        Converter("BGR", "RGBx", W, H)(src, buf)
    assert np.array_equal(buf.map(), before), "nothing may be written before the refusal"


def test_a_read_only_map_and_a_writable_map_of_one_buffer() -> None:
    buf = memfd()
    with pytest.raises(AliasingError):
        convert(buf.map(shape=(H, W, 4), writable=False), buf.map(shape=(H, W, 4)), "RGBA", "RGBx")


def test_a_memoryview_of_the_source_as_the_destination() -> None:
    a = np.zeros((H, W, 4), np.uint8)
    with pytest.raises(AliasingError):
        convert(a, np.asarray(memoryview(a)), "RGBA", "RGBx")


def test_a_second_import_of_the_same_fd_is_the_same_memory() -> None:
    buf = memfd()
    twin = npu_zc.DmaBuf.from_fd(buf.fd)
    try:
        with pytest.raises(AliasingError):
            convert(buf.map(shape=(H, W, 4)), twin.map(shape=(H, W, 4)), "RGBA", "RGBx")
    finally:
        twin.close()


def test_an_nv12_uv_plane_inside_the_destination() -> None:
    dst = np.zeros((H, W, 4), np.uint8)
    y = np.zeros((H, W), np.uint8)
    uv = dst.reshape(-1)[: H // 2 * W].reshape(H // 2, W)
    with pytest.raises(AliasingError, match="UV plane"):
        convert((y, uv), dst, "NV12", "RGBx")


def test_quantize_into_a_memoryview_of_its_source() -> None:
    f = np.linspace(-3, 3, 12, dtype=np.float32)
    before = f.copy()
    with pytest.raises(AliasingError):
        quantize(f, np.asarray(memoryview(f)).view(np.int8)[:12], 1.0)
    assert np.array_equal(f, before)


def test_disjoint_parts_of_one_buffer_still_convert() -> None:
    buf = memfd()
    flat = buf.map()
    src = flat[: H * W * 4].reshape(H, W, 4)
    src[:] = 7
    dst = flat[H * W * 4 : 2 * H * W * 4].reshape(H, W, 4)
    convert(src, dst, "RGBA", "RGBx")
    assert (dst[..., :3] == 7).all()


def slow_conversion(buf: npu_zc.DmaBuf) -> Callable[[], Any]:
    """A conversion into `buf` that takes a while (an area downscale of a large frame, one thread)."""
    big = np.random.default_rng(1).integers(0, 256, (3000, 4500, 3), np.uint8)

    def run() -> None:
        while True:  # until it gets the buffer (a caller converting into it first refuses it)
            try:
                convert(big, buf, "BGR", "RGBx", dst_size=(64, 64), interpolation="area", threads=1)
                return
            except BufferInUseError:
                time.sleep(0.001)

    return run


def test_two_threads_converting_into_one_buffer_the_second_is_refused() -> None:
    buf = memfd(64 * 64 * 4)
    slow = slow_conversion(buf)
    small = np.full((64, 64, 3), 9, np.uint8)
    started, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        try:
            started.set()
            slow()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            done.set()

    thread = threading.Thread(target=first)
    thread.start()
    started.wait()
    refused = 0
    while not done.is_set():
        try:
            convert(small, buf, "BGR", "RGBx", threads=1)
        except BufferInUseError as e:
            assert "another call" in str(e)
            refused += 1
        time.sleep(0.001)
    thread.join()
    assert not errors, errors
    assert refused > 0, "a conversion into a buffer another call was writing ran"
    # Once the first call is done, the buffer is free again.
    convert(small, buf, "BGR", "RGBx", threads=1)
    assert (buf.map().reshape(64, 64, 4)[..., :3] == 9).all()


def test_reading_a_buffer_another_call_writes_is_refused_and_two_readers_are_not() -> None:
    buf = memfd(64 * 64 * 4)
    slow = slow_conversion(buf)
    writing, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            writing.set()
            slow()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    writing.wait()
    out = np.empty(64 * 64 * 4, np.float32)
    refused = 0
    while not done.is_set():
        try:
            to_float32(buf.map(), out)
        except BufferInUseError:
            refused += 1
        time.sleep(0.001)
    thread.join()
    assert not errors, errors
    assert refused > 0
    # Reads do not exclude reads: two threads convert from one source at once.
    src = np.random.default_rng(2).integers(0, 256, (1000, 1000, 4), np.uint8)
    outs = [np.empty((64, 64, 4), np.uint8) for _ in range(2)]
    readers = [
        threading.Thread(target=convert, args=(src, o, "RGBA", "RGBx"), kwargs=dict(interpolation="area", threads=1))
        for o in outs
    ]
    for r in readers:
        r.start()
    for r in readers:
        r.join()
    assert np.array_equal(outs[0], outs[1]) and outs[0].any()


# --- hypothesis: every public function that writes, every way of aliasing ----

MEMORY = 4096  # a page: what a memfd of this size maps


def carve(how: str, buf: npu_zc.DmaBuf, plain: np.ndarray, src_at: int, src_len: int, dst_at: int, dst_len: int):
    """(source bytes, destination bytes or a DmaBuf) from one piece of memory."""
    if how == "plain":
        return plain[src_at : src_at + src_len], plain[dst_at : dst_at + dst_len]
    if how == "memoryview":
        return plain[src_at : src_at + src_len], np.asarray(memoryview(plain))[dst_at : dst_at + dst_len]
    if how == "one map":
        flat = buf.map()
        return flat[src_at : src_at + src_len], flat[dst_at : dst_at + dst_len]
    if how == "two maps":
        return buf.map()[src_at : src_at + src_len], buf.map()[dst_at : dst_at + dst_len]
    if how == "read-only map":
        return buf.map(writable=False)[src_at : src_at + src_len], buf.map()[dst_at : dst_at + dst_len]
    if how == "second import of the fd":
        twin = npu_zc.DmaBuf.from_fd(buf.fd)
        return buf.map()[src_at : src_at + src_len], twin.map()[dst_at : dst_at + dst_len]
    if how == "memoryview of a map":
        return buf.map()[src_at : src_at + src_len], np.asarray(memoryview(buf.map()))[dst_at : dst_at + dst_len]
    raise AssertionError(how)


HOWS = ["plain", "memoryview", "one map", "two maps", "read-only map", "second import of the fd", "memoryview of a map"]

# name -> (source bytes per element, destination bytes per element, call(src bytes, dst bytes, n)).
# n elements (pixels for the frame functions) of each; the arrays are the carved bytes, viewed.
Writer = Callable[[np.ndarray, np.ndarray, int], Any]
WRITERS: dict[str, tuple[int, int, Writer]] = {
    "convert": (4, 4, lambda s, d, n: convert(s.reshape(1, n, 4), d.reshape(1, n, 4), "RGBA", "RGBx")),
    "Converter": (3, 4, lambda s, d, n: Converter("BGR", "RGBx", n, 1)(s.reshape(1, n, 3), d.reshape(1, n, 4))),
    "convert resize": (
        4,
        4,
        lambda s, d, n: convert(s.reshape(1, n, 4), d, "RGBA", "RGBx", dst_size=(n, 1), interpolation="area"),
    ),
    "quantize": (4, 1, lambda s, d, n: quantize(s.view(np.float32), d.view(np.int8), 0.5)),
    "dequantize": (1, 4, lambda s, d, n: dequantize(s.view(np.int8), d.view(np.float32), 0.5)),
    "to_float32": (2, 4, lambda s, d, n: to_float32(s.view(ml_dtypes.bfloat16), d.view(np.float32))),
    "from_float32": (4, 2, lambda s, d, n: from_float32(s.view(np.float32), d.view(np.float16))),
    "packed_to_planar": (
        4,
        12,
        lambda s, d, n: packed_to_planar(s.view(np.float32).reshape(1, n, 1), d.view(np.float32).reshape(1, 1, n), planes=1),
    ),
    "planar_to_packed": (
        4,
        4,
        lambda s, d, n: planar_to_packed(s.view(np.float32).reshape(1, 1, n), d.view(np.float32).reshape(1, n, 1)),
    ),
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    writer=st.sampled_from(sorted(WRITERS)),
    how=st.sampled_from(HOWS),
    n=st.integers(1, 24),
    src_at=st.integers(0, 96).map(lambda k: 4 * k),
    dst_at=st.integers(0, 96).map(lambda k: 4 * k),
)
def test_every_writer_refuses_exactly_the_overlaps(writer: str, how: str, n: int, src_at: int, dst_at: int) -> None:
    src_item, dst_item, call = WRITERS[writer]
    if writer == "packed_to_planar":
        dst_item = 4  # one plane of float32
    src_len, dst_len = n * src_item, n * dst_item
    buf = memfd(MEMORY)
    plain = np.random.default_rng(n).integers(0, 60, MEMORY, np.uint8)
    buf.map()[:] = plain
    src, dst = carve(how, buf, plain, src_at, src_len, dst_at, dst_len)
    overlap = src_at < dst_at + dst_len and dst_at < src_at + src_len
    in_buf = how not in ("plain", "memoryview")
    before = buf.map().copy() if in_buf else plain.copy()
    try:
        if overlap:
            with pytest.raises(AliasingError):
                call(src, dst, n)
            after = buf.map() if in_buf else plain
            assert np.array_equal(after, before), "written before the refusal"
        else:
            call(src, dst, n)
    finally:
        del src, dst


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 32), dst_at=st.integers(0, 256))
def test_a_dmabuf_destination_is_checked_against_maps_of_itself(n: int, dst_at: int) -> None:
    """The destination given as the DmaBuf object (mapped on the way in) against a source in its memory."""
    buf = memfd(n * 4)
    src = buf.map()[: n * 3].reshape(1, n, 3)
    with pytest.raises(AliasingError):
        convert(src, buf, "BGR", "RGBx", dst_size=(n, 1))
    elsewhere = memfd(n * 3)
    convert(elsewhere.map()[: n * 3].reshape(1, n, 3), buf, "BGR", "RGBx", dst_size=(n, 1))
    del src
    elsewhere.close()
    buf.close()


# --- no abort: a resize whose working memory cannot be had -------------------


def test_an_area_downscale_of_a_huge_row_is_out_of_memory_not_an_abort() -> None:
    """1 x 2^27 BGR into 1 x 1 needs gigabytes of scratch: under a memory limit, OutOfMemoryError."""
    import subprocess
    import sys
    import textwrap

    code = """
        import resource
        import numpy as np
        import npu_zc
        src = np.zeros((1, 2**27, 3), np.uint8)
        dst = np.zeros((1, 1, 4), np.uint8)
        npu_zc.convert(src[:, :16], dst, "BGR", "RGBx", interpolation="area")  # everything loaded
        used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (512 << 20), resource.RLIM_INFINITY))
        try:
            npu_zc.convert(src, dst, "BGR", "RGBx", interpolation="area")
        except npu_zc.OutOfMemoryError as e:
            print("out of memory:", e)
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "out of memory" in proc.stdout and "working memory" in proc.stdout


def test_a_child_forked_during_a_call_does_not_inherit_its_claim() -> None:
    """fork copies the registry of running calls but not the threads that would release their claims."""
    import os
    import select

    buf = memfd(64 * 64 * 4)
    slow = slow_conversion(buf)
    started, done = threading.Event(), threading.Event()

    def writer() -> None:
        started.set()
        slow()
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    started.wait()
    time.sleep(0.005)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            convert(np.full((64, 64, 3), 5, np.uint8), buf, "BGR", "RGBx", threads=1)
            os.write(write, b"1")
        except BaseException:  # noqa: BLE001 - reported through the pipe
            os.write(write, b"0")
        os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 30)
    if not ready:
        os.kill(pid, 9)
    os.waitpid(pid, 0)
    result = os.read(read, 1) if ready else b""
    os.close(read)
    thread.join()
    assert result == b"1", "the child was refused a buffer only its parent's thread was writing"
