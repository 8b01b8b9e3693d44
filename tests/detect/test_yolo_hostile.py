"""The detector path under hostile arguments: every bad frame size, count, layout, class id or quantisation is a
typed ``npu_zc.Error`` naming it, never a panic, an abort or a raw ``OverflowError``; a decode reads its outputs
under the one overlap rule (docs/safety.md)."""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import npu_zc
from npu_zc import InvalidArgumentError, OutOfMemoryError, Transform, YoloLayout, decode_yolo
from npu_zc import _core
from npu_zc.detect import YoloDecoder

FIXTURES = Path(__file__).parent / "fixtures"


def synth() -> tuple[np.ndarray, YoloLayout]:
    out = np.load(FIXTURES / "detect_synth.npz")["output"]
    return out, YoloLayout.from_outputs([out.shape])


@pytest.mark.parametrize("size", [(-5, -5), (math.nan, math.nan), (640, math.inf), (0, 480)])
def test_a_bad_frame_size_is_refused_naming_it(size: tuple[float, float]) -> None:
    out, layout = synth()
    assert len(decode_yolo([out], layout, conf=0.3)) > 0  # boxes are kept: each would be clipped to the frame
    with pytest.raises(InvalidArgumentError, match="frame_size"):
        decode_yolo([out], layout, conf=0.3, frame_size=size)


@pytest.mark.parametrize("frame", [(-5.0, -5.0), (math.nan, 10.0)])
def test_the_binding_refuses_a_bad_frame_too(frame: tuple[float, float]) -> None:
    """The Rust decoder checks its frame itself (the clip to [0, size] needs a size): no panic reaches Python."""
    out, layout = synth()
    with pytest.raises(npu_zc.DetectError, match="frame_size"):
        _core._YoloDecoder(layout.family, layout.task, layout.nc, 0.3, 0.7, None, False, 300, 30000,
                           (1.0, 1.0), (0.0, 0.0), frame)


def segment() -> tuple[list[np.ndarray], YoloLayout]:
    f = np.load(FIXTURES / "segment.npz")
    outputs = [f["output"], f["protos"]]
    return outputs, YoloLayout.from_outputs([o.shape for o in outputs])


def test_masks_of_a_huge_frame_are_an_out_of_memory_error_not_an_abort() -> None:
    outputs, layout = segment()
    assert len(decode_yolo(outputs, layout)) > 0
    # 1e6 x 1e6 pixels per mask: terabytes, asked for (and refused) before anything is written.
    with pytest.raises(OutOfMemoryError, match="mask"):
        decode_yolo(outputs, layout, frame_size=(1e6, 1e6))
    # Past what a size can count: refused.
    with pytest.raises(npu_zc.Error, match="too large"):
        decode_yolo(outputs, layout, frame_size=(1e30, 1e30))
    # A side no array can have, even with no detection to mask.
    with pytest.raises(npu_zc.Error, match="too large"):
        decode_yolo(outputs, layout, conf=1.0, frame_size=(1e30, 1))
    # Still decodes afterwards.
    assert len(decode_yolo(outputs, layout, frame_size=(64, 48))) > 0


@pytest.mark.parametrize("field", ["nc", "nm"])
def test_a_hand_made_layout_with_a_huge_count_is_refused(field: str) -> None:
    outputs, layout = segment()
    with pytest.raises(InvalidArgumentError, match=field):
        YoloLayout(layout.family, layout.task, **{**dict(nc=layout.nc, nm=layout.nm, output=0, protos=1),
                                                   field: 2**64 - 2})
    # The binding itself (a layout that skipped the dataclass): the channel count cannot wrap past the shape check.
    nc, nm = (2**64 - 2, 32) if field == "nc" else (layout.nc, 2**64 - 2)
    with pytest.raises(npu_zc.DetectError, match="cannot exist"):
        _core._YoloDecoder("anchor-free", "segment", nc, 0.25, 0.7, None, False, 300, 30000,
                           (1.0, 1.0), (0.0, 0.0), None, nm)


@pytest.mark.parametrize(("kwargs", "named"), [
    (dict(max_det=2**70), "max_det"),
    (dict(max_nms=2**64), "max_nms"),
    (dict(max_det=-1), "max_det"),
    (dict(classes=[2**70]), "classes"),
    (dict(classes=[-1]), "classes"),
])
def test_out_of_range_counts_are_typed_errors_naming_the_argument(kwargs: dict, named: str) -> None:  # type: ignore[type-arg]
    out, layout = synth()
    with pytest.raises(InvalidArgumentError, match=named):
        decode_yolo([out], layout, **kwargs)


