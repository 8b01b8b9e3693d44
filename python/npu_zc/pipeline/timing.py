"""Per-stage timing: samples in nanoseconds, summarised as mean, minimum, median and p99 in ms."""

from __future__ import annotations

import threading

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping

import numpy as np

# How long a CPU-access bracket waits for a device's fences on a DMA-BUF (a device still
# writing an output, still reading an input) before FenceTimeoutError instead of a hang.
# Devices that attach no fences (OpenVINO's CPU plugin, memfd memory) never make it wait.
FENCE_TIMEOUT_S = 5.0

STAGES = ("preprocess", "infer", "postprocess", "total")
"""The stages of one frame, as `npu-zc run` reports them; ``total`` is their sum per frame."""


@dataclass(frozen=True)
class StageStats:
    """One stage over many frames, in milliseconds per frame."""

    mean: float
    min: float
    median: float
    p99: float
    count: int

    @classmethod
    def of(cls, samples_ns: Iterable[int | float]) -> "StageStats":
        ms = np.asarray(list(samples_ns), np.float64) / 1e6
        if ms.size == 0:
            return cls(0.0, 0.0, 0.0, 0.0, 0)
        return cls(float(ms.mean()), float(ms.min()), float(np.median(ms)), float(np.percentile(ms, 99)), int(ms.size))

    @property
    def fps(self) -> float:
        """Frames per second at the mean time per frame."""
        return 1000.0 / self.mean if self.mean > 0 else 0.0

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


class Timings:
    """Collects nanosecond samples per stage; :meth:`stats` summarises them."""

    def __init__(self, stages: Iterable[str] = STAGES) -> None:
        self.samples: dict[str, list[int]] = {stage: [] for stage in stages}
        self.trimmed: dict[str, tuple[int, int]] = {}
        """Per stage, the samples :meth:`trim` let go: their count and sum in ns (totals keep rising)."""
        self._trim_lock = threading.Lock()

    def add(self, stage: str, ns: int) -> None:
        self.samples.setdefault(stage, []).append(ns)

    def add_frame(self, **stages_ns: int) -> None:
        """One frame's stages; ``total`` is added as their sum unless given."""
        for stage, ns in stages_ns.items():
            self.add(stage, ns)
        if "total" not in stages_ns:
            self.add("total", sum(stages_ns.values()))

    def extend(self, other: "Timings") -> None:
        for stage, values in other.samples.items():
            self.samples.setdefault(stage, []).extend(values)

    def trim(self, keep: int) -> None:
        """Keep each stage's latest ``keep`` samples (a run that goes on for months), counting the rest in
        :attr:`trimmed`. Other threads may append meanwhile: they append at the end, which is kept."""
        with self._trim_lock:
            for stage, values in self.samples.items():
                cut = len(values) - keep
                if cut > 0:
                    gone = values[:cut]
                    del values[:cut]
                    count, total = self.trimmed.get(stage, (0, 0))
                    self.trimmed[stage] = (count + len(gone), total + sum(gone))

    def total(self, stage: str) -> tuple[int, int]:
        """Every sample of ``stage`` so far, trimmed ones included: (count, sum in ns)."""
        count, total = self.trimmed.get(stage, (0, 0))
        values = list(self.samples.get(stage, ()))
        return count + len(values), total + sum(values)

    def stats(self) -> dict[str, StageStats]:
        return {stage: StageStats.of(values) for stage, values in self.samples.items()}


def stats_table(columns: Mapping[str, Mapping[str, StageStats]], *, what: str = "mean") -> list[tuple[str, list[float]]]:
    """Rows (stage, one value per column) of one statistic, for stages present in every column."""
    stages = [s for s in next(iter(columns.values()))] if columns else []
    return [(stage, [getattr(col[stage], what) for col in columns.values()]) for stage in stages if all(stage in c for c in columns.values())]


def progress_bar(total: int, description: str, enabled: bool | None, *, unit: str = "frame", delay: float = 0) -> Any:
    """A tqdm bar on stderr (``enabled=None``: only on a terminal), shown after ``delay`` seconds."""
    from tqdm import tqdm

    disable = None if enabled is None else not enabled  # tqdm: None means "only on a terminal"
    return tqdm(total=total or None, desc=description, unit=unit, disable=disable, leave=False, delay=delay)
