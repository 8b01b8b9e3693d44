"""The cost of the aliasing rule (docs/safety.md) per call: small calls, where
the per-call checks are most of the time.

Per call, in microseconds (the best of many batches): a ``Converter`` on a
64 x 64 BGR frame into RGBx (numpy in, numpy out, and into a DmaBuf), the
``convert`` function on the same frame, ``quantize`` of 4096 floats, and, as
the floor, numpy copying the same destination bytes (``np.copyto``). Run it
on a build without the rule (``NPU_ZC_LABEL=before``) and with it to see
the difference; each run records its table with ``benches/results.py``.

    python3 benches/bench_aliasing.py [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results  # noqa: E402

import npu_zc  # noqa: E402
from npu_zc.layout import Converter, convert, quantize  # noqa: E402


def per_call_us(call: Callable[[], object], runs: int, batch: int = 2000) -> float:
    for _ in range(batch // 4):
        call()
    best = []
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(batch):
            call()
        best.append((time.perf_counter() - started) / batch * 1e6)
    return float(min(best))  # the least disturbed batch: the machine may be shared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", help="where to write the results (default benches/results/)")
    args = parser.parse_args()
    label = os.environ.get("NPU_ZC_LABEL", "this build")
    rng = np.random.default_rng(0)
    bgr = rng.integers(0, 256, (64, 64, 3), np.uint8)
    out = np.empty((64, 64, 4), np.uint8)
    buf = npu_zc.alloc(64 * 64 * 4, "memfd")
    to_rgbx = Converter("BGR", "RGBx", 64, 64, threads=1)
    floats = rng.standard_normal(4096).astype(np.float32)
    q = np.empty(4096, np.int8)
    cases = {
        "Converter 64x64 BGR->RGBx, numpy -> numpy": lambda: to_rgbx(bgr, out),
        "Converter 64x64 BGR->RGBx, numpy -> DmaBuf": lambda: to_rgbx(bgr, buf),
        "convert() 64x64 BGR->RGBx, numpy -> numpy": lambda: convert(bgr, out, "BGR", "RGBx", threads=1),
        "quantize 4096 f32 -> i8": lambda: quantize(floats, q, 0.05),
        "np.copyto of the 16 KiB destination (floor)": lambda: np.copyto(out, out[::-1]),
    }
    rows = []
    claim = getattr(npu_zc._core, "_claim_seconds", None)
    if claim is not None:  # builds with the rule: the rule alone, timed in Rust
        us = claim(args.runs) * 1e6
        rows.append(["the rule alone: 2 regions resolved, checked, claimed, released", round(us, 3)])
        print(f"{label:>10}  {us:8.3f} us  the rule alone (Rust, best of {args.runs} x 1000)")
    for name, call in cases.items():
        us = per_call_us(call, args.runs)
        rows.append([name, round(us, 3)])
        print(f"{label:>10}  {us:8.3f} us  {name}")
    results.save(
        f"bench_aliasing-{label.replace(' ', '_')}",
        [{"title": f"Per-call time ({label})", "columns": ["call", "us per call"], "rows": rows,
          "note": "best of --runs batches of 2000 calls; one thread"}],
        title="The aliasing rule's cost per call",
        path=args.json,
    )


if __name__ == "__main__":
    main()
