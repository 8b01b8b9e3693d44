"""Several delivery threads: results delivered as their requests complete, each stream's in its frame order and one
at a time, a stream held up only by its own results (a slow or stuck output of one stream does not stall another),
a failing output raised, a stop while results are pending losing none of a file's frames, threads flat."""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Iterator

import numpy as np
import pytest
from streams_helpers import by_stream, run_streams

import npu_zc
from npu_zc.pipeline.streams import default_deliverers
from npu_zc.sources import DecodedFrame

pytest.importorskip("openvino")


class Counted:
    """A file-like source (no drops) of small BGR frames, all ready at once; counts what it hands over and gets back."""

    live = False

    def __init__(self, name: str, count: int, seed: int = 0) -> None:
        from streams_helpers import pan_frames

        self.name, self.count = name, count
        self.images = [np.ascontiguousarray(rgb[:, :, ::-1]) for rgb in pan_frames(96, 64, 6)]
        self.seed = seed
        self.yielded = 0
        self.released = 0

    def frames(self, stop: threading.Event | None = None) -> Iterator[DecodedFrame]:
        for i in range(self.count):
            if stop is not None and stop.is_set():
                return
            image = self.images[(self.seed + i) % len(self.images)]
            self.yielded += 1
            yield DecodedFrame(i, "BGR", image, 96, 64, time.perf_counter_ns(), pts=i / 30, owner=image,
                               _release=self._count_release)  # fmt: skip

    def _count_release(self) -> None:
        self.released += 1


class Watch:
    """An output that records each stream's order, the threads it ran on, and any two results of one stream
    handled at once; ``pause(stream, index)`` runs inside (a slow output, or one that waits)."""

    def __init__(self, pause=lambda stream, index: None) -> None:  # type: ignore[no-untyped-def]
        self.pause = pause
        self.lock = threading.Lock()
        self.inside: collections.Counter[int] = collections.Counter()
        self.overlaps: list[tuple[int, int]] = []
        self.order: list[tuple[int, int]] = []
        self.threads: set[str] = set()

    def __call__(self, result: Any) -> None:
        with self.lock:
            self.inside[result.stream] += 1
            if self.inside[result.stream] > 1:
                self.overlaps.append((result.stream, result.index))
            self.threads.add(threading.current_thread().name)
        try:
            self.pause(result.stream, result.index)
        finally:
            with self.lock:
                self.inside[result.stream] -= 1
                self.order.append((result.stream, result.index))

    def indices(self, stream: int) -> list[int]:
        return [i for s, i in self.order if s == stream]


def test_default_deliverers_one_per_four_cores_at_least_two() -> None:
    assert [default_deliverers(32, cores) for cores in (1, 2, 8, 16, 64)] == [2, 2, 2, 4, 16]
    assert default_deliverers(1, 64) == 1 and default_deliverers(3, 64) == 3  # never more than one per stream
    # With decoding workers: two where the CPU infers, none (the receiving thread delivers) where it does not.
    assert [default_deliverers(32, 16, workers=4, device=d) for d in ("CPU", "AUTO", "HETERO:NPU,CPU")] == [2, 2, 2]
    assert [default_deliverers(32, 16, workers=4, device=d) for d in ("NPU", "GPU", "GPU.1")] == [0, 0, 0]
    assert default_deliverers(32, 16, device="NPU") == 4  # no workers: threads, whatever the device
    with pytest.raises(npu_zc.InvalidArgumentError, match="deliverers"):
        npu_zc.Streams([Counted("a", 2)], "efficientnet-lite0", deliverers=0)


def test_default_requests_at_least_one_per_stream(picture_pipeline: Any) -> None:
    """Twice the plugin's optimal number of requests, and at least one per stream given at the start (with fewer, a
    burst of live frames waits for a set in the lanes, where each is lost when its stream's next frame comes); a
    number given is kept."""
    from npu_zc.pipeline.throughput import default_requests

    twice = default_requests(picture_pipeline.session.optimal_requests)
    for count, want in ((1, twice), (twice, twice), (twice + 3, twice + 3)):
        streams = npu_zc.Streams([Counted(f"s{k}", 1) for k in range(count)], picture_pipeline)
        assert streams.requests == want, (count, streams.requests)
        streams.close()
    streams = npu_zc.Streams([Counted(f"s{k}", 1) for k in range(twice + 3)], picture_pipeline, requests=2)
    assert streams.requests == 2
    streams.close()


