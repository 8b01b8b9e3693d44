"""Models: the built-in EfficientNet-Lite0, reading models, and inputs in the HW layouts."""

from __future__ import annotations

import io
import pickle
import struct

import numpy as np
import pytest

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
ops = pytest.importorskip("openvino.opset13", reason="OpenVINO is not installed (a dependency of npu_zc)")
cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (a dependency of npu_zc)")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (the bfloat16 reference) is not installed")
skimage = pytest.importorskip("skimage", reason="scikit-image is not installed (the [demo] extra)")  # skimage.data: loaded lazily

from npu_zc import InvalidArgumentError, ModelError
from npu_zc.runtime import (
    HW_FORMATS,
    CompileOptions,
    compile_model,
    find_image_input,
    prepare,
    read_model,
    select_hw_format,
)
from npu_zc.runtime.zoo import efficientnet_lite0
from conftest import centre_crop

F32 = CompileOptions(inference_precision="f32", num_threads=1)


@pytest.fixture(scope="module")
def coffee() -> np.ndarray:
    return centre_crop(skimage.data.coffee())


@pytest.fixture(scope="module")
def reference_logits(coffee: np.ndarray) -> np.ndarray:
    """The model's own f32 planar input, normalised in numpy: the reference every layout must match."""
    session = compile_model("efficientnet-lite0", "CPU", mode="copy", options=F32)
    planar = ((coffee.astype(np.float32) - 127.0) / 128.0).transpose(2, 0, 1)[None]
    return session.create_request().infer_copy([np.ascontiguousarray(planar)])[0]


# --- the built-in model ---


def test_checkpoint_is_read_without_torch_into_the_expected_tensors() -> None:
    state = efficientnet_lite0.load_state_dict(efficientnet_lite0.weights_path())
    assert state["_conv_stem.weight"].shape == (32, 3, 3, 3)
    assert state["_fc.weight"].shape == (1000, 1280)
    assert state["_blocks.15._project_conv.weight"].shape == (320, 1152, 1, 1)
    assert sum(1 for k in state if k.endswith("_depthwise_conv.weight")) == 16
    # The stem is stored with TensorFlow's strides; rebuilt C-contiguous with the right values.
    assert state["_conv_stem.weight"].flags.c_contiguous
    assert np.isfinite(state["_bn0.running_var"]).all() and (state["_bn0.running_var"] >= 0).all()  # variances (some channels are dead: 0)


class _Boom:
    def __reduce__(self):  # what a malicious checkpoint does: call os.system at load time
        import os

        return (os.system, ("echo pwned",))


def test_unpickler_refuses_anything_but_tensors(tmp_path) -> None:
    evil = tmp_path / "evil.pth"
    with open(evil, "wb") as f:
        for header in (0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001}):
            pickle.dump(header, f, protocol=2)
        pickle.dump({"weight": _Boom()}, f, protocol=2)
    with pytest.raises(ModelError, match="refusing to load posix.system|refusing to load os.system"):
        efficientnet_lite0.load_state_dict(evil)


def test_truncated_checkpoint_is_a_model_error(tmp_path) -> None:
    data = efficientnet_lite0.weights_path().read_bytes()
    cut = tmp_path / "cut.pth"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="not a readable PyTorch checkpoint"):
        efficientnet_lite0.load_state_dict(cut)


def test_ir_is_cached_and_reused(tmp_path) -> None:
    first = efficientnet_lite0.ir_path(tmp_path)
    assert first.is_file() and first.with_suffix(".bin").is_file()
    mtime = first.stat().st_mtime_ns
    assert efficientnet_lite0.ir_path(tmp_path) == first
    assert first.stat().st_mtime_ns == mtime  # not rebuilt
    model = ov.Core().read_model(first)
    assert [tuple(p.get_shape()) for p in model.inputs] == [(1, 3, 224, 224)]
    assert [tuple(p.get_shape()) for p in model.outputs] == [(1, 1000)]


