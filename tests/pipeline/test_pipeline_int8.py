"""Quantised models through the pipeline: the model's scale and zero point reach the preprocess.

The models (tests/int8_models.py) are built here: an f32 input behind a
FakeQuantize (made an i8 input that reads RGBx_I8) and an i8 input with its
dequantisation. The pipeline's input buffer must equal ``convert(...,
"RGBx_I8")`` with the numbers passed by hand, and its scores the original
float model's on the same image, within the quantisation's own tolerance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (a dependency of npu_zc)")

from npu_zc import ModelError, layout  # noqa: E402
from npu_zc.pipeline import Pipeline, PreprocessSpec  # noqa: E402
from npu_zc.pipeline.preprocess import InputWriter  # noqa: E402
from npu_zc.runtime import CompileOptions  # noqa: E402
from int8_models import MEAN, SCALE, SIZE, normalised, one_step_bound, quantised, quantised_classifier, run  # noqa: E402

F32 = CompileOptions(inference_precision="f32", num_threads=1)


def frame(seed: int, size: tuple[int, int] = (SIZE, SIZE)) -> np.ndarray:
    """A smooth random BGR frame (a blurred noise image: neighbouring pixels alike, as in a photo)."""
    noise = np.random.default_rng(seed).integers(0, 256, (*size, 3), np.uint8)
    return np.asarray(cv2.GaussianBlur(noise, (5, 5), 1.0))


@pytest.mark.parametrize("color", ["RGB", "BGR"])
@pytest.mark.parametrize("kind, zero_point", [("fake-quantize", -27), ("fake-quantize", 0), ("dequantisation", 9)])
def test_the_pipeline_quantises_with_the_models_numbers(kind: str, zero_point: int, color: str) -> None:
    scale = 1 / 48
    model = quantised_classifier(kind, scale=scale, zero_point=zero_point, color=color)  # type: ignore[arg-type]
    with Pipeline(model, "CPU", fit="stretch", options=F32) as pipeline:
        assert pipeline.spec.format == "RGBx_I8" and pipeline.input.dtype == np.int8
        assert (pipeline.spec.quant_scale, pipeline.spec.zero_point) == (pytest.approx(scale), zero_point)
        # Normalised by the preprocess, in RGBx_I8's RGB order (the model's numbers are in its own order).
        order = slice(None, None, 1 if color == "RGB" else -1)
        assert pipeline.spec.mean == MEAN[order] and pipeline.spec.scale == SCALE[order]
        image = frame(5)
        pipeline.process(image)
        # The input buffer: exactly what convert writes with the numbers passed by hand.
        by_hand = np.zeros((1, SIZE, SIZE, 4), np.int8)
        layout.convert(image, by_hand, "BGR", "RGBx_I8", mean=MEAN[order], scale=SCALE[order],
                       quant_scale=pipeline.spec.quant_scale, zero_point=zero_point)  # fmt: skip
        np.testing.assert_array_equal(pipeline.input, by_hand)
        model_order = quantised(normalised(image, color), scale, zero_point)  # type: ignore[arg-type]
        np.testing.assert_array_equal(by_hand[0, ..., :3], model_order[..., order])
        # The scores: the original model's on the same image (floats for a FakeQuantize'd input, numpy's bytes for an i8 one).
        x = normalised(image, color).transpose(2, 0, 1)[None]  # type: ignore[arg-type]
        want = run(model, quantised(x, scale, zero_point) if kind == "dequantisation" else x)
        got = pipeline.outputs[0].copy()  # not a view: the pipeline closes its buffers
        assert np.abs(got - want).max() <= one_step_bound(scale) / 4, (got, want)


def test_a_resized_frame_is_quantised_like_a_resize_by_hand() -> None:
    model = quantised_classifier("fake-quantize")
    image = frame(6, (48, 64))
    with Pipeline(model, "CPU", fit="stretch", options=F32) as pipeline:
        pipeline.process(image)
        q = pipeline.session.quantisation
        assert q is not None
        by_hand = np.zeros((1, SIZE, SIZE, 4), np.int8)
        layout.convert(image, by_hand, "BGR", "RGBx_I8", mean=MEAN, scale=SCALE, **q.converter_args())
        np.testing.assert_array_equal(pipeline.input, by_hand)
        # Against the float model on the same resize (the frame as the model sees it, BGR u8).
        want = run(model, normalised(pipeline.preprocess.resized).transpose(2, 0, 1)[None])
        assert np.abs(pipeline.outputs[0] - want).max() <= one_step_bound(q.scale) / 4


def test_the_fake_quantize_model_answers_as_the_float_model_does() -> None:
    """The int8 pipeline and the float pipeline of the same FakeQuantize'd model agree on the top class."""
    model = quantised_classifier("fake-quantize")
    with Pipeline(model, "CPU", fit="stretch", options=F32) as int8, \
            Pipeline(model, "CPU", fit="stretch", hw_format="RGBx", options=F32) as floats:  # fmt: skip
        assert (int8.spec.format, floats.spec.format) == ("RGBx_I8", "RGBx")
        for seed in range(4):
            image = frame(10 + seed)
            assert int8.process(image)[0].index == floats.process(image)[0].index
            assert np.abs(int8.outputs[0] - floats.outputs[0]).max() <= one_step_bound(1 / 48) / 4


