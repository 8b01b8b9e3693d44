"""OpenVINO orchestration: devices, models in the HW layout, our buffers bound as model memory.

Typical use::

    from npu_zc import alloc
    from npu_zc.runtime import compile_model

    session = compile_model("efficientnet-lite0", "AUTO")   # NPU when present, else CPU
    request = session.create_request()
    frame = request.bind_input(alloc(session.inputs[0].nbytes))    # e.g. RGBx, (1, 224, 224, 4) u8
    scores = request.bind_output(alloc(session.outputs[0].nbytes))
    frame[...] = ...        # the preprocess writes here
    request.infer()         # reads frame and writes scores in place
"""

import warnings
from typing import Any

from .binding import BindingReport, BoundBuffer, bind, check_buffer, cpu_tensor
from .device import (
    DeviceChoice,
    available_devices,
    choose_device,
    core,
    device_properties,
    is_available,
    openvino_version,
    plugin_message,
    why_unavailable,
)
from .labels import imagenet_labels, labels_for, read_labels, top_classes
from .model import (
    BUILTIN_MODELS,
    HW_FORMATS,
    ImageInput,
    Mode,
    Normalisation,
    PreparedModel,
    TensorSpec,
    find_image_input,
    model_info,
    model_normalisation,
    prepare,
    read_model,
    select_hw_format,
)
from .quantisation import InputQuantisation, input_quantisation, to_int8_input
from .queue import AsyncQueue, BufferSet, Result
from .request import Request
from .session import CompileOptions, Session, Startup, compile_model, measure_startup
from .target import Target

__all__ = [
    "BindingReport",
    "AsyncQueue",
    "BUILTIN_MODELS",
    "BoundBuffer",
    "BufferSet",
    "CompileOptions",
    "DeviceChoice",
    "HW_FORMATS",
    "ImageInput",
    "InputQuantisation",
    "Mode",
    "Normalisation",
    "PreparedModel",
    "Request",
    "Result",
    "Session",
    "Startup",
    "Target",
    "TensorSpec",
    "available_devices",
    "bind",
    "check_buffer",
    "choose_device",
    "compile_model",
    "core",
    "cpu_tensor",
    "device_properties",
    "find_image_input",
    "imagenet_labels",
    "input_quantisation",
    "is_available",
    "labels_for",
    "measure_startup",
    "model_info",
    "model_normalisation",
    "openvino_version",
    "plugin_message",
    "prepare",
    "read_labels",
    "read_model",
    "select_hw_format",
    "to_int8_input",
    "top_classes",
    "why_unavailable",
]


def __getattr__(name: str) -> Any:
    # ``Frame`` was the queue's buffer set's name, documented with ``acquire()``; it stays for one release.
    if name == "Frame":
        warnings.warn(
            "npu_zc.runtime.Frame is deprecated: it is npu_zc.runtime.BufferSet (the queue's set of bound buffers)",
            DeprecationWarning,
            stacklevel=2,
        )
        return BufferSet
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
