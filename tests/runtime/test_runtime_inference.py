"""Inference on real models and photos through our buffers: zero copy and copy mode, async, states, bad input."""

from __future__ import annotations

import threading

import numpy as np
import pytest

ov = pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")
ops = pytest.importorskip("openvino.opset13", reason="OpenVINO is not installed (a dependency of npu_zc)")
opset6 = pytest.importorskip("openvino.opset6", reason="OpenVINO is not installed (a dependency of npu_zc)")
cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (a dependency of npu_zc)")
# skimage.data and skimage.feature load lazily on first use (scikit-image >= 0.20).
skimage = pytest.importorskip("skimage", reason="scikit-image is not installed (the [demo] extra)")

import npu_zc
from npu_zc import BufferClosedError, BufferInUseError, InvalidArgumentError, PoolExhaustedError
from npu_zc.runtime import CompileOptions, Session, compile_model, imagenet_labels
from npu_zc.runtime.zoo import face_detection
from conftest import CATS, centre_crop

F32 = CompileOptions(inference_precision="f32", num_threads=1)


def write_rgbx(dst: np.ndarray, rgb: np.ndarray) -> None:
    """Preprocess for zero copy: packed RGBx u8, straight into the mapped input buffer."""
    dst[0, :, :, :3] = rgb
    dst[0, :, :, 3] = 0


def write_planar(dst: np.ndarray, rgb: np.ndarray, session: Session) -> None:
    """Preprocess for copy mode: (x - mean) / scale, planar float."""
    norm = session.normalisation
    mean = np.asarray(norm.mean, np.float32)[:, None, None]
    scale = np.asarray(norm.scale, np.float32)[:, None, None]
    dst[0] = (rgb.transpose(2, 0, 1).astype(np.float32) - mean) / scale


def top5(logits: np.ndarray) -> list[str]:
    labels = imagenet_labels()
    return [labels[i] for i in np.argsort(-logits.ravel())[:5]]


@pytest.fixture(scope="module")
def zero_copy() -> Session:
    return compile_model("efficientnet-lite0", "CPU", options=F32)


@pytest.fixture(scope="module")
def copy_mode() -> Session:
    return compile_model("efficientnet-lite0", "CPU", mode="copy", options=F32)


@pytest.fixture(scope="module")
def photos() -> dict[str, np.ndarray]:
    return {name: centre_crop(getattr(skimage.data, name)()) for name in ("chelsea", "coffee")}


def classify_zero_copy(session: Session, rgb: np.ndarray) -> tuple[list[str], dict[str, bool]]:
    request = session.create_request()
    with npu_zc.alloc(session.inputs[0].nbytes) as in_buf, npu_zc.alloc(session.outputs[0].nbytes) as out_buf:
        frame = request.bind_input(in_buf)
        logits = request.bind_output(out_buf)
        write_rgbx(frame, rgb)
        request.infer()
        shared = {
            # The request's tensors are our mapped memory: same addresses, nothing in between.
            "input": request.request.get_input_tensor().data.ctypes.data == frame.ctypes.data,
            "output": request.request.get_output_tensor().data.ctypes.data == logits.ctypes.data,
        }
        result = top5(logits)
        request.unbind()
        del frame, logits
    return result, shared


def classify_copy(session: Session, rgb: np.ndarray) -> list[str]:
    request = session.create_request()
    spec = session.inputs[0]
    planar = np.empty(spec.shape, spec.dtype)
    write_planar(planar, rgb, session)
    return top5(request.infer_copy([planar])[0])


@pytest.mark.parametrize("photo", ["chelsea", "coffee"])
def test_real_photos_same_top5_in_both_modes(photo: str, zero_copy: Session, copy_mode: Session, photos) -> None:
    zc, shared = classify_zero_copy(zero_copy, photos[photo])
    cp = classify_copy(copy_mode, photos[photo])
    print(f"\n{photo}: zero-copy {zc}\n{' ' * len(photo)}  copy      {cp}")
    assert shared == {"input": True, "output": True}
    assert zc == cp
    if photo == "chelsea":
        assert CATS & set(zc[:3]), zc
    else:
        assert zc[0] == "espresso", zc


