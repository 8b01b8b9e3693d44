"""`npu-zc info`: what this machine offers — OpenVINO and its devices, DMA-BUF
heaps and whether this user may open them, udmabuf and its limit, which
allocation `heap="auto"` would take, and why, and which code paths the layout
engine takes on this CPU, and the cameras (V4L2 capture nodes) with their
formats and sizes."""

from __future__ import annotations

import json
import platform
from typing import Any

from .. import buffers, layout
from .install import install_hint

# Properties worth showing per device, when the device reports them.
_DEVICE_PROPERTIES = (
    "FULL_DEVICE_NAME",
    "DEVICE_ARCHITECTURE",
    "OPTIMIZATION_CAPABILITIES",
    "RANGE_FOR_ASYNC_INFER_REQUESTS",
    "NPU_DRIVER_VERSION",
    "NPU_COMPILER_VERSION",
    "DEVICE_GOPS",
    "NPU_DEVICE_TOTAL_MEM_SIZE",
    "NPU_MAX_TILES",
    "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
)

# What NPU users ask for by name (npu-zc run --npu-turbo / --npu-strides-for / --npu-sequential).
_NPU_OPTIONS = ("NPU_TURBO", "NPU_ENABLE_STRIDES_FOR", "RUN_INFERENCES_SEQUENTIALLY")

# How our buffers reach each kind of device, and what tells whether it reads them or a copy.
_BINDING = {
    "CPU": "host tensors over our mappings: the CPU plugin infers on them in place (checked per port by "
    "address: Session.binding_report(), the binding lines of npu-zc run)",
    "NPU": "remote tensors over our DMA-BUFs (SHARED_BUF): imported into the plugin's Level Zero context or "
    "refused, never copied; a plain host tensor it cannot import would be shadow-copied, said only at the "
    "plugin's INFO log level, which is why npu_zc binds the NPU through remote tensors only",
    "GPU": "remote tensors over our DMA-BUFs (BUFFER_FROM_HANDLE): imported or refused",
}


def collect() -> dict[str, Any]:
    """Everything `info` reports, as plain data."""
    out: dict[str, Any] = {"machine": platform.machine(), "kernel": platform.release()}
    out["openvino"] = _openvino()
    out["heaps"] = [
        {
            "name": h.name,
            "backend": h.backend,
            "path": h.path,
            "usable": h.usable,
            "reason": h.reason,
            "size_limit": h.size_limit,
        }
        for h in buffers.heaps()
    ]
    choice = buffers.auto_choice()
    out["auto"] = {"heap": choice.heap, "skipped": [{"name": n, "reason": r} for n, r in choice.skipped]}
    out["layout"] = _layout()
    out["cameras"] = _cameras()
    return out


def _cameras() -> list[dict[str, Any]]:
    """The V4L2 capture nodes, with their formats and frame sizes."""
    from ..capture import cameras

    return [
        {
            "path": c.path,
            "card": c.card,
            "driver": c.driver,
            "bus_info": c.bus_info,
            "multiplanar": c.multiplanar,
            "formats": [
                {
                    "fourcc": f.fourcc,
                    "description": f.description,
                    "compressed": f.compressed,
                    "source_format": f.source_format,
                    "sizes": [list(s) for s in f.sizes],
                    "size_range": [list(s) for s in f.size_range] if f.size_range else None,
                }
                for f in c.formats
            ],
        }
        for c in cameras()
    ]


# Conversions a pipeline typically runs, to show which kernels this CPU gets.
_CONVERSIONS = (("BGR", "RGBx"), ("BGR", "RGBx_BF16"), ("BGR", "RGBx_FP16"), ("BGR", "RGBP_FLOAT"), ("NV12", "RGBx"), ("YUYV", "RGBx"))
_IMAGENET_MEAN, _IMAGENET_STD = (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)


def _layout() -> dict[str, Any]:
    """The layout engine's code paths here, and the kernels of common conversions
    (normalised with ImageNet's mean and std where the destination is float)."""
    levels, default = layout.simd_levels()
    kernels = {}
    for src, dst in _CONVERSIONS:
        normalised = dst != "RGBx"
        kernels[f"{src}->{dst}"] = layout.describe_conversion(
            src, dst, mean=_IMAGENET_MEAN if normalised else None, scale=_IMAGENET_STD if normalised else None
        )
    return {"simd": default, "simd_available": levels, "kernels": kernels}


