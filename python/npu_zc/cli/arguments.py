"""Argument types of `npu-zc` and of the benches: each checks its text and turns a value out of range into argparse's
one-line error (exit status 2) before anything runs, never a traceback from inside a run."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from .._numbers import channel_values
from ..errors import InvalidArgumentError

MAX_COUNT = 2**31 - 1
"""The largest count or class id a flag takes."""


def whole(least: int = 1, most: int = MAX_COUNT) -> Callable[[str], int]:
    """A whole number from ``least`` to ``most`` (``2e9`` is one too)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            try:
                number = float(text)
                value = int(number) if number.is_integer() else -1
            except (ValueError, OverflowError):
                value = -1
            if value < 0:
                raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        if value > most:  # MAX_COUNT: beyond what OpenVINO's and the decoder's integers hold
            raise argparse.ArgumentTypeError(f"must be at most {most}, got {text}")
        return value

    return parse


positive = whole(1)
"""A whole number from 1 (runs, frames, streams)."""

count = whole(0)
"""A whole number from 0 (``--workers 0``: none)."""

nice_levels = whole(0, 19)
"""Nice levels below this process, 0 to 19: a process may lower its own priority, not raise it."""


def seconds(*, zero: bool = False, unlimited: bool = False) -> Callable[[str], float]:
    """A number of seconds above 0; with ``zero``, 0 too ("none", or "until the end", as the option says); with
    ``unlimited``, ``inf`` too (no limit). NaN and negatives are refused."""
    least = "of 0 or more" if zero else "more than 0"
    also = " (or inf: no limit)" if unlimited else ""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not ((value >= 0 if zero else value > 0) and (unlimited or math.isfinite(value))):  # NaN fails both
            raise argparse.ArgumentTypeError(f"expected a number of seconds {least}{also}, got {text!r}")
        return value

    return parse


def setting(text: str) -> tuple[str, str]:
    """``KEY=VALUE``: a property passed on to OpenVINO (its value as text, as the plugin parses it)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE, e.g. NUM_STREAMS=4")
    return key.strip(), value.strip()


def channels(text: str) -> tuple[float, ...]:
    """1 or 3 finite numbers, by commas or spaces (a mean or a scale)."""
    try:
        values = tuple(float(v) for v in text.replace(",", " ").split())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not 1 or 3 numbers") from None
    if len(values) not in (1, 3):
        raise argparse.ArgumentTypeError(f"{text!r} is not 1 or 3 numbers")
    try:  # the check every path with a mean or scale makes
        checked = channel_values(values, "the value")
    except InvalidArgumentError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None
    assert checked is not None
    return checked


def fraction(text: str) -> float:
    """A number from 0 to 1 (a confidence or an overlap)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text}")
    return value


def class_ids(text: str) -> tuple[int, ...]:
    """Class ids by commas or spaces, each from 0 to :data:`MAX_COUNT`."""
    try:
        ids = tuple(int(v) for v in text.replace(" ", ",").split(",") if v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected class ids such as '0,2', got {text!r}") from None
    if not ids or min(ids) < 0 or max(ids) > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected class ids from 0 to {MAX_COUNT}, such as '0,2', got {text!r}")
    return ids


def _sides(text: str, order: str, example: str) -> tuple[int, int]:
    try:
        first, second = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {order}, e.g. {example}") from None
    if first < 1 or second < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: both sides must be at least 1")
    return first, second


def height_by_width(text: str) -> tuple[int, int]:
    """``HEIGHTxWIDTH`` (a model's input size), as (height, width)."""
    return _sides(text, "HEIGHTxWIDTH", "224x224")


def width_by_height(text: str) -> tuple[int, int]:
    """``WIDTHxHEIGHT`` (a picture's or a camera's size), as (width, height)."""
    return _sides(text, "WIDTHxHEIGHT", "640x480")


__all__ = ["MAX_COUNT", "channels", "class_ids", "count", "fraction", "height_by_width", "nice_levels", "positive",
           "seconds", "setting", "whole", "width_by_height"]  # fmt: skip
