"""Throughput benchmark: npu_zc's throughput mode against OpenVINO's own limit and a plain AsyncInferQueue, from
1080p frames, in one run.

    python3 benches/bench_throughput.py [--seconds 15] [--device CPU] [--configs 1:auto,2:auto,2:32] [--json FILE]
    python3 benches/bench_throughput.py --quick          # a few seconds: a smoke run, not a measurement

Every variant runs in a process of its own, one after the other, for ``--seconds`` after a warm-up, on the
same frames: scikit-image photos cut to 16:9 and upscaled to 1920x1080, decoded once up front.

* ``benchmark_app``: OpenVINO's ``benchmark_app`` (``openvino.tools.benchmark.main``) with ``-hint throughput``
  on the very model npu_zc compiles (EfficientNet-Lite0 with the RGBx u8 input and the normalisation inside,
  saved as IR), at the inference precision npu_zc's session reports: the physical limit, with no
  preprocessing at all. Its CPU time (from ``getrusage(RUSAGE_CHILDREN)``) includes its compile and warm-up.
* ``benchmark_app, original model``: the same on the original model (f32 NCHW input), for reference.
* ``npu_zc throughput``: ``Pipeline(hint="throughput").run_throughput(frames)``: OPTIMAL_NUMBER_OF_INFER_REQUESTS
  requests in flight over pooled, bound buffers, preprocessing (crop, resize, RGBx) on the feeding thread,
  each frame split among WORKERS threads of the layout engine, top-5 on the queue's delivery thread. One row
  per ``--configs`` entry, WORKERS:REQUESTS (``auto``: the default worker count; twice
  OPTIMAL_NUMBER_OF_INFER_REQUESTS).
* ``AsyncInferQueue``: what a user writes today: the original model compiled with the THROUGHPUT hint,
  ``ov.AsyncInferQueue(compiled)`` (the optimal number of requests), per frame cv2 resize and centre crop,
  cvtColor, numpy normalisation and NCHW transpose, ``start_async({0: tensor})``, softmax and top-5 in the
  completion callback.

CPU time per frame is the process's user + system time (every thread) over the timed frames, divided by the
frames. The table gives FPS, the share of benchmark_app's FPS and the ratio to the AsyncInferQueue baseline
(targets: >= 85% and >= 2x).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import results
from timing import thread_cpu

MODEL = "efficientnet-lite0"
PHOTOS = ("chelsea", "coffee", "astronaut", "rocket")


def frames_1080p() -> list[np.ndarray]:
    from npu_zc.pipeline import full_hd, sample_photo

    return [full_hd(sample_photo(name)) for name in PHOTOS]


def for_seconds(frames: list[np.ndarray], seconds: float) -> Iterator[np.ndarray]:
    """The frames over and over until ``seconds`` have passed."""
    end = time.perf_counter() + seconds
    for i in itertools.count():
        if time.perf_counter() >= end:
            return
        yield frames[i % len(frames)]


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


class ThreadWatch:
    """CPU time per group of threads over a run: the calling thread, our named threads, OpenVINO's (the rest).

    Our threads end with the run, and an ended thread leaves /proc: :meth:`sample` (called now and then during
    the run) keeps the last reading of each; OpenVINO's share is the process's total less ours.
    """

    def __init__(self) -> None:
        import threading

        self.threading = threading
        self.names: dict[int, str] = {}
        self.latest: dict[int, float] = {}

    def start(self) -> None:
        self.before = thread_cpu()
        self.process_before = cpu_seconds()

    def sample(self) -> None:
        for thread in self.threading.enumerate():
            if thread.native_id is not None:
                name = "calling" if thread is self.threading.main_thread() else re.sub(r"_\d+$", "", thread.name)
                self.names[thread.native_id] = name
        self.latest.update(thread_cpu())

    def ms_per_frame(self, frames: int) -> dict[str, float]:
        self.latest.update(thread_cpu())
        groups: dict[str, float] = {}
        for tid, name in self.names.items():
            if tid in self.latest:
                groups[name] = groups.get(name, 0.0) + self.latest[tid] - self.before.get(tid, 0.0)
        groups["openvino and others"] = cpu_seconds() - self.process_before - sum(groups.values())
        return {k: 1000 * v / max(1, frames) for k, v in groups.items()}


# --- the variants, each in its own process ---


def run_ours(
    device: str, seconds: float, warmup: float, workers: int, requests: int | None, options: dict[str, Any]
) -> dict[str, Any]:
    from npu_zc.pipeline import Pipeline
    from npu_zc.runtime import CompileOptions

    frames = frames_1080p()
    with Pipeline(MODEL, device, hint="throughput", options=CompileOptions(extra=options)) as pipeline:
        pipeline.run_throughput(for_seconds(frames, warmup), workers=workers, requests=requests)
        top1: list[str] = []
        watch = ThreadWatch()

        def on_result(index: int, prediction: Any) -> None:
            if index < len(frames):
                top1.append(prediction[0].label)
            if index % 200 == 100:
                watch.sample()

        watch.start()
        report = pipeline.run_throughput(for_seconds(frames, seconds), on_result, workers=workers, requests=requests)
        by_thread = watch.ms_per_frame(report.frames)
        return {
            "fps": report.fps, "frames": report.frames, "seconds": report.seconds,
            "cpu_ms_per_frame": report.cpu_ms_per_frame, "requests": report.requests, "workers": report.workers,
            "buffers": report.buffers, "top1": top1, "format": pipeline.spec.format,
            "precision": pipeline.session.property("INFERENCE_PRECISION_HINT"),
            "stages_ms": {k: v.to_dict() for k, v in report.stages.items()},
            "cpu_ms_per_frame_by_thread": by_thread,
        }  # fmt: skip


def run_baseline(device: str, seconds: float, warmup: float) -> dict[str, Any]:
    """The plain OpenVINO way: AsyncInferQueue, cv2 + numpy preprocessing, top-5 in the callback."""
    import cv2
    import openvino as ov

    from npu_zc.runtime import core, imagenet_labels, model_normalisation, read_model

    frames = frames_1080p()
    model = read_model(MODEL)
    norm = model_normalisation(model)
    assert norm.mean is not None and norm.scale is not None
    mean, scale = np.asarray(norm.mean, np.float32), np.asarray(norm.scale, np.float32)
    labels = imagenet_labels()
    compiled = core().compile_model(model, device, {"PERFORMANCE_HINT": "THROUGHPUT"})
    queue = ov.AsyncInferQueue(compiled)
    top1: dict[int, str] = {}

    def on_done(request: Any, index: int) -> None:
        logits = request.get_output_tensor(0).data[0]
        probabilities = np.exp(logits - logits.max())
        probabilities /= probabilities.sum()
        top5 = np.argsort(probabilities)[::-1][:5]
        if index < len(frames):
            top1[index] = labels[int(top5[0])]

    queue.set_callback(on_done)

    def preprocess(frame: np.ndarray) -> np.ndarray:
        h, w = frame.shape[:2]
        s = 256 / min(h, w)  # short side to 256, centre crop 224
        resized = cv2.resize(frame, (round(w * s), round(h * s)))
        y, x = (resized.shape[0] - 224) // 2, (resized.shape[1] - 224) // 2
        rgb = cv2.cvtColor(resized[y : y + 224, x : x + 224], cv2.COLOR_BGR2RGB)
        return np.expand_dims(((rgb.astype(np.float32) - mean) / scale).transpose(2, 0, 1), 0)

    def run(source: Iterator[np.ndarray]) -> int:
        count = 0
        for i, frame in enumerate(source):
            queue.start_async({0: preprocess(frame)}, i)
            count += 1
        queue.wait_all()
        return count

    run(for_seconds(frames, warmup))
    top1.clear()
    cpu, started = cpu_seconds(), time.perf_counter()
    count = run(for_seconds(frames, seconds))
    wall = time.perf_counter() - started
    return {
        "fps": count / wall, "frames": count, "seconds": wall, "cpu_ms_per_frame": 1000 * (cpu_seconds() - cpu) / count,
        "requests": len(queue), "workers": 0, "top1": [top1[i] for i in sorted(top1)], "format": "RGBP_FLOAT (numpy), copied in",
        "precision": str(compiled.get_property("INFERENCE_PRECISION_HINT")),
    }  # fmt: skip


def save_models(device: str, folder: Path) -> tuple[Path, Path, str]:
    """Our compiled model's source (RGBx u8 in, normalisation inside) and the original, as IR; the precision used."""
    import openvino as ov

    from npu_zc.runtime import compile_model, read_model

    session = compile_model(MODEL, device, options=None)
    precision = str(session.property("INFERENCE_PRECISION_HINT"))
    ours, original = folder / "npu_zc.xml", folder / "original.xml"
    ov.save_model(session.prepared.model, str(ours), compress_to_fp16=False)
    ov.save_model(read_model(MODEL), str(original), compress_to_fp16=False)
    return ours, original, precision


