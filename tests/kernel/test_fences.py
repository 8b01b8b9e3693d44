"""A second real device: vgem attaches our buffers, exports its own, and fences them.

vgem (the kernel's virtual GEM device) plays the part of an NPU, camera or GPU:
PRIME import attaches one of our DMA-BUFs to it, PRIME export hands one of its
buffers to us, and a vgem fence on a buffer stays unsignalled until the test
signals it, like a device still writing. The kernel tests run inside the VM
(scripts/vm-run.sh), where a missing vgem fails them; elsewhere they skip.
"""

from __future__ import annotations

import errno
import gc
import mmap
import os
import select
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import pytest

import npu_zc
from conftest import mapping_count, open_fds
from vgem import Vgem

kernel = pytest.mark.kernel
PAGE = os.sysconf("SC_PAGE_SIZE")
SIZE = 64 * PAGE
# vgem signals a forgotten fence itself after 10 s (VGEM_FENCE_TIMEOUT): every
# wait that must time out here is far shorter, and must not take nearly as long.
SHORT = 0.3
LATE = 5.0


# The conftest fixture that fails (in the VM) or skips (elsewhere) without each backend.
FIXTURE = {"system": "system_heap", "udmabuf": "udmabuf"}


def pattern(seed: int, size: int = SIZE) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


def device_mapping(fd: int, size: int = SIZE) -> mmap.mmap:
    """A mapping through which "the device" writes (not one of npu_zc's)."""
    return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)


@dataclass
class Fenced:
    """One of our DmaBufs as the device sees it: vgem's handle and the device's own mapping."""

    buf: npu_zc.DmaBuf
    handle: int
    device: mmap.mmap


@pytest.fixture(params=["vgem", "system", "udmabuf"])
def fenced(request: pytest.FixtureRequest, vgem: Vgem) -> Iterator[Fenced]:
    """A buffer shared with vgem: vgem's own (exported to us) or ours (imported by vgem)."""
    if request.param == "vgem":
        handle, size = vgem.create_dumb(SIZE)
        assert size == SIZE
        device = vgem.map_dumb(handle, SIZE)
        buf = npu_zc.DmaBuf.from_fd(vgem.export(handle), take_ownership=True)
    else:
        buf = npu_zc.alloc(SIZE, request.getfixturevalue(FIXTURE[request.param]))
        handle = vgem.import_fd(buf.fd)
        # vgem cannot map an imported buffer itself; the DMA-BUF it exports back is ours, mappable.
        exported = vgem.export(handle)
        device = device_mapping(exported)
        os.close(exported)
    yield Fenced(buf, handle, device)
    device.close()
    vgem.close_handle(handle)
    gc.collect()
    buf.close()


def signal_later(vgem: Vgem, fence: int, delay: float, write: Any = None) -> threading.Thread:
    """The device finishes after `delay` s: writes `write` into its mapping, then signals."""

    def device_done() -> None:
        time.sleep(delay)
        try:
            if write is not None:
                target, data = write
                target[: data.nbytes] = data.tobytes()
        finally:
            vgem.signal(fence)

    thread = threading.Thread(target=device_done, name="fake-device")
    thread.start()
    return thread


def assert_fence_timeout(call: Any, what: str) -> None:
    started = time.monotonic()
    with pytest.raises(npu_zc.FenceTimeoutError) as e:
        call()
    took = time.monotonic() - started
    assert SHORT * 0.9 <= took < LATE, f"{what}: the {SHORT} s timeout took {took:.2f} s"
    assert isinstance(e.value, TimeoutError) and isinstance(e.value, npu_zc.Error)
    assert e.value.errno == errno.ETIMEDOUT
    assert "not ready within" in str(e.value)


# --- attachment: our buffers on a device, the device's buffers with us ---


