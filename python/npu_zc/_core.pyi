# Type stubs of the extension module npu_zc._core (the Rust core).
# Checked in CI with mypy.stubtest against the built module.

__version__: str

# --- buffers ---
import socket
from types import TracebackType
from typing import Any, Literal, NoReturn, final

import numpy as np
import numpy.typing as npt

PAGE_SIZE: int

@final
class _Mapping:
    """The base object of every view made by DmaBuf.map(): owns the mmap."""

@final
class DmaBuf:
    """A DMA-BUF (or memfd) fd owned by Python."""

    @staticmethod
    def from_fd(fd: int, *, take_ownership: bool = False, trust_size: bool = False) -> DmaBuf: ...
    @property
    def fd(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def is_dmabuf(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def views(self) -> int: ...
    def map(
        self,
        dtype: npt.DTypeLike | None = None,
        shape: int | tuple[int, ...] | None = None,
        offset: int = 0,
        *,
        writable: bool = True,
    ) -> npt.NDArray[Any]: ...
    def cpu_access(
        self, mode: Literal["read", "write", "rw"] | str = "rw", *, timeout: float | None = None
    ) -> CpuAccess: ...
    def wait(self, mode: Literal["read", "write", "rw"] | str = "read", timeout: float | None = None) -> None:
        """Wait for a device's fences (poll): "read" waits for writers, "write"/"rw" for all."""
    def export_sync_file(self, mode: Literal["read", "write", "rw"] | str = "read") -> int:
        """The fences that `mode` access waits for, as a sync_file fd you own (Linux 6.0+)."""
    def export(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> DmaBuf: ...
    def __exit__(self, *_args: object) -> bool: ...

@final
class CpuAccess:
    """DMA_BUF_IOCTL_SYNC start on enter, end on exit."""

    @property
    def mode(self) -> str: ...
    def __enter__(self) -> CpuAccess: ...
    def __exit__(self, *_args: object) -> bool: ...

@final
class HeapInfo:
    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str | None: ...
    @property
    def backend(self) -> str: ...
    @property
    def usable(self) -> bool: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def size_limit(self) -> int | None: ...

@final
class BufferPool:
    def __new__(cls, count: int, size: int, heap: str = "auto") -> BufferPool: ...
    def __len__(self) -> int: ...
    @property
    def buffers(self) -> list[DmaBuf]: ...
    @property
    def free_count(self) -> int: ...
    def state(self, index: int) -> Literal["free", "cpu", "in-flight"]: ...
    def acquire(self, timeout: float | None = None, *, block: bool = True) -> PoolSlot: ...
    def release(self, index: int) -> NoReturn:
        """Always raises InvalidArgumentError: release through the PoolSlot."""
    def close(self) -> None: ...

@final
class PoolSlot:
    @property
    def index(self) -> int: ...
    @property
    def buffer(self) -> DmaBuf: ...
    def submit(self) -> None: ...
    def release(self) -> None: ...
    def __enter__(self) -> PoolSlot: ...
    def __exit__(self, *_args: object) -> bool: ...

def alloc(size: int, heap: str = "auto") -> DmaBuf: ...
def heaps() -> list[HeapInfo]: ...
def auto_plan() -> list[tuple[str, str | None]]: ...
def send_fds(sock: socket.socket | int, buffers: list[DmaBuf], payload: bytes, *, timeout: float | None = None) -> None: ...
def recv_fds(
    sock: socket.socket | int, *, timeout: float | None = None, trust_size: bool = False
) -> tuple[list[DmaBuf], bytes]: ...


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
    dst_size: tuple[int, int] | None = None,
    roi: tuple[int, int, int, int] | None = None,
    dst_rect: tuple[int, int, int, int] | None = None,
    interpolation: str = "bilinear",
    fit: str = "stretch",
    fill: tuple[float, float, float] | None = None,
) -> _TransformTuple: ...

_Rect = tuple[int, int, int, int]
_TransformTuple = tuple[tuple[float, float], tuple[float, float], _Rect, _Rect, _Rect]

def describe_resize(
    src_format: str,
    dst_format: str,
    src_size: tuple[int, int],
    dst_size: tuple[int, int],
    *,
    mean: tuple[float, float, float] | None = None,
    scale: tuple[float, float, float] | None = None,
    pad: float = 0.0,
    simd: str | None = None,
    roi: tuple[int, int, int, int] | None = None,
    dst_rect: tuple[int, int, int, int] | None = None,
    interpolation: str = "bilinear",
    fit: str = "stretch",
    fill: tuple[float, float, float] | None = None,
) -> tuple[str, _TransformTuple]: ...
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
