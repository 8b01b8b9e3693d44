"""The request path alone: one thread keeps N inferences of a model that costs nothing in flight and restarts each as
it completes, through OpenVINO's Python binding (as npu_zc's queue drives it) and through OpenVINO's C API from native
code (``benches/request_path``, built here with cargo, linked to the C library of the installed ``openvino``).

    python3 benches/bench_request_path.py [--requests 16 32] [--count 20000] [--rounds 5]
    python3 benches/bench_request_path.py --binary PATH   # a request_path built elsewhere (a machine without cargo)

The model is the overhead bench's (a 3x3 mean of a 64x64 input: microseconds), compiled for the CPU with the
throughput hint by both. Per request: the driving thread's CPU (what a serial thread pays to start and collect an
inference), the wall time and the whole process's CPU (the plugin's threads). Python: waiting on the oldest request
(``wait``, as ``AsyncQueue`` does) and a completion callback into a ``queue.SimpleQueue``; native: the same two. Each
variant runs in a process of its own, in alternating order, ``--rounds`` times; the tables give medians.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import results  # noqa: E402

NATIVE = HERE / "request_path"
RUN_S = 600  # one variant's run, at most


def python_path(model: str, requests: int, count: int, callback: bool) -> dict[str, Any]:
    """The Python binding's request path, in this process: the figures of one run."""
    import openvino as ov

    compiled = ov.Core().compile_model(model, "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    pool = [compiled.create_infer_request() for _ in range(requests)]
    for request in pool:
        request.get_input_tensor(0).data[:] = 0
    for _ in range(3):  # warm-up: the first inferences of each request
        for request in pool:
            request.start_async()
        for request in pool:
            request.wait()
    done: queue.SimpleQueue[int] = queue.SimpleQueue()
    if callback:
        for index, request in enumerate(pool):
            request.set_callback(done.put, index)
    outputs = [request.get_output_tensor(0).data for request in pool]
    wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
    for request in pool:
        request.start_async()
    finished, total, oldest = 0, 0.0, 0
    while finished < count:
        if callback:
            index = done.get()
        else:
            index, oldest = oldest, (oldest + 1) % requests
            pool[index].wait()
        finished += 1
        total += float(outputs[index][0, 0])
        if finished + requests <= count:
            pool[index].start_async()
    seconds = time.perf_counter() - wall
    per = 1e6 / count
    return {"path": f"Python binding, {'callback' if callback else 'wait'}", "requests": requests, "count": count,
            "per_second": count / seconds, "thread_cpu_us": (time.thread_time() - thread) * per,
            "wall_us": seconds * per, "process_cpu_us": (time.process_time() - process) * per, "checksum": total}  # fmt: skip


def build_native() -> Path:
    """``benches/request_path`` built against the installed OpenVINO's C library."""
    import openvino

    libraries = sorted((Path(openvino.__file__).parent / "libs").glob("libopenvino_c.so*"))
    if not libraries:
        raise SystemExit(f"no libopenvino_c.so* in {Path(openvino.__file__).parent / 'libs'}")
    env = dict(os.environ, OPENVINO_C=str(libraries[-1]))
    try:
        subprocess.run(["cargo", "build", "--release", "-q", "--manifest-path", str(NATIVE / "Cargo.toml")], env=env,
                       check=True)  # fmt: skip
    except FileNotFoundError:
        raise SystemExit("cargo is not on PATH: build benches/request_path where it is "
                         "(OPENVINO_C=<libopenvino_c.so.N> cargo build --release) and pass --binary") from None
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"building benches/request_path failed (cargo exited with {exc.returncode}): see above") from None
    return NATIVE / "target" / "release" / "request_path"


def one(variant: str, binary: Path, model: str, requests: int, count: int) -> dict[str, Any]:
    """One variant in a process of its own."""
    path, mode = variant.split("/")
    if path == "native":
        command = [str(binary), model, str(requests), str(count), mode]
    else:
        command = [sys.executable, __file__, "--child", mode, model, str(requests), str(count)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_S)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{variant} did not finish within {RUN_S} s (a request that never completes?)") from None
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, nargs="+", default=[16, 32], help="inferences in flight")
    parser.add_argument("--count", type=int, default=20000, help="requests a run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--binary", help="a request_path built elsewhere (default: build it here with cargo)")
    parser.add_argument("--json", help="where to write the results (default benches/results/)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, model, requests, count = args.child
        print(json.dumps(python_path(model, int(requests), int(count), mode == "callback")))
        return 0

    from bench_streams_overhead import tiny_model
    import openvino as ov

    binary = Path(args.binary) if args.binary else build_native()
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"{binary} is not an executable file: a request_path built from benches/request_path")
    folder = results.scratch("bench_request_path-")
    model = str(folder / "tiny.xml")
    ov.save_model(tiny_model(), model)
    variants = ["python/wait", "python/callback", "native/wait", "native/callback"]
    rows = []
    for requests in args.requests:
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for round_ in range(args.rounds):
            for variant in variants if round_ % 2 == 0 else variants[::-1]:
                runs[variant].append(one(variant, binary, model, requests, args.count))
        for variant in variants:
            r = runs[variant]
            median = {k: statistics.median(x[k] for x in r) for k in ("per_second", "thread_cpu_us", "wall_us", "process_cpu_us")}
            rows.append([requests, r[0]["path"], round(median["per_second"]), round(median["thread_cpu_us"], 2),
                         round(median["wall_us"], 2), round(median["process_cpu_us"], 1)])  # fmt: skip
            print(f"{requests:>3} in flight  {r[0]['path']:<26} {median['per_second']:9.0f}/s  thread CPU "
                  f"{median['thread_cpu_us']:6.2f} us  wall {median['wall_us']:6.2f} us  process CPU "
                  f"{median['process_cpu_us']:6.1f} us a request", flush=True)  # fmt: skip
    tables = [{
        "title": "The request path alone: a model that costs nothing on CPU, one thread restarting each completed request",
        "note": f"medians of {args.rounds} runs of {args.count} requests, each variant in a process of its own, in "
                "alternating order; per request: the driving thread's CPU, the wall time, the process's CPU (the "
                "plugin's threads too). wait: on the oldest request; callback: each completion queued by its callback.",
        "columns": ["requests in flight", "path", "requests / s", "driving thread CPU us", "wall us", "process CPU us"],
        "rows": rows,
    }]  # fmt: skip
    print(f"results  {results.save('bench_request_path', tables, title='The request path alone', path=args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
