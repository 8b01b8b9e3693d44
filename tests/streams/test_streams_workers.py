"""Streams with decoding worker processes (``workers=N``): video streams decoded and converted in other processes,
straight into the queue's shared input buffers; the same results as in-process decoding, an error per stream, a
worker that dies ending only its own streams, stop and Ctrl-C reaping every worker, streams added and removed
during a run, source objects still read here, live drops counted across processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from conftest import open_fds
from streams_helpers import by_stream, make_clip, reference_frames, run_streams
from test_streams_add_remove import WAIT_S, Background, Frames, Results

import npu_zc
from npu_zc.pipeline.scheduler import LIVE_FRAMES
from npu_zc.sources import DecodedFrame, VideoSource

pytest.importorskip("openvino")

LONG_FRAMES = 400
"""Frames of the long clip: far more than a run's sets of buffers (a worker is at most that many frames ahead)."""

CLIPS = ["h264", "hevc", "h264_odd", "nv12"]


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small H.264 clip of LONG_FRAMES frames (160x120: quick to decode, long to run through)."""
    return make_clip(tmp_path_factory.mktemp("long") / "long.mp4", "libx264", 160, 120, LONG_FRAMES)


def sets_of(streams: npu_zc.Streams) -> int:
    """The most frames of a run that can be converted and not yet delivered: its queue's sets of buffers."""
    from npu_zc.pipeline.workers import DecodeWorkers

    held = DecodeWorkers.sets_for(streams.workers, streams.worker_feeders, streams.worker_credits)
    return streams.requests + streams.feeders + streams.deliverers + held


def worker_pids(streams: npu_zc.Streams) -> list[int]:
    assert streams._workers is not None, "the run had no decoding workers"
    return [worker.process.pid for worker in streams._workers.processes]


def assert_reaped(streams: npu_zc.Streams) -> None:
    """Every worker of the run exited on its own (told to stop, it said bye: status 0) and was reaped."""
    assert streams._workers is not None
    codes = [worker.process.returncode for worker in streams._workers.processes]
    assert codes == [0] * streams.workers, codes
    for pid in worker_pids(streams):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_same_results_as_decoding_here(clips: dict[str, Path], picture_pipeline: Any) -> None:
    """The four clips (H.264, HEVC with padded lines, an odd size, NV12) decoded in two worker processes, then in
    one, give exactly the predictions of the in-process run (the same converter on the same planes, into the same
    compiled model): no error, each stream done with every frame of FFmpeg's, in order; the workers' CPU is
    reported and every worker is reaped. With deliverers=0 the receiving thread calls the outputs; by default on
    the CPU, the queue's two delivery threads do, with the same results; with one feeding thread a worker (as
    where the model runs on an NPU or a GPU) or two (the CPU's), the same."""
    paths = [clips[name] for name in CLIPS]
    want = [len(reference_frames(path)) for path in paths]
    here, here_results = run_streams(paths, picture_pipeline, workers=0)
    assert not here.errors and [s.frames for s in here.streams] == want
    expected = {stream: [r.prediction[0] for r in got] for stream, got in by_stream(here_results).items()}
    for workers, deliverers, feeders in ((2, 0, 1), (1, 0, 2), (2, None, 2)):
        streams = npu_zc.Streams(paths, picture_pipeline, workers=workers, deliverers=deliverers)
        assert streams.workers == workers and streams.deliverers == (2 if deliverers is None else 0)
        streams.worker_feeders = feeders
        output = Results()
        report = streams.run(output)
        streams.close()
        results, threads = output.results, output.threads
        if deliverers == 0:
            assert threads == {"npu_zc-recv"}, threads
        else:  # one or both of them (as they find the results)
            assert threads and threads <= {"npu_zc-queue", "npu_zc-queue1"}, threads
        assert not report.errors, [s.error for s in report.errors]
        assert [s.frames for s in report.streams] == want
        assert all(s.state == "done" and s.dropped == 0 for s in report.streams), [s.state for s in report.streams]
        assert all(lane.worker is not None for lane in streams.lanes)  # each decoded in a worker, not here
        got = by_stream(results)
        for stream, name in enumerate(CLIPS):
            assert [r.index for r in got[stream]] == list(range(want[stream])), (workers, name)
            assert [round(r.pts * 30) for r in got[stream]] == list(range(want[stream])), (workers, name)
            for r, prediction in zip(got[stream], expected[stream]):
                assert np.array_equal(r.prediction[0], prediction), (workers, name, r.index)
        assert streams.worker_cpu["total"] > 0
        sleeps = streams.worker_sleeps  # the workers' threads wait (for a grant, a frame, the GIL) and count it
        assert 0 < sleeps["sources"] + sleeps["feeders"] <= sleeps["total"] and sleeps["start"] <= sleeps["total"], sleeps
        receiving = streams.worker_receiving  # every frame came through the receiving thread, which timed itself
        assert receiving["frames"] == sum(want) and receiving["busy"] > 0 and receiving["waiting"] > 0, receiving
        assert 0 <= receiving["no_set"] <= receiving["busy"], receiving  # a wait for a set is part of its busy time
        assert deliverers != 0 or receiving["no_set"] == 0, receiving  # delivering, it frees sets itself: never waits
        assert_reaped(streams)


