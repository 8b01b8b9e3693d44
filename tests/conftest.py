"""Shared fixtures.

Real-kernel tests (marked ``kernel``) need /dev/dma_heap/system,
/dev/udmabuf and, for fences and device attachment, vgem. Inside the test VM (scripts/vm-run.sh sets NPU_ZC_IN_VM=1) a
missing device is a failure; anywhere else those tests skip and say why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

import vgem as vgem_driver

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


def mapping_count() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


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