def test_a_quantised_zero_point_out_of_range_is_a_typed_error() -> None:
    out, layout = synth()
    q = np.clip(np.round(out / 0.01), -128, 127).astype(np.int8)
    assert len(decode_yolo([q], layout, conf=0.3, quant=(0.01, 0))) > 0
    with pytest.raises(InvalidArgumentError, match="zero point"):
        decode_yolo([q], layout, quant=(0.01, 2**40))
    with pytest.raises(npu_zc.DetectError, match="zero point"):
        decode_yolo([q], layout, quant=(0.01, 300))  # fits an int32, not an int8


def test_the_binding_names_its_arguments_too() -> None:
    out, layout = synth()
    for args, named in [((2**70, 30000, None), "max_det"), ((300, 2**64, None), "max_nms"),
                        ((300, 30000, [2**70]), "class id")]:
        max_det, max_nms, classes = args
        with pytest.raises(InvalidArgumentError, match=named):
            _core._YoloDecoder(layout.family, layout.task, layout.nc, 0.25, 0.7, classes, False, max_det, max_nms,
                               (1.0, 1.0), (0.0, 0.0))
    with pytest.raises(InvalidArgumentError, match="zero point"):
        _core._YoloDecoder(layout.family, layout.task, layout.nc, 0.25, 0.7, None, False, 300, 30000,
                           (1.0, 1.0), (0.0, 0.0), quant=(0.01, 2**40))


def end_to_end(rows: list[list[float]], k: int = 8) -> np.ndarray:
    out = np.zeros((1, k, 6), np.float32)
    out[0, :len(rows)] = rows
    return out


def test_end_to_end_class_ids_at_or_above_nc_are_no_detection() -> None:
    out = end_to_end([[10, 10, 50, 50, 0.9, 79.0], [60, 60, 90, 90, 0.8, 79.6], [1, 1, 5, 5, 0.7, 80.0],
                      [2, 2, 6, 6, 0.6, 3.0]])
    layout = YoloLayout("end2end", "detect", 80)
    dets = decode_yolo([out], layout)
    assert dets.class_ids.tolist() == [79, 3]  # 79.6 rounds to 80, and 80 of 80 classes is none of them
    np.testing.assert_array_equal(dets.scores, np.array([0.9, 0.6], np.float32))
    # With the class count unknown (0), every whole id is taken as it comes.
    assert decode_yolo([out], YoloLayout("end2end", "detect", 0)).class_ids.tolist() == [79, 80, 80, 3]


def test_a_decode_of_a_buffer_another_call_writes_is_refused() -> None:
    """Every reader goes through the one overlap rule: decoding a view of a DmaBuf while ``convert`` writes it
    is refused (BufferInUseError), as ``topk`` is; once the write is done the decode reads it. The writer
    converts again and again until the reader has been refused once (a bound of 60 s only guards a hang), so
    the outcome does not depend on how the two threads are scheduled."""
    from npu_zc.layout import convert

    buf = npu_zc.alloc(64 * 64 * 4, "memfd")
    big = np.random.default_rng(1).integers(0, 256, (3000, 4500, 3), np.uint8)
    writing, refused, done = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        give_up = time.monotonic() + 60
        try:
            while not refused.is_set() and time.monotonic() < give_up:
                writing.set()
                try:
                    convert(big, buf, "BGR", "RGBx", dst_size=(64, 64), interpolation="area", threads=1)
                except npu_zc.BufferInUseError:
                    pass  # the reader's decode held it just then
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            done.set()

    layout = YoloLayout("anchor-free", "detect", 2)
    thread = threading.Thread(target=writer)
    thread.start()
    writing.wait()
    while not refused.is_set() and not done.is_set():
        view = buf.map().view(np.float32)[: 6 * 512].reshape(1, 6, 512)
        try:
            decode_yolo([view], layout)
        except npu_zc.BufferInUseError:
            refused.set()
        del view
        time.sleep(0)
    thread.join()
    assert not errors, errors
    assert refused.is_set()
    view = buf.map().view(np.float32)[: 6 * 512].reshape(1, 6, 512)
    decode_yolo([view], layout)  # nothing writes it now: read (whatever floats the pixels' bytes are)


def test_a_decoder_rebuilt_per_call_and_once_agree() -> None:
    """decode_yolo keeps its signature; YoloDecoder builds the Rust decoder once."""
    out, layout = synth()
    t = Transform((0.5, 0.5), (0.0, 40.0), (0, 40, 320, 240), (0, 0, 320, 320), (0, 0, 640, 480))
    a = YoloDecoder(layout, conf=0.3, transform=t, frame_size=(640, 480))([out])
    b = decode_yolo([out], layout, conf=0.3, transform=t, frame_size=(640, 480))
    np.testing.assert_array_equal(a.xyxy, b.xyxy)
    assert len(a) > 10 and (a.xyxy[:, 2] <= 640).all()


