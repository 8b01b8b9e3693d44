"""Make the ByteTrack fixtures: synthetic detection sequences run through Ultralytics' own BYTETracker.

Run with a Python that has ultralytics (+ torch, numpy, lap), never the project's .venv:

    python3 -m venv /work/wt/yolo-app-torch-venv
    /work/wt/yolo-app-torch-venv/bin/pip install torch==2.15.0 lap numpy pyyaml psutil polars requests \
        matplotlib opencv-python-headless scipy && \
    /work/wt/yolo-app-torch-venv/bin/pip install --no-deps ultralytics
    /work/wt/yolo-app-torch-venv/bin/python scripts/make_track_fixtures.py

Writes tests/detect/fixtures/bytetrack.npz: per sequence the detections of every frame (xyxy, score,
class) and what Ultralytics' tracker returned for them (x1, y1, x2, y2, track_id, score, class, idx),
with the ultralytics version; and tests/detect/fixtures/bytetrack_obb.npz: the same for oriented boxes
(detections xywhr, as an OBB model's results; rows x, y, w, h, angle, track_id, score, class, idx).
tests/detect/test_track_ultralytics.py compares npu_zc.Tracker with them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "detect" / "fixtures" / "bytetrack.npz"
OUT_OBB = OUT.with_name("bytetrack_obb.npz")


class Boxes:
    """The parts of ultralytics' numpy `Boxes` that BYTETracker reads: conf, cls, xywh, boolean indexing."""

    def __init__(self, xyxy: np.ndarray, conf: np.ndarray, cls: np.ndarray) -> None:
        self.xyxy = np.asarray(xyxy, np.float32).reshape(-1, 4)
        self.conf = np.asarray(conf, np.float32)
        self.cls = np.asarray(cls, np.float32)

    @property
    def xywh(self) -> np.ndarray:  # ultralytics' xyxy2xywh, in float32 as its tensors are
        x = self.xyxy
        return np.stack([(x[:, 0] + x[:, 2]) / 2, (x[:, 1] + x[:, 3]) / 2, x[:, 2] - x[:, 0], x[:, 3] - x[:, 1]], 1)

    def __len__(self) -> int:
        return len(self.conf)

    def __getitem__(self, index: np.ndarray) -> "Boxes":
        return Boxes(self.xyxy[index], self.conf[index], self.cls[index])


class Obbs:
    """The parts of ultralytics' numpy `OBB` results that BYTETracker reads: conf, cls, xywhr, indexing."""

    def __init__(self, xywhr: np.ndarray, conf: np.ndarray, cls: np.ndarray) -> None:
        self.xywhr = np.asarray(xywhr, np.float32).reshape(-1, 5)
        self.conf = np.asarray(conf, np.float32)
        self.cls = np.asarray(cls, np.float32)

    def __len__(self) -> int:
        return len(self.conf)

    def __getitem__(self, index: np.ndarray) -> "Obbs":
        return Obbs(self.xywhr[index], self.conf[index], self.cls[index])


Frame = tuple[np.ndarray, np.ndarray, np.ndarray]  # xyxy (n, 4) or xywhr (n, 5), scores (n,), classes (n,)


def box(cx: float, cy: float, w: float, h: float) -> list[float]:
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


def frames_of(objects: list[list[tuple[list[float], float, int]]], width: int = 4) -> list[Frame]:
    return [
        (np.array([o[0] for o in f], np.float32).reshape(-1, width), np.array([o[1] for o in f], np.float32),
         np.array([o[2] for o in f], np.int32))
        for f in objects
    ]


def crossing() -> list[Frame]:
    """Two people walking towards each other, crossing, and walking on."""
    frames = []
    for t in range(60):
        a = (box(100 + 8 * t, 300, 60, 160), 0.9, 0)
        b = (box(580 - 8 * t, 305, 64, 170), 0.85, 0)
        frames.append([a, b] if t % 2 else [b, a])  # order in the frame changes
    return frames_of(frames)


def occlusion() -> list[Frame]:
    """One object hidden for 10 frames (found again), another for 40 (a new id), a third steady."""
    frames = []
    for t in range(90):
        f = [(box(400, 100 + 2 * t, 80, 80), 0.8, 2)]
        if not 20 <= t < 30:
            f.append((box(100 + 4 * t, 200, 50, 100), 0.9, 0))
        if not 30 <= t < 70:
            f.append((box(300, 400 - 2 * t, 120, 60), 0.7, 1))
        frames.append(f)
    return frames_of(frames)