def test_a_stream_waits_only_for_its_own_results(picture_pipeline: Any) -> None:
    """Stream 0's first result is held in the output until stream 1 has delivered three results. With several
    delivery threads they come; with one (every result behind the oldest, the old delivery), they cannot. Eight
    requests: stream 0's eight frames, undelivered, cannot hold every set of buffers even where its source is read
    well before stream 1's (a loaded machine)."""
    for deliverers, passes in ((2, True), (1, False)):
        stream1 = threading.Event()
        seen: dict[str, bool] = {}

        def pause(stream: int, index: int) -> None:
            if (stream, index) == (0, 0):
                seen["passed"] = stream1.wait(20.0 if passes else 1.0)
            elif (stream, index) == (1, 2):
                stream1.set()

        watch = Watch(pause)
        sources = [Counted("held", 8), Counted("free", 8, 3)]
        report, _ = run_streams(sources, picture_pipeline, requests=8, feeders=1, deliverers=deliverers,
                                outputs=[watch])  # fmt: skip
        assert seen["passed"] is passes, deliverers
        assert [s.frames for s in report.streams] == [8, 8]
        assert watch.indices(0) == list(range(8)) and watch.indices(1) == list(range(8))
        if passes:  # stream 1 went past stream 0's stuck first result
            assert watch.order.index((1, 2)) < watch.order.index((0, 0))


def test_each_stream_in_order_when_one_streams_outputs_are_slow(picture_pipeline: Any) -> None:
    """Four streams, the first one's output slow, three delivery threads and two feeding threads: every frame
    delivered, each stream's in order and never two of a stream at once, each result its own frame's, and the
    deliveries spread over the threads."""
    sources = [Counted(f"s{i}", 30, i) for i in range(4)]
    watch = Watch(lambda stream, index: time.sleep(0.004) if stream == 0 else None)
    report, results = run_streams(sources, picture_pipeline, feeders=2, deliverers=3, outputs=[watch])
    assert not report.errors and not watch.overlaps
    streams = by_stream(results)
    for stream, source in enumerate(sources):
        assert [r.index for r in streams[stream]] == list(range(30)), stream
        assert watch.indices(stream) == list(range(30))
        for r in streams[stream][::7]:
            want = picture_pipeline.process(source.images[(source.seed + r.index) % 6])[0]
            assert np.abs(r.prediction[0] - want).mean() < 1.0, (stream, r.index)
        assert source.released == source.yielded == 30
    assert len(watch.threads) > 1, watch.threads
    assert report.stages["latency"].count == report.frames == 4 * 30


def test_stop_while_results_are_pending_loses_no_frame(picture_pipeline: Any) -> None:
    """A stop from another thread while slow outputs leave results pending: what was taken is delivered (each stream
    from frame 0 on with no gap), every frame handed over goes back, and no delivery thread is left."""
    sources = [Counted(f"s{i}", 100_000, i) for i in range(4)]
    watch = Watch(lambda stream, index: time.sleep(0.002))
    streams = npu_zc.Streams(sources, picture_pipeline, feeders=2, deliverers=3, requests=4)
    timer = threading.Timer(0.5, streams.stop)
    timer.start()
    started = time.monotonic()
    report = streams.run(watch)
    streams.close()
    assert time.monotonic() - started < 20
    assert not watch.overlaps and 0 < report.frames < 4 * 100_000
    for stream, source in enumerate(sources):
        assert watch.indices(stream) == list(range(report.streams[stream].frames)), stream
        assert source.released == source.yielded, (stream, source.released, source.yielded)
    assert not [t for t in threading.enumerate() if t.name.startswith(("npu_zc-queue", "npu_zc-feed", "npu_zc-src"))]


def test_a_failing_output_on_one_delivery_thread_stops_the_run(picture_pipeline: Any) -> None:
    """An output that raises for one stream while other delivery threads deliver the others: the run raises it,
    ends without a hang, hands every frame back, and leaves no thread behind."""

    def pause(stream: int, index: int) -> None:
        if (stream, index) == (2, 5):
            raise RuntimeError("the output broke")

    sources = [Counted(f"s{i}", 60, i) for i in range(4)]
    watch = Watch(pause)
    streams = npu_zc.Streams(sources, picture_pipeline, feeders=2, deliverers=3)
    started = time.monotonic()
    with pytest.raises(npu_zc.ModelError, match="the output broke"):
        streams.run(watch)
    streams.close()
    assert time.monotonic() - started < 20
    assert not watch.overlaps
    for stream, source in enumerate(sources):
        indices = watch.indices(stream)
        assert indices == sorted(indices), stream
        assert source.released == source.yielded, stream
    assert not [t for t in threading.enumerate() if t.name.startswith(("npu_zc-queue", "npu_zc-feed", "npu_zc-src"))]
