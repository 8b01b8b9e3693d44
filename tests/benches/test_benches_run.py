"""The benches (benches/*.py) run for real, each in its smallest settings, so that one that rots fails here: its
exit status, and the record it writes (benches/results.py's schema, version 1) read back and rendered the way
scripts/render_benchmarks.py renders docs/benchmarks.md. Only the shape of what they write is checked, never a
figure: no timing, ratio or target, nor anything that depends on the CPU plugin's precision.

A bench's temporary files (clips, models) must be gone when it exits (``results.scratch``). A bench refuses what it
cannot run with one sentence and a non-zero exit status, not a traceback: those paths run here too.

Each bench that records runs with ``--json PATH`` (a temporary file), except those whose own ``--json`` means
something else (bench_capture and bench_pipeline: print a JSON object; bench_cpu_time and bench_throughput: a raw
dump beside the record): they run from a copy of benches/ in a temporary folder, so that their record lands in the
copy's results/. No bench may write into benches/results/ here. The diagnosis scripts that record nothing
(check_bf16, check_fast_rounding, decode_beside_inference, decoders_beside, decoders_per_core, fit_timings,
python_per_frame, resize_builds, streams_processes) are run for their exit status only.

bench_request_path builds its native side (benches/request_path) with cargo, as the test suite's machines have it.
Left out: bench_capture's camera mode, which needs a V4L2 camera (vivid, in the VM); its ``--synthetic`` mode runs
here. Not run either: the helpers (results.py, timing.py,
criterion_table.py, which reads ``cargo bench``'s output). The diagnosis that compares builds of npu_zc given as
folders (resize_builds) runs with this tree's package as both.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import REPO

if os.environ.get("NPU_ZC_EMULATED"):
    pytest.skip("the benches run for real: under emulation they take many times their budget", allow_module_level=True)
for _module in ("openvino", "cv2", "av"):
    pytest.importorskip(_module)

BENCHES = REPO / "benches"
RESULTS = BENCHES / "results"
TIMEOUT_S = 300


@dataclass(frozen=True)
class Case:
    script: str
    """benches/<script>.py"""
    args: str
    """Its smallest settings (split as a shell would); ``{clip}`` and ``{model}`` stand for the inputs below."""
    record: str | None
    """The bench name its record carries; None: a diagnosis that records nothing."""
    copy: bool = False
    """Run from a copy of benches/: its own ``--json`` is not where its record goes."""


CASES = {
    "bench_aliasing": Case("bench_aliasing", "--runs 1", "bench_aliasing-this_build"),
    "bench_capture-synthetic": Case("bench_capture", "--synthetic 64x48 --frames 1", "bench_capture", copy=True),
    "bench_cpu_time": Case("bench_cpu_time", "--quick", "bench_cpu_time", copy=True),
    "bench_detect": Case("bench_detect", "--runs 1", "bench_detect"),
    "bench_detect_e2e": Case("bench_detect_e2e", "--runs 1", "bench_detect_e2e"),
    "bench_int8": Case("bench_int8", "--runs 1 --rounds 1", "bench_int8"),
    "bench_layout": Case("bench_layout", "--size 64x48 --runs 1 --rounds 1", "bench_layout"),
    "bench_layout-threads-sweep": Case("bench_layout", "--threads-sweep 1 --size 64x48 --runs 1 --rounds 1",
                                       "bench_layout_threads"),
    "bench_pipeline": Case("bench_pipeline", "--runs 1 --count-frames 1", "bench_pipeline", copy=True),
    "bench_request_path": Case("bench_request_path", "--requests 2 --count 10 --rounds 1", "bench_request_path"),
    "bench_resize": Case("bench_resize", "--runs 1 --rounds 1", "bench_resize"),
    "bench_serve": Case("bench_serve", "--streams 1 --seconds 1 --warmup 1", "bench_serve"),
    "bench_streams": Case("bench_streams", "--seconds 0.5 --clip-seconds 1 --max-streams 1 --unpaced 1",
                          "bench_streams"),
    "bench_streams-at": Case("bench_streams", "--at 1 --seconds 0.5 --clip-seconds 1 --fps 10 --live-frames 2",
                             "bench_streams"),
    "bench_streams_overhead": Case("bench_streams_overhead",
                                   "--streams 1 --seconds 0 --size 64x48 --frames 60 --workers 1",
                                   "bench_streams_overhead"),
    "bench_throughput": Case("bench_throughput", "--seconds 0.5 --warmup 0 --no-original", "bench_throughput",
                             copy=True),
    "inference_processes": Case("inference_processes", "--streams 1 --processes 1 --rounds 1 --warm 0 --seconds 0.5 "
                                "--size 64x48 --frames 60", "inference_processes"),
    "check_bf16": Case("check_bf16", "", None),
    "check_fast_rounding": Case("check_fast_rounding", "--photos 1", None),
    "decode_beside_inference": Case("decode_beside_inference", "--model {model} --threads 1 --seconds 0.5", None),
    "decoders_beside": Case("decoders_beside", "--beside convert --decoders 1 --neighbours 1 --rounds 1 --frames 1 "
                            "--clip {clip}", None),
    "decoders_per_core": Case("decoders_per_core", "1x1 --rounds 1 --frames 1 --clip {clip}", None),
    "fit_timings": Case("fit_timings", "{model} --repeat 1 --one-request", None),
    "resize_builds": Case("resize_builds", "python python --rounds 1 --cold 8 --formats BGR NV12", None),
    "python_per_frame": Case("python_per_frame", "--frames 1 --workers 1", None),
    "streams_processes": Case("streams_processes", "1x1 --model {model} --seconds 0.5 --start-in 0", None),
}  # fmt: skip


@pytest.fixture(scope="module")
def inputs(clips: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the diagnosis scripts take as files: the streams tests' H.264 clip, and the CLI tests' colour classifier
    (an ONNX of batch 1, which Pipeline and benchmark_app both read)."""
    from tiny_onnx import colour_classifier

    model = colour_classifier(tmp_path_factory.mktemp("bench_model") / "colours.onnx", batch=1)
    return {"clip": str(clips["h264"]), "model": str(model)}


