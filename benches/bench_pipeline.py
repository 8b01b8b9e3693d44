"""Pipeline benchmark: zero-copy, copy mode and a plain OpenVINO baseline, in one run, same model and photo.

    .venv/bin/python benches/bench_pipeline.py [--runs 300] [--device CPU] [--image PATH] [--json]

* zero-copy: :class:`npu_zc.pipeline.Pipeline` (OpenCV resize into a mapped
  buffer, the layout engine writes RGBx into the model's bound input buffer,
  inference in place, top-k read from the bound output buffer);
* copy: the same pipeline in copy mode (planar float in ordinary memory,
  copied in and out by the runtime);
* baseline: what a user writes with OpenVINO's Python API today: cv2 resize
  and crop, numpy float normalisation and NCHW transpose,
  ``compiled({0: array})`` (which copies the input in and the output out),
  softmax and argsort;
* bare model: the original model's inference alone, on an input set once:
  what every variant's total is compared with ("overhead" = total - bare).

The variants run in rounds of 25 frames each, so that a busy machine slows
them alike. Besides wall time, each frame's CPU time (all threads of the
process) is recorded: other processes on a shared machine do not count in it. Bytes copied per frame come from a second process run under the
memcpy/memmove counter of tests/memcount (LD_PRELOAD), counting from the
start of the preprocess to the end of the postprocess of each frame.

No 1920x1080 photo ships offline: the default image is scikit-image's
``chelsea``, cut to 16:9 and upscaled to 1920x1080 with OpenCV (bicubic).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from npu_zc.pipeline import Pipeline, Timings, full_hd, load_image, sample_photo
from npu_zc.runtime import core, imagenet_labels, openvino_version, read_model

HERE = Path(__file__).resolve().parent
MEMCOUNT = HERE.parent / "tests" / "memcount" / "memcount.c"
MODEL = "efficientnet-lite0"
VARIANTS = ("zero-copy", "copy", "baseline", "bare model")
STAGES = ("preprocess", "infer", "postprocess", "total")

Step = Callable[[np.ndarray], tuple[int, int, int]]


class Baseline:
    """The plain OpenVINO Python pipeline, as the OpenVINO samples and most user code write it."""

    def __init__(self, compiled: Any, mean: tuple[float, ...], scale: tuple[float, ...]) -> None:
        import cv2

        self.cv2 = cv2
        self.compiled = compiled
        self.mean = np.asarray(mean, np.float32)
        self.scale = np.asarray(scale, np.float32)
        self.labels = imagenet_labels()
        self.top5: list[str] = []

    def step(self, frame: np.ndarray) -> tuple[int, int, int]:
        cv2, clock = self.cv2, time.perf_counter_ns
        started = clock()
        h, w = frame.shape[:2]
        s = 256 / min(h, w)  # short side to 256, centre crop 224
        resized = cv2.resize(frame, (round(w * s), round(h * s)))
        y, x = (resized.shape[0] - 224) // 2, (resized.shape[1] - 224) // 2
        rgb = cv2.cvtColor(resized[y : y + 224, x : x + 224], cv2.COLOR_BGR2RGB)
        tensor = np.expand_dims(((rgb.astype(np.float32) - self.mean) / self.scale).transpose(2, 0, 1), 0)
        preprocessed = clock()
        logits = self.compiled({0: tensor})[0]  # copies the input in and the output out
        inferred = clock()
        probabilities = np.exp(logits[0] - logits[0].max())
        probabilities /= probabilities.sum()
        self.top5 = [self.labels[i] for i in np.argsort(probabilities)[::-1][:5]]
        done = clock()
        return preprocessed - started, inferred - preprocessed, done - inferred


class Bare:
    """The original model's inference alone, on an input set once."""

    def __init__(self, compiled: Any, tensor: np.ndarray) -> None:
        import openvino as ov

        self.request = compiled.create_infer_request()
        self.request.set_input_tensor(ov.Tensor(np.ascontiguousarray(tensor)))

    def step(self, frame: np.ndarray) -> tuple[int, int, int]:
        started = time.perf_counter_ns()
        self.request.infer()
        return 0, time.perf_counter_ns() - started, 0


