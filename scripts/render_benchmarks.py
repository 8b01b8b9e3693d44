#!/usr/bin/env python3
"""Renders every benches/results/*.json (written by the benches through
benches/results.py) into docs/benchmarks.md: grouped by bench, then by
machine, each table with its machine, CPU flags, commit, date and command.

    python3 scripts/render_benchmarks.py            # rewrite docs/benchmarks.md
    python3 scripts/render_benchmarks.py --check    # exit 1 if it is out of date

What follows the PRESERVED marker in docs/benchmarks.md is hand-written
(measurements not yet re-run with a bench that records them) and kept as it is.
Needs only the standard library.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benches" / "results"
DOC = REPO / "docs" / "benchmarks.md"
PRESERVED = "<!-- Everything below this line is hand-written: scripts/render_benchmarks.py keeps it as it is. -->"

# Benches in the order a reader meets them (others follow, by name).
ORDER = ("bench_layout", "bench_layout_threads", "bench_resize", "bench_capture", "bench_capture_camera",
         "bench_pipeline", "bench_throughput", "bench_cpu_time")

HEADER = """# Benchmarks

Every table in this page is generated: each bench (`benches/*.py`) records its
tables with `benches/results.py` into `benches/results/<bench>--<machine>.json`,
and `python3 scripts/render_benchmarks.py` renders them here. Re-running a bench
on a machine refreshes its table; each table says the machine, its CPU flags,
the commit, the date and the exact command. Ratios taken within one run are
what to compare; absolute times move with the machine and its load.

How to run the benches on a machine that reaches no package registry:
`benches/offline.sh` (see its `--help`).
"""


def anchor(text: str) -> str:
    """GitHub's heading anchor."""
    kept = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(t: dict[str, Any]) -> list[str]:
    columns = t["columns"]
    out = [f"**{t['title']}**", ""] if t.get("title") else []
    if t.get("note"):
        out += [str(t["note"]), ""]
    numeric = [all(isinstance(r[i], (int, float)) or r[i] is None or str(r[i]).rstrip("x%").replace(".", "", 1).isdigit()
                   for r in t["rows"] if i < len(r)) for i in range(len(columns))]
    out.append("| " + " | ".join(cell(c) for c in columns) + " |")
    out.append("|" + "|".join("---:" if n and i else "---" for i, n in enumerate(numeric)) + "|")
    for row in t["rows"]:
        out.append("| " + " | ".join(cell(v) for v in list(row) + [None] * (len(columns) - len(row))) + " |")
    return out + [""]


def machine_line(m: dict[str, Any]) -> str:
    simd = ", ".join(m.get("simd") or []) or "none detected"
    forced = f"; forced SIMD level: `NPU_ZC_SIMD={m['forced_simd']}`" if m.get("forced_simd") else ""
    return f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores; CPU flags: {simd}{forced}"


def render(records: list[dict[str, Any]]) -> str:
    by_bench: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_bench.setdefault(r["bench"], []).append(r)
    benches = [b for b in ORDER if b in by_bench] + sorted(b for b in by_bench if b not in ORDER)
    lines = [HEADER]
    if benches:
        lines.append("Contents:")
        lines.append("")
        for b in benches:
            title = by_bench[b][0].get("title") or b
            lines.append(f"- [{title}](#{anchor(title)}) (`benches/{b.split('_camera')[0].split('_threads')[0]}.py`)")
        lines.append("- [Previous measurements](#previous-measurements) (not yet re-run with the benches above)")
        lines.append("")
    for b in benches:
        runs = sorted(by_bench[b], key=lambda r: (r["machine"].get("slug", ""), r.get("date", "")))
        lines.append(f"## {runs[0].get('title') or b}")
        lines.append("")
        for r in runs:
            m = r["machine"]
            lines.append(f"### {m.get('slug', 'machine')}")
            lines.append("")
            dirty = " (with uncommitted changes)" if r.get("dirty") else ""
            lines.append(f"- machine: {machine_line(m)}")
            load = f"; load average {r['load_average']} when saved" if "load_average" in r else ""
            lines.append(f"- commit `{r.get('commit', '?')}`{dirty}, {r.get('date', '?')}{load}")
            lines.append(f"- command: `{r.get('command', '?')}`")
            lines.append("")
            for t in r["tables"]:
                lines += table(t)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/benchmarks.md is not what the JSON renders to")
    args = parser.parse_args()
    records = []
    for path in sorted(RESULTS.glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("version") != 1:
            print(f"skipping {path}: schema version {record.get('version')} (this script reads 1)", file=sys.stderr)
            continue
        records.append(record)
    old = DOC.read_text() if DOC.exists() else ""
    kept = old[old.index(PRESERVED):] if PRESERVED in old else PRESERVED + "\n\n## Previous measurements\n"
    new = render(records) + "\n" + kept
    if args.check:
        if new != old:
            print(f"{DOC.relative_to(REPO)} is out of date: run python3 scripts/render_benchmarks.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    print(f"{DOC.relative_to(REPO)}: {sum(len(r['tables']) for r in records)} tables from {len(records)} result files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
