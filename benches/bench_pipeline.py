"""Pipeline benchmark: zero-copy, copy mode and a plain OpenVINO baseline, in one run, same model and photo.

    .venv/bin/python benches/bench_pipeline.py [--runs 300] [--device CPU] [--image PATH] [--json]

* zero-copy: :class:`npu_zc.pipeline.Pipeline` (the layout engine crops,
  resizes and writes RGBx into the model's bound input buffer in one call,
  inference in place, top-k read from the bound output buffer);
* two-step: the same pipeline with the preprocess it had before resizing
  moved into the layout engine: OpenCV resizes the crop into a mapped BGR
  buffer, then the layout engine converts that into the input (the stage and
  the overhead before and after, in one run);
* copy: the same pipeline in copy mode (planar float in ordinary memory,
  copied in and out by the runtime);
* baseline: what a user writes with OpenVINO's Python API today: cv2 resize
  and crop, numpy float normalisation and NCHW transpose,
  ``compiled({0: array})`` (which copies the input in and the output out),
  softmax and argsort;
* bare model: the original model's inference alone, back to back, on an input
  set once: what every variant's total is compared with ("overhead" = total -
  bare model).

Each variant lives in a worker process of its own, holding one compiled model
as an application would (several compiled models in one process slow each
other's inference through their idle worker threads). The workers take turns,
10 frames at a time after one untimed frame, in a rotating order, so that a
busy machine slows them alike. Besides wall time, each frame's CPU time (all threads of the worker) is
recorded: other processes on a shared machine do not count in it.

Bytes copied per frame come from a process run under the memcpy/memmove
counter of npu_zc/memcount (LD_PRELOAD), counting from the start of the
preprocess to the end of the postprocess of each frame; "bytes touching frame
buffers" counts the copies whose source or destination is the frame's input,
output or resize buffer.

No 1920x1080 photo ships offline: the default image is scikit-image's
``chelsea``, cut to 16:9 and upscaled to 1920x1080 with OpenCV (bicubic).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, cast

import numpy as np

import results

from npu_zc import memcount
from npu_zc.pipeline import ClassScore, Pipeline, StageStats, full_hd, load_image, sample_photo
from npu_zc.runtime import core, imagenet_labels, model_normalisation, openvino_version, read_model

HERE = Path(__file__).resolve().parent
MODEL = "efficientnet-lite0"
VARIANTS = ("zero-copy", "two-step", "copy", "baseline", "bare model")
STAGES = ("preprocess", "infer", "postprocess", "total", "cpu")
BLOCK = 10

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
        self.top1 = ""

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
        top5 = [self.labels[i] for i in np.argsort(probabilities)[::-1][:5]]
        done = clock()
        self.top1 = top5[0]
        return preprocessed - started, inferred - preprocessed, done - inferred


class Bare:
    """The original model's inference alone, on an input set once."""

    def __init__(self, compiled: Any) -> None:
        import openvino as ov

        self.request = compiled.create_infer_request()
        self.request.set_input_tensor(ov.Tensor(np.zeros((1, 3, 224, 224), np.float32)))

    def step(self, frame: np.ndarray) -> tuple[int, int, int]:
        started = time.perf_counter_ns()
        self.request.infer(share_outputs=True)  # the inference only: no copy of the output either
        return 0, time.perf_counter_ns() - started, 0


class TwoStep:
    """The preprocess before resizing moved into the layout engine: cv2.resize of the
    region the model sees into a mapped BGR buffer, then a Converter into the input."""

    def __init__(self, spec: Any) -> None:
        import cv2

        from npu_zc import alloc
        from npu_zc.pipeline.preprocess import InputWriter

        self.cv2, self.spec = cv2, spec
        self.buffer = alloc(spec.height * spec.width * 3)
        self.resized = self.buffer.map("uint8", (spec.height, spec.width, 3))
        self.write = InputWriter(spec, self.resized)
        self.transform = None  # a classifier: nothing to map back

    def __call__(self, image: np.ndarray, dst: np.ndarray, *, keep_fill: bool = False) -> None:
        # keep_fill (Pipeline.step passes it): nothing to keep, a centre crop leaves no bars.
        rows, cols = self.spec.region(*image.shape[:2])
        self.cv2.resize(image[rows, cols], (self.spec.width, self.spec.height), dst=self.resized, interpolation=self.cv2.INTER_LINEAR)
        self.write(dst)

    def close(self) -> None:
        del self.resized, self.write
        self.buffer.close()


