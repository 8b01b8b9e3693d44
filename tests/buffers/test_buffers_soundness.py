"""Buffers and pools sound (docs/safety.md): timeouts by one rule, waits that Ctrl-C stops,
and a pool slot that cannot be released while views made through it live."""

from __future__ import annotations

import gc
import math
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import npu_zc
from npu_zc import BufferClosedError, BufferInUseError, InvalidArgumentError, PoolExhaustedError

PAGE = npu_zc._core.PAGE_SIZE


# --- timeouts: one rule ---------------------------------------------------------


@pytest.mark.parametrize("forever", [math.inf, 1e20, 10**400, 2**64, None])
def test_a_timeout_too_long_for_a_duration_waits_for_ever_and_does_not_panic(forever) -> None:
    buf = npu_zc.alloc(PAGE, "memfd")
    buf.wait("read", forever)  # a memfd has no fences: returns at once
    with buf.cpu_access("rw", timeout=forever):
        pass
    pool = npu_zc.BufferPool(1, PAGE, "memfd")
    pool.acquire(forever).release()


@pytest.mark.parametrize("bad", [math.nan, -1, -1e-9, -math.inf, -(10**400)])
def test_nan_and_negative_timeouts_are_invalid_arguments(bad) -> None:
    buf = npu_zc.alloc(PAGE, "memfd")
    with pytest.raises(InvalidArgumentError, match="seconds"):
        buf.wait("read", bad)
    with pytest.raises(InvalidArgumentError, match="seconds"):
        buf.cpu_access("rw", timeout=bad)
    pool = npu_zc.BufferPool(1, PAGE, "memfd")
    with pytest.raises(InvalidArgumentError, match="seconds"):
        pool.acquire(bad)
    with pytest.raises(InvalidArgumentError, match="seconds"):
        npu_zc.Camera("/nonexistent/video99", timeout=bad)


def test_a_timeout_that_is_not_a_number_is_a_type_error() -> None:
    buf = npu_zc.alloc(PAGE, "memfd")
    with pytest.raises(TypeError, match="number of seconds"):
        buf.wait("read", "soon")


def test_an_exhausted_pool_still_times_out_in_time_while_waiting_in_slices() -> None:
    pool = npu_zc.BufferPool(1, PAGE, "memfd")
    held = pool.acquire()
    started = time.monotonic()
    with pytest.raises(PoolExhaustedError, match="within 0.300 s"):
        pool.acquire(0.3)
    assert 0.29 <= time.monotonic() - started < 5
    held.release()


# --- Ctrl-C stops every wait --------------------------------------------------


def interrupt(code: str, signals: int = 1) -> str:
    """Runs `code` in a child, which prints "waiting" before it blocks; sends SIGINT; returns its output."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "waiting"
    time.sleep(0.3)
    for _ in range(signals):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the child outlived Ctrl-C") from None
    assert proc.returncode == 0, out
    return out


def test_ctrl_c_stops_an_acquire_without_timeout_on_an_exhausted_pool() -> None:
    out = interrupt(
        """
        import npu_zc
        pool = npu_zc.BufferPool(1, 4096, "memfd")
        held = pool.acquire()
        print("waiting", flush=True)
        try:
            pool.acquire()
        except KeyboardInterrupt:
            print("interrupted", pool.free_count, flush=True)
        """
    )
    assert "interrupted 0" in out


# --- a slot's views -------------------------------------------------------------


def test_a_slot_is_not_released_while_views_made_through_it_live() -> None:
    pool = npu_zc.BufferPool(1, PAGE, "memfd")
    slot = pool.acquire()
    view = slot.buffer.map()
    view[:] = 1
    with pytest.raises(BufferInUseError, match=r"view\(s\) made through slot.buffer"):
        slot.release()
    assert pool.state(slot.index) == "cpu"  # still ours: nobody else may take it
    del view
    gc.collect()
    slot.release()
    assert pool.free_count == 1


def test_after_release_the_slot_buffer_maps_no_more() -> None:
    pool = npu_zc.BufferPool(1, PAGE, "memfd")
    slot = pool.acquire()
    stale = slot.buffer
    slot.release()
    with pytest.raises(BufferClosedError):
        stale.map()
    # The next holder writes its buffer; the old one has no way to reach it.
    other = pool.acquire()
    mine = other.buffer.map()
    mine[:] = 7
    assert (pool.buffers[0].map() == 7).all()
    del mine
    other.release()


def test_a_stale_view_cannot_outlive_the_release_then_write_the_next_holders_frame() -> None:
    """The reproducer: a view kept after release wrote the buffer after another caller acquired it."""
    pool = npu_zc.BufferPool(1, PAGE, "memfd")
    slot = pool.acquire()
    kept = slot.buffer.map()
    with pytest.raises(BufferInUseError):
        slot.release()
    with pytest.raises(PoolExhaustedError):
        pool.acquire(timeout=0)  # still held: the kept view cannot race a new holder
    del kept
    slot.release()


def test_slot_buffers_share_the_pools_memory_and_fd() -> None:
    pool = npu_zc.BufferPool(2, PAGE, "memfd")
    with pool.acquire() as slot:
        assert slot.buffer.fd == pool.buffers[slot.index].fd
        slot.buffer.map()[:3] = (1, 2, 3)
        assert list(pool.buffers[slot.index].map()[:3]) == [1, 2, 3]
    assert np.asarray(pool.buffers[slot.index].map()[:3]).tolist() == [1, 2, 3]
