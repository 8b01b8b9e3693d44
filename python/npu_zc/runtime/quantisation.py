"""What a quantised model's image input means: one scale and zero point, read from the graph.

A model quantised for an NPU reads signed bytes ``q`` that stand for
``x = (q - zero_point) * scale``, where ``x`` is the (normalised) float the
original model read. OpenVINO's int8 IRs say so in one of two ways, and
:func:`input_quantisation` reads both:

* an ``i8`` Parameter followed by the dequantisation OpenVINO's low-precision
  transformations recognise: ``Convert`` to float, an optional ``Subtract`` of
  the zero point, a ``Multiply`` by the scale;
* a float Parameter whose only consumer is a ``FakeQuantize`` of 256 levels
  (what NNCF and POT put on a model's input): ``scale = (input_high -
  input_low) / 255``, ``zero_point = -128 - round(input_low / scale)``.
  :func:`to_int8_input` rewrites such a model to the first form, so that the
  preprocess writes the bytes the FakeQuantize would have made.

Only one scale and zero point for the whole tensor (per-tensor, as NNCF
quantises activations): the layout engine's ``RGBx_I8`` / ``RGB_I8``
conversion takes one of each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import ModelError, UnsupportedQuantisationError

LEVELS = 256
"""The FakeQuantize levels an int8 input can reproduce."""


@dataclass(frozen=True)
class InputQuantisation:
    """The meaning of a model's int8 input: ``x = (q - zero_point) * scale``.

    The preprocess writes ``q = clamp(round(x / scale) + zero_point, -128, 127)``
    (``RGBx_I8`` / ``RGB_I8`` with ``quant_scale=scale``, ``zero_point=zero_point``).
    """

    scale: float
    """> 0 and finite."""
    zero_point: int
    """-128..=127."""
    source: Literal["dequantisation", "fake-quantize"]
    """Where the numbers come from: the i8 input's Convert/Subtract/Multiply, or the float input's FakeQuantize."""

    def converter_args(self) -> dict[str, Any]:
        """The keyword arguments of :class:`npu_zc.layout.Converter` / :func:`npu_zc.convert` for these numbers."""
        return {"quant_scale": self.scale, "zero_point": self.zero_point}


def input_quantisation(model: Any) -> InputQuantisation | None:
    """The quantisation of ``model``'s single input, or None when the input is not quantised.

    Raises :class:`npu_zc.ModelError` (one sentence) for an i8 input whose
    dequantisation cannot be read and for quantisation numbers that make no
    sense (NaN, ``output_high <= output_low``, a zero scale);
    :class:`npu_zc.UnsupportedQuantisationError` (a ``ModelError``) for what
    one scale and zero point cannot express: per-channel numbers, levels
    other than 256, a range without 0.
    """
    parameter = _single_parameter(model)
    name = _name(parameter)
    element = parameter.get_element_type().get_type_name()
    if element == "i8":
        return _dequantisation(parameter, name)
    fake_quantize = _fake_quantize_after(parameter)
    if fake_quantize is None:
        return None
    return _fake_quantize_numbers(fake_quantize, name)[0]


def to_int8_input(model: Any) -> tuple[Any, InputQuantisation]:
    """``model`` (changed in place) with its FakeQuantize'd float input made an i8 input; and its quantisation.

    The FakeQuantize becomes ``Convert -> Subtract -> Multiply``, which gives
    the FakeQuantize's own output values for the bytes the preprocess writes;
    an i8 input is returned as it is.
    """
    import openvino as ov
    import openvino.opset13 as ops

    parameter = _single_parameter(model)
    name = _name(parameter)
    if parameter.get_element_type().get_type_name() == "i8":
        return model, _dequantisation(parameter, name)
    fake_quantize = _fake_quantize_after(parameter)
    if fake_quantize is None:
        raise ModelError(f"input '{name}' is not quantised: no FakeQuantize reads it, so it has no int8 scale and zero point")
    quantisation, (output_low, output_high) = _fake_quantize_numbers(fake_quantize, name)
    # The FakeQuantize maps byte q to output_low + (q + 128) * step: the same as (q - zero) * step.
    step = (output_high - output_low) / (LEVELS - 1)
    zero = -128.0 - output_low / step
    float_type = fake_quantize.get_output_element_type(0)
    int8 = ops.parameter(parameter.get_partial_shape(), ov.Type.i8, name=parameter.get_friendly_name())
    int8.set_layout(parameter.get_layout())
    shifted = ops.subtract(ops.convert(int8, float_type), ops.constant(np.array(zero, np.float32), float_type))
    dequantised = ops.multiply(shifted, ops.constant(np.array(step, np.float32), float_type))
    fake_quantize.output(0).replace(dequantised.output(0))
    names = parameter.output(0).get_names()
    parameter.output(0).get_tensor().set_names(set())
    int8.output(0).get_tensor().set_names(names)
    model.replace_parameter(model.get_parameter_index(parameter), int8)
    model.validate_nodes_and_infer_types()
    return model, quantisation


# --- reading the graph --------------------------------------------------------


def _single_parameter(model: Any) -> Any:
    parameters = list(model.get_parameters())
    if len(parameters) != 1:
        raise ModelError(f"npu_zc serves models with exactly one image input; this one has {len(parameters)}")
    return parameters[0]


def _name(node: Any) -> str:
    names = node.output(0).get_names()
    return str(sorted(names)[0]) if names else str(node.get_friendly_name())


def _only_consumer(node: Any) -> Any | None:
    targets = list(node.output(0).get_target_inputs())
    return targets[0].get_node() if len(targets) == 1 else None


def _fake_quantize_after(parameter: Any) -> Any | None:
    consumer = _only_consumer(parameter)
    if consumer is None or consumer.get_type_name() != "FakeQuantize" or not _reads(consumer, parameter):
        return None
    return consumer


def _reads(node: Any, producer: Any, port: int = 0) -> bool:
    return bool(node.input_value(port).get_node() == producer)


def _constant(node: Any, port: int, what: str, input_name: str) -> np.ndarray:
    """The values on ``node``'s input ``port``: a Constant, possibly through Converts (compressed f16 IRs)."""
    source = node.input_value(port).get_node()
    while source.get_type_name() == "Convert":
        source = source.input_value(0).get_node()
    if source.get_type_name() != "Constant":
        raise ModelError(
            f"the {what} of input '{input_name}' is computed by a {source.get_type_name()}, not a constant: npu_zc reads constant quantisation numbers only"
        )
    return np.asarray(source.get_data(), np.float64).reshape(-1)


