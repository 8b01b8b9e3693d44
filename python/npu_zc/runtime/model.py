"""Models: reading them, finding the image input, and compiling in the HW layout.

Zero-copy mode rewrites the model's input with OpenVINO's ``PrePostProcessor``
so that it reads the packed layout the preprocess writes (RGBx/BGRx u8,
RGBx_BF16, RGBx_FP16, NHWC; or NV12 from a video decoder), and does the colour
conversion, the type conversion, ``(x - mean) / scale`` and the transpose to
the model's own layout inside the compiled model. Copy mode keeps the model's
own input (planar float for most) and leaves all of that to the caller.
Outputs are f32 in both modes, so postprocess reads them in place.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Sequence

import numpy as np

from .._numbers import channel_values
from ..errors import InvalidArgumentError, ModelError, UnsupportedQuantisationError
from .device import core, plugin_message
from .quantisation import InputQuantisation, input_quantisation, to_int8_input

Mode = Literal["zero-copy", "copy"]
MODES: tuple[Mode, ...] = ("zero-copy", "copy")

BUILTIN_MODELS = ("efficientnet-lite0",)
"""Names :func:`read_model` accepts besides files."""


@dataclass(frozen=True)
class _HwFormat:
    element_type: str  # OpenVINO's short name
    color: str  # openvino.preprocess.ColorFormat member
    channels: int
    dtype: Any


# Packed formats the model can read directly (DESIGN.md's names).
HW_FORMATS: dict[str, _HwFormat] = {
    "RGBx": _HwFormat("u8", "RGBX", 4, np.uint8),
    "BGRx": _HwFormat("u8", "BGRX", 4, np.uint8),
    "RGBx_BF16": _HwFormat("bf16", "RGBX", 4, None),  # numpy dtype: ml_dtypes.bfloat16, filled in lazily
    "RGBx_FP16": _HwFormat("f16", "RGBX", 4, np.float16),
    "RGBx_I8": _HwFormat("i8", "RGBX", 4, np.int8),  # the model input's scale and zero point, applied by the preprocess
    "RGB_I8": _HwFormat("i8", "RGB", 3, np.int8),
    "RGB": _HwFormat("u8", "RGB", 3, np.uint8),
    "BGR": _HwFormat("u8", "BGR", 3, np.uint8),
    "NV12": _HwFormat("u8", "NV12_SINGLE_PLANE", 1, np.uint8),  # one buffer, Y then UV: (1, H*3/2, W, 1)
    "NV12_TWO_PLANES": _HwFormat("u8", "NV12_TWO_PLANES", 1, np.uint8),  # inputs <name>/y and <name>/uv
}

_NUMPY_DTYPES: dict[str, type[np.generic]] = {
    "u8": np.uint8,
    "i8": np.int8,
    "u16": np.uint16,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "u32": np.uint32,
    "u64": np.uint64,
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "boolean": np.bool_,
}


def ov_type(element_type: str) -> Any:
    """The ``openvino.Type`` of a short name ("u8", "bf16", "f32"...).

    (``openvino.Type("u8")`` would read "u8" as a numpy type code: unsigned 8 *bytes*.)
    """
    import openvino as ov

    try:
        return getattr(ov.Type, element_type)
    except AttributeError:
        raise InvalidArgumentError(f"unknown element type {element_type!r}") from None


def numpy_dtype(element_type: str) -> np.dtype:
    """The numpy dtype of an OpenVINO element type name ("u8", "f16", "bf16"...)."""
    if element_type == "bf16":
        import ml_dtypes

        bf16: np.dtype = np.dtype(ml_dtypes.bfloat16)  # ml_dtypes ships no types
        return bf16
    try:
        return np.dtype(_NUMPY_DTYPES[element_type])
    except KeyError:
        raise ModelError(f"element type {element_type} has no numpy equivalent") from None


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a compiled model: what its buffer must hold."""

    name: str
    index: int
    shape: tuple[int, ...]
    element_type: str
    """OpenVINO's short name: "u8", "bf16", "f16", "f32"..."""
    format: str | None = None
    """For image inputs, the layout the preprocess writes: "RGBx", "RGBx_BF16", "RGBP_FLOAT", "NV12"..."""

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.element_type)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __str__(self) -> str:
        what = f"{self.format} " if self.format else ""
        return f"'{self.name}' ({what}{'x'.join(map(str, self.shape))} {self.element_type}, {self.nbytes} bytes)"


