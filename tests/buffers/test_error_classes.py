"""The Rust core raises the classes of ``npu_zc.errors`` through handles it takes
when ``npu_zc._core`` is imported: a class renamed, removed or re-parented in
Python fails that import, naming the class, instead of a user's error path.

Each case imports ``npu_zc._core`` in a fresh interpreter whose ``npu_zc.errors``
is the real file's source with one change.
"""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

import npu_zc
from npu_zc import errors

ERRORS_PY = Path(errors.__file__)

# Imports npu_zc._core with npu_zc.errors made from argv[1] (the package's
# __init__, which would import the real errors, is left out).
IMPORT_CORE = """
import importlib, sys, types
package = types.ModuleType("npu_zc")
package.__path__ = [sys.argv[2]]
sys.modules["npu_zc"] = package
fake = types.ModuleType("npu_zc.errors")
exec(compile(sys.argv[1], "errors.py", "exec"), fake.__dict__)
sys.modules["npu_zc.errors"] = fake
try:
    importlib.import_module("npu_zc._core")
except ImportError as e:
    print("ImportError:", e)
else:
    print("imported")
"""


def import_core_with(source: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_CORE, source, str(ERRORS_PY.parent)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_real_classes_import() -> None:
    assert import_core_with(ERRORS_PY.read_text()) == "imported"


def test_a_renamed_class_fails_the_import_naming_it() -> None:
    source = ERRORS_PY.read_text().replace("class PoolExhaustedError(", "class PoolEmptyError(")
    out = import_core_with(source)
    assert out.startswith("ImportError:") and "PoolExhaustedError" in out and "is not there" in out, out


def test_a_class_that_lost_its_builtin_fails_the_import() -> None:
    source = ERRORS_PY.read_text().replace(
        "class HeapNotFoundError(_OSErrorMixin, FileNotFoundError):", "class HeapNotFoundError(_OSErrorMixin, OSError):"
    )
    assert source != ERRORS_PY.read_text()
    out = import_core_with(source)
    assert out.startswith("ImportError:") and "HeapNotFoundError" in out and "FileNotFoundError" in out, out


def test_a_class_outside_npu_zc_error_fails_the_import() -> None:
    source = ERRORS_PY.read_text().replace(
        "class CameraClosedError(CameraError, ValueError):", "class CameraClosedError(ValueError):"
    )
    assert source != ERRORS_PY.read_text()
    out = import_core_with(source)
    assert out.startswith("ImportError:") and "CameraClosedError" in out, out


def test_the_raised_error_is_both_classes() -> None:
    with pytest.raises(npu_zc.InvalidArgumentError) as raised:
        npu_zc.alloc(0)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, npu_zc.Error)
    with pytest.raises(npu_zc.HeapNotFoundError) as missing:
        npu_zc.alloc(4096, heap="/dev/dma_heap/no-such-heap")
    assert isinstance(missing.value, FileNotFoundError) and missing.value.errno == errno.ENOENT