class Variant:
    """One variant, built alone: its step function, its last top-1 label, the arrays a frame lives in."""

    def __init__(self, name: str, device: str) -> None:
        self.name = name
        self.watched: list[np.ndarray] = []
        self.format = ""
        if name in ("zero-copy", "two-step", "copy"):
            pipeline = Pipeline(MODEL, device, mode="copy" if name == "copy" else "zero-copy")
            if name == "two-step":
                pipeline.preprocess.close()
                pipeline.preprocess = TwoStep(pipeline.spec)  # type: ignore[assignment]
            self.pipeline = pipeline
            self.format = f"{pipeline.spec.format} in {pipeline.buffer_kind}"
            self.watched = [pipeline.input, *pipeline.outputs, pipeline.preprocess.resized]
            self.last = ""

            def step(frame: np.ndarray) -> tuple[int, int, int]:
                prediction, pre, infer, post = pipeline.step(frame)
                self.last = cast(list[ClassScore], prediction)[0].label  # a classifier's
                return pre, infer, post

            self.step: Step = step
            return
        # The user's model: the original, compiled with the same properties as ours (the LATENCY hint).
        model = read_model(MODEL)
        compiled = core().compile_model(model, device, {"PERFORMANCE_HINT": "LATENCY"})
        if name == "baseline":
            norm = model_normalisation(model)
            assert norm.mean is not None and norm.scale is not None
            self.baseline = Baseline(compiled, norm.mean, norm.scale)
            self.step = self.baseline.step
            self.format = "RGBP_FLOAT (numpy) copied by compiled({0: array})"
        else:
            self.step = Bare(compiled).step

    def top1(self) -> str:
        if self.name == "baseline":
            return self.baseline.top1
        return getattr(self, "last", "")


def frame_of(image: str | None) -> tuple[np.ndarray, str]:
    if image:
        return load_image(image), image
    return full_hd(sample_photo("chelsea")), "scikit-image 'chelsea' (451x300) cut to 16:9 and upscaled to 1920x1080 with OpenCV (bicubic)"


# --- the worker processes ---


def worker(name: str, device: str, image: str | None) -> None:
    """Build one variant, then for each line "N" on stdin time N frames and print them as one JSON line."""
    frame, _ = frame_of(image)
    variant = Variant(name, device)
    for _ in range(5):
        variant.step(frame)
    print(json.dumps({"ready": name, "format": variant.format}), flush=True)
    for line in sys.stdin:
        count = int(line)
        variant.step(frame)  # untimed: the workers take turns, and this one was idle
        samples: dict[str, list[int]] = {stage: [] for stage in STAGES}
        for _ in range(count):
            cpu = time.process_time_ns()
            pre, infer, post = variant.step(frame)
            samples["cpu"].append(time.process_time_ns() - cpu)
            for stage, ns in (("preprocess", pre), ("infer", infer), ("postprocess", post), ("total", pre + infer + post)):
                samples[stage].append(ns)
        print(json.dumps({"samples": samples, "top1": variant.top1()}), flush=True)


