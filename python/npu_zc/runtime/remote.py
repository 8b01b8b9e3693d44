"""Remote contexts and remote tensors: our DMA-BUFs as NPU and GPU memory.

The NPU plugin (``intel_npu/remote_properties.hpp``) imports a DMA-BUF from the
property map ``{MEM_TYPE: SHARED_BUF, MEM_HANDLE: <fd as void*>, TENSOR_TYPE}``;
that is what ``ZeroContext::create_tensor(type, shape, int fd)`` builds in C++.
From Python, ``MEM_HANDLE`` must be a *hex string*: OpenVINO parses strings into
``void*`` with ``istream >> void*`` (hex), while a Python int becomes ``int64``
and cannot be read as a pointer. The GPU plugin takes a DMA-BUF as
``{SHARED_MEM_TYPE: BUFFER_FROM_HANDLE, OS_HANDLE: fd}`` with a plain int.

The maps are built by small pure functions, so they are testable on machines
without the devices; the calls that hand them to a plugin turn "no device"
into one :class:`DeviceNotFoundError` sentence.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from ..errors import BufferClosedError, DeviceNotFoundError, InvalidArgumentError
from .device import core, is_available, plugin_message, why_unavailable
from .model import TensorSpec, ov_type

NpuTensorType = Literal["INPUT", "OUTPUT", "BINDED"]

# Keys and values of intel_npu/remote_properties.hpp.
NPU_MEM_TYPE = "MEM_TYPE"
NPU_MEM_HANDLE = "MEM_HANDLE"
NPU_TENSOR_TYPE = "TENSOR_TYPE"
NPU_SHARED_BUF = "SHARED_BUF"
NPU_L0_INTERNAL_BUF = "L0_INTERNAL_BUF"

# Keys and values of intel_gpu/remote_properties.hpp.
GPU_SHARED_MEM_TYPE = "SHARED_MEM_TYPE"
GPU_OS_HANDLE = "OS_HANDLE"
GPU_BUFFER_FROM_HANDLE = "BUFFER_FROM_HANDLE"


def npu_shared_buf_properties(fd: int, tensor_type: NpuTensorType = "BINDED") -> dict[str, str]:
    """The NPU property map that imports DMA-BUF ``fd``: what ``ZeroContext::create_tensor(type, shape, fd)`` builds."""
    _check_tensor_type(tensor_type)
    if fd < 0:
        raise InvalidArgumentError(f"not a file descriptor: {fd}")
    # hex: OpenVINO reads a string into void* with istream >> void*, which parses hexadecimal.
    return {NPU_MEM_TYPE: NPU_SHARED_BUF, NPU_MEM_HANDLE: hex(fd), NPU_TENSOR_TYPE: tensor_type}


def npu_dmabuf_properties(buffer: Any, tensor_type: NpuTensorType = "BINDED") -> dict[str, str]:
    """The NPU property map for ``buffer``, which must be an open DMA-BUF."""
    return npu_shared_buf_properties(_dmabuf_fd(buffer, "NPU"), tensor_type)


def npu_l0_host_properties(tensor_type: NpuTensorType) -> dict[str, str]:
    """The NPU property map for a plugin-allocated Level Zero host tensor (the alternative to our buffers)."""
    _check_tensor_type(tensor_type)
    return {NPU_MEM_TYPE: NPU_L0_INTERNAL_BUF, NPU_TENSOR_TYPE: tensor_type}


def gpu_buffer_from_handle_properties(fd: int) -> dict[str, Any]:
    """The GPU property map that imports DMA-BUF ``fd`` (``OS_HANDLE`` is a plain int on Linux)."""
    if fd < 0:
        raise InvalidArgumentError(f"not a file descriptor: {fd}")
    return {GPU_SHARED_MEM_TYPE: GPU_BUFFER_FROM_HANDLE, GPU_OS_HANDLE: fd}


def gpu_dmabuf_properties(buffer: Any) -> dict[str, Any]:
    """The GPU property map for ``buffer``, which must be an open DMA-BUF."""
    return gpu_buffer_from_handle_properties(_dmabuf_fd(buffer, "GPU"))


def default_context(device: str) -> Any:
    """The plugin's default ``RemoteContext`` for ``"NPU"`` or ``"GPU"``."""
    _require_remote_device(device)
    try:
        return core().get_default_context(device)
    except RuntimeError:  # the plugin's own words are a C++ trace; say what is missing instead
        raise DeviceNotFoundError(why_unavailable(device)) from None