def low_scores() -> list[Frame]:
    """Scores dipping below the high threshold (second association), below the low one, and back."""
    frames = []
    scores = [0.9, 0.8, 0.2, 0.15, 0.12, 0.6, 0.05, 0.3, 0.22, 0.9] * 5
    for t, s in enumerate(scores):
        f = [(box(200 + 5 * t, 200 + 3 * t, 70, 140), s, 0), (box(500, 300, 90, 90), 0.95 if t % 7 else 0.18, 3)]
        if t % 3 == 0:
            f.append((box(50 + 20 * t, 50, 30, 30), 0.2, 5))  # low-score clutter, never a track
        frames.append(f)
    return frames_of(frames)


def new_each_frame() -> list[Frame]:
    """Unconfirmed tracks: a new box in a new place every frame (removed after one frame), degenerate boxes."""
    frames = []
    for t in range(30):
        f = [(box(300, 300, 100, 100), 0.9, 0), (box(50 + 37 * t % 600, 500, 40, 40), 0.6, 1)]
        if t % 5 == 0:
            f.append(([10.0, 10.0, 10.0, 50.0], 0.9, 0))  # no width
        frames.append(f)
    return frames_of(frames)


def random_walk(seed: int, frames: int = 120, objects: int = 12) -> list[Frame]:
    """Many objects on random walks with noisy boxes and scores, births, deaths, misses and false positives."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, frames // 2, objects)
    end = np.minimum(start + rng.integers(10, frames, objects), frames)
    pos = rng.uniform([50, 50], [1200, 650], (objects, 2))
    vel = rng.normal(0, 4, (objects, 2))
    size = rng.uniform([20, 30], [150, 200], (objects, 2))
    cls = rng.integers(0, 4, objects)
    out = []
    for t in range(frames):
        pos += vel + rng.normal(0, 1, (objects, 2))
        f = []
        for i in range(objects):
            if not start[i] <= t < end[i] or rng.random() < 0.08:
                continue
            jitter = rng.normal(0, 1.5, 4)
            w, h = size[i] * (1 + rng.normal(0, 0.03, 2))
            score = float(np.clip(rng.normal(0.6, 0.25), 0.01, 0.99))
            f.append(((np.array(box(*pos[i], w, h)) + jitter).tolist(), score, int(cls[i])))
        for _ in range(rng.poisson(1.5)):  # false positives
            f.append((box(*rng.uniform([0, 0], [1280, 720]), *rng.uniform(10, 80, 2)), float(rng.uniform(0.1, 0.4)), 0))
        order = rng.permutation(len(f))
        out.append([f[j] for j in order])
    return frames_of(out)


def obb_turning() -> list[Frame]:
    """Rotated boxes turning through the angle range an OBB model gives ([-pi/4, 3pi/4)): a long box whose
    width and height swap roles (the long-edge form), one reported now as (w, h, a), now as (h, w, a + pi/2)
    or (w, h, a - pi) (the same box: the track's angle must not flip), a square-ish one."""
    frames = []
    for t in range(70):
        a = -np.pi / 4 + (t * 0.05) % np.pi
        f = [([200 + 2 * t, 200, 120, 40, a], 0.9, 0)]
        b = 0.3 + 0.02 * t
        form = t % 3
        bx = [500, 300 + t, 90, 30, b] if form == 0 else [500, 300 + t, 30, 90, b + np.pi / 2] if form == 1 \
            else [500, 300 + t, 90, 30, b - np.pi]
        f.append((bx, 0.8, 1))
        f.append(([350, 450 - t, 60, 58, 0.1 * t], 0.7 if t % 4 else 0.2, 2))
        frames.append(f[::-1] if t % 2 else f)
    return frames_of(frames, 5)


def obb_crossing() -> list[Frame]:
    """Two long thin boxes at different angles crossing each other (their axis-aligned boxes overlap far more
    than the rotated ones), and a ship-like box hidden for a while."""
    frames = []
    for t in range(60):
        f = [([100 + 8 * t, 300, 200, 24, 0.6], 0.9, 0), ([580 - 8 * t, 310, 200, 24, -0.6], 0.85, 0)]
        if not 25 <= t < 35:
            f.append(([300, 120 + t, 150, 50, 1.2 + 0.01 * t], 0.75, 3))
        frames.append(f)
    return frames_of(frames, 5)


def obb_random(seed: int, frames: int = 120, objects: int = 12) -> list[Frame]:
    """Rotated objects on random walks, turning, with noisy boxes, angles and scores, births, deaths,
    misses and false positives."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, frames // 2, objects)
    end = np.minimum(start + rng.integers(10, frames, objects), frames)
    pos = rng.uniform([50, 50], [1200, 650], (objects, 2))
    vel = rng.normal(0, 4, (objects, 2))
    size = rng.uniform([20, 10], [160, 120], (objects, 2))
    angle = rng.uniform(-np.pi / 4, 3 * np.pi / 4, objects)
    turn = rng.normal(0, 0.04, objects)
    cls = rng.integers(0, 4, objects)
    out = []
    for t in range(frames):
        pos += vel + rng.normal(0, 1, (objects, 2))
        angle += turn
        f = []
        for i in range(objects):
            if not start[i] <= t < end[i] or rng.random() < 0.08:
                continue
            w, h = size[i] * (1 + rng.normal(0, 0.03, 2))
            a = (angle[i] + rng.normal(0, 0.02) + np.pi / 4) % np.pi - np.pi / 4  # the model's range
            score = float(np.clip(rng.normal(0.6, 0.25), 0.01, 0.99))
            f.append(([*(pos[i] + rng.normal(0, 1.5, 2)), w, h, a], score, int(cls[i])))
        for _ in range(rng.poisson(1.5)):  # false positives
            f.append(([*rng.uniform([0, 0], [1280, 720]), *rng.uniform(10, 80, 2), rng.uniform(-0.7, 2.3)],
                      float(rng.uniform(0.1, 0.4)), 0))
        order = rng.permutation(len(f))
        out.append([f[j] for j in order])
    return frames_of(out, 5)


OBB_SEQUENCES = {
    "obb_turning": obb_turning,
    "obb_crossing": obb_crossing,
    "obb_random_1": lambda: obb_random(11),
    "obb_random_2": lambda: obb_random(12, frames=200, objects=25),
}

SEQUENCES = {
    "crossing": crossing,
    "occlusion": occlusion,
    "low_scores": low_scores,
    "new_each_frame": new_each_frame,
    "random_1": lambda: random_walk(1),
    "random_2": lambda: random_walk(2, frames=200, objects=25),
    "random_3": lambda: random_walk(3, frames=80, objects=4),
}


def main() -> None:
    import ultralytics
    from ultralytics.trackers.byte_tracker import BYTETracker
    from ultralytics.utils import IterableSimpleNamespace, YAML
    from ultralytics.utils.checks import check_yaml

    config = YAML.load(check_yaml("bytetrack.yaml"))
    args = IterableSimpleNamespace(**config)
    for out, sequences, results, width in ((OUT, SEQUENCES, Boxes, 4), (OUT_OBB, OBB_SEQUENCES, Obbs, 5)):
        write(out, sequences, results, width, BYTETracker, args, config, ultralytics.__version__)


def write(out, sequences, results, width, BYTETracker, args, config, version) -> None:  # noqa: ANN001
    arrays: dict[str, np.ndarray] = {"ultralytics_version": np.array(version)}
    for name, make in sequences.items():
        tracker = BYTETracker(args)
        frames = make()
        counts, boxes, scores, classes, expected, expected_counts = [], [], [], [], [], []
        for xyxy, conf, cls in frames:
            tracks = tracker.update(results(xyxy, conf, cls))
            tracks = tracks.reshape(-1, width + 4)
            counts.append(len(conf))
            boxes.append(xyxy)
            scores.append(conf)
            classes.append(cls)
            expected.append(tracks)
            expected_counts.append(len(tracks))
        arrays[f"{name}/counts"] = np.array(counts, np.int32)
        arrays[f"{name}/{'xyxy' if width == 4 else 'xywhr'}"] = np.concatenate(boxes).astype(np.float32)
        arrays[f"{name}/scores"] = np.concatenate(scores).astype(np.float32)
        arrays[f"{name}/classes"] = np.concatenate(classes).astype(np.int32)
        arrays[f"{name}/expected_counts"] = np.array(expected_counts, np.int32)
        arrays[f"{name}/expected"] = np.concatenate(expected).astype(np.float32)
        ids = np.concatenate(expected)[:, width]
        print(f"{name}: {len(frames)} frames, {len(ids)} tracked detections, {len(np.unique(ids))} ids", file=sys.stderr)
    arrays["config"] = np.array(repr(dict(config)))
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **arrays)
    print(f"wrote {out} ({out.stat().st_size} bytes, ultralytics {version})", file=sys.stderr)


if __name__ == "__main__":
    main()