def measure(device: str, image: str | None, runs: int) -> tuple[dict[str, dict[str, StageStats]], dict[str, str], dict[str, str]]:
    """Per-stage statistics of every variant, their top-1 labels and input formats."""
    extra = ["--image", image] if image else []
    workers = {
        name: subprocess.Popen(
            [sys.executable, __file__, "--worker", name, "--device", device, *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in VARIANTS
    }
    samples: dict[str, dict[str, list[int]]] = {name: {stage: [] for stage in STAGES} for name in VARIANTS}
    top1: dict[str, str] = {}
    formats: dict[str, str] = {}
    try:
        for name, process in workers.items():  # built one after the other: compiling is busy work
            formats[name] = json.loads(_line(process, name))["format"]
        done, turn = 0, 0
        while done < runs:
            count = min(BLOCK, runs - done)
            # Rotate who goes first, so that no variant always follows the same neighbour.
            order = VARIANTS[turn % len(VARIANTS) :] + VARIANTS[: turn % len(VARIANTS)]
            turn += 1
            for name in order:
                process = workers[name]
                assert process.stdin is not None
                process.stdin.write(f"{count}\n")
                process.stdin.flush()
                result = json.loads(_line(process, name))
                for stage in STAGES:
                    samples[name][stage].extend(result["samples"][stage])
                top1[name] = result["top1"]
            done += count
    finally:
        for process in workers.values():
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=60)
    stats = {name: {stage: StageStats.of(values) for stage, values in per.items()} for name, per in samples.items()}
    return stats, top1, formats


def _line(process: subprocess.Popen[str], name: str) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"bench_pipeline: the {name} worker exited (status {process.wait()})")
    return line


# --- bytes copied, in a process under the counter ---


