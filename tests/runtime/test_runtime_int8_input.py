"""A quantised model's input read from its graph (runtime/quantisation.py), and the model prepared to read RGBx_I8.

The models are built here with OpenVINO's opset API (tests/int8_models.py): an
i8 input with its dequantisation, an f32 input behind a FakeQuantize, and the
edge cases one int8 scale and zero point cannot express or that make no sense.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")

from npu_zc import InvalidArgumentError, ModelError, UnsupportedQuantisationError, layout  # noqa: E402
from npu_zc.runtime import InputQuantisation, input_quantisation, prepare, to_int8_input  # noqa: E402
from int8_models import (  # noqa: E402
    SIZE,
    fake_quantize_range,
    normalised,
    one_step_bound,
    quantised,
    quantised_classifier,
    run,
)


@pytest.mark.parametrize("scale, zero_point", [(1 / 48, -27), (1 / 64, 0), (0.0173, 12)])
def test_dequantisation_after_an_i8_input(scale: float, zero_point: int) -> None:
    found = input_quantisation(quantised_classifier("dequantisation", scale=scale, zero_point=zero_point))
    assert found == InputQuantisation(pytest.approx(scale, rel=1e-7), zero_point, "dequantisation")  # type: ignore[arg-type]
    assert found is not None and found.converter_args() == {"quant_scale": found.scale, "zero_point": zero_point}


@pytest.mark.parametrize("scale, zero_point", [(1 / 48, -27), (1 / 64, 0), (0.0173, 12), (0.01, 127), (0.01, -128)])
def test_fake_quantize_on_a_float_input(scale: float, zero_point: int) -> None:
    found = input_quantisation(quantised_classifier("fake-quantize", scale=scale, zero_point=zero_point))
    assert found is not None and found.source == "fake-quantize"
    assert found.zero_point == zero_point
    assert math.isclose(found.scale, scale, rel_tol=1e-6)


def test_a_float_input_without_quantisation_has_none() -> None:
    assert input_quantisation(quantised_classifier("float")) is None


def test_the_dequantisation_without_a_zero_point() -> None:
    import openvino.opset13 as ops

    image = ops.parameter([1, 3, 8, 8], ov.Type.i8, name="image")
    scores = ops.reduce_mean(ops.multiply(ops.constant(np.float32(0.5)), ops.convert(image, ov.Type.f32)),
                             ops.constant(np.array([2, 3])), False)  # fmt: skip
    found = input_quantisation(ov.Model([scores], [image]))
    assert found == InputQuantisation(0.5, 0, "dequantisation")


@pytest.mark.parametrize("kind", ["dequantisation", "fake-quantize"])
def test_per_channel_quantisation_is_refused_in_one_sentence(kind: str) -> None:
    model = quantised_classifier(kind, scale=np.array([1 / 48, 1 / 40, 1 / 50]), zero_point=-27)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedQuantisationError, match=r"quantised per channel .*one scale and zero point"):
        input_quantisation(model)


def test_fake_quantize_of_other_levels_is_refused() -> None:
    with pytest.raises(UnsupportedQuantisationError, match="255 levels: an int8 input reproduces 256 levels only"):
        input_quantisation(quantised_classifier("fake-quantize", levels=255))


def test_a_range_without_zero_has_no_int8_zero_point() -> None:
    with pytest.raises(UnsupportedQuantisationError, match="does not hold 0"):
        input_quantisation(quantised_classifier("fake-quantize", fq_range=(1.0, 3.0, 1.0, 3.0)))


@pytest.mark.parametrize(
    "fq_range, match",
    [((1.0, 1.0, 1.0, 1.0), "input_high 1.0 <= input_low 1.0: an empty range, so a zero scale"),
     ((-1.0, 1.0, 1.0, -1.0), "output_high -1.0 <= output_low 1.0"),
     ((-1.0, float("nan"), -1.0, 1.0), "input_high of input 'image' is \\[nan\\]: quantisation numbers must be finite"),
     ((-1.0, 1.0, -1.0, float("inf")), "must be finite")],
)  # fmt: skip
def test_a_broken_fake_quantize_is_one_sentence(fq_range: tuple[float, ...], match: str) -> None:
    model = quantised_classifier("fake-quantize", fq_range=fq_range)
    for read in (input_quantisation, lambda m: prepare(m, "CPU")):
        with pytest.raises(ModelError, match=match) as caught:
            read(model)
        assert not isinstance(caught.value, UnsupportedQuantisationError)
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "scale, zero_point, match",
    [(0.0, 0, "scale of input 'image' is 0.0: a quantisation scale must be greater than 0"),
     (-0.5, 0, "must be greater than 0"), (float("nan"), 0, "must be finite"),
     (0.5, 3.5, "zero point of input 'image' is 3.5: an int8 zero point is an integer from -128 to 127"),
     (0.5, 200, "is 200.0: an int8 zero point")],
)  # fmt: skip
def test_a_broken_dequantisation_is_one_sentence(scale: float, zero_point: float, match: str) -> None:
    with pytest.raises(ModelError, match=match):
        input_quantisation(quantised_classifier("dequantisation", scale=scale, zero_point=zero_point))


def test_an_i8_input_without_dequantisation_is_refused() -> None:
    import openvino.opset13 as ops

    image = ops.parameter([1, 3, 8, 8], ov.Type.i8, name="image")
    scores = ops.reduce_max(image, ops.constant(np.array([2, 3])), False)
    with pytest.raises(ModelError, match="int8, but is not followed by OpenVINO's dequantisation"):
        prepare(ov.Model([scores], [image]), "CPU")


# --- prepared to read RGBx_I8 ---------------------------------------------------


def test_the_fake_quantize_becomes_the_dequantisation_of_an_i8_input() -> None:
    original = quantised_classifier("fake-quantize")
    model, found = to_int8_input(original.clone())
    assert model.inputs[0].get_element_type() == ov.Type.i8
    assert model.inputs[0].get_names() == {"image"}
    types = [op.get_type_name() for op in model.get_ordered_ops()]
    assert "FakeQuantize" not in types and {"Convert", "Subtract", "Multiply"} <= set(types)
    # Every byte means what the FakeQuantize would have output: feed each of the 256 values.
    rng = np.random.default_rng(1)
    q = rng.permutation(np.resize(np.arange(-128, 128, dtype=np.int8), 3 * SIZE * SIZE)).reshape(1, 3, SIZE, SIZE)
    x = (q.astype(np.float32) - found.zero_point) * np.float32(found.scale)
    assert np.allclose(run(model, q), run(original, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["fake-quantize", "dequantisation"])
@pytest.mark.parametrize("nhwc", [False, True], ids=["NCHW", "NHWC"])
def test_prepare_gives_a_quantised_input_rgbx_i8(kind: str, nhwc: bool) -> None:
    prepared = prepare(quantised_classifier(kind, nhwc=nhwc), "CPU")  # type: ignore[arg-type]
    assert prepared.format == "RGBx_I8"
    assert prepared.inputs[0].shape == (1, SIZE, SIZE, 4) and prepared.inputs[0].dtype == np.int8
    assert prepared.quantisation is not None and prepared.quantisation.zero_point == -27
    assert prepared.quantisation.source == kind
    assert prepared.normalisation.mean is not None  # applied by the preprocess, not the model


@pytest.mark.parametrize("color", ["RGB", "BGR"])
@pytest.mark.parametrize("kind", ["fake-quantize", "dequantisation"])
def test_rgbx_i8_written_by_hand_gives_the_float_models_scores(kind: str, color: str) -> None:
    """The prepared model on ``convert(..., "RGBx_I8")`` with its numbers = the original on normalised floats,
    within one quantisation step (the FakeQuantize rounds in its own arithmetic)."""
    scale, zero_point = 1 / 48, -27
    original = quantised_classifier(kind, scale=scale, zero_point=zero_point, color=color)  # type: ignore[arg-type]
    prepared = prepare(original, "CPU")
    assert prepared.quantisation is not None
    bgr = np.random.default_rng(3).integers(0, 256, (SIZE, SIZE, 3), np.uint8)
    packed = np.zeros((1, SIZE, SIZE, 4), np.int8)
    norm = prepared.normalisation  # in the model's channel order; RGBx_I8 is RGB (the model reorders)
    assert norm.color == color and norm.mean is not None and norm.scale is not None
    order = slice(None, None, 1 if color == "RGB" else -1)
    layout.convert(bgr, packed, "BGR", "RGBx_I8", mean=norm.mean[order], scale=norm.scale[order],
                   **prepared.quantisation.converter_args())  # fmt: skip
    x = normalised(bgr, color).transpose(2, 0, 1)[None]  # type: ignore[arg-type]
    if kind == "dequantisation":  # the original reads bytes: numpy's quantisation of the same floats
        x = quantised(x, scale, zero_point)
        np.testing.assert_array_equal(packed[0, :, :, :3], quantised(normalised(bgr, color), scale, zero_point)[..., order])  # type: ignore[arg-type]
    got, want = run(prepared.model, packed), run(original, x)
    assert np.abs(got - want).max() <= one_step_bound(scale) / 4, (got, want)
    if kind == "dequantisation":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_explicit_float_layout_keeps_the_fake_quantize_inside() -> None:
    prepared = prepare(quantised_classifier("fake-quantize"), "CPU", hw_format="RGBx")
    assert prepared.format == "RGBx" and prepared.quantisation is None
    assert prepared.inputs[0].dtype == np.uint8
    assert "FakeQuantize" in [op.get_type_name() for op in prepared.model.get_ordered_ops()]


@pytest.mark.parametrize("options", [dict(levels=255), dict(scale=np.array([1 / 48, 1 / 40, 1 / 50]))])
def test_a_fake_quantize_int8_cannot_express_keeps_the_float_input(options: dict) -> None:
    model = quantised_classifier("fake-quantize", **options)
    prepared = prepare(model, "CPU")
    assert prepared.format == "RGBx" and prepared.quantisation is None
    with pytest.raises(UnsupportedQuantisationError):
        prepare(model, "CPU", hw_format="RGBx_I8")


def test_int8_layouts_need_a_quantised_input_and_int8_inputs_need_them() -> None:
    with pytest.raises(ModelError, match="is f32 and not quantised .*RGBx_I8 needs the model's scale and zero point"):
        prepare(quantised_classifier("float"), "CPU", hw_format="RGBx_I8")
    with pytest.raises(ModelError, match="is int8: it reads RGBx_I8 or RGB_I8 .*not RGBx"):
        prepare(quantised_classifier("dequantisation"), "CPU", hw_format="RGBx")
    rgb = prepare(quantised_classifier("dequantisation"), "CPU", hw_format="RGB_I8")
    assert rgb.format == "RGB_I8" and rgb.inputs[0].shape == (1, SIZE, SIZE, 3)


def test_copy_mode_keeps_the_models_own_input() -> None:
    floats = prepare(quantised_classifier("fake-quantize"), "CPU", mode="copy")
    assert floats.format == "RGBP_FLOAT" and floats.quantisation is None
    nhwc = prepare(quantised_classifier("dequantisation", nhwc=True), "CPU", mode="copy")
    assert nhwc.format == "RGB_I8" and nhwc.quantisation is not None
    with pytest.raises(ModelError, match="is int8 NCHW in RGB order: in copy mode only RGB_I8"):
        prepare(quantised_classifier("dequantisation"), "CPU", mode="copy")


def test_fake_quantize_range_helper_matches_the_documented_formula() -> None:
    # docs/layout.md: quant_scale = (high - low) / (levels - 1), zero_point = -128 - round(low / quant_scale).
    low, high = fake_quantize_range(1 / 48, -27)
    scale = (high - low) / 255
    assert math.isclose(scale, 1 / 48) and -128 - round(low / scale) == -27


# --- select_format ---------------------------------------------------------------


@pytest.mark.parametrize("element, channels, expected", [("i8", 4, "RGBx_I8"), (np.int8, 3, "RGB_I8"), (ov.Type.i8, 4, "RGBx_I8")])
def test_select_format_answers_int8_for_a_quantised_input(element: object, channels: int, expected: str) -> None:
    assert layout.select_format(element, "NHWC", channels, quantised=True) == expected
    assert layout.select_format(element, "NHWC", channels) == ("RGBx" if channels == 4 else "RGB")  # as before


def test_select_format_refuses_what_int8_cannot_be() -> None:
    with pytest.raises(InvalidArgumentError, match="describes an int8 input, not f32"):
        layout.select_format("f32", "NHWC", 4, quantised=True)
    with pytest.raises(InvalidArgumentError, match="no destination format for a quantised int8 NCHW input of 3 channels"):
        layout.select_format("i8", "NCHW", 3, quantised=True)
    with pytest.raises(InvalidArgumentError, match="RGBx_I8 has no BGR order"):
        layout.select_format("i8", "NHWC", 4, order="BGR", quantised=True)


def test_an_ir_saved_with_compressed_weights_reads_the_same(tmp_path) -> None:
    """ov.save_model's default (f16 weights, decompressed by Converts at load) keeps the input's numbers."""
    from npu_zc.runtime import read_model

    for kind in ("fake-quantize", "dequantisation"):
        model = quantised_classifier(kind)
        ov.save_model(model, str(tmp_path / f"{kind}.xml"))  # compress_to_fp16=True
        saved = input_quantisation(read_model(tmp_path / f"{kind}.xml"))
        assert saved is not None and saved.zero_point == -27 and math.isclose(saved.scale, 1 / 48, rel_tol=1e-3)
        assert prepare(tmp_path / f"{kind}.xml", "CPU").format == "RGBx_I8"


# A frame loop under the memcpy counter (tests/runtime/test_runtime_memcount.py): the model orders the int8 channels
# with one per-pixel product, not PrePostProcessor's convert_color (a StridedSlice: one memcpy per pixel on the CPU).
_COUNTED_LOOP = """
import ctypes, json, sys
sys.path.insert(0, sys.argv[1])
import npu_zc
from npu_zc.runtime import CompileOptions, compile_model
from int8_models import quantised_classifier
lib = ctypes.CDLL(None)
for name in ("memcount_total_bytes", "memcount_total_calls", "memcount_largest"):
    getattr(lib, name).restype = ctypes.c_ulonglong
