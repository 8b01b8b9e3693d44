"""Diagnosis (not a bench with targets): a 1080p frame (a decoder's NV12 or I420 by default; packed RGB with
``--formats``) into model inputs of several sizes (bilinear, a letterbox, a halving, a 3x3 area shrink), one
thread, cached and from memory, under two or more builds of npu_zc side by side. Which path a shrink takes (the
fused x pass, gathered groups, whole rows) and how the x pass reads its rows are the library's choice, so comparing
a change of them needs the build before it beside the one after.

    python3 benches/resize_builds.py OLD_DIR NEW_DIR --rounds 4            # each DIR holds an npu_zc package
    NPU_ZC_SIMD=avx2 python3 benches/resize_builds.py OLD_DIR NEW_DIR       # the AVX2 path
    python3 benches/resize_builds.py OLD_DIR NEW_DIR --formats BGR RGBx     # packed sources (the packed x pass)

Each round runs every build in its own process, in turn (a shared machine's drift falls on each alike); a
build's figure for a case is the median of 7 blocks of 30 calls. "From memory": each call reads the next of
copies of the frame filling --cold MB, as a pipeline's frame comes from its decoder. Per case: each build's
range over the rounds, its kernel path, and the median of the later builds' per-round ratios to the first's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CASES: tuple[tuple[str, int, int, dict[str, object]], ...] = (
    ("centre square -> 224", 224, 224, {"roi": [420, 0, 1080, 1080]}),
    ("centre square -> 256", 256, 256, {"roi": [420, 0, 1080, 1080]}),
    ("-> 416x416", 416, 416, {}),
    ("-> 512x512", 512, 512, {}),
    ("-> 640x640", 640, 640, {}),
    ("-> 720x720", 720, 720, {}),
    ("-> 800x450", 800, 450, {}),
    ("-> 1280x720", 1280, 720, {}),
    ("-> 640 letterbox (a shrink by 3: nearest)", 640, 640, {"fit": "letterbox", "fill": 114}),
    ("-> 960x540 (a halving)", 960, 540, {}),
    ("-> 640x360 area (3x3 blocks)", 640, 360, {"interpolation": "area"}),
)
"""Each case: its name, the model input's size and the Converter's geometry (bilinear unless it says)."""

MEASURE = r"""
import json, statistics, sys, time
import numpy as np
from npu_zc import layout
from bench_resize import Cycle
cases, formats, (width, height), megabytes = (json.loads(a) for a in sys.argv[1:5])
rng = np.random.default_rng(1)
out = {}
for fmt, shape in formats:
    frames = Cycle(rng.integers(16, 236, shape, np.uint8), megabytes)
    for name, w, h, geometry in cases:
        geometry = {k: tuple(v) if isinstance(v, list) else v for k, v in geometry.items()}
        convert = layout.Converter(fmt, "RGBx", w, h, src_size=(width, height), threads=1, **geometry)
        dst = np.empty((h, w, 4), np.uint8)
        for _ in range(3):
            convert(frames(), dst)
        for mode in ("cached", "from memory"):
            blocks = []
            for _ in range(7):
                began = time.perf_counter()
                for _ in range(30):
                    convert(frames.frames[0] if mode == "cached" else frames(), dst)
                blocks.append((time.perf_counter() - began) / 30 * 1e6)
            out[f"{fmt} {name}, {mode}"] = [statistics.median(blocks), convert.kernel]
print(json.dumps(out))
"""

WIDTH, HEIGHT = 1920, 1080
SHAPES = {
    **{fmt: (HEIGHT * 3 // 2, WIDTH) for fmt in ("I420", "NV12", "NV21")},  # one buffer, the planes in turn
    **{fmt: (HEIGHT, WIDTH, 3) for fmt in ("BGR", "RGB")},
    **{fmt: (HEIGHT, WIDTH, 4) for fmt in ("BGRA", "BGRx", "RGBA", "RGBx")},
}
"""The frame's array shape, per source format the bench takes."""


def measure(build: str, formats: list[str], megabytes: int) -> dict[str, tuple[float, str]]:
    """Every case under the npu_zc package in ``build`` (a directory), in a process of its own."""
    benches = str(Path(__file__).resolve().parent)  # bench_resize's Cycle (its copies of a frame), as it makes them
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([build, benches, os.environ.get("PYTHONPATH", "")])}
    cases = json.dumps([list(case) for case in CASES])
    shapes = json.dumps([[fmt, SHAPES[fmt]] for fmt in formats])
    argv = [sys.executable, "-c", MEASURE, cases, shapes, json.dumps([WIDTH, HEIGHT]), str(megabytes)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"measuring under {build} failed (exit status {done.returncode}):\n{done.stderr.strip()}")
    return {case: (float(us), str(kernel)) for case, (us, kernel) in json.loads(done.stdout).items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("builds", nargs="+", help="directories, each holding an npu_zc package (the first: the base)")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds (default 4)")
    parser.add_argument("--cold", type=int, default=1024, metavar="MB", help="copies of each frame (default 1024 MB)")
    parser.add_argument("--formats", nargs="+", default=["I420", "NV12"], choices=sorted(SHAPES),
                        help="the frames' formats (default I420 NV12)")
    args = parser.parse_args()
    if args.rounds < 1 or args.cold < 0:
        parser.error("--rounds takes 1 or more, --cold 0 or more")
    for build in args.builds:
        if not (Path(build) / "npu_zc" / "__init__.py").is_file():
            parser.error(f"{build} holds no npu_zc package")
    runs: list[list[dict[str, tuple[float, str]]]] = [[] for _ in args.builds]
    for round_ in range(args.rounds):
        for k, build in enumerate(args.builds):
            runs[k].append(measure(build, args.formats, args.cold))
        print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    simd = os.environ.get("NPU_ZC_SIMD", "the best level")
    print(f"µs a call, one thread, {simd}; each build's range over {args.rounds} rounds")
    for case in runs[0][0]:
        line = [f"{case:50}"]
        for k, build in enumerate(args.builds):
            times = [run[case][0] for run in runs[k]]
            path = runs[k][0][case][1]
            line.append(f"{Path(build).name or build}: {min(times):7.1f}-{max(times):7.1f} ({path})")
            if k:
                ratio = statistics.median(new[case][0] / old[case][0] for new, old in zip(runs[k], runs[0]))
                line.append(f"x{ratio:.2f}")
        print("  ".join(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
