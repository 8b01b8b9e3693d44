"""A tiny classifier for camera tests on an emulated CPU (where EfficientNet-Lite0
takes about a minute a frame): which of vivid's eight colour bars the picture
is closest to on average. [1, 3, 224, 224] f32 RGB in, [1, 8] logits out."""

from __future__ import annotations

import numpy as np

BARS_RGB = [(191, 191, 191), (191, 191, 0), (0, 191, 191), (0, 191, 0), (191, 0, 191), (191, 0, 0), (0, 0, 191), (0, 0, 0)]


def colour_bar_classifier():  # type: ignore[no-untyped-def]
    import openvino as ov
    import openvino.opset13 as ops

    image = ops.parameter([1, 3, 224, 224], np.float32, name="image")
    mean = ops.reduce_mean(image, ops.constant(np.array([2, 3], np.int64)), keep_dims=False)  # [1, 3]
    bars = np.asarray(BARS_RGB, np.float32).T / 255.0  # [3, 8]
    logits = ops.matmul(mean, ops.constant(bars), False, False)  # [1, 8]
    return ov.Model([ops.result(logits)], [image], "colour-bars")