def _per_tensor(values: np.ndarray, what: str, input_name: str) -> float:
    if values.size == 0 or not np.all(np.isfinite(values)):
        raise ModelError(f"the {what} of input '{input_name}' is {values.tolist()}: quantisation numbers must be finite")
    if np.any(values != values[0]):
        raise UnsupportedQuantisationError(
            f"input '{input_name}' is quantised per channel ({what} {values.tolist()}): "
            "the int8 layouts take one scale and zero point for the whole image"
        )
    return float(values[0])


def _dequantisation(parameter: Any, name: str) -> InputQuantisation:
    """Scale and zero point of an i8 Parameter's ``Convert -> [Subtract] -> Multiply``."""
    expected = f"input '{name}' is int8, but is not followed by OpenVINO's dequantisation (Convert to float, Subtract zero point, Multiply by scale), so what its bytes mean is unknown"
    convert = _only_consumer(parameter)
    if convert is None or convert.get_type_name() != "Convert":
        raise ModelError(expected)
    producer, node = convert, _only_consumer(convert)
    zero_point = 0.0
    if node is not None and node.get_type_name() == "Subtract" and _reads(node, producer):
        zero_point = _per_tensor(_constant(node, 1, "zero point", name), "zero point", name)
        producer, node = node, _only_consumer(node)
    if node is None or node.get_type_name() != "Multiply":
        raise ModelError(expected)
    port = 1 if _reads(node, producer) else 0
    scale = _per_tensor(_constant(node, port, "scale", name), "scale", name)
    if not scale > 0:
        raise ModelError(f"the scale of input '{name}' is {scale}: a quantisation scale must be greater than 0")
    if zero_point != round(zero_point) or not -128 <= zero_point <= 127:
        raise ModelError(f"the zero point of input '{name}' is {zero_point}: an int8 zero point is an integer from -128 to 127")
    return InputQuantisation(scale, int(zero_point), "dequantisation")


def _fake_quantize_numbers(node: Any, name: str) -> tuple[InputQuantisation, tuple[float, float]]:
    """The int8 quantisation a FakeQuantize on the input stands for, and its (output_low, output_high)."""
    low, high, out_low, out_high = (
        _per_tensor(_constant(node, port, what, name), what, name)
        for port, what in ((1, "FakeQuantize input_low"), (2, "FakeQuantize input_high"),
                           (3, "FakeQuantize output_low"), (4, "FakeQuantize output_high"))
    )  # fmt: skip
    for lo, hi, which in ((low, high, "input"), (out_low, out_high, "output")):
        if not hi > lo:
            raise ModelError(
                f"the FakeQuantize on input '{name}' has {which}_high {hi} <= {which}_low {lo}: an empty range, so a zero scale"
            )
    levels = int(node.get_attributes()["levels"])
    if levels != LEVELS:
        raise UnsupportedQuantisationError(
            f"the FakeQuantize on input '{name}' has {levels} levels: an int8 input reproduces {LEVELS} levels only"
        )
    scale = (high - low) / (LEVELS - 1)
    zero_point = -128 - round(low / scale)
    if not -128 <= zero_point <= 127 or not math.isfinite(scale) or scale <= 0:
        raise UnsupportedQuantisationError(
            f"the FakeQuantize on input '{name}' covers {low}..{high}, which does not hold 0: its int8 zero point {zero_point} is out of -128..127"
        )
    return InputQuantisation(scale, zero_point, "fake-quantize"), (out_low, out_high)
