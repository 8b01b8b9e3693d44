"""Throughput mode (many frames in flight): correct, in order, no buffer rewritten in flight, clean on errors.

Speed is measured by benches/bench_throughput.py, not here.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import cv2
import numpy as np
import pytest

from npu_zc import InvalidArgumentError, ModelError
from npu_zc.cli.main import main
from npu_zc.pipeline import FrameSource, Pipeline, full_hd, sample_photo
from npu_zc.pipeline.single_stream import run_stream
from npu_zc.pipeline.throughput import ThroughputRunner, reserved_cores
from npu_zc.runtime import CompileOptions, compile_model

OPTIONS = CompileOptions(inference_precision="f32")  # both hints on the same precision: the labels must agree
PHOTOS = ("chelsea", "coffee", "astronaut", "rocket")


@pytest.fixture(scope="module")
def frames() -> list[np.ndarray]:
    return [full_hd(sample_photo(name)) for name in PHOTOS]


@pytest.fixture(scope="module")
def labels(frames: list[np.ndarray]) -> list[str]:
    """Each photo's top label in latency mode, one frame at a time."""
    with Pipeline("efficientnet-lite0", "CPU", options=OPTIONS) as latency:
        assert latency.hint == "latency"
        return [latency.process(frame)[0].label for frame in frames]


@pytest.fixture(scope="module")
def pipeline() -> Iterator[Pipeline]:
    with Pipeline("efficientnet-lite0", "CPU", options=OPTIONS, hint="throughput") as p:
        yield p


def worker_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("npu_zc")]


def test_the_hint_reaches_openvino(pipeline: Pipeline) -> None:
    assert pipeline.hint == "throughput"
    assert pipeline.session.property("PERFORMANCE_HINT") == "THROUGHPUT"
    assert pipeline.session.optimal_requests >= 1
    runner = ThroughputRunner(pipeline.session, pipeline.spec, pipeline.postprocess, workers=1)
    assert runner.requests == max(2, 2 * pipeline.session.optimal_requests) and runner.buffers == runner.requests + 2


def test_a_core_is_left_to_the_feeding_thread_from_8_cores_up() -> None:
    """With the throughput hint the CPU plugin pins one stream per core; from 8 cores up the
    pipeline asks for one stream fewer, so the feeding thread has a core of its own."""
    assert [reserved_cores(n) for n in (1, 2, 4, 7, 8, 16, 64)] == [0, 0, 0, 0, 1, 1, 1]
    cores = len(os.sched_getaffinity(0))
    throughput = CompileOptions(performance_hint="THROUGHPUT", reserved_cores=1)
    session = compile_model("efficientnet-lite0", "CPU", options=throughput)
    assert session.config["NUM_STREAMS"] == max(1, cores - 1)
    assert int(session.property("NUM_STREAMS")) == max(1, cores - 1)
    # What the caller says wins: a stream count, or a thread count the plugin plans streams for.
    for given in ({"extra": {"NUM_STREAMS": 2}}, {"num_threads": 1}):
        config = compile_model("efficientnet-lite0", "CPU", options=dataclasses.replace(throughput, **given)).config
        assert config.get("NUM_STREAMS") == given.get("extra", {}).get("NUM_STREAMS")
    # Under the latency hint nothing is reserved.
    latency = dataclasses.replace(throughput, performance_hint="LATENCY")
    assert "NUM_STREAMS" not in compile_model("efficientnet-lite0", "CPU", options=latency).config


@pytest.mark.parametrize("workers", [1, 2])
def test_every_frame_once_in_order_with_the_latency_labels(
    pipeline: Pipeline, frames: list[np.ndarray], labels: list[str], workers: int
) -> None:
    count = 24
    seen: list[tuple[int, str]] = []
    report = pipeline.run_throughput(
        (frames[i % len(frames)] for i in range(count)),
        lambda index, prediction: seen.append((index, prediction[0].label)),
        keep=True,
        requests=3,
        workers=workers,
    )
    assert [index for index, _ in seen] == list(range(count))  # each once, in frame order
    assert [label for _, label in seen] == [labels[i % len(frames)] for i in range(count)]
    assert [p[0].label for p in report.predictions] == [label for _, label in seen]
    assert report.frames == count and report.requests == 3 and report.workers == workers
    assert report.buffers == 3 + workers + 1
    assert all(report.stages[stage].count == count for stage in ("preprocess", "infer", "postprocess", "total"))
    assert report.fps > 0 and report.cpu_seconds > 0
    assert not worker_threads()


def test_a_frame_split_among_workers_gives_the_same_predictions(pipeline: Pipeline, frames: list[np.ndarray]) -> None:
    """The feeding thread splits each frame's preprocess among the workers: the model input is the same."""
    alone = pipeline.run_throughput(iter(frames), keep=True, requests=2, workers=1)
    split = pipeline.run_throughput(iter(frames), keep=True, requests=2, workers=3)
    assert [[(c.index, c.score) for c in p] for p in split.predictions] == [
        [(c.index, c.score) for c in p] for p in alone.predictions
    ]