def test_workers_write_dmabuf_inputs(clips: dict[str, Path], system_heap: str) -> None:
    """On a real kernel: the queue's input buffers are DMA-BUFs of the system heap, inherited by the worker and
    written there between its CPU-access brackets; the predictions are exactly those of the in-process run over the
    same DMA-BUFs."""
    from streams_helpers import picture_model

    from npu_zc.runtime import CompileOptions

    pipeline = npu_zc.Pipeline(picture_model(), "CPU", hint="throughput", fit="stretch", heap=system_heap,
                               options=CompileOptions(inference_precision="f32"))  # fmt: skip
    pipeline.postprocess = lambda outputs: [np.array(outputs[0], np.float32).reshape(3, 14, 14)]
    try:
        paths = [clips["h264"], clips["nv12"]]
        here, here_results = run_streams(paths, pipeline, workers=0)
        streams = npu_zc.Streams(paths, pipeline, workers=1)
        results: list[Any] = []
        inputs: list[bool] = []

        def shared_dmabufs(_: Any) -> None:  # during the run: what the worker was given
            workers = streams._workers
            inputs.append(workers is not None and all(buf.is_dmabuf for (buf,) in workers.queue.input_buffers))

        report = streams.run([results.append, shared_dmabufs])
        streams.close()
    finally:
        pipeline.close()
    assert inputs and all(inputs)  # the shared inputs were DMA-BUFs
    assert not here.errors and not report.errors, [s.error for s in report.errors]
    assert [s.frames for s in report.streams] == [s.frames for s in here.streams]
    expected, got = by_stream(here_results), by_stream(results)
    for stream in (0, 1):
        assert [r.index for r in got[stream]] == [r.index for r in expected[stream]]
        for r, want in zip(got[stream], expected[stream]):
            assert np.array_equal(r.prediction[0], want.prediction[0]), (stream, r.index)
    assert_reaped(streams)


def test_a_bad_file_is_its_streams_error_only(clips: dict[str, Path], picture_pipeline: Any) -> None:
    """Files that open here (the path exists) and fail in the worker, where they are opened and decoded: a truncated
    MP4, an audio-only file, an unknown codec. Each is its own stream's error, a sentence from the worker; the good
    clip beside them, in the same worker, delivers every frame in order."""
    bad = ["truncated", "audio", "unknown"]
    report, results = run_streams([clips["h264"], *(clips[name] for name in bad)], picture_pipeline, workers=1)
    good, *failed = report.streams
    assert (good.state, good.frames, good.error) == ("done", 45, None)
    assert [r.index for r in by_stream(results)[0]] == list(range(45))
    errors = [s.error or "" for s in failed]
    assert [s.state for s in failed] == ["error"] * 3 and all(s.frames == 0 for s in failed), errors
    assert "not a video FFmpeg can read" in errors[0], errors
    assert "no video track" in errors[1] and "cannot decode" in errors[2], errors
    assert report.errors == failed


def test_a_killed_worker_ends_only_its_own_streams(long_clip: Path, picture_pipeline: Any) -> None:
    """Two workers, four streams of a long clip; at stream 0's first result its worker is killed (SIGKILL). Each
    stream of that worker ends with an error naming the signal and the pid, its results so far in order; the other
    worker's streams deliver every frame in order; the run returns its report (no exception)."""
    streams = npu_zc.Streams([long_clip] * 4, picture_pipeline, workers=2)
    killed: list[int] = []
    results: list[Any] = []

    def output(result: Any) -> None:
        results.append(result)
        if result.stream == 0 and not killed:
            pid = streams.lanes[0].worker.process.pid
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)

    report = streams.run(output)
    lanes = list(streams.lanes)
    streams.close()
    assert killed
    victim = lanes[0].worker
    mine = [lane.stream for lane in lanes if lane.worker is victim]
    others = [lane.stream for lane in lanes if lane.worker is not victim]
    assert others, "every stream went to one worker"
    got = by_stream(results)
    # At the kill its streams had at most the run's sets of buffers converted: far from the clip's end.
    assert sets_of(streams) + 4 < LONG_FRAMES
    for stream in mine:
        stats = report.streams[stream]
        assert stats.state == "error" and stats.error == f"its decoding worker (pid {killed[0]}) was killed by SIGKILL"
        indices = [r.index for r in got.get(stream, [])]
        assert indices == list(range(len(indices))) and stats.frames == len(indices) < LONG_FRAMES
    for stream in others:
        stats = report.streams[stream]
        assert (stats.state, stats.frames, stats.error) == ("done", LONG_FRAMES, None)
        assert [r.index for r in got[stream]] == list(range(LONG_FRAMES))
    assert streams._workers is not None and all(w.process.returncode is not None for w in streams._workers.processes)
    assert [w.process.returncode for w in streams._workers.processes if w is not victim] == [0]


def run_until(streams: npu_zc.Streams, count: int) -> tuple[Any, list[Any]]:
    """The run, stopped from an output at its ``count``-th result, then closed: its report and every result."""
    results: list[Any] = []
    lock = threading.Lock()

    def output(result: Any) -> None:
        with lock:
            results.append(result)
            if len(results) == count:
                streams.stop()

    report = streams.run(output)
    streams.close()
    return report, results


def test_stop_ends_every_stream_and_reaps_the_workers(long_clip: Path, picture_pipeline: Any) -> None:
    """stop() from an output after 20 results, two workers on four long clips: the run returns, every stream is
    stopped (none ran to its end) with its results in order from 0 and counted, every worker said bye (status 0) and
    was reaped, the receiving thread ended, and this process has the fds it had before the Streams was made (the
    sockets, the workers' stderr files, the shared buffers all closed)."""
    before = open_fds()
    streams = npu_zc.Streams([long_clip] * 4, picture_pipeline, workers=2)
    report, results = run_until(streams, 20)
    assert [s.state for s in report.streams] == ["stopped"] * 4, [(s.state, s.error) for s in report.streams]
    got = by_stream(results)
    for stats in report.streams:
        indices = [r.index for r in got.get(stats.stream, [])]
        assert indices == list(range(len(indices))) and stats.frames == len(indices) < LONG_FRAMES
    assert report.frames == len(results) >= 20
    assert_reaped(streams)
    assert not [t.name for t in threading.enumerate() if t.name == "npu_zc-recv"]  # the receiving thread ended
    assert open_fds() == before


def wait_stopped(pid: int) -> None:
    """Until the process is stopped (SIGSTOP taken: state T in /proc)."""
    deadline = time.monotonic() + WAIT_S
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
        assert time.monotonic() < deadline, f"process {pid} did not stop"
        time.sleep(0.001)