def results_now() -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in RESULTS.iterdir()} if RESULTS.is_dir() else {}


def copy_of_benches(folder: Path) -> Path:
    """benches/*.py in ``folder``/benches, beside links to python/ and tests/ (what they find through their parent)."""
    (folder / "benches").mkdir(parents=True)
    for script in BENCHES.glob("*.py"):
        shutil.copy2(script, folder / "benches" / script.name)
    for name in ("python", "tests"):
        (folder / name).symlink_to(REPO / name, target_is_directory=True)
    return folder


def run_bench(argv: list[str], cwd: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    """The bench in a process group of its own (on a timeout its workers go with it), its temporary files (clips,
    models) in ``tmp``, which pytest removes."""
    env = {k: v for k, v in os.environ.items() if k not in ("NPU_ZC_LABEL", "ULTRALYTICS_PYTHON", "NPU_ZC_SIMD")}
    tmp.mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp)
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stop_group(process.pid)
        stdout, stderr = process.communicate()
        pytest.fail(f"{shlex.join(argv)} did not finish within {TIMEOUT_S} s\n--- stdout\n{stdout[-4000:]}\n"
                    f"--- stderr\n{stderr[-6000:]}")  # fmt: skip
    stop_group(process.pid)  # what a bench that failed midway left running (a broker, a worker)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def stop_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:  # every process of it has ended
        pass


def renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_benchmarks", REPO / "scripts" / "render_benchmarks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_cell(cell: Any, where: str) -> None:
    assert cell is None or isinstance(cell, (str, bool, int, float)), f"{where}: {cell!r} is not a table cell"
    if isinstance(cell, float):
        assert math.isfinite(cell), f"{where}: {cell!r} is not a finite number"