def _openvino() -> dict[str, Any]:
    try:
        from ..runtime import available_devices, core, openvino_version, why_unavailable
    except ImportError as e:  # a dependency, but a platform may lack its wheel
        return {"available": False, "reason": f"openvino is not installed ({e}): {install_hint('openvino')}"}
    devices: dict[str, Any] = {}
    for name in available_devices():
        props: dict[str, Any] = {}
        supported = set(core().get_property(name, "SUPPORTED_PROPERTIES"))
        for key in _DEVICE_PROPERTIES:
            if key in supported:
                try:
                    props[key] = _plain(core().get_property(name, key))
                except RuntimeError:
                    pass
        base = name.split(".")[0]
        props["binding"] = _BINDING.get(
            base, "nothing here tells whether it reads our memory: measure with npu-zc run --count-copies"
        )
        if base == "NPU":
            props["npu_options"] = {key: key in supported for key in _NPU_OPTIONS}
        devices[name] = props
    notes = []
    if "NPU" not in devices:
        notes.append(why_unavailable("NPU"))
    return {"available": True, "version": openvino_version(), "devices": devices, "notes": notes, "copies": _counter()}


def _counter() -> str:
    """Whether `npu-zc run --count-copies` can build the memcpy counter here."""
    import os
    import shutil

    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler:
        return f"npu-zc run --count-copies measures the bytes copied per frame (counter built with {compiler})"
    return "npu-zc run --count-copies needs a C compiler to build the memcpy counter: none found (apt install gcc)"


def _plain(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def render(info: dict[str, Any]) -> str:
    lines = [f"machine   {info['machine']}, Linux {info['kernel']}"]
    ov = info["openvino"]
    if ov["available"]:
        lines.append(f"openvino  {ov['version']}")
        for name, props in ov["devices"].items():
            lines.append(f"  device {name}: {props.get('FULL_DEVICE_NAME', '')}")
            for key, value in props.items():
                if key == "npu_options":
                    usable = [k for k, ok in value.items() if ok]
                    lines.append(f"    NPU options: {', '.join(usable) or 'none of ' + ', '.join(value)} supported")
                elif key == "binding":
                    lines.append(f"    binding: {value}")
                elif key != "FULL_DEVICE_NAME":
                    lines.append(f"    {key} = {value}")
        lines += [f"  note: {n}" for n in ov["notes"]]
        lines.append(f"  copies: {ov['copies']}")
    else:
        lines.append(f"openvino  not available: {ov['reason']}")
    lines.append("heaps")
    for h in info["heaps"]:
        limit = f", limit {h['size_limit'] >> 20} MiB" if h["size_limit"] and h["backend"] != "memfd" else ""
        state = "usable" if h["usable"] else f"unusable: {h['reason']}"
        lines.append(f"  {h['name']:<16} {h['backend']:<9} {state}{limit}")
    auto = info["auto"]
    lines.append(f"auto      {auto['heap']}")
    for s in auto["skipped"]:
        lines.append(f"  skipped {s['name']}: {s['reason']}")
    if auto["heap"] == "memfd":
        lines.append("  memfd is shared memory, not a DMA-BUF: fine for the CPU plugin, not importable by an NPU")
    lay = info["layout"]
    lines.append(f"layout    SIMD {lay['simd']} (this CPU: {', '.join(lay['simd_available'])}; NPU_ZC_SIMD=... to choose)")
    for conversion, kernel in lay["kernels"].items():
        lines.append(f"  {conversion:<16} {kernel}")
    if not info["cameras"]:
        lines.append("cameras   none (no V4L2 capture node under /dev that this user can open)")
    else:
        lines.append("cameras   (npu-zc stream --camera DEVICE)")
        for cam in info["cameras"]:
            api = "multi-planar" if cam["multiplanar"] else "single-planar"
            lines.append(f"  {cam['path']}: {cam['card']} ({cam['driver']}, {api})")
            names = [f["fourcc"] + ("*" if f["compressed"] else "") for f in cam["formats"]]
            lines.append(f"    formats  {' '.join(names)}" + ("  (* compressed: not convertible)" if "*" in "".join(names) else ""))
            in_place = [f["fourcc"] for f in cam["formats"] if f["source_format"]]
            if in_place:
                lines.append(f"    in place {' '.join(in_place)} (the layout engine reads these from the driver's buffer)")
            shown = next((f for f in cam["formats"] if f["fourcc"] == "YUYV"), cam["formats"][0] if cam["formats"] else None)
            if shown is not None:
                if shown["size_range"]:
                    (w0, h0), (w1, h1), (sw, sh) = shown["size_range"]
                    sizes = f"{w0}x{h0} to {w1}x{h1} step {sw}x{sh}"
                else:
                    sizes = " ".join(f"{w}x{h}" for w, h in shown["sizes"]) or "not listed"
                lines.append(f"    sizes    {sizes} ({shown['fourcc']}; --json lists every format's)")
    return "\n".join(lines)


def run(as_json: bool) -> int:
    info = collect()
    print(json.dumps(info, indent=2) if as_json else render(info))
    return 0
