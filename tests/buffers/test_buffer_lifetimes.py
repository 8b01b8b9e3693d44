"""Leaks and stuck objects: a cpu_access bracket dropped without
``__exit__`` ends with it, and leaving ``with alloc(...)`` by an exception
never replaces that exception with BufferInUseError."""

from __future__ import annotations

import gc

import pytest

import npu_zc
from npu_zc import BufferInUseError


def test_cpu_access_bracket_dropped_without_exit_ends(heap: str) -> None:
    buf = npu_zc.alloc(4096, heap)
    bracket = buf.cpu_access("rw")
    bracket.__enter__()
    with pytest.raises(BufferInUseError):
        buf.close()  # the bracket is open and still referenced: refused, as documented
    del bracket
    gc.collect()
    with buf.cpu_access("read"):  # a later bracket opens
        pass
    buf.close()  # and the buffer closes


def test_cpu_access_bracket_in_a_cycle_ends_when_collected() -> None:
    buf = npu_zc.alloc(4096, "memfd")

    class Holder:
        pass

    holder = Holder()
    holder.me = holder  # type: ignore[attr-defined]
    holder.bracket = buf.cpu_access("write")  # type: ignore[attr-defined]
    holder.bracket.__enter__()  # type: ignore[attr-defined]
    del holder
    gc.collect()
    buf.close()


def test_with_alloc_keeps_the_exception_in_flight() -> None:
    with pytest.raises(ZeroDivisionError):
        with npu_zc.alloc(4096, "memfd") as buf:
            view = buf.map()
            1 / 0
    # the view is still alive; the buffer stays open until it goes
    view[0] = 1
    assert not buf.closed
    del view
    buf.close()


def test_with_alloc_still_refuses_to_close_under_a_view_without_an_exception() -> None:
    with pytest.raises(BufferInUseError):
        with npu_zc.alloc(4096, "memfd") as buf:
            view = buf.map()
    del view
    buf.close()
