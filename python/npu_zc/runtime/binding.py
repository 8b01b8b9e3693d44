"""Binding our buffers to a model's inputs and outputs, per device.

* CPU: an ``ov.Tensor(..., shared_memory=True)`` over the buffer's mapping; the
  CPU plugin points its graph at that memory, so inference reads the input and
  writes the output in place (checked by pointer equality here, and by the
  memcpy counter in the tests).
* NPU: a remote tensor over the DMA-BUF fd (see :mod:`.remote`).
* GPU: a remote tensor over the DMA-BUF fd, ``BUFFER_FROM_HANDLE``.

Every device also gets a CPU view (a numpy array) of the same memory: the
preprocess writes the input through it and the postprocess reads the output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BufferClosedError, InvalidArgumentError
from . import remote
from .model import TensorSpec


@dataclass(frozen=True)
class BoundBuffer:
    """A buffer bound to one input or output port."""

    spec: TensorSpec
    buffer: Any  # npu_zc.DmaBuf
    offset: int
    array: np.ndarray  # numpy view of the memory, shaped and typed as ``spec``
    tensor: Any  # what the request reads or writes: ov.Tensor (CPU) or ov.RemoteTensor (NPU, GPU)


def check_buffer(spec: TensorSpec, buffer: Any, offset: int = 0) -> None:
    """Raise a clear error when ``buffer`` cannot hold ``spec`` at ``offset``."""
    from ..buffers import DmaBuf

    if not isinstance(buffer, DmaBuf):
        raise InvalidArgumentError(f"{spec.name} binds an npu_zc.DmaBuf (from npu_zc.alloc), not {type(buffer).__name__}")
    if buffer.closed:
        raise BufferClosedError(f"cannot bind {spec}: the buffer is closed")
    if offset < 0 or offset % spec.dtype.itemsize:
        raise InvalidArgumentError(f"offset {offset} is not a multiple of {spec.element_type}'s {spec.dtype.itemsize} bytes")
    if buffer.size - offset < spec.nbytes:
        raise InvalidArgumentError(
            f"buffer too small: {spec} needs {spec.nbytes} bytes"
            + (f" from offset {offset}" if offset else "")
            + f", the buffer has {buffer.size}"
        )


def cpu_tensor(spec: TensorSpec, array: np.ndarray) -> Any:
    """An ``ov.Tensor`` that shares ``array``'s memory (never a copy)."""
    import openvino as ov

    if not (array.flags.c_contiguous and array.flags.writeable):
        raise InvalidArgumentError(f"{spec.name} needs a C-contiguous, writable mapping to share it with OpenVINO")
    if spec.element_type == "bf16":
        # OpenVINO's Python layer has no bfloat16 dtype: share the raw 16-bit words.
        tensor = ov.Tensor(array.view(np.uint16), list(spec.shape), ov.Type.bf16)
    else:
        tensor = ov.Tensor(array, shared_memory=True)
    if tensor.data.ctypes.data != array.ctypes.data:  # would mean a silent copy
        raise InvalidArgumentError(f"OpenVINO would copy {spec.name} instead of sharing its memory")
    return tensor


def bind(device: str, context: Any | None, spec: TensorSpec, buffer: Any, offset: int = 0) -> BoundBuffer:
    """Wrap ``buffer`` (at ``offset``) as the tensor ``spec`` for ``device``."""
    check_buffer(spec, buffer, offset)
    base = device.upper().split(".")[0]
    tensor = None
    if base in ("NPU", "GPU"):
        if offset:
            raise InvalidArgumentError(f"the {base} imports whole DMA-BUFs: bind at offset 0")
        if base == "NPU":
            tensor = remote.npu_dmabuf_tensor(context, spec, buffer)
        else:
            tensor = remote.gpu_dmabuf_tensor(context, spec, buffer)
    array = buffer.map(dtype=spec.dtype, shape=spec.shape, offset=offset)
    if tensor is None:
        tensor = cpu_tensor(spec, array)
    return BoundBuffer(spec, buffer, offset, array, tensor)
