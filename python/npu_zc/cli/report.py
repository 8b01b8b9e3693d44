"""Text and plots of pipeline reports, as `npu-zc run`, `compare`, `demo` and `stream` print them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from ..errors import InvalidArgumentError
from ..pipeline import STAGES, RunReport
from ..pipeline.postprocess import ClassScore, NormalisedDetection, Prediction
from ..pipeline.single_stream import StreamReport


def setup_lines(report: RunReport) -> list[str]:
    shape = "x".join(map(str, report.input_shape))
    where = "bound as the model's memory" if report.mode == "zero-copy" else "copied in and out by the runtime"
    buffers = report.buffers if report.buffers == "ordinary memory" else f"{report.buffers} buffers"
    return [
        f"model    {report.model} ({report.kind})",
        f"device   {report.device} ({device_reason(report.device_reason)})",
        f"mode     {report.mode}: input {report.input_format} {shape} in {buffers}, {where}",
        *([f"quant    int8 input: byte q stands for (q - {q['zero_point']}) * {q['scale']:.6g} (the model's "
           f"{q['source']}); the preprocess normalises and quantises"] if (q := report.quantisation) else []),
        *([f"hint     {report.hint}: {report.requests} frames in flight; FPS is frames / wall time, the stages each "
           "frame's own"] if report.fps is not None else []),
        *binding_lines(report.bindings),
        f"image    {report.image or 'decoded image'} {report.image_size[0]}x{report.image_size[1]}; "
        f"{report.warmup} warm-up + {report.runs} timed run{'s' if report.runs != 1 else ''}"
        + (" (stopped by Ctrl-C: the figures are of these runs)" if report.interrupted else ""),
    ]


def binding_lines(bindings: list[dict[str, str]]) -> list[str]:
    """Per port: does the device read our memory or a copy (see BindingReport)."""
    return [f"binding  {b['port']}: the {b['device']} uses {b['reads']} ({b['tensor']})" for b in bindings]


def device_reason(reason: str) -> str:
    """The device choice, short: why there is no NPU takes a paragraph, which `npu-zc info` prints."""
    head, _, why = reason.partition(": ")
    return f"{head}: no NPU is usable here, `npu-zc info` says why" if head == "AUTO took the CPU" and why else reason


def stage_lines(report: RunReport) -> list[str]:
    """The vart_zerocopy benchmark block, with minimum, median and p99 beside the mean."""
    lines = [f"{'':<22}{'mean':>9}{'min':>9}{'median':>9}{'p99':>9}"]
    for stage in STAGES:
        s = report.stages[stage]
        lines.append(f"{stage:<22}{s.mean:9.3f}{s.min:9.3f}{s.median:9.3f}{s.p99:9.3f}  ms / frame")
    lines.append(f"{'throughput (infer)':<22}{report.infer_fps:9.1f} FPS")
    lines.append(f"{'throughput (pipeline)':<22}{report.pipeline_fps:9.1f} FPS")
    return lines


def prediction_lines(prediction: Prediction, image_size: tuple[int, int], top: int | None = None) -> list[str]:
    if not isinstance(prediction, list):
        return detections_lines(prediction)
    if not prediction:
        return ["nothing found"]
    if isinstance(prediction[0], ClassScore):
        return [f"top {len(prediction)}:"] + [f"  {p.score:6.3f}  {p.label} ({p.index})" for p in prediction]
    lines = [f"{len(prediction)} detection{'s' if len(prediction) != 1 else ''}:"]
    for p in prediction:
        assert isinstance(p, NormalisedDetection)
        x0, y0, x1, y1 = p.pixels(*image_size)
        lines.append(f"  {p.score:6.3f}  {p.label} at ({x0}, {y0})-({x1}, {y1}) px")
    return lines


def run_text(report: RunReport) -> str:
    return "\n".join(
        setup_lines(report) + [""] + stage_lines(report) + [""] + prediction_lines(report.prediction, report.image_size)
    )


def compare_text(zero: RunReport, copy: RunReport) -> str:
    lines = [
        f"model    {zero.model} ({zero.kind}) on {zero.device} ({device_reason(zero.device_reason)})",
        f"image    {zero.image or 'decoded image'} {zero.image_size[0]}x{zero.image_size[1]}; "
        f"{zero.warmup} warm-up + {zero.runs} timed runs per mode, back to back"
        + (f" (copy mode stopped by Ctrl-C after {copy.runs})" if copy.interrupted else ""),
        f"inputs   zero-copy: {zero.input_format} in {zero.buffers}; copy: {copy.input_format} in {copy.buffers}",
        "",
        f"{'ms / frame (mean)':<22}{'zero-copy':>11}{'copy':>11}{'copy/zero-copy':>16}",
    ]
    for stage in STAGES:
        a, b = zero.stages[stage].mean, copy.stages[stage].mean
        lines.append(f"{stage:<22}{a:11.3f}{b:11.3f}{_ratio(b, a):>16}")
    for name, a, b in (
        ("throughput (infer)", zero.infer_fps, copy.infer_fps),
        ("throughput (pipeline)", zero.pipeline_fps, copy.pipeline_fps),
    ):
        lines.append(f"{name:<22}{a:11.1f}{b:11.1f}{_ratio(b, a):>16}  FPS")
    lines.append("")
    top_zero, top_copy = _top(zero.prediction), _top(copy.prediction)
    same = "the same in both modes" if top_zero == top_copy else f"copy mode: {top_copy}"
    lines.append(f"top-1    {top_zero} ({same})")
    return "\n".join(lines)


def _ratio(value: float, reference: float) -> str:
    return f"{value / reference:.2f}x" if reference > 0 else "-"


def _top(prediction: Prediction) -> str:
    if not isinstance(prediction, list):
        return f"{len(prediction)} detections" if len(prediction) else "nothing found"
    return str(prediction[0]) if prediction else "nothing found"


def plot_compare(zero: RunReport, copy: RunReport, path: str | os.PathLike[str]) -> Path:
    """Draw each stage's mean (with min..p99 whiskers) for both modes, one panel per stage, and the FPS."""
    try:
        import matplotlib
    except ImportError:
        raise InvalidArgumentError("--plot needs matplotlib: pip install 'npu_zc[plot]'") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(path)
    if not out.parent.is_dir():
        raise InvalidArgumentError(f"cannot write the plot to {path}: no folder {out.parent}")
    modes = (("zero-copy", zero, "#1b7837"), ("copy", copy, "#b2182b"))
    fig, axes = plt.subplots(1, len(STAGES) + 1, figsize=(13, 3.8), constrained_layout=True)
    for ax, stage in zip(axes, STAGES):
        for x, (name, report, colour) in enumerate(modes):
            s = report.stages[stage]
            ax.bar(x, s.mean, color=colour, width=0.6)
            ax.errorbar(x, s.mean, yerr=[[s.mean - s.min], [s.p99 - s.mean]], color="black", capsize=4, linewidth=1)
            ax.annotate(f"{s.mean:.3f}", (x, s.p99), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=9)
        ratio = _ratio(copy.stages[stage].mean, zero.stages[stage].mean)
        ax.set_title(f"{stage}\ncopy = {ratio} zero-copy", fontsize=10)
        _mode_axis(ax, modes)
        ax.set_ylabel("ms / frame (mean; whiskers min..p99)" if stage == STAGES[0] else "")
    ax = axes[-1]
    for x, (name, report, colour) in enumerate(modes):
        ax.bar(x, report.pipeline_fps, color=colour, width=0.6)
        ax.annotate(f"{report.pipeline_fps:.0f}", (x, report.pipeline_fps), textcoords="offset points", xytext=(0, 2), ha="center", fontsize=9)
    ax.set_title("pipeline throughput\n(higher is better)", fontsize=10)
    ax.set_ylabel("FPS")
    _mode_axis(ax, modes)
    fig.suptitle(
        f"{zero.model} on {zero.device}: zero-copy ({zero.input_format}) vs copy ({copy.input_format}), "
        f"{Path(zero.image).name or 'image'} {zero.image_size[0]}x{zero.image_size[1]}, {zero.runs} runs each",
        fontsize=11,
    )
    try:
        fig.savefig(out, dpi=110)
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"cannot write the plot to {path}: {exc}") from None
    finally:
        plt.close(fig)
    return out


