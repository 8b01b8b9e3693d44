"""Preprocess -> infer -> postprocess pipelines, zero-copy or copy mode, one frame, a stream, or two processes."""

from ..sources.image import FrameSource, ImageError, ImageNotFoundError, full_hd, load_image, sample_photo
from .pipeline import DEFAULT_MODEL, Pipeline, RunReport
from .postprocess import ClassScore, Detection, Postprocessor, Prediction, model_kind
from .preprocess import PreprocessSpec, Preprocessor
from .timing import STAGES, StageStats, Timings

__all__ = [
    "ClassScore",
    "DEFAULT_MODEL",
    "Detection",
    "FrameSource",
    "ImageError",
    "ImageNotFoundError",
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