def test_zero_copy_session_reads_the_hw_layout(zero_copy: Session, copy_mode: Session) -> None:
    assert zero_copy.format == "RGBx" and zero_copy.inputs[0].shape == (1, 224, 224, 4)
    assert zero_copy.inputs[0].element_type == "u8" and zero_copy.inputs[0].nbytes == 224 * 224 * 4
    assert copy_mode.format == "RGBP_FLOAT" and copy_mode.inputs[0].nbytes == 3 * 224 * 224 * 4
    assert zero_copy.outputs[0].shape == (1, 1000) and zero_copy.outputs[0].element_type == "f32"


def test_input_bound_at_an_offset_inside_a_larger_buffer(zero_copy: Session, photos) -> None:
    spec = zero_copy.inputs[0]
    request = zero_copy.create_request()
    with npu_zc.alloc(spec.nbytes + 8192) as shared:
        frame = request.bind_input(shared, offset=8192)
        whole = shared.map()
        assert frame.ctypes.data == whole.ctypes.data + 8192
        logits = request.bind_output(npu_zc.alloc(zero_copy.outputs[0].nbytes))
        write_rgbx(frame, photos["coffee"])
        request.infer()
        assert top5(logits)[0] == "espresso"
        request.unbind()
        del frame, whole, logits


# --- the face detector through the same binding ---


def test_face_detector_finds_the_astronauts_face() -> None:
    session = compile_model(face_detection.model_path(), "CPU", mean=face_detection.MEAN, scale=face_detection.SCALE, options=F32)
    assert session.image.layout == "NHWC" and session.format == "RGBx"
    assert session.inputs[0].shape == (1, 128, 128, 4)
    request = session.create_request()
    frame = request.bind_input(npu_zc.alloc(session.inputs[0].nbytes))
    outputs = {spec.name: request.bind_output(npu_zc.alloc(spec.nbytes), spec.name) for spec in session.outputs}
    photo = skimage.data.astronaut()  # 512 x 512 RGB
    write_rgbx(frame, cv2.resize(photo, (128, 128), interpolation=cv2.INTER_AREA))
    request.infer()
    assert request.request.get_input_tensor().data.ctypes.data == frame.ctypes.data
    faces = face_detection.decode(outputs["regressors"], outputs["classificators"])
    assert len(faces) == 1, faces
    x0, y0, x1, y1 = faces[0].scaled(512, 512)
    # Where the face is, found independently: scikit-image's LBP frontal-face cascade.
    cascade = skimage.feature.Cascade(skimage.data.lbp_frontal_face_cascade_filename())
    found = cascade.detect_multi_scale(img=photo, scale_factor=1.2, step_ratio=1, min_size=(60, 60), max_size=(200, 200))
    assert len(found) == 1
    r, c, h, w = found[0]["r"], found[0]["c"], found[0]["height"], found[0]["width"]
    inter = max(0, min(x1, c + w) - max(x0, c)) * max(0, min(y1, r + h) - max(y0, r))
    iou = inter / ((x1 - x0) * (y1 - y0) + w * h - inter)
    print(f"\nBlazeFace {faces[0].score:.2f} at {(x0, y0, x1, y1)}; LBP cascade at {(c, r, c + w, r + h)}; IoU {iou:.2f}")
    assert faces[0].score > 0.75
    assert iou > 0.5


# --- the async queue ---


def test_queue_delivers_in_submission_order_over_pooled_buffers(zero_copy: Session, photos) -> None:
    order = ["coffee", "chelsea", "coffee", "coffee", "chelsea", "chelsea", "coffee", "chelsea"]
    seen: list[tuple[int, str, str]] = []
    with zero_copy.queue(depth=2, heap="memfd") as queue:
        assert queue.depth == 2
        sent = 0
        while sent < len(order) or queue.pending:
            if sent < len(order) and queue.pending < queue.depth:
                frame = queue.acquire(timeout=10)
                write_rgbx(frame.inputs[0], photos[order[sent]])
                assert queue.submit(frame, userdata=order[sent]) == sent
                sent += 1
            else:
                result = queue.get(timeout=30)
                assert result is not None
                with result:
                    seen.append((result.sequence, result.userdata, top5(result.outputs[0])[0]))
    assert [s for s, _, _ in seen] == list(range(len(order)))
    for _, photo, label in seen:
        assert (label == "espresso") if photo == "coffee" else (label in CATS), seen


