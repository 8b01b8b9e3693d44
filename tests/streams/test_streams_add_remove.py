"""Streams that come and go: names, persistent runs, add() and remove() before and during a run, from several
threads at once, the other streams' order and figures untouched."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from streams_helpers import by_stream, run_streams

import npu_zc
from npu_zc.sources import DecodedFrame

pytest.importorskip("openvino")

WAIT_S = 30.0
"""A bound on waits for things that happen within milliseconds (never reached unless the test fails)."""


class Frames:
    """A file-like source (no drops) of small BGR frames, ready at once; ``gate``: it waits there before each frame
    past ``free`` (an endless stream that goes on only when told); counts what it hands over and gets back."""

    live = False

    def __init__(self, name: str, count: int, *, free: int | None = None) -> None:
        from streams_helpers import pan_frames

        self.name, self.count, self.free = name, count, free
        self.images = [np.ascontiguousarray(rgb[:, :, ::-1]) for rgb in pan_frames(96, 64, 4)]
        self.gate = threading.Event()
        self.yielded = 0
        self.released = 0

    def frames(self, stop: threading.Event | None = None) -> Iterator[DecodedFrame]:
        for i in range(self.count):
            if self.free is not None and i >= self.free:
                while not self.gate.wait(0.01):
                    if stop is not None and stop.is_set():
                        return
            if stop is not None and stop.is_set():
                return
            image = self.images[i % len(self.images)]
            self.yielded += 1
            yield DecodedFrame(i, "BGR", image, 96, 64, time.perf_counter_ns(), pts=i / 30, owner=image,
                               _release=self._count_release)  # fmt: skip

    def _count_release(self) -> None:
        self.released += 1


class Background:
    """``streams.run(...)`` on a thread of its own: ``.report`` or ``.error`` once it returns."""

    def __init__(self, streams: npu_zc.Streams, *outputs: Any, **kwargs: Any) -> None:
        self.report: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(streams, list(outputs), kwargs), daemon=True)
        self.thread.start()

    def _run(self, streams: npu_zc.Streams, outputs: list[Any], kwargs: dict[str, Any]) -> None:
        try:
            self.report = streams.run(outputs, **kwargs)
        except BaseException as exc:
            self.error = exc

    def join(self) -> Any:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the run did not end"
        if self.error is not None:
            raise self.error
        return self.report


class Results:
    """An output keeping every result and the names of the threads that called it, with an event per (stream name,
    frames seen)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.results: list[Any] = []
        self.threads: set[str] = set()
        self.waits: dict[tuple[str, int], threading.Event] = {}

    def __call__(self, result: Any) -> None:
        with self.lock:
            self.results.append(result)
            self.threads.add(threading.current_thread().name)
            seen = sum(r.name == result.name for r in self.results)
            event = self.waits.get((result.name, seen))
        if event is not None:
            event.set()

    def after(self, name: str, count: int) -> threading.Event:
        with self.lock:
            event = self.waits.setdefault((name, count), threading.Event())
            if sum(r.name == name for r in self.results) >= count:
                event.set()
        return event

    def indices(self, name: str) -> list[int]:
        with self.lock:
            return [r.index for r in self.results if r.name == name]


def test_names_given_kept_and_checked(picture_pipeline: Any) -> None:
    report, results = run_streams([Frames("a", 3), Frames("a", 4)], picture_pipeline, names=["gate", "yard"])
    assert [s.name for s in report.streams] == ["gate", "yard"]
    assert {r.name for r in results if r.stream == 1} == {"yard"}
    # Without names, two sources of one name are told apart; given names must be unique, one per source.
    report, _ = run_streams([Frames("a", 2), Frames("a", 2), Frames("a", 2)], picture_pipeline)
    assert [s.name for s in report.streams] == ["a", "a (2)", "a (3)"]
    with pytest.raises(npu_zc.InvalidArgumentError, match="'gate' given twice"):
        npu_zc.Streams([Frames("a", 2), Frames("b", 2)], picture_pipeline, names=["gate", "gate"])
    with pytest.raises(npu_zc.InvalidArgumentError, match="one per source"):
        npu_zc.Streams([Frames("a", 2), Frames("b", 2)], picture_pipeline, names=["gate"])
    with pytest.raises(npu_zc.InvalidArgumentError, match="non-empty str"):
        npu_zc.Streams([Frames("a", 2)], picture_pipeline, names=[""])
    with pytest.raises(npu_zc.InvalidArgumentError, match="at least one source"):
        npu_zc.Streams([], picture_pipeline)


