"""The soaks' command lines (``scripts/soak*.py``): a bad value is refused with argparse's one line and exit status
2 before anything starts, and a soak that would compare no samples fails instead of passing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openvino")  # the soaks compile a model at start (not in the portable aarch64 run)

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _refused(script: str, *flags: str) -> str:
    done = subprocess.run([sys.executable, str(SCRIPTS / script), *flags], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    return done.stderr


@pytest.mark.parametrize(
    "script, flags, said",
    [
        ("soak.py", ["--seconds", "0"], "argument --seconds: expected a number of seconds more than 0"),
        ("soak.py", ["--seconds", "nan"], "argument --seconds"),
        ("soak.py", ["--fault-every", "-1"], "argument --fault-every"),
        ("soak.py", ["--warmup", "-2"], "argument --warmup"),
        ("soak.py", ["--seconds", "30", "--warmup", "30"], "--warmup (30 s) must be shorter than --seconds (30 s)"),
        ("soak_streams.py", ["--workers", "0"], "argument --workers"),
        ("soak_streams.py", ["--seconds", "10", "--warmup", "12"], "must be shorter than --seconds"),
        ("soak_serve.py", ["--keep", "0"], "argument --keep"),
        ("soak_serve.py", ["--names", "two"], "argument --names"),
    ],
)
def test_a_soak_refuses_a_bad_flag_before_it_starts(script: str, flags: list[str], said: str) -> None:
    assert said in _refused(script, *flags)


@pytest.mark.parametrize("names, keep", [(3, 3), (2, 3)])
def test_the_workers_soak_refuses_names_that_would_come_round_while_running(names: int, keep: int) -> None:
    """``scripts/soak_streams.py`` adds the next of ``--names`` names while ``--keep`` run: with no more names than
    that, a name would come round again while its stream still runs (an ``add`` refused mid-soak), so it is refused
    before anything starts, with the reason."""
    said = _refused("soak_streams.py", "--names", str(names), "--keep", str(keep), "--seconds", "1")
    assert "--names must be more than --keep" in said


@pytest.mark.parametrize("kept", [0, 1])
def test_a_soak_with_too_few_samples_after_its_warm_up_fails(kept: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import soak

    samples = [{"t": float(t), "rss_mib": 100.0, "fds": 10.0, "maps": 50.0, "threads": 4.0} for t in range(5)]
    since = 5.0 - kept  # the last `kept` samples after the warm-up
    growth, slopes, problems = soak.resources_verdict(samples, since, soak.LIMITS)
    assert problems == [f"{kept} sample(s) after the warm-up: too few to judge the resources (a longer soak, or a "
                        "shorter --warmup)"]  # fmt: skip
    assert soak.report("soak", growth, slopes, problems) == 1
    # Two samples are compared (and the same figures pass).
    assert soak.resources_verdict(samples, 3.0, soak.LIMITS)[2] == []
