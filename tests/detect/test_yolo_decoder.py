"""YoloDecoder (decode_yolo with its settings checked once) and the pipeline's decoders per frame geometry:
the same detections as a fresh decode, frame after frame, whatever the order of frame sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from npu_zc import Transform, YoloLayout, decode_yolo
from npu_zc.detect import YoloDecoder
from npu_zc.pipeline import Pipeline


FIXTURES = Path(__file__).parent / "fixtures"


def same(a, b) -> None:  # type: ignore[no-untyped-def]
    np.testing.assert_array_equal(a.xyxy, b.xyxy)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.class_ids, b.class_ids)
    assert dict(a.names) == dict(b.names) and a.task == b.task


def test_a_decoder_decodes_frame_after_frame_as_decode_yolo() -> None:
    f = np.load(FIXTURES / "detect_synth.npz")
    out = f["output"]
    layout = YoloLayout.from_outputs([out.shape])
    t = Transform((0.5, 0.5), (0.0, 40.0), (0, 40, 320, 240), (0, 0, 320, 320), (0, 0, 640, 480))
    names = {i: f"c{i}" for i in range(80)}
    decoder = YoloDecoder(layout, conf=0.3, transform=t, names=names)
    rng = np.random.default_rng(0)
    for _ in range(3):
        frame_out = out.copy()
        frame_out[0, 4:] *= rng.uniform(0.8, 1.2, frame_out[0, 4:].shape).astype(np.float32)
        a, b = decoder([frame_out]), decode_yolo([frame_out], layout, conf=0.3, transform=t, names=names)
        assert len(a) > 10
        same(a, b)
        half = frame_out.astype(np.float16)  # another dtype: its element checked the first time
        same(decoder(half), decode_yolo([half], layout, conf=0.3, transform=t, names=names))
    with pytest.raises(TypeError):
        a.names[0] = "x"  # type: ignore[index]  # shared by every frame: read-only
    with pytest.raises(ValueError, match="conf"):
        YoloDecoder(layout, conf=2.0)


def test_frames_of_alternating_sizes_keep_their_own_geometry(tmp_path: Path) -> None:
    pytest.importorskip("openvino")
    pytest.importorskip("cv2")  # the frames are drawn with OpenCV (the portable aarch64 run has neither)
    from conftest import save_red_square_yolo
    from test_yolo_pipeline import red_squares_frame

    red_square_yolo = save_red_square_yolo(tmp_path / "red_square_openvino_model")
    sizes = [(1280, 720), (640, 640), (960, 1280), (1280, 720), (960, 1280)]
    anchors = [(20, 20), (24, 18)]  # near the centre: inside the image for every frame size
    with Pipeline(red_square_yolo, "CPU") as shared:
        for size in sizes:
            frame, _ = red_squares_frame(size, anchors)
            got = shared.process(frame)
            with Pipeline(red_square_yolo, "CPU") as fresh:
                want = fresh.process(frame)
            assert len(got) == len(anchors)
            same(got, want)
            assert (got.xyxy[:, 2] <= size[0]).all() and (got.xyxy[:, 3] <= size[1]).all()


@settings(max_examples=200, deadline=None)
@given(fw=st.integers(8, 4000), fh=st.integers(8, 4000), model=st.sampled_from([(640, 640), (320, 320), (1024, 576)]))
def test_boxes_map_back_with_ultralytics_scale_boxes(fw: int, fh: int, model: tuple[int, int]) -> None:
    """Ultralytics 8.4.190's ``ops.scale_boxes(img1_shape, boxes, img0_shape)`` (``ratio_pad=None``), written
    out: the decode's geometry and the preprocess's own letterbox Transform are its numbers exactly."""
    from npu_zc.layout import Converter
    from npu_zc.pipeline.yolo_postprocess import ultralytics_transform

    iw, ih = model
    gain = min(ih / fh, iw / fw)
    new_h, new_w = (max(round(x * gain), 1) for x in (fh, fw))
    gain_y, gain_x = new_h / fh, new_w / fw
    pad_x, pad_y = round((iw - new_w) / 2 - 0.1), round((ih - new_h) / 2 - 0.1)
    letterbox = Converter("BGR", "RGBx", iw, ih, src_size=(fw, fh), fit="letterbox", fill=114).transform
    for t in (ultralytics_transform(letterbox, (fw, fh), (iw, ih)), letterbox):
        assert t.scale == (gain_x, gain_y) and t.offset == (pad_x, pad_y)
