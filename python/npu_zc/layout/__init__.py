"""Frame layouts: write the model input in the layout the NPU reads, read results back.

Preprocessing writes the frame straight into the buffer the NPU will read,
already in its native layout, so nothing is converted or copied later::

    import npu_zc
    from npu_zc.layout import convert, select_format, frame_nbytes

    fmt = select_format("bf16", "NHWC", 4)                 # "RGBx_BF16"
    buf = npu_zc.alloc(frame_nbytes(fmt, 224, 224))
    convert(bgr, buf, "BGR", fmt,                           # bgr: (224, 224, 3) uint8
            mean=(123.675, 116.28, 103.53), scale=(58.395, 57.12, 57.375))

:func:`convert` checks every argument on every call, which can cost more than
converting a small frame (with the caches cold, right after an inference).
Converting frames of one size again and again, bind
the arguments once: a :class:`Converter` checks them when it is made, then
each call only checks that its arrays are like ones it has already checked::

    to_input = Converter("BGR", fmt, 224, 224, mean=(123.675, 116.28, 103.53),
                         scale=(58.395, 57.12, 57.375), threads=1)
    to_input(bgr, buf)                                      # every frame

:class:`TopK` does the same for :func:`topk` on the way back.

A frame of another size is resized in the same pass (OpenCV's bilinear, area
or nearest; stretched, letterboxed or centre-cropped; from a ROI; into a
rectangle of the destination), and :func:`convert` returns a
:class:`Transform` that maps boxes back to the source frame::

    t = convert(bgr_1080p, buf_224, "BGR", fmt, interpolation="area", fit="crop", mean=..., scale=...)
    t.to_source(boxes)

Format names follow AMD VART (and VVAS for the 3-channel ones). Sources:
``BGR``, ``RGB``, ``BGRA``, ``RGBA``, ``GRAY``, ``NV12`` and the camera formats
``YUYV``, ``UYVY`` (packed 4:2:2) and ``I420`` (planar 4:2:0), decoded bit-exactly
as OpenCV's ``cvtColor`` does (and ``RGBx``/``BGRx``, read like RGBA/BGRA), and
10-bit ``P010`` and ``I010`` (FFmpeg's p010le and yuv420p10le, uint16 samples).
Destinations: the packed HW layouts ``RGBx``, ``BGRx``
(u8), ``RGBx_BF16``, ``RGBx_FP16``, ``RGBx_I8`` (and ``RGB_I8``: int8, with the
model input's ``quant_scale`` and ``zero_point``); the planar CPU layouts ``RGBP_FLOAT`` (f32),
``RGBP_FP16``, ``BGRP_FLOAT``, ``BGRP_FP16``; and 3-channel packed ``RGB``,
``BGR`` (u8) and ``RGB_FLOAT``, ``BGR_FLOAT`` (f32) for NHWC CPU inputs.

Normalisation is ``(x - mean) / scale`` per channel, in f32, with ``mean`` and
``scale`` in the destination's channel order; results are bit-exact with the
same arithmetic in numpy followed by a round-to-nearest-even cast (ml_dtypes
for bfloat16). Every argument is checked before anything is written.

bfloat16 arrays are ``ml_dtypes.bfloat16`` (or raw ``uint16`` bits); float16
arrays are ``numpy.float16`` (or ``uint16``). A destination may also be any
object with a ``.map()`` method returning a writable uint8 array (a
:class:`npu_zc.DmaBuf`).
"""

from __future__ import annotations

from ._checks import DESTINATION_FORMATS, SOURCE_FORMATS
from .converter import Converter
from .frames import check_destination, convert, describe_conversion, frame_nbytes, select_format, simd_levels
from .geometry import Transform
from .results import TopK, dequantize, from_float32, packed_to_planar, planar_to_packed, quantize, to_float32, topk

__all__ = [
    "Converter",
    "DESTINATION_FORMATS",
    "SOURCE_FORMATS",
    "TopK",
    "Transform",
    "check_destination",
    "convert",
    "dequantize",
    "describe_conversion",
    "frame_nbytes",
    "from_float32",
    "packed_to_planar",
    "planar_to_packed",
    "quantize",
    "select_format",
    "simd_levels",
    "to_float32",
    "topk",
]