def check_record(record: Any, bench: str, command: str) -> None:
    """benches/results.py's schema, version 1."""
    assert isinstance(record, dict)
    assert record.get("version") == 1
    assert record.get("bench") == bench
    assert isinstance(record.get("title"), str) and record["title"]
    assert record.get("command") == command
    assert isinstance(record.get("commit"), str) and record["commit"]
    assert isinstance(record.get("dirty"), bool)
    datetime.datetime.strptime(record.get("date", ""), "%Y-%m-%dT%H:%M:%SZ")
    machine = record.get("machine")
    assert isinstance(machine, dict)
    assert isinstance(machine.get("cpu"), str) and isinstance(machine.get("slug"), str) and machine["slug"]
    assert isinstance(machine.get("cores"), int) and machine["cores"] >= 1
    assert isinstance(machine.get("simd"), list) and all(isinstance(f, str) for f in machine["simd"])
    if "load_average" in record:
        check_cell(record["load_average"], "load_average")
    tables = record.get("tables")
    assert isinstance(tables, list) and tables, "no tables"
    for t, table in enumerate(tables):
        assert isinstance(table, dict)
        assert isinstance(table.get("title"), str) and table["title"], f"table {t}: no title"
        assert isinstance(table.get("note", ""), str), f"table {t}: the note is not text"
        columns = table.get("columns")
        assert isinstance(columns, list) and columns and all(isinstance(c, str) for c in columns), f"table {t}: columns"
        rows = table.get("rows")
        assert isinstance(rows, list) and rows, f"table {t} ({table['title']!r}): no rows"
        for r, row in enumerate(rows):
            assert isinstance(row, list) and len(row) == len(columns), (
                f"table {t} ({table['title']!r}), row {r}: {len(row) if isinstance(row, list) else row!r} cells "
                f"for {len(columns)} columns: {row!r}")  # fmt: skip
            for c, cell in enumerate(row):
                check_cell(cell, f"table {t}, row {r}, column {columns[c]!r}")


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_bench_runs_and_records(case: Case, inputs: dict[str, str], tmp_path: Path) -> None:
    args = [a.format(**inputs) for a in shlex.split(case.args)]
    script = f"benches/{case.script}.py"
    cwd = copy_of_benches(tmp_path / "tree") if case.copy else REPO
    record_path = tmp_path / f"{case.script}.json"
    json_args = ["--json", str(record_path)] if case.record is not None and not case.copy else []
    before = results_now()

    done = run_bench([sys.executable, script, *args, *json_args], cwd, tmp_path / "tmp")

    assert done.returncode == 0, (f"{script} {shlex.join(args)} exited with {done.returncode}\n"
                                  f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-6000:]}")  # fmt: skip
    assert results_now() == before, f"{script} wrote into {RESULTS.relative_to(REPO)}/"
    left = sorted(p.name for p in (tmp_path / "tmp").iterdir())
    assert not left, f"{script} left {left} in its temporary folder"
    if case.record is None:
        return
    if case.copy:
        written = sorted((cwd / "benches" / "results").glob("*.json"))
        assert len(written) == 1, f"{script} wrote {[p.name for p in written]}, not one record"
        record_path = written[0]
    assert record_path.is_file(), f"{script} wrote no record at {record_path}\n--- stdout\n{done.stdout[-4000:]}"
    record = json.loads(record_path.read_text())
    # The command that gives the same figures: what ran, less where the record went (results.settings).
    check_record(record, case.record, "python3 " + " ".join(shlex.quote(a) for a in [script, *args]))

    text = renderer().render([record])
    assert f"## {record['title']}" in text
    for table in record["tables"]:
        assert f"**{table['title']}**" in text