def run_benchmark_app(model: Path, device: str, seconds: float, precision: str, extra: list[str]) -> dict[str, Any]:
    """OpenVINO's benchmark_app in a child process; FPS and iterations parsed from its log."""
    argv = ["benchmark_app", "-m", str(model), "-d", device, "-hint", "throughput", "-t", str(max(1, round(seconds))),
            "-infer_precision", precision, *extra]  # fmt: skip
    code = f"import sys; from openvino.tools.benchmark.main import main; sys.argv = {argv!r}; main()"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log = done.stdout + done.stderr
    fps = re.search(r"Throughput:\s+([\d.]+)\s*FPS", log)
    count = re.search(r"Count:\s+(\d+)\s+iterations", log)
    nireq = re.search(r"number of parallel infer requests:\s*(\d+)|NUMBER_OF_INFER_REQUESTS[^\d]*(\d+)", log, re.I)
    if done.returncode != 0 or fps is None or count is None:
        raise RuntimeError(f"benchmark_app failed (exit {done.returncode}):\n{log[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "fps": float(fps.group(1)), "frames": int(count.group(1)), "cpu_ms_per_frame": 1000 * cpu / int(count.group(1)),
        "requests": int(next(g for g in nireq.groups() if g)) if nireq else None, "workers": 0,
        "command": " ".join(argv), "precision": precision, "log_tail": log[-1500:],
    }  # fmt: skip


