"""Turn `cargo bench` (criterion) output into a Markdown table with ratios.

    cargo bench --bench buffer | python benches/criterion_table.py --reference "vec (reference)"

Each benchmark id is group/function/parameter; the ratio column divides a
row's median time by the reference function's time for the same group and
parameter (the physical limit measured in the same run).
"""

from __future__ import annotations

import argparse
import re
import sys

UNITS = {"ps": 1e-12, "ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}
ROW = re.compile(r"^(\S.*?)\s+time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]")


def parse(text: str) -> dict[str, float]:
    times: dict[str, float] = {}
    pending: str | None = None
    for line in text.splitlines():
        m = ROW.match(line.strip()) if "time:" in line else None
        if m:
            name = m.group(1) if m.group(1) else pending
            assert name is not None  # ROW's first group matches at least one character
            times[name.strip()] = float(m.group(2)) * UNITS[m.group(3)]
        elif line and not line.startswith(" ") and "/" in line:
            pending = line.strip()  # criterion puts long ids on their own line
        if "time:" in line and not m and pending:
            parts = line.split("[")[1].split()
            times[pending] = float(parts[2]) * UNITS[parts[3]]
    return times


def fmt(seconds: float) -> str:
    for unit in ("s", "ms", "µs", "ns"):
        if seconds >= UNITS[unit] or unit == "ns":
            return f"{seconds / UNITS[unit]:.3g} {unit}"
    return f"{seconds} s"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", default=None, help="function name that gives the 1.0 of the ratio column")
    args = ap.parse_args()
    times = parse(sys.stdin.read())
    print("| benchmark | time | ratio |")
    print("|---|---:|---:|")
    for name, t in times.items():
        parts = name.split("/")
        ratio = ""
        if args.reference and len(parts) == 3:
            ref = times.get(f"{parts[0]}/{args.reference}/{parts[2]}")
            if ref:
                ratio = f"{t / ref:.2f}x"
        print(f"| {name} | {fmt(t)} | {ratio} |")


if __name__ == "__main__":
    main()
