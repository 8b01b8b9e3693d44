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
