"""Inference requests: bound buffers (zero copy) or copied arrays (copy mode), sync or async, states."""

from __future__ import annotations

import math
import time
from typing import Any, Sequence

import numpy as np

from .. import _core
from .._timeouts import SLICE_S, timeout_seconds
from ..errors import AliasingError, InvalidArgumentError, ModelError
from .binding import BindingReport, BoundBuffer, bind, copy_report, report
from .device import plugin_message
from .model import TensorSpec, ov_type
from .target import Target


_SLICE_MS = int(SLICE_S * 1000)


class Request:
    """One ``openvino.InferRequest`` of a compiled model (a :class:`.Target`), and the buffers bound to it.

    Create with ``Session.create_request()``.

    Zero copy: ``bind_input``/``bind_output`` make our buffers the request's
    memory; ``infer()`` then reads and writes them in place. Copy mode:
    ``infer_copy(arrays)`` copies arrays in and results out, as most
    OpenVINO code does today.
    """

    def __init__(self, target: Target, request: Any) -> None:
        self.target = target
        """What it infers on: the compiled model, its tensor specs, the device."""
        self.request = request
        """The ``openvino.InferRequest``."""
        self._inputs: list[BoundBuffer | None] = [None] * len(target.inputs)
        self._outputs: list[BoundBuffer | None] = [None] * len(target.outputs)
        self._own: dict[tuple[str, int], Any] = {}  # copy mode: tensors OpenVINO allocated
        self._ran = False

    # --- binding (zero copy) ---

    def bind_input(self, buffer: Any, port: int | str = 0, *, offset: int = 0) -> np.ndarray:
        """Make ``buffer`` the memory of input ``port``; returns the CPU view to write the frame into."""
        index = _port(self.target.inputs, port, "input")
        bound = bind(self.target.device, self.target.context, self.target.inputs[index], buffer, offset)
        self._set_input(index, bound)
        return bound.array

    def bind_output(self, buffer: Any, port: int | str = 0, *, offset: int = 0) -> np.ndarray:
        """Make ``buffer`` the memory of output ``port``; returns the CPU view the result appears in."""
        index = _port(self.target.outputs, port, "output")
        bound = bind(self.target.device, self.target.context, self.target.outputs[index], buffer, offset)
        self._set_output(index, bound)
        return bound.array

    def _set_input(self, index: int, bound: BoundBuffer) -> None:
        _refuse_overlap(bound, "input", [("output", b) for b in self._outputs])
        self._set(self.request.set_input_tensor, index, bound)
        self._inputs[index] = bound

    def _set_output(self, index: int, bound: BoundBuffer) -> None:
        others = [("input", b) for b in self._inputs] + [("output", b) for i, b in enumerate(self._outputs) if i != index]
        _refuse_overlap(bound, "output", others)
        self._set(self.request.set_output_tensor, index, bound)
        self._outputs[index] = bound

    @staticmethod
    def _set(setter: Any, index: int, bound: BoundBuffer) -> None:
        try:
            setter(index, bound.tensor)
        except RuntimeError as exc:
            raise InvalidArgumentError(f"cannot bind {bound.spec}: {plugin_message(exc)}") from None

    def unbind(self) -> None:
        """Forget the bound buffers (so they can be closed); the request gets fresh memory of its own."""
        import openvino as ov

        for i, spec in enumerate(self.target.inputs):
            if self._inputs[i] is not None:
                self.request.set_input_tensor(i, ov.Tensor(ov_type(spec.element_type), list(spec.shape)))
        for i, spec in enumerate(self.target.outputs):
            if self._outputs[i] is not None:
                self.request.set_output_tensor(i, ov.Tensor(ov_type(spec.element_type), list(spec.shape)))
        self._inputs = [None] * len(self.target.inputs)
        self._outputs = [None] * len(self.target.outputs)
        self._own.clear()

    def binding_report(self) -> list[BindingReport]:
        """Per input and output: whether the device reads (writes) our buffer or a copy, and how we know
        (see :class:`npu_zc.runtime.BindingReport`); ports with nothing bound use the request's own memory."""
        device = self.target.device
        out: list[BindingReport] = []
        for direction, bound_list, getter in (
            ("input", self._inputs, self.request.get_input_tensor),
            ("output", self._outputs, self.request.get_output_tensor),
        ):
            specs = self.target.inputs if direction == "input" else self.target.outputs
            for i, bound in enumerate(bound_list):
                if bound is None:
                    out.append(copy_report(device, direction, i, specs[i]))
                    continue
                base = device.upper().split(".")[0]
                held = getter(i) if base not in ("NPU", "GPU") else None
                out.append(report(device, direction, i, bound, held))
        return out

    def input_array(self, port: int | str = 0) -> np.ndarray:
        """The CPU view of the buffer bound to input ``port``."""
        bound = self._inputs[_port(self.target.inputs, port, "input")]
        if bound is None:
            raise InvalidArgumentError(f"input {port!r} has no buffer bound: call bind_input first")
        return bound.array

    def output_array(self, port: int | str = 0) -> np.ndarray:
        """The result of output ``port`` in place: the bound buffer's view, else the request's own memory."""
        index = _port(self.target.outputs, port, "output")
        bound = self._outputs[index]
        if bound is not None:
            return bound.array
        own: np.ndarray = self.request.get_output_tensor(index).data  # OpenVINO ships no types
        return own

    # --- running ---

    def infer(self) -> None:
        """Run on the bound buffers and wait (zero copy: nothing is copied in or out)."""
        self._check_bound()
        self._infer()

    def _infer(self) -> None:
        """Infer on what is bound to the request now, and wait; the first call's time is noted."""
        started = time.perf_counter()
        try:
            if self.target.async_only:  # RUN_INFERENCES_SEQUENTIALLY: the plugin takes async requests only
                self.request.start_async()
                self.request.wait()
            else:
                self.request.infer(share_outputs=True)  # results stay in place: no copy of the outputs
        except RuntimeError as exc:
            raise ModelError(f"inference failed on {self.target.device}: {plugin_message(exc)}") from None
        self._note_first((time.perf_counter() - started) * 1000)

    def start(self) -> None:
        """Start inference on the bound buffers; :meth:`wait` for it. The input must not be rewritten until then."""
        self._check_bound()
        self.request.start_async()

    def wait(self, timeout_ms: float | None = None) -> bool:
        """Wait for :meth:`start`'s inference; False if ``timeout_ms`` passed first.

        ``timeout_ms`` follows the one timeout rule (docs/safety.md), in milliseconds: None, inf or more than a
        wait can hold wait for ever; NaN or a negative number is an :class:`npu_zc.InvalidArgumentError`. The
        wait runs in slices, so Ctrl-C stops it."""
        ms = timeout_seconds(timeout_ms, "timeout_ms")  # the rule does not depend on the unit
        deadline = None if ms is None else time.monotonic() + ms / 1000
        try:
            while True:
                left_ms = None if deadline is None else max(0.0, (deadline - time.monotonic()) * 1000)
                step = _SLICE_MS if left_ms is None else min(_SLICE_MS, math.ceil(left_ms))
                if self.request.wait_for(step):
                    return True
                if left_ms is not None and left_ms <= _SLICE_MS:
                    return False
        except RuntimeError as exc:
            raise ModelError(f"inference failed on {self.target.device}: {plugin_message(exc)}") from None

    def infer_copy(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        """Copy mode: copy ``inputs`` into the request's own memory, infer, copy the results out.

        The results go into ``outputs`` when given (e.g. mapped output buffers), else into new arrays.
        """
        self._copy_in(inputs)
        self._infer()
        results: list[np.ndarray] = []
        for i, spec in enumerate(self.target.outputs):
            data = _as_spec_dtype(self._own[("out", i)].data, spec)
            if outputs is not None:
                _check_array(spec, outputs[i])
                np.copyto(outputs[i], data, casting="no")
                results.append(outputs[i])
            else:
                results.append(data.copy())
        return results

    def _copy_in(self, inputs: Sequence[np.ndarray]) -> None:
        """Copy mode's first half: ``inputs`` copied into the request's own memory, its own outputs set (the latency
        fit starts such requests together)."""
        specs = self.target.inputs
        if len(inputs) != len(specs):
            raise InvalidArgumentError(f"the model has {len(specs)} input(s), got {len(inputs)} array(s)")
        for i, (spec, array) in enumerate(zip(specs, inputs)):
            _check_array(spec, array)
            own = self._own_tensor("in", i, spec)
            self.request.set_input_tensor(i, own)
            np.copyto(_as_spec_dtype(own.data, spec), array, casting="no")
        for i, spec in enumerate(self.target.outputs):
            self.request.set_output_tensor(i, self._own_tensor("out", i, spec))
        self._inputs = [None] * len(specs)
        self._outputs = [None] * len(self.target.outputs)

    @property
    def latency_ms(self) -> float:
        """How long the last inference took, as OpenVINO measured it."""
        return float(self.request.latency)

    # --- stateful models ---

    def state_names(self) -> list[str]:
        return [state.name for state in self.request.query_state()]

    def get_state(self, name: str) -> np.ndarray:
        """A copy of the state variable ``name``."""
        return np.array(self._state(name).state.data, copy=True)

    def set_state(self, name: str, value: np.ndarray) -> None:
        import openvino as ov

        state = self._state(name)
        current = state.state
        value = np.ascontiguousarray(value)
        if tuple(value.shape) != tuple(current.shape):
            raise InvalidArgumentError(f"state {name!r} has shape {tuple(current.shape)}, got {value.shape}")
        state.state = ov.Tensor(value.astype(current.data.dtype, copy=False))

    def reset_states(self) -> None:
        """Every state variable back to its initial value."""
        self.request.reset_state()

    def _state(self, name: str) -> Any:
        for state in self.request.query_state():
            if state.name == name:
                return state
        raise InvalidArgumentError(f"no state {name!r}: the model has {self.state_names() or 'no states'}")

    # --- internals ---

    def _check_bound(self) -> None:
        for spec, bound in zip(self.target.inputs, self._inputs):
            if bound is None:
                raise InvalidArgumentError(f"input {spec} has no buffer bound: call bind_input (or use infer_copy)")

    def _own_tensor(self, kind: str, index: int, spec: TensorSpec) -> Any:
        import openvino as ov

        key = (kind, index)
        if key not in self._own:
            self._own[key] = ov.Tensor(ov_type(spec.element_type), list(spec.shape))
        return self._own[key]

    def _note_first(self, ms: float) -> None:
        if not self._ran:
            self._ran = True
            self.target.on_first_inference(ms)


def _refuse_overlap(bound: BoundBuffer, what: str, others: list[tuple[str, BoundBuffer | None]]) -> None:
    """The aliasing rule (docs/safety.md): the device writes an output while it reads the inputs, so an
    output may share no byte with an input or another output (two maps of one buffer included)."""
    for kind, other in others:
        if other is not None and _core._shares_memory(bound.array, other.array):
            raise AliasingError(
                f"this {what} buffer shares memory with a bound {kind} ({other.spec}): the device would write "
                "memory it reads; bind memory of its own (another buffer, or a range that does not overlap)"
            )


def _port(specs: Sequence[TensorSpec], port: int | str, what: str) -> int:
    if isinstance(port, int):
        if 0 <= port < len(specs):
            return port
        raise InvalidArgumentError(f"the model has {len(specs)} {what}(s); there is no {what} {port}")
    for spec in specs:
        if spec.name == port:
            return spec.index
    raise InvalidArgumentError(f"no {what} named {port!r}: the model has {', '.join(s.name for s in specs)}")


def _check_array(spec: TensorSpec, array: Any) -> None:
    if not isinstance(array, np.ndarray):
        raise InvalidArgumentError(f"{spec.name} takes a numpy array, not {type(array).__name__}")
    if tuple(array.shape) != spec.shape or array.dtype != spec.dtype:
        raise InvalidArgumentError(f"{spec} takes a {spec.dtype} array of shape {spec.shape}, got {array.dtype} {array.shape}")


def _as_spec_dtype(data: np.ndarray, spec: TensorSpec) -> np.ndarray:
    # OpenVINO shows bf16 memory as float16; reinterpret the same bytes.
    return data.view(spec.dtype) if data.dtype != spec.dtype else data
