"""Argument types the benches share: a value out of range is argparse's one-line error (exit status 2) before
anything runs, not a traceback from inside a run."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def count(minimum: int = 1) -> Callable[[str], int]:
    """A whole number of at least ``minimum`` (streams, frames, rounds)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"takes a whole number of {minimum} or more, got {text!r}")
        return value

    return parse


def seconds(zero: bool = False) -> Callable[[str], float]:
    """A finite number of seconds above 0 (or 0 too, with ``zero``: "none" or "until the end", as the option says)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (value >= 0 if zero else value > 0)):
            raise argparse.ArgumentTypeError(f"takes a number of seconds {'of 0 or more' if zero else 'above 0'}, "
                                             f"got {text!r}")  # fmt: skip
        return value

    return parse
