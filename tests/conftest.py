"""Shared fixtures and helpers for every room of tests/ (buffers/, layout/, runtime/...).

Test files import the helpers with ``from conftest import ...``: keep this the
only conftest.py, so that the name stays unambiguous (the rooms have no
``__init__.py``; a second conftest.py would shadow this one for some files).

Real-kernel tests (marked ``kernel``) need /dev/dma_heap/system,
/dev/udmabuf and, for fences and device attachment, vgem. Inside the test VM (scripts/vm-run.sh sets NPU_ZC_IN_VM=1) a
missing device is a failure; anywhere else those tests skip and say why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

import vgem as vgem_driver

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


def open_fds() -> int:
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
