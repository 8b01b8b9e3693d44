"""The `npu-zc` command."""

from .main import main

__all__ = ["main"]
