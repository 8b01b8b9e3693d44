"""What requests and queues infer on: the narrow view of a session they are given.

A :class:`Target` holds the compiled model, its input and output tensor specs,
the device and its remote context, and where the first inference's time goes.
:class:`~.request.Request` and :class:`~.queue.AsyncQueue` take one of these,
never the :class:`~.session.Session` itself, so that the session builds them and
nothing reads the session back (no import circle: session -> queue/request ->
target).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .model import TensorSpec


def _ignore(ms: float) -> None:
    """A target made by hand records its first inference nowhere."""


@dataclass(frozen=True)
class Target:
    """A compiled model on one device, as requests and queues see it."""

    compiled: Any
    """The ``openvino.CompiledModel``."""
    device: str
    """The device it was compiled for ("CPU", "NPU"...)."""
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    context: Any | None = None
    """The remote context it was compiled in (NPU, GPU); None on the CPU."""
    on_first_inference: Callable[[float], None] = _ignore
    """Called with a request's first inference time in ms (the session keeps the first one: FEIL/FIL)."""
    async_only: bool = False
    """Compiled with RUN_INFERENCES_SEQUENTIALLY (NPU): the plugin refuses synchronous ``infer()``, so a
    request's ``infer`` starts and waits instead."""

    @property
    def optimal_requests(self) -> int:
        """The device's OPTIMAL_NUMBER_OF_INFER_REQUESTS for this model and hint."""
        return int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))

    def create_infer_request(self) -> Any:
        """A new ``openvino.InferRequest`` of the compiled model."""
        return self.compiled.create_infer_request()
