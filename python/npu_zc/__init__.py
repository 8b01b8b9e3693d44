"""npu_zc: zero-copy NPU inference pipelines on Linux.

Frames live in DMA-BUFs from the moment preprocessing writes them, in the
layout the NPU reads natively, until postprocessing reads the result in place.
"""

from ._core import __version__
from .buffers import (
    AutoChoice,
    BufferPool,
    CpuAccess,
    DmaBuf,
    HeapInfo,
    PoolSlot,
    alloc,
    auto_choice,
    heaps,
    recv_buffers,
    send_buffers,
)
from .capture import Camera, CameraFormat, CameraInfo, Frame, cameras
from . import runtime
from . import detect
from .detect import Detections, YoloLayout, decode_yolo
from .detect import Tracker, draw
from .pipeline import Pipeline
from .layout import (
    Converter,
    TopK,
    Transform,
    check_destination,
    convert,
    dequantize,
    frame_nbytes,
    from_float32,
    packed_to_planar,
    planar_to_packed,
    quantize,
    select_format,
    topk,
    to_float32,
)
from .runtime import CompileOptions, Session, compile_model
from .errors import (
    BufferClosedError,
    CameraBusyError,
    CameraClosedError,
    CameraDisconnectedError,
    CameraError,
    CameraFormatError,
    CameraNotFoundError,
    CameraOSError,
    CameraPermissionError,
    CameraTimeoutError,
    FramesHeldError,
    NotACameraError,
    BufferInUseError,
    BufferOSError,
    BufferPermissionError,
    DeviceNotFoundError,
    Error,
    FenceTimeoutError,
    HeapNotFoundError,
    HeapPermissionError,
    InvalidArgumentError,
    ModelError,
    DetectError,
    DetectLayoutError,
    OutOfMemoryError,
    PeerError,
    PeerTimeoutError,
    PoolExhaustedError,
)

__all__ = [
    "__version__",
    # buffers
    "AutoChoice",
    "BufferPool",
    "CpuAccess",
    "DmaBuf",
    "HeapInfo",
    "PoolSlot",
    "alloc",
    "auto_choice",
    "heaps",
    "recv_buffers",
    "send_buffers",
    # cameras
    "Camera",
    "CameraFormat",
    "CameraInfo",
    "Frame",
    "cameras",
    # layouts
    "Converter",
    "TopK",
    "Transform",
    "check_destination",
    "convert",
    "dequantize",
    "frame_nbytes",
    "from_float32",
    "packed_to_planar",
    "planar_to_packed",
    "quantize",
    "select_format",
    "topk",
    "to_float32",
    # detectors
    "detect",
    "Detections",
    "YoloLayout",
    "decode_yolo",
    "Tracker",
    "draw",
    # pipeline
    "Pipeline",
    # runtime (OpenVINO is imported on first use)
    "runtime",
    "CompileOptions",
    "Session",
    "compile_model",
    # errors
    "BufferClosedError",
    "CameraBusyError",
    "CameraClosedError",
    "CameraDisconnectedError",
    "CameraError",
    "CameraFormatError",
    "CameraNotFoundError",
    "CameraOSError",
    "CameraPermissionError",
    "CameraTimeoutError",
    "FramesHeldError",
    "NotACameraError",
    "BufferInUseError",
    "BufferOSError",
    "BufferPermissionError",
    "DeviceNotFoundError",
    "Error",
    "FenceTimeoutError",
    "HeapNotFoundError",
    "HeapPermissionError",
    "InvalidArgumentError",
    "ModelError",
    "DetectError",
    "DetectLayoutError",
    "OutOfMemoryError",
    "PeerError",
    "PeerTimeoutError",
    "PoolExhaustedError",
]
