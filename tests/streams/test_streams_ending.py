"""How a run and its streams end: one run per Streams (a second one, at once or after, refused), a stream's state
(done, stopped, error) told apart, a file that yields nothing an error, the duration checked, Ctrl-C with an output
that never returns, and strict JSON from the JSON lines sink."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from streams_helpers import make_clip, run_streams
from test_streams_add_remove import WAIT_S, Background, Frames, Results

import npu_zc
from npu_zc.sinks import JsonLines, strict_json

pytest.importorskip("openvino")


def promise_without_frames(path: Path) -> Path:
    """An MP4 whose index (moov, written first) promises 60 frames and whose media data is cut off: FFmpeg opens it,
    reads 60 frames in its header, and decodes none, without an error of its own."""
    import av

    clip = make_clip(path.with_name("whole.mp4"), "libx264", 160, 120, 60)
    with av.open(str(clip)) as source, av.open(str(path), "w", options={"movflags": "faststart"}) as out:
        stream = out.add_stream_from_template(source.streams.video[0])
        for packet in source.demux(video=0):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b"mdat") + 4])
    with av.open(str(path)) as check:
        assert check.streams.video[0].frames == 60 and not list(check.decode(video=0))
    return path


def test_a_second_run_at_once_from_another_thread_is_refused(picture_pipeline: Any) -> None:
    """A run entered while it runs decoded the file twice into one lane (results out of order, more than the file's
    frames): refused, and the running one delivers each frame once, in order."""
    source = Frames("gated", 30, free=5)
    streams = npu_zc.Streams([source], picture_pipeline)
    out = Results()
    run = Background(streams, out)
    assert out.after("gated", 5).wait(WAIT_S)
    with pytest.raises(npu_zc.StreamsRunError, match="already running"):
        streams.run()
    source.gate.set()
    report = run.join()
    streams.close()
    assert out.indices("gated") == list(range(30)) and report.frames == 30


def test_a_run_from_its_own_output_is_refused(picture_pipeline: Any) -> None:
    refused: list[BaseException] = []
    streams = npu_zc.Streams([Frames("a", 20)], picture_pipeline)
    seen: list[int] = []

    def output(result: Any) -> None:
        seen.append(result.index)
        if result.index == 3:
            try:
                streams.run()
            except npu_zc.StreamsRunError as exc:
                refused.append(exc)

    report = streams.run(output)
    streams.close()
    assert len(refused) == 1 and isinstance(refused[0], RuntimeError)
    assert seen == list(range(20)) and report.frames == 20


def test_a_later_run_is_refused_not_reported_as_the_first(picture_pipeline: Any) -> None:
    """A second run() after the first delivered nothing and reported the first run's frames over its own
    milliseconds (thousands of frames a second): refused."""
    streams = npu_zc.Streams([Frames("a", 10)], picture_pipeline)
    first = streams.run()
    assert first.frames == 10
    with pytest.raises(npu_zc.StreamsRunError, match="already run"):
        streams.run()
    streams.close()


def test_states_done_stopped_and_error(picture_pipeline: Any, clips: dict[str, Path], tmp_path: Path) -> None:
    """A file that reached its end is done; one stopped before (stop(), duration) is stopped, not done; an MP4
    promising 60 frames that yields none is that stream's error (the others unharmed)."""
    endless = Frames("endless", 10**9)
    streams = npu_zc.Streams([clips["nv12"], endless, promise_without_frames(tmp_path / "promise.mp4")],
                             picture_pipeline)  # fmt: skip

    def output(result: Any) -> None:
        if result.stream == 1 and result.index == 40:
            streams.stop()

    report = streams.run(output)
    streams.close()
    nv12, stopped, empty = report.streams
    assert (nv12.state, nv12.frames) == ("done", 12)
    assert stopped.state == "stopped" and stopped.frames >= 41
    assert empty.state == "error" and empty.frames == 0
    assert "promise.mp4 yielded no frame" in (empty.error or "")
    assert report.errors == [empty]
    # A duration ends a file early too: stopped.
    report, _ = run_streams([Frames("long", 10**9, free=3)], picture_pipeline, duration=0.3)
    assert report.streams[0].state == "stopped"


