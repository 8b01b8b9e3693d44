"""What the opt-in fast rounding of YUV (``rounding="fast"``) changes for a classifier: EfficientNet-Lite0 in f32 on
frames decoded exactly and with the fast rounding.

    python3 benches/check_fast_rounding.py [--device CPU] [--photos N] [--json FILE]

Every photo scikit-image ships (as benches/check_bf16.py takes them: colour and grey, each in five views), each
view encoded to I420 by OpenCV (BT.601 limited range, as a video's frames come) and decoded back to BGR twice by
``npu_zc.layout.convert``: exactly and with ``rounding="fast"``. Both go through the same pipeline, its inference
precision pinned to f32 (so the CPU's bf16 default does not blur the comparison). Prints how many channels differ
between the two decodings and by how much, the share of views whose top-1 class agrees, the top-5 overlap and how far
the logits moved (the largest difference, per view, then its largest and median). A diagnosis: nothing is recorded.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Literal

import numpy as np
from check_bf16 import PHOTOS, classify, photos

from npu_zc import layout
from npu_zc.cli.arguments import positive
from npu_zc.pipeline import Pipeline
from npu_zc.runtime import CompileOptions, openvino_version


def decoded(bgr: np.ndarray, rounding: Literal["exact", "fast"]) -> np.ndarray:
    """``bgr`` (even width and height) encoded to I420 by OpenCV and decoded back by npu_zc."""
    import cv2

    h, w = bgr.shape[:2]
    i420 = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420)
    out = np.empty((h, w, 3), np.uint8)
    layout.convert(i420, out, "I420", "BGR", rounding=rounding)
    return out


def within_bound(name: str, exact: np.ndarray, fast: np.ndarray) -> np.ndarray:
    """Each channel's distance between the two decodings; stops with a sentence past the documented bound (1 level,
    proven in rust/layout over every input: a broken build says so here)."""
    delta = np.abs(exact.astype(np.int16) - fast.astype(np.int16))
    if delta.max() > 1:
        raise SystemExit(f"{name}: the fast rounding is {delta.max()} levels from the exact one (bound: 1)")
    return delta


def agreement(device: str, limit: int | None) -> dict[str, Any]:
    images = photos(PHOTOS[:limit])
    with Pipeline("efficientnet-lite0", device, hw_format="RGBx", top=5,
                  options=CompileOptions(inference_precision="f32")) as pipeline:  # fmt: skip
        same_top1, overlap, channels, differ = 0, 0.0, 0, 0
        moved: list[float] = []  # each view's largest logit difference
        disagreements = []
        for name, image in images:
            h, w = image.shape[:2]
            view = np.ascontiguousarray(image[: h - h % 2, : w - w % 2])  # 4:2:0 wants even sides
            exact, fast = decoded(view, "exact"), decoded(view, "fast")
            delta = within_bound(name, exact, fast)
            channels += delta.size
            differ += int(np.count_nonzero(delta))
            a, logits_a = classify(pipeline, exact)
            b, logits_b = classify(pipeline, fast)
            same_top1 += a[0].index == b[0].index
            overlap += len({p.index for p in a} & {p.index for p in b}) / 5
            moved.append(float(np.abs(logits_a - logits_b).max()))
            if a[0].index != b[0].index:
                disagreements.append(f"{name}: exact {a[0].label} ({a[0].score:.2f}) vs fast {b[0].label} ({b[0].score:.2f})")
    n = len(images)
    worst, median = max(moved), float(np.median(moved))
    result = {
        "views": n, "channels": channels, "channels_differing": differ, "top1_agreement": same_top1 / n,
        "top5_overlap": overlap / n, "max_logit_difference": worst, "median_logit_difference": median, "disagreements": disagreements,
    }  # fmt: skip
    print(f"{n} views of {len({k.split('#')[0] for k, _ in images})} scikit-image photos, I420 decoded exactly and "
          f"with rounding=\"fast\": {differ / max(1, channels):.1%} of the channels differ (by 1 level)")  # fmt: skip
    print(f"EfficientNet-Lite0 in f32: top-1 the same on {same_top1}/{n} = {same_top1 / n:.1%}; top-5 overlap "
          f"{overlap / n:.1%}; logits moved by up to {worst:.3f} (median over the views {median:.3f})")  # fmt: skip
    for line in disagreements:
        print(f"  differs: {line}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--photos", type=positive, metavar="N", help="only the first N photos (default: all)")
    parser.add_argument("--json", metavar="FILE", help="also write the results here")
    args = parser.parse_args()
    print(f"OpenVINO {openvino_version()}, device {args.device}")
    result = agreement(args.device, args.photos)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