REFUSALS = {
    "resize_builds-rounds": ("resize_builds", "python --rounds 0", 2, "--rounds takes 1 or more, --cold 0 or more"),
    "resize_builds-no-package": ("resize_builds", "{empty}", 2, "holds no npu_zc package"),
    "resize_builds-measuring-fails": ("resize_builds", "{broken} --rounds 1 --cold 0", 1,
                                      "failed (exit status 1):\nTraceback"),
    "bench_streams_overhead-rounds": ("bench_streams_overhead", "--rounds 0", 2, "--rounds must be at least 1"),
    "bench_streams_overhead-clip-too-short": ("bench_streams_overhead",
                                              "--streams 1 --size 64x48 --frames 10 --warm 5 --seconds 5", 1,
                                              "the run ended within its 5 s warm-up and 5 s window, after 10 frames"),
    "bench_streams-rounds": ("bench_streams", "--rounds 2", 2, "--rounds must be at least 1, and more than 1 needs --at"),
    "bench_streams-at": ("bench_streams", "--at 8 0", 2, "argument --at: must be at least 1, got 0"),
    "bench_streams_overhead-worker-nice": ("bench_streams_overhead", "--worker-nice 0 20", 2,
                                           "argument --worker-nice: must be at most 19, got 20"),
    "bench_streams_overhead-seconds": ("bench_streams_overhead", "--seconds -1", 2,
                                       "argument --seconds: expected a number of seconds of 0 or more, got '-1'"),
    "bench_serve-streams": ("bench_serve", "--streams 0", 2,
                            "argument --streams: must be at least 1, got 0"),
    "bench_serve-seconds": ("bench_serve", "--seconds nan", 2,
                            "argument --seconds: expected a number of seconds more than 0, got 'nan'"),
    "decoders_beside-frames": ("decoders_beside", "--frames 0", 2, "argument --frames: must be at least 1, got 0"),
    "decoders_beside-cores": ("decoders_beside", "--decoders 4096", 2, "--decoders 4096: each takes a core"),
    "decoders_beside-neighbours": ("decoders_beside", "--decoders 1 --neighbours 4096", 2,
                                   "1 decoders and 4096 neighbours, each on a core of its own, need more than"),
    "fit_timings-budget": ("fit_timings", "efficientnet-lite0 --budget nan", 2,
                           "--budget must be more than 0 ms, got nan"),
    "fit_timings-repeat": ("fit_timings", "efficientnet-lite0 --repeat 0", 2,
                           "argument --repeat: must be at least 1, got 0"),
    "check_fast_rounding-photos": ("check_fast_rounding", "--photos 0", 2, "argument --photos: must be at least 1, got 0"),
}  # fmt: skip
"""Per case: the script, its arguments (``{empty}``: a folder with no npu_zc; ``{broken}``: one whose npu_zc fails
to import, so the measuring process fails with its own traceback, which the bench passes on after its sentence), the
exit status and what its stderr says."""


@pytest.mark.parametrize("case", list(REFUSALS.values()), ids=list(REFUSALS))
def test_bench_refuses_with_a_sentence(case: tuple[str, str, int, str], tmp_path: Path) -> None:
    script, args, status, said = case
    broken = tmp_path / "broken"
    (broken / "npu_zc").mkdir(parents=True)
    (broken / "npu_zc" / "__init__.py").write_text("raise ImportError('a build that cannot be imported')\n")
    (tmp_path / "empty").mkdir()
    argv = [a.format(empty=tmp_path / "empty", broken=broken) for a in shlex.split(args)]
    before = results_now()

    done = run_bench([sys.executable, f"benches/{script}.py", *argv], REPO, tmp_path / "tmp")

    assert done.returncode == status, (f"{script} {shlex.join(argv)} exited with {done.returncode}\n"
                                       f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-6000:]}")  # fmt: skip
    assert said in done.stderr, done.stderr[-6000:]
    assert not done.stderr.startswith("Traceback"), done.stderr[-6000:]  # the bench's own sentence comes first
    assert results_now() == before
    assert not list((tmp_path / "tmp").iterdir())


def test_fast_rounding_diagnosis_stops_past_its_bound() -> None:
    """check_fast_rounding's guard, on a real photo decoded both ways: the decodings pass (within 1 level), and the
    fast one moved 2 levels in one channel, as a broken build would give, stops the run with its sentence."""
    sys.path.insert(0, str(REPO / "benches"))
    try:
        import check_fast_rounding as check
        from check_bf16 import PHOTOS, photos
    finally:
        sys.path.remove(str(REPO / "benches"))
    name, image = photos(PHOTOS[:1])[0]
    h, w = image.shape[:2]
    view = image[: h - h % 2, : w - w % 2].copy()
    exact, fast = check.decoded(view, "exact"), check.decoded(view, "fast")
    delta = check.within_bound(name, exact, fast)
    assert delta.max() == 1 and delta.shape == exact.shape  # the fast rounding differs somewhere, by 1 level at most
    broken = fast.copy()
    broken[0, 0, 1] = exact[0, 0, 1] + 2 if exact[0, 0, 1] < 128 else exact[0, 0, 1] - 2
    said = f"{name}: the fast rounding is 2 levels from the exact one (bound: 1)"
    with pytest.raises(SystemExit, match=f"^{re.escape(said)}$"):
        check.within_bound(name, exact, broken)