@kernel
@pytest.mark.parametrize("backend", ["system", "udmabuf"])
def test_our_buffers_attach_to_vgem(vgem: Vgem, backend: str, request: pytest.FixtureRequest) -> None:
    heap = request.getfixturevalue(FIXTURE[backend])
    data = pattern(1)
    with npu_zc.alloc(SIZE, heap) as buf:
        view = buf.map()
        with buf.cpu_access("write"):
            view[:] = data
        handle = vgem.import_fd(buf.fd)  # PRIME import: dma_buf_attach + map_attachment
        try:
            # The device knows the buffer: importing it again gives the same handle.
            assert vgem.import_fd(buf.fd) == handle
            # vgem refuses to map an imported buffer itself (drm_gem_dumb_map_offset: EINVAL) ...
            with pytest.raises(OSError) as e:
                vgem.map_dumb(handle, SIZE)
            assert e.value.errno == errno.EINVAL
            # ... but what it exports for that handle is our very DMA-BUF, with our bytes.
            back = vgem.export(handle)
            assert os.fstat(back).st_ino == os.fstat(buf.fd).st_ino
            with npu_zc.DmaBuf.from_fd(back, take_ownership=True) as theirs:
                assert theirs.is_dmabuf and theirs.size == SIZE
                seen = theirs.map(writable=False)
                with theirs.cpu_access("read"):
                    assert np.array_equal(seen, data)
                del seen
            # A fence the device attaches lands on our buffer.
            fence = vgem.attach_fence(handle)
            with pytest.raises(npu_zc.FenceTimeoutError):
                buf.wait("read", timeout=0)
            vgem.signal(fence)
            buf.wait("read", timeout=0)
        finally:
            vgem.close_handle(handle)
        del view


@kernel
def test_a_vgem_buffer_exported_to_us(vgem: Vgem) -> None:
    handle, size = vgem.create_dumb(SIZE)
    device = vgem.map_dumb(handle, size)
    try:
        with npu_zc.DmaBuf.from_fd(vgem.export(handle), take_ownership=True) as buf:
            assert (buf.kind, buf.is_dmabuf, buf.size) == ("imported", True, size)
            view = buf.map()
            # The device writes, we read.
            device[:] = pattern(2, size).tobytes()
            with buf.cpu_access("read", timeout=LATE):
                assert np.array_equal(view, pattern(2, size))
            # We write, the device reads.
            with buf.cpu_access("write", timeout=LATE):
                view[:] = pattern(3, size)
            assert device[:] == pattern(3, size).tobytes()
            # A typed view at an offset sees the device's words.
            device[PAGE : PAGE + 8] = np.arange(2, dtype=np.uint32).tobytes()
            with buf.cpu_access("rw"):
                assert list(buf.map("uint32", 2, offset=PAGE)) == [0, 1]
            del view
            gc.collect()
    finally:
        device.close()
        vgem.close_handle(handle)


# --- fences: a device still writing or reading the buffer ---


@kernel
def test_a_write_fence_makes_reads_wait_and_time_out(fenced: Fenced, vgem: Vgem) -> None:
    buf = fenced.buf
    fence = vgem.attach_fence(fenced.handle, write=True)
    try:
        assert_fence_timeout(lambda: buf.wait("read", timeout=SHORT), "wait('read')")
        assert_fence_timeout(lambda: buf.cpu_access("read", timeout=SHORT).__enter__(), "cpu_access('read')")
        assert_fence_timeout(lambda: buf.wait("write", timeout=SHORT), "wait('write')")
        with pytest.raises(npu_zc.FenceTimeoutError):
            buf.wait("rw", timeout=0)
    finally:
        vgem.signal(fence)
    # The failed cpu_access left no bracket open: it can be entered now, and close() works later.
    with buf.cpu_access("read", timeout=0):
        pass


@kernel
def test_wait_returns_when_the_device_signals_and_sees_its_data(fenced: Fenced, vgem: Vgem) -> None:
    buf, data = fenced.buf, pattern(4)
    view = buf.map(writable=False)
    fence = vgem.attach_fence(fenced.handle, write=True)
    started = time.monotonic()
    device = signal_later(vgem, fence, 0.5, write=(fenced.device, data))
    buf.wait("read", timeout=LATE)  # the GIL is free: the device thread runs meanwhile
    took = time.monotonic() - started
    device.join()
    assert 0.45 <= took < LATE, f"wait returned after {took:.2f} s, the device signalled after 0.5 s"
    with buf.cpu_access("read", timeout=0):
        assert np.array_equal(view, data)
    del view


