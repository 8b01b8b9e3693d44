"""Preprocess -> infer -> postprocess pipelines, zero-copy or copy mode, one frame, a stream, or two processes."""

import warnings
from typing import Any

from ..sources.image import FrameSource, ImageError, ImageNotFoundError, full_hd, load_image, sample_photo
from .pipeline import DEFAULT_MODEL, Pipeline, RunReport
from .postprocess import ClassScore, NormalisedDetection, Postprocessor, Prediction, model_kind
from .preprocess import PreprocessSpec, Preprocessor
from .timing import STAGES, StageStats, Timings

__all__ = [
    "ClassScore",
    "DEFAULT_MODEL",
    "FrameSource",
    "ImageError",
    "ImageNotFoundError",
    "NormalisedDetection",
    "Pipeline",
    "Postprocessor",
    "Prediction",
    "PreprocessSpec",
    "Preprocessor",
    "RunReport",
    "STAGES",
    "StageStats",
    "Timings",
    "full_hd",
    "load_image",
    "model_kind",
    "sample_photo",
]


def __getattr__(name: str) -> Any:
    # ``Detection`` was ``NormalisedDetection``'s name (beside YOLO's pixel ``Detections``); it stays for one release.
    if name == "Detection":
        warnings.warn(
            "npu_zc.pipeline.Detection is deprecated: it is npu_zc.pipeline.NormalisedDetection (boxes as fractions of the frame)",
            DeprecationWarning,
            stacklevel=2,
        )
        return NormalisedDetection
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
