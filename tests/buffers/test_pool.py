"""BufferPool: a fixed ring; a buffer is never handed out while held or in flight."""

from __future__ import annotations

import gc
import threading
import time

import pytest

import npu_zc

PAGE = 4096


def test_ring_states_and_order() -> None:
    pool = npu_zc.BufferPool(3, PAGE, "memfd")
    assert len(pool) == 3 and pool.free_count == 3
    s0 = pool.acquire()
    s1 = pool.acquire()
    assert (s0.index, s1.index) == (0, 1)
    assert pool.state(0) == "cpu"
    s0.submit()
    assert pool.state(0) == "in-flight"
    s2 = pool.acquire()
    assert s2.index == 2 and pool.free_count == 0
    # All held or in flight: no allocation behind the caller's back.
    with pytest.raises(npu_zc.PoolExhaustedError):
        pool.acquire(block=False)
    with pytest.raises(TimeoutError):
        pool.acquire(timeout=0.05)
    s0.release()
    # The ring goes on from where it was: buffer 0 is the free one now.
    s3 = pool.acquire(block=False)
    assert s3.index == 0
    for s in (s1, s2, s3):
        s.release()
    assert pool.free_count == 3


def test_buffers_belong_to_the_pool() -> None:
    pool = npu_zc.BufferPool(2, 1000, "memfd")
    b = pool.buffers[0]
    assert b.size == PAGE and b.kind == "memfd"
    with pytest.raises(npu_zc.InvalidArgumentError, match="pool"):
        b.close()
    slot = pool.acquire()
    assert slot.buffer.fd == pool.buffers[slot.index].fd
    with pytest.raises(npu_zc.BufferInUseError, match="held or in flight"):
        pool.close()
    slot.release()
    pool.close()
    assert all(b.closed for b in pool.buffers)


def test_slot_context_manager_releases_unless_submitted() -> None:
    pool = npu_zc.BufferPool(2, PAGE, "memfd")
    with pool.acquire() as slot:
        slot.buffer.map()[:] = 1
    assert pool.state(slot.index) == "free"
    with pool.acquire() as slot:
        slot.submit()
    assert pool.state(slot.index) == "in-flight"  # the request's completion releases it
    slot.release()
    assert pool.free_count == 2
    gc.collect()


def test_bad_transitions_are_errors() -> None:
    pool = npu_zc.BufferPool(1, PAGE, "memfd")
    slot = pool.acquire()
    slot.release()
    with pytest.raises(npu_zc.InvalidArgumentError, match="released already"):
        slot.release()
    with pytest.raises(npu_zc.InvalidArgumentError, match="out of range"):
        pool.state(5)
    with pytest.raises(npu_zc.InvalidArgumentError):
        npu_zc.BufferPool(0, PAGE, "memfd")
    with pytest.raises(npu_zc.InvalidArgumentError):
        pool.acquire(timeout=-1)


def test_waiting_acquire_is_woken_by_release() -> None:
    pool = npu_zc.BufferPool(1, PAGE, "memfd")
    held = pool.acquire()
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(timeout=10).index))
    waiter.start()
    time.sleep(0.1)
    assert got == []  # blocked: the only buffer is held
    held.release()
    waiter.join(5)
    assert got == [0]


def test_no_buffer_is_ever_held_twice_under_threads() -> None:
    pool = npu_zc.BufferPool(3, PAGE, "memfd")
    holders: dict[int, int] = {}
    lock = threading.Lock()
    errors: list[str] = []

    def worker(me: int) -> None:
        for _ in range(300):
            slot = pool.acquire(timeout=10)
            with lock:
                if slot.index in holders:
                    errors.append(f"buffer {slot.index} handed to {me} while {holders[slot.index]} holds it")
                holders[slot.index] = me
            view = slot.buffer.map()
            view[0] = me  # the holder owns the memory: nobody else writes it now
            time.sleep(0)
            if view[0] != me:
                errors.append(f"buffer {slot.index} was written by another thread")
            del view
            with lock:
                del holders[slot.index]
            if me % 2:
                slot.submit()  # half the workers go through the in-flight state
            slot.release()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert pool.free_count == 3