def child(args: argparse.Namespace) -> None:
    options = dict(o.split("=", 1) for o in args.option)
    if args.variant == "ours":
        requests = None if args.requests_one == "auto" else int(args.requests_one)
        result = run_ours(args.device, args.seconds, args.warmup, args.workers_one, requests, options)
    else:
        result = run_baseline(args.device, args.seconds, args.warmup)
    print(json.dumps(result), flush=True)


def in_child(name: str, args: argparse.Namespace, extra: list[str]) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--variant", name, "--device", args.device, "--seconds", str(args.seconds),
            "--warmup", str(args.warmup), *extra, *itertools.chain.from_iterable(("--option", o) for o in args.option)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=15, help="timed seconds per variant (default 15)")
    parser.add_argument("--warmup", type=float, default=2, help="untimed seconds before each (default 2)")
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--configs", default="auto:auto",
                        help="npu_zc runs as WORKERS:REQUESTS, comma-separated; auto = the default (default auto:auto)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="an OpenVINO property for npu_zc's compiled model (repeatable)")
    parser.add_argument("--no-original", action="store_true", help="skip benchmark_app on the original model")
    parser.add_argument("--quick", action="store_true", help="2 s per variant, 0.5 s warm-up: a smoke run")
    parser.add_argument("--json", metavar="FILE", help="also write every result here")
    parser.add_argument("--variant", choices=("ours", "baseline"), help=argparse.SUPPRESS)
    parser.add_argument("--workers-one", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--requests-one", default="auto", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        child(args)
        return 0
    if args.quick:
        args.seconds, args.warmup = 2.0, 0.5

    from npu_zc.pipeline.throughput import default_workers
    from npu_zc.runtime import openvino_version

    configs = []
    for item in args.configs.split(","):
        w, _, r = item.partition(":")
        configs.append((default_workers() if w in ("", "auto") else int(w), r or "auto"))
    measured: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}

    def attempt(name: str, run: Any) -> None:
        print(f"... {name}", file=sys.stderr, flush=True)
        try:
            measured[name] = run()
            r = measured[name]  # printed as it comes, so that a run cut short still shows what it measured
            print(f"measured {name}: {r['fps']:.1f} FPS, CPU {r['cpu_ms_per_frame']:.3f} ms/frame, "
                  f"{r.get('requests')} requests", flush=True)
        except Exception as exc:  # one failing variant must not lose the others
            errors[name] = str(exc)
            print(f"!!! {name}: {exc}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        ours_xml, original_xml, precision = save_models(args.device, Path(tmp))
        attempt("benchmark_app", lambda: run_benchmark_app(ours_xml, args.device, args.seconds, precision, []))
        for w, r in configs:
            attempt(f"npu_zc, {w} worker{'s' if w > 1 else ''}, {r} requests",
                    lambda w=w, r=r: in_child("ours", args, ["--workers-one", str(w), "--requests-one", r]))  # fmt: skip
        attempt("AsyncInferQueue + cv2/numpy", lambda: in_child("baseline", args, []))
        if not args.no_original:
            attempt("benchmark_app, original model", lambda: run_benchmark_app(original_xml, args.device, args.seconds, precision, []))

    limit = measured.get("benchmark_app", {}).get("fps")
    baseline = measured.get("AsyncInferQueue + cv2/numpy", {}).get("fps")
    print(f"model    {MODEL} on {args.device}, OpenVINO {openvino_version()}, {os.cpu_count()} cores, precision {precision}")
    print(f"frames   {len(PHOTOS)} scikit-image photos at 1920x1080, decoded once; {args.seconds:g} s per variant "
          f"after {args.warmup:g} s of warm-up{' (--quick: a smoke run, not a measurement)' if args.quick else ''}")  # fmt: skip
    if args.option:
        print(f"options  npu_zc: {', '.join(args.option)}")
    print()
    print(f"{'variant':<34}{'FPS':>9}{'of bench_app':>14}{'x baseline':>12}{'CPU ms/frame':>14}{'requests':>10}{'workers':>9}")
    for name, r in measured.items():
        share = f"{r['fps'] / limit:.1%}" if limit else "-"
        ratio = f"{r['fps'] / baseline:.2f}x" if baseline else "-"
        print(f"{name:<34}{r['fps']:9.1f}{share:>14}{ratio:>12}{r['cpu_ms_per_frame']:14.3f}{r.get('requests') or '-':>10}{r.get('workers') or '-':>9}")
    for name, error in errors.items():
        print(f"{name:<34}  FAILED: {error.splitlines()[0] if error else ''}")
    print()
    targets = []
    for name, r in measured.items():
        if name.startswith("npu_zc") and limit and baseline:
            targets.append((f"{name}: >= 85% of benchmark_app", r["fps"] >= 0.85 * limit, f"{r['fps']:.0f} vs {limit:.0f} FPS"))
            targets.append((f"{name}: >= 2x AsyncInferQueue", r["fps"] >= 2 * baseline, f"{r['fps']:.0f} vs {baseline:.0f} FPS"))
            by = ", ".join(f"{k} {v:.3f}" for k, v in r.get("cpu_ms_per_frame_by_thread", {}).items())
            stages = r.get("stages_ms", {})
            print(f"threads  {name}: CPU ms per frame by thread: {by}; each frame's own preprocess "
                  f"{stages.get('preprocess', {}).get('mean', 0):.3f} ms, infer {stages.get('infer', {}).get('mean', 0):.3f} ms, "
                  f"postprocess {stages.get('postprocess', {}).get('mean', 0):.3f} ms (means)")  # fmt: skip
            top_theirs = measured["AsyncInferQueue + cv2/numpy"].get("top1", [])
            print(f"top-1    {name}: {r.get('top1')}; AsyncInferQueue: {top_theirs}")
    if "benchmark_app" in measured:
        print(f"command  {measured['benchmark_app']['command']}")
    print("targets")
    for target, met, detail in targets:
        print(f"  [{'met' if met else 'MISSED'}] {target}: {detail}")
    rows = []
    for name, r in measured.items():
        rows.append([name, round(r["fps"], 1), f"{r['fps'] / limit:.1%}" if limit else None,
                     f"{r['fps'] / baseline:.2f}x" if baseline else None, round(r["cpu_ms_per_frame"], 2),
                     r.get("requests") or None, r.get("workers") or None])
    saved = results.save("bench_throughput", [{
        "title": f"{MODEL} on {args.device}, throughput mode" + (" (--quick: a smoke run)" if args.quick else ""),
        "note": f"OpenVINO {openvino_version()}, precision {precision}; {len(PHOTOS)} photos at 1920x1080, decoded once; "
                f"{args.seconds:g} s per variant after {args.warmup:g} s of warm-up; benchmark_app -hint throughput on the "
                "model npu_zc compiles (no preprocessing) is the limit; AsyncInferQueue + cv2/numpy is what a user writes"
                + (f"; npu_zc options: {', '.join(args.option)}" if args.option else ""),
        "columns": ["variant", "FPS", "of benchmark_app", "x AsyncInferQueue", "CPU ms / frame", "requests", "workers"],
        "rows": rows,
    }], title="Throughput mode against OpenVINO's own limit")
    print(f"results: {saved}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "cores": os.cpu_count(), "seconds": args.seconds, "quick": args.quick,
                       "precision": precision, "options": args.option, "measured": measured, "errors": errors,
                       "targets": [{"target": t, "met": bool(m), "detail": d} for t, m, d in targets]}, f, indent=1)  # fmt: skip
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