def test_a_preprocess_spec_needs_the_numbers_for_int8_and_refuses_them_otherwise() -> None:
    with pytest.raises(ModelError, match="RGBx_I8 layout needs quant_scale"):
        PreprocessSpec("RGBx_I8", (1, SIZE, SIZE, 4), SIZE, SIZE)
    with pytest.raises(ModelError, match="RGBx layout takes no quant_scale"):
        PreprocessSpec("RGBx", (1, SIZE, SIZE, 4), SIZE, SIZE, quant_scale=0.1)
    spec = PreprocessSpec("RGBx_I8", (1, SIZE, SIZE, 4), SIZE, SIZE, mean=MEAN, scale=SCALE, quant_scale=0.02, zero_point=-5)
    assert PreprocessSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec  # what the producer process gets
    image = frame(8)
    written = np.zeros(spec.shape, np.int8)
    InputWriter(spec, image)(written)
    by_hand = np.zeros(spec.shape, np.int8)
    layout.convert(image, by_hand, "BGR", "RGBx_I8", mean=MEAN, scale=SCALE, quant_scale=0.02, zero_point=-5)
    np.testing.assert_array_equal(written, by_hand)


@pytest.mark.parametrize("photo", ["coffee", "chelsea"])
def test_a_real_classifier_quantised_on_its_input_answers_as_the_float_one(photo: str) -> None:
    """EfficientNet-Lite0 with NNCF's kind of input FakeQuantize: the int8 pipeline gives the float model's answer.

    Its normalisation (x - 127) / 128 puts every pixel value on a level of that FakeQuantize (step 1/128,
    zero point -1), so the int8 input loses nothing here: the logits are the unquantised model's."""
    from int8_models import with_input_fake_quantize
    from npu_zc.pipeline import sample_photo
    from npu_zc.runtime import model_normalisation, read_model

    pytest.importorskip("skimage", reason="scikit-image (the sample photos) is not installed (the [demo] extra)")
    norm = model_normalisation(read_model("efficientnet-lite0"))
    model, step, zero_point = with_input_fake_quantize(read_model("efficientnet-lite0"), norm.mean, norm.scale)
    image = sample_photo(photo)
    with Pipeline(model, "CPU", options=F32) as int8, Pipeline("efficientnet-lite0", "CPU", options=F32) as floats:
        assert int8.spec.format == "RGBx_I8" and int8.session.quantisation is not None
        assert int8.session.quantisation.zero_point == zero_point
        got, want = int8.process(image), floats.process(image)
        assert (step, zero_point) == (pytest.approx(1 / 128), -1)
        assert [c.index for c in got] == [c.index for c in want]
        np.testing.assert_allclose(int8.outputs[0], floats.outputs[0], atol=1e-4)
