"""Detectors: YOLO outputs decoded in place by Ultralytics' rules
(:func:`decode_yolo`, :class:`YoloLayout`) into :class:`Detections`; their metadata
(:mod:`.metadata`), ByteTrack (:class:`Tracker`) and drawing (:func:`draw`)."""

from .results import Detections
from .yolo import YoloDecoder, YoloLayout, decode_yolo
from .draw import draw
from .track import Tracker

__all__ = ["Detections", "YoloDecoder", "YoloLayout", "decode_yolo", "draw", "Tracker"]
