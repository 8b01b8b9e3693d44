"""Converter with I420 (Y, U, V) planes, called per frame as a video decoder hands them over: after the first call
of a given shape and pitch the checks are skipped (a fast path), and the result stays the checked conversion's."""

from __future__ import annotations

import numpy as np
import pytest

from npu_zc import InvalidArgumentError, layout


def planes(rng: np.random.Generator, width: int, height: int, pitch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A decoder's planes: rows ``pitch`` bytes apart (Y) and ``pitch // 2`` (U, V), random content."""
    y = rng.integers(0, 256, (height, pitch), np.uint8)[:, :width]
    u = rng.integers(0, 256, (height // 2, pitch // 2), np.uint8)[:, : width // 2]
    v = rng.integers(0, 256, (height // 2, pitch // 2), np.uint8)[:, : width // 2]
    return y, u, v


@pytest.mark.parametrize("size", [(64, 48), (320, 240), (250, 138)])
def test_repeated_calls_equal_the_checked_conversion(size: tuple[int, int]) -> None:
    width, height = size
    width, height = width & ~1, height & ~1
    rng = np.random.default_rng(width)
    convert = layout.Converter("I420", "RGBx", 32, 24, src_size=(width, height), threads=1)
    for pitch in (width + 64, width + 64, width + 128, width + 64):  # the same pitch again, then another, then back
        for _ in range(3):
            src = planes(rng, width, height, pitch)
            got = convert(src, np.zeros((24, 32, 4), np.uint8)).copy()
            fresh = layout.Converter("I420", "RGBx", 32, 24, src_size=(width, height), threads=1)  # its first call: checked
            want = fresh(src, np.zeros((24, 32, 4), np.uint8))
            assert np.array_equal(got, want)


def test_a_wrong_plane_is_refused_after_the_fast_path() -> None:
    rng = np.random.default_rng(1)
    convert = layout.Converter("I420", "RGBx", 16, 16, src_size=(64, 48), threads=1)
    y, u, v = planes(rng, 64, 48, 128)
    convert((y, u, v), np.zeros((16, 16, 4), np.uint8))
    convert((y, u, v), np.zeros((16, 16, 4), np.uint8))
    with pytest.raises(InvalidArgumentError, match="U plane"):
        convert((y, u[:10], v), np.zeros((16, 16, 4), np.uint8))
    with pytest.raises(InvalidArgumentError):
        convert((y, u, v.astype(np.uint16)), np.zeros((16, 16, 4), np.uint8))
    with pytest.raises(InvalidArgumentError):
        convert((y, u), np.zeros((16, 16, 4), np.uint8))


def test_checks_run_once_per_shape_and_pitch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-frame cost: a video's frames share their planes' shapes and pitches, so only the first is checked."""
    rng = np.random.default_rng(2)
    convert = layout.Converter("I420", "RGBx", 16, 16, src_size=(64, 48), threads=1)
    checked = []
    original = type(convert)._checked

    def counting(self, *args):  # type: ignore[no-untyped-def]
        checked.append(1)
        return original(self, *args)

    monkeypatch.setattr(type(convert), "_checked", counting)
    dst = np.zeros((16, 16, 4), np.uint8)
    for _ in range(5):
        convert(planes(rng, 64, 48, 128), dst)
    assert len(checked) == 1
    convert(planes(rng, 64, 48, 192), dst)  # another pitch: checked again
    assert len(checked) == 2