@dataclass(frozen=True)
class ImageInput:
    """The model's own image input, as found in its metadata."""

    name: str
    index: int
    layout: Literal["NCHW", "NHWC"]
    height: int
    width: int
    channels: int
    element_type: str


@dataclass(frozen=True)
class Normalisation:
    """``(x - mean) / scale`` per channel, in the model's channel order (``color``)."""

    mean: tuple[float, ...] | None = None
    scale: tuple[float, ...] | None = None
    color: Literal["RGB", "BGR"] = "RGB"


@dataclass(frozen=True)
class PreparedModel:
    """A model whose input is the layout a mode needs, ready to compile."""

    model: Any  # openvino.Model
    mode: Mode
    image: ImageInput
    normalisation: Normalisation
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    format: str
    """The input layout: a HW format in zero-copy mode, the model's own in copy mode."""
    source: str = field(default="")
    info: dict[str, str] = field(default_factory=dict)
    """The model's ``model_info`` metadata (OpenVINO Model API), e.g. {"model_type": "Classification", "output_raw_scores": "True"}."""
    quantisation: InputQuantisation | None = None
    """For an int8 input (``RGBx_I8``/``RGB_I8``): the scale and zero point the preprocess quantises with."""


def read_model(source: str | os.PathLike[str] | Any) -> Any:
    """An ``openvino.Model`` from an IR (.xml), ONNX, TFLite or PaddlePaddle file, a built-in name, or a Model.

    A model object is cloned, so preparing it never changes the caller's.
    """
    import openvino as ov

    if isinstance(source, ov.Model):
        return source.clone()
    text = os.fspath(source)
    path = Path(text)
    if not path.exists() and text.lower() in BUILTIN_MODELS:
        from .zoo import efficientnet_lite0

        path = efficientnet_lite0.ir_path()
    if not path.exists():
        raise ModelError(f"no such model file: {text} (built-in models: {', '.join(BUILTIN_MODELS)})")
    if not path.is_file():
        raise ModelError(f"{text} is not a model file")
    if path.suffix == ".xml" and not path.with_suffix(".bin").exists():
        raise ModelError(f"{text} is an OpenVINO IR without its weights file {path.with_suffix('.bin').name}")
    with _stderr_kept_on_success() as succeeded:
        try:
            model = core().read_model(str(path))
        except Exception as exc:  # OpenVINO raises RuntimeError (or frontend errors) for anything unreadable
            raise ModelError(f"cannot read {text} as a model (IR, ONNX, TFLite or PaddlePaddle): {plugin_message(exc)}") from None
        succeeded()
    return model


@contextlib.contextmanager
def _stderr_kept_on_success() -> Iterator[Callable[[], None]]:
    """Hold back what C++ code writes to stderr; pass it on only if the block calls ``succeeded()``.

    OpenVINO tries every frontend on a file it cannot read, and some (TensorFlow's)
    log parse errors straight to fd 2; a person should see our one sentence instead.
    """
    ok = False

    def succeeded() -> None:
        nonlocal ok
        ok = True

    try:
        saved = os.dup(2)
    except OSError:  # no stderr to hold back
        yield succeeded
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield succeeded
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if ok:
                held.seek(0)
                os.write(2, held.read())