def save_end_to_end_model(folder: Path, rows: list[list[float]], *, end2end_key: bool) -> Path:
    """An end-to-end detector as Ultralytics exports YOLO26 (output [1, 300, 6]: x1, y1, x2, y2, score, class),
    with an export folder's metadata.yaml listing 80 names; the rows are constants (the image is read, times 0)."""
    import openvino as ov
    import openvino.opset13 as ops

    image = ops.parameter([1, 3, 64, 64], np.float32, name="images")
    zero = ops.multiply(ops.reduce_mean(image, np.array([0, 1, 2, 3], np.int64), keep_dims=False), np.float32(0))
    out = ops.add(ops.constant(end_to_end(rows, 300)), zero)
    out.output(0).get_tensor().set_names({"output0"})
    folder.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov.Model([out], [image], "yolo26n"), str(folder / "yolo26n.xml"), compress_to_fp16=False)
    names = "\n".join(f"  {i}: class{i}" for i in range(80))
    (folder / "metadata.yaml").write_text(
        "description: Ultralytics YOLO26n model\ntask: detect\nstride: 32\nbatch: 1\nimgsz:\n- 64\n- 64\n"
        f"names:\n{names}\n" + ("end2end: true\n" if end2end_key else "") + "channels: 3\n"
    )
    return folder


@pytest.mark.parametrize("end2end_key", [True, False])
def test_an_end_to_end_export_takes_its_class_count_from_its_names(tmp_path: Path, end2end_key: bool) -> None:
    pytest.importorskip("openvino")
    from npu_zc.pipeline import Pipeline

    rows = [[10, 12, 30, 40, 0.9, 2.0], [5, 5, 20, 20, 0.8, 79.6], [40, 40, 60, 60, 0.7, 79.0]]
    folder = save_end_to_end_model(tmp_path / "yolo26n_openvino_model", rows, end2end_key=end2end_key)
    with Pipeline(folder, "CPU") as pipeline:
        assert pipeline.kind == "yolo"
        assert pipeline.postprocess.layout.family == "end2end" and pipeline.postprocess.layout.nc == 80
        dets = pipeline.process(np.full((64, 64, 3), 90, np.uint8))
    # 79.6 rounds to class 80, which 80 names do not have: no detection.
    assert dets.labels() == ["class2", "class79"]
    np.testing.assert_allclose(dets.xyxy, [[10, 12, 30, 40], [40, 40, 60, 60]], atol=1e-4)


@pytest.mark.parametrize(("scale", "zero_point"), [("0.1", "inf"), ("0.1", "1e40"), ("nan", "0"), ("0.1", "2.5")])
def test_a_model_info_quantisation_out_of_range_is_a_model_error(scale: str, zero_point: str) -> None:
    pytest.importorskip("openvino")
    import openvino as ov
    import openvino.opset13 as ops

    from npu_zc.pipeline.yolo_postprocess import YoloDetections

    image = ops.parameter([1, 3, 64, 64], np.float32, name="images")
    zero = ops.multiply(ops.reduce_mean(image, np.array([0, 1, 2, 3], np.int64), keep_dims=False), np.float32(0))
    # An int8 anchor-free output of 2 classes for a 64x64 input: [1, 6, 84].
    out = ops.convert(ops.add(ops.constant(np.zeros((1, 6, 84), np.float32)), zero), "i8")
    model = ov.Model([out], [image], "int8_yolo")
    model.set_rt_info(scale, ["model_info", "output_scale"])
    model.set_rt_info(zero_point, ["model_info", "output_zero_point"])
    with pytest.raises(npu_zc.ModelError, match="output_zero_point"):
        YoloDetections(model)


def test_a_masks_array_numpy_cannot_allocate_is_an_out_of_memory_error() -> None:
    """Masks that fit the machine but not the process (an address-space limit): numpy's allocation fails,
    and that is an OutOfMemoryError, not a panic on the null it returns. In a child process, limited."""
    if os.environ.get("NPU_ZC_EMULATED") == "qemu-user":
        pytest.skip("under qemu-user an address-space limit bounds the emulator's reservations, not the guest's arrays")
    import subprocess
    import sys

    code = f"""
import math, os, resource, sys
import numpy as np
sys.path[:0] = {sys.path!r}
import npu_zc
from npu_zc import YoloLayout, decode_yolo
f = np.load({str(FIXTURES / "segment.npz")!r})
outputs = [f["output"], f["protos"]]
layout = YoloLayout.from_outputs([o.shape for o in outputs])
n = len(decode_yolo(outputs, layout))
total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
side = int(math.sqrt(min(total // 4, 8 << 30) / n))  # masks within the machine's memory
with open("/proc/self/status") as s:
    vm = next(int(l.split()[1]) * 1024 for l in s if l.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + (512 << 20), resource.RLIM_INFINITY))
try:
    decode_yolo(outputs, layout, frame_size=(side, side))
except npu_zc.OutOfMemoryError as e:
    print("refused:", e)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "mask" in done.stdout, done.stdout
