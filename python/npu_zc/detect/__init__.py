"""Detectors: YOLO outputs decoded in place by Ultralytics' rules
(:func:`decode_yolo`, :class:`YoloLayout`) into :class:`Detections`."""

from .results import Detections
from .yolo import YoloLayout, decode_yolo

__all__ = ["Detections", "YoloLayout", "decode_yolo"]
