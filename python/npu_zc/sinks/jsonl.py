"""Results as JSON lines: strict JSON (no ``NaN`` or ``Infinity`` tokens, which strict parsers refuse)."""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from typing import Any, TextIO

from ..pipeline.streams import StreamResult


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, +-inf, numpy's too) turned into None, in lists, tuples and dicts."""
    if isinstance(value, float):  # numpy's float64 is a float
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    if hasattr(value, "dtype") and hasattr(value, "item"):  # a numpy scalar or array
        return finite(value.tolist())
    return value


def strict_json(value: Any) -> str:
    """``json.dumps`` of ``value`` as strict JSON: non-finite floats written as ``null``."""
    return json.dumps(finite(value), allow_nan=False)


class JsonLines:
    """One JSON object per result (:meth:`StreamResult.to_dict`), a line each, to a file (or stdout with ``"-"``)."""

    def __init__(self, target: str | os.PathLike[str] | TextIO = "-") -> None:
        self._owned = False
        if not isinstance(target, (str, os.PathLike)):
            self.file: TextIO = target
        elif os.fspath(target) == "-":
            self.file = sys.stdout
        else:
            self.file, self._owned = open(target, "w", encoding="utf-8"), True
        self._lock = threading.Lock()

    def __call__(self, result: StreamResult) -> None:
        line = strict_json(result.to_dict())
        with self._lock:
            self.file.write(line + "\n")
            self.file.flush()

    def close(self) -> None:
        if self._owned:
            self.file.close()


__all__ = ["JsonLines", "finite", "strict_json"]
