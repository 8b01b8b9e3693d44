"""YOLO decode + NMS: npu_zc.decode_yolo against what users run, on the same outputs, one thread.

    python3 benches/bench_detect.py [--runs 200]

Peers, each skipped when not importable: Ultralytics' `non_max_suppression` (torch; needs a venv with torch and
ultralytics, e.g. `PYTHONPATH=python ../yolo-torch-venv/bin/python benches/bench_detect.py`), EdgeFirst's
`edgefirst-decoder` (detect), OpenVINO model API's `YOLOv8.postprocess` (`openvino-model-api`, detect; `pip install
.[bench]`) and numpy + `cv2.dnn.NMSBoxesBatched` (what a user writes). Segmentation includes the masks
of the boxes kept (at the model input, as Ultralytics' `process_mask(upsample=True)`), pose the keypoints.
Each row says whether the peer returned the same boxes (count, classes, boxes within 0.5 px).
Ratios: peer time / npu_zc time (> 1: npu_zc is faster).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")

import cv2
import numpy as np
from numpy.typing import ArrayLike

import npu_zc
import results
import timing

cv2.setNumThreads(1)

# A peer's result: (boxes as xyxy, class ids, masks or keypoints or None), in its own array type.
Decoded = tuple[ArrayLike, ArrayLike, object]
# A peer: (output, classes, protos or None) -> its result, or None where it does not decode that task.
Peer = Callable[[np.ndarray, int, np.ndarray | None], Decoded | None]


def synthetic(nc: int, extra: int, n: int = 8400, hot: int = 373, seed: int = 0) -> np.ndarray:
    """[1, 4+nc+extra, n]: low scores everywhere, `hot` anchors with a high class score, boxes in clusters."""
    rng = np.random.default_rng(seed)
    out = np.zeros((1, 4 + nc + extra, n), np.float32)
    centres = rng.uniform(0, 640, (15, 2))
    out[0, 0:2] = (centres[rng.integers(0, 15, n)] + rng.normal(0, 10, (n, 2))).T
    out[0, 2:4] = rng.uniform(8, 160, (2, n))
    out[0, 4:4 + nc] = rng.uniform(0, 0.05, (nc, n))
    idx = rng.choice(n, hot, replace=False)
    out[0, 4 + rng.integers(0, nc, hot), idx] = rng.uniform(0.26, 1.0, hot)
    out[0, 4 + nc:] = rng.normal(0, 1, (extra, n))
    if extra == 51:
        kp = out[0, 4 + nc:].reshape(17, 3, n)
        kp[:, 0] = out[0, 0] + rng.normal(0, 20, (17, n))
        kp[:, 1] = out[0, 1] + rng.normal(0, 20, (17, n))
        kp[:, 2] = rng.uniform(0, 1, (17, n))
    return out


def numpy_cv2(
    out: np.ndarray, nc: int, protos: np.ndarray | None = None, conf: float = 0.25, iou: float = 0.7, max_det: int = 300
) -> Decoded:
    """What a user writes: numpy threshold and best class, OpenCV's batched NMS (masks: numpy + cv2.resize)."""
    p = out[0]
    scores = p[4:4 + nc]
    best = scores.max(0)
    idx = np.nonzero(best > conf)[0]
    idx = idx[np.argsort(-best[idx], kind="stable")][:30000]
    cls = scores[:, idx].argmax(0)
    x, y, w, h = p[0, idx], p[1, idx], p[2, idx] / 2, p[3, idx] / 2
    xyxy = np.stack([x - w, y - h, x + w, y + h], 1)
    rects = np.stack([xyxy[:, 0], xyxy[:, 1], 2 * w, 2 * h], 1).tolist()
    keep = np.asarray(cv2.dnn.NMSBoxesBatched(rects, best[idx].tolist(), cls.tolist(), 0.0, iou), np.int64).reshape(-1)
    keep = keep[:max_det]
    boxes, extra = xyxy[keep], p[4 + nc:, idx[keep]].T
    if protos is not None:
        c, mh, mw = protos.shape[1:]
        m = (extra @ protos[0].reshape(c, -1)).reshape(-1, mh, mw)
        masks = np.zeros((len(m), 640, 640), bool)
        cols, rows = np.arange(640), np.arange(640)[:, None]
        for k, (mk, b) in enumerate(zip(m, boxes)):
            up = cv2.resize(mk, (640, 640), interpolation=cv2.INTER_LINEAR) > 0
            masks[k] = up & (cols >= b[0]) & (cols < b[2]) & (rows >= b[1]) & (rows < b[3])
        return boxes, cls[keep], masks
    return boxes, cls[keep], extra