@kernel
def test_cpu_access_waits_for_the_device_before_reading(fenced: Fenced, vgem: Vgem) -> None:
    buf, data = fenced.buf, pattern(5)
    view = buf.map(writable=False)
    fence = vgem.attach_fence(fenced.handle, write=True)
    started = time.monotonic()
    device = signal_later(vgem, fence, 0.5, write=(fenced.device, data))
    with buf.cpu_access("read", timeout=LATE):
        took = time.monotonic() - started
        assert np.array_equal(view, data)
    device.join()
    assert 0.45 <= took < LATE
    del view


@kernel
def test_a_read_fence_blocks_writers_not_readers(fenced: Fenced, vgem: Vgem) -> None:
    buf = fenced.buf
    fence = vgem.attach_fence(fenced.handle, write=False)  # the device is reading the buffer
    try:
        buf.wait("read", timeout=0)
        with buf.cpu_access("read", timeout=0):
            pass
        assert_fence_timeout(lambda: buf.wait("write", timeout=SHORT), "wait('write') under a read fence")
        assert_fence_timeout(lambda: buf.cpu_access("write", timeout=SHORT).__enter__(), "cpu_access('write')")
        with pytest.raises(npu_zc.FenceTimeoutError):
            buf.wait("rw", timeout=0)
    finally:
        vgem.signal(fence)
    buf.wait("write", timeout=0)
    with buf.cpu_access("write", timeout=0):
        pass


def signalled(sync_file: int) -> bool:
    poller = select.poll()
    poller.register(sync_file, select.POLLIN)
    return bool(poller.poll(0))


@kernel
def test_a_sync_file_is_a_snapshot_of_the_fences(fenced: Fenced, vgem: Vgem) -> None:
    buf = fenced.buf
    before = buf.export_sync_file("write")  # nobody fenced the buffer yet: signalled already
    fence = vgem.attach_fence(fenced.handle, write=False)  # a device reading
    readers = buf.export_sync_file("read")  # waits for writers only: none
    everyone = buf.export_sync_file("write")  # waits for the reading device too
    try:
        assert signalled(before) and signalled(readers) and not signalled(everyone)
    finally:
        vgem.signal(fence)
    assert signalled(everyone)
    fence = vgem.attach_fence(fenced.handle, write=True)  # a device writing
    writers = buf.export_sync_file("read")
    try:
        assert not signalled(writers)
    finally:
        vgem.signal(fence)
    assert signalled(writers)
    for fd in (before, readers, everyone, writers):
        os.close(fd)


@kernel
def test_a_signal_interrupts_an_endless_wait(fenced: Fenced, vgem: Vgem) -> None:
    class Interrupted(Exception):
        pass

    def on_alarm(signum: int, frame: Any) -> None:
        raise Interrupted

    fence = vgem.attach_fence(fenced.handle, write=True)
    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, SHORT)
        started = time.monotonic()
        with pytest.raises(Interrupted):
            fenced.buf.wait("read")  # no timeout: only the signal ends it (or vgem's own 10 s)
        assert time.monotonic() - started < LATE
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        vgem.signal(fence)


@kernel
def test_attachment_and_fences_leak_nothing(vgem: Vgem, system_heap: str, udmabuf: str) -> None:
    def cycle() -> None:
        for heap in ("system", "udmabuf"):
            with npu_zc.alloc(SIZE, heap) as buf:
                handle = vgem.import_fd(buf.fd)
                fence = vgem.attach_fence(handle)
                with pytest.raises(npu_zc.FenceTimeoutError):
                    buf.cpu_access("read", timeout=0).__enter__()
                vgem.signal(fence)
                view = buf.map()
                with buf.cpu_access("write", timeout=1):
                    view[0] = 1
                del view
                vgem.close_handle(handle)
        handle, size = vgem.create_dumb(SIZE)
        with npu_zc.DmaBuf.from_fd(vgem.export(handle), take_ownership=True) as buf:
            view = buf.map()
            with buf.cpu_access("rw", timeout=1):
                view[0] = 2
            del view
        vgem.close_handle(handle)
        gc.collect()

    cycle()
    fds, maps = open_fds(), mapping_count()
    for _ in range(20):
        cycle()
    assert (open_fds(), mapping_count()) == (fds, maps)


