"""`npu-zc run --count-copies`: the memcpy counter ships with the package,
is built on demand, and tells zero copy (0 frame bytes) from copy mode (the
frame's bytes, copied in and out by the runtime)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (a dependency of npu_zc)")
pytest.importorskip("skimage", reason="scikit-image (the sample photos) is not installed (the [demo] extra)")

from npu_zc import memcount
from npu_zc.pipeline import sample_photo

from cli_helpers import COMMAND


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("copies") / "chelsea.jpg"
    cv2.imwrite(str(path), sample_photo("chelsea"))
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (os.environ.get("CC") or any(Path(d, cc).exists() for d in os.environ["PATH"].split(":") for cc in ("cc", "gcc"))):
        pytest.skip("no C compiler")
    return tmp_path_factory.mktemp("cache")


def count(photo: Path, cache: Path, *extra: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", XDG_CACHE_HOME=str(cache))
    done = subprocess.run(
        [*COMMAND, "run", "-i", str(photo), "-d", "CPU", "-n", "3", "--count-copies", "--json", *extra],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_zero_copy_counts_no_frame_bytes(photo: Path, cache: Path) -> None:
    result = count(photo, cache)
    assert result["mode"] == "zero-copy" and result["frames"] == 3
    assert result["frame_bytes_per_frame"] == 0
    assert result["largest_copy"] < 1024  # metadata only
    assert list(cache.glob("npu_zc/libmemcount-*.so")), "built once, into the cache"


def test_copy_mode_counts_the_frame(photo: Path, cache: Path) -> None:
    result = count(photo, cache, "-c")
    assert result["mode"] == "copy"
    assert result["frame_bytes_per_frame"] >= result["input_bytes"]  # the runtime copied the input in
    assert result["largest_copy"] >= result["input_bytes"]


def test_text_report(photo: Path, cache: Path) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", XDG_CACHE_HOME=str(cache))
    done = subprocess.run([*COMMAND, "run", "-i", str(photo), "-d", "CPU", "-n", "2", "--count-copies"],
                          capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "bytes / frame" in done.stdout and "zero copy" in done.stdout


def test_without_a_c_compiler_one_clear_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, gcc or clang here
    with pytest.raises(memcount.CounterUnavailableError, match="needs a C compiler"):
        memcount.build(tmp_path / "cache")


def test_the_source_ships_with_the_package() -> None:
    assert b"memcount_start" in memcount.source()
