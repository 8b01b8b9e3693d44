"""bf16 end to end on the CPU plugin: what the runtime graph does between the input and the first convolution,
and whether bf16 inference picks the f32 reference's class.

    python3 benches/check_bf16.py [--device CPU] [--json FILE]

1. For each zero-copy input layout (RGBx_BF16, RGBx_FP16, RGBx u8), compile EfficientNet-Lite0 with the device's
   default inference precision (bf16 where the CPU has AVX-512 BF16 or AMX) and walk the compiled model's
   runtime graph (``compiled_model.get_runtime_model()``) from the input to the first Convolution, printing each
   node's layer type, runtime precision, output precision and kernel (``primitiveType``: ``*_amx_bf16`` is AMX).
   "no f32 on the way" is true when every node on that path runs and outputs bf16 (or the input's own type).
   The same walk under ``inference_precision="f32"`` is printed for contrast.
2. Top-1 agreement: every photo scikit-image ships (colour and grey), each in five views (whole frame, centre
   crop, two side crops, mirrored), through the RGBx_BF16 pipeline in bf16 and through the f32 reference (the
   same pipeline with ``inference_precision="f32"`` and an RGBx u8 input). Prints the share of views whose top-1
   class agrees, the top-5 overlap and the largest logit difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, Literal, cast

import numpy as np

from npu_zc.pipeline import ClassScore, Pipeline
from npu_zc.runtime import CompileOptions, compile_model, openvino_version

FORMATS = ("RGBx_BF16", "RGBx_FP16", "RGBx")
# scikit-image's photos (all ship inside the wheel; grey ones are given three equal channels).
PHOTOS = (
    "astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry", "retina", "colorwheel",
    "logo", "camera", "moon", "page", "text", "coins", "grass", "gravel", "brick", "clock", "cell",
)  # fmt: skip


def rt(node: Any, key: str) -> str:
    info = node.get_rt_info()
    return str(info[key].astype(str)) if key in info else "-"


def path_to_first_convolution(compiled: Any) -> list[dict[str, str]]:
    """The runtime graph's nodes from the (first) input along its data edges to the first Convolution."""
    model = compiled.get_runtime_model()  # held: its nodes' edges go when it does
    node = model.get_parameters()[0]
    path: list[dict[str, str]] = []
    for _ in range(64):
        path.append({
            "name": node.get_friendly_name(),
            "layer": rt(node, "layerType"),
            "runtime_precision": rt(node, "runtimePrecision"),
            "output_precision": rt(node, "outputPrecisions"),
            "kernel": rt(node, "primitiveType"),
            "original": rt(node, "originalLayersNames"),
        })  # fmt: skip
        if path[-1]["layer"] == "Convolution":
            break
        consumers = [target.get_node() for output in node.outputs() for target in output.get_target_inputs()]
        if not consumers:
            break
        node = consumers[0]
    return path


def graph_check(device: str) -> list[dict[str, Any]]:
    out = []
    cases: list[tuple[str, Literal["f32"] | None]] = [(f, None) for f in FORMATS] + [("RGBx_BF16", "f32")]
    for fmt, precision in cases:
        session = compile_model("efficientnet-lite0", device, hw_format=fmt, options=CompileOptions(inference_precision=precision))
        used = session.property("INFERENCE_PRECISION_HINT")
        path = path_to_first_convolution(session.compiled)
        input_type = path[0]["output_precision"]
        reaches = bool(path) and path[-1]["layer"] == "Convolution"
        precisions = {p["runtime_precision"] for p in path[1:]} | {p["output_precision"] for p in path[1:]}
        no_f32 = reaches and precisions <= {"bf16", input_type} and "f32" not in precisions
        out.append({"format": fmt, "precision": used, "path": path, "reaches_convolution": reaches, "no_f32_on_the_way": no_f32})
        print(f"\n{fmt} input, inference precision {used}: "
              f"{'no f32 between the input and the first convolution' if no_f32 else 'f32 on the way (or not bf16)'}")  # fmt: skip
        print(f"  {'layer':<16}{'runs in':<9}{'outputs':<9}{'kernel':<28}node [original layers]")
        for p in path:
            print(f"  {p['layer']:<16}{p['runtime_precision']:<9}{p['output_precision']:<9}{p['kernel']:<28}"
                  f"{p['name'][:40]} [{p['original'][:60]}]")  # fmt: skip
        del session
    return out


