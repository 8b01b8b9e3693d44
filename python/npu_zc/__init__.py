"""npu_zc: zero-copy NPU inference pipelines on Linux."""

from ._core import __version__

__all__ = ["__version__"]
