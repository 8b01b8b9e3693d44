"""Drawing detections onto a BGR frame with OpenCV: boxes, labels with scores and track ids, masks,
keypoints (and the COCO skeleton), rotated boxes. Colours, line width and label layout follow
Ultralytics' ``Annotator`` so that a picture looks like the one ``yolo predict`` saves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidArgumentError

if TYPE_CHECKING:
    from .results import Detections

# Ultralytics' palette (ultralytics/utils/plotting.py Colors), as RGB hex; drawn as BGR.
_HEX = (
    "042AFF 0BDBEB F3F3F3 00DFB7 111F68 FF6FDD FF444F CCED00 00F344 BD00FF "
    "00B4FF DD00BA 00FFFF 26C000 01FFB3 7D24FF 7B0068 FF1B6C FC6D2F A2FF0B"
).split()
PALETTE_BGR = tuple((int(h[4:6], 16), int(h[2:4], 16), int(h[0:2], 16)) for h in _HEX)

_POSE_RGB = np.array(
    [[255, 128, 0], [255, 153, 51], [255, 178, 102], [230, 230, 0], [255, 153, 255], [153, 204, 255],
     [255, 102, 255], [255, 51, 255], [102, 178, 255], [51, 153, 255], [255, 153, 153], [255, 102, 102],
     [255, 51, 51], [153, 255, 153], [102, 255, 102], [51, 255, 51], [0, 255, 0], [0, 0, 255],
     [255, 0, 0], [255, 255, 255]]
)
# COCO's 17-keypoint skeleton (1-based, as Ultralytics lists it) and its colours.
SKELETON = (
    (16, 14), (14, 12), (17, 15), (15, 13), (12, 13), (6, 12), (7, 13), (6, 7), (6, 8), (7, 9),
    (8, 10), (9, 11), (2, 3), (1, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 7),
)
_LIMB_BGR = [tuple(int(c) for c in _POSE_RGB[i][::-1]) for i in (9, 9, 9, 9, 7, 7, 7, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16)]
_KPT_BGR = [tuple(int(c) for c in _POSE_RGB[i][::-1]) for i in (16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9)]
KEYPOINT_MIN_VISIBILITY = 0.25  # Ultralytics' Annotator.kpts conf_thres
MASK_ALPHA = 0.5
MAX_LINE_WIDTH = 1024


def color(index: int) -> tuple[int, int, int]:
    """The BGR colour of class ``index``."""
    return PALETTE_BGR[int(index) % len(PALETTE_BGR)]


def draw(
    frame: np.ndarray,
    result: Detections,
    *,
    labels: bool = True,
    masks: bool = True,
    keypoints: bool = True,
    line_width: int | None = None,
) -> np.ndarray:
    """Draw ``result`` onto ``frame`` (H x W x 3 uint8 BGR, written in place) and return the frame.

    Boxes reaching outside the frame are clipped to it (what lies outside is not drawn); a box, rotated box or
    keypoint with a value that is not a finite number (NaN, infinity) is skipped. ``line_width``: pixels, a
    whole number from 1 to 1024 (None: Ultralytics' default for the frame's size)."""
    import cv2

    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise InvalidArgumentError(
            f"draw takes a BGR frame (H, W, 3) uint8, got {getattr(frame, 'shape', type(frame).__name__)} "
            f"{getattr(frame, 'dtype', '')}".rstrip()
        )
    if not frame.flags.writeable or not frame.flags.c_contiguous:
        raise InvalidArgumentError("draw writes into the frame: pass a writable, C-contiguous array (a copy)")
    if line_width is not None and (
            not isinstance(line_width, (int, np.integer)) or isinstance(line_width, bool) or not 1 <= line_width <= MAX_LINE_WIDTH):
        raise InvalidArgumentError(f"line_width is a whole number of pixels from 1 to {MAX_LINE_WIDTH}, got {line_width!r}")
    height, width = frame.shape[:2]
    lw = int(line_width) if line_width is not None else max(round((height + width + 3) / 2 * 0.003), 2)
    # Coordinates beyond the frame by more than a line's width draw nothing more: clipped there, so that
    # OpenCV's integer coordinates hold them.
    margin = lw + 1
    n = len(result)
    classes = np.asarray(result.class_ids).reshape(-1)
    if masks and getattr(result, "masks", None) is not None and n:
        _masks(frame, np.asarray(result.masks), classes)
    xywhr = getattr(result, "xywhr", None)
    boxes = np.asarray(result.xyxy, np.float64).reshape(-1, 4)
    lo, hi = np.array([-margin, -margin]), np.array([width + margin, height + margin])
    for i in range(n):
        c = color(int(classes[i]))
        if xywhr is not None:
            cx, cy, w, h, r = (float(v) for v in xywhr[i])
            if not all(np.isfinite((cx, cy, w, h, r))):
                continue
            corners = cv2.boxPoints(((cx, cy), (w, h), np.degrees(r))).astype(np.float64)
            if not np.isfinite(corners).all():
                continue
            # OpenCV takes int32 points: corners further out than a few frame sizes are clipped there (a box
            # that large is drawn approximately; one inside the frame exactly).
            reach = 4.0 * (width + height)
            corners = corners.clip(-reach, reach)
            cv2.polylines(frame, [np.round(corners).astype(np.int32)], True, c, lw, cv2.LINE_AA)
            top = corners[np.argmin(corners[:, 1] * 1e4 + corners[:, 0])].clip(lo, hi)
            anchor = (int(top[0]), int(top[1]))
        else:
            if not np.isfinite(boxes[i]).all():
                continue
            x1, y1, x2, y2 = (int(round(v)) for v in np.concatenate([boxes[i, :2].clip(lo, hi), boxes[i, 2:].clip(lo, hi)]))
            cv2.rectangle(frame, (x1, y1), (x2, y2), c, lw, cv2.LINE_AA)
            anchor = (x1, y1)
        if labels:
            _label(frame, _text(result, i), anchor, c, lw)
    kpts = getattr(result, "keypoints", None)
    if keypoints and kpts is not None and n:
        _keypoints(frame, np.asarray(kpts, np.float64), lw)
    return frame


def _text(result: Any, i: int) -> str:
    class_id = int(result.class_ids[i])
    name = result.names.get(class_id, str(class_id)) if result.names else str(class_id)
    tracks = getattr(result, "track_ids", None)
    prefix = f"id:{int(tracks[i])} " if tracks is not None else ""
    return f"{prefix}{name} {float(result.scores[i]):.2f}"


def _label(frame: np.ndarray, text: str, anchor: tuple[int, int], c: tuple[int, int, int], lw: int) -> None:
    """A filled label above the box (inside it when there is no room above), as Ultralytics'."""
    import cv2

    thickness = max(lw - 1, 1)
    scale = lw / 3
    (w, h), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thickness)
    h += 3
    x, y = anchor
    outside = y >= h
    if x > frame.shape[1] - w:
        x = frame.shape[1] - w
    top = (x, y - h if outside else y)
    bottom = (x + w, y if outside else y + h)
    cv2.rectangle(frame, top, bottom, c, -1, cv2.LINE_AA)
    ink = (0, 0, 0) if 0.114 * c[0] + 0.587 * c[1] + 0.299 * c[2] > 160 else (255, 255, 255)  # dark ink on light colours
    baseline = y - 2 if outside else y + h - 1
    cv2.putText(frame, text, (x, baseline), cv2.FONT_HERSHEY_SIMPLEX, scale, ink, thickness, cv2.LINE_AA)