def test_queue_callback_mode_keeps_the_order(zero_copy: Session, photos) -> None:
    got: list[tuple[int, str]] = []
    done = threading.Event()

    def on_result(result) -> None:
        got.append((result.sequence, top5(result.outputs[0])[0]))
        if len(got) == 6:
            done.set()

    with zero_copy.queue(depth=3, heap="memfd", callback=on_result) as queue:
        for i in range(6):
            frame = queue.acquire(timeout=30)
            write_rgbx(frame.inputs[0], photos["coffee" if i % 2 else "chelsea"])
            queue.submit(frame)
        assert done.wait(60)
        with pytest.raises(InvalidArgumentError, match="hands results to its callback"):
            queue.get()
    assert [s for s, _ in got] == list(range(6))
    assert all((label == "espresso") == (seq % 2 == 1) for seq, label in got), got


def test_queue_depth_defaults_to_the_optimal_number_of_requests(zero_copy: Session) -> None:
    with zero_copy.queue(heap="memfd") as queue:
        assert queue.depth == zero_copy.optimal_requests == 1  # LATENCY hint on the CPU


def test_buffers_in_flight_are_not_handed_out_for_writing(zero_copy: Session, photos) -> None:
    with zero_copy.queue(depth=1, heap="memfd") as queue:
        frame = queue.acquire()
        assert queue._state(frame.index) == "cpu"
        write_rgbx(frame.inputs[0], photos["coffee"])
        queue.submit(frame)
        # The set (its input, its output and its request) is taken from the acquire until the result is released.
        assert queue._state(frame.index) in ("in-flight", "result")
        with pytest.raises(PoolExhaustedError):
            queue.acquire(timeout=0)
        with pytest.raises(InvalidArgumentError, match="submitted already"):
            queue.submit(frame)
        result = queue.get(timeout=30)
        assert result is not None
        assert queue._state(frame.index) == "result"  # we are still reading the result: nobody may write the set
        with pytest.raises(PoolExhaustedError):
            queue.acquire(timeout=0)
        assert top5(result.outputs[0])[0] == "espresso"
        result.release()
        assert queue._state(frame.index) == "free"
        again = queue.acquire(timeout=0)
        assert again.input_buffers[0] is frame.input_buffers[0] and again.index == frame.index
        queue.submit(again)
        assert queue.get(timeout=30) is not None


# --- stateful models ---


def _accumulator() -> ov.Model:
    image = ops.parameter([1, 3, 8, 8], ov.Type.f32, name="image")
    previous = opset6.read_value(ops.constant(np.zeros((1, 3, 8, 8), np.float32)), "sum")
    total = ops.add(previous, image)
    return ov.Model([ops.result(total)], [opset6.assign(total, "sum")], [image], "accumulator")


def test_stateful_model_list_get_set_reset() -> None:
    session = compile_model(_accumulator(), "CPU", mode="copy", options=F32)
    request = session.create_request()
    ones = np.ones((1, 3, 8, 8), np.float32)
    request.infer_copy([ones])
    out = request.infer_copy([ones])[0]
    assert request.state_names() == ["sum"]
    np.testing.assert_array_equal(out, 2 * ones)
    np.testing.assert_array_equal(request.get_state("sum"), 2 * ones)
    request.set_state("sum", 10 * ones)
    np.testing.assert_array_equal(request.infer_copy([ones])[0], 11 * ones)
    request.reset_states()
    np.testing.assert_array_equal(request.infer_copy([ones])[0], ones)
    with pytest.raises(InvalidArgumentError, match="no state 'count'"):
        request.get_state("count")
    with pytest.raises(InvalidArgumentError, match="has shape"):
        request.set_state("sum", np.ones((2, 2), np.float32))


def test_stateful_model_with_bound_buffers() -> None:
    session = compile_model(_accumulator(), "CPU", options=F32)  # zero copy: RGBx u8 in, f32 out
    request = session.create_request()
    frame = request.bind_input(npu_zc.alloc(session.inputs[0].nbytes))
    out = request.bind_output(npu_zc.alloc(session.outputs[0].nbytes))
    frame[...] = 3
    request.infer()
    request.infer()
    np.testing.assert_array_equal(out, np.full((1, 3, 8, 8), 6, np.float32))


# --- bad input: a clear error each time, and the session keeps working ---


def _still_works(session: Session, photo: np.ndarray) -> None:
    labels, shared = classify_zero_copy(session, photo)
    assert labels[0] == "espresso" and all(shared.values())


