"""Tiny quantised OpenVINO models built with the opset API, as NNCF and OpenVINO's int8 IRs shape them.

A fixed 3x3 convolution (3 -> 4 channels, seeded weights), ReLU and a global
mean: four scores that depend on every pixel, so a wrong byte, channel order or
scale changes them. The input is quantised one of two ways:

* ``"fake-quantize"``: an f32 input whose only consumer is a FakeQuantize (NNCF, POT);
* ``"dequantisation"``: an i8 input followed by Convert -> Subtract zero point -> Multiply scale;
* ``"float"``: neither (the FakeQuantize left out): the model before quantisation.

``model_info`` records ImageNet's mean and scale, so the input the FakeQuantize
sees is ``(pixel - mean) / scale``, as for a real classifier.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

MEAN = (123.675, 116.28, 103.53)
SCALE = (58.395, 57.12, 57.375)
SIZE = 16
CLASSES = 4

Kind = Literal["fake-quantize", "dequantisation", "float"]


def weights() -> np.ndarray:
    return np.random.default_rng(2026).normal(0, 0.5, (CLASSES, 3, 3, 3)).astype(np.float32)


def fake_quantize_range(scale: float, zero_point: int) -> tuple[float, float]:
    """(low, high) of the 256-level FakeQuantize that stands for int8 ``scale`` and ``zero_point``."""
    return (-128 - zero_point) * scale, (127 - zero_point) * scale


def quantised_classifier(
    kind: Kind,
    *,
    scale: float | np.ndarray = 1 / 48,
    zero_point: float | np.ndarray = -27,
    levels: int = 256,
    fq_range: tuple[Any, Any, Any, Any] | None = None,
    color: Literal["RGB", "BGR"] = "RGB",
    nhwc: bool = False,
    size: int = SIZE,
) -> Any:
    """An ``openvino.Model``: NCHW (or NHWC) 1x3x16x16 (``size``) input, [1, 4] scores.

    ``scale`` and ``zero_point`` may be arrays of 3 (per channel, shaped for the
    layout); ``fq_range`` gives the FakeQuantize's (input_low, input_high,
    output_low, output_high) outright (for broken ones).
    """
    import openvino as ov
    import openvino.opset13 as ops

    shape = [1, size, size, 3] if nhwc else [1, 3, size, size]
    channel_shape = (1, 1, 1, 3) if nhwc else (1, 3, 1, 1)

    def const(value: Any, dtype: Any = np.float32) -> Any:
        array = np.asarray(value, dtype)
        return ops.constant(array.reshape(channel_shape) if array.size == 3 else array)

    if kind == "dequantisation":
        image = ops.parameter(shape, ov.Type.i8, name="image")
        shifted = ops.subtract(ops.convert(image, ov.Type.f32), const(zero_point))
        x = ops.multiply(shifted, const(scale))
    else:
        image = ops.parameter(shape, ov.Type.f32, name="image")
        x = image
        if kind == "fake-quantize":
            if fq_range is None:
                low, high = fake_quantize_range(np.asarray(scale, np.float64), np.asarray(zero_point, np.float64))  # type: ignore[arg-type]
                fq_range = (low, high, low, high)
            x = ops.fake_quantize(x, *(const(v) for v in fq_range), levels)
    image.output(0).get_tensor().set_names({"image"})
    if nhwc:
        x = ops.transpose(x, ops.constant(np.array([0, 3, 1, 2], np.int64)))
    conv = ops.convolution(x, ops.constant(weights()), [1, 1], [1, 1], [1, 1], [1, 1])
    scores = ops.reduce_mean(ops.relu(conv), ops.constant(np.array([2, 3], np.int64)), False)
    model = ov.Model([scores], [image], f"int8-{kind}")
    model.outputs[0].get_tensor().set_names({"scores"})
    image.set_layout(ov.Layout("NHWC" if nhwc else "NCHW"))
    model.set_rt_info(" ".join(map(str, MEAN)), ["model_info", "mean_values"])
    model.set_rt_info(" ".join(map(str, SCALE)), ["model_info", "scale_values"])
    model.set_rt_info("True" if color == "RGB" else "False", ["model_info", "reverse_input_channels"])
    model.set_rt_info("Classification", ["model_info", "model_type"])
    return model


def normalised(bgr: np.ndarray, color: Literal["RGB", "BGR"] = "RGB") -> np.ndarray:
    """``(pixel - mean) / scale`` in f32 (H, W, 3) in the model's channel order, as the float model reads it."""
    ordered = bgr[..., ::-1] if color == "RGB" else bgr
    return (ordered.astype(np.float32) - np.float32(MEAN)) / np.float32(SCALE)


def quantised(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """numpy's int8 quantisation (ONNX QuantizeLinear, f32, ties to even)."""
    return np.clip(np.rint(x / np.float32(scale)) + zero_point, -128, 127).astype(np.int8)


def run(model: Any, array: np.ndarray) -> np.ndarray:
    """``model`` on the CPU, in f32, fed ``array`` (its own layout): the scores."""
    import openvino as ov

    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return np.asarray(compiled([array])[0])


def one_step_bound(scale: float) -> float:
    """How far a score moves when every input value moves by one quantisation step: sum |w| * scale.

    (ReLU and the mean are 1-Lipschitz; the convolution sums 27 weights per output.)
    """
    return float(np.abs(weights()).reshape(CLASSES, -1).sum(axis=1).max() * scale)


def with_input_fake_quantize(model: Any, mean: Any, scale: Any) -> tuple[Any, float, int]:
    """``model`` (changed in place) with a 256-level FakeQuantize on its input covering the normalised pixels
    ``(0 - mean) / scale .. (255 - mean) / scale``, 0 on the grid as NNCF aligns it; and its (scale, zero point)."""
    import openvino.opset13 as ops

    parameter = model.get_parameters()[0]
    lowest, highest = float(np.min((0 - np.float32(mean)) / np.float32(scale))), float(np.max((255 - np.float32(mean)) / np.float32(scale)))
    step = (highest - lowest) / 255
    zero_point = -128 - round(lowest / step)
    low, high = fake_quantize_range(step, zero_point)
    consumers = list(parameter.output(0).get_target_inputs())
    fq = ops.fake_quantize(parameter, *(ops.constant(np.float32(v)) for v in (low, high, low, high)), 256)
    for target in consumers:
        target.replace_source_output(fq.output(0))
    model.validate_nodes_and_infer_types()
    return model, step, zero_point
