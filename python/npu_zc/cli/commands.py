"""`npu-zc run`, `compare`, `demo` and `stream`: each takes the parsed arguments and returns the exit code."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from ..pipeline import ImageError, Pipeline, RunReport, load_image, sample_photo
from ..detect.metadata import read_names
from ..detect.track import Tracker
from ..pipeline.yolo_postprocess import DetectOptions
from ..runtime import CompileOptions
from ..runtime.model import Mode
from . import report

DEMO_PHOTO = "chelsea"
"""scikit-image's photo of Chelsea the cat (ImageNet: tabby / tiger cat / Egyptian cat)."""


def _options(args: argparse.Namespace) -> CompileOptions:
    """--threads and --option KEY=VALUE as compile options (the hint is passed on its own)."""
    return CompileOptions(
        num_threads=args.threads,
        npu_turbo=True if args.npu_turbo else None,
        npu_enable_strides_for=args.npu_strides_for,
        run_inferences_sequentially=True if args.npu_sequential else None,
        extra=dict(args.option),
    )


def _pipeline(args: argparse.Namespace, mode: Mode, latency_budget_ms: float | None = None) -> Pipeline:
    if args.hint == "throughput" and args.command == "compare":
        raise ValueError("compare times one frame at a time in both modes: drop --hint throughput (use run or stream)")
    if args.hint == "throughput" and mode == "copy":
        raise ValueError("--hint throughput keeps frames in flight in bound buffers: it runs zero-copy only (drop -c)")
    return Pipeline(
        args.model,
        args.device,
        mode=mode,
        top=args.top,
        labels=args.labels,
        mean=args.mean,
        scale=args.scale,
        input_size=args.input_size,
        hw_format=args.hw_format if mode == "zero-copy" else None,
        interpolation=args.interpolation,
        heap=args.heap,
        hint=args.hint,
        options=_options(args) if latency_budget_ms is None else _options(args).with_latency_budget(latency_budget_ms),
        detect=_detect_options(args),
    )


def _detect_options(args: argparse.Namespace) -> DetectOptions:
    """--conf --iou --classes --agnostic --max-det --task --names: what a YOLO postprocess is told."""
    names = read_names(args.names) if getattr(args, "names", None) else None
    return DetectOptions(
        conf=getattr(args, "conf", 0.25),
        iou=getattr(args, "iou", 0.7),
        classes=getattr(args, "classes", None),
        agnostic=getattr(args, "agnostic", False),
        max_det=getattr(args, "max_det", 300),
        task=getattr(args, "task", None),
        names=names,
    )


INTERRUPTED = 130
"""The exit status after Ctrl-C (128 + SIGINT), also when the partial figures were printed."""


def _measure(args: argparse.Namespace, mode: Mode, image: Any, name: str) -> RunReport:
    requests = getattr(args, "requests", None)
    if requests and requests > 1 and mode == "copy":
        raise ValueError("--requests keeps frames in flight in bound buffers: it runs zero-copy only (drop -c)")
    # A progress bar on a terminal, for runs longer than a second; Ctrl-C returns the runs done.
    progress = False if getattr(args, "json", False) else None
    with _pipeline(args, mode) as pipeline:
        return pipeline.run(image, args.runs, warmup=1, name=name, requests=requests, progress=progress)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "count_copies", False):
        from . import copies

        return copies.run(args, _pipeline)
    image = load_image(args.image)  # decoded once, outside the timed loop
    result = _measure(args, "copy" if args.non_zero_copy else "zero-copy", image, args.image)
    if args.save:
        _save_drawn(image, result, args.save)
    print(_json(result.to_dict()) if args.json else report.run_text(result))
    return INTERRUPTED if result.interrupted else 0


def _save_drawn(image: Any, result: RunReport, path: str) -> None:
    """--save: the detections drawn onto a copy of the image, written where asked (the format from the suffix)."""
    import cv2

    from ..detect.draw import draw

    if isinstance(result.prediction, list):
        raise ValueError("--save draws a detector's boxes; this model is a classifier (drop --save)")
    canvas = draw(image.copy(), result.prediction)
    try:
        ok = cv2.imwrite(path, canvas)
    except cv2.error as exc:
        raise ValueError(f"cannot save {path}: {exc}") from None
    if not ok:
        raise ValueError(f"cannot save {path}: give a writable path ending in an image suffix (.jpg, .png...)")