def test_bad_buffers_are_clear_errors_and_the_session_stays_usable(zero_copy: Session, photos) -> None:
    spec = zero_copy.inputs[0]
    request = zero_copy.create_request()
    with npu_zc.alloc(1024) as small:
        with pytest.raises(InvalidArgumentError, match=r"buffer too small: 'image' \(RGBx 1x224x224x4 u8, 200704 bytes\) needs 200704 bytes, the buffer has \d+"):
            request.bind_input(small)
    _still_works(zero_copy, photos["coffee"])

    closed = npu_zc.alloc(spec.nbytes)
    closed.close()
    with pytest.raises(BufferClosedError, match="the buffer is closed"):
        request.bind_input(closed)
    _still_works(zero_copy, photos["coffee"])

    with pytest.raises(InvalidArgumentError, match="binds an npu_zc.DmaBuf .*not ndarray"):
        request.bind_input(np.zeros(spec.shape, np.uint8))
    with pytest.raises(InvalidArgumentError, match="has no buffer bound"):
        zero_copy.create_request().infer()
    with pytest.raises(InvalidArgumentError, match="no input named 'pixels'"):
        request.bind_input(npu_zc.alloc(spec.nbytes), "pixels")
    with pytest.raises(InvalidArgumentError, match="offset 2 is not a multiple of f32's 4 bytes"):
        request.bind_output(npu_zc.alloc(8192), offset=2)
    _still_works(zero_copy, photos["coffee"])


def test_bound_buffer_cannot_be_closed_under_the_request(zero_copy: Session, photos) -> None:
    request = zero_copy.create_request()
    buffer = npu_zc.alloc(zero_copy.inputs[0].nbytes)
    frame = request.bind_input(buffer)
    del frame
    with pytest.raises(BufferInUseError):
        buffer.close()  # the request's tensor still points at it
    request.unbind()
    buffer.close()
    _still_works(zero_copy, photos["coffee"])


def test_copy_mode_checks_arrays_and_stays_usable(copy_mode: Session, photos) -> None:
    request = copy_mode.create_request()
    with pytest.raises(InvalidArgumentError, match="takes a float32 array of shape"):
        request.infer_copy([np.zeros((1, 224, 224, 3), np.uint8)])
    with pytest.raises(InvalidArgumentError, match="has 1 input"):
        request.infer_copy([])
    assert classify_copy(copy_mode, photos["coffee"])[0] == "espresso"


def test_top_classes_gives_probabilities_read_from_the_output_buffer(zero_copy: Session, photos) -> None:
    from npu_zc.runtime import top_classes

    request = zero_copy.create_request()
    frame = request.bind_input(npu_zc.alloc(zero_copy.inputs[0].nbytes))
    logits = request.bind_output(npu_zc.alloc(zero_copy.outputs[0].nbytes))
    assert zero_copy.prepared.info["output_raw_scores"] == "True"  # logits: softmax them
    write_rgbx(frame, photos["chelsea"])
    request.infer()
    cats = top_classes(logits, 3)
    assert sum(p for _, name, p in cats if name in CATS) > 0.8
    assert [p for _, _, p in cats] == sorted((p for _, _, p in cats), reverse=True)
    write_rgbx(frame, photos["coffee"])
    request.infer()
    (index, name, probability), *_ = top_classes(logits, 5)
    assert (index, name) == (967, "espresso") and probability > 0.8


def test_request_wait_follows_the_one_timeout_rule(zero_copy: Session) -> None:
    """Request.wait(timeout_ms): NaN and negatives refused as InvalidArgumentError, not the plugin's error or a
    TypeError; a wait longer than any (10**400 ms, inf) waits until the inference is done."""
    request = zero_copy.create_request()
    request.bind_input(npu_zc.alloc(zero_copy.inputs[0].nbytes))
    for spec in zero_copy.outputs:
        request.bind_output(npu_zc.alloc(spec.nbytes), spec.name)
    for bad in (float("nan"), -1, float("-inf")):
        request.start()
        with pytest.raises(npu_zc.InvalidArgumentError, match="timeout_ms"):
            request.wait(bad)
        assert request.wait(60_000)
    with pytest.raises(TypeError, match="timeout_ms"):
        request.wait("5")  # type: ignore[arg-type]
    for forever in (10**400, float("inf"), None, 1e20):
        request.start()
        assert request.wait(forever)
    assert request.wait(0)  # done already
