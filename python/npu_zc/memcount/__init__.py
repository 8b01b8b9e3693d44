"""The memcpy counter: zero copy, measured from outside.

``memcount.c`` (shipped with the package) is an LD_PRELOAD library that
counts the bytes moved by ``memcpy``/``memmove``/``mempcpy`` in every thread
while counting is on. :func:`build` compiles it on demand with the system's C
compiler (cached); :func:`preloaded` gives the counter inside a process started
with ``LD_PRELOAD`` set to it (``npu-zc run --count-copies`` does both: it
re-runs itself under the counter and prints the bytes copied per frame).

It is the proof for any device: a device that read a copy of the frame shows
the copy's bytes here (a CPU-side shadow copy, as OpenVINO's NPU plugin makes
of a tensor it cannot import, is a memcpy in this process).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import Error

SOURCE = "memcount.c"
FLAGS = ("-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-fno-builtin", "-fno-tree-loop-distribute-patterns")
"""-fno-builtin and no loop distribution: the counter's fallback copy loop must not become a memcpy call."""


class CounterUnavailableError(Error, RuntimeError):
    """The memcpy counter cannot be built or loaded here (no C compiler, no dlsym)."""


def source() -> bytes:
    return resources.files(__name__).joinpath(SOURCE).read_bytes()


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "npu_zc"


def build(directory: str | os.PathLike[str] | None = None) -> Path:
    """The counter as a shared library, compiled once per source (cached in
    ``directory``, default ``~/.cache/npu_zc``); CounterUnavailableError
    says what to install when there is no C compiler."""
    code = source()
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    target_dir = Path(directory) if directory is not None else _cache_dir()
    lib = target_dir / f"libmemcount-{hashlib.sha256(code).hexdigest()[:16]}.so"
    if lib.exists():
        return lib
    if compiler is None:
        raise CounterUnavailableError(
            "the memcpy counter is built on demand and needs a C compiler: install one (e.g. apt install gcc) "
            "or set CC"
        )
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        target_dir = Path(tempfile.mkdtemp(prefix="npu_zc-memcount-"))
        lib = target_dir / lib.name
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / SOURCE
        src.write_bytes(code)
        out = Path(tmp) / lib.name
        done = subprocess.run([compiler, *FLAGS, "-o", str(out), str(src), "-ldl"], capture_output=True, text=True)
        if done.returncode != 0:
            raise CounterUnavailableError(
                f"the memcpy counter did not compile with {compiler}: {done.stderr.strip().splitlines()[-1:]}"
            )
        os.replace(out, lib)  # atomic: a concurrent build finds a whole library or none
    return lib


@dataclass(frozen=True)
class Counts:
    """What the counter saw between two resets."""

    bytes: int
    calls: int
    watched_bytes: int
    """Bytes of copies whose source or destination touches a watched range (the frame's own buffers)."""
    watched_calls: int
    largest: int


class Counter:
    """The counter preloaded into this process (see :func:`preloaded`)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        for name in ("memcount_total_bytes", "memcount_total_calls", "memcount_watched_bytes",
                     "memcount_watched_calls", "memcount_largest"):  # fmt: skip
            getattr(lib, name).restype = ctypes.c_ulonglong
        lib.memcount_watch.argtypes = [ctypes.c_size_t, ctypes.c_size_t]

    def start(self) -> None:
        self._lib.memcount_start()

    def stop(self) -> None:
        self._lib.memcount_stop()

    def reset(self) -> None:
        self._lib.memcount_reset()

    def watch(self, address: int, nbytes: int) -> None:
        """Count copies touching ``nbytes`` at ``address`` apart (at most 16 ranges)."""
        self._lib.memcount_watch(address, nbytes)

    def unwatch_all(self) -> None:
        """Forget every watched range."""
        self._lib.memcount_unwatch_all()

    def counts(self) -> Counts:
        lib = self._lib
        return Counts(
            int(lib.memcount_total_bytes()), int(lib.memcount_total_calls()), int(lib.memcount_watched_bytes()),
            int(lib.memcount_watched_calls()), int(lib.memcount_largest()),
        )  # fmt: skip


def preloaded() -> Counter | None:
    """The counter when this process runs with it in LD_PRELOAD, else None."""
    lib = ctypes.CDLL(None)  # the preloaded library's symbols are global
    loaded = getattr(lib, "memcount_loaded", None)
    if loaded is None or not loaded():
        return None
    return Counter(lib)


__all__ = ["Counter", "CounterUnavailableError", "Counts", "build", "preloaded"]
