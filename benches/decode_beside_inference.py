"""Diagnosis (not a bench with targets): can one machine decode and infer at once? benchmark_app alone, N threads
decoding the 1080p H.264 clip alone (another process, one single-threaded decoder each), then both at once; each
one's share of its rate alone. Shares summing to about 1 mean they compete for the same cores; above 1, there is
room for both (a process that runs both and reaches less is limited by itself).

    python3 benches/decode_beside_inference.py --model efficientnet-lite0.xml --threads 8 16
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DECODE = r"""
import os, sys, threading, time
from npu_zc.sources import VideoSource
clip, n, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
count, stop = [0] * n, threading.Event()
def work(k):
    while not stop.is_set():
        for frame in VideoSource(clip, thread_count=1).frames(stop):
            frame.release()
            count[k] += 1
threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(n)]
for t in threads:
    t.start()
time.sleep(1.0)
before, c1, t1 = sum(count), os.times(), time.time()
time.sleep(seconds)
frames, c2, t2 = sum(count) - before, os.times(), time.time()
stop.set()
print(f"{frames / (t2 - t1):.1f} {(c2.user + c2.system - c1.user - c1.system) / (t2 - t1):.1f}", flush=True)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="efficientnet-lite0.xml", help="an IR for benchmark_app")
    parser.add_argument("--threads", type=int, nargs="+", default=[8, 16], help="decoding threads (default 8 16)")
    parser.add_argument("--seconds", type=float, default=6.0)
    flags = Path("/proc/cpuinfo").read_text()
    parser.add_argument("--precision", default="bf16" if "amx_bf16" in flags or "avx512_bf16" in flags else "f32",
                        help="benchmark_app's -infer_precision (default: bf16 where the CPU has it, else f32)")
    args = parser.parse_args()
    import bench_streams
    import results
    from bench_throughput import run_benchmark_app

    clip = bench_streams.make_clip(results.scratch("decode_beside-") / "pan.mp4", 12, "veryfast")

    def decode(n: int, seconds: float) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", DECODE, str(clip), str(n), str(seconds)], stdout=subprocess.PIPE,
                                text=True)  # fmt: skip

    def app() -> float:
        return float(run_benchmark_app(Path(args.model), "CPU", args.seconds, args.precision, [])["fps"])

    alone = app()
    for n in args.threads:
        fps, cores = decode(n, args.seconds).communicate()[0].split()
        both = decode(n, args.seconds + 3)
        time.sleep(1.5)  # the decoders at full rate first
        beside = app()
        fps2, cores2 = both.communicate()[0].split()
        d, d2 = float(fps), float(fps2)
        print(f"{n} decoding threads: alone {d:.0f} FPS ({cores} cores); benchmark_app alone {alone:.0f} FPS; together "
              f"{d2:.0f} ({cores2} cores) + {beside:.0f} FPS; shares {d2 / d:.2f} + {beside / alone:.2f} = "
              f"{d2 / d + beside / alone:.2f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