def _masks(frame: np.ndarray, masks: np.ndarray, classes: np.ndarray) -> None:
    """Each mask tinted with its class colour at half opacity (masks in frame pixels, (n, H, W))."""
    if masks.shape[1:] != frame.shape[:2]:
        raise InvalidArgumentError(f"masks are {masks.shape[1:]} pixels, the frame {frame.shape[:2]}: draw on the frame the result was made for")
    for mask, class_id in zip(masks, classes):
        where = mask.astype(bool, copy=False)
        if not where.any():
            continue
        tint = np.array(color(class_id), np.float32)
        pixels = frame[where].astype(np.float32)
        frame[where] = np.round(pixels * (1 - MASK_ALPHA) + tint * MASK_ALPHA).astype(np.uint8)


def _keypoints(frame: np.ndarray, kpts: np.ndarray, lw: int) -> None:
    """Keypoints as dots; for 17-keypoint (COCO) poses the skeleton too."""
    import cv2

    height, width = frame.shape[:2]
    radius = max(lw, 2) + 1
    coco = kpts.shape[1] == 17
    for person in kpts:
        visible = person[:, 2] >= KEYPOINT_MIN_VISIBILITY if person.shape[1] == 3 else np.ones(len(person), bool)
        inside = (person[:, 0] > 0) & (person[:, 1] > 0) & (person[:, 0] < width) & (person[:, 1] < height)
        shown = visible & inside
        if coco:
            for (a, b), c in zip(SKELETON, _LIMB_BGR):
                if shown[a - 1] and shown[b - 1]:
                    pa = (int(person[a - 1, 0]), int(person[a - 1, 1]))
                    pb = (int(person[b - 1, 0]), int(person[b - 1, 1]))
                    cv2.line(frame, pa, pb, c, max(lw // 2, 1), cv2.LINE_AA)
        for k in np.flatnonzero(shown):
            c = _KPT_BGR[k] if coco else color(int(k))
            cv2.circle(frame, (int(person[k, 0]), int(person[k, 1])), radius, c, -1, cv2.LINE_AA)