def find_image_input(model: Any) -> ImageInput:
    """The single image input of ``model`` (rank 4, NCHW or NHWC, 1, 3 or 4 channels)."""
    from openvino import layout_helpers

    inputs = list(model.inputs)
    names = [_name(port, i) for i, port in enumerate(inputs)]
    if len(inputs) != 1:
        raise ModelError(
            f"npu_zc serves models with exactly one image input; this one has {len(inputs)} ({', '.join(names) or 'none'})"
        )
    port = inputs[0]
    shape = port.get_partial_shape()
    if shape.rank.is_dynamic or shape.rank.get_length() != 4:
        raise ModelError(f"input '{names[0]}' has shape {shape}: not an image (expected 4 dimensions, NCHW or NHWC)")
    declared = str(layout_helpers.get_layout(port))
    dims = [d.get_length() if d.is_static else None for d in shape]
    layout: Literal["NCHW", "NHWC"]
    if declared in ("[N,C,H,W]", "NCHW"):
        layout = "NCHW"
    elif declared in ("[N,H,W,C]", "NHWC"):
        layout = "NHWC"
    elif dims[1] in (1, 3, 4) and dims[3] not in (3, 4):
        layout = "NCHW"
    elif dims[3] in (1, 3, 4):
        layout = "NHWC"
    else:
        raise ModelError(f"input '{names[0]}' has shape {shape}: no dimension of 1, 3 or 4 colour channels at position 1 or 3")
    channels = dims[1] if layout == "NCHW" else dims[3]
    if channels not in (3, 4):
        raise ModelError(f"input '{names[0]}' has {channels} channels: npu_zc feeds colour images (3 channels)")
    height, width = (dims[2], dims[3]) if layout == "NCHW" else (dims[1], dims[2])
    return ImageInput(
        name=names[0],
        index=0,
        layout=layout,
        height=height or 0,
        width=width or 0,
        channels=channels,
        element_type=port.get_element_type().get_type_name(),
    )


def select_hw_format(element_type: str, device: str, color: str = "RGB") -> str:
    """The packed layout the preprocess writes for a model input of ``element_type``.

    Kept in one place so that it can defer to the layout engine's selection helper.
    f16/bf16 inputs keep their type (RGBx_FP16/RGBx_BF16); u8 and f32 inputs
    take u8 RGBx (or BGRx for a model trained on BGR): 1 byte per channel, and
    the model converts and normalises exactly, on every device. An i8 input
    (a quantised model's, or a FakeQuantize'd float input made i8 by
    :func:`prepare`) takes ``RGBx_I8``: the preprocess normalises and
    quantises with the input's scale and zero point; the model orders the channels.
    """
    del device  # same choice on NPU, GPU and CPU today
    if element_type == "f16":
        return "RGBx_FP16"
    if element_type == "bf16":
        return "RGBx_BF16"
    if element_type == "i8":
        from ..layout import select_format

        return select_format("i8", "NHWC", 4, quantised=True)
    if element_type in ("u8", "f32"):
        return "BGRx" if color == "BGR" else "RGBx"
    raise ModelError(f"no HW layout feeds a model input of type {element_type}")


def model_info(model: Any) -> dict[str, str]:
    """The model's ``model_info`` runtime metadata as text (empty when it records none)."""
    if not model.has_rt_info(["model_info"]):
        return {}
    try:
        entries = model.get_rt_info(["model_info"]).astype(dict)
    except Exception:  # not a map: nothing we can read
        return {}
    return {str(k): _rt_text(v) for k, v in entries.items()}


def model_normalisation(model: Any) -> Normalisation:
    """Mean, scale and colour order recorded in the model (OpenVINO Model API ``model_info``), if any."""

    def values(key: str) -> tuple[float, ...] | None:
        if not model.has_rt_info(["model_info", key]):
            return None
        text = _rt_text(model.get_rt_info(["model_info", key])).replace(",", " ").strip("[] ")
        if not text.split():
            return None
        try:
            return channel_values([float(v) for v in text.split()], key)
        except (ValueError, InvalidArgumentError) as e:
            raise ModelError(f"the model records {key} = {text!r}, which is not 1 or 3 finite numbers ({e})") from None

    color: Literal["RGB", "BGR"] = "RGB"
    if model.has_rt_info(["model_info", "reverse_input_channels"]):
        # Model API convention: the input arrives as BGR and True asks to reverse it, i.e. the model wants RGB.
        reverse = _rt_text(model.get_rt_info(["model_info", "reverse_input_channels"])).strip().lower()
        color = "RGB" if reverse in ("true", "1", "yes") else "BGR"
    return Normalisation(values("mean_values"), values("scale_values"), color)