def views(image: np.ndarray) -> list[np.ndarray]:
    """Five views of one photo: whole, centre, left, right, mirrored."""
    h, w = image.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    return [
        image,
        image[top : top + side, left : left + side],
        image[:, : max(1, w * 2 // 3)],
        image[:, w // 3 :],
        image[:, ::-1],
    ]


def photos(names: Sequence[str] = PHOTOS) -> list[tuple[str, np.ndarray]]:
    import cv2
    import skimage.data

    out = []
    for name in names:
        try:
            data = np.asarray(getattr(skimage.data, name)())
        except Exception as exc:  # a photo missing from this scikit-image version: say so, go on
            print(f"  (no photo {name}: {type(exc).__name__})", file=sys.stderr)
            continue
        if data.dtype != np.uint8:
            data = (255 * (data.astype(np.float64) - data.min()) / max(1e-9, float(data.max() - data.min()))).astype(np.uint8)
        if data.ndim == 2:
            data = cv2.cvtColor(data, cv2.COLOR_GRAY2BGR)
        else:
            data = cv2.cvtColor(data[..., :3], cv2.COLOR_RGB2BGR)
        for i, view in enumerate(views(data)):
            out.append((f"{name}#{i}", np.ascontiguousarray(view)))
    return out


def classify(pipeline: Pipeline, image: np.ndarray) -> tuple[list[ClassScore], np.ndarray]:
    """A classifier pipeline's top classes for ``image`` and a copy of its logits."""
    # A classifier's pipeline: process() gives ClassScores (its type covers every kind of model).
    top = cast(list[ClassScore], pipeline.process(image))
    return top, np.array(pipeline.outputs[0], np.float32, copy=True)


def agreement(device: str) -> dict[str, Any]:
    images = photos()
    with Pipeline("efficientnet-lite0", device, hw_format="RGBx_BF16", top=5) as bf16, Pipeline(
        "efficientnet-lite0", device, hw_format="RGBx", top=5, options=CompileOptions(inference_precision="f32")
    ) as f32:
        precision = bf16.session.property("INFERENCE_PRECISION_HINT")
        same_top1, overlap, worst = 0, 0.0, 0.0
        confident, confident_same = 0, 0  # views where f32 is at least 30% sure of its class
        disagreements = []
        for name, image in images:
            a, logits_a = classify(bf16, image)
            b, logits_b = classify(f32, image)
            same_top1 += a[0].index == b[0].index
            if b[0].score >= 0.3:
                confident += 1
                confident_same += a[0].index == b[0].index
            overlap += len({p.index for p in a} & {p.index for p in b}) / 5
            worst = max(worst, float(np.abs(logits_a - logits_b).max()))
            if a[0].index != b[0].index:
                disagreements.append(f"{name}: {precision} {a[0].label} ({a[0].score:.2f}) vs f32 {b[0].label} ({b[0].score:.2f})")
    n = len(images)
    result = {
        "views": n, "precision": precision, "top1_agreement": same_top1 / n, "top5_overlap": overlap / n,
        "max_logit_difference": worst, "disagreements": disagreements,
        "confident_views": confident, "confident_top1_agreement": confident_same / confident if confident else None,
    }  # fmt: skip
    print(f"\ntop-1 agreement, {precision} (RGBx_BF16 input) vs f32 (RGBx u8 input), {n} views of "
          f"{len({k.split('#')[0] for k, _ in images})} scikit-image photos: {same_top1}/{n} = {same_top1 / n:.1%}; "
          f"top-5 overlap {overlap / n:.1%}; largest logit difference {worst:.3f}")  # fmt: skip
    print(f"  where f32's top-1 probability is at least 0.3: {confident_same}/{confident} agree")
    for line in disagreements:
        print(f"  differs: {line}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--json", metavar="FILE", help="also write the results here")
    args = parser.parse_args()
    print(f"OpenVINO {openvino_version()}, device {args.device}")
    result = {"graph": graph_check(args.device), "agreement": agreement(args.device)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