def count_copies(image: str | None, device: str, frames: int) -> dict[str, dict[str, float]]:
    try:
        lib = memcount.build()
    except memcount.CounterUnavailableError as exc:
        raise SystemExit(f"bench_pipeline: {exc}") from None
    done = subprocess.run(
        [sys.executable, __file__, "--count-copies", str(frames), "--device", device, *(["--image", image] if image else [])],
        env=dict(os.environ, LD_PRELOAD=str(lib)),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench_pipeline: the counting run failed:\n{done.stderr[-3000:]}")
    result: dict[str, dict[str, float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def counting_child(image: str | None, device: str, frames: int) -> None:
    counter = memcount.preloaded()
    if counter is None:
        raise SystemExit("bench_pipeline: the memcpy counter is not preloaded (LD_PRELOAD)")
    frame, _ = frame_of(image)
    out: dict[str, dict[str, float]] = {}
    for name in VARIANTS:
        variant = Variant(name, device)
        counter.unwatch_all()
        for array in variant.watched:
            counter.watch(array.ctypes.data, array.nbytes)
        for _ in range(3):
            variant.step(frame)
        counter.reset()
        for _ in range(frames):
            counter.start()  # from the start of the preprocess to the end of the postprocess
            variant.step(frame)
            counter.stop()
        counts = counter.counts()
        out[name] = {
            "bytes_per_frame": counts.bytes / frames,
            "calls_per_frame": counts.calls / frames,
            "frame_buffer_bytes_per_frame": counts.watched_bytes / frames if variant.watched else -1,
            "largest_copy": counts.largest,
        }
    print(json.dumps(out))


# --- report ---


def table(stats: dict[str, dict[str, StageStats]], what: str) -> list[str]:
    def value(name: str, stage: str) -> float:
        return float(getattr(stats[name][stage], what))

    lines = [f"{what + ' ms / frame':<28}" + "".join(f"{n:>12}" for n in VARIANTS)]
    for stage in STAGES[:4]:
        lines.append(f"{stage:<28}" + "".join(f"{value(n, stage):12.3f}" for n in VARIANTS))
    bare = value("bare model", "total")
    lines.append(f"{'overhead (total - bare)':<28}" + "".join(f"{value(n, 'total') - bare:12.3f}" for n in VARIANTS))
    lines.append(f"{'pipeline FPS':<28}" + "".join(f"{1000 / value(n, 'total'):12.1f}" for n in VARIANTS))
    lines.append(f"{'infer FPS':<28}" + "".join(f"{1000 / value(n, 'infer'):12.1f}" for n in VARIANTS))
    bare_cpu = value("bare model", "cpu")
    lines.append(f"{'CPU time, all threads':<28}" + "".join(f"{value(n, 'cpu'):12.3f}" for n in VARIANTS))
    lines.append(f"{'  overhead (- bare)':<28}" + "".join(f"{value(n, 'cpu') - bare_cpu:12.3f}" for n in VARIANTS))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300, help="frames per variant (default 300)")
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--image", help="a photo (default: scikit-image's chelsea upscaled to 1920x1080)")
    parser.add_argument("--count-frames", type=int, default=30, help="frames per variant under the memcpy counter")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)  # a worker process
    parser.add_argument("--count-copies", type=int, help=argparse.SUPPRESS)  # the process under LD_PRELOAD
    args = parser.parse_args()

    if args.worker:
        worker(args.worker, args.device, args.image)
        return 0
    if args.count_copies:
        counting_child(args.image, args.device, args.count_copies)
        return 0

    load_before = os.getloadavg()
    stats, top1, formats = measure(args.device, args.image, args.runs)
    load_after = os.getloadavg()
    copies = count_copies(args.image, args.device, args.count_frames)
    _, described = frame_of(args.image)

    def get(name: str, stage: str, what: str = "median") -> float:
        return float(getattr(stats[name][stage], what))

    overhead = {what: {n: get(n, "total", what) - get("bare model", "total", what) for n in VARIANTS} for what in ("median", "mean")}
    cpu_overhead = {n: get(n, "cpu") - get("bare model", "cpu") for n in VARIANTS}
    zc = copies["zero-copy"]
    targets = [
        ("0 bytes copied per frame in zero-copy (the frame's buffers)", zc["frame_buffer_bytes_per_frame"] == 0,
         f"{zc['frame_buffer_bytes_per_frame']:.0f} B/frame touching the frame's buffers; all memcpy in the process "
         f"{zc['bytes_per_frame']:.0f} B/frame, largest single copy {zc['largest_copy']:.0f} B"),
        *((f"overhead ({what}) zero-copy <= 1/3 of baseline", overhead[what]["zero-copy"] <= overhead[what]["baseline"] / 3,
           f"{overhead[what]['zero-copy']:.3f} ms vs {overhead[what]['baseline']:.3f} ms / 3 = {overhead[what]['baseline'] / 3:.3f} ms")
          for what in ("median", "mean")),
        ("overhead in CPU time (median) zero-copy <= 1/3 of baseline", cpu_overhead["zero-copy"] <= cpu_overhead["baseline"] / 3,
         f"{cpu_overhead['zero-copy']:.3f} ms vs {cpu_overhead['baseline']:.3f} ms / 3 = {cpu_overhead['baseline'] / 3:.3f} ms"),
        *((f"pipeline FPS ({what}) zero-copy >= baseline", get("zero-copy", "total", what) <= get("baseline", "total", what),
           f"{1000 / get('zero-copy', 'total', what):.1f} vs {1000 / get('baseline', 'total', what):.1f} FPS")
          for what in ("median", "mean")),
        ("preprocess <= 1.5 ms / frame (mean)", get("zero-copy", "preprocess", "mean") <= 1.5,
         f"{get('zero-copy', 'preprocess', 'mean'):.3f} ms"),
    ]  # fmt: skip
    if args.json:
        print(json.dumps({
            "image": described, "device": args.device, "runs": args.runs, "load_average": [load_before, load_after],
            "stats_ms": {n: {s: v.to_dict() for s, v in per.items()} for n, per in stats.items()},
            "copies": copies, "top1": top1, "formats": formats,
            "targets": [{"target": t, "met": bool(m), "detail": d} for t, m, d in targets],
        }))  # fmt: skip
        return 0

    load = " -> ".join(f"{a[0]:.2f}" for a in (load_before, load_after))
    print(f"model    {MODEL} on {args.device}, OpenVINO {openvino_version()}, {os.cpu_count()} cores, load average {load}")
    print(f"image    {described}")
    print(f"runs     {args.runs} frames per variant, one worker process per variant, taking turns {BLOCK} frames at a time")
    print("inputs   " + "; ".join(f"{n}: {formats[n]}" for n in ("zero-copy", "copy", "baseline")))
    print()
    for what in ("median", "mean"):
        print("\n".join(table(stats, what)))
        print()
    print(f"{'memcpy per frame (counted)':<28}" + "".join(f"{n:>12}" for n in VARIANTS))
    print(f"{'all bytes':<28}" + "".join(f"{copies[n]['bytes_per_frame']:12.0f}" for n in VARIANTS))
    print(f"{'bytes touching frame buffers':<28}" + "".join(
        f"{copies[n]['frame_buffer_bytes_per_frame']:12.0f}" if copies[n]["frame_buffer_bytes_per_frame"] >= 0 else f"{'-':>12}"
        for n in VARIANTS))  # fmt: skip
    print(f"{'largest single copy':<28}" + "".join(f"{copies[n]['largest_copy']:12.0f}" for n in VARIANTS))
    print()
    for stage in ("preprocess", "total"):
        print(f"baseline / zero-copy, {stage} (median): {get('baseline', stage) / get('zero-copy', stage):.2f}x")
    print(f"two-step / zero-copy, preprocess (median): {get('two-step', 'preprocess') / get('zero-copy', 'preprocess'):.2f}x; "
          f"overhead {overhead['median']['two-step']:.3f} ms before, {overhead['median']['zero-copy']:.3f} ms after")
    if overhead["median"]["zero-copy"] > 0:
        print(f"baseline / zero-copy, overhead (median): {overhead['median']['baseline'] / overhead['median']['zero-copy']:.2f}x")
    print(f"top-1    zero-copy: {top1['zero-copy']}; two-step: {top1['two-step']}; copy: {top1['copy']}; baseline: {top1['baseline']}")
    print()
    print("targets")
    for target, met, detail in targets:
        print(f"  [{'met' if met else 'MISSED'}] {target}: {detail}")

    def cell(name: str, stage: str) -> float | None:
        return None if name == "bare model" and stage in ("preprocess", "postprocess") else round(get(name, stage), 3)

    rows: list[list[object]] = [[f"{stage} ms", *(cell(n, stage) for n in VARIANTS)] for stage in STAGES[:4]]
    rows.append(["overhead (total - bare model) ms", *(round(overhead["median"][n], 3) for n in VARIANTS)])
    rows.append(["pipeline FPS", *(round(1000 / get(n, "total"), 1) for n in VARIANTS)])
    rows.append(["CPU time overhead ms / frame (- bare model)", *(round(cpu_overhead[n], 2) for n in VARIANTS)])
    rows.append(["bytes copied touching the frame's buffers / frame", *(
        round(copies[n]["frame_buffer_bytes_per_frame"]) if copies[n]["frame_buffer_bytes_per_frame"] >= 0 else None
        for n in VARIANTS)])
    rows.append(["memcpy bytes / frame, all", *(round(copies[n]["bytes_per_frame"]) for n in VARIANTS)])
    saved = results.save("bench_pipeline", [{
        "title": f"{MODEL} on {args.device}, one frame at a time: medians",
        "note": f"OpenVINO {openvino_version()}; {described}; {args.runs} frames per variant, each variant in a worker "
                f"process, taking turns {BLOCK} frames at a time; baseline = cv2 -> numpy float NCHW -> infer -> copy of "
                "the output; two-step = cv2.resize into the mapped buffer, then a conversion; bytes counted by an "
                "LD_PRELOAD memcpy counter",
        "columns": ["median", *VARIANTS],
        "rows": rows,
    }], title="Pipeline: single stream (latency)")
    print(f"\nresults: {saved}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
