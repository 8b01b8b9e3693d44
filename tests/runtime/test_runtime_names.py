"""Renamed public names: the new name is the thing, the old one still works for a release and says so."""

from __future__ import annotations

import pytest

import npu_zc.runtime as runtime


def test_queue_buffer_set_is_named_apart_from_frames() -> None:
    assert "BufferSet" in runtime.__all__ and "Frame" not in runtime.__all__
    with pytest.warns(DeprecationWarning, match="BufferSet"):
        old = runtime.Frame
    assert old is runtime.BufferSet


def test_unknown_runtime_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        runtime.Nothing  # noqa: B018
