"""Argument parsing and error reporting for `npu-zc`.

Errors a person can act on print one line on stderr and exit non-zero; the
traceback only with --debug.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..errors import Error
from .arguments import (channels, class_ids, count, fraction, height_by_width, nice_levels, positive, seconds,
                        setting, width_by_height)
from .install import missing_module_message

EXAMPLES = """\
examples:
  npu-zc demo                                   EfficientNet-Lite0 on a real photo, zero-copy
  npu-zc run -i cat.jpg -m efficientnet-lite0 -n 100
  npu-zc run -i cat.jpg -m model.xml -n 100 -c   the same in copy mode
  npu-zc compare -i cat.jpg -n 100 --plot stages.png
  npu-zc stream -i video.mp4 --two-process
  npu-zc stream --camera /dev/video0 --frames 100   a camera, zero copy from the driver to the result
  npu-zc stream -i a.mp4 -i rtsp://127.0.0.1:8554/cam1 --camera /dev/video0 --save out/   many streams, one model
  npu-zc run -i cat.jpg -n 2000 --hint throughput   every core busy: many frames in flight
  npu-zc serve --config site.yaml                a service: lines, zones, MQTT, metrics, a live view
  npu-zc info
"""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="npu-zc",
        description="Zero-copy NPU inference pipelines: run a model on a photo or a stream in zero-copy and copy modes, "
        "compare them, and inspect the machine.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")

    model = _Parser(add_help=False)
    group = model.add_argument_group("model")
    group.add_argument("-m", "--model", default="efficientnet-lite0",
                       help="IR (.xml), ONNX or TFLite file, or the built-in efficientnet-lite0 (default)")
    group.add_argument("-d", "--device", default="AUTO", help="NPU, CPU, GPU or AUTO (the NPU when present, else the CPU; default)")
    group.add_argument("--labels", metavar="FILE", help="class names, one per line (or JSON); default: ImageNet's for 1000 classes, else indices")
    group.add_argument("--top", metavar="K", type=positive, default=5, help="how many classes or detections to show (default 5)")
    group.add_argument("--mean", type=channels, metavar="M", help="per-channel mean, e.g. '127.5' or '123.7,116.3,103.5' (default: the model's own)")
    group.add_argument("--scale", type=channels, metavar="S", help="per-channel scale: the model sees (x - mean) / scale (default: the model's own)")
    group.add_argument("--input-size", type=height_by_width, metavar="HxW", help="for a model whose input size is dynamic")
    group.add_argument("--hw-format", choices=("RGBx", "BGRx", "RGBx_FP16", "RGBx_BF16", "RGBx_I8", "RGB_I8"),
                       help="zero-copy input layout (default: chosen from the model's input type)")
    group.add_argument("--interpolation", choices=("linear", "area", "nearest"), default="linear",
                       help="resize method, as OpenCV's, fused into the conversion (default linear, as cv2.resize)")
    group.add_argument("--heap", default="auto", help="where buffers come from: auto, system, cma, udmabuf, memfd... (see npu-zc info)")
    group.add_argument("--hint", choices=("latency", "throughput"), default=None,
                       help="latency (default; throughput for several streams): one frame at a time; throughput: twice "
                       "the device's optimal number of frames in flight, preprocessing ahead (zero-copy)")
    group.add_argument("--threads", type=positive, metavar="N", help="INFERENCE_NUM_THREADS: threads the CPU plugin infers with")
    group.add_argument("--npu-turbo", action="store_true", help="NPU_TURBO: the NPU at its highest clocks (NPU only)")
    group.add_argument("--npu-strides-for", metavar="NAMES",
                       help="NPU_ENABLE_STRIDES_FOR: inputs/outputs (comma-separated) read with their row padding as it is (NPU only)")
    group.add_argument("--npu-sequential", action="store_true",
                       help="RUN_INFERENCES_SEQUENTIALLY: the NPU runs requests one after another, async only (NPU only)")
    group.add_argument("--option", action="append", type=setting, metavar="KEY=VALUE", default=[],
                       help="any other OpenVINO property, e.g. ENABLE_CPU_PINNING=NO (repeatable)")

    detector = model.add_argument_group("detectors (YOLO: Ultralytics' predict defaults)")
    detector.add_argument("--conf", type=fraction, default=0.25, help="keep detections scoring above this (default 0.25)")
    detector.add_argument("--iou", type=fraction, default=0.7, help="NMS IoU threshold (default 0.7)")
    detector.add_argument("--classes", type=class_ids, metavar="IDS", help="only these class ids, e.g. '0,2'")
    detector.add_argument("--agnostic", action="store_true", help="NMS across classes")
    detector.add_argument("--max-det", type=positive, default=300, metavar="N", help="at most N detections (default 300)")
    detector.add_argument("--task", choices=("detect", "segment", "pose", "obb"),
                          help="what the model does, when its metadata does not say (default: from metadata.yaml or the output shapes)")
    detector.add_argument("--names", metavar="FILE", help="class names: a YAML (names:), JSON or text file, one per line")

    images = _Parser(add_help=False)
    images.add_argument("--max-pixels", type=positive, metavar="N",
                        help="refuse images of more than N pixels before decoding them (default 100000000)")

    info = sub.add_parser("info", parents=[debug], help="OpenVINO devices, DMA-BUF heaps, and what heap='auto' would take")
    info.add_argument("--json", action="store_true", help="print one JSON object")

    run = sub.add_parser(
        "run", parents=[model, images, debug], help="time preprocess, infer and postprocess on one image (the vart_zerocopy experience)",
        description="A 1-iteration warm-up, then RUNS timed frames of preprocess -> infer -> postprocess on one decoded image; "
        "per-stage times, infer and pipeline FPS, and the top labels.",
    )
    run.add_argument("-i", "--image", required=True, help="the image (JPEG, PNG, BMP, TIFF, WebP...)")
    run.add_argument("-c", "--non-zero-copy", action="store_true",
                     help="copy mode: planar float in ordinary memory, the runtime copies in and out")
    run.add_argument("-n", "--runs", type=positive, default=1, help="timed iterations after the warm-up (default 1)")
    run.add_argument("--requests", type=positive, metavar="N",
                     help="frames in flight (zero-copy; default 1, or twice the device's optimal number with --hint "
                     "throughput): with 2, the next frame is preprocessed while one infers")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument("--count-copies", action="store_true",
                     help="run under the memcpy counter (built on demand with the C compiler) and print the bytes "
                     "copied per frame between the preprocess output and the postprocess input")
    run.add_argument("--save", metavar="OUT.jpg", help="draw the detections onto the image and save it (detectors)")

    compare = sub.add_parser(
        "compare", parents=[model, images, debug], help="zero-copy and copy mode back to back on one image, the ratio per stage",
    )
    compare.add_argument("-i", "--image", required=True, help="the image")
    compare.add_argument("-n", "--runs", type=positive, default=100, help="timed iterations per mode (default 100)")
    compare.add_argument("--plot", metavar="FILE.png", help="draw the per-stage comparison into this image file")
    compare.add_argument("--json", action="store_true", help="print one JSON object")

    demo = sub.add_parser("demo", parents=[debug], help="EfficientNet-Lite0 on a real photo, zero-copy: the label and the stage table")
    demo.add_argument("-n", "--runs", type=positive, default=100, help="timed iterations (default 100)")
    demo.add_argument("-d", "--device", default="AUTO", help="NPU, CPU, GPU or AUTO (default)")

    stream = sub.add_parser(
        "stream", parents=[model, images, debug], help="every frame of a video or a folder of images, in order, with a progress bar",
    )
    stream.add_argument("-i", "--input", action="append", default=[], metavar="SOURCE",
                        help="a video file, a network URL (rtsp://...), or a folder of images; repeat for several streams "
                        "into one model (decoded by PyAV, planes read in place)")
    stream.add_argument("--camera", action="append", default=[], metavar="DEVICE",
                        help="a V4L2 camera, e.g. /dev/video0 (npu-zc info lists them): "
                        "zero copy from the driver's buffer to the result; repeatable")
    many = stream.add_argument_group("several streams (more than one source, a URL, or any of these)")
    many.add_argument("--realtime", action="store_true",
                      help="pace files at their frame rate, as live sources (newest frames win)")
    many.add_argument("--save", metavar="DIR", help="write an annotated video per stream into DIR (PyAV, H.264)")
    many.add_argument("--jsonl", metavar="FILE", help="one JSON line per result into FILE ('-': stdout)")
    many.add_argument("--duration", type=seconds(unlimited=True), metavar="S", help="stop after S seconds")
    many.add_argument("--timeout", type=seconds(unlimited=True), default=5.0, metavar="S",
                      help="seconds a network stream may stay silent (default 5; inf: no limit)")
    many.add_argument("--hwaccel", choices=("vaapi", "qsv", "drm"), help="decode on a GPU (DRM PRIME frames imported as DmaBufs)")
    many.add_argument("--feeders", type=positive, metavar="N",
                      help="threads converting frames into the model's inputs side by side (default: one per two cores)")
    many.add_argument("--deliverers", type=count, metavar="N",
                      help="threads reading results and writing the outputs side by side, each stream's in order "
                      "(default: one per four cores, at least two; with decoding workers, two on the CPU, none on "
                      "an NPU or a GPU; 0, with --workers: the thread receiving the workers' frames delivers)")
    many.add_argument("--workers", type=count, metavar="N",
                      help="processes decoding the video files and network streams (each frame converted there into "
                      "the model's input, shared, no copy; 0: decode in this process; default, from two streams up: "
                      "on an NPU or a GPU one per core on any machine, on the CPU one per two cores from eight "
                      "cores up, else 0)")
    many.add_argument("--worker-nice", type=nice_levels, metavar="N",
                      help="the decoding workers run N nice levels below this process, 0 to 19, and from 1 as batch "
                      "work (SCHED_BATCH) (default: 10 where the model is on an NPU or a GPU, 0 on the CPU)")
    many.add_argument("--live-frames", type=positive, metavar="N",
                      help="the newest frames a live stream's lane keeps for the model (default 2: a frame not taken "
                      "before the next comes waits, the stream up to a frame time behind; 1: dropped, the least "
                      "latency)")
    many.add_argument("--latency-budget", type=float, default=100.0, metavar="MS",
                      help="with a live source (camera, URL, --realtime): frame to result; the CPU plugin's streams "
                      "are fitted to it, fewer with more threads each (default 100; 0: the throughput hint's own)")
    cam = stream.add_argument_group("camera")
    cam.add_argument("--frames", type=positive, help="with --camera: stop after this many frames (default: until Ctrl-C)")
    cam.add_argument("--size", type=width_by_height, default=(640, 480), metavar="WxH", help="camera capture size (default 640x480)")
    cam.add_argument("--format", default="YUYV", help="camera pixel format: YUYV (default), UYVY, I420, NV12, P010 (10-bit)...")
    cam.add_argument("--memory", choices=("auto", "dmabuf", "mmap"), default="auto",
                     help="dmabuf: the driver writes our buffers (--heap); mmap: its own, exported; auto (default): dmabuf where a heap exists")
    cam.add_argument("--buffers", type=positive, default=4, help="camera buffers (default 4)")
    stream.add_argument("-c", "--non-zero-copy", action="store_true", help="copy mode (frames one after the other)")
    stream.add_argument("--limit", type=positive, help="stop after this many frames")
    stream.add_argument("--depth", type=positive,
                        help="frames in flight (default: the device's optimal number, at least 2; twice it with --hint throughput)")
    stream.add_argument("--drop", action="store_true", help="skip a frame when every buffer is in flight, as for a live source")
    stream.add_argument("--two-process", action="store_true",
                        help="decode and preprocess in a producer process that hands its buffers over a Unix socket")
    stream.add_argument("--no-progress", action="store_true", help="no progress bar")
    stream.add_argument("--json", action="store_true", help="print one JSON object, with every frame's result "
                        "(several streams: a JSON line per result, then the report)")
    stream.add_argument("--no-track", action="store_true", help="detectors: no ByteTrack ids (tracked by default)")

    serve = sub.add_parser("serve", parents=[debug], help="run as a service: streams, lines and zones, MQTT, metrics, "
                           "an HTTP API and live view (docs/serve.md)")  # fmt: skip
    serve.add_argument("--config", required=True, metavar="FILE", help="the service's YAML file")
    serve.add_argument("--check", action="store_true", help="check the config and its sources and exit (nothing started)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # to run again under the memcpy counter
    if getattr(args, "hint", "") is None and args.command != "stream":  # stream picks by its sources
        args.hint = "latency"
    try:
        if args.command == "info":
            from . import info

            return info.run(args.json)
        if args.command == "serve":
            from ..serve.cli import run as serve

            return serve(args.config, check=args.check)
        if getattr(args, "max_pixels", None):
            from ..sources.image import set_max_pixels

            set_max_pixels(args.max_pixels)
        from . import commands

        return int(getattr(commands, args.command.replace("-", "_"))(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `npu-zc run ... | head`
        return 0
    except ModuleNotFoundError as exc:  # installed without a dependency or an extra
        if args.debug:
            raise
        print(f"npu-zc: error: {missing_module_message(exc)}", file=sys.stderr)
        return 1
    except (Error, OSError, ValueError) as exc:
        if args.debug:
            raise
        print(f"npu-zc: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: still one line, with the way to the traceback
        if args.debug:
            raise
        print(f"npu-zc: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