def test_add_and_remove_before_a_run(clips: dict[str, Path], picture_pipeline: Any, tmp_path: Path) -> None:
    streams = npu_zc.Streams([clips["nv12"]], picture_pipeline, names=["first"])
    stats = streams.add(clips["h264"], name="second")
    assert stats.stream == 1 and stats.name == "second" and stats.state == "running"
    gone = streams.add(Frames("third", 5))
    assert streams.remove("third") is gone and gone.state == "stopped"
    assert [s.name for s in streams.stats] == ["first", "second"]
    # The source is opened first: its typed error, and nothing added.
    with pytest.raises(npu_zc.SourceNotFoundError):
        streams.add(tmp_path / "missing.mp4", name="missing")
    with pytest.raises(npu_zc.InvalidArgumentError, match="'first' is already running"):
        streams.add(clips["nv12"], name="first")
    with pytest.raises(npu_zc.StreamNotFoundError, match="no stream 'third'") as raised:
        streams.remove("third")
    assert isinstance(raised.value, KeyError) and isinstance(raised.value, npu_zc.InvalidArgumentError)
    assert str(raised.value).startswith("no stream 'third'")  # a sentence, not KeyError's quoted repr
    with pytest.raises(npu_zc.StreamNotFoundError):
        streams.remove(2)  # ids are never reused
    assert streams.add(Frames("fourth", 3)).stream == 3
    streams.remove(3)
    seen: list[Any] = []
    report = streams.run(seen.append)
    streams.close()
    assert [(s.name, s.frames, s.state) for s in report.streams] == [("first", 12, "done"), ("second", 45, "done")]
    for stream, got in by_stream(seen).items():
        assert [r.index for r in got] == list(range({0: 12, 1: 45}[stream]))


def test_persistent_run_waits_for_streams_added_while_it_runs(picture_pipeline: Any) -> None:
    """persistent=True with no source: the run waits; streams added from another thread run at once; the run goes
    on after they have all ended, until stop()."""
    with pytest.raises(npu_zc.StreamNotFoundError):
        npu_zc.Streams(persistent=True, model=picture_pipeline).remove("nothing")
    streams = npu_zc.Streams(model=picture_pipeline, persistent=True, feeders=2, deliverers=2)
    out = Results()
    run = Background(streams, out)
    first = streams.add(Frames("first", 10))
    assert out.after("first", 10).wait(WAIT_S)
    while first.state == "running" and run.thread.is_alive():  # its reader says "done" as it ends
        time.sleep(0.01)
    assert first.state == "done"
    assert run.thread.is_alive()  # every stream has ended: a persistent run goes on
    second = streams.add(Frames("second", 7), name="later")
    assert out.after("later", 7).wait(WAIT_S)
    assert run.thread.is_alive()
    streams.stop()
    report = run.join()
    streams.close()
    assert out.indices("first") == list(range(10)) and out.indices("later") == list(range(7))
    assert [(s.stream, s.name, s.frames) for s in report.streams] == [(0, "first", 10), (1, "later", 7)]
    assert second.frames == 7 and report.frames == 17


