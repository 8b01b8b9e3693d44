"""Compiled models: compile once (with caching), then create requests and queues.

``compile_model`` resolves the device (``AUTO`` says which it took), gives the
model the input its mode needs (:mod:`.model`), passes properties through, and
records how long the model took to become usable: FEIL (first-ever inference
latency: compile + load + first inference) when it was compiled, FIL when it
was loaded from the cache directory.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from .._numbers import real_number
from ..errors import DeviceNotFoundError, InvalidArgumentError, ModelError
from . import remote
from .device import DeviceChoice, choose_device, core, is_available, plugin_message, why_unavailable
from .model import ImageInput, Mode, Normalisation, PreparedModel, TensorSpec, colour_argument, prepare
from .quantisation import InputQuantisation
from .binding import BindingReport, copy_report
from .latency_fit import BUSY_REQUESTS, StreamsFit, fit_streams, median_busy_ms
from .queue import AsyncQueue
from .request import Request
from .target import Target

PerformanceHint = Literal["LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT"]

# How the NPU and GPU plugins word "there is no device (or driver, or compiler)".
_NO_DEVICE_SIGNS = ("could not find", "no available backend", "level zero", "compiler loading failed", "no supported devices", "cannot load library")


@dataclass(frozen=True)
class CompileOptions:
    """OpenVINO properties for compilation, by name; ``None`` leaves the device's default.

    The ``npu_*`` options are passed only to a device that lists them among its
    supported properties (they are dropped, and reported in
    :attr:`Session.ignored_options`, when AUTO falls back to the CPU).
    """

    performance_hint: PerformanceHint | None = "LATENCY"
    num_requests: int | None = None
    """PERFORMANCE_HINT_NUM_REQUESTS: caps the requests the hint plans for."""
    cache_dir: str | os.PathLike[str] | None = None
    """CACHE_DIR: compiled blobs are stored here and imported on later compilations."""
    inference_precision: Literal["f32", "f16", "bf16"] | None = None
    """INFERENCE_PRECISION_HINT; ``None`` passes nothing and the device picks (the CPU plugin: bf16 on x86_64 with
    AVX-512 BF16 or AMX, f16 on aarch64 with FP16 arithmetic, f32 otherwise). Use "f32" where numerics must match
    an f32 reference."""
    num_threads: int | None = None
    """INFERENCE_NUM_THREADS (CPU)."""
    reserved_cores: int = 0
    """CPU, throughput hint: cores the plugin leaves to the caller's own threads (NUM_STREAMS = cores minus
    these), unless NUM_STREAMS or INFERENCE_NUM_THREADS is given. The pipeline's throughput mode reserves one
    for its feeding thread from 8 cores up (:func:`npu_zc.pipeline.throughput.reserved_cores`)."""
    npu_turbo: bool | None = None
    npu_tiles: int | None = None
    npu_max_tiles: int | None = None
    npu_compilation_mode_params: str | None = None
    """e.g. "optimization-level=1 performance-hint-override=latency"."""
    npu_defer_weights_load: bool | None = None
    npu_bypass_umd_caching: bool | None = None
    npu_enable_strides_for: str | None = None
    """NPU_ENABLE_STRIDES_FOR: the inputs/outputs (names, comma-separated) whose tensors may be strided, so that a
    camera frame with padded rows is read as it is."""
    latency_budget_ms: float | None = None
    """CPU, throughput hint: fit NUM_STREAMS to a live stream's budget from frame to result. The compiled model's
    streams are halved (each inference gets twice the threads) while an inference with every stream busy takes
    more than half of it with the hint's own streams, or more than 70% once halved, down to one stream
    (:func:`npu_zc.runtime.latency_fit.fit_streams`; :attr:`Session.streams_fit` says what was tried). Unless
    NUM_STREAMS or INFERENCE_NUM_THREADS is given."""
    run_inferences_sequentially: bool | None = None
    """RUN_INFERENCES_SEQUENTIALLY (NPU): requests run one after the other in submission order; async only (a
    request's ``infer()`` then starts and waits)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Any other OpenVINO property, passed as is."""

    _KEYS = {
        "performance_hint": "PERFORMANCE_HINT",
        "num_requests": "PERFORMANCE_HINT_NUM_REQUESTS",
        "cache_dir": "CACHE_DIR",
        "inference_precision": "INFERENCE_PRECISION_HINT",
        "num_threads": "INFERENCE_NUM_THREADS",
        "npu_turbo": "NPU_TURBO",
        "npu_tiles": "NPU_TILES",
        "npu_max_tiles": "NPU_MAX_TILES",
        "npu_compilation_mode_params": "NPU_COMPILATION_MODE_PARAMS",
        "npu_defer_weights_load": "NPU_DEFER_WEIGHTS_LOAD",
        "npu_bypass_umd_caching": "NPU_BYPASS_UMD_CACHING",
        "npu_enable_strides_for": "NPU_ENABLE_STRIDES_FOR",
        "run_inferences_sequentially": "RUN_INFERENCES_SEQUENTIALLY",
    }
    NPU_ONLY = ("NPU_TURBO", "NPU_ENABLE_STRIDES_FOR", "RUN_INFERENCES_SEQUENTIALLY")
    """What NPU users ask for by name: refused, in one sentence, where the session does not run on an NPU (the
    other ``npu_*`` options are tuning, dropped and listed in :attr:`Session.ignored_options`)."""

    @property
    def fixes_cpu_streams(self) -> bool:
        """NUM_STREAMS or INFERENCE_NUM_THREADS is given: neither reserved cores nor a latency budget change them."""
        return self.num_threads is not None or bool({"NUM_STREAMS", "INFERENCE_NUM_THREADS"} & {str(k) for k in self.extra})

    def with_latency_budget(self, budget_ms: float) -> "CompileOptions":
        """These options with :attr:`latency_budget_ms`, unless they have one or fix the CPU's streams themselves."""
        if self.latency_budget_ms is not None or self.fixes_cpu_streams:
            return self
        return dataclasses.replace(self, latency_budget_ms=budget_ms)

    def to_config(self, supported: Sequence[str] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
        """``(config, ignored)``: the property map for ``compile_model``, and the options left out and why.

        ``supported`` is the device's SUPPORTED_PROPERTIES; without it nothing is left out.
        """
        config: dict[str, Any] = {}
        ignored: dict[str, str] = {}
        for attr, key in self._KEYS.items():
            value = getattr(self, attr)
            if value is None:
                continue
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            if isinstance(value, bool):
                value = "YES" if value else "NO"
            if supported is not None and key not in supported and key != "CACHE_DIR":
                ignored[key] = "not supported by this device"
                continue
            config[key] = value
        config.update(self.extra)
        return config, ignored


@dataclass
class Startup:
    """How long the model took to become usable: compile (or cache import) + first inference."""

    compile_ms: float
    loaded_from_cache: bool
    cache_dir: str | None
    first_inference_ms: float | None = None

    @property
    def kind(self) -> Literal["FEIL", "FIL"]:
        """FIL when the compiled blob came from the cache, FEIL when it was compiled."""
        return "FIL" if self.loaded_from_cache else "FEIL"

    @property
    def latency_ms(self) -> float | None:
        """compile + load + first inference, once the first inference ran."""
        return None if self.first_inference_ms is None else self.compile_ms + self.first_inference_ms

    def __str__(self) -> str:
        first = "no inference yet" if self.latency_ms is None else f"{self.latency_ms:.1f} ms"
        return f"{self.kind} {first} (compile {self.compile_ms:.1f} ms{', from cache' if self.loaded_from_cache else ''})"


class Session:
    """A model compiled for one device, with its input and output tensor specs.

    Create with :func:`compile_model`.
    """

    def __init__(
        self,
        prepared: PreparedModel,
        compiled: Any,
        choice: DeviceChoice,
        context: Any | None,
        startup: Startup,
        config: dict[str, Any],
        ignored_options: dict[str, str],
    ) -> None:
        self.prepared = prepared
        self.compiled = compiled
        """The ``openvino.CompiledModel``."""
        self.device_choice = choice
        self.context = context
        """The remote context the model was compiled in (NPU, GPU); None on the CPU."""
        self.startup = startup
        self.config = config
        """The properties passed to ``compile_model``."""
        self.ignored_options = ignored_options
        self.streams_fit: StreamsFit | None = None
        """What fitting NUM_STREAMS to :attr:`CompileOptions.latency_budget_ms` tried and kept; None when not asked."""
        self._first_lock = threading.Lock()
        self.target = Target(
            compiled, choice.device, prepared.inputs, prepared.outputs, context, self._record_first_inference,
            async_only=str(config.get("RUN_INFERENCES_SEQUENTIALLY", "")).upper() in ("YES", "TRUE"),
        )  # fmt: skip
        """What its requests and queues are given: the compiled model, its tensor specs, the device, the startup callback."""

    @property
    def device(self) -> str:
        return self.device_choice.device

    @property
    def mode(self) -> Mode:
        return self.prepared.mode

    @property
    def format(self) -> str:
        """The layout the preprocess writes into the input buffer."""
        return self.prepared.format

    @property
    def image(self) -> ImageInput:
        return self.prepared.image

    @property
    def normalisation(self) -> Normalisation:
        """Mean, scale and colour order: applied inside the model in zero-copy mode, by the caller in copy mode."""
        return self.prepared.normalisation

    @property
    def quantisation(self) -> InputQuantisation | None:
        """An int8 input's scale and zero point (``RGBx_I8``: the preprocess quantises with them); None otherwise."""
        return self.prepared.quantisation

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.prepared.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.prepared.outputs

    @property
    def set_bytes(self) -> int:
        """Bytes of one request's inputs and outputs together: one set of an :class:`AsyncQueue`'s buffers."""
        return sum(spec.nbytes for spec in self.inputs + self.outputs)

    @property
    def optimal_requests(self) -> int:
        """The device's OPTIMAL_NUMBER_OF_INFER_REQUESTS for this model and hint."""
        return self.target.optimal_requests

    def property(self, name: str) -> Any:
        """One property read back from the compiled model (OpenVINO types as plain Python values)."""
        try:
            return _plain(self.compiled.get_property(name))
        except RuntimeError as exc:
            raise InvalidArgumentError(f"{self.device} cannot read property {name}: {plugin_message(exc)}") from None

    def properties(self) -> dict[str, Any]:
        """Every property the compiled model reports, read back."""
        values: dict[str, Any] = {}
        for key in self.compiled.get_property("SUPPORTED_PROPERTIES"):
            if key == "SUPPORTED_PROPERTIES":
                continue
            try:
                values[key] = _plain(self.compiled.get_property(key))
            except RuntimeError:
                continue
        return values

    def create_request(self) -> Request:
        return Request(self.target, self.target.create_infer_request())

    def queue(
        self,
        depth: int | None = None,
        *,
        heap: str = "auto",
        callback: Any = None,
        buffers: int | None = None,
        deliverers: int = 1,
    ) -> AsyncQueue:
        """An in-order async queue of ``depth`` requests (default: :attr:`optimal_requests`) over ``buffers`` sets of
        buffers (default ``depth``), with ``deliverers`` delivery threads for ``callback``; see :class:`AsyncQueue`."""
        return AsyncQueue(self.target, depth, heap=heap, callback=callback, buffers=buffers, deliverers=deliverers)

    def binding_report(self, heap: str = "auto") -> list[BindingReport]:
        """Per input and output, whether the device reads (writes) our memory or a copy, and how we know:
        buffers from ``heap`` are bound to a new request for the check, then freed. In copy mode every port
        is a copy. See :class:`npu_zc.runtime.BindingReport`."""
        if self.mode == "copy":
            return [copy_report(self.device, "input", i, s) for i, s in enumerate(self.inputs)] + [
                copy_report(self.device, "output", i, s) for i, s in enumerate(self.outputs)
            ]
        from ..buffers import alloc

        request = self.create_request()
        buffers = [alloc(spec.nbytes, heap) for spec in self.inputs + self.outputs]
        try:
            for i in range(len(self.inputs)):
                request.bind_input(buffers[i], i)
            for i in range(len(self.outputs)):
                request.bind_output(buffers[len(self.inputs) + i], i)
            return request.binding_report()
        finally:
            request.unbind()
            for buf in buffers:
                buf.close()

    def _record_first_inference(self, ms: float) -> None:
        with self._first_lock:
            if self.startup.first_inference_ms is None:
                self.startup.first_inference_ms = ms

    def __repr__(self) -> str:
        return f"<Session {self.prepared.source or 'model'} on {self.device}, {self.mode}, input {self.format}>"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and `taskset` narrow)."""
    return len(os.sched_getaffinity(0))


def compile_model(
    model: Any,
    device: str = "AUTO",
    *,
    mode: Mode = "zero-copy",
    hw_format: str | None = None,
    mean: Sequence[float] | None = None,
    scale: Sequence[float] | None = None,
    colour: Literal["RGB", "BGR"] | None = None,
    input_size: tuple[int, int] | None = None,
    options: CompileOptions | None = None,
    color: Literal["RGB", "BGR"] | None = None,
) -> Session:
    """Compile ``model`` (a path, a built-in name such as "efficientnet-lite0", or an ``openvino.Model``) for ``device``.

    ``device``: "NPU", "CPU", "GPU" or "AUTO" (the NPU when present, else the CPU;
    ``session.device_choice.reason`` says which). ``mode``: "zero-copy" compiles the
    model to read the packed HW layout (``hw_format``, chosen from the input's
    metadata by default) with ``mean``/``scale``/colour conversion inside; "copy"
    keeps the model's own input layout. ``colour``: the channel order the model was
    trained on ("RGB" or "BGR"; default: what the model records); ``color=`` is a
    deprecated alias for one release. Raises :class:`DeviceNotFoundError`,
    :class:`ModelError` or :class:`InvalidArgumentError`, each with one sentence.
    """
    colour = colour_argument(colour, color)
    options = options or CompileOptions()
    if options.latency_budget_ms is not None:
        real_number(options.latency_budget_ms, "latency_budget_ms", positive=True)
    choice = choose_device(device)
    prepared = prepare(
        model, choice.device, mode=mode, hw_format=hw_format, mean=mean, scale=scale, colour=colour, input_size=input_size
    )
    supported = list(core().get_property(choice.device, "SUPPORTED_PROPERTIES"))
    config, ignored = options.to_config(supported)
    refused = [key for key in CompileOptions.NPU_ONLY if key in ignored]
    if refused:
        what = f"{refused[0]} is an NPU option" if len(refused) == 1 else f"{', '.join(refused)} are NPU options"
        fix = "ask for device='NPU'" if is_available("NPU") else "no NPU is usable here (npu-zc info says why)"
        raise DeviceNotFoundError(f"{what} and this session runs on the {choice.device}: {fix}; or leave {'it' if len(refused) == 1 else 'them'} out")
    throughput_cpu = choice.device == "CPU" and str(config.get("PERFORMANCE_HINT", "")).upper() == "THROUGHPUT"
    streams_given = options.fixes_cpu_streams
    if options.reserved_cores > 0 and throughput_cpu and not streams_given:
        config["NUM_STREAMS"] = max(1, usable_cores() - options.reserved_cores)
    if config.get("CACHE_DIR"):
        Path(config["CACHE_DIR"]).mkdir(parents=True, exist_ok=True)

    context = remote.default_context(choice.device) if choice.device.split(".")[0] in ("NPU", "GPU") else None

    def session_of(config: dict[str, Any]) -> Session:
        compiled, startup = _compile(prepared, choice.device, context, config)
        return Session(prepared, compiled, choice, context, startup, config, ignored)

    session = session_of(config)
    if options.latency_budget_ms is not None and throughput_cpu and not streams_given:
        session, fit = fit_streams(
            session,
            int(session.property("NUM_STREAMS")),
            lambda streams: session_of({**config, "NUM_STREAMS": streams}),
            _busy_inference_ms,
            options.latency_budget_ms,
        )
        session.streams_fit = fit
    return session


def _compile(prepared: PreparedModel, device: str, context: Any | None, config: dict[str, Any]) -> tuple[Any, Startup]:
    """The plugin's compiled model and how long it took, or one sentence (a typed error) of why not."""
    started = time.perf_counter()
    try:
        if context is not None:
            # Compiled in the device's default context, so its remote tensors can be bound.
            compiled = core().compile_model(prepared.model, context, config)
        else:
            compiled = core().compile_model(prepared.model, device, config)
    except RuntimeError as exc:
        message = plugin_message(exc)
        lowered = message.lower()
        if device != "CPU" and any(sign in lowered for sign in _NO_DEVICE_SIGNS):
            raise DeviceNotFoundError(why_unavailable(device)) from None
        if "property" in lowered or "configuration key" in lowered:
            raise InvalidArgumentError(f"{device} refused a property: {message}") from None
        raise ModelError(f"{device} cannot compile {prepared.source or 'the model'}: {message}") from None
    compile_ms = (time.perf_counter() - started) * 1000
    try:
        from_cache = bool(compiled.get_property("LOADED_FROM_CACHE"))
    except RuntimeError:
        from_cache = False
    return compiled, Startup(compile_ms, from_cache, config.get("CACHE_DIR"))


def _busy_inference_ms(session: Session) -> float:
    """An inference's median time on zero inputs with every CPU stream busy: a request per stream (up to
    :data:`~npu_zc.runtime.latency_fit.BUSY_REQUESTS`), each in its own memory, started at once."""
    import numpy as np

    requests = [session.create_request() for _ in range(min(int(session.property("NUM_STREAMS")), BUSY_REQUESTS))]
    zeros = [np.zeros(spec.shape, spec.dtype) for spec in session.inputs]
    for request in requests:
        request._copy_in(zeros)
    try:
        return median_busy_ms([request.request for request in requests])
    except RuntimeError as exc:
        raise ModelError(f"inference failed on {session.device}: {plugin_message(exc)}") from None
    except TimeoutError as exc:
        raise ModelError(f"the latency fit could not time {session.device}: {exc}") from None


def measure_startup(
    model: Any, cache_dir: str | os.PathLike[str], device: str = "AUTO", *, runs: int = 2, **kwargs: Any
) -> list[Startup]:
    """Compile ``model`` ``runs`` times with ``cache_dir`` and run a first inference each time.

    With an empty cache directory the first entry is the FEIL (compiled) and the
    next ones are FILs (imported from the cache); ``loaded_from_cache`` says which
    each one really was.
    """
    import numpy as np

    options = dataclasses.replace(kwargs.pop("options", None) or CompileOptions(), cache_dir=cache_dir)
    results: list[Startup] = []
    for _ in range(runs):
        session = compile_model(model, device, options=options, **kwargs)
        request = session.create_request()
        request.infer_copy([np.zeros(spec.shape, spec.dtype) for spec in session.inputs])
        results.append(session.startup)
        del request, session
    return results


def _plain(value: Any) -> Any:
    """OpenVINO property values as plain Python: Type -> "f32", enums -> their name."""
    import openvino as ov

    if isinstance(value, ov.Type):
        return value.get_type_name()
    if hasattr(value, "name") and type(value).__module__.startswith("openvino"):
        return value.name
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
