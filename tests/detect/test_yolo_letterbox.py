"""The YOLO preprocess equals Ultralytics' LetterBox to the bit: npu_zc.convert(fit="letterbox", fill=114)
against Ultralytics' formula (data/augment.py LetterBox, static export: centred, no stride padding)
reproduced with cv2 here."""

from __future__ import annotations

import cv2
import numpy as np
from hypothesis import given, settings, strategies as st

import npu_zc
from npu_zc.pipeline.yolo_postprocess import ultralytics_transform
from conftest import ultralytics_letterbox


@settings(max_examples=40, deadline=None)
@given(
    height=st.integers(8, 1500),
    width=st.integers(8, 1500),
    model=st.sampled_from([(640, 640), (512, 512), (384, 640), (640, 480), (1024, 1024)]),
    seed=st.integers(0, 2**32 - 1),
)
def test_letterbox_equals_ultralytics_to_the_bit(height: int, width: int, model: tuple[int, int], seed: int) -> None:
    img = np.random.default_rng(seed).integers(0, 256, (height, width, 3), np.uint8)
    expected, gain, (left, top) = ultralytics_letterbox(img, model)
    dst = np.zeros((*model, 4), np.uint8)
    transform = npu_zc.convert(img, dst, "BGR", "RGBx", fit="letterbox", fill=114, interpolation="bilinear")
    np.testing.assert_array_equal(dst[..., :3], expected[..., ::-1])  # RGB, as the model reads it
    assert tuple(transform.rect)[:2] == (left, top)  # the image where Ultralytics puts it
    # Boxes go back as Ultralytics' scale_boxes (ultralytics/utils/ops.py, 8.4.190, ratio_pad=None) does,
    # written out here verbatim: per-axis gains of the rounded letterbox size (older releases divided by
    # the single gain).
    img1_shape, img0_shape = model, (height, width)
    gain = min(img1_shape[0] / img0_shape[0], img1_shape[1] / img0_shape[1])
    new_h, new_w = (max(round(x * gain), 1) for x in img0_shape[:2])
    gain_y, gain_x = new_h / img0_shape[0], new_w / img0_shape[1]
    pad_x, pad_y = round((img1_shape[1] - new_w) / 2 - 0.1), round((img1_shape[0] - new_h) / 2 - 0.1)
    boxes = np.random.default_rng(seed).uniform(0, max(model), (20, 4))
    expected_boxes = (boxes - [pad_x, pad_y, pad_x, pad_y]) / [gain_x, gain_y, gain_x, gain_y]
    geometry = ultralytics_transform(transform, (width, height), (model[1], model[0]))
    np.testing.assert_allclose(geometry.to_source(boxes), expected_boxes, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(transform.to_source(boxes), expected_boxes, rtol=1e-12, atol=1e-9)
