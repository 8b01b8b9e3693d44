"""The pipeline on the real model and real photos: zero-copy and copy modes, what preprocess writes,
where the buffers live, the timing report, and decode errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (a dependency of npu_zc)")
pytest.importorskip("skimage", reason="scikit-image (the sample photos) is not installed (the [demo] extra)")

from npu_zc import DeviceNotFoundError, InvalidArgumentError, layout
from npu_zc.pipeline import (
    STAGES,
    ClassScore,
    ImageError,
    ImageNotFoundError,
    Pipeline,
    PreprocessSpec,
    full_hd,
    load_image,
    sample_photo,
)
from npu_zc.pipeline.postprocess import TopClasses
from npu_zc.pipeline.preprocess import InputWriter
from npu_zc.runtime import CompileOptions, is_available

F32 = CompileOptions(inference_precision="f32", num_threads=1)
CATS = {"tabby", "tiger cat", "Egyptian cat"}
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def zero_copy() -> Iterator[Pipeline]:
    with Pipeline("efficientnet-lite0", "CPU", options=F32) as pipeline:
        yield pipeline


@pytest.fixture(scope="module")
def copy_mode() -> Iterator[Pipeline]:
    with Pipeline("efficientnet-lite0", "CPU", mode="copy", options=F32) as pipeline:
        yield pipeline


def labels(prediction: list) -> list[str]:
    return [p.label for p in prediction]


@pytest.mark.parametrize("photo", ["chelsea", "coffee"])
def test_real_photos_same_top5_in_both_modes(photo: str, zero_copy: Pipeline, copy_mode: Pipeline) -> None:
    image = sample_photo(photo)
    zc, cp = zero_copy.process(image), copy_mode.process(image)
    print(f"\n{photo}: zero-copy {[str(p) for p in zc]}\n{' ' * len(photo)}  copy      {[str(p) for p in cp]}")
    assert labels(zc) == labels(cp)
    assert all(isinstance(p, ClassScore) for p in zc)
    np.testing.assert_allclose([p.score for p in zc], [p.score for p in cp], atol=1e-4)
    if photo == "chelsea":
        assert CATS & set(labels(zc)[:3]), zc
    else:
        assert zc[0].label == "espresso" and zc[0].score > 0.5, zc
    # Probabilities: sorted, in (0, 1], summing to at most 1.
    scores = [p.score for p in zc]
    assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1 + 1e-6


def test_a_1080p_frame_classifies_like_the_photo(zero_copy: Pipeline) -> None:
    assert zero_copy.process(full_hd(sample_photo("coffee")))[0].label == "espresso"


def test_zero_copy_binds_our_buffers_as_the_model_memory(zero_copy: Pipeline) -> None:
    zero_copy.process(sample_photo("coffee"))
    request = zero_copy.request.request
    assert zero_copy.spec.format == "RGBx" and zero_copy.input.shape == (1, 224, 224, 4)
    # The request reads our input buffer and writes our output buffer: same addresses.
    assert request.get_input_tensor().data.ctypes.data == zero_copy.input.ctypes.data
    assert request.get_output_tensor().data.ctypes.data == zero_copy.outputs[0].ctypes.data
    assert zero_copy.buffer_kind in ("memfd", "udmabuf") or zero_copy.buffer_kind.startswith("dma-heap")
    # The preprocess resizes into a mapped buffer too.
    assert zero_copy.preprocess.resized.base is not None and not zero_copy.preprocess.resized.flags.owndata


def test_copy_mode_keeps_planar_float_in_ordinary_memory(copy_mode: Pipeline) -> None:
    assert copy_mode.spec.format == "RGBP_FLOAT" and copy_mode.input.shape == (1, 3, 224, 224)
    assert copy_mode.input.flags.owndata and copy_mode.buffer_kind == "ordinary memory"
    copy_mode.process(sample_photo("coffee"))
    # The runtime copied it: the request's own tensor is elsewhere.
    assert copy_mode.request.request.get_input_tensor().data.ctypes.data != copy_mode.input.ctypes.data


def expected_window(height: int, width: int) -> tuple[int, int, int, int]:
    """ImageNet evaluation: short side to 256, centre 224 x 224; in frame pixels, a square of short * 224 / 256."""
    side = round(min(height, width) * 224 / 256)
    top, left = (height - side) // 2, (width - side) // 2
    return top, left, side, side


@pytest.mark.parametrize("photo", ["chelsea", "astronaut"])
def test_preprocess_writes_the_centre_crop_in_rgbx(zero_copy: Pipeline, photo: str) -> None:
    image = sample_photo(photo)
    zero_copy.process(image)
    top, left, rows, cols = expected_window(*image.shape[:2])
    reference = cv2.resize(image[top : top + rows, left : left + cols], (224, 224), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(zero_copy.preprocess.resized, reference)
    frame = zero_copy.input[0]
    np.testing.assert_array_equal(frame[..., :3], reference[..., ::-1])  # RGB
    assert not frame[..., 3].any()  # the pad byte


@pytest.mark.parametrize("fmt", ["BGRx", "RGBx_FP16", "RGBx_BF16", "RGB", "BGR"])
def test_every_hw_layout_gives_the_same_answer(fmt: str, zero_copy: Pipeline) -> None:
    photo = sample_photo("chelsea")
    with Pipeline("efficientnet-lite0", "CPU", hw_format=fmt, options=F32) as pipeline:
        got = pipeline.process(photo)
        channels = 3 if fmt in ("RGB", "BGR") else 4
        assert pipeline.spec.format == fmt and pipeline.input.shape == (1, 224, 224, channels)
        written = pipeline.input[0].astype(np.float32)  # u8, f16 or bf16: pixel values are exact in each
        resized = pipeline.preprocess.resized.astype(np.float32)
        np.testing.assert_array_equal(written[..., :3], resized if fmt.startswith("BGR") else resized[..., ::-1])
        assert channels == 3 or not written[..., 3].any()  # the pad
    assert labels(got) == labels(zero_copy.process(photo))
    np.testing.assert_allclose([p.score for p in got], [p.score for p in zero_copy.process(photo)], atol=1e-4)


def test_copy_mode_preprocess_is_normalised_planar_float(copy_mode: Pipeline) -> None:
    image = sample_photo("chelsea")
    copy_mode.process(image)
    norm = copy_mode.session.normalisation
    rgb = copy_mode.preprocess.resized[..., ::-1].astype(np.float32)
    reference = ((rgb - np.asarray(norm.mean, np.float32)) / np.asarray(norm.scale, np.float32)).transpose(2, 0, 1)
    np.testing.assert_allclose(copy_mode.input[0], reference, rtol=1e-6, atol=1e-6)


def test_frames_of_different_sizes_one_after_another(zero_copy: Pipeline) -> None:
    for photo in ("coffee", "chelsea", "coffee"):
        image = sample_photo(photo)
        for frame in (image, full_hd(image), image[::2, ::3]):
            best = labels(zero_copy.process(np.ascontiguousarray(frame)))
            assert (best[0] == "espresso") if photo == "coffee" else bool(CATS & set(best[:3])), (photo, frame.shape, best)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 5000), st.integers(1, 5000), st.integers(1, 640), st.integers(1, 640), st.floats(0.3, 1.0)
)
def test_crop_region_is_centred_inside_the_frame(height: int, width: int, model_h: int, model_w: int, fraction: float) -> None:
    spec = PreprocessSpec("RGBx", (1, model_h, model_w, 4), model_h, model_w, crop_fraction=fraction)
    rows, cols = spec.region(height, width)
    assert 0 <= rows.start < rows.stop <= height and 0 <= cols.start < cols.stop <= width
    assert abs(rows.start - (height - rows.stop)) <= 1 and abs(cols.start - (width - cols.stop)) <= 1
    # The window has the model's aspect ratio (up to rounding and the frame's edges).
    h, w = rows.stop - rows.start, cols.stop - cols.start
    if h < height and w < width and min(h, w) > 20:
        assert abs(h / w - model_h / model_w) < 0.1 * model_h / model_w + 1 / min(h, w)
    stretch = PreprocessSpec("RGBx", (1, model_h, model_w, 4), model_h, model_w, fit="stretch")
    assert stretch.region(height, width) == (slice(0, height), slice(0, width))


LAYOUTS = [
    ("RGBx", (1, 224, 224, 4), np.uint8), ("RGBx_FP16", (1, 224, 224, 4), np.float16), ("RGBP_FLOAT", (1, 3, 224, 224), np.float32),
    ("BGRP_FLOAT", (1, 3, 224, 224), np.float32), ("RGB_FLOAT", (1, 224, 224, 3), np.float32), ("BGR", (1, 224, 224, 3), np.uint8),
]  # fmt: skip


@pytest.mark.parametrize("fmt, shape, dtype", LAYOUTS)
def test_input_writer_checks_once_then_writes_what_layout_convert_writes(
    fmt: str, shape: tuple[int, ...], dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(7)
    source = rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)
    normalised = "FLOAT" in fmt or "FP16" in fmt
    spec = PreprocessSpec(fmt, shape, 224, 224, mean=(1.0, 2.0, 3.0) if normalised else None, scale=(4.0, 5.0, 6.0) if normalised else None)
    writer = InputWriter(spec, source)
    assert (writer.converter.dst_format, writer.converter.threads) == (fmt, 1)  # one thread: see InputWriter
    reference: np.ndarray = np.zeros(shape, dtype)
    layout.convert(source, reference, "BGR", fmt, mean=spec.mean, scale=spec.scale)
    first: np.ndarray = np.zeros(shape, dtype)
    second: np.ndarray = np.zeros(shape, dtype)
    checks = counted(monkeypatch, layout.converter, "_source_arrays")
    writer(first)  # every check
    writer(second)  # straight to the core
    assert checks == [1]
    for written in (first, second):
        np.testing.assert_array_equal(written.view(np.uint8), reference.view(np.uint8))
    # Anything else is checked again, with layout.convert's clear errors.
    with pytest.raises(InvalidArgumentError):
        writer(np.zeros((1, 100, 100, shape[-1]), dtype))
    with pytest.raises(InvalidArgumentError):
        writer(np.zeros(shape, dtype)[..., ::-1])  # not contiguous along its last axis


def counted(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    """Counts the calls of module.name (one 1 each) and still makes them."""
    calls: list[int] = []
    real = getattr(module, name)

    def count(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, count)
    return calls


def test_top_classes_fast_path_matches_layout_topk(monkeypatch: pytest.MonkeyPatch) -> None:
    labels = [str(i) for i in range(1000)]
    top = TopClasses(labels, 5)
    rng = np.random.default_rng(3)
    checks = counted(monkeypatch, layout.results, "_topk_source")
    for i in range(20):
        scores = rng.standard_normal((1, 1000)).astype(np.float32)
        before = len(checks)
        got = top([scores])
        assert len(checks) - before == (i == 0)  # checked on the first call only
        indices, values = layout.topk(scores.reshape(-1), 5)
        assert [c.index for c in got] == list(indices)
        probabilities = np.exp(values.astype(np.float64) - scores.max()) / np.exp(scores.astype(np.float64) - scores.max()).sum()
        np.testing.assert_allclose([c.score for c in got], probabilities, rtol=1e-6)


def test_spec_round_trips_through_json(zero_copy: Pipeline, copy_mode: Pipeline) -> None:
    for spec in (zero_copy.spec, copy_mode.spec):
        assert PreprocessSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert zero_copy.spec.mean is None  # the model normalises in zero-copy mode
    assert copy_mode.spec.mean == (127.0, 127.0, 127.0) and copy_mode.spec.scale == (128.0, 128.0, 128.0)


def test_run_report(zero_copy: Pipeline) -> None:
    image = sample_photo("chelsea")
    report = zero_copy.run(image, 7, name="chelsea")
    assert report.runs == 7 and report.warmup == 1 and report.mode == "zero-copy" and report.device == "CPU"
    assert report.image_size == (451, 300)
    for stage in STAGES:
        s = report.stages[stage]
        assert s.count == 7
        assert 0 < s.min <= s.median <= s.p99 and s.min <= s.mean <= s.p99 + 1e-9
    parts = sum(report.stages[s].mean for s in ("preprocess", "infer", "postprocess"))
    assert report.stages["total"].mean == pytest.approx(parts)
    assert report.pipeline_fps == pytest.approx(1000 / report.stages["total"].mean)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["labels"][0]["label"] == report.prediction[0].label and data["fps"]["infer"] > 0
    assert set(data["stages_ms"]) == set(STAGES) and set(data["stages_ms"]["infer"]) >= {"mean", "min", "median", "p99"}


def test_bad_arguments(zero_copy: Pipeline) -> None:
    with pytest.raises(InvalidArgumentError, match="BGR u8"):
        zero_copy.process(np.zeros((224, 224), np.uint8))
    with pytest.raises(InvalidArgumentError, match="runs must be at least 1"):
        zero_copy.run(sample_photo("coffee"), 0)
    with pytest.raises(InvalidArgumentError, match="unknown mode"):
        Pipeline("efficientnet-lite0", "CPU", mode="fast")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="unknown interpolation"):
        Pipeline("efficientnet-lite0", "CPU", interpolation="bilinear")


@pytest.mark.skipif(is_available("NPU"), reason="this machine has an NPU")
def test_npu_without_an_npu_says_what_is_missing() -> None:
    with pytest.raises(DeviceNotFoundError, match="No NPU is usable"):
        Pipeline("efficientnet-lite0", "NPU")


@pytest.mark.kernel
def test_zero_copy_on_real_dmabufs(system_heap: str) -> None:
    """Inside the VM: the frame and the result in dma-heap buffers, written and read inside sync brackets."""
    with Pipeline("efficientnet-lite0", "CPU", heap=system_heap, options=F32) as pipeline:
        assert pipeline.buffer_kind.startswith("dma-heap") and pipeline._sync_input is not None
        assert [p.label for p in pipeline.process(sample_photo("coffee"))][0] == "espresso"
        assert pipeline.request.request.get_input_tensor().data.ctypes.data == pipeline.input.ctypes.data


def buffer_fds() -> int:
    """Open fds that are buffers (memfd, DMA-BUF) rather than files OpenVINO keeps open (the weights)."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return sum(1 for n in names if n.startswith("/memfd:") or "dmabuf" in n)


