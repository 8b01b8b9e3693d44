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

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

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


Reads = Literal["our memory", "a copy", "unknown"]


@dataclass(frozen=True)
class BindingReport:
    """Whether the device reads (or writes) our memory or a copy, for one bound port, and how we know."""

    port: str
    """``"input 0 (images)"``, ``"output 1 (scores)"``."""
    device: str
    buffer: str
    """The buffer's kind: "dma-heap:system", "memfd", "ordinary memory"..."""
    tensor: str
    """What the request holds: "host tensor over our mapping", "NPU remote tensor over our DMA-BUF"..."""
    reads: Reads
    evidence: str
    """One sentence: what was checked, or why nothing here can tell."""

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        return f"{self.port}: the {self.device} uses {self.reads} ({self.tensor}; {self.evidence})"


def report(device: str, direction: str, index: int, bound: BoundBuffer, request_tensor: Any = None) -> BindingReport:
    """What is known about ``bound`` (on ``device``); ``request_tensor`` is the
    tensor the request holds for that port now, when there is a request."""
    base = device.upper().split(".")[0].split(":")[0]
    port = f"{direction} {index} ({bound.spec.name})"
    kind = str(getattr(bound.buffer, "kind", "?"))
    ours = int(bound.array.ctypes.data)
    if base in ("NPU", "GPU"):
        props = _remote_params(bound.tensor)
        return BindingReport(
            port, device, kind, f"{base} remote tensor over our DMA-BUF ({props})", "our memory",
            f"the {base} plugin imported the buffer's fd into its device context or refused to bind it; it has no "
            "copy path for a remote tensor (not measured on this machine: the memcpy counter, npu-zc run "
            "--count-copies, is the check for its host side)",
        )  # fmt: skip
    if base != "CPU":
        return BindingReport(
            port, device, kind, "host tensor over our mapping", "unknown",
            f"{device} is not a device whose binding we can check (AUTO, HETERO, MULTI and others choose "
            "internally): run npu-zc run --count-copies to measure",
        )  # fmt: skip
    held = request_tensor if request_tensor is not None else bound.tensor
    try:
        address = int(held.data.ctypes.data)
    except Exception:  # a tensor without host data: nothing to compare
        return BindingReport(port, device, kind, "host tensor", "unknown", "the request's tensor has no host address")
    if address == ours:
        where = "the request's tensor" if request_tensor is not None else "the tensor"
        return BindingReport(
            port, device, kind, "host tensor over our mapping", "our memory",
            f"{where} points at our mapping (address {address:#x} checked); the CPU plugin infers on host tensors "
            "in place",
        )  # fmt: skip
    return BindingReport(
        port, device, kind, "host tensor", "a copy",
        f"the request's tensor is at {address:#x}, our mapping at {ours:#x}: the runtime works on other memory",
    )  # fmt: skip


def copy_report(device: str, direction: str, index: int, spec: TensorSpec) -> BindingReport:
    """Copy mode: ordinary arrays, copied in and out by the runtime (``infer_copy``)."""
    return BindingReport(
        f"{direction} {index} ({spec.name})", device, "ordinary memory", "the request's own tensor", "a copy",
        "copy mode: the runtime copies the input in and the output out on every inference",
    )  # fmt: skip


def _remote_params(tensor: Any) -> str:
    try:
        params = tensor.get_params()
        return ", ".join(f"{k}={v}" for k, v in sorted(params.items()) if k in ("MEM_TYPE", "SHARED_MEM_TYPE", "TENSOR_TYPE"))
    except Exception:
        return "parameters not readable"