def test_remove_mid_run_leaves_the_others_intact(clips: dict[str, Path], picture_pipeline: Any) -> None:
    """A stream removed while it runs (its source endless, results of it in flight): it stops and leaves the stats,
    its results so far are delivered in order, each frame it handed over goes back; the other streams deliver every
    frame in order, and the report counts the removed stream's frames too."""
    endless = Frames("endless", 10**9, free=20)
    others = [Frames(f"file{i}", 40) for i in range(2)]
    streams = npu_zc.Streams([others[0], endless, others[1], clips["h264"]], picture_pipeline,
                             requests=4, feeders=2, deliverers=3)  # fmt: skip
    out = Results()
    run = Background(streams, out)
    assert out.after("endless", 20).wait(WAIT_S)
    endless.gate.set()  # it runs on (one frame at a time as the model takes them)...
    assert out.after("endless", 30).wait(WAIT_S)
    stats = streams.remove("endless")  # ...and is taken out while it runs
    assert stats.state == "stopped" and stats.frames >= 30
    assert [s.name for s in streams.stats] == ["file0", "file1", "pan.mp4"]
    seen_then = out.indices("endless")
    assert seen_then == list(range(len(seen_then))) and len(seen_then) == stats.frames  # in flight: delivered
    report = run.join()
    streams.close()
    assert out.indices("endless") == seen_then  # nothing after its removal
    assert endless.released == endless.yielded
    for name, count in (("file0", 40), ("file1", 40), ("pan.mp4", 45)):
        assert out.indices(name) == list(range(count)), name
    assert [(s.name, s.frames, s.state) for s in report.streams] == [
        ("file0", 40, "done"), ("endless", stats.frames, "stopped"), ("file1", 40, "done"), ("pan.mp4", 45, "done")]
    assert report.frames == 125 + stats.frames == len(out.results)


def test_a_file_removed_with_frames_waiting_is_stopped_not_done(picture_pipeline: Any) -> None:
    """A file whose decoder has read it to its end, removed while decoded frames still wait in its lane: those frames
    are let go and counted, and the stream is "stopped" (it did not reach its end), not "done". Made certain here:
    the feeding thread is held inside ``keep_frames`` with frame 0 while frames 1 and 2 wait and the source ends."""
    held, go = threading.Event(), threading.Event()

    def keep(name: str) -> bool:
        held.set()
        assert go.wait(WAIT_S)
        return False

    source = Frames("short", 3)
    streams = npu_zc.Streams(model=picture_pipeline, persistent=True, feeders=1, deliverers=1, keep_frames=keep)
    out = Results()
    run = Background(streams, out)
    stats = streams.add(source)
    assert held.wait(WAIT_S)
    [lane] = streams.lanes
    deadline = time.monotonic() + WAIT_S
    while not (lane.ended and len(lane.frames) == 2) and time.monotonic() < deadline:  # read to its end
        time.sleep(0.005)
    assert stats.done and len(lane.frames) == 2
    removal = threading.Thread(target=streams.remove, args=("short",), daemon=True)
    removal.start()
    while not lane.removed and time.monotonic() < deadline:
        time.sleep(0.005)
    go.set()  # the frame held is submitted and delivered; remove() returns once it is
    removal.join(WAIT_S)
    assert not removal.is_alive()
    assert (stats.state, stats.frames, stats.let_go) == ("stopped", 1, 2)
    assert stats.to_dict()["let_go"] == 2
    streams.stop()
    report = run.join()
    streams.close()
    assert out.indices("short") == [0] and source.released == source.yielded == 3
    assert [(s.name, s.state) for s in report.streams] == [("short", "stopped")]


def test_remove_from_an_output(picture_pipeline: Any) -> None:
    """remove() called by an output (on a delivery thread) does not wait for that thread's own deliveries."""
    endless = Frames("endless", 10**9)
    streams = npu_zc.Streams([endless, Frames("file", 30)], picture_pipeline, deliverers=1)
    removed: list[Any] = []

    def output(result: Any) -> None:
        if result.name == "endless" and result.index == 5:
            removed.append(streams.remove("endless"))

    started = time.monotonic()
    report = streams.run(output)
    streams.close()
    assert time.monotonic() - started < WAIT_S
    assert removed[0].state == "stopped" and [s.name for s in streams.stats] == ["file"]
    assert report.streams[1].frames == 30 and endless.released == endless.yielded