def build(device: str) -> tuple[dict[str, Step], dict[str, Any]]:
    """The four variants (their step functions) and what the memcpy counter should watch."""
    zero = Pipeline(MODEL, device, mode="zero-copy")
    copy = Pipeline(MODEL, device, mode="copy")
    norm = zero.session.normalisation
    assert norm.mean is not None and norm.scale is not None
    # The user's model: the original, compiled with the same properties as ours.
    compiled = core().compile_model(read_model(MODEL), zero.device, zero.session.config)
    baseline = Baseline(compiled, norm.mean, norm.scale)
    bare = Bare(compiled, np.zeros((1, 3, 224, 224), np.float32))
    steps: dict[str, Step] = {
        "zero-copy": lambda f: zero.step(f)[1:],  # type: ignore[return-value]
        "copy": lambda f: copy.step(f)[1:],  # type: ignore[return-value]
        "baseline": baseline.step,
        "bare model": bare.step,
    }
    watched = {"zero-copy": [zero.input, *zero.outputs, zero.preprocess.resized], "copy": [copy.input, *copy.outputs]}
    return steps, {"pipelines": (zero, copy), "baseline": baseline, "watched": watched}


def measure(steps: dict[str, Step], frame: np.ndarray, runs: int, block: int = 25) -> dict[str, Timings]:
    """``runs`` frames per variant, in rounds of ``block`` frames of each variant in turn.

    Rounds spread a busy machine's noise over every variant; blocks (each after
    one untimed frame) keep one model's idle worker threads from slowing the
    next model's inference, which no single pipeline would see.
    """
    timings = {name: Timings() for name in steps}
    for step in steps.values():
        for _ in range(5):
            step(frame)
    done = 0
    while done < runs:
        count = min(block, runs - done)
        for name, step in steps.items():
            step(frame)
            for _ in range(count):
                cpu = time.process_time_ns()
                pre, infer, post = step(frame)
                cpu = time.process_time_ns() - cpu
                timings[name].add_frame(preprocess=pre, infer=infer, postprocess=post)
                timings[name].add("cpu", cpu)
        done += count
    return timings


# --- bytes copied, in a child process under the counter ---


