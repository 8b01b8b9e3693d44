"""The one check of per-channel numbers (mean, scale, fill) for every path
that takes them: :func:`npu_zc.convert`, :class:`npu_zc.Converter`, the
:class:`npu_zc.Pipeline`/:class:`npu_zc.Session` and the CLI's ``--mean``;
and of single-number arguments (counts, frames, class ids: :func:`whole_number`; budgets and thresholds:
:func:`real_number`).

A string is refused rather than iterated (``mean="123"`` would otherwise be
(1, 2, 3)), so is a mapping (its keys) or a set (no order); every value must
be a real number that float32 holds finitely (NaN and inf change a model's
prediction without a word; 10**400 does not fit), and raises
:class:`npu_zc.InvalidArgumentError` otherwise."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Set
from typing import Any

import numpy as np

from .errors import InvalidArgumentError

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _number(value: Any, name: str, k: int | None) -> float:
    where = name if k is None else f"{name}[{k}]"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise InvalidArgumentError(f"{where} must be a number, not {type(value).__name__} {value!r}")
    try:
        x = float(value)
    except OverflowError:
        raise InvalidArgumentError(f"{where} = {value} is too large: it must fit a 32-bit float") from None
    if not math.isfinite(x) or abs(x) > _FLOAT32_MAX:
        raise InvalidArgumentError(f"{where} is {value}: normalisation needs finite numbers that fit a 32-bit float")
    return x


def channel_values(
    values: Any, name: str, *, low: float | None = None, high: float | None = None, what: str = "number"
) -> tuple[float, float, float] | None:
    """``values`` (one number, or 1 or 3 numbers in the destination's channel
    order) as 3 finite floats, each in [low, high] when given; None stays None."""
    if values is None:
        return None
    if isinstance(values, (str, bytes, bytearray, memoryview, Mapping, Set)):
        raise InvalidArgumentError(
            f"{name} must be a {what} or 3 {what}s (one per channel), not {type(values).__name__} {values!r}"
        )
    if isinstance(values, np.ndarray) and values.ndim == 0:
        values = values.item()
    if isinstance(values, (numbers.Real, np.integer, np.floating)) and not isinstance(values, (bool, np.bool_)):
        items = [_number(values, name, None)] * 3
    else:
        try:
            raw = list(values)
        except TypeError:
            raise InvalidArgumentError(
                f"{name} must be a {what} or 3 {what}s (one per channel), not {type(values).__name__} {values!r}"
            ) from None
        if len(raw) not in (1, 3):
            raise InvalidArgumentError(
                f"{name} has {len(raw)} values: it takes 1 or 3 (one {what}, or one per channel in the "
                "destination's order)"
            )
        items = [_number(v, name, k) for k, v in enumerate(raw)] * (3 if len(raw) == 1 else 1)
    for k, x in enumerate(items):
        if (low is not None and x < low) or (high is not None and x > high):
            raise InvalidArgumentError(f"{name}[{k}] is {x:g}: a {what} goes from {low:g} to {high:g}")
    return (items[0], items[1], items[2])


def whole_number(value: Any, name: str, least: int = 0, most: int | None = None) -> int:
    """``value`` as an int, where it is one (numpy's too, not a bool: ``True`` is not a count) from ``least`` to
    ``most``; else :class:`npu_zc.InvalidArgumentError` naming ``name``, not ``int()``'s own error (NaN, inf and
    text would reach it, 2.5 and ``True`` pass it)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(f"{name} must be a whole number, not {type(value).__name__} {value!r}")
    if value < least or (most is not None and value > most):
        upto = f" to {most}" if most is not None else " or more"
        raise InvalidArgumentError(f"{name} must be from {least}{upto}, got {value}")
    return int(value)


def real_number(value: Any, name: str, *, positive: bool = False) -> float:
    """``value`` as a float, where it is a finite real number (numpy's too, not a bool), above 0 with ``positive``;
    else :class:`npu_zc.InvalidArgumentError` naming ``name`` (a comparison with text would be a TypeError, NaN
    passes every ``>`` check as False and silently)."""
    real = not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real) and math.isfinite(value)
    if not real or (positive and not float(value) > 0):
        raise InvalidArgumentError(f"{name} must be {'positive and finite' if positive else 'a finite number'}, "
                                   f"got {value!r}")  # fmt: skip
    return float(value)