def test_default_cache_dir_follows_xdg(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert efficientnet_lite0.default_cache_dir() == tmp_path / "npu_zc"


# --- reading models ---


def test_missing_model_file() -> None:
    with pytest.raises(ModelError, match="no such model file: /nonexistent/model.xml"):
        read_model("/nonexistent/model.xml")


def test_corrupt_model_files(tmp_path) -> None:
    onnx = tmp_path / "broken.onnx"
    onnx.write_bytes(b"\x08\x07garbage that is not a protobuf" * 10)
    with pytest.raises(ModelError, match="cannot read .*broken.onnx as a model") as err:
        read_model(onnx)
    assert "Exception from" not in str(err.value) and "\n" not in str(err.value)
    xml = tmp_path / "broken.xml"
    xml.write_text("<net><layers>")
    xml.with_suffix(".bin").write_bytes(b"")
    with pytest.raises(ModelError, match="cannot read .*broken.xml"):
        read_model(xml)
    lonely = tmp_path / "lonely.xml"
    lonely.write_text("<net/>")
    with pytest.raises(ModelError, match="without its weights file lonely.bin"):
        read_model(lonely)


def test_builtin_name_reads_the_built_in_model() -> None:
    model = read_model("efficientnet-lite0")
    image = find_image_input(model)
    assert (image.layout, image.height, image.width, image.channels, image.element_type) == ("NCHW", 224, 224, 3, "f32")


def test_image_input_of_an_nhwc_tflite_model() -> None:
    from npu_zc.runtime.zoo import face_detection

    image = find_image_input(read_model(face_detection.model_path()))
    assert (image.layout, image.height, image.width, image.channels) == ("NHWC", 128, 128, 3)


def _two_image_model() -> ov.Model:
    a = ops.parameter([1, 3, 32, 32], ov.Type.f32, name="left")
    b = ops.parameter([1, 3, 32, 32], ov.Type.f32, name="right")
    return ov.Model([ops.add(a, b)], [a, b], "stereo")


def test_models_npu_zc_cannot_serve() -> None:
    with pytest.raises(ModelError, match="exactly one image input; this one has 2 \\(left, right\\)"):
        prepare(_two_image_model(), "CPU")
    vector = ops.parameter([1, 128], ov.Type.f32, name="features")
    with pytest.raises(ModelError, match="not an image"):
        prepare(ov.Model([ops.relu(vector)], [vector]), "CPU")
    dynamic = ops.parameter([1, 3, -1, -1], ov.Type.f32, name="frame")
    model = ov.Model([ops.relu(dynamic)], [dynamic])
    with pytest.raises(ModelError, match="dynamic size .* the NPU compiles static shapes only; pass input_size"):
        prepare(model, "NPU")
    with pytest.raises(ModelError, match="dynamic size"):
        prepare(model, "CPU")
    # With a size it is served, and a dynamic batch becomes 1.
    batch = ops.parameter([-1, 3, 64, 48], ov.Type.f32, name="frame")
    prepared = prepare(ov.Model([ops.relu(batch)], [batch]), "NPU")
    assert prepared.inputs[0].shape == (1, 64, 48, 4)
    prepared = prepare(model, "CPU", input_size=(32, 16))
    assert prepared.inputs[0].shape == (1, 32, 16, 4)


def test_format_selection_from_input_metadata() -> None:
    assert select_hw_format("f32", "NPU") == "RGBx"
    assert select_hw_format("f32", "CPU", "BGR") == "BGRx"
    assert select_hw_format("u8", "NPU") == "RGBx"
    assert select_hw_format("f16", "NPU") == "RGBx_FP16"
    assert select_hw_format("bf16", "CPU") == "RGBx_BF16"
    with pytest.raises(ModelError):
        select_hw_format("i64", "CPU")
    with pytest.raises(InvalidArgumentError, match="unknown HW format 'YUYV'"):
        prepare("efficientnet-lite0", "CPU", hw_format="YUYV")


def test_copy_mode_keeps_planar_float() -> None:
    prepared = prepare("efficientnet-lite0", "CPU", mode="copy")
    assert prepared.format == "RGBP_FLOAT"
    assert prepared.inputs[0].shape == (1, 3, 224, 224) and prepared.inputs[0].element_type == "f32"
    assert prepared.outputs[0].shape == (1, 1000) and prepared.outputs[0].element_type == "f32"
    assert prepared.normalisation.mean == (127.0, 127.0, 127.0) and prepared.normalisation.color == "RGB"


# --- every HW layout gives the f32 reference's answer ---


def _rgbx(rgb: np.ndarray) -> np.ndarray:
    return np.concatenate([rgb, np.zeros(rgb.shape[:2] + (1,), np.uint8)], axis=2)[None]


def _nv12_planes(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h, w = rgb.shape[:2]
    i420 = cv2.cvtColor(rgb, cv2.COLOR_RGB2YUV_I420)
    y = i420[:h]
    u = i420[h : h + h // 4].reshape(h // 2, w // 2)
    v = i420[h + h // 4 :].reshape(h // 2, w // 2)
    return y, np.stack([u, v], axis=-1)


@pytest.mark.parametrize("fmt", ["RGBx", "BGRx", "RGBx_BF16", "RGBx_FP16", "RGB", "BGR", "NV12", "NV12_TWO_PLANES"])
def test_hw_layouts_match_the_f32_reference(fmt: str, coffee: np.ndarray, reference_logits: np.ndarray) -> None:
    import npu_zc

    session = compile_model("efficientnet-lite0", "CPU", hw_format=fmt, options=F32)
    assert session.format == fmt
    request = session.create_request()
    if fmt.startswith("NV12"):
        y, uv = _nv12_planes(coffee)
        if fmt == "NV12":
            planes = [np.concatenate([y, uv.reshape(y.shape[0] // 2, -1)])[None, :, :, None]]
        else:
            planes = [y[None, :, :, None], uv[None]]
    else:
        pixels = coffee[..., ::-1] if fmt.startswith("BGR") else coffee
        pixels = _rgbx(pixels) if "x" in fmt else pixels[None]
        if fmt == "RGBx_BF16":
            pixels = pixels.astype(ml_dtypes.bfloat16)
        elif fmt == "RGBx_FP16":
            pixels = pixels.astype(np.float16)
        planes = [pixels]
    assert [spec.shape for spec in session.inputs] == [p.shape for p in planes]
    buffers = [npu_zc.alloc(spec.nbytes) for spec in session.inputs]
    for i, (buffer, plane) in enumerate(zip(buffers, planes)):
        request.bind_input(buffer, i)[...] = plane
    logits = request.bind_output(npu_zc.alloc(session.outputs[0].nbytes))
    request.infer()
    assert np.argmax(logits) == np.argmax(reference_logits) == 967  # espresso
    if fmt.startswith("NV12"):  # chroma is subsampled: close, not equal
        assert np.corrcoef(logits.ravel(), reference_logits.ravel())[0, 1] > 0.99
    else:  # the same pixel values: the same answer up to float rounding
        np.testing.assert_allclose(logits, reference_logits, rtol=0, atol=1e-3)


def test_nv12_needs_even_sizes() -> None:
    odd = ops.parameter([1, 3, 33, 32], ov.Type.f32, name="odd")
    with pytest.raises(ModelError, match="even height and width"):
        prepare(ov.Model([ops.relu(odd)], [odd]), "CPU", hw_format="NV12")


def test_mean_and_scale_arguments_are_checked() -> None:
    with pytest.raises(InvalidArgumentError, match="mean has 2 values: it takes 1 or 3"):
        prepare("efficientnet-lite0", "CPU", mean=(1.0, 2.0))
    with pytest.raises(InvalidArgumentError, match="scale must not contain 0"):
        prepare("efficientnet-lite0", "CPU", scale=(1.0, 0.0, 1.0))


def test_hw_format_table_is_complete() -> None:
    assert {"RGBx", "BGRx", "RGBx_BF16", "RGBx_FP16", "NV12", "NV12_TWO_PLANES"} <= set(HW_FORMATS)


def test_legacy_checkpoint_reader_on_a_handmade_file(tmp_path) -> None:
    """A tiny checkpoint in the legacy format, pickle opcodes written by hand (torch is not installed): strides are honoured."""

    buf = io.BytesIO()
    for header in (0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001}):
        pickle.dump(header, buf, protocol=2)
    body = (
        b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01"
        b"X\x01\x00\x00\x00wq\x02"
        b"ctorch._utils\n_rebuild_tensor_v2\nq\x03"
        b"((X\x07\x00\x00\x00storageq\x04ctorch\nFloatStorage\nq\x05X\x01\x00\x00\x000q\x06X\x03\x00\x00\x00cpuq\x07K\x06Ntq\x08Q"
        b"K\x00K\x02K\x03\x86q\tK\x01K\x02\x86q\n\x89h\x00)Rq\x0btq\x0cRq\rs."
    )
    buf.write(body)
    pickle.dump(["0"], buf, protocol=2)
    buf.write(struct.pack("<q", 6))
    buf.write(np.arange(6, dtype="<f4").tobytes())
    path = tmp_path / "tiny.pth"
    path.write_bytes(buf.getvalue())
    state = efficientnet_lite0.load_state_dict(path)
    # shape (2, 3) with strides (1, 2): column-major over the storage 0..5
    np.testing.assert_array_equal(state["w"], np.arange(6, dtype=np.float32).reshape(3, 2).T)