def test_a_message_crossing_a_workers_bye_is_not_its_failure(long_clip: Path, picture_pipeline: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A message of ours that a worker never reads (a remove sent as it is told to stop) leaves a reset on our end
    of its socket, reported before its last messages: the run reads on past it. Made certain here: each worker is
    stopped (SIGSTOP) while its stop and one more message go, so it quits with that message unread. Every stream
    ends stopped, with no error; every worker said bye and was reaped."""
    from npu_zc.pipeline.decode_worker import SET
    from npu_zc.pipeline.workers import _Process

    send = _Process.send

    def send_one_more_after_stop(worker: _Process, data: bytes) -> None:
        if data != b"Q":
            return send(worker, data)
        os.kill(worker.process.pid, signal.SIGSTOP)
        try:
            wait_stopped(worker.process.pid)
            send(worker, data)
            send(worker, SET.pack(b"X", 1 << 30))  # to stop a stream it never had: harmless, were it read
        finally:
            os.kill(worker.process.pid, signal.SIGCONT)

    monkeypatch.setattr(_Process, "send", send_one_more_after_stop)
    streams = npu_zc.Streams([long_clip] * 4, picture_pipeline, workers=2)
    report, results = run_until(streams, 20)
    assert [(s.state, s.error) for s in report.streams] == [("stopped", None)] * 4
    assert streams.worker_cpu is not None and streams.worker_cpu["total"] > 0  # from the byes
    assert_reaped(streams)


@pytest.mark.parametrize("feeders", [1, 2])
def test_a_grant_of_a_set_never_shared_ends_that_workers_streams(long_clip: Path, picture_pipeline: Any,
                                                                 feeders: int) -> None:
    """A grant naming a set the worker was never given (sent here on its grants' socket, as the receiving thread
    sends them) is refused there, never written: the worker's streams end with one sentence naming it, its bye
    says so, and it exits as usual; with one feeding thread too, where no other is left to say the streams' end."""
    streams, _, run, worker = a_long_run_in_one_worker(long_clip, picture_pipeline, feeders)
    worker.grant([1 << 30])  # queued behind the grants sent before it: read within a few frames
    wait_ended(streams.lanes[0].stats)
    streams.stop()
    report = run.join()
    streams.close()
    said = "Error: the inference process granted set 1073741824, which it never shared"
    stats = report.streams[0]
    assert (stats.state, stats.error) == ("error", f"its decoding worker (pid {worker.process.pid}) failed: {said}")
    assert stats.frames < LONG_FRAMES
    assert worker.failure == f"failed: {said}"
    assert_reaped(streams)


def test_ctrl_c_stops_the_workers_and_reaps_them(long_clip: Path) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during a run with a worker on a realtime
    clip: the worker ignores it, the main process stops it cleanly (it says bye: status 0) and reaps it before
    run() raises KeyboardInterrupt; the stream is stopped; nothing of the worker is left once the program exits."""
    script = Path(__file__).with_name("streams_workers_script.py")
    tests = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, str(script), str(tests), str(long_clip)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    # A script that never prints (a hang before its first result) is killed, its group with it: readline returns.
    watchdog = threading.Timer(2 * WAIT_S, kill_group, (proc,))
    watchdog.start()
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().split()
        watchdog.cancel()
        assert first[:1] == ["started"], (first, proc.stderr.read() if proc.stderr else "")
        worker = int(first[1])
        os.kill(worker, 0)  # it runs
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=2 * WAIT_S)
    except BaseException:
        watchdog.cancel()
        kill_group(proc)
        proc.communicate()
        raise
    assert proc.returncode == 0, (out, err)
    assert out.splitlines() == ["interrupted stopped 0"], (out, err)
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """A failed test leaves no process behind: the script's whole group (its worker too) killed."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_streams_added_and_removed_during_a_persistent_run(clips: dict[str, Path], long_clip: Path,
                                                           picture_pipeline: Any) -> None:  # fmt: skip
    """A persistent run with a worker: a clip added by path once the run has its worker is decoded there, all its
    frames in order, done; a long stream removed by name while it runs is stopped, its results so far in order and
    none after; the stream beside it goes on to its end; stop() ends the run and reaps the worker."""
    streams = npu_zc.Streams([long_clip, clips["nv12"]], picture_pipeline, names=["long", "short"], workers=1,
                             persistent=True)  # fmt: skip
    out = Results()
    run = Background(streams, out)
    assert out.after("long", 1).wait(WAIT_S)  # the worker is running
    added = streams.add(clips["h264"], name="added")
    assert out.after("added", 45).wait(WAIT_S)
    assert out.after("long", 20).wait(WAIT_S)
    removed = streams.remove("long")
    assert removed.state == "stopped"
    seen = out.indices("long")
    assert seen == list(range(len(seen))) and len(seen) == removed.frames < LONG_FRAMES
    assert out.after("short", 12).wait(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while added.state == "running" and time.monotonic() < deadline:  # its end comes after its last frame's message
        time.sleep(0.01)
    assert added.state == "done"
    assert run.thread.is_alive()  # persistent: it goes on with every stream ended
    lanes = {lane.name: lane for lane in streams.lanes}
    assert lanes["added"].worker is not None and lanes["added"].worker is lanes["short"].worker
    streams.stop()
    report = run.join()
    streams.close()
    assert out.indices("long") == seen  # nothing after its removal
    assert out.indices("added") == list(range(45)) and out.indices("short") == list(range(12))
    assert [(s.name, s.state, s.frames) for s in report.streams] == [
        ("long", "stopped", len(seen)), ("short", "done", 12), ("added", "done", 45)]
    assert_reaped(streams)


def test_streams_churned_through_workers_keep_every_result(tmp_path: Path) -> None:
    """Sixty streams added to a persistent run with two workers and removed, three at a time (a short clip that ends
    on its own, a long one removed while it runs, in turn; tests/churn_helpers.py): every result in its stream's
    order, none missing, each its own frame's colour (a set granted twice, or read while a worker wrote it, gives
    another), none after its stream's removal; each removed stream's figures count its results, "done" only with
    every frame of its clip; the workers that started are the ones reaped. ``scripts/soak_streams.py`` runs the
    same churn for as long as it is asked, with the resources sampled."""
    from churn_helpers import Checks, churn, colour_clip, colour_model

    from npu_zc.runtime import CompileOptions

    clips = [(colour_clip(tmp_path / "short.mp4", 12), 12), (colour_clip(tmp_path / "long.mp4", 300), 300)]
    pipeline = npu_zc.Pipeline(colour_model(), "CPU", labels=["red", "green", "blue"],
                               options=CompileOptions(inference_precision="f32"))  # fmt: skip
    streams = npu_zc.Streams([], pipeline, workers=2, persistent=True)
    checks = Checks()
    run = Background(streams, checks)
    counts = churn(streams, clips, checks, names=5, keep=3, go_on=lambda turns: turns < 60)
    pids = worker_pids(streams)
    streams.stop()
    report = run.join()
    streams.close()
    pipeline.close()
    assert checks.problems == []
    assert counts == {"added": 60, "removed": 60} and checks.results >= 60
    assert [s.stream for s in report.streams] == list(range(60))
    assert {s.state for s in report.streams} <= {"done", "stopped"}
    assert len(pids) == 2
    assert_reaped(streams)


def test_a_frame_named_as_its_stream_is_removed_is_delivered_before_remove_returns(
        long_clip: Path, clips: dict[str, Path], picture_pipeline: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """remove() returns once the stream's results in flight are delivered, none after: also for a frame its worker
    named just as the removal came. Made certain here: the receiving thread, about to submit a frame of the stream,
    has remove() called (on another thread) and goes on only once the stream is marked removed and remove() either
    returned or waits for that frame. The frames remove() counted are the results the stream had in the end."""
    from npu_zc.runtime.queue import AsyncQueue

    submit = AsyncQueue.submit
    removal: dict[str, Any] = {}

    def submit_during_a_removal(queue: AsyncQueue, frame: Any, userdata: Any = None, key: Any = None) -> int:
        lane = userdata[0]
        if threading.current_thread().name == "npu_zc-recv" and lane.name == "long" and lane.delivered >= 5 \
                and "thread" not in removal:  # fmt: skip
            def remove() -> None:
                stats = streams.remove("long")
                removal["frames"] = stats.frames  # as it returned

            removal["thread"] = thread = threading.Thread(target=remove)
            thread.start()
            deadline = time.monotonic() + WAIT_S
            while not (lane.removed and (lane.owned or not thread.is_alive())):
                assert time.monotonic() < deadline, "remove() neither ended nor waited for the frame"
                time.sleep(0.001)
        return submit(queue, frame, userdata, key)

    monkeypatch.setattr(AsyncQueue, "submit", submit_during_a_removal)
    streams = npu_zc.Streams([long_clip, clips["h264"]], picture_pipeline, names=["long", "short"], workers=1)
    results: list[Any] = []
    report = streams.run(results.append)
    streams.close()
    removal["thread"].join(WAIT_S)
    got = by_stream(results)
    assert [r.index for r in got[0]] == list(range(removal["frames"]))  # none after remove() returned
    assert [(s.name, s.state) for s in report.streams] == [("long", "stopped"), ("short", "done")]
    assert_reaped(streams)


def fill(sock: Any) -> int:
    """Messages (each a stop for a stream nobody has: harmless when read) until the socket takes no more."""
    from npu_zc.pipeline.decode_worker import SET

    sent = 0
    while True:
        try:
            sock.send(SET.pack(b"X", 1 << 30), socket.MSG_DONTWAIT)
        except BlockingIOError:
            return sent
        sent += 1


def a_long_run_in_one_worker(long_clip: Path, picture_pipeline: Any,
                             feeders: int | None = None) -> tuple[npu_zc.Streams, Results, Background, Any]:  # fmt: skip
    """A persistent run of the long clip in one worker (of ``feeders`` feeding threads; None: Streams' own), once it
    delivers: the run, its results, its thread and its worker (``_Process``)."""
    streams = npu_zc.Streams([long_clip], picture_pipeline, names=["long"], workers=1, persistent=True)
    if feeders is not None:
        streams.worker_feeders = feeders
    out = Results()
    run = Background(streams, out)
    assert out.after("long", 1).wait(WAIT_S)
    assert streams._workers is not None
    return streams, out, run, streams._workers.processes[0]


def wait_ended(stats: Any) -> None:
    """Until the stream is no longer running (its end comes through the receiving thread)."""
    deadline = time.monotonic() + WAIT_S
    while stats.state == "running":
        assert time.monotonic() < deadline, "the stream did not end"
        time.sleep(0.01)


def a_stuck_worker(long_clip: Path, picture_pipeline: Any) -> tuple[npu_zc.Streams, Results, Background, Any]:
    """A persistent run of the long clip in one worker, once it delivers: the worker stopped (SIGSTOP), its socket
    full. The caller resumes it (SIGCONT) or sees it killed."""
    streams, out, run, worker = a_long_run_in_one_worker(long_clip, picture_pipeline)
    os.kill(worker.process.pid, signal.SIGSTOP)
    try:
        wait_stopped(worker.process.pid)
        assert fill(worker.sock) > 0
    except BaseException:
        os.kill(worker.process.pid, signal.SIGCONT)  # a failed test leaves no stopped process behind
        raise
    return streams, out, run, worker


def test_a_message_to_a_worker_with_a_full_socket_waits_for_room(long_clip: Path, picture_pipeline: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A message to a worker whose socket is full (here: the worker stopped by SIGSTOP, its socket filled) waits for
    room, where it was lost (a grant lost is a set of buffers gone from the run; a stop lost, a run's end waiting
    for a bye that never comes). The worker goes on once it reads: the message goes, and the run ends as usual."""
    import select as select_module

    from npu_zc.pipeline.decode_worker import SET

    waiting = threading.Event()
    real_poll = select_module.poll

    class Poll:  # select.poll, saying when a send waits for room
        def __init__(self) -> None:
            self.poll_object = real_poll()

        def register(self, *args: Any) -> None:
            self.poll_object.register(*args)

        def poll(self, timeout: float) -> Any:
            waiting.set()
            return self.poll_object.poll(timeout)

    monkeypatch.setattr(select_module, "poll", Poll)
    streams, out, run, worker = a_stuck_worker(long_clip, picture_pipeline)
    resume = threading.Thread(target=lambda: (waiting.wait(WAIT_S), os.kill(worker.process.pid, signal.SIGCONT)))
    try:
        resume.start()
        worker.send(SET.pack(b"X", 1 << 30))  # waits until the worker, resumed, reads
    finally:
        os.kill(worker.process.pid, signal.SIGCONT)
    assert waiting.is_set()
    assert out.after("long", len(out.indices("long")) + 5).wait(WAIT_S)  # it goes on
    streams.stop()
    report = run.join()
    streams.close()
    assert [(s.state, s.error) for s in report.streams] == [("stopped", None)]
    assert_reaped(streams)


def test_a_worker_that_reads_no_message_is_stopped(long_clip: Path, picture_pipeline: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A worker that reads none of its messages for SEND_S (here 0.2 s: stopped by SIGSTOP, its socket full) is stuck:
    it is killed, the message is not sent (BrokenPipeError, as for a worker gone), and its streams end with one
    sentence saying so. The run goes on to its stop."""
    from npu_zc.pipeline import workers as workers_module
    from npu_zc.pipeline.decode_worker import SET

    monkeypatch.setattr(workers_module, "SEND_S", 0.2, raising=False)
    streams, out, run, worker = a_stuck_worker(long_clip, picture_pipeline)
    live = streams.lanes[0].stats
    with pytest.raises(BrokenPipeError):
        worker.send(SET.pack(b"X", 1 << 30))
    assert worker.process.wait(WAIT_S) == -signal.SIGKILL
    wait_ended(live)
    streams.stop()
    report = run.join()
    streams.close()
    stats = report.streams[0]
    assert (stats.state, stats.error) == (
        "error", f"its decoding worker (pid {worker.process.pid}) read none of its messages for 0.2 s and was stopped")


def test_a_message_to_a_worker_gone_with_ours_unread_is_a_broken_pipe() -> None:
    """A worker's end closed with messages of ours unread (killed while stopped with its socket full, as when one
    sender's wait stops a stuck worker while another waits to send) is reported to the next send as a reset
    (ECONNRESET), then as a broken pipe: every sender sees BrokenPipeError, one error for a worker gone. Here the
    receiving thread cannot read the reset first: the worker's end is a socket of this test, closed by it."""
    from npu_zc.pipeline.decode_worker import SET
    from npu_zc.pipeline.workers import _Process

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # the worker's process
    try:
        ours.setblocking(False)
        assert fill(ours) > 0
        theirs.close()  # gone, our messages unread
        worker = _Process(0, holder, ours, errors=None)
        for _ in range(2):  # the reset, then the broken pipe
            with pytest.raises(BrokenPipeError):
                worker.send(SET.pack(b"X", 1))
        assert holder.poll() is None  # gone is not stuck: nothing was killed
    finally:
        holder.kill()
        holder.wait()
        ours.close()


class AddsWhenRead(Frames):
    """A source object (read here) that, as its reader starts, adds ``path`` to its run: the run's readers start
    before its workers do, so the add comes while they start. ``window``: whether the workers were not ready yet."""

    def __init__(self, name: str, count: int, path: Path) -> None:
        super().__init__(name, count)
        self.path = path
        self.streams: npu_zc.Streams | None = None
        self.window: list[bool] = []

    def frames(self, stop: threading.Event | None = None) -> Iterator[DecodedFrame]:
        streams = self.streams
        assert streams is not None
        with streams._lock:  # the workers are made ready under it: the check and the add in one step
            self.window.append(streams._workers is None)
            streams.add(self.path, name="early")
        yield from super().frames(stop)


def test_a_stream_added_while_the_workers_start_is_read_once(long_clip: Path, picture_pipeline: Any) -> None:
    """A clip added during the run before its workers are ready (from a source's reader, which starts first) is read
    once, wherever: every frame once, in order, done."""
    adder = AddsWhenRead("adder", 5, long_clip)
    streams = npu_zc.Streams([adder], picture_pipeline, workers=1)
    adder.streams = streams
    results: list[Any] = []
    report = streams.run(results.append)
    streams.close()
    if adder.window != [True]:
        pytest.skip("the source's reader started after the workers were ready: no add while they started")
    states = [(s.name, s.state, s.frames) for s in report.streams]
    assert states == [("adder", "done", 5), ("early", "done", LONG_FRAMES)]
    assert [r.index for r in results if r.name == "early"] == list(range(LONG_FRAMES))
    assert_reaped(streams)


def test_workers_argument_checks_and_source_objects_read_here(clips: dict[str, Path], picture_pipeline: Any) -> None:
    """workers=-1, keep_frames with workers and deliverers=0 without them are refused; a source object of one's own
    beside a path, with a worker: the object is read here (no worker), the path in the worker, both complete in
    order, whether delivery threads or the receiving thread deliver."""
    with pytest.raises(npu_zc.InvalidArgumentError, match="workers must be from 0 to"):
        npu_zc.Streams([clips["h264"]], picture_pipeline, workers=-1)
    with pytest.raises(npu_zc.InvalidArgumentError, match="keep_frames"):
        npu_zc.Streams([clips["h264"]], picture_pipeline, workers=1, keep_frames=True)
    with pytest.raises(npu_zc.InvalidArgumentError, match="keep_frames"):
        npu_zc.Streams([clips["h264"]], picture_pipeline, workers=1, keep_frames=lambda name: False)
    with pytest.raises(npu_zc.InvalidArgumentError, match="deliverers=0"):
        npu_zc.Streams([clips["h264"]], picture_pipeline, workers=0, deliverers=0)
    for deliverers in (None, 0):  # with 0, the receiving thread delivers the frames submitted here too (woken)
        own = Frames("own", 30)
        streams = npu_zc.Streams([own, clips["h264"]], picture_pipeline, workers=1, deliverers=deliverers)
        output = Results()
        report = streams.run(output)
        streams.close()
        results, threads = output.results, output.threads
        assert [(s.state, s.frames) for s in report.streams] == [("done", 30), ("done", 45)]
        got = by_stream(results)
        assert [r.index for r in got[0]] == list(range(30)) and [r.index for r in got[1]] == list(range(45))
        assert own.released == own.yielded == 30
        assert streams.lanes[0].worker is None and streams.lanes[1].worker is not None
        assert (threads == {"npu_zc-recv"}) is (deliverers == 0), threads
        assert_reaped(streams)


@pytest.mark.parametrize(("streams", "cores", "workers"),
                         [(64, 4, 0), (64, 7, 0), (1, 16, 0), (64, 8, 4), (64, 16, 8), (64, 17, 8), (3, 16, 3),
                          (2, 8, 2), (64, 128, 64)])  # fmt: skip
def test_default_workers_one_per_two_cores_from_eight(streams: int, cores: int, workers: int) -> None:
    """Where the CPU may run the model: none below eight cores or for one stream; one per two cores; at most one
    per stream."""
    from npu_zc.pipeline.workers import default_workers

    assert default_workers(streams, cores) == workers
    assert default_workers(streams, cores, "AUTO") == default_workers(streams, cores, "HETERO:NPU,CPU") == workers


@pytest.mark.parametrize(("streams", "cores", "workers"),
                         [(2, 2, 2), (64, 2, 2), (1, 2, 0), (1, 16, 0), (64, 4, 4), (64, 7, 7), (3, 7, 3), (64, 16, 16),
                          (32, 16, 16), (2, 1, 1), (64, 1, 1)])  # fmt: skip
def test_default_workers_off_the_cpu_on_any_machine(streams: int, cores: int, workers: int) -> None:
    """Where the model runs on an NPU or a GPU: one per core (at least one) from two streams up, whatever the
    machine's cores; at most one per stream."""
    from npu_zc.pipeline.workers import default_workers

    assert default_workers(streams, cores, "NPU") == default_workers(streams, cores, "GPU.1") == workers


def test_streams_choose_workers_by_the_models_device(long_clip: Path, picture_pipeline: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Streams asks for the workers of its pipeline's device (the service does as well): on a machine of fewer than
    eight cores, none where the CPU runs the model and one per core (two streams: at most two) where an NPU would."""
    from npu_zc.pipeline.workers import default_workers
    from npu_zc.runtime.session import usable_cores

    cores = usable_cores()
    for device in ("CPU", "NPU"):  # the pipeline as compiled, then as an NPU's would say (nothing is run)
        monkeypatch.setattr(type(picture_pipeline), "device", property(lambda self, d=device: d))
        streams = npu_zc.Streams([long_clip, long_clip], picture_pipeline)
        try:
            assert streams.workers == default_workers(2, cores, device)
        finally:
            streams.close()
    if cores < 8:  # where the two rules part
        assert default_workers(2, cores, "CPU") == 0 and default_workers(2, cores, "NPU") == min(2, cores)


def thread_priorities(pid: int) -> list[tuple[int, int]]:
    """The nice value and scheduling policy of every thread of process ``pid`` (/proc/PID/task/*/stat's 19th and
    41st fields)."""
    seen = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            continue
        seen.append((int(fields[16]), int(fields[38])))  # fields[0] is the 3rd field (the state)
    return seen


def test_workers_run_worker_nice_levels_below_this_process_as_batch_work(long_clip: Path, picture_pipeline: Any) -> None:
    """worker_nice outside 0-19 (or not a whole number) is refused; by default 10 where the model is on an NPU or a
    GPU, 0 where the CPU may run it; with worker_nice=7 every thread of the worker (its control thread, feeding
    threads, the stream's reader and FFmpeg's threads), seen while it runs, is 7 levels below this process and
    batch work (SCHED_BATCH); with worker_nice=0 every one is at this process's level and policy."""
    from npu_zc.pipeline.streams import default_worker_nice

    for bad in (-1, 20, 2.5, True, "5"):
        with pytest.raises(npu_zc.InvalidArgumentError, match="worker_nice"):
            npu_zc.Streams([long_clip], picture_pipeline, workers=1, worker_nice=bad)  # type: ignore[arg-type]
    assert [default_worker_nice(d) for d in ("NPU", "GPU.1", "CPU", "AUTO", "HETERO:NPU,CPU")] == [10, 10, 0, 0, 0]
    assert npu_zc.Streams([long_clip], picture_pipeline, workers=1).worker_nice == 0  # the CPU runs the model
    here = os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0)
    for nice, want in ((7, (min(19, here[0] + 7), os.SCHED_BATCH)), (0, here)):
        streams = npu_zc.Streams([VideoSource(long_clip, limit=40)], picture_pipeline, workers=1, worker_nice=nice)
        seen: list[list[tuple[int, int]]] = []

        def look(result: Any) -> None:
            if not seen:
                seen.append(thread_priorities(worker_pids(streams)[0]))

        report = streams.run(look)
        streams.close()
        assert report.streams[0].frames == 40 and len(seen) == 1
        assert len(seen[0]) >= 4 and set(seen[0]) == {want}, (nice, seen)
        assert_reaped(streams)


def test_worker_feeding_threads_and_sets_ahead_by_device(long_clip: Path, picture_pipeline: Any) -> None:
    """One feeding thread a worker and CREDITS sets ahead where the model runs on an NPU or a GPU, two and
    CPU_CREDITS where the CPU may run it; the sets a worker holds follow (one per feeding thread, and those)."""
    from npu_zc.pipeline.streams import default_worker_feeders
    from npu_zc.pipeline.workers import CPU_CREDITS, CREDITS, DecodeWorkers, default_worker_credits

    devices = ("NPU", "GPU.1", "CPU", "AUTO", "HETERO:NPU,CPU")
    assert [default_worker_feeders(d) for d in devices] == [1, 1, 2, 2, 2]
    assert [default_worker_credits(d) for d in devices] == [CREDITS, CREDITS, CPU_CREDITS, CPU_CREDITS, CPU_CREDITS]
    assert CPU_CREDITS > CREDITS >= 1
    seen: list[int] = []
    with npu_zc.Streams([VideoSource(long_clip, limit=5)], picture_pipeline, workers=1) as streams:
        assert (streams.worker_feeders, streams.worker_credits) == (2, CPU_CREDITS)  # the CPU runs the model
        report = streams.run(lambda result: seen.append(streams._workers.credits if streams._workers else -1))
    assert report.streams[0].frames == 5 and set(seen) == {CPU_CREDITS}
    assert [DecodeWorkers.sets_for(3, feeders, credits) for feeders, credits in ((1, CREDITS), (2, CPU_CREDITS))] == [
        3 * (1 + CREDITS), 3 * (2 + CPU_CREDITS)]


def test_a_large_models_sets_ahead_are_bounded_by_memory(long_clip: Path) -> None:
    """Where the CPU runs the model, a worker's sets ahead take at most AHEAD_BYTES (one set at least): a model whose
    inputs and outputs take 26 MB a request gets two, where a small one gets CPU_CREDITS; off the CPU, CREDITS."""
    import openvino as ov
    import openvino.opset13 as ops
    from npu_zc.pipeline.workers import AHEAD_BYTES, CPU_CREDITS, CREDITS, DecodeWorkers, default_worker_credits
    from npu_zc.runtime import CompileOptions

    assert [default_worker_credits("CPU", n) for n in (0, AHEAD_BYTES // 8, AHEAD_BYTES // 8 + 1, AHEAD_BYTES + 1)] == [
        CPU_CREDITS, 8, 7, 1]
    assert default_worker_credits("NPU", 1 << 30) == default_worker_credits("NPU") == CREDITS
    image = ops.parameter([1, 3, 1280, 1280], np.float32, name="image")
    scores = ops.reshape(ops.multiply(image, ops.constant(np.float32(0.5))), ops.constant(np.array([1, -1])), False)
    model = ov.Model([ops.result(scores)], [image], "large")  # one score vector: a classifier to the pipeline
    options = CompileOptions(inference_precision="f32")
    with npu_zc.Pipeline(model, "CPU", hint="throughput", options=options) as pipeline:
        set_bytes = pipeline.session.set_bytes
        assert set_bytes == 1280 * 1280 * 4 + 3 * 1280 * 1280 * 4  # RGBx u8 in, f32 out
        sources = [VideoSource(long_clip, limit=5), VideoSource(long_clip, limit=5)]
        with npu_zc.Streams(sources, pipeline, workers=1) as streams:
            assert streams.worker_credits == AHEAD_BYTES // set_bytes == 2
            assert DecodeWorkers.sets_for(streams.workers, streams.worker_feeders, streams.worker_credits) == 2 + 2


def test_the_receiving_thread_is_woken_by_a_submit_here(picture_pipeline: Any) -> None:
    """deliverers=0 with a worker that reads nothing: no worker message ever wakes the receiving thread, so each of
    the 60 frames of a source read here is delivered only because its submit wakes it (with more frames than sets,
    a missed wake-up is a run that never ends)."""
    own = Frames("own", 60)
    streams = npu_zc.Streams([own], picture_pipeline, workers=1, deliverers=0, requests=2)
    output = Results()
    run = Background(streams, output)
    run.thread.join(WAIT_S)
    if run.thread.is_alive():  # stopped, so that its worker is reaped
        streams.stop()
        run.thread.join(WAIT_S)
        pytest.fail(f"the run did not end: {len(output.results)} of 60 results delivered")
    report = run.join()
    streams.close()
    assert report.streams[0].frames == 60 and [r.index for r in output.results] == list(range(60))
    assert output.threads == {"npu_zc-recv"} and streams.lanes[0].worker is None
    assert_reaped(streams)


def waiting_for_a_set(thread_name: str) -> bool:
    """Whether the thread of that name is inside the queue's blocking acquire (every set in flight or held)."""
    from npu_zc.runtime import queue as queue_module

    idents = [t.ident for t in threading.enumerate() if t.name == thread_name]
    frame = sys._current_frames().get(idents[0]) if idents else None
    while frame is not None:
        if frame.f_code.co_name == "acquire" and frame.f_code.co_filename == queue_module.__file__:
            return True
        frame = frame.f_back
    return False


def test_the_receiving_thread_waits_for_a_set_while_every_set_is_held(long_clip: Path, picture_pipeline: Any) -> None:
    """A delivery thread held in the output on the first result: the worker's frames use every set of the queue
    (their results wait behind the held one, in the stream's order), so the receiving thread, granting the worker
    its sets again, waits in the queue's acquire; that wait is counted as ``no_set``. Let go, the run ends with
    every frame delivered in order."""
    held, release = threading.Event(), threading.Event()
    output = Results()

    def hold_the_first(result: Any) -> None:
        if result.index == 0:
            held.set()
            release.wait(WAIT_S)
        output(result)

    streams = npu_zc.Streams([long_clip], picture_pipeline, workers=1, deliverers=1, requests=1)
    run = Background(streams, hold_the_first)
    try:
        assert held.wait(WAIT_S), "no result came"
        deadline = time.monotonic() + WAIT_S
        while not waiting_for_a_set("npu_zc-recv"):
            assert time.monotonic() < deadline, "the receiving thread never waited for a set"
            time.sleep(0.01)
    except BaseException:  # the run stopped and its worker reaped before the failure is reported
        release.set()
        streams.stop()
        run.thread.join(WAIT_S)
        streams.close()
        raise
    release.set()
    report = run.join()
    streams.close()
    assert report.streams[0].frames == LONG_FRAMES and output.indices(report.streams[0].name) == list(range(LONG_FRAMES))
    receiving = streams.worker_receiving
    assert 0 < receiving["no_set"] <= receiving["busy"], receiving
    assert_reaped(streams)


@pytest.mark.parametrize("deliverers", [2, 0])
def test_a_failing_output_stops_a_run_with_workers(long_clip: Path, picture_pipeline: Any, deliverers: int) -> None:
    """An output that raises on a worker's stream, on a delivery thread or on the receiving thread: the run raises
    that error (not a worker's), ends without a hang, and reaps its workers."""

    def output(result: Any) -> None:
        if result.index == 5:
            raise RuntimeError("the output broke")

    streams = npu_zc.Streams([long_clip, long_clip], picture_pipeline, workers=1, deliverers=deliverers)
    with pytest.raises(npu_zc.ModelError, match="the output broke"):
        streams.run(output)
    streams.close()
    assert_reaped(streams)


@pytest.mark.parametrize("live_frames", [1, None])
def test_live_drops_in_a_worker_are_counted(long_clip: Path, picture_pipeline: Any, live_frames: int | None) -> None:
    """A live (not realtime) file decoded in a worker while the output holds its first result until the worker has
    read the whole file (its fd to the clip closed): the frames it could not convert (every set of buffers taken)
    were dropped there, and counted here: frames + dropped is the clip's length, drops many, the indices increasing,
    the newest ``live_frames`` frames (the lane's, in the worker; None: Streams' default, two) never dropped."""
    given = {} if live_frames is None else {"live_frames": live_frames}
    kept = live_frames or LIVE_FRAMES
    streams = npu_zc.Streams([VideoSource(long_clip, live=True)], picture_pipeline, workers=1, **given)
    results: list[Any] = []
    read_through: list[bool] = []
    path = os.path.realpath(long_clip)

    def clip_open(pid: int) -> bool:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                    return True
            except OSError:
                continue
        return False

    def output(result: Any) -> None:
        if not results:  # the clip is open (a frame came from it): wait until the worker's reader closed it
            pid = streams.lanes[0].worker.process.pid
            deadline = time.monotonic() + WAIT_S
            while clip_open(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            read_through.append(not clip_open(pid))
        results.append(result)

    report = streams.run(output)
    streams.close()
    assert read_through == [True], "the worker did not read the clip through while the output held a result"
    stats = report.streams[0]
    indices = [r.index for r in results]
    assert (stats.state, stats.error) == ("done", None)
    assert stats.frames == len(results) and stats.frames + stats.dropped == LONG_FRAMES, (stats.frames, stats.dropped)
    # Held up, the run could convert at most its sets of buffers (and keep the newest frames): the rest was dropped.
    assert stats.frames <= sets_of(streams) + 1 + kept < LONG_FRAMES
    assert all(a < b for a, b in zip(indices, indices[1:]))
    assert indices[-kept:] == list(range(LONG_FRAMES - kept, LONG_FRAMES)), indices
    assert_reaped(streams)


class _Lane:
    """What the receiving side knows of a stream: its id and whether it ended."""

    def __init__(self, stream: int) -> None:
        self.stream, self.ended = stream, False


@pytest.mark.parametrize("message", [
    pytest.param(b"F" + bytes(8), id="frame-of-the-wrong-size"),
    pytest.param(None, id="frame-naming-a-set-never-granted"),
    pytest.param(b"U\x01", id="give-back-of-the-wrong-size"),
    pytest.param(b"J{not json", id="broken-json"),
    pytest.param(b'J{"kind": "ended"}', id="end-without-a-stream"),
    pytest.param(b'J{"kind": "ended", "stream": 3, "let_go": -1}', id="end-whose-counts-are-no-whole-numbers"),
    pytest.param(b'J{"kind": "ended", "stream": 3, "dropped": "many"}', id="end-whose-drops-are-no-number"),
    pytest.param(b'J{"kind": "bye", "cpu": [1]}', id="bye-whose-cpu-is-no-object"),
    pytest.param(b'J{"kind": "bye", "sleeps": {"sources": "many"}}', id="bye-whose-sleeps-are-no-numbers"),
    pytest.param(b"Z", id="unknown-kind"),
])  # fmt: skip
def test_a_message_the_protocol_does_not_allow_ends_that_worker(message: bytes | None) -> None:
    """A peer on a real socket, in a real process, sends what a decoding worker never would: the receiving thread
    does not fail (nor does this process), the peer is killed at once, and each of its streams ends with one
    sentence naming the worker and what it sent."""
    import socket
    import tempfile

    from npu_zc.pipeline.decode_worker import FORMATS, FRAME
    from npu_zc.pipeline.workers import DecodeWorkers, _Process

    if message is None:  # well formed, but set 7 was never granted to it
        message = FRAME.pack(b"F", 3, 7, 0, 0.0, 0, 0, 64, 48, FORMATS.index("NV12"), 0)
    ended: list[tuple[int, dict[str, Any]]] = []
    workers = DecodeWorkers(1, None, None, submit=lambda *_: pytest.fail("nothing is submitted"),
                            ended=lambda lane, m: ended.append((lane.stream, m)), nice=0, feeders=1)  # fmt: skip
    peer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    worker = _Process(0, peer, ours, tempfile.TemporaryFile())
    worker.lanes = {3: _Lane(3), 4: _Lane(4)}
    workers.processes.append(worker)
    receiver = threading.Thread(target=workers._receive, daemon=True)
    receiver.start()
    try:
        theirs.send(message)
        receiver.join(WAIT_S)
        assert not receiver.is_alive()
        assert peer.wait(WAIT_S) == -signal.SIGKILL  # stopped at once, not waited for
        assert sorted(stream for stream, _ in ended) == [3, 4]
        for _, outcome in ended:
            assert outcome["state"] == "error"
            assert outcome["error"].startswith(f"its decoding worker (pid {peer.pid}) sent a message the protocol "
                                               "does not allow"), outcome  # fmt: skip
    finally:
        peer.kill()
        peer.wait()
        theirs.close()
        workers.close()
