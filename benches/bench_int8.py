"""A quantised model's input, per frame: npu_zc's RGBx_I8 (the model's scale and zero point) against the alternatives.

The model is the built-in EfficientNet-Lite0 with a FakeQuantize of 256 levels
on its input (what NNCF puts there; the range covers the normalised pixels).
One 1920x1080 BGR frame per run, one thread for the preprocess, in the same run:

* ``npu_zc RGBx_I8``: the pipeline's way. One ``Converter`` call resizes,
  normalises and quantises into the bound input buffer; the model (its input
  made i8, the FakeQuantize become its dequantisation) reads it in place.
* ``npu_zc RGBx (u8)``: the same model kept float (``hw_format="RGBx"``): u8
  pixels in, normalised and quantised inside the model.
* ``numpy + OpenVINO``: what a user would write: ``cv2.resize``, ``cvtColor``,
  numpy's normalisation and quantisation into planar i8, and the i8 model
  called with that array (OpenVINO copies it in).
* ``memcpy``: a copy of the RGBx_I8 input's bytes (the floor of any preprocess).

    python3 benches/bench_int8.py [--runs 50] [--rounds 5] [--stat min|median]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # int8_models: the FakeQuantize the tests put on a model's input
import results  # noqa: E402
import timing  # noqa: E402
from int8_models import with_input_fake_quantize  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stat", choices=("min", "median"), default="median")
    parser.add_argument("--json", help="where to write the results (default: benches/results/)")
    args = parser.parse_args()
    timing.use_stat(args.stat)

    import cv2
    import openvino as ov

    import npu_zc
    from npu_zc import layout
    from npu_zc.runtime import CompileOptions, Session, compile_model, model_normalisation, read_model, to_int8_input

    norm = model_normalisation(read_model("efficientnet-lite0"))
    assert norm.mean is not None and norm.scale is not None
    mean, scale = np.asarray(norm.mean, np.float32), np.asarray(norm.scale, np.float32)  # float32 arrays
    model, step, zero_point = with_input_fake_quantize(read_model("efficientnet-lite0"), mean, scale)
    options = CompileOptions(inference_precision="f32", num_threads=2)
    int8 = compile_model(model, "CPU", options=options)
    floats = compile_model(model, "CPU", hw_format="RGBx", options=options)
    assert int8.format == "RGBx_I8" and int8.quantisation is not None and int8.quantisation.zero_point == zero_point
    # The user's model: the same i8 model without our input layout (planar i8, the model's own).
    plain, _ = to_int8_input(model.clone())
    compiled = ov.Core().compile_model(plain, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 2})

    frame = np.ascontiguousarray(cv2.resize(npu_zc.pipeline.sample_photo("coffee"), (1920, 1080)))
    size = int8.image.height

    # quant: Quantisation.converter_args(), typed dict[str, Any] there.
    def zero_copy(
        session: Session, fmt: str, **quant: Any
    ) -> tuple[Callable[[], object], Callable[[], None], np.ndarray]:
        request = session.create_request()
        dst = request.bind_input(npu_zc.alloc(session.inputs[0].nbytes))
        out = request.bind_output(npu_zc.alloc(session.outputs[0].nbytes))
        # Normalised by the preprocess for int8; inside the model for u8.
        norm_args = dict(mean=tuple(mean), scale=tuple(scale), **quant) if quant else {}
        convert = layout.Converter("BGR", fmt, size, size, src_size=(1920, 1080), threads=1, **norm_args)
        return (lambda: convert(frame, dst)), request.infer, out

    pre_i8, infer_i8, out_i8 = zero_copy(int8, "RGBx_I8", **int8.quantisation.converter_args())
    pre_u8, infer_u8, out_u8 = zero_copy(floats, "RGBx")
    user_input: list[np.ndarray] = []

    def user_pre() -> None:
        rgb = cv2.cvtColor(cv2.resize(frame, (size, size), interpolation=cv2.INTER_LINEAR), cv2.COLOR_BGR2RGB)
        x = (rgb.astype(np.float32) - mean) / scale
        q = np.clip(np.rint(x / np.float32(step)) + zero_point, -128, 127).astype(np.int8)
        user_input[:] = [np.ascontiguousarray(q.transpose(2, 0, 1)[None])]

    user_out: list[np.ndarray] = []

    def user_infer() -> None:
        user_out[:] = [compiled([user_input[0]])[0]]

    copy = timing.memcpy_of(int8.inputs[0].nbytes)
    runs, rounds = args.runs, args.rounds
    pre = dict(zip(("i8", "u8"), timing.paired_ms(pre_i8, pre_u8, runs, rounds)))
    pre["user"], pre["memcpy"] = timing.paired_ms(user_pre, copy, runs, rounds)
    inf = dict(zip(("i8", "u8"), timing.paired_ms(infer_i8, infer_u8, runs, rounds)))
    user_pre()
    inf["user"] = timing.time_ms(user_infer, runs)
    # The three give the same class (the same quantised pixels, up to the resize's rounding).
    top = {name: int(np.argmax(out)) for name, out in (("i8", out_i8), ("u8", out_u8), ("user", user_out[0]))}

    names = {"i8": "npu_zc RGBx_I8 (zero copy)", "u8": "npu_zc RGBx u8, FakeQuantize inside", "user": "numpy + OpenVINO (planar i8, copied in)"}
    rows = []
    print(f"{'variant':<42}{'preprocess':>12}{'infer':>10}{'total':>10}{'x RGBx_I8':>11}   (ms per frame, 1080p -> {size}x{size})")
    total_i8 = pre["i8"] + inf["i8"]
    for key, name in names.items():
        total = pre[key] + inf[key]
        rows.append([name, round(pre[key], 3), round(inf[key], 3), round(total, 3), round(total / total_i8, 2), top[key]])
        print(f"{name:<42}{pre[key]:>12.3f}{inf[key]:>10.3f}{total:>10.3f}{total / total_i8:>11.2f}")
    rows.append(["memcpy of the input's bytes", round(pre["memcpy"], 3), None, None, None, None])
    print(f"{'memcpy of the input bytes':<42}{pre['memcpy']:>12.3f}")
    print(f"preprocess: RGBx_I8 {pre['i8'] / pre['user']:.2f}x the user's time, {pre['i8'] / pre['memcpy']:.1f}x a memcpy")
    saved = results.save("bench_int8", [{
        "title": f"A FakeQuantize'd EfficientNet-Lite0, 1080p BGR frame -> {size}x{size}, ms per frame ({args.stat} of {runs} runs)",
        "note": "preprocess on one thread, inference on 2 CPU threads in f32; top: the class each variant found",
        "columns": ["variant", "preprocess", "infer", "total", "total / RGBx_I8", "top"],
        "rows": rows,
    }], title="int8 input: the model's scale and zero point applied by the preprocess", path=args.json)  # fmt: skip
    print(f"saved {saved}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