@kernel
def test_the_pipeline_waits_for_device_fences(vgem: Vgem, system_heap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline's brackets wait for a device's fences, and a late device is FenceTimeoutError, not a hang.

    The "device" is vgem, asynchronous like an NPU: inference returns once the job is submitted, and the
    device's write fence on the output says when the result is there. It writes the result itself (a
    score vector whose best class is espresso), so no emulated-CPU inference slows the VM down."""
    pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
    pytest.importorskip("skimage", reason="scikit-image (the sample photos) is not installed (the [demo] extra)")
    from npu_zc.pipeline import Pipeline, pipeline as pipeline_module, sample_photo
    from npu_zc.runtime import CompileOptions

    monkeypatch.setattr(pipeline_module, "FENCE_TIMEOUT_S", SHORT)
    photo = sample_photo("coffee")
    options = CompileOptions(inference_precision="f32", num_threads=1)
    with Pipeline("efficientnet-lite0", "CPU", heap=system_heap, options=options) as pipeline:
        source, result = pipeline._buffers[0], pipeline._buffers[1]
        handles = [vgem.import_fd(source.fd), vgem.import_fd(result.fd)]
        exported = vgem.export(handles[1])
        device_view = device_mapping(exported, result.size)
        os.close(exported)
        scores = np.zeros(pipeline.outputs[0].shape, pipeline.outputs[0].dtype)
        scores.flat[967] = 30.0  # ImageNet's espresso
        pending: list[int] = []

        def submit() -> None:  # the job is queued on the device, which is still writing the output
            pending.append(vgem.attach_fence(handles[1], write=True))

        monkeypatch.setattr(pipeline, "infer", submit)
        # A device still reading the input: the preprocess may not overwrite it.
        fence = vgem.attach_fence(handles[0], write=False)
        assert_fence_timeout(lambda: pipeline.process(photo), "the input bracket")
        vgem.signal(fence)
        assert not pending  # it stopped before submitting anything
        # A device still writing the output: the postprocess may not read it.
        assert_fence_timeout(lambda: pipeline.process(photo), "the output bracket")
        vgem.signal(pending.pop())
        # A device that writes the result and signals 0.5 s after the submission: the frame goes through.
        monkeypatch.setattr(pipeline_module, "FENCE_TIMEOUT_S", LATE)
        devices: list[threading.Thread] = []

        def submit_and_finish_later() -> None:
            submit()
            devices.append(signal_later(vgem, pending.pop(), 0.5, write=(device_view, scores)))

        monkeypatch.setattr(pipeline, "infer", submit_and_finish_later)
        prediction = pipeline.process(photo)
        devices.pop().join()
        assert prediction[0].label == "espresso" and prediction[0].score > 0.99, prediction
        device_view.close()
        for handle in handles:
            vgem.close_handle(handle)


# --- no device: nothing to wait for (any machine) ---


def test_memory_without_fences_never_waits() -> None:
    with npu_zc.alloc(PAGE, "memfd") as buf:
        assert not buf.is_dmabuf
        for mode in ("read", "write", "rw"):
            buf.wait(mode, timeout=0)
            buf.wait(mode)
            with buf.cpu_access(mode, timeout=0):
                pass


def test_bad_wait_arguments_are_clear_errors() -> None:
    with npu_zc.alloc(PAGE, "memfd") as buf:
        with pytest.raises(npu_zc.InvalidArgumentError, match="wait mode"):
            buf.wait("sideways")
        for bad in (-1.0, float("nan")):
            with pytest.raises(npu_zc.InvalidArgumentError, match="timeout"):
                buf.wait("read", timeout=bad)
            with pytest.raises(npu_zc.InvalidArgumentError, match="timeout"):
                buf.cpu_access("read", timeout=bad)
        buf.wait("read", timeout=float("inf"))  # for ever (docs/safety.md): memfd has no fences, so at once
        with pytest.raises(npu_zc.InvalidArgumentError, match="not a DMA-BUF"):
            buf.export_sync_file("read")
        buf.wait("read", timeout=0)  # the buffer is still fine
    with pytest.raises(npu_zc.BufferClosedError):
        buf.wait("read")


def test_fence_timeout_is_a_timeout_error() -> None:
    assert issubclass(npu_zc.FenceTimeoutError, TimeoutError)
    assert issubclass(npu_zc.FenceTimeoutError, npu_zc.Error)
    assert npu_zc.FenceTimeoutError("late").errno == errno.ETIMEDOUT