def ultralytics_peer() -> Peer | None:
    try:
        import torch
        import torchvision  # noqa: F401  (Ultralytics then uses torchvision's NMS, as predict does)
        from ultralytics.utils import ops
        from ultralytics.utils.nms import non_max_suppression
    except ImportError:
        return None
    torch.set_num_threads(1)

    def run(out: np.ndarray, nc: int, protos: np.ndarray | None = None) -> Decoded:
        p = non_max_suppression(torch.from_numpy(out), 0.25, 0.7, nc=nc)[0]
        if protos is not None:
            masks = ops.process_mask(torch.from_numpy(protos[0]), p[:, 6:], p[:, :4], (640, 640), upsample=True)
            return p[:, :4].numpy(), p[:, 5].numpy(), masks
        return p[:, :4].numpy(), p[:, 5].numpy(), p[:, 6:]

    return run


def edgefirst_peer() -> Peer | None:
    """EdgeFirst's `edgefirst-decoder` on a HAL tensor holding the output (copied in before timing, as the model
    would have written it there), Ultralytics' caps: 30000 candidates into NMS, 300 out. Detect only here."""
    try:
        from edgefirst.decoder import Decoder, Output, Tensor
    except ImportError:
        return None
    made: dict[int, tuple[Decoder, Tensor, np.ndarray]] = {}

    def run(out: np.ndarray, nc: int, protos: np.ndarray | None = None) -> Decoded | None:
        if protos is not None or out.shape[1] != 4 + nc:
            return None  # seg / pose: not wired here
        key = id(out)
        if key not in made:
            dec = Decoder.new_from_outputs(outputs=[Output.detection(shape=list(out.shape))],
                                           score_threshold=0.25, iou_threshold=0.7)
            dec.pre_nms_top_k, dec.max_det = 30000, 300
            t = Tensor(list(out.shape), dtype="float32")
            t.from_numpy(out)
            made[key] = (dec, t, out)
        dec, t, _ = made[key]
        boxes, scores, classes, _masks = dec.decode([t], max_boxes=300)
        return boxes, classes, None

    return run


def model_api_peer() -> Peer | None:
    """OpenVINO model API's `YOLOv8.postprocess` (openvino-model-api) on the raw output: its wrapper built on a
    stand-in IR with the detector's input and output shapes (the wrapper only checks them). Detect only; it rounds
    boxes to whole pixels, clips them to the image and has no max_det cap."""
    try:
        import openvino as ov
        from openvino import opset13 as ops
        from model_api.adapters import OpenvinoAdapter, create_core
        from model_api.models import YOLOv8
    except ImportError:
        return None
    made: dict[tuple[int, ...], tuple[YOLOv8, str]] = {}

    def run(out: np.ndarray, nc: int, protos: np.ndarray | None = None) -> Decoded | None:
        if protos is not None or out.shape[1] != 4 + nc:
            return None
        if out.shape not in made:
            image = ops.parameter([1, 3, 640, 640], ov.Type.f32, name="images")
            zero = ops.reshape(ops.reduce_sum(image, [1, 2, 3], keep_dims=False), [1, 1, 1], False)
            model = ov.Model([ops.add(ops.constant(np.zeros(out.shape, np.float32)), zero)], [image], "yolo")
            folder = str(results.scratch("bench_detect-"))
            ov.save_model(model, folder + "/yolo.xml")
            wrapper = YOLOv8(OpenvinoAdapter(create_core(), folder + "/yolo.xml", device="CPU"),
                             {"labels": [str(i) for i in range(nc)]}, preload=False)
            made[out.shape] = (wrapper, next(iter(wrapper.outputs)))
        wrapper, name = made[out.shape]
        r = wrapper.postprocess({name: out}, {"original_shape": (640, 640, 3)})
        return r.bboxes, r.labels, None

    return run


def same_boxes(ours: npu_zc.Detections, theirs: Decoded) -> str:
    boxes, classes = np.asarray(theirs[0], np.float32), np.asarray(theirs[1]).astype(np.int32)
    if len(boxes) != len(ours):
        return f"no ({len(boxes)} vs {len(ours)})"
    if not (np.array_equal(classes, ours.class_ids) and np.allclose(boxes, ours.xyxy, atol=0.5)):
        return "no (boxes differ)"
    return "yes"