def _rt_text(value: Any) -> str:
    # rt_info values come back as OVAny, whose str() is not the value.
    return str(value.astype(str)) if hasattr(value, "astype") else str(value)


def colour_argument(colour: Literal["RGB", "BGR"] | None, color: Literal["RGB", "BGR"] | None) -> Literal["RGB", "BGR"] | None:
    """``colour=``, or the deprecated ``color=`` spelling of it (the API's other colour names are British)."""
    if color is None:
        return colour
    warnings.warn("color= is deprecated: use colour= (the same channel order, 'RGB' or 'BGR')", DeprecationWarning, stacklevel=3)
    if colour is not None and colour != color:
        raise InvalidArgumentError(f"colour={colour!r} and color={color!r} disagree: give colour= alone")
    return color


def prepare(
    model: Any,
    device: str,
    *,
    mode: Mode = "zero-copy",
    hw_format: str | None = None,
    mean: Sequence[float] | None = None,
    scale: Sequence[float] | None = None,
    colour: Literal["RGB", "BGR"] | None = None,
    input_size: tuple[int, int] | None = None,
    color: Literal["RGB", "BGR"] | None = None,
) -> PreparedModel:
    """Give ``model`` the input a mode needs and f32 outputs; returns it with its tensor specs.

    ``mean``/``scale``/``colour`` (the channel order the model was trained on: "RGB" or "BGR"; ``color=`` is a
    deprecated alias for one release) default to what the model records (see
    :func:`model_normalisation`). ``input_size`` = (height, width) fixes
    dynamic spatial dimensions; a dynamic batch is fixed to 1.

    A quantised input (see :mod:`.quantisation`) reads ``RGBx_I8`` in zero-copy
    mode: an i8 input as it is; a float input whose only consumer is a
    per-tensor FakeQuantize of 256 levels made i8, the FakeQuantize becoming
    its dequantisation (an explicit ``hw_format`` other than ``RGBx_I8`` /
    ``RGB_I8`` keeps such a float input float, quantised inside the model).
    The scale and zero point are in ``PreparedModel.quantisation``.
    """
    import openvino as ov
    from openvino.preprocess import ColorFormat, PrePostProcessor

    if mode not in MODES:
        raise InvalidArgumentError(f"unknown mode {mode!r}: use 'zero-copy' or 'copy'")
    source = model.friendly_name if isinstance(model, ov.Model) else os.fspath(model)
    model = read_model(model)
    image = find_image_input(model)
    model = _fix_shape(model, image, device, input_size)
    image = find_image_input(model)
    quantisation: InputQuantisation | None = None
    if mode == "zero-copy":
        model, quantisation = _int8_input(model, image, hw_format)
        image = find_image_input(model)

    colour = colour_argument(colour, color)
    recorded = model_normalisation(model)
    norm = Normalisation(
        _per_channel(mean, "mean") if mean is not None else recorded.mean,
        _per_channel(scale, "scale") if scale is not None else recorded.scale,
        colour or recorded.color,
    )
    if norm.scale is not None and any(s == 0 for s in norm.scale):
        raise InvalidArgumentError("scale must not contain 0 (the model divides by it)")

    ppp = PrePostProcessor(model)
    if mode == "zero-copy":
        fmt_name = hw_format or select_hw_format(image.element_type, device, norm.color)
        if fmt_name not in HW_FORMATS:
            raise InvalidArgumentError(f"unknown HW format {fmt_name!r}: use one of {', '.join(HW_FORMATS)}")
        fmt = HW_FORMATS[fmt_name]
        if image.channels != 3:
            raise ModelError(f"input '{image.name}' has {image.channels} channels; the HW layouts feed 3-channel models")
        if fmt.channels == 1 and (image.height % 2 or image.width % 2):
            raise ModelError(f"NV12 needs an even height and width; input '{image.name}' is {image.height}x{image.width}")
        _read_hw_format(ppp, image, fmt, norm)
    else:
        fmt_name = _copy_format(image, norm.color)
        if image.element_type == "i8":
            quantisation = input_quantisation(model)
    for i, port in enumerate(model.outputs):
        if port.get_element_type().get_type_name() in ("f16", "bf16", "f64"):
            ppp.output(i).tensor().set_element_type(ov.Type.f32)
    try:
        model = ppp.build()
    except Exception as exc:
        raise ModelError(f"cannot give input '{image.name}' the {fmt_name} layout: {plugin_message(exc)}") from None

    inputs = tuple(_spec(port, i, _input_format(fmt_name, port, mode)) for i, port in enumerate(model.inputs))
    outputs = tuple(_spec(port, i, None) for i, port in enumerate(model.outputs))
    for spec in inputs + outputs:
        if any(d <= 0 for d in spec.shape):
            raise ModelError(f"{spec.name} has a dynamic shape; npu_zc binds buffers of a fixed size")
    return PreparedModel(model, mode, image, norm, inputs, outputs, fmt_name, source, model_info(model), quantisation)


