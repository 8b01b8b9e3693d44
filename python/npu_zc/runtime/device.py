"""Devices: the shared OpenVINO Core, which device to run on, and why one is missing.

OpenVINO reports an absent NPU as a C++ trace about a compiler library it
could not load; a person needs to know *what* is missing. :func:`why_unavailable`
looks at the pieces an NPU (or an Intel GPU) needs on Linux and names the absent
ones in one sentence. OpenVINO's NPU and GPU plugins drive Intel devices on
x86_64 only (its aarch64 wheels ship neither): elsewhere the sentence says so
rather than suggest Intel's drivers.
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform
import re
import threading
from dataclasses import dataclass
from typing import Any

from ..errors import DeviceNotFoundError, InvalidArgumentError

_X86_64 = ("x86_64", "amd64")
"""platform.machine() of the machines Intel's NPU and GPU drivers are built for (lower-cased)."""

DEVICES = ("NPU", "CPU", "GPU", "AUTO")
"""Device names :func:`choose_device` accepts (case-insensitive)."""

_core: Any = None
_core_lock = threading.Lock()


def core() -> Any:
    """The process-wide ``openvino.Core`` (one per process: plugins load once)."""
    global _core
    with _core_lock:
        if _core is None:
            import openvino as ov

            _core = ov.Core()
        return _core


def openvino_version() -> str:
    import openvino as ov

    return str(ov.get_version())


def available_devices() -> list[str]:
    """Devices OpenVINO can run on here, e.g. ``['CPU']`` or ``['CPU', 'GPU', 'NPU']``."""
    return list(core().available_devices)


def is_available(device: str) -> bool:
    """True when ``device`` ("NPU", "GPU", "CPU", "GPU.1"...) is listed by OpenVINO."""
    device = device.upper()
    return any(d == device or d.split(".")[0] == device for d in available_devices())


@dataclass(frozen=True)
class DeviceChoice:
    """The device a request resolved to: ``device`` is what the model runs on."""

    requested: str
    device: str
    reason: str

    def __str__(self) -> str:
        return self.reason


def choose_device(requested: str = "AUTO") -> DeviceChoice:
    """Resolve ``"NPU"``, ``"CPU"``, ``"GPU"`` or ``"AUTO"`` to a device that is present.

    ``AUTO`` takes the NPU when it is present, else the CPU, and says so in
    ``reason``. An explicit device that is absent raises
    :class:`DeviceNotFoundError` with one sentence naming what is missing.
    (OpenVINO's own AUTO plugin is not used: buffers are bound to one concrete
    device, and AUTO may switch devices after the first inferences.)
    """
    name = requested.strip().upper()
    base = name.split(".")[0]
    if base not in DEVICES:
        raise InvalidArgumentError(f"unknown device {requested!r}: use one of NPU, CPU, GPU or AUTO")
    if name == "AUTO":
        if is_available("NPU"):
            return DeviceChoice(requested, "NPU", "AUTO took the NPU")
        return DeviceChoice(requested, "CPU", f"AUTO took the CPU: {why_unavailable('NPU')}")
    if not is_available(name):
        raise DeviceNotFoundError(why_unavailable(name))
    return DeviceChoice(requested, name, f"{name} as requested")


def why_unavailable(device: str) -> str:
    """One sentence on why ``device`` cannot be used here (empty-handed guesses avoided)."""
    base = device.strip().upper().split(".")[0]
    if base == "NPU":
        return _why_no_npu()
    if base == "GPU":
        return _why_no_gpu()
    if is_available(device):
        return f"{device} is available"
    return f"{device} is not available: OpenVINO lists only {', '.join(available_devices()) or 'no devices'}"


def _loadable(*names: str) -> bool:
    for name in names:
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def _device_nodes(pattern: str) -> list[str]:
    return sorted(glob.glob(pattern))


def _has_plugin(device: str) -> bool:
    """Whether this OpenVINO build has a plugin for ``device`` at all (its aarch64 wheels have no NPU or GPU plugin)."""
    try:
        return bool(core().get_versions(device))
    except Exception:  # a plugin that is registered but cannot load is as good as absent
        return False


