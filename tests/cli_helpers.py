"""`npu-zc` as a person runs it: the installed command (or `python -m npu_zc.cli.main`) in a subprocess.

One runner and one check of "a one-line error a person can act on" for every CLI test file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "npu-zc"
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "npu_zc.cli.main"]

# Under qemu-user, whose /sys is the host's, OpenVINO's Arm CPU plugin says it cannot read the CPU's
# MIDR_EL1 register: the emulator's line, not ours.
_EMULATOR_NOISE = "Can't open MIDR_EL1 sysfs entry"


def npu_zc(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([*COMMAND, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)


def ok(*args: str | Path) -> str:
    done = npu_zc(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def one_line_error(done: subprocess.CompletedProcess[str], match: str, code: int | None = None) -> str:
    """The command failed with one line on stderr that contains ``match`` and no traceback; returns that line."""
    assert done.returncode not in (0, None), done.stdout
    if code is not None:
        assert done.returncode == code
    lines = [line for line in done.stderr.strip().splitlines() if _EMULATOR_NOISE not in line]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("npu-zc") and "internal error" not in lines[0] and "Traceback" not in done.stderr
    assert match.lower() in lines[0].lower(), lines[0]
    return lines[0]


def fails(*args: str | Path, match: str, code: int | None = None) -> str:
    """The command fails with one line on stderr containing ``match``; returns that line."""
    return one_line_error(npu_zc(*args), match, code)