def compare(args: argparse.Namespace) -> int:
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".svg", ".pdf", ".jpg", ".jpeg"):
        raise ValueError(f"--plot {args.plot}: give a .png (or .svg, .pdf, .jpg) file name")
    image = load_image(args.image)
    zero = _measure(args, "zero-copy", image, args.image)
    if zero.interrupted:  # Ctrl-C in the first mode: what it measured, no comparison
        print(_json({"zero-copy": zero.to_dict()}) if args.json else report.run_text(zero))
        return INTERRUPTED
    copy = _measure(args, "copy", image, args.image)
    if args.plot:
        report.plot_compare(zero, copy, args.plot)
    if args.json:
        ratios = {stage: copy.stages[stage].mean / zero.stages[stage].mean for stage in zero.stages if zero.stages[stage].mean}
        print(_json({"zero-copy": zero.to_dict(), "copy": copy.to_dict(), "ratio_copy_to_zero_copy": ratios}))
    else:
        print(report.compare_text(zero, copy))
        if args.plot:
            print(f"plot     {args.plot}")
    return INTERRUPTED if copy.interrupted else 0


def demo(args: argparse.Namespace) -> int:
    image = sample_photo(DEMO_PHOTO)
    name = f"scikit-image's '{DEMO_PHOTO}' photo"
    with Pipeline("efficientnet-lite0", args.device, mode="zero-copy") as pipeline:
        result = pipeline.run(image, args.runs, warmup=1, name=name, progress=None)
    assert isinstance(result.prediction, list)  # a classifier's top classes
    best = result.prediction[0]
    print(f"npu-zc demo: EfficientNet-Lite0 (ImageNet) on {name}, zero-copy")
    print(f"label    {best.label} ({best.score:.0%})\n")
    print(report.run_text(result))
    return INTERRUPTED if result.interrupted else 0


def stream(args: argparse.Namespace) -> int:
    from ..pipeline import FrameSource
    from ..pipeline.ipc import run_two_process
    from ..pipeline.single_stream import run_stream

    if _many(args):
        args.hint = args.hint or "throughput"  # many streams: many frames in flight
        return _streams(args)
    args.hint = args.hint or "latency"
    if not args.input and not args.camera:
        raise ValueError("give a source: -i VIDEO_OR_FOLDER, -i rtsp://..., or --camera /dev/videoN")
    args.input = args.input[0] if args.input else None
    args.camera = args.camera[0] if args.camera else None
    if args.camera:
        return _stream_camera(args)
    if args.frames:
        raise ValueError("--frames counts camera frames (with --camera); for a file use --limit")
    source = FrameSource(args.input, limit=args.limit)  # checked here, before the model is compiled
    mode: Mode = "copy" if args.non_zero_copy else "zero-copy"
    if args.two_process and args.non_zero_copy:
        raise ValueError("--two-process hands the producer's buffers to the model in place: it runs zero-copy only (drop -c)")
    if args.hint == "throughput" and (args.two_process or args.drop):
        raise ValueError("--hint throughput runs in one process and keeps every frame (drop --two-process and --drop)")
    if args.two_process and args.drop:
        raise ValueError("--drop applies to the one-process stream (the producer waits for free buffers)")
    progress = False if args.no_progress or args.json else None
    with _pipeline(args, mode) as pipeline:
        if args.two_process:
            result = run_two_process(pipeline, args.input, depth=args.depth or 4, limit=args.limit, progress=progress)
        else:
            tracker = Tracker() if pipeline.kind == "yolo" and not args.no_track else None
            result = run_stream(pipeline, source, depth=args.depth, drop=args.drop, progress=progress, tracker=tracker)
    if result.frames == 0:
        raise ImageError(
            f"{args.input} yielded no frame: not a video OpenCV's FFmpeg can decode, nor a folder of images"
        )
    if args.json:
        print(_json(result.to_dict()))
    else:
        print(report.stream_text(result))
    return 0


