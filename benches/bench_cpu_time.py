"""Where the CPU time of a single-stream (latency) pipeline goes, and which setting brings its overhead down.

    python3 benches/bench_cpu_time.py [--frames 600] [--device CPU] [--json FILE]
    python3 benches/bench_cpu_time.py --quick            # a smoke run

For each CPU plugin setting below, in processes of their own, one after the other, ``--frames`` frames of a
1080p photo after a warm-up, one frame at a time (the LATENCY hint, as ``npu-zc run``):

* ``bare model``: the original model's inference alone, on an input set once;
* ``zero-copy``: ``Pipeline.step`` (resize, RGBx, inference in place, top-5);
* ``zero-copy, overlapped``: the same pipeline with 2 requests in flight (``run_throughput(requests=2,
  workers=1)``, ``npu-zc run --requests 2``): the next frame is preprocessed while the current one infers, so
  OpenVINO's threads never wait for Python between inferences;
* ``baseline``: plain OpenVINO (cv2 + numpy, ``compiled({0: array})``), default settings only.

CPU time is read per thread from /proc/self/task (user + system): the calling thread (Python, our preprocess
and postprocess, and its share of the inference) and every other thread (OpenVINO's TBB workers, our worker
threads). A TBB worker that spins while Python prepares the next frame shows up as CPU time of the other
threads beyond the bare model's. Overhead = CPU per frame - the bare model's under default settings; target:
zero-copy's overhead <= a third of the baseline's.

Settings (each passed as an OpenVINO property at compile time; ``npu-zc run --option KEY=VALUE``):
``ENABLE_CPU_PINNING=NO``, ``CPU_DENORMALS_OPTIMIZATION=YES``, ``TBB_PARTITIONER=AUTO|STATIC``,
``ENABLE_CPU_RESERVATION=YES``, ``INFERENCE_NUM_THREADS`` = cores - 1 and cores / 2 (``npu-zc run --threads N``),
and, not an OpenVINO property, ``cv2.setNumThreads(1)`` (OpenCV's pool resizes the frame).
The CPU plugin of OpenVINO 2026.4 has no property for how long its idle threads spin.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np
import results
from timing import thread_cpu

MODEL = "efficientnet-lite0"
CORES = os.cpu_count() or 1
CV2_THREADS = "cv2.setNumThreads"  # a "setting" applied to OpenCV in the process, not passed to OpenVINO


def settings() -> dict[str, dict[str, str]]:
    out = {
        "default": {},
        "ENABLE_CPU_PINNING=NO": {"ENABLE_CPU_PINNING": "NO"},
        "CPU_DENORMALS_OPTIMIZATION=YES": {"CPU_DENORMALS_OPTIMIZATION": "YES"},
        "TBB_PARTITIONER=AUTO": {"TBB_PARTITIONER": "AUTO"},
        "TBB_PARTITIONER=STATIC": {"TBB_PARTITIONER": "STATIC"},
        "ENABLE_CPU_RESERVATION=YES": {"ENABLE_CPU_RESERVATION": "YES"},
        # Not an OpenVINO property: OpenCV's own thread pool, which resizes the frame (its idle threads wait too).
        "cv2.setNumThreads(1)": {CV2_THREADS: "1"},
    }
    if CORES > 2:
        out[f"INFERENCE_NUM_THREADS={CORES - 1}"] = {"INFERENCE_NUM_THREADS": str(CORES - 1)}
        out[f"INFERENCE_NUM_THREADS={CORES // 2}"] = {"INFERENCE_NUM_THREADS": str(CORES // 2)}
    return out


def measure(run: Callable[[int], None], frames: int) -> dict[str, float]:
    """Wall and CPU time per frame of ``run(frames)``: all threads, the calling thread, the others."""
    main = __import__("threading").get_native_id()
    before, t0 = thread_cpu(), os.times()
    started = time.perf_counter()
    run(frames)
    wall = time.perf_counter() - started
    after, t1 = thread_cpu(), os.times()
    delta = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
    total = (t1.user + t1.system) - (t0.user + t0.system)
    calling = delta.get(main, 0.0)
    return {
        "fps": frames / wall,
        "wall_ms": 1000 * wall / frames,
        "cpu_ms": 1000 * total / frames,
        "calling_thread_ms": 1000 * calling / frames,
        "other_threads_ms": 1000 * (total - calling) / frames,
        "threads": len(after),
    }


def child(variant: str, options: dict[str, str], device: str, frames: int) -> dict[str, Any]:
    import itertools

    from npu_zc.pipeline import Pipeline, full_hd, sample_photo
    from npu_zc.runtime import CompileOptions, core, model_normalisation, read_model

    frame = full_hd(sample_photo("chelsea"))
    options = dict(options)
    if CV2_THREADS in options:
        import cv2

        cv2.setNumThreads(int(options.pop(CV2_THREADS)))
    config = {"PERFORMANCE_HINT": "LATENCY", **options}
    if variant in ("zero-copy", "zero-copy, overlapped"):
        pipeline = Pipeline(MODEL, device, options=CompileOptions(performance_hint="LATENCY", extra=options))
        if variant == "zero-copy":

            def run(n: int) -> None:
                for _ in range(n):
                    pipeline.step(frame)

        else:

            def run(n: int) -> None:
                pipeline.run_throughput(itertools.repeat(frame, n), requests=2, workers=1)

    elif variant == "bare model":
        import openvino as ov

        compiled = core().compile_model(read_model(MODEL), device, config)
        request = compiled.create_infer_request()
        request.set_input_tensor(ov.Tensor(np.zeros((1, 3, 224, 224), np.float32)))

        def run(n: int) -> None:
            for _ in range(n):
                request.infer(share_outputs=True)

    else:  # baseline: the plain OpenVINO way, as benches/bench_pipeline.py
        import cv2

        model = read_model(MODEL)
        norm = model_normalisation(model)
        mean, scale = np.asarray(norm.mean, np.float32), np.asarray(norm.scale, np.float32)
        compiled = core().compile_model(model, device, config)

        def run(n: int) -> None:
            for _ in range(n):
                h, w = frame.shape[:2]
                s = 256 / min(h, w)
                resized = cv2.resize(frame, (round(w * s), round(h * s)))
                y, x = (resized.shape[0] - 224) // 2, (resized.shape[1] - 224) // 2
                rgb = cv2.cvtColor(resized[y : y + 224, x : x + 224], cv2.COLOR_BGR2RGB)
                tensor = np.expand_dims(((rgb.astype(np.float32) - mean) / scale).transpose(2, 0, 1), 0)
                logits = compiled({0: tensor})[0]
                p = np.exp(logits[0] - logits[0].max())
                np.argsort(p / p.sum())[::-1][:5]

    run(max(20, frames // 10))  # warm-up
    return measure(run, frames)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--quick", action="store_true", help="60 frames, default and one other setting: a smoke run")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(child(args.variant, json.loads(args.options), args.device, args.frames)), flush=True)
        return 0
    chosen = settings()
    if args.quick:
        args.frames = 60
        chosen = {k: chosen[k] for k in ("default", "ENABLE_CPU_PINNING=NO")}

    rows: list[dict[str, Any]] = []
    failed = 0
    plan = [("baseline", "default")] + [(v, s) for s in chosen for v in ("bare model", "zero-copy", "zero-copy, overlapped")]
    for variant, setting in plan:
        print(f"... {variant}, {setting}", file=sys.stderr, flush=True)
        argv = [sys.executable, __file__, "--variant", variant, "--options", json.dumps(chosen[setting]),
                "--device", args.device, "--frames", str(args.frames)]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            failed += 1
            print(f"!!! {variant}, {setting} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            continue
        rows.append({"variant": variant, "setting": setting, **json.loads(done.stdout.strip().splitlines()[-1])})
        r = rows[-1]  # printed as it comes, so that a run cut short still shows what it measured
        print(f"measured {setting}, {variant}: {r['fps']:.1f} FPS, CPU {r['cpu_ms']:.3f} ms/frame "
              f"(calling {r['calling_thread_ms']:.3f}, others {r['other_threads_ms']:.3f})", flush=True)

    def find(variant: str, setting: str) -> dict[str, Any] | None:
        return next((r for r in rows if r["variant"] == variant and r["setting"] == setting), None)

    bare = find("bare model", "default")
    base = find("baseline", "default")
    budget = (base["cpu_ms"] - bare["cpu_ms"]) / 3 if bare and base else None
    print(f"model    {MODEL} on {args.device}, {CORES} cores, {args.frames} frames of a 1080p photo per row, one at a time")
    print(f"CPU ms per frame: all threads = the calling thread + the others (OpenVINO's); overhead = all - bare model (default)")
    print()
    print(f"{'setting':<32}{'variant':<24}{'FPS':>8}{'all':>9}{'calling':>9}{'others':>9}{'overhead':>10}{'vs bare same':>14}")
    for r in rows:
        same = find("bare model", r["setting"])
        overhead = r["cpu_ms"] - bare["cpu_ms"] if bare else float("nan")
        vs_same = r["cpu_ms"] - same["cpu_ms"] if same else float("nan")
        print(f"{r['setting']:<32}{r['variant']:<24}{r['fps']:8.1f}{r['cpu_ms']:9.3f}{r['calling_thread_ms']:9.3f}"
              f"{r['other_threads_ms']:9.3f}{overhead:10.3f}{vs_same:14.3f}")  # fmt: skip
    print()
    met = []
    if budget is not None and bare is not None and base is not None:
        print(f"target: zero-copy CPU overhead <= baseline's / 3 = ({base['cpu_ms']:.3f} - {bare['cpu_ms']:.3f}) / 3 = {budget:.3f} ms")
        for r in rows:
            if r["variant"].startswith("zero-copy"):
                overhead = r["cpu_ms"] - bare["cpu_ms"]
                ok = overhead <= budget
                met.append({"setting": r["setting"], "variant": r["variant"], "overhead_ms": overhead, "met": ok})
                print(f"  [{'met' if ok else 'MISSED'}] {r['variant']}, {r['setting']}: {overhead:.3f} ms")
    table = []
    for r in rows:
        same = find("bare model", r["setting"])
        table.append([r["setting"], r["variant"], round(r["fps"], 1), round(r["cpu_ms"], 2), round(r["calling_thread_ms"], 2),
                      round(r["other_threads_ms"], 2), round(r["cpu_ms"] - bare["cpu_ms"], 2) if bare else None,
                      round(r["cpu_ms"] - same["cpu_ms"], 2) if same else None])
    saved = results.save("bench_cpu_time", [{
        "title": f"{MODEL} on {args.device}: CPU time per frame by thread, one frame at a time"
                 + (" (--quick: a smoke run)" if args.quick else ""),
        "note": f"{args.frames} frames of a 1080p photo per row; CPU ms per frame: all threads = the calling thread + "
                "the others (OpenVINO's); overhead = all - bare model (default setting)",
        "columns": ["setting", "variant", "FPS", "CPU ms / frame", "calling thread", "other threads", "overhead",
                    "vs bare model, same setting"],
        "rows": table,
    }], title="CPU time per frame, by thread and CPU plugin setting")
    print(f"results: {saved}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "cores": CORES, "frames": args.frames, "rows": rows, "budget_ms": budget, "targets": met}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
