"""The CLI refuses what would block, never end, or mislead, with one line:
FIFOs and devices as input or labels, a TIFF bomb, a truncated
JPEG that still ends in an end-of-image marker, a camera size beyond 32 bits;
Ctrl-C with --hint throughput prints the partial table."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (a dependency of npu_zc)")
pytest.importorskip("skimage", reason="scikit-image (the sample photos) is not installed (the [demo] extra)")

from npu_zc.pipeline import sample_photo
from tiny_onnx import COLOURS, colour_classifier
from cli_helpers import COMMAND, npu_zc, one_line_error

@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli-refusals")
    ok, jpeg = cv2.imencode(".jpg", sample_photo("chelsea"))
    assert ok
    data = jpeg.tobytes()
    out = {"good": root / "good.jpg", "cut": root / "cut.jpg", "fifo": root / "fifo", "bomb": root / "bomb.tif"}
    out["good"].write_bytes(data)
    out["cut"].write_bytes(data[: len(data) // 2] + b"\xff\xd9")  # cut mid-scan, end marker appended
    os.mkfifo(out["fifo"])
    # A TIFF whose header says 60000 x 60000 (3.6 G pixels) over 8 x 8 of data.
    cv2.imwrite(str(out["bomb"]), np.zeros((8, 8, 3), np.uint8))
    tiff = bytearray(out["bomb"].read_bytes())
    assert tiff[:2] == b"II"
    ifd = int.from_bytes(tiff[4:8], "little")
    for i in range(int.from_bytes(tiff[ifd : ifd + 2], "little")):
        entry = ifd + 2 + 12 * i
        tag, kind = int.from_bytes(tiff[entry : entry + 2], "little"), int.from_bytes(tiff[entry + 2 : entry + 4], "little")
        if tag in (256, 257):  # ImageWidth, ImageLength
            tiff[entry + 8 : entry + (10 if kind == 3 else 12)] = (60000).to_bytes(2 if kind == 3 else 4, "little")
    out["bomb"].write_bytes(bytes(tiff))
    out["colours"] = colour_classifier(root / "colours.onnx")
    out["labels"] = root / "colours.txt"
    out["labels"].write_text("\n".join(COLOURS))
    return out


@pytest.mark.parametrize("source", ["fifo", "/dev/zero", "/dev/urandom"])
def test_input_that_is_not_a_regular_file_is_refused_at_once(files: dict[str, Path], source: str) -> None:
    path = files["fifo"] if source == "fifo" else source
    started = time.monotonic()
    line = one_line_error(npu_zc("run", "-i", path, "-m", files["colours"], timeout=60), "regular file")
    assert time.monotonic() - started < 60
    assert ("FIFO" in line) if source == "fifo" else ("character device" in line)


def test_labels_from_a_device_are_refused(files: dict[str, Path]) -> None:
    one_line_error(npu_zc("run", "-i", files["good"], "-m", files["colours"], "--labels", "/dev/zero"), "regular file")


def test_names_from_a_fifo_or_a_device_are_refused(files: dict[str, Path]) -> None:
    for names, kind in ((files["fifo"], "FIFO"), ("/dev/zero", "character device")):
        line = one_line_error(npu_zc("run", "-i", files["good"], "-m", files["colours"], "--names", names, timeout=60), "regular file")
        assert kind in line


def test_a_names_file_of_nested_aliases_is_refused(files: dict[str, Path], tmp_path: Path) -> None:
    levels = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"l{k}: &l{k} [" + ", ".join([f"*l{k - 1}"] * 9) + "]" for k in range(1, 9)]
    path = tmp_path / "names.yaml"
    path.write_text("\n".join(levels) + "\nnames: *l8\n")  # nine levels: 9**9 strings from 700 bytes
    assert path.stat().st_size < 1024
    one_line_error(npu_zc("run", "-i", files["good"], "-m", files["colours"], "--names", path, timeout=60), "aliases")


@pytest.mark.parametrize("flag", ["--timeout", "--duration"])
@pytest.mark.parametrize("value", ["nan", "-1", "0", "-inf", "soon"])
def test_seconds_that_are_no_seconds_are_refused(files: dict[str, Path], flag: str, value: str) -> None:
    line = one_line_error(npu_zc("stream", "-i", files["good"], "-m", files["colours"], f"{flag}={value}", timeout=60), flag, code=2)
    assert "seconds" in line


@pytest.mark.parametrize(
    "flag, value",
    [("--classes", "5000000000"), ("--classes", "0,99999999999999999999999"), ("--max-det", "1e30"),
     ("--max-det", "5000000000"), ("--requests", "1e30"), ("--threads", "1e30")],
)  # fmt: skip
def test_numbers_beyond_what_the_runtime_holds_are_refused(
    files: dict[str, Path], red_square_yolo: Path, flag: str, value: str
) -> None:
    """A YOLO model, so that the numbers would reach the decoder: one line naming the flag, not "internal error"."""
    done = npu_zc("run", "-i", files["good"], "-m", red_square_yolo, "-d", "CPU", flag, value, timeout=120)
    one_line_error(done, flag)


def test_stream_from_a_fifo_is_refused(files: dict[str, Path]) -> None:
    one_line_error(npu_zc("stream", "-i", files["fifo"], "-m", files["colours"], timeout=60), "regular file")


@pytest.mark.parametrize("limit", [None, "2e9", "2000000000"])
def test_a_tiff_bomb_is_one_clean_line(files: dict[str, Path], limit: str | None) -> None:
    args = ["run", "-i", files["bomb"], "-m", files["colours"]] + (["--max-pixels", limit] if limit else [])
    one_line_error(npu_zc(*args), "over the limit")


def test_a_truncated_jpeg_with_an_end_marker_is_reported_as_truncated(files: dict[str, Path]) -> None:
    one_line_error(npu_zc("run", "-i", files["cut"], "-m", files["colours"]), "truncated")
    assert npu_zc("run", "-i", files["good"], "-m", files["colours"]).returncode == 0


def test_a_camera_size_beyond_32_bits_is_a_clear_error() -> None:
    one_line_error(npu_zc("stream", "--camera", "/dev/null", "--size", "99999999999x5"), "too large")


def test_ctrl_c_in_throughput_mode_prints_the_partial_table(files: dict[str, Path]) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        [*COMMAND, "run", "-i", str(files["good"]), "-m", str(files["colours"]), "--hint", "throughput",
         "-n", "1000000000", "-d", "CPU"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        time.sleep(12)  # compiled, warmed up, timed frames running
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "stopped by Ctrl-C" in out and "throughput (pipeline)" in out and "preprocess" in out, out + err


def test_reading_a_small_file_does_not_allocate_the_limit() -> None:
    """read(limit + 1) would allocate the whole limit (1 GiB) for every image: bounded by the file's size."""
    import resource

    from npu_zc._files import read_regular_file

    path = Path(__file__)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(3):
        assert read_regular_file(path, "this file", ValueError, limit=1 << 34) == path.read_bytes()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10  # KiB: under 64 MiB
    with pytest.raises(ValueError, match="over the limit"):
        read_regular_file(path, "this file", ValueError, limit=10)