def test_close_frees_every_buffer() -> None:
    fds = buffer_fds()
    pipeline = Pipeline("efficientnet-lite0", "CPU", options=F32)
    pipeline.process(sample_photo("coffee"))
    assert buffer_fds() == fds + 2  # the input and the output: the frame is resized in the conversion, no buffer between
    pipeline.preprocess.resized  # noqa: B018 (the on-demand picture of what the model sees: one more buffer)
    assert buffer_fds() == fds + 3
    pipeline.close()
    pipeline.close()  # twice is fine
    assert buffer_fds() == fds


# --- decode errors ---


def test_decode_errors(tmp_path: Path) -> None:
    with pytest.raises(ImageNotFoundError, match="no such image") as missing:
        load_image(tmp_path / "nope.jpg")
    assert isinstance(missing.value, FileNotFoundError)
    photo = sample_photo("chelsea")
    for suffix in (".jpg", ".png"):
        ok, encoded = cv2.imencode(suffix, photo)
        whole = tmp_path / f"whole{suffix}"
        whole.write_bytes(encoded.tobytes())
        assert load_image(whole).shape == photo.shape
        cut = tmp_path / f"cut{suffix}"
        cut.write_bytes(encoded.tobytes()[: len(encoded) * 2 // 3])
        with pytest.raises(ImageError, match="truncated"):
            load_image(cut)
    garbage = tmp_path / "garbage.jpg"
    garbage.write_bytes(b"GIF89a not really" * 50)
    with pytest.raises(ImageError, match="cannot decode"):
        load_image(garbage)
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(ImageError, match="empty"):
        load_image(tmp_path / "empty.png")
    with pytest.raises(ImageError, match="is a folder"):
        load_image(tmp_path)


# --- zero copy, measured from outside ---


@pytest.fixture(scope="module")
def memcount(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The counter that ships with the package (npu_zc/memcount/memcount.c), built here."""
    from npu_zc.memcount import CounterUnavailableError, build

    try:
        lib = build(tmp_path_factory.mktemp("memcount"))
    except CounterUnavailableError as e:
        pytest.skip(str(e))
    return lib


FRAME_LOOP = """
import ctypes, json, sys
import numpy as np
from npu_zc.pipeline import Pipeline, full_hd, sample_photo
from npu_zc.runtime import CompileOptions
lib = ctypes.CDLL(None)
for name in ("memcount_total_bytes", "memcount_watched_bytes", "memcount_largest"):
    getattr(lib, name).restype = ctypes.c_ulonglong
lib.memcount_watch.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
pipeline = Pipeline("efficientnet-lite0", "CPU", mode=sys.argv[1], options=CompileOptions(num_threads=1))
for array in [pipeline.input, *pipeline.outputs, pipeline.preprocess.resized]:
    lib.memcount_watch(array.ctypes.data, array.nbytes)
frame = full_hd(sample_photo("coffee"))
for _ in range(3):
    pipeline.process(frame)
lib.memcount_reset()
frames = 10
for _ in range(frames):
    lib.memcount_start()  # the whole frame: preprocess, infer, postprocess
    top = pipeline.process(frame)[0].label
    lib.memcount_stop()
print(json.dumps({"frame_bytes": lib.memcount_watched_bytes() / frames, "all_bytes": lib.memcount_total_bytes() / frames,
                  "largest": lib.memcount_largest(), "top": top, "input_bytes": pipeline.input.nbytes}))
"""


def test_zero_copy_pipeline_copies_no_frame_bytes(memcount: Path) -> None:
    """From the start of the preprocess to the end of the postprocess: no memcpy touches the frame or the result."""
    results = {}
    for mode in ("zero-copy", "copy"):
        done = subprocess.run(
            [sys.executable, "-c", FRAME_LOOP, mode],
            env=dict(os.environ, LD_PRELOAD=str(memcount)),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"\n{mode:>9}: {results[mode]}")
    zero, copy = results["zero-copy"], results["copy"]
    assert zero["frame_bytes"] == 0
    assert zero["largest"] < 1024  # only metadata (shapes, Python's bookkeeping)
    assert copy["frame_bytes"] >= copy["input_bytes"]  # copy mode copies the planar float frame in
    assert zero["top"] == copy["top"] == "espresso"
