"""`npu-zc run` and `npu-zc stream` with YOLO models: an export folder given as it is, detections printed
(text and --json), drawn (--save), options, names, tracking over a stream, and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from cli_helpers import npu_zc, ok
from conftest import red_square_input_box, save_red_square_yolo

pytest.importorskip("openvino")


def fails(*args: str | Path, match: str) -> str:
    done = npu_zc(*args)
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and len(lines) >= 1, done.stderr
    assert match.lower() in done.stderr.lower(), done.stderr
    return done.stderr


def squares(anchors: list[tuple[int, int]]) -> np.ndarray:
    """A 640x640 grey BGR photo with red squares where the red-square YOLO's anchors fire."""
    img = np.full((640, 640, 3), 90, np.uint8)
    for col, row in anchors:
        x1, y1, x2, y2 = red_square_input_box(col, row)
        img[y1:y2, x1:x2] = (0, 0, 255)
    return img


@pytest.fixture(scope="module")
def photo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("photos") / "squares.png"
    cv2.imwrite(str(path), squares([(10, 20), (30, 12)]))
    return path


def test_run_prints_the_detections(red_square_yolo: Path, photo: Path) -> None:
    out = ok("run", "-i", photo, "-m", red_square_yolo, "-d", "CPU")
    assert "2 detections (detect):" in out
    assert out.count(" person (0) at ") == 2
    x1, y1, x2, y2 = red_square_input_box(10, 20)
    assert f"at ({x1:.1f}, {y1:.1f})-({x2:.1f}, {y2:.1f}) px" in out


def test_run_json_and_options(red_square_yolo: Path, photo: Path, tmp_path: Path) -> None:
    data = json.loads(ok("run", "-i", photo, "-m", red_square_yolo, "-d", "CPU", "--json"))
    assert data["kind"] == "yolo"
    found = data["detections"]["detections"]
    assert [d["label"] for d in found] == ["person", "person"]
    assert sorted(tuple(d["box"]) for d in found) == sorted(
        tuple(float(v) for v in red_square_input_box(c, r)) for c, r in [(10, 20), (30, 12)]
    )
    one = json.loads(ok("run", "-i", photo, "-m", red_square_yolo, "-d", "CPU", "--json", "--max-det", "1"))
    assert len(one["detections"]["detections"]) == 1
    none = json.loads(ok("run", "-i", photo, "-m", red_square_yolo, "-d", "CPU", "--json", "--classes", "3,4"))
    assert none["detections"]["detections"] == []
    names = tmp_path / "names.txt"
    names.write_text("\n".join(f"n{i}" for i in range(80)))
    named = json.loads(ok("run", "-i", photo, "-m", red_square_yolo, "-d", "CPU", "--json", "--names", names))
    assert {d["label"] for d in named["detections"]["detections"]} == {"n0"}


def test_run_save_draws_the_boxes(red_square_yolo: Path, photo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.png"
    ok("run", "-i", photo, "-m", red_square_yolo, "-d", "CPU", "--save", out)
    drawn = cv2.imread(str(out))
    original = cv2.imread(str(photo))
    assert drawn.shape == original.shape
    x1, y1, x2, y2 = red_square_input_box(30, 12)
    # The box's left edge, below the label, is drawn in class 0's colour.
    from npu_zc.detect.draw import color

    edge = drawn[y1 + 20 : y2 - 5, x1]
    assert (np.abs(edge.astype(int) - color(0)).sum(axis=1) < 60).mean() > 0.8
    assert (drawn != original).any(axis=2).sum() > 1000


def test_run_errors(red_square_yolo: Path, photo: Path, tmp_path: Path) -> None:
    fails("run", "-i", photo, "-m", red_square_yolo, "--conf", "2", match="from 0 to 1")
    fails("run", "-i", photo, "-m", red_square_yolo, "--classes", "a,b", match="class ids")
    bad = tmp_path / "three.txt"
    bad.write_text("a\nb\nc\n")
    fails("run", "-i", photo, "-m", red_square_yolo, "-d", "CPU", "--names", bad, match="3 class names")
    broken = save_red_square_yolo(tmp_path / "broken_openvino_model")
    (broken / "metadata.yaml").write_text("names: [a, b\n")
    fails("run", "-i", photo, "-m", broken, "-d", "CPU", match="not valid YAML")
    fails("run", "-i", photo, "-m", broken, "-d", "CPU", "--save", tmp_path / "x.jpg", match="not valid YAML")


def test_stream_tracks_the_squares(red_square_yolo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "frames"
    folder.mkdir()
    for t in range(6):
        cv2.imwrite(str(folder / f"{t:03d}.png"), squares([(8 + t, 10), (30 - t, 25)]))
    data = json.loads(ok("stream", "-i", folder, "-m", red_square_yolo, "-d", "CPU", "--json", "-c"))
    frames = data["results"]
    assert len(frames) == 6
    for frame in frames:
        ids = sorted(d["track_id"] for d in frame["detections"]["detections"])
        assert ids == [1, 2]
    text = ok("stream", "-i", folder, "-m", red_square_yolo, "-d", "CPU", "-c", "--no-progress")
    assert "found    12 detections in 6 frames, 2 tracks" in text
    untracked = json.loads(ok("stream", "-i", folder, "-m", red_square_yolo, "-d", "CPU", "--json", "-c", "--no-track"))
    assert all("track_id" not in d for f in untracked["results"] for d in f["detections"]["detections"])


def test_out_of_range_classes_and_max_det_are_refused_naming_them(red_square_yolo: Path, photo: Path) -> None:
    fails("run", "-i", photo, "-m", red_square_yolo, "-d", "CPU", "--classes", "5000000000", match="classes")
    fails("run", "-i", photo, "-m", red_square_yolo, "-d", "CPU", "--max-det", str(2**70), match="--max-det")
