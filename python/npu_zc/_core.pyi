# Type stubs of the extension module npu_zc._core (the Rust core).
# Checked in CI with mypy.stubtest against the built module.

__version__: str

# --- buffers ---

# --- layout ---

import numpy as np

def convert(
    src: np.ndarray,
    src_format: str,
    dst: np.ndarray,
    dst_format: str,
    width: int,
    height: int,
    *,
    src_pitch: int | None = None,
    dst_pitch: int | None = None,
    uv: np.ndarray | None = None,
    uv_pitch: int | None = None,
    mean: tuple[float, float, float] | None = None,
    scale: tuple[float, float, float] | None = None,
    pad: float = 0.0,
    threads: int | None = None,
    simd: str | None = None,
) -> None: ...
def describe_conversion(
    src_format: str,
    dst_format: str,
    *,
    mean: tuple[float, float, float] | None = None,
    scale: tuple[float, float, float] | None = None,
    pad: float = 0.0,
    simd: str | None = None,
) -> str: ...
def simd_levels() -> tuple[list[str], str]: ...
def format_names() -> tuple[list[str], list[str]]: ...
def format_name(name: str) -> str: ...
def frame_nbytes(format: str, width: int, height: int, stride: int | None = None) -> int: ...
def select_format(element_type: str, layout: str, channels: int, bgr: bool = False) -> str: ...
def quantize(
    src: np.ndarray, dst: np.ndarray, scale: list[float], zero_point: list[int], inner: int, simd: str | None = None
) -> None: ...
def dequantize(
    src: np.ndarray, dst: np.ndarray, scale: list[float], zero_point: list[int], inner: int, simd: str | None = None
) -> None: ...
def to_float32(src: np.ndarray, element: str, dst: np.ndarray, simd: str | None = None) -> None: ...
def from_float32(src: np.ndarray, dst: np.ndarray, element: str, simd: str | None = None) -> None: ...
def packed_to_planar(src: np.ndarray, element: str, channels: int, dst: np.ndarray, planes: int) -> None: ...
def planar_to_packed(src: np.ndarray, planes: int, dst: np.ndarray, element: str, channels: int, pad: float) -> None: ...
def topk(src: np.ndarray, element: str, row_len: int, k: int) -> tuple[np.ndarray, np.ndarray]: ...