def _mode_axis(ax: Any, modes: Sequence[tuple[str, RunReport, str]]) -> None:
    ax.set_xticks(range(len(modes)), [name for name, _, _ in modes])
    ax.set_xlim(-0.6, len(modes) - 0.4)
    ax.margins(y=0.15)


def stream_text(report: StreamReport) -> str:
    lines = [
        f"source   {report.source}: {report.frames} frames"
        + (f", {report.dropped} dropped" if report.dropped else "")
        + f" in {report.seconds:.2f} s, {report.fps:.1f} FPS",
        f"model    {report.model} on {report.device}, {report.mode}, {report.processes} process{'es' if report.processes > 1 else ''}",
        "",
        f"{'':<14}{'mean':>9}{'min':>9}{'median':>9}{'p99':>9}",
    ]
    for stage, s in report.stages.items():
        lines.append(f"{stage:<14}{s.mean:9.3f}{s.min:9.3f}{s.median:9.3f}{s.p99:9.3f}  ms / frame")
    found = [r.prediction for r in report.results if not isinstance(r.prediction, list)]
    if found:  # a detector: what it found over the stream, and the tracks
        total = sum(len(d) for d in found)
        ids = {int(i) for d in found if d.track_ids is not None for i in d.track_ids}
        tracks = f", {len(ids)} track{'s' if len(ids) != 1 else ''}" if any(d.track_ids is not None for d in found) else ""
        lines += ["", f"found    {total} detections in {len(found)} frames{tracks} (--json lists them)"]
    return "\n".join(lines)