INT8_FORMATS = ("RGBx_I8", "RGB_I8")


def _int8_input(model: Any, image: ImageInput, hw_format: str | None) -> tuple[Any, InputQuantisation | None]:
    """``model`` with the i8 input a quantised model reads in zero-copy mode, and its quantisation (None: not quantised)."""
    wants_int8 = hw_format in INT8_FORMATS
    if image.element_type == "i8":
        if hw_format is not None and not wants_int8:
            raise ModelError(
                f"input '{image.name}' is int8: it reads RGBx_I8 or RGB_I8 (quantised with the model's scale and zero point), not {hw_format}"
            )
        return to_int8_input(model)
    if hw_format is not None and not wants_int8:
        return model, None  # asked for a float or u8 layout: the model quantises inside, as it is
    try:
        found = input_quantisation(model)
    except UnsupportedQuantisationError:
        if wants_int8:
            raise
        return model, None  # per channel or other levels: the input stays float, the FakeQuantize inside
    if found is None:
        if wants_int8:
            raise ModelError(
                f"input '{image.name}' is {image.element_type} and not quantised (no FakeQuantize reads it): "
                f"{hw_format} needs the model's scale and zero point"
            )
        return model, None
    return to_int8_input(model)


def _read_hw_format(ppp: Any, image: ImageInput, fmt: _HwFormat, norm: Normalisation) -> None:
    """Make the model's input read ``fmt``, with colour order, type, mean and scale inside."""
    import openvino as ov
    from openvino.preprocess import ColorFormat

    tensor = ppp.input().tensor()
    tensor.set_element_type(ov_type(fmt.element_type)).set_layout(ov.Layout("NHWC"))
    ppp.input().model().set_layout(ov.Layout(image.layout))
    steps = ppp.input().preprocess()
    model_is_float = image.element_type in ("f32", "f16", "bf16")
    if fmt.channels in (3, 4) and model_is_float:
        # One per-pixel matrix product picks the channels (dropping x), orders them and
        # normalises. PrePostProcessor's convert_color(RGBX -> RGB) would be a StridedSlice,
        # which the CPU plugin runs as one memcpy per pixel: a copy of the frame.
        tensor.set_shape([1, image.height, image.width, fmt.channels])
        mix = _channel_mix(fmt.color[:3], fmt.channels, norm)
        steps.convert_element_type(ov.Type.f32)
        steps.custom(mix)
        return
    if fmt.element_type == "i8":
        # The same product with 0/1 weights only orders the channels (exact on integers), and the bytes go back
        # to i8: the model's own dequantisation (Convert, Subtract, Multiply) then reads them after the transpose.
        tensor.set_shape([1, image.height, image.width, fmt.channels])
        steps.convert_element_type(ov.Type.f32)
        steps.custom(_channel_mix(fmt.color[:3], fmt.channels, Normalisation(color=norm.color)))
        steps.convert_element_type(ov.Type.i8)
        return
    if fmt.color == "NV12_TWO_PLANES":
        tensor.set_color_format(ColorFormat.NV12_TWO_PLANES, ["y", "uv"])
    else:
        tensor.set_color_format(getattr(ColorFormat, fmt.color))
    if fmt.element_type != image.element_type or model_is_float:
        steps.convert_element_type(ov.Type.f32 if model_is_float else ov_type(image.element_type))
    steps.convert_color(getattr(ColorFormat, norm.color))
    if model_is_float:
        if norm.mean is not None:
            steps.mean(list(norm.mean))
        if norm.scale is not None:
            steps.scale(list(norm.scale))