def _stream_camera(args: argparse.Namespace) -> int:
    from ..capture import Camera
    from ..pipeline.camera import run_camera

    if args.two_process or args.drop or args.depth:
        raise ValueError("--two-process, --drop and --depth apply to file streams; a camera stream runs frame by frame")
    mode: Mode = "copy" if args.non_zero_copy else "zero-copy"
    progress = False if args.no_progress or args.json else None
    width, height = args.size
    # The camera first: a wrong device, format or size fails before the model is compiled.
    with Camera(args.camera, width, height, args.format, buffers=args.buffers, memory=args.memory, heap=args.heap) as camera:
        with _pipeline(args, mode) as pipeline:
            try:
                result = run_camera(pipeline, camera, frames=args.frames or args.limit, progress=progress)
            except KeyboardInterrupt:
                return 130
    if args.json:
        print(_json(result.to_dict()))
    else:
        print(report.stream_text(result))
    return 0


def _many(args: argparse.Namespace) -> bool:
    """Several sources, a network URL, or an option only the many-streams scheduler has."""
    from ..sources.video import is_network

    return (
        len(args.input) + len(args.camera) > 1
        or any(is_network(i) for i in args.input)
        or bool(args.realtime or args.save or args.jsonl or args.duration or args.hwaccel or args.feeders)
        or args.deliverers is not None
        or args.workers is not None
        or args.worker_nice is not None
        or args.live_frames is not None
    )


def _streams(args: argparse.Namespace) -> int:
    """`npu-zc stream -i a.mp4 -i rtsp://... --camera /dev/video0`: every source into one model at once."""
    import sys

    from ..sinks import AnnotatedVideos, JsonLines
    from ..pipeline.scheduler import LIVE_FRAMES
    from ..pipeline.streams import Streams
    from ..sources.video import is_network

    if not 0 <= args.latency_budget < math.inf:  # NaN too
        raise ValueError(f"--latency-budget must be 0 (off) or positive and finite, got {args.latency_budget:g}")
    if args.non_zero_copy or args.two_process or args.drop:
        raise ValueError("several streams run zero-copy in one process, live sources dropping on their own "
                         "(drop -c, --two-process and --drop)")
    sources: list[object] = list(args.input)
    camera_args = {"width": args.size[0], "height": args.size[1], "format": args.format, "buffers": args.buffers,
                   "memory": args.memory, "heap": args.heap}  # fmt: skip
    from ..sources import CameraSource

    sources += [CameraSource(device, limit=args.frames, **camera_args) for device in args.camera]
    options = {"timeout": args.timeout, "limit": args.limit}
    if args.hwaccel:
        options["hardware"] = args.hwaccel
    outputs: list[object] = []
    jsonl = JsonLines(args.jsonl) if args.jsonl else JsonLines("-") if args.json else None
    if jsonl is not None:
        outputs.append(jsonl)
    videos = AnnotatedVideos(args.save) if args.save else None
    if videos is not None:
        outputs.append(videos)
    live = None if args.no_progress or (args.json and not args.jsonl) or not sys.stderr.isatty() else report.LiveTable(sys.stderr)
    is_live = bool(args.realtime or args.camera or any(is_network(i) for i in args.input))
    budget = args.latency_budget if is_live and args.latency_budget > 0 else None
    pipeline = _pipeline(args, "zero-copy", budget)
    # A detector's streams are tracked by default, as on the single-stream path: one tracker per stream.
    tracker = Tracker if pipeline.kind == "yolo" and not args.no_track else None
    streams = Streams(sources, pipeline, requests=args.depth, realtime=args.realtime, source_options=options,
                      keep_frames=videos is not None, feeders=args.feeders, deliverers=args.deliverers,
                      workers=args.workers, worker_nice=args.worker_nice, tracker=tracker,
                      live_frames=args.live_frames or LIVE_FRAMES)  # fmt: skip
    try:
        result = streams.run(outputs, duration=args.duration, tick=live)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        return 130
    finally:
        for output in (jsonl, videos):
            if output is not None:
                output.close()
        if live is not None:
            live.close()
        if not streams.abandoned:  # else an output that never returned still holds the pipeline's buffers
            pipeline.close()
        streams.close()
    if args.json and not args.jsonl:
        print(_json({"report": result.to_dict()}))
    else:
        print(report.streams_text(result, saved=videos.paths if videos else None))
    return 1 if result.errors else 0


def _json(value: object) -> str:
    """``--json``'s text: strict JSON (a NaN or an infinity, which strict parsers refuse, written as null)."""
    from ..sinks.jsonl import strict_json

    return strict_json(value)