def stream_rows(stats: Sequence[Any]) -> list[str]:
    """One line per stream: state, frames, FPS, drops, latency p50/p99 (decode to result)."""
    lines = [f"{'#':>2}  {'stream':<34}{'state':>8}{'frames':>8}{'FPS':>8}{'dropped':>9}{'p50 ms':>8}{'p99 ms':>8}"]
    for s in stats:
        lat = s.latency()
        name = s.name if len(s.name) <= 33 else "…" + s.name[-32:]
        lines.append(f"{s.stream:>2}  {name:<34}{s.state:>8}{s.frames:>8}{s.fps:>8.1f}{s.dropped:>9}"
                     f"{lat.median:>8.1f}{lat.p99:>8.1f}")  # fmt: skip
    return lines


class LiveTable:
    """The per-stream table redrawn in place on a terminal (a ``tick`` of :meth:`Streams.run`)."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self._drawn = 0

    def __call__(self, stats: Sequence[Any]) -> None:
        lines = stream_rows(stats)
        up = f"\x1b[{self._drawn}F" if self._drawn else ""
        self.out.write(up + "".join(f"\x1b[2K{line}\n" for line in lines))
        self.out.flush()
        self._drawn = len(lines)

    def close(self) -> None:
        if self._drawn:
            self.out.write(f"\x1b[{self._drawn}F\x1b[J")  # the final table is printed on stdout
            self.out.flush()


def streams_text(report: Any, saved: dict[int, Any] | None = None) -> str:
    """The end of `npu-zc stream` with several sources: per stream, then per stage."""
    lines = [
        f"model    {report.model} on {report.device}, zero-copy, {report.requests} requests in flight",
        f"streams  {len(report.streams)}: {report.frames} frames in {report.seconds:.2f} s, {report.fps:.1f} FPS in all, "
        f"{report.cpu_seconds / report.frames * 1000 if report.frames else 0:.2f} ms of CPU a frame",
        *([f"fitted   {report.streams_fit}"] if report.streams_fit is not None else []),
        "",
        *stream_rows(report.streams),
    ]
    for s in report.streams:
        if s.error:
            lines.append(f"error    stream {s.stream} ({s.name}): {s.error}")
        if s.copied:
            lines.append(f"note     stream {s.stream}: {s.copied} frames converted by FFmpeg before the engine read them (a copy)")
    for stream, path in sorted((saved or {}).items()):
        lines.append(f"saved    stream {stream}: {path}")
    lines += ["", f"{'':<14}{'mean':>9}{'min':>9}{'median':>9}{'p99':>9}"]
    for stage, s in report.stages.items():
        lines.append(f"{stage:<14}{s.mean:9.3f}{s.min:9.3f}{s.median:9.3f}{s.p99:9.3f}  ms / frame")
    return "\n".join(lines)


SHOWN_DETECTIONS = 50


def detections_lines(dets: Any) -> list[str]:
    """A detector's :class:`npu_zc.Detections`: score, name, class id, box in frame pixels (and track id)."""
    n = len(dets)
    if n == 0:
        return ["nothing found"]
    lines = [f"{n} detection{'s' if n != 1 else ''} ({dets.task}):"]
    tracks = getattr(dets, "track_ids", None)
    names = dets.labels()
    for i in range(min(n, SHOWN_DETECTIONS)):
        x0, y0, x1, y1 = (float(v) for v in dets.xyxy[i])
        track = f"  id {int(tracks[i])}" if tracks is not None else ""
        lines.append(
            f"  {float(dets.scores[i]):6.3f}  {names[i]} ({int(dets.class_ids[i])}) at ({x0:.1f}, {y0:.1f})-({x1:.1f}, {y1:.1f}) px{track}"
        )
    if n > SHOWN_DETECTIONS:
        lines.append(f"  ... and {n - SHOWN_DETECTIONS} more (--json lists every one)")
    return lines

