"""One rule for every timeout argument on the Python side, as in the Rust
layer (docs/safety.md): a number of seconds, 0 or more; None, inf, or more
than a wait can hold (1e20, 10**400) wait for ever; NaN and negative numbers
are :class:`npu_zc.InvalidArgumentError`; anything else is a TypeError."""

from __future__ import annotations

import math
import operator
import threading
from typing import Any

from .errors import InvalidArgumentError

SLICE_S = 0.05
"""How long one slice of a long wait lasts: between slices, Python runs its signal handlers (Ctrl-C)."""


def timeout_seconds(value: Any, what: str = "timeout") -> float | None:
    """``value`` checked: seconds to wait, or None for ever."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"{what} must be a number of seconds or None, not {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float: only its sign matters
        seconds = math.inf if operator.index(value) > 0 else -math.inf
    if math.isnan(seconds) or seconds < 0:
        raise InvalidArgumentError(f"{what} must be a number of seconds >= 0 (or None: no limit), got {value!r}")
    return None if seconds >= threading.TIMEOUT_MAX else seconds