def test_add_and_remove_from_many_threads_during_a_run(picture_pipeline: Any) -> None:
    """Four threads each add and remove streams twenty times while two streams run: no error, the two deliver every
    frame in order, each added stream's results are in order from 0 and stop at its removal, every frame goes back,
    and ids are never reused."""
    steady = [Frames("steady0", 10**9, free=0), Frames("steady1", 300)]
    streams = npu_zc.Streams(steady, picture_pipeline, feeders=3, deliverers=3, persistent=True)
    out = Results()
    run = Background(streams, out)
    steady[0].gate.set()
    failures: list[BaseException] = []
    added: list[tuple[str, Frames, int]] = []
    lock = threading.Lock()

    def churn(worker: int) -> None:
        try:
            for k in range(20):
                name = f"w{worker}-{k}"
                source = Frames(name, 10**9 if k % 2 else 8)
                stats = streams.add(source, name=name)
                with lock:
                    added.append((name, source, stats.stream))
                if k % 3:
                    out.after(name, 2).wait(WAIT_S)
                final = streams.remove(name)
                assert final.stream == stats.stream and final.state in ("stopped", "done"), final
        except BaseException as exc:
            failures.append(exc)

    workers = [threading.Thread(target=churn, args=(w,)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(WAIT_S * 2)
    assert out.after("steady1", 300).wait(WAIT_S)
    streams.remove("steady0")
    assert [s.name for s in streams.stats] == ["steady1"]
    streams.stop()
    report = run.join()
    streams.close()
    assert not failures, failures
    assert out.indices("steady1") == list(range(300))
    got = out.indices("steady0")
    assert got == list(range(len(got)))
    for name, source, _ in added:
        indices = out.indices(name)
        assert indices == list(range(len(indices))), name
        assert source.released == source.yielded, name
    ids = [stream for _, _, stream in added]
    assert len(set(ids)) == 80 and min(ids) == 2
    assert {s.name for s in report.streams} == {"steady0", "steady1", *(name for name, _, _ in added)}
    assert report.frames == len(out.results)


def test_a_stream_removed_from_a_persistent_run_leaves_its_figures_not_its_samples(
        picture_pipeline: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A service's streams come and go for days: remove() summarises a stream's latency and lets its samples go, one
    still running too, and the report keeps the latest FIGURES_WINDOW streams removed (each with its whole count)."""
    import npu_zc.pipeline.streams as streams_module
    from npu_zc.pipeline.timing import StageStats

    monkeypatch.setattr(streams_module, "FIGURES_WINDOW", 2)  # 4 samples a stream kept untrimmed
    streams = npu_zc.Streams([Frames("steady", 3)], picture_pipeline, persistent=True)
    out = Results()
    run = Background(streams, out)
    assert out.after("steady", 3).wait(WAIT_S)
    for i in range(4):
        source = Frames(f"gone{i}", 100, free=4)  # waits after its 4th frame: removed while it runs
        streams.add(source, name=f"gone{i}")
        assert out.after(f"gone{i}", 4).wait(WAIT_S)
        (running,) = [s for s in streams.stats if s.name == f"gone{i}"]
        expected = StageStats.of(list(running.latencies_ns))
        stats = streams.remove(f"gone{i}")
        assert stats is running and stats.state == "stopped" and stats.frames == 4
        assert stats.latencies_ns == [] and stats.latency() == expected and expected.count == 4
        assert stats.to_dict()["latency_ms"]["p99"] == expected.p99
    streams.stop()
    report = run.join()
    streams.close()
    assert [(s.name, s.frames) for s in report.streams] == [("steady", 3), ("gone2", 4), ("gone3", 4)]
    assert report.streams[0].latency().count == 3  # one that was not removed keeps its samples


def test_a_persistent_runs_figures_are_over_its_latest_frames(picture_pipeline: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A service runs for days: its per-frame samples (latency per stream, the stages) are kept over the latest
    FIGURES_WINDOW frames, not all of them; the frame counts stay whole."""
    import npu_zc.pipeline.streams as streams_module

    monkeypatch.setattr(streams_module, "FIGURES_WINDOW", 8)
    streams = npu_zc.Streams([Frames("a", 100), Frames("b", 60)], picture_pipeline, persistent=True)
    out = Results()
    run = Background(streams, out)
    assert out.after("a", 100).wait(WAIT_S) and out.after("b", 60).wait(WAIT_S)
    streams.stop()
    report = run.join()
    streams.close()
    assert [s.frames for s in report.streams] == [100, 60]
    assert all(8 <= len(s.latencies_ns) <= 16 for s in report.streams)
    assert 8 <= report.stages["latency"].count <= 16 and report.streams[0].latency().count <= 16
    assert streams.timings.total("latency")[0] == 160  # the samples let go are still counted
    # Not persistent: every frame's sample.
    report, _ = run_streams([Frames("a", 30)], picture_pipeline)
    assert len(report.streams[0].latencies_ns) == 30 == report.stages["latency"].count