def test_only_the_feeding_and_delivery_threads_run_python_per_frame(pipeline: Pipeline, frames: list[np.ndarray]) -> None:
    """Every Python thread of the run shares the GIL: no pool of Python threads per frame, whatever the workers."""
    seen: set[str] = set()
    pipeline.run_throughput(
        (frames[i % len(frames)] for i in range(8)),
        lambda index, prediction: seen.update(worker_threads()),
        requests=2,
        workers=3,
    )
    assert seen == {"npu_zc-feed", "npu_zc-queue"}
    assert not worker_threads()


def test_no_buffer_is_written_while_in_flight(pipeline: Pipeline, frames: list[np.ndarray], labels: list[str]) -> None:
    runner = ThroughputRunner(pipeline.session, pipeline.spec, pipeline.postprocess, requests=2, workers=2)
    written: list[int] = []
    states: list[str] = []
    prepare = runner._prepare

    def checked(frame: Any, image: np.ndarray) -> None:
        # The queue hands a set out as "cpu": not free, not in flight; its request must not be reading it.
        states.append(runner._queue._state(frame.index))
        written.append(frame.index)
        prepare(frame, image)

    runner._prepare = checked  # type: ignore[method-assign]
    got: list[str] = []
    with runner:
        runner.run((frames[i % 2] for i in range(30)), lambda i, p: got.append(p[0].label))
    assert states == ["cpu"] * 30
    assert set(written) == set(range(runner.buffers))  # every pooled buffer was used, and reused
    # Two photos alternate: a buffer rewritten under a running inference would give the other photo's label.
    assert got == [labels[i % 2] for i in range(30)]


def test_run_and_stream_in_throughput_mode(pipeline: Pipeline, frames: list[np.ndarray], labels: list[str], tmp_path: Path) -> None:
    report = pipeline.run(frames[1], 8, warmup=1)
    assert report.hint == "throughput" and report.fps is not None and report.pipeline_fps == report.fps
    assert report.prediction[0].label == labels[1] and report.stages["total"].count == 8
    for i, frame in enumerate(frames * 2):
        cv2.imwrite(str(tmp_path / f"{i:02d}.png"), cv2.resize(frame, (640, 360), interpolation=cv2.INTER_AREA))
    stream = run_stream(pipeline, FrameSource(tmp_path), progress=False)
    assert [r.sequence for r in stream.results] == list(range(8))
    assert [r.name for r in stream.results] == [f"{i:02d}.png" for i in range(8)]
    assert all(stats.count == 8 for stats in stream.stages.values())
    # Downscaled photos: compare with the same frames one at a time.
    with Pipeline("efficientnet-lite0", "CPU", options=OPTIONS) as latency:
        one_by_one = run_stream(latency, FrameSource(tmp_path), progress=False)
    assert [r.prediction[0].label for r in stream.results] == [r.prediction[0].label for r in one_by_one.results]


class Stop(Exception):
    pass


def frames_then(frames: list[np.ndarray], count: int, error: BaseException) -> Iterator[np.ndarray]:
    for i in range(count):
        yield frames[i % len(frames)]
    raise error


@pytest.mark.parametrize("error", [Stop("the camera went away"), KeyboardInterrupt()])
@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_or_ctrl_c_stops_cleanly(
    pipeline: Pipeline, frames: list[np.ndarray], labels: list[str], error: BaseException, workers: int
) -> None:
    seen: list[int] = []
    with pytest.raises(type(error)):
        pipeline.run_throughput(frames_then(frames, 7, error), lambda i, p: seen.append(i), requests=2, workers=workers)
    # Every frame that was submitted finished and was delivered, once, in order; nothing is left running.
    assert seen == list(range(len(seen))) and len(seen) <= 7
    assert not worker_threads()
    again = pipeline.run_throughput(iter(frames), keep=True, requests=2, workers=workers)
    assert [p[0].label for p in again.predictions] == labels


@pytest.mark.parametrize("workers", [1, 2])
def test_a_real_sigint_stops_cleanly(pipeline: Pipeline, frames: list[np.ndarray], labels: list[str], workers: int) -> None:
    # Ctrl-C as the terminal sends it: SIGINT to the process, a KeyboardInterrupt wherever the main thread is.
    for delay in (0.05, 0.2, 0.35):
        seen: list[int] = []
        endless = itertools.cycle(frames)
        timer = threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                pipeline.run_throughput(endless, lambda i, p: seen.append(i), requests=2, workers=workers)
        finally:
            timer.cancel()
        assert seen == list(range(len(seen)))  # what was submitted was delivered, once, in order
        assert not worker_threads()
    again = pipeline.run_throughput(iter(frames), keep=True, requests=2, workers=workers)
    assert [p[0].label for p in again.predictions] == labels


