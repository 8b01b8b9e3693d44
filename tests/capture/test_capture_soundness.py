"""Cameras sound (docs/safety.md): a frame's buffer, mapped, is read-only and holds the frame."""

from __future__ import annotations

import gc

import pytest

import npu_zc
from npu_zc import BufferClosedError, BufferInUseError, InvalidArgumentError

W, H = 640, 480


@pytest.mark.kernel
def test_a_frames_buffer_maps_read_only_and_holds_the_frame(vivid: dict[str, str]) -> None:
    with npu_zc.Camera(vivid["single"], W, H) as cam:
        frame = cam.read()
        buffer = frame.buffer
        view = buffer.map()
        assert not view.flags.writeable  # the driver writes this memory
        with pytest.raises(InvalidArgumentError, match="read-only"):
            buffer.map(writable=True)
        with pytest.raises(BufferInUseError):
            frame.release()  # a view is alive: the driver would overwrite what it shows
        del view
        gc.collect()
        frame.release()
        with pytest.raises(BufferClosedError, match="released"):
            buffer.map(writable=False)
        with cam.read() as again:
            assert again.buffer.map(writable=False).size > 0