def count_copies(image_args: list[str], device: str, frames: int) -> dict[str, dict[str, float]]:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise SystemExit("bench_pipeline: no C compiler to build the memcpy counter (apt-get install gcc)")
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "libmemcount.so"
        subprocess.run(
            [gcc, "-O2", "-shared", "-fPIC", "-fno-builtin", "-fno-tree-loop-distribute-patterns",
             "-o", str(lib), str(MEMCOUNT), "-ldl"],
            check=True,
        )  # fmt: skip
        done = subprocess.run(
            [sys.executable, __file__, "--count-copies", str(frames), "--device", device, *image_args],
            env=dict(os.environ, LD_PRELOAD=str(lib)),
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise SystemExit(f"bench_pipeline: the counting run failed:\n{done.stderr[-3000:]}")
    result: dict[str, dict[str, float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def counting_child(frame: np.ndarray, device: str, frames: int) -> None:
    lib = ctypes.CDLL(None)
    if not getattr(lib, "memcount_loaded", None) or not lib.memcount_loaded():
        raise SystemExit("libmemcount.so is not preloaded")
    for name in ("memcount_total_bytes", "memcount_watched_bytes", "memcount_largest", "memcount_total_calls"):
        getattr(lib, name).restype = ctypes.c_ulonglong
    lib.memcount_watch.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    steps, extra = build(device)
    out: dict[str, dict[str, float]] = {}
    for name, step in steps.items():
        lib.memcount_unwatch_all()
        for array in extra["watched"].get(name, []):
            lib.memcount_watch(array.ctypes.data, array.nbytes)
        for _ in range(3):
            step(frame)
        lib.memcount_reset()
        for _ in range(frames):
            lib.memcount_start()  # from the start of the preprocess to the end of the postprocess
            step(frame)
            lib.memcount_stop()
        out[name] = {
            "bytes_per_frame": lib.memcount_total_bytes() / frames,
            "calls_per_frame": lib.memcount_total_calls() / frames,
            "frame_buffer_bytes_per_frame": lib.memcount_watched_bytes() / frames if name in extra["watched"] else -1,
            "largest_copy": lib.memcount_largest(),
        }
    print(json.dumps(out))


# --- report ---


def summarise(timings: dict[str, Timings]) -> dict[str, dict[str, dict[str, float]]]:
    return {name: {stage: s.to_dict() for stage, s in t.stats().items()} for name, t in timings.items()}


def table(stats: dict[str, dict[str, dict[str, float]]], copies: dict[str, dict[str, float]], what: str) -> list[str]:
    names = list(stats)
    lines = [f"{what + ' ms / frame':<28}" + "".join(f"{n:>12}" for n in names)]
    for stage in STAGES:
        row = [stats[n][stage][what] for n in names]
        lines.append(f"{stage:<28}" + "".join(f"{v:12.3f}" for v in row))
    bare = stats["bare model"]["total"][what]
    lines.append(f"{'overhead (total - bare)':<28}" + "".join(f"{stats[n]['total'][what] - bare:12.3f}" for n in names))
    lines.append(f"{'pipeline FPS':<28}" + "".join(f"{1000 / stats[n]['total'][what]:12.1f}" for n in names))
    lines.append(f"{'infer FPS':<28}" + "".join(f"{1000 / stats[n]['infer'][what]:12.1f}" for n in names))
    bare_cpu = stats["bare model"]["cpu"][what]
    lines.append(f"{'CPU time, all threads':<28}" + "".join(f"{stats[n]['cpu'][what]:12.3f}" for n in names))
    lines.append(f"{'  overhead (- bare)':<28}" + "".join(f"{stats[n]['cpu'][what] - bare_cpu:12.3f}" for n in names))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300, help="frames per variant (default 300)")
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--image", help="a photo (default: scikit-image's chelsea upscaled to 1920x1080)")
    parser.add_argument("--count-frames", type=int, default=30, help="frames per variant under the memcpy counter")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--count-copies", type=int, help=argparse.SUPPRESS)  # the child run under LD_PRELOAD
    args = parser.parse_args()

    if args.image:
        frame, described = load_image(args.image), args.image
    else:
        frame = full_hd(sample_photo("chelsea"))
        described = "scikit-image 'chelsea' (451x300) cut to 16:9 and upscaled to 1920x1080 with OpenCV (bicubic)"
    if args.count_copies:
        counting_child(frame, args.device, args.count_copies)
        return 0

    steps, extra = build(args.device)
    zero, copy = extra["pipelines"]
    timings = measure(steps, frame, args.runs)
    copies = count_copies(["--image", args.image] if args.image else [], args.device, args.count_frames)
    stats = summarise(timings)
    top = {"zero-copy": zero.process(frame)[0].label, "copy": copy.process(frame)[0].label, "baseline": extra["baseline"].top5[0]}

    median = {n: stats[n]["total"]["median"] for n in stats}
    mean = {n: stats[n]["total"]["mean"] for n in stats}
    overhead = {n: median[n] - median["bare model"] for n in ("zero-copy", "copy", "baseline")}
    overhead_mean = {n: mean[n] - mean["bare model"] for n in ("zero-copy", "copy", "baseline")}
    cpu = {n: stats[n]["cpu"]["median"] for n in stats}
    cpu_overhead = {n: cpu[n] - cpu["bare model"] for n in ("zero-copy", "copy", "baseline")}
    zc_copy = copies["zero-copy"]
    targets = [
        ("0 bytes copied per frame in zero-copy (the frame's buffers)", zc_copy["frame_buffer_bytes_per_frame"] == 0,
         f"{zc_copy['frame_buffer_bytes_per_frame']:.0f} B/frame touching the frame's buffers; all memcpy in the process "
         f"{zc_copy['bytes_per_frame']:.0f} B/frame, largest single copy {zc_copy['largest_copy']:.0f} B"),
        ("overhead (median) zero-copy <= 1/3 of baseline", overhead["zero-copy"] <= overhead["baseline"] / 3,
         f"{overhead['zero-copy']:.3f} ms vs {overhead['baseline']:.3f} ms / 3 = {overhead['baseline'] / 3:.3f} ms"),
        ("overhead (mean) zero-copy <= 1/3 of baseline", overhead_mean["zero-copy"] <= overhead_mean["baseline"] / 3,
         f"{overhead_mean['zero-copy']:.3f} ms vs {overhead_mean['baseline']:.3f} ms / 3 = {overhead_mean['baseline'] / 3:.3f} ms"),
        ("overhead in CPU time (median) zero-copy <= 1/3 of baseline", cpu_overhead["zero-copy"] <= cpu_overhead["baseline"] / 3,
         f"{cpu_overhead['zero-copy']:.3f} ms vs {cpu_overhead['baseline']:.3f} ms / 3 = {cpu_overhead['baseline'] / 3:.3f} ms"),
        ("pipeline FPS zero-copy >= baseline (mean)", mean["zero-copy"] <= mean["baseline"],
         f"{1000 / mean['zero-copy']:.1f} vs {1000 / mean['baseline']:.1f} FPS"),
        ("preprocess <= 1.5 ms / frame (mean)", stats["zero-copy"]["preprocess"]["mean"] <= 1.5,
         f"{stats['zero-copy']['preprocess']['mean']:.3f} ms"),
    ]  # fmt: skip
    if args.json:
        print(json.dumps({"image": described, "device": zero.device, "runs": args.runs, "stats_ms": stats,
                          "copies": copies, "top1": top,
                          "targets": [{"target": t, "met": bool(m), "detail": d} for t, m, d in targets]}))  # fmt: skip
        return 0

    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"model    {MODEL} on {zero.device}, OpenVINO {openvino_version()}, {os.cpu_count()} cores, load average {load}")
    print(f"image    {described}")
    print(f"runs     {args.runs} frames per variant after 5 warm-up frames, in rounds of 25 frames of each variant in turn")
    print(f"inputs   zero-copy {zero.spec.format} in {zero.buffer_kind}; copy {copy.spec.format} in ordinary memory; "
          "baseline: numpy float NCHW, compiled({0: array})")  # fmt: skip
    print()
    for what in ("median", "mean"):
        print("\n".join(table(stats, copies, what)))
        print()
    print(f"{'memcpy per frame (counted)':<28}" + "".join(f"{n:>12}" for n in VARIANTS))
    print(f"{'all bytes':<28}" + "".join(f"{copies[n]['bytes_per_frame']:12.0f}" for n in VARIANTS))
    print(f"{'bytes touching frame buffers':<28}" + "".join(
        f"{copies[n]['frame_buffer_bytes_per_frame']:12.0f}" if copies[n]["frame_buffer_bytes_per_frame"] >= 0 else f"{'-':>12}"
        for n in VARIANTS))  # fmt: skip
    print(f"{'largest single copy':<28}" + "".join(f"{copies[n]['largest_copy']:12.0f}" for n in VARIANTS))
    print()
    for name in ("preprocess", "total"):
        z, b = stats["zero-copy"][name]["median"], stats["baseline"][name]["median"]
        print(f"baseline / zero-copy, {name} (median): {b / z:.2f}x")
    print(f"baseline / zero-copy, overhead (median): {overhead['baseline'] / overhead['zero-copy']:.2f}x"
          if overhead["zero-copy"] > 0 else "zero-copy overhead <= 0 (within noise)")  # fmt: skip
    print(f"top-1    zero-copy: {top['zero-copy']}; copy: {top['copy']}; baseline: {top['baseline']}")
    print()
    print("targets")
    for target, met, detail in targets:
        print(f"  [{'met' if met else 'MISSED'}] {target}: {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
