"""npu_zc.draw on a real photo: box edges in the class colour, labels, masks tinted at half opacity,
keypoints and the COCO skeleton, rotated boxes; bad frames refused."""

from __future__ import annotations

import numpy as np
import pytest

import npu_zc
from npu_zc.detect.draw import MASK_ALPHA, _KPT_BGR, color
from npu_zc.pipeline import sample_photo


def detections(**extra: object) -> npu_zc.Detections:
    return npu_zc.Detections(
        np.array([[60, 80, 300, 400], [320, 100, 480, 260]], np.float32),
        np.array([0.91, 0.42], np.float32),
        np.array([0, 5], np.int32),
        {0: "person", 5: "bus"},
        **extra,  # type: ignore[arg-type]
    )


def close(pixels: np.ndarray, bgr: tuple[int, int, int], tolerance: int = 40) -> np.ndarray:
    return np.abs(pixels.astype(int) - bgr).sum(axis=-1) < tolerance


def test_boxes_and_labels() -> None:
    photo = sample_photo("astronaut")
    frame = photo.copy()
    out = npu_zc.draw(frame, detections())
    assert out is frame  # in place
    lw = max(round(sum(photo.shape) / 2 * 0.003), 2)
    # Left and bottom edges of each box, away from the label, in the class colour.
    assert close(frame[150:390, 60], color(0)).mean() > 0.9
    assert close(frame[400, 80:290], color(0)).mean() > 0.9
    assert close(frame[150:250, 480], color(5)).mean() > 0.9
    # Inside the box, away from its edges: the photo untouched.
    np.testing.assert_array_equal(frame[150:380, 60 + lw + 2 : 290], photo[150:380, 60 + lw + 2 : 290])
    # The label: a filled block above the box's top-left corner, with text in it.
    block = frame[80 - 12 : 80 - 2, 62:120]
    assert close(block, color(0)).mean() > 0.4 and not close(block, color(0)).all()
    without = photo.copy()
    npu_zc.draw(without, detections(), labels=False)
    assert (without[60:78, 62:120] == photo[60:78, 62:120]).all()


def test_track_ids_in_labels_change_pixels() -> None:
    photo = sample_photo("astronaut")
    plain = npu_zc.draw(photo.copy(), detections())
    tracked = npu_zc.draw(photo.copy(), detections(track_ids=np.array([7, 12], np.int64)))
    assert (plain[55:80, 60:220] != tracked[55:80, 60:220]).any()  # "id:7 person 0.91" is longer


def test_masks_are_tinted_at_half_opacity() -> None:
    photo = sample_photo("astronaut")
    masks = np.zeros((2, *photo.shape[:2]), bool)
    masks[0, 200:260, 120:200] = True
    frame = npu_zc.draw(photo.copy(), detections(masks=masks, task="segment"), labels=False)
    expected = np.round(photo[200:260, 120:200] * (1 - MASK_ALPHA) + np.array(color(0)) * MASK_ALPHA)
    np.testing.assert_array_equal(frame[200:260, 120:200], expected.astype(np.uint8))
    np.testing.assert_array_equal(frame[270:300, 120:200], photo[270:300, 120:200])
    untinted = npu_zc.draw(photo.copy(), detections(masks=masks, task="segment"), masks=False, labels=False)
    np.testing.assert_array_equal(untinted[200:260, 120:200], photo[200:260, 120:200])
    with pytest.raises(npu_zc.InvalidArgumentError, match="frame"):
        npu_zc.draw(np.zeros((100, 100, 3), np.uint8), detections(masks=masks, task="segment"))


def test_keypoints_and_skeleton() -> None:
    photo = sample_photo("astronaut")
    kpts = np.zeros((2, 17, 3), np.float32)
    kpts[0, :, 0] = np.linspace(100, 260, 17)
    kpts[0, :, 1] = np.linspace(120, 380, 17)
    kpts[0, :, 2] = 0.9
    kpts[0, 3, 2] = 0.1  # not visible: not drawn
    frame = npu_zc.draw(photo.copy(), detections(keypoints=kpts, task="pose"), labels=False)
    for k in (0, 8, 16):
        x, y = int(kpts[0, k, 0]), int(kpts[0, k, 1])
        assert close(frame[y, x], _KPT_BGR[k], 10)
    x, y = int(kpts[0, 3, 0]), int(kpts[0, 3, 1])
    assert not close(frame[y, x], _KPT_BGR[3], 10)
    assert (frame != photo).any(axis=2).sum() > 17 * 20  # dots and limbs


def test_rotated_boxes() -> None:
    photo = sample_photo("astronaut")
    xywhr = np.array([[250, 250, 200, 100, np.pi / 2], [400, 400, 50, 50, 0]], np.float32)
    frame = npu_zc.draw(photo.copy(), detections(xywhr=xywhr, task="obb"), labels=False)
    # Turned a quarter: 100 wide, 200 high, centred at (250, 250).
    assert close(frame[180:320, 200], color(0)).mean() > 0.9
    assert close(frame[180:320, 300], color(0)).mean() > 0.9
    np.testing.assert_array_equal(frame[160:340, 205:295][10:-10], photo[160:340, 205:295][10:-10])


def test_bad_frames() -> None:
    with pytest.raises(npu_zc.InvalidArgumentError, match="BGR frame"):
        npu_zc.draw(np.zeros((10, 10), np.uint8), detections())
    with pytest.raises(npu_zc.InvalidArgumentError, match="BGR frame"):
        npu_zc.draw(np.zeros((10, 10, 3), np.float32), detections())
    frozen = np.zeros((10, 10, 3), np.uint8)
    frozen.flags.writeable = False
    with pytest.raises(npu_zc.InvalidArgumentError, match="writable"):
        npu_zc.draw(frozen, detections())
    empty = npu_zc.Detections.empty()
    frame = np.zeros((10, 10, 3), np.uint8)
    assert (npu_zc.draw(frame, empty) == 0).all()
