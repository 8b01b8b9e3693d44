"""The pipeline: preprocess -> infer -> postprocess on one model, zero-copy or copy mode.

Zero-copy mode (the default; VART's HW tensor type): the model is compiled to
read the packed HW layout, one buffer is bound as its input and one per output
as its outputs, once. Per frame the preprocess writes the input buffer in
place, inference reads it and writes the outputs in place, and the
postprocess reads them in place: no byte of the frame or of the result is
copied in between.

Copy mode (``-c``; VART's CPU tensor type): the preprocess writes normalised
planar float into ordinary memory, and the runtime copies it into the
request's own memory and the results back out, as most OpenVINO code does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Sequence

import numpy as np

from .._numbers import channel_values
from ..detect import metadata
from ..detect.metadata import YoloMetadata
from ..errors import BufferClosedError, BufferInUseError, InvalidArgumentError
from ..runtime.model import Mode
from .postprocess import Kind, Postprocessor, Prediction, for_frame, model_kind, postprocessor_for, to_frame
from .preprocess import Fit, PreprocessSpec, Preprocessor
from .throughput import ThroughputReport, ThroughputRunner, reserved_cores
from .yolo_postprocess import YOLO_FILL, DetectOptions, YoloDetections, is_yolo
from .timing import FENCE_TIMEOUT_S, StageStats, Timings, progress_bar

DEFAULT_MODEL = "efficientnet-lite0"

Hint = Literal["latency", "throughput"]
HINTS = ("latency", "throughput")

# How the frame is fitted to the input, by model kind (see Pipeline).
_FITS: dict[Kind, Fit] = {"classification": "crop", "blazeface": "letterbox", "ssd": "stretch", "yolo": "letterbox"}


@dataclass(frozen=True)
class RunReport:
    """What `npu-zc run` prints: the setup, per-stage timings and the prediction of the last frame."""

    model: str
    kind: Kind
    device: str
    device_reason: str
    mode: str
    input_format: str
    input_shape: tuple[int, ...]
    buffers: str
    """Where the frame and the result live: a heap kind ("memfd", "dma-heap:system") or "ordinary memory"."""
    image: str
    image_size: tuple[int, int]
    """(width, height) of the decoded image."""
    runs: int
    warmup: int
    stages: dict[str, StageStats]
    prediction: Prediction
    startup_ms: float | None = None
    hint: str = "latency"
    """"latency": one frame at a time; "throughput": many in flight (see :mod:`.throughput`)."""
    fps: float | None = None
    """Throughput hint: frames per second of wall time with frames in flight (the stages are each frame's own times)."""
    requests: int = 1
    """Inferences in flight at once."""
    interrupted: bool = False
    """Ctrl-C stopped the timed loop: ``runs`` counts the runs done before it."""
    bindings: list[dict[str, str]] = dataclasses.field(default_factory=list)
    """Per input and output, whether the device reads our memory or a copy (:class:`npu_zc.runtime.BindingReport`)."""
    quantisation: dict[str, Any] | None = None
    """An int8 input's ``{"scale", "zero_point", "source"}`` (:class:`npu_zc.runtime.InputQuantisation`); None otherwise."""

    @property
    def infer_fps(self) -> float:
        return self.stages["infer"].fps

    @property
    def pipeline_fps(self) -> float:
        return self.fps if self.fps is not None else self.stages["total"].fps

    def to_dict(self) -> dict[str, Any]:
        """One JSON-able object (`npu-zc run --json`)."""
        return {
            "model": self.model,
            "kind": self.kind,
            "device": self.device,
            "device_reason": self.device_reason,
            "mode": self.mode,
            "input": {"format": self.input_format, "shape": list(self.input_shape), "buffers": self.buffers,
                      "quantisation": self.quantisation},
            "image": {"path": self.image, "width": self.image_size[0], "height": self.image_size[1]},
            "runs": self.runs,
            "warmup": self.warmup,
            "stages_ms": {name: s.to_dict() for name, s in self.stages.items()},
            "fps": {"infer": self.infer_fps, "pipeline": self.pipeline_fps},
            "labels": [p.to_dict() for p in self.prediction] if isinstance(self.prediction, list) else [],
            **({"detections": self.prediction.to_dict()} if not isinstance(self.prediction, list) else {}),
            "startup_ms": self.startup_ms,
            "hint": self.hint,
            "requests": self.requests,
            "interrupted": self.interrupted,
            "bindings": self.bindings,
        }


class Pipeline:
    """One model on one device, with its buffers bound, ready to process frames.

    ``model``: a file OpenVINO reads (IR, ONNX, TFLite) or ``"efficientnet-lite0"``.
    ``labels``: names by class index, or a file of them (default: ImageNet's
    for 1000 classes, else the indices). ``mean``/``scale`` override what the
    model records. ``fit`` follows the model's kind by default: a centre crop
    for classifiers (as ImageNet models are evaluated), a letterbox for
    BlazeFace (MediaPipe keeps the aspect), the whole frame stretched for SSD
    (the TF Object Detection API's fixed-shape resizer); detections' boxes are
    mapped back to the frame through the preprocess's transform.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | Any = DEFAULT_MODEL,
        device: str = "AUTO",
        *,
        mode: Mode = "zero-copy",
        top: int = 5,
        labels: Sequence[str] | str | os.PathLike[str] | None = None,
        mean: Sequence[float] | None = None,
        scale: Sequence[float] | None = None,
        input_size: tuple[int, int] | None = None,
        hw_format: str | None = None,
        fit: Fit | None = None,
        interpolation: str = "linear",
        min_score: float = 0.5,
        options: Any = None,
        heap: str = "auto",
        hint: Hint | None = None,
        detect: DetectOptions | None = None,
    ) -> None:
        from ..buffers import alloc
        from ..runtime import compile_model, find_image_input, model_normalisation, read_labels, read_model

        if mode not in ("zero-copy", "copy"):
            raise InvalidArgumentError(f"unknown mode {mode!r}: use 'zero-copy' or 'copy'")
        if top < 1:
            raise InvalidArgumentError(f"top must be at least 1, got {top}")
        mean, scale = channel_values(mean, "mean"), channel_values(scale, "scale")  # before the model is read
        if hint is not None:
            if hint not in HINTS:
                raise InvalidArgumentError(f"unknown hint {hint!r}: use 'latency' or 'throughput'")
            from ..runtime import CompileOptions

            options = dataclasses.replace(options or CompileOptions(), performance_hint=hint.upper())
            if hint == "throughput" and options.reserved_cores == 0:
                options = dataclasses.replace(options, reserved_cores=reserved_cores())
        self.model_name = os.fspath(model) if isinstance(model, (str, os.PathLike)) else str(getattr(model, "friendly_name", "model"))
        self.metadata: YoloMetadata | None = None
        if isinstance(model, (str, os.PathLike)) and Path(model).is_dir():
            model = metadata.model_file(os.fspath(model))  # an Ultralytics export folder (*_openvino_model/)
        source = read_model(model)
        find_image_input(source)  # the input first: "one image input" is the first thing a model must have
        if isinstance(model, (str, os.PathLike)) and Path(model).is_file():
            self.metadata = metadata.read(os.fspath(model), source)
        self.kind: Kind = "yolo" if is_yolo(source, self.metadata, detect.task if detect else None) else model_kind(source)
        if self.kind == "blazeface" and mean is None and scale is None and model_normalisation(source).mean is None:
            from ..runtime.zoo import face_detection

            mean, scale = face_detection.MEAN, face_detection.SCALE  # what MediaPipe feeds it; the file does not say
        if self.kind == "yolo" and mean is None and scale is None and model_normalisation(source).scale is None:
            scale = (255.0, 255.0, 255.0)  # Ultralytics' /255 (an ONNX export records no model_info)
        if isinstance(labels, (str, os.PathLike)):
            labels = read_labels(Path(labels))
        self.session = compile_model(
            source, device, mode=mode, hw_format=hw_format, mean=mean, scale=scale, input_size=input_size, options=options
        )
        self.postprocess: Postprocessor
        if self.kind == "yolo":
            options = detect or DetectOptions()
            if labels is not None and options.names is None:
                options = dataclasses.replace(options, names=dict(enumerate(labels)))
            self.postprocess = YoloDetections(self.session.prepared.model, self.metadata, options)
        else:
            self.postprocess = postprocessor_for(
                self.session.prepared.model, self.kind, labels=labels, top=top, min_score=min_score
            )
        self.spec = PreprocessSpec.for_session(
            self.session, fit=fit or _FITS[self.kind], interpolation=interpolation
        )
        if self.kind == "yolo" and fit is None:
            self.spec = dataclasses.replace(self.spec, fill=YOLO_FILL)  # Ultralytics' LetterBox grey
        self.heap = heap
        self._closing = False
        self.preprocess = Preprocessor(self.spec, heap=heap)
        self.request = self.session.create_request()
        in_spec, out_specs = self.session.inputs[0], self.session.outputs
        self._buffers: list[Any] = []
        self.input: np.ndarray
        self.outputs: list[np.ndarray]
        if self.zero_copy:
            self._buffers = [alloc(in_spec.nbytes, heap)] + [alloc(spec.nbytes, heap) for spec in out_specs]
            self.input = self.request.bind_input(self._buffers[0])
            self.outputs = [self.request.bind_output(buf, i) for i, buf in enumerate(self._buffers[1:])]
            self.buffer_kind = self._buffers[0].kind
        else:
            # Ordinary memory: the runtime copies the input in and the results out.
            self.input = np.zeros(in_spec.shape, in_spec.dtype)
            self.outputs = [np.zeros(spec.shape, spec.dtype) for spec in out_specs]
            self.buffer_kind = "ordinary memory"
        # DMA_BUF_IOCTL_SYNC brackets around CPU access, so that a device and the CPU see each
        # other's writes, after waiting (FENCE_TIMEOUT_S at most) for the fences of a device still
        # using the buffer; memfd memory (no DMA-BUF) needs neither.
        self._sync_input: Any = self._buffers[0] if self._buffers and self._buffers[0].is_dmabuf else None
        self._sync_outputs: list[Any] = [buf for buf in self._buffers[1:] if buf.is_dmabuf]

    @property
    def mode(self) -> str:
        return self.session.mode

    @property
    def hint(self) -> Hint:
        """The performance hint it was compiled with: "throughput" (many frames in flight) or "latency"."""
        return "throughput" if str(self.session.config.get("PERFORMANCE_HINT", "")).upper() == "THROUGHPUT" else "latency"

    @property
    def zero_copy(self) -> bool:
        return self.session.mode == "zero-copy"

    @property
    def device(self) -> str:
        return self.session.device

    def binding_report(self) -> list[Any]:
        """Per input and output: whether the device reads (writes) our buffer or a copy, and how we know
        (:class:`npu_zc.runtime.BindingReport`; copy mode: a copy, by design)."""
        return self.request.binding_report()

    def infer(self) -> None:
        """Inference on the input as it is now; the outputs are then in :attr:`outputs`."""
        if self.zero_copy:
            self.request.infer()
        else:
            self.request.infer_copy([self.input], self.outputs)

    def step(self, image: np.ndarray) -> tuple[Prediction, int, int, int]:
        """One frame: ``(prediction, preprocess ns, infer ns, postprocess ns)``."""
        def write(dst: np.ndarray) -> Any:
            # The input buffer is the pipeline's own: a letterbox's bars, once written, stay.
            self.preprocess(image, dst, keep_fill=True)
            return self.preprocess.transform

        return self.step_with(write, frame_size=(image.shape[1], image.shape[0]))

    def step_with(
        self,
        write_input: Callable[[np.ndarray], Any],
        *,
        frame_size: tuple[int, int],
        release: Callable[[], None] | None = None,
    ) -> tuple[Prediction, int, int, int]:
        """One frame whose input ``write_input(dst)`` writes into the model input,
        returning its conversion's transform (a camera frame, see :mod:`.camera`);
        ``release`` is called once it is written. ``frame_size``: (width, height)."""
        if self._closing:
            raise BufferClosedError("the pipeline is closed: make a new one")
        clock = time.perf_counter_ns
        started = clock()
        if self._sync_input is None:
            transform = write_input(self.input)
        else:
            with self._sync_input.cpu_access("write", timeout=FENCE_TIMEOUT_S):
                transform = write_input(self.input)
        if release is not None:
            release()
        preprocessed = clock()
        self.infer()
        inferred = clock()
        input_size = (self.spec.width, self.spec.height)
        if not self._sync_outputs:
            prediction = for_frame(self.postprocess, self.outputs, transform, input_size, frame_size)
        else:
            with contextlib.ExitStack() as stack:
                for buf in self._sync_outputs:
                    stack.enter_context(buf.cpu_access("read", timeout=FENCE_TIMEOUT_S))
                prediction = for_frame(self.postprocess, self.outputs, transform, input_size, frame_size)
        done = clock()
        return prediction, preprocessed - started, inferred - preprocessed, done - inferred

    def to_frame(self, prediction: Prediction, transform: Any, frame_size: tuple[int, int]) -> Prediction:
        """Detections' boxes as fractions of a ``frame_size`` (width, height) frame
        that the preprocess turned into the input with ``transform``."""
        return to_frame(prediction, transform, (self.spec.width, self.spec.height), frame_size)

    def process(self, image: np.ndarray) -> Prediction:
        """The prediction for one frame (BGR u8)."""
        return self.step(image)[0]

    def run(
        self,
        image: np.ndarray,
        runs: int = 1,
        *,
        warmup: int = 1,
        name: str = "",
        requests: int | None = None,
        progress: bool | None = False,
    ) -> RunReport:
        """``warmup`` untimed frames, then ``runs`` timed ones on the same decoded image.

        One frame at a time, unless the pipeline was made with ``hint="throughput"`` or ``requests`` > 1 is
        given (zero-copy): then ``requests`` frames are in flight (default: twice the device's optimal number) and
        the next frame is preprocessed while the current ones infer.

        One frame at a time, ``progress`` draws a tqdm bar on stderr for runs
        longer than a second (None: only when stderr is a terminal), and Ctrl-C
        during the timed runs stops them and returns the report of those done
        (``interrupted`` is set); before the first is done, KeyboardInterrupt
        propagates.
        """
        if runs < 1:
            raise InvalidArgumentError(f"runs must be at least 1, got {runs}")
        if requests is not None and requests < 1:
            raise InvalidArgumentError(f"requests must be at least 1, got {requests}")
        if (self.hint == "throughput" or (requests or 1) > 1) and self.zero_copy:
            return self._run_throughput(image, runs, warmup=warmup, name=name, requests=requests)
        for _ in range(warmup):
            self.step(image)
        timings = Timings()
        prediction: Prediction = []
        done, interrupted = 0, False
        bar = progress_bar(runs, f"{self.model_name} ({self.mode})", progress, unit="run", delay=1.0)
        try:
            for _ in range(runs):
                prediction, pre, infer, post = self.step(image)
                timings.add_frame(preprocess=pre, infer=infer, postprocess=post)
                done += 1
                bar.update(1)
        except KeyboardInterrupt:
            if done == 0:
                raise
            interrupted = True
        finally:
            bar.close()
        return self._report(image, name, done, warmup, timings.stats(), prediction, interrupted=interrupted)

    def run_throughput(
        self,
        frames: Iterable[np.ndarray],
        on_result: Callable[[int, Prediction], None] | None = None,
        *,
        keep: bool = False,
        requests: int | None = None,
        workers: int | None = None,
    ) -> ThroughputReport:
        """Every frame of ``frames`` with ``requests`` inferences in flight; see :class:`.ThroughputRunner`.

        ``on_result(index, prediction)`` is called in frame order. Zero-copy mode; meant for a pipeline
        made with ``hint="throughput"`` (with the latency hint the device plans for one request at a time).
        """
        with self._runner(requests, workers) as runner:
            return runner.run(frames, on_result, keep=keep)

    def _runner(self, requests: int | None = None, workers: int | None = None) -> ThroughputRunner:
        return ThroughputRunner(
            self.session, self.spec, self.postprocess, heap=self.heap, requests=requests, workers=workers
        )

    def _run_throughput(self, image: np.ndarray, runs: int, *, warmup: int, name: str, requests: int | None) -> RunReport:
        with self._runner(requests) as runner:
            if warmup:
                runner.run(itertools.repeat(image, warmup * runner.buffers))  # every request and buffer used once
            result = runner.run(itertools.repeat(image, runs), keep=True, partial=True)
        return self._report(
            image, name, result.frames, warmup, result.stages, result.predictions[-1],
            hint=self.hint, fps=result.fps, requests=result.requests, interrupted=result.interrupted,
        )

    def _report(
        self, image: np.ndarray, name: str, runs: int, warmup: int, stages: Any, prediction: Any, **extra: Any
    ) -> RunReport:
        """A run's report: what the pipeline is, and what this run measured."""
        return RunReport(
            model=self.model_name,
            kind=self.kind,
            device=self.device,
            device_reason=self.session.device_choice.reason,
            mode=self.mode,
            input_format=self.spec.format,
            input_shape=self.spec.shape,
            quantisation=None if self.session.quantisation is None else dataclasses.asdict(self.session.quantisation),
            buffers=self.buffer_kind,
            image=name,
            image_size=(int(image.shape[1]), int(image.shape[0])),
            runs=runs,
            warmup=warmup,
            stages=stages,
            prediction=prediction,
            startup_ms=self.session.startup.latency_ms,
            bindings=[b.to_dict() for b in self.binding_report()],
            **extra,
        )

    def close(self) -> None:
        """Unbind and free the buffers (the pipeline is unusable afterwards).

        While the caller still holds a view of a buffer (``p.input``,
        ``p.outputs``), raises :class:`npu_zc.BufferInUseError` and may be
        called again once the views are gone; closing twice does nothing.
        """
        if self.preprocess is None:
            return
        self._closing = True
        if self.zero_copy:
            self.request.unbind()  # forgets the bound buffers; a second call finds none
            # Our views of the buffers go before they close (empty arrays: the attributes stay).
            self.input = np.empty((0,), self.input.dtype)
            self.outputs = [np.empty((0,), out.dtype) for out in self.outputs]
            self._sync_input, self._sync_outputs = None, []
        while self._buffers:  # one by one, so that a retry closes the rest
            self._buffers[0].close()
            self._buffers.pop(0)
        self.preprocess.close()
        self.preprocess = None  # type: ignore[assignment]

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            self.close()
        except BufferInUseError:
            if exc_type is None:
                raise
            # An exception is leaving the block: it is what the caller sees; the buffers close once the
            # views that hold them go (close() may be called again).

    def __repr__(self) -> str:
        return f"<Pipeline {self.model_name} ({self.kind}) on {self.device}, {self.mode}, input {self.spec.format}>"


__all__ = ["DEFAULT_MODEL", "HINTS", "Hint", "Pipeline", "RunReport"]