out = {}
for kind in ("fake-quantize", "dequantisation"):
    session = compile_model(quantised_classifier(kind, size=224), "CPU", options=CompileOptions(inference_precision="f32", num_threads=1))
    request = session.create_request()
    x = request.bind_input(npu_zc.alloc(session.inputs[0].nbytes))
    y = request.bind_output(npu_zc.alloc(session.outputs[0].nbytes))
    x[...] = 7
    for _ in range(2):
        request.infer()
    lib.memcount_reset(); lib.memcount_start()
    for _ in range(5):
        request.infer()
    lib.memcount_stop()
    out[kind] = [session.format, lib.memcount_total_bytes() / 5, lib.memcount_total_calls() / 5, lib.memcount_largest()]
print(json.dumps(out))
"""


def test_an_int8_input_is_read_in_place_no_frame_copied(memcount) -> None:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, LD_PRELOAD=str(memcount), OMP_NUM_THREADS="1")
    tests = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", _COUNTED_LOOP, tests], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for kind, (fmt, bytes_per_frame, calls_per_frame, largest) in json.loads(done.stdout.strip().splitlines()[-1]).items():
        assert fmt == "RGBx_I8"
        # 224 x 224 pixels: a copy of the frame would be 150 528 bytes (50 176 calls through a StridedSlice).
        assert bytes_per_frame < 2048 and calls_per_frame < 100 and largest < 1024, (kind, bytes_per_frame, calls_per_frame)


@settings(max_examples=25, deadline=None)
@given(scale=st.floats(1e-4, 10.0), zero_point=st.integers(-128, 127), aligned=st.booleans())
def test_any_256_level_fake_quantize_reads_back_and_becomes_its_own_dequantisation(scale: float, zero_point: int, aligned: bool) -> None:
    """Read back: the numbers the FakeQuantize stands for; made i8: every byte gives the FakeQuantize's own output.
    ``aligned``: 0 on the grid (NNCF's ranges); otherwise the range is shifted by a third of a step."""
    low, high = fake_quantize_range(scale, zero_point)
    if not aligned:
        low, high = low + scale / 3, high + scale / 3
    original = quantised_classifier("fake-quantize", fq_range=(low, high, low, high))
    found = input_quantisation(original)
    assert found is not None and math.isclose(found.scale, scale, rel_tol=1e-5)
    if aligned:
        assert found.zero_point == zero_point
    model, again = to_int8_input(original.clone())
    assert again == found
    q = np.resize(np.arange(-128, 128, dtype=np.int8), 3 * SIZE * SIZE).reshape(1, 3, SIZE, SIZE)
    # The FakeQuantize's output for byte q: output_low + (q + 128) * step, fed to the float model as it is.
    x = (np.float64(low) + (q.astype(np.float64) + 128) * (np.float64(high) - low) / 255).astype(np.float32)
    got, want = run(model, q), run(original, x)
    assert np.allclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, scale * 128)), (got, want)