def test_cli_a_file_that_yields_nothing_fails_the_run(clips: dict[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    import openvino as ov
    from streams_helpers import picture_model

    from npu_zc.cli.main import main

    model = tmp_path / "picture.xml"
    ov.save_model(picture_model(), str(model))
    empty = promise_without_frames(tmp_path / "promise.mp4")
    code = main(["stream", "-i", str(clips["nv12"]), "-i", str(empty), "-m", str(model), "-d", "CPU", "--no-progress"])
    text = capsys.readouterr().out
    assert code == 1, text
    assert "promise.mp4 yielded no frame" in text


@pytest.mark.parametrize("duration", [math.nan, -1.0, 0.0])
def test_a_duration_that_is_not_a_positive_number_is_refused(picture_pipeline: Any, duration: float) -> None:
    streams = npu_zc.Streams([Frames("a", 3)], picture_pipeline)
    with pytest.raises(npu_zc.InvalidArgumentError, match="duration must be a positive number"):
        streams.run(duration=duration)
    assert streams.run().frames == 3  # the refusal started nothing
    streams.close()


STUCK = """
import sys, threading, time
import numpy as np
sys.path[:0] = [{tests!r}]
import npu_zc
import npu_zc.pipeline.streams
from npu_zc.runtime import CompileOptions
from streams_helpers import picture_model
from test_streams_add_remove import Frames

npu_zc.pipeline.streams.STOP_GRACE_S = {grace!r}
pipeline = npu_zc.Pipeline(picture_model(), "CPU", hint="throughput", fit="stretch",
                           options=CompileOptions(inference_precision="f32"))
streams = npu_zc.Streams([Frames("endless", 10**9)], pipeline, deliverers=1)
stop = streams.stop
said = []
def stopping():
    if not said:  # the first Ctrl-C's stop; a feeding thread that finds the queue given up stops the run again
        said.append(True)
        print("stopping", flush=True)
    stop()
streams.stop = stopping
def stuck(result):  # a consumer that stopped reading
    print("running", flush=True)
    threading.Event().wait()
try:
    streams.run(stuck)
except KeyboardInterrupt:
    print("interrupted", streams.abandoned, flush=True)
streams.close()
"""


def stuck_run(grace: float) -> subprocess.Popen[str]:
    code = STUCK.format(tests=str(Path(__file__).resolve().parent.parent), grace=grace)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "running"
    return proc


def finish(proc: subprocess.Popen[str], why: str) -> str:
    try:
        out, _ = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(why)
    assert proc.returncode == 0, (out, proc.returncode)
    return out


def test_ctrl_c_with_a_stuck_output_gives_up_after_the_grace_period() -> None:
    """An output that never returns: Ctrl-C waited for it without bound. Now it waits STOP_GRACE_S (here 1 s), then
    raises KeyboardInterrupt and leaves the run's threads (``abandoned``)."""
    proc = stuck_run(1.0)
    proc.send_signal(signal.SIGINT)
    out = finish(proc, f"Ctrl-C did not end a run with a stuck output within {WAIT_S} s")
    assert "interrupted True" in out.splitlines(), out


def test_a_second_ctrl_c_ends_it_at_once() -> None:
    """With a grace period longer than the test's bound, only the second Ctrl-C can end the run in time."""
    proc = stuck_run(3600.0)
    proc.send_signal(signal.SIGINT)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "stopping"  # the first one is taken
    proc.send_signal(signal.SIGINT)
    out = finish(proc, "a second Ctrl-C did not end a run with a stuck output")
    assert "interrupted True" in out.splitlines(), out


def test_json_lines_are_strict_json(picture_pipeline: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A prediction with NaN and infinities: JsonLines wrote NaN/Infinity tokens, which strict parsers refuse;
    they are null now."""
    monkeypatch.setattr(picture_pipeline, "postprocess",
                        lambda outputs: [np.array([math.nan, math.inf, -math.inf, 0.5], np.float32)])  # fmt: skip
    lines = JsonLines(tmp_path / "out.jsonl")
    report, _ = run_streams([Frames("a", 4)], picture_pipeline, outputs=[lines])
    lines.close()

    def refuse(token: str) -> Any:
        raise ValueError(f"not strict JSON: {token}")

    records = [json.loads(line, parse_constant=refuse) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(records) == report.frames == 4
    assert all(r["result"] == [[None, None, None, 0.5]] for r in records)
    assert json.loads(strict_json({"a": (np.float64("nan"), 1.5, np.array([np.inf]))}), parse_constant=refuse) == {
        "a": [None, 1.5, [None]]}  # fmt: skip


def test_add_while_the_run_ends_does_not_hang(picture_pipeline: Any) -> None:
    """add() racing the end of a run: the stream added is told to stop with the others and its reader joined."""
    streams = npu_zc.Streams([Frames("a", 5)], picture_pipeline)
    added: list[Any] = []

    def output(result: Any) -> None:
        if result.index == 4:
            streams.stop()
            added.append(streams.add(Frames("late", 10**9)))

    report = streams.run(output)
    streams.close()
    assert report.streams[0].frames == 5
    assert added[0].state == "stopped" and added[0].frames == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("npu_zc-src")]


def test_cli_json_into_a_consumer_that_stopped_reading_ends_at_ctrl_c(clips: dict[str, Path], tmp_path: Path) -> None:
    """`npu-zc stream ... --json | consumer` where the consumer stopped reading: the JSON lines sink blocks on the
    full pipe. Ctrl-C ignored it (three times over 24 s); now it ends within the grace period, status 130."""
    import time

    import openvino as ov
    from streams_helpers import picture_model

    model = tmp_path / "picture.xml"
    ov.save_model(picture_model(), str(model))
    args = [sys.executable, "-m", "npu_zc", "stream", *(a for _ in range(6) for a in ("-i", str(clips["h264"]))),
            "-m", str(model), "-d", "CPU", "--json"]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # running; nothing more is read: the pipe fills (a line is a few KiB)
    assert json.loads(first)["index"] == 0
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and not writing_to_a_full_pipe(proc.pid):
        time.sleep(0.05)
    assert writing_to_a_full_pipe(proc.pid), "the run's output never blocked on the pipe"
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("Ctrl-C did not end a run whose JSON consumer stopped reading")
    assert proc.returncode == 130


def writing_to_a_full_pipe(pid: int) -> bool:
    """One of the process's threads waits in the kernel to write into a pipe (its reader stopped reading)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            if "pipe_write" in Path(f"/proc/{pid}/task/{task}/wchan").read_text():  # anon_pipe_write on newer kernels
                return True
        except OSError:  # the thread ended meanwhile
            continue
    return False


def test_a_failure_before_the_run_starts_feeding_is_raised_not_waited_on(picture_pipeline: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A reader thread that cannot be made (a process out of threads): the run raises it, where it waited for ever
    for a feeding thread that had never started."""
    streams = npu_zc.Streams([Frames("a", 3)], picture_pipeline)

    def no_thread(lane: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(streams, "_reader", no_thread)
    run = Background(streams)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        run.join()
    streams.close()
