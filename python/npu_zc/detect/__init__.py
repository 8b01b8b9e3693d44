"""Detectors: YOLO-family decode (yolo.py, results.py), metadata, ByteTrack and drawing."""

from .draw import draw
from .track import Tracker