def _channel_mix(source: str, channels: int, norm: Normalisation) -> Any:
    """``x -> x @ W + b`` on NHWC pixels: W[i, j] = 1/scale[j] where source channel i is model channel j."""
    import openvino.opset13 as ops

    mean = norm.mean or (0.0, 0.0, 0.0)
    scale = norm.scale or (1.0, 1.0, 1.0)
    weights = np.zeros((channels, 3), np.float32)
    for j, name in enumerate(norm.color):
        weights[source.index(name), j] = 1.0 / scale[j]
    bias = np.array([-m / s for m, s in zip(mean, scale)], np.float32)

    def mix(pixels: Any) -> Any:
        mixed = ops.matmul(pixels, ops.constant(weights), transpose_a=False, transpose_b=False)
        return mixed.output(0) if norm.mean is None else ops.add(mixed, ops.constant(bias)).output(0)

    return mix


def _fix_shape(model: Any, image: ImageInput, device: str, input_size: tuple[int, int] | None) -> Any:
    import openvino as ov

    port = model.inputs[image.index]
    shape = port.get_partial_shape()
    if shape.is_static and input_size is None:
        return model
    h_axis, w_axis = (2, 3) if image.layout == "NCHW" else (1, 2)
    dims = [d.get_length() if d.is_static else -1 for d in shape]
    dims[0] = 1  # one frame per request: a dynamic batch becomes 1
    if input_size is not None:
        dims[h_axis], dims[w_axis] = input_size
    if dims[h_axis] < 0 or dims[w_axis] < 0:
        on_npu = device.upper().startswith("NPU")
        why = "the NPU compiles static shapes only" if on_npu else "npu_zc needs a fixed image size to size its buffers"
        raise ModelError(f"input '{image.name}' has dynamic size {shape}: {why}; pass input_size=(height, width)")
    try:
        model.reshape({port.get_any_name(): ov.PartialShape(dims)})
    except Exception as exc:
        raise ModelError(f"cannot reshape input '{image.name}' to {dims}: {plugin_message(exc)}") from None
    return model


def _copy_format(image: ImageInput, color: str) -> str:
    if image.element_type == "i8":
        if image.layout != "NHWC" or color != "RGB":
            raise ModelError(
                f"input '{image.name}' is int8 {image.layout} in {color} order: in copy mode only RGB_I8 (NHWC, RGB) "
                "writes a quantised model's own input; use zero-copy mode (RGBx_I8)"
            )
        return "RGB_I8"
    suffix = {"f32": "FLOAT", "f16": "FP16", "bf16": "BF16"}.get(image.element_type)
    if suffix is None:  # integer input (a quantised model): packed bytes
        return color
    return f"{color}P_{suffix}" if image.layout == "NCHW" else f"{color}_{suffix}"


def _input_format(fmt: str, port: Any, mode: Mode) -> str:
    if fmt == "NV12_TWO_PLANES":
        return "NV12_Y" if port.get_any_name().endswith("/y") else "NV12_UV"
    return fmt


def _spec(port: Any, index: int, fmt: str | None) -> TensorSpec:
    shape = port.get_partial_shape()
    dims = tuple(d.get_length() if d.is_static else -1 for d in shape)
    return TensorSpec(_name(port, index), index, dims, port.get_element_type().get_type_name(), fmt)


def _name(port: Any, index: int) -> str:
    try:
        return str(port.get_any_name())
    except RuntimeError:  # a port without tensor names
        return f"#{index}"


def _per_channel(values: Sequence[float], what: str) -> tuple[float, ...]:
    out = channel_values(values, what)
    assert out is not None
    return out