def _why_no_npu(machine: str | None = None) -> str:
    """Why no NPU is usable; ``machine`` (``platform.machine()`` by default) picks the advice."""
    machine = machine or platform.machine()
    if machine.lower() not in _X86_64:
        what = "OpenVINO's NPU plugin finds no device" if _has_plugin("NPU") else "this OpenVINO has no NPU plugin"
        return (
            f"No NPU is usable: {what} on {machine} (OpenVINO's NPU plugin and Intel's NPU driver "
            'are for Intel NPUs on x86_64 only); run on device="CPU" or "AUTO".'
        )
    if not _has_plugin("NPU"):
        return (
            "No NPU is usable: this OpenVINO has no NPU plugin (libopenvino_intel_npu_plugin.so); "
            'install the openvino package from PyPI, which ships it, or run on device="CPU" or "AUTO".'
        )
    nodes = _device_nodes("/dev/accel/accel*")
    missing: list[str] = []
    if not nodes:
        missing.append("the NPU device (no /dev/accel/accel* node: this machine has no NPU or the intel_vpu kernel driver is not loaded)")
    elif not any(os.access(n, os.R_OK | os.W_OK) for n in nodes):
        return (
            f"No NPU is usable: {nodes[0]} exists but this user may not open it "
            "(add the user to the group that owns it, usually render)."
        )
    if not _loadable("libze_loader.so.1", "libze_loader.so"):
        missing.append("the Level Zero loader (libze_loader.so.1)")
    if not _loadable("libze_intel_npu.so", "libze_intel_npu.so.1", "libze_intel_vpu.so.1"):
        missing.append("the NPU user-mode driver (libze_intel_npu.so)")
    if not _loadable("libnpu_driver_compiler.so"):
        missing.append("the NPU compiler (libnpu_driver_compiler.so)")
    if missing:
        return (
            f"No NPU is usable: {_join(missing)} {'is' if len(missing) == 1 else 'are'} missing; "
            'install Intel\'s linux-npu-driver, or run on device="CPU" or "AUTO".'
        )
    return "No NPU is usable: the device node and the driver libraries are present but OpenVINO's NPU plugin lists no device (check dmesg for intel_vpu errors)."


def _why_no_gpu(machine: str | None = None) -> str:
    machine = machine or platform.machine()
    if machine.lower() not in _X86_64 and not _has_plugin("GPU"):
        return f"No Intel GPU is usable: this OpenVINO has no GPU plugin on {machine} (OpenVINO's GPU plugin is for Intel GPUs on x86_64 only)."
    missing: list[str] = []
    if not _device_nodes("/dev/dri/renderD*"):
        missing.append("a GPU render node (no /dev/dri/renderD*: no Intel GPU or the i915/xe kernel driver is not loaded)")
    if not _loadable("libOpenCL.so.1"):
        missing.append("the OpenCL ICD loader (libOpenCL.so.1)")
    if not _loadable("libigdrcl.so"):
        missing.append("Intel's OpenCL driver (libigdrcl.so, from intel-opencl-icd)")
    if missing:
        return f"No Intel GPU is usable: {_join(missing)} {'is' if len(missing) == 1 else 'are'} missing."
    return "No Intel GPU is usable: the render node and OpenCL driver are present but OpenVINO's GPU plugin lists no device."


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


_TRACE_LINE = re.compile(r"^(Exception from |Check '.*' failed at )")


def plugin_message(exc: BaseException) -> str:
    """The human part of an OpenVINO exception, without its C++ source-location trace."""
    lines = [line.strip() for line in str(exc).splitlines()]
    kept = [line for line in lines if line and not _TRACE_LINE.match(line)]
    # "Check 'x' failed at file:line:" is followed by the actual message; keep the last meaningful lines.
    text = " ".join(kept) if kept else (lines[0] if lines else type(exc).__name__)
    return re.sub(r"\s+", " ", text).strip()


def device_properties(device: str) -> dict[str, Any]:
    """Every readable property the device's plugin reports (values that fail to read are skipped)."""
    return _read_properties(lambda key: core().get_property(device, key), core().get_property(device, "SUPPORTED_PROPERTIES"))


def _read_properties(get: Any, supported: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, mode in dict(supported).items():
        if key == "SUPPORTED_PROPERTIES" or str(mode) == "WO":
            continue
        try:
            values[key] = get(key)
        except Exception:  # an unreadable property (e.g. NPU without a device) is just absent
            continue
    return values