def create_context(device: str, params: Mapping[str, Any]) -> Any:
    """A ``RemoteContext`` from low-level parameters (e.g. a GPU's ``OCL_CONTEXT`` or ``VA_DEVICE``)."""
    _require_remote_device(device)
    try:
        return core().create_context(device, dict(params))
    except RuntimeError as exc:
        if not is_available(device):
            raise DeviceNotFoundError(why_unavailable(device)) from None
        raise InvalidArgumentError(f"{device} refused the context parameters {sorted(params)}: {plugin_message(exc)}") from None


def remote_tensor(context: Any, spec: TensorSpec, properties: Mapping[str, Any]) -> Any:
    """``context.create_tensor`` for ``spec``, with plugin errors as one readable sentence."""
    import openvino as ov

    try:
        return context.create_tensor(ov_type(spec.element_type), ov.Shape(list(spec.shape)), dict(properties))
    except RuntimeError as exc:
        raise InvalidArgumentError(
            f"{context.get_device_name()} could not wrap a buffer as {spec}: {plugin_message(exc)}"
        ) from None


def npu_dmabuf_tensor(context: Any, spec: TensorSpec, buffer: Any, tensor_type: NpuTensorType = "BINDED") -> Any:
    """A NPU ``RemoteTensor`` over ``buffer``'s DMA-BUF: the NPU reads or writes it in place."""
    properties = npu_dmabuf_properties(buffer, tensor_type)
    _check_size(spec, buffer)
    return remote_tensor(context, spec, properties)


def npu_l0_host_tensor(context: Any, spec: TensorSpec, tensor_type: NpuTensorType) -> Any:
    """A plugin-allocated Level Zero host ``RemoteTensor`` (``ZeroContext::create_l0_host_tensor``)."""
    return remote_tensor(context, spec, npu_l0_host_properties(tensor_type))


def host_tensor(context: Any, spec: TensorSpec) -> Any:
    """A plain ``ov.Tensor`` in device-friendly host memory the plugin allocates (``create_host_tensor``)."""
    import openvino as ov

    try:
        return context.create_host_tensor(ov_type(spec.element_type), ov.Shape(list(spec.shape)))
    except RuntimeError as exc:
        raise InvalidArgumentError(f"{context.get_device_name()} could not allocate a host tensor for {spec}: {plugin_message(exc)}") from None


def gpu_dmabuf_tensor(context: Any, spec: TensorSpec, buffer: Any) -> Any:
    """A GPU ``RemoteTensor`` over ``buffer``'s DMA-BUF."""
    properties = gpu_dmabuf_properties(buffer)
    _check_size(spec, buffer)
    return remote_tensor(context, spec, properties)


def _dmabuf_fd(buffer: Any, device: str) -> int:
    from ..buffers import DmaBuf

    if not isinstance(buffer, DmaBuf):
        raise InvalidArgumentError(f"the {device} binds npu_zc.DmaBuf buffers, not {type(buffer).__name__}")
    if buffer.closed:
        raise BufferClosedError(f"cannot give the {device} a closed buffer")
    if not buffer.is_dmabuf:
        raise InvalidArgumentError(
            f"the {device} imports DMA-BUFs only, and this buffer is {buffer.kind} "
            '(allocate it with heap="system" or "udmabuf", or run on the CPU)'
        )
    return int(buffer.fd)


def _check_size(spec: TensorSpec, buffer: Any) -> None:
    if buffer.size < spec.nbytes:
        raise InvalidArgumentError(f"buffer too small: {spec} needs {spec.nbytes} bytes, the buffer has {buffer.size}")


def _check_tensor_type(tensor_type: str) -> None:
    if tensor_type not in ("INPUT", "OUTPUT", "BINDED"):
        raise InvalidArgumentError(f"TENSOR_TYPE must be INPUT, OUTPUT or BINDED, not {tensor_type!r}")


def _require_remote_device(device: str) -> None:
    if device.upper().split(".")[0] not in ("NPU", "GPU"):
        raise InvalidArgumentError(f"{device} has no remote context: remote tensors are for the NPU and the GPU")