def same_rounded(ours: npu_zc.Detections, theirs: Decoded) -> str:
    """The model API's boxes: whole pixels, clipped to the 640x640 image, no max_det: its first len(ours)."""
    boxes, classes = np.asarray(theirs[0], np.float32), np.asarray(theirs[1]).astype(np.int32)
    n = min(len(boxes), len(ours))
    mine = np.clip(np.round(ours.xyxy[:n]), 0, 640)
    alike = np.array_equal(classes[:n], ours.class_ids[:n]) and np.allclose(boxes[:n], mine, atol=1.0)
    if len(boxes) != len(ours):
        return f"no ({len(boxes)} vs {len(ours)}; the first {n} {'alike' if alike else 'differ'})"
    return "yes (rounded)" if alike else "no (boxes differ)"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--stat", choices=["min", "median"], default="median")
    ap.add_argument("--json", help="where to write the results (default benches/results/)")
    args = ap.parse_args()
    timing.use_stat(args.stat)
    rng = np.random.default_rng(1)
    det = synthetic(80, 0)
    seg, protos = synthetic(80, 32, hot=120), rng.normal(0, 1, (1, 32, 160, 160)).astype(np.float32)
    pose = synthetic(1, 51, hot=200)
    cases = [
        ("detect [1,84,8400] f32", [det], 80, None),
        ("detect [1,84,8400] f16", [det.astype(np.float16)], 80, None),
        ("segment [1,116,8400] + protos [1,32,160,160], masks", [seg, protos], 80, protos),
        ("pose [1,56,8400], keypoints", [pose], 1, None),
    ]
    peers: dict[str, Peer] = {"numpy + cv2.dnn.NMSBoxesBatched": numpy_cv2}
    if (u := ultralytics_peer()) is not None:
        peers = {"ultralytics non_max_suppression": u, **peers}
    if (e := edgefirst_peer()) is not None:
        peers["edgefirst-decoder"] = e
    if (a := model_api_peer()) is not None:
        peers["openvino model API YOLOv8"] = a
    rows = []
    for name, outputs, nc, prot in cases:
        layout = npu_zc.YoloLayout.from_outputs([o.shape for o in outputs], nc=nc,
                                                task="pose" if "pose" in name else None)
        ours = npu_zc.decode_yolo(outputs, layout)
        f32 = outputs[0].astype(np.float32)
        runs = args.runs if prot is None else max(4, args.runs // 20)  # masks: ~100x the time per call
        t_ours = timing.time_ms(lambda: npu_zc.decode_yolo(outputs, layout), runs)
        fastest = None  # (peer, ms, ratio) of the fastest peer with the same boxes, from its alternating blocks
        for peer, fn in peers.items():
            args_ = (f32, nc, prot)
            if fn(*args_) is None:
                continue  # this peer does not decode this task
            t_peer, t_ours_paired = timing.paired_ms(lambda: fn(*args_), lambda: npu_zc.decode_yolo(outputs, layout),
                                                     runs, 4)
            theirs = fn(*args_)
            assert theirs is not None  # it decoded this task above
            same = (same_rounded if fn is peers.get("openvino model API YOLOv8") else same_boxes)(ours, theirs)
            rows.append([name, peer, round(t_peer, 4), round(t_ours_paired, 4), round(t_peer / t_ours_paired, 2), same])
            if same == "yes" and (fastest is None or t_peer < fastest[1]):
                fastest = (peer, t_peer, t_peer / t_ours_paired)
        rows.append([name, "npu_zc.decode_yolo", round(t_ours, 4), round(t_ours, 4), 1.0, f"{len(ours)} kept"])
        print(f"{name}: npu_zc {t_ours:.3f} ms, {len(ours)} kept" + (
            f"; fastest peer with the same boxes: {fastest[0]} {fastest[1]:.3f} ms, {fastest[2]:.1f}x (paired)"
            if fastest else ""))
    for r in rows:
        print("  ", r)
    path = results.save("bench_detect", [{
        "title": "YOLO decode + NMS, one thread, same outputs (ms, " + args.stat + f" of {args.runs})",
        "note": "peer ms and npu_zc ms timed in alternating blocks; ratio = peer / npu_zc; same = same boxes, classes, order",
        "columns": ["case", "method", "peer ms", "npu_zc ms", "ratio", "same"],
        "rows": rows,
    }], title="YOLO decode", path=args.json)
    print("saved", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
