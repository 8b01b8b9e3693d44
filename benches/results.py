"""One place where every benchmark script records what it measured.

Each bench calls :func:`save` with its tables; the JSON lands in
``benches/results/<bench>--<machine>.json`` (or ``--json PATH``), and
``scripts/render_benchmarks.py`` turns every such file into
``docs/benchmarks.md``. A table therefore always carries the machine, its CPU
flags, the commit, the date and the exact command that produced it, and
re-running a bench refreshes its table.

Schema (version 1)::

    {"version": 1, "bench": "bench_layout", "title": "...",
     "command": "python3 benches/bench_layout.py --runs 30",
     "commit": "abc1234", "dirty": false, "date": "2026-11-24T15:00:00Z",
     "machine": {"cpu": "...", "cores": 16, "simd": ["avx2", "avx512f", ...],
                 "slug": "xeon-16c-avx512"},
     "load_average": 0.4,  (optional: the 1-minute load when saved)
     "tables": [{"title": "...", "note": "...", "columns": ["case", "ratio"],
                 "rows": [["BGR->RGBx 1080p", 0.96]]}]}
"""

from __future__ import annotations

import atexit
import datetime as _dt
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

RESULTS = Path(__file__).resolve().parent / "results"
_FLAGS = ("sse4_2", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vbmi", "avx512_vnni", "avx512_bf16", "avx512_fp16",
          "amx_bf16", "asimd", "sve")


def machine() -> dict[str, Any]:
    """The CPU a figure came from: model name, usable cores, SIMD flags and a short slug."""
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^(?:model name|Model name|CPU part)\s*:\s*(.+)$", text, re.M)
        cpu = m.group(1).strip() if m else cpu
        f = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", text, re.M)
        flags = set(f.group(1).split()) if f else set()
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0))
    simd = [f for f in _FLAGS if f in flags]
    forced = os.environ.get("NPU_ZC_SIMD")
    isa = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "neon" if "asimd" in flags else "scalar"
    kind = "xeon" if "Xeon" in cpu else "epyc" if "EPYC" in cpu else platform.machine()
    slug = f"{kind}-{cores}c-{isa}" + (f"-simd-{forced}" if forced else "")
    return {"cpu": cpu, "cores": cores, "simd": simd, "forced_simd": forced, "slug": slug}


def scratch(prefix: str) -> Path:
    """A temporary folder for a bench's inputs (clips, models), removed when the bench exits: a 1080p clip of
    minutes is hundreds of megabytes, and a lent machine's disk is small. (A clip to keep: the bench's ``--clip``.)"""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=RESULTS.parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def settings(argv: Sequence[str]) -> list[str]:
    """A bench's arguments less where its results go (``--json PATH``): the command that gives the same figures."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--json":
            skip = True
        elif not arg.startswith("--json="):
            out.append(arg)
    return out


def save(bench: str, tables: Sequence[dict[str, Any]], *, title: str = "", path: str | os.PathLike[str] | None = None) -> Path:
    """Writes this run's tables (each ``{"title", "columns", "rows", "note"?}``) and returns the file's path."""
    m = machine()
    commit = os.environ.get("NPU_ZC_COMMIT") or _git("rev-parse", "--short", "HEAD") or "unknown"
    # A copy of the tree run elsewhere (a machine lent for benches) may carry a stale .git: whoever names the commit
    # can say whether the tree differed from it (NPU_ZC_DIRTY=0 or 1); else git says.
    said = os.environ.get("NPU_ZC_DIRTY")
    dirty = said == "1" if said in ("0", "1") else bool(
        _git("status", "--porcelain", "--untracked-files=no", "--", ":/",
             ":(top,exclude)docs", ":(top,exclude,glob)**/*.md", ":(top,exclude)benches/results"))
    record = {
        "version": 1,
        "bench": bench,
        "title": title or bench,
        "command": "python3 " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0]) if sys.argv[0] else bench,
                                                                  *settings(sys.argv[1:])]),
        "commit": commit,
        # Uncommitted changes to the code (not to docs or recorded results, which the benches do not run).
        "dirty": dirty,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": m,
        # A shared machine's other work shows in every figure: the 1-minute load when the tables were saved.
        "load_average": round(os.getloadavg()[0], 2),
        "tables": [dict(t) for t in tables],
    }
    out = Path(path) if path else RESULTS / f"{bench}--{m['slug']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1, default=float) + "\n")
    return out