def test_a_failing_result_handler_is_raised_and_loses_nothing(pipeline: Pipeline, frames: list[np.ndarray]) -> None:
    def handler(index: int, prediction: Any) -> None:
        if index == 3:
            raise ValueError("the consumer broke")

    with pytest.raises(ModelError, match="the consumer broke"):
        pipeline.run_throughput(itertools.repeat(frames[0], 50), handler, requests=2, workers=2)
    assert not worker_threads()
    assert pipeline.run_throughput(itertools.repeat(frames[0], 4), requests=2).frames == 4


def test_a_bad_frame_is_a_clear_error(pipeline: Pipeline, frames: list[np.ndarray]) -> None:
    gray = np.zeros((1080, 1920), np.uint8)
    for workers in (1, 2):
        with pytest.raises(InvalidArgumentError, match="BGR u8"):
            pipeline.run_throughput([frames[0], frames[1], gray, frames[2]], requests=2, workers=workers)
        assert not worker_threads()


def test_bad_arguments(pipeline: Pipeline) -> None:
    with pytest.raises(InvalidArgumentError, match="at least 1"):
        ThroughputRunner(pipeline.session, pipeline.spec, pipeline.postprocess, workers=0)
    with pytest.raises(InvalidArgumentError, match="unknown hint"):
        Pipeline("efficientnet-lite0", "CPU", hint="fast")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="at least 3 sets"):
        pipeline.session.queue(3, buffers=2)
    with pipeline.session.queue(2, buffers=3) as queue:
        frame = queue.acquire()
        queue.discard(frame)
        with pytest.raises(InvalidArgumentError, match="acquire a new one"):
            queue.submit(frame)
        assert queue._in_pools[0].free_count == 3


def test_copy_mode_has_no_throughput_runner() -> None:
    with Pipeline("efficientnet-lite0", "CPU", mode="copy", hint="throughput") as copy:
        with pytest.raises(InvalidArgumentError, match="zero-copy"):
            copy.run_throughput([])


def test_cli_hint_and_options(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    image = tmp_path / "cat.png"
    cv2.imwrite(str(image), sample_photo("chelsea"))
    assert main(["run", "-i", str(image), "-d", "CPU", "-n", "4", "--hint", "throughput", "--threads", "1",
                 "--option", "ENABLE_CPU_PINNING=NO", "--json"]) == 0  # fmt: skip
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["hint"] == "throughput" and out["runs"] == 4 and out["labels"][0]["label"] in ("tabby", "tiger cat", "Egyptian cat")
    assert main(["run", "-i", str(image), "-d", "CPU", "--hint", "throughput", "-c"]) == 1
    assert "zero-copy only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "-i", str(image), "--option", "NOVALUE"])
    assert "KEY=VALUE" in capsys.readouterr().err


def test_two_requests_in_flight_under_the_latency_hint(frames: list[np.ndarray], labels: list[str]) -> None:
    # The single-stream overlap: the next frame is preprocessed while the current one infers.
    with Pipeline("efficientnet-lite0", "CPU", options=OPTIONS) as latency:
        report = latency.run(frames[2], 6, requests=2)
        assert report.hint == "latency" and report.requests == 2 and report.fps is not None
        assert report.prediction[0].label == labels[2]
        assert latency.run(frames[2], 2).fps is None  # one frame at a time by default
        with pytest.raises(InvalidArgumentError, match="requests must be at least 1"):
            latency.run(frames[2], 2, requests=0)


def test_cli_requests(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    image = tmp_path / "cat.png"
    cv2.imwrite(str(image), sample_photo("chelsea"))
    assert main(["run", "-i", str(image), "-d", "CPU", "-n", "3", "--requests", "2"]) == 0
    assert "2 frames in flight" in capsys.readouterr().out
    assert main(["run", "-i", str(image), "-d", "CPU", "--requests", "2", "-c"]) == 1
    assert "zero-copy only" in capsys.readouterr().err


def test_a_ctrl_c_while_the_last_run_finishes_is_not_lost(pipeline: Pipeline) -> None:
    # A run starts by waiting for the previous run's feeding thread; a Ctrl-C in that wait is raised once it is over.
    with pipeline._runner(requests=2) as runner:
        runner._feeder_done = last_run = threading.Event()
        timers = [threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGINT)), threading.Timer(0.5, last_run.set)]
        for timer in timers:
            timer.start()
        started = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                runner._wait_for_feeder()
        finally:
            for timer in timers:
                timer.cancel()
        assert last_run.is_set() and time.monotonic() - started >= 0.4
