"""Behaviour that only a real kernel with dma-buf heaps and udmabuf shows.
Outside the VM these skip with a reason; inside it a missing device fails."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest

import npu_zc
from conftest import mapping_count, open_fds

pytestmark = pytest.mark.kernel
PAGE = os.sysconf("SC_PAGE_SIZE")


def test_auto_takes_the_system_heap(system_heap: str) -> None:
    assert npu_zc.auto_choice().heap == "system"
    with npu_zc.alloc(PAGE) as b:
        assert b.kind == "dma-heap:system" and b.is_dmabuf


def test_heaps_lists_the_real_devices(system_heap: str, udmabuf: str) -> None:
    infos = {h.name: h for h in npu_zc.heaps()}
    assert infos["system"].usable and infos["system"].backend == "dma-heap"
    assert infos["udmabuf"].usable and infos["udmabuf"].size_limit
    assert infos["udmabuf"].size_limit == int(Path("/sys/module/udmabuf/parameters/size_limit_mb").read_text()) << 20


def test_imported_dmabuf_is_recognised(heap: str) -> None:
    with npu_zc.alloc(PAGE, heap) as b:
        fd = b.export()
        with npu_zc.DmaBuf.from_fd(fd, take_ownership=True) as imported:
            assert imported.is_dmabuf == (heap != "memfd")
            assert imported.size == PAGE


def test_udmabuf_size_limit_is_a_clear_error(udmabuf: str) -> None:
    limit = {h.name: h for h in npu_zc.heaps()}["udmabuf"].size_limit
    before = open_fds()
    with pytest.raises(npu_zc.InvalidArgumentError, match="size_limit_mb"):
        npu_zc.alloc(limit + PAGE, "udmabuf")
    assert open_fds() == before
    # Just under the limit works.
    with npu_zc.alloc(limit, "udmabuf") as b:
        assert b.size == limit


def test_absurd_size_from_the_system_heap_is_memory_error(system_heap: str) -> None:
    before = open_fds()
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with pytest.raises(MemoryError) as e:
        npu_zc.alloc(4 * total, "system")
    assert isinstance(e.value, npu_zc.Error) and e.value.errno is not None
    assert open_fds() == before
    # The heap is still usable afterwards.
    with npu_zc.alloc(PAGE, "system") as b:
        assert b.is_dmabuf


def test_sync_brackets_around_cpu_writes_and_reads(heap: str) -> None:
    with npu_zc.alloc(1 << 20, heap) as b:
        frame = np.random.default_rng(0).integers(0, 255, 1 << 20, dtype=np.uint8)
        view = b.map()
        with b.cpu_access("write"):
            view[:] = frame
        with b.cpu_access("read"):
            assert np.array_equal(view, frame)
        with b.cpu_access("rw"):
            view[::2] = 0
        del view
        gc.collect()


def test_real_heaps_do_not_leak(heap: str) -> None:
    with npu_zc.alloc(PAGE, heap) as b:
        del_me = b.map()
        del del_me
    gc.collect()
    fds, maps = open_fds(), mapping_count()
    for _ in range(1000):
        b = npu_zc.alloc(64 * 1024, heap)
        v = b.map()
        with b.cpu_access("write"):
            v[0] = 1
        del v
        b.close()
    gc.collect()
    assert (open_fds(), mapping_count()) == (fds, maps)


def test_pool_on_a_real_heap(system_heap: str) -> None:
    pool = npu_zc.BufferPool(4, 1 << 20, "system")
    assert all(b.kind == "dma-heap:system" for b in pool.buffers)
    with pool.acquire() as slot:
        with slot.buffer.cpu_access("write"):
            slot.buffer.map()[:] = 3
    gc.collect()
    pool.close()
