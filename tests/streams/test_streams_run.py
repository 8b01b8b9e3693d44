"""Streams: many sources into one model, each stream's results in order, fair, isolated, with real clips."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from streams_helpers import by_stream, reference_frames, run_streams

import npu_zc
from npu_zc import InvalidArgumentError
from npu_zc.sinks import AnnotatedVideos, JsonLines
from npu_zc.pipeline.scheduler import LIVE_FRAMES
from npu_zc.sources import DecodedFrame, VideoSource

pytest.importorskip("openvino")


class Synthetic:
    """A source that has its frames at once (BGR photos cut from the pan): the scheduler, not a decoder, is the limit."""

    def __init__(self, name: str, count: int, *, live: bool = False, every_s: float = 0.0) -> None:
        from streams_helpers import pan_frames

        self.name, self.live, self.every_s = name, live, every_s
        self.images = [np.ascontiguousarray(rgb[:, :, ::-1]) for rgb in pan_frames(96, 64, 8)]
        self.count = count
        self.released = 0

    def frames(self, stop: threading.Event | None = None) -> Iterator[DecodedFrame]:
        for i in range(self.count):
            if stop is not None and stop.is_set():
                return
            if self.every_s:
                time.sleep(self.every_s)
            image = self.images[i % len(self.images)]
            yield DecodedFrame(i, "BGR", image, 96, 64, time.perf_counter_ns(), pts=i / 30, owner=image,
                               _release=self._count_release)  # fmt: skip

    def _count_release(self) -> None:
        self.released += 1


def test_every_clip_at_once_each_in_order_matching_ffmpeg(clips: dict[str, Path], picture_pipeline: Any) -> None:
    """H.264, HEVC (padded line sizes), an odd size and NV12 in one run: no frame lost, each stream in frame order,
    and each result is what the model gives for the same frame decoded by FFmpeg and converted by OpenCV
    (the picture averaged over 16x16 cells: a wrong pitch, plane or colour would move it)."""
    names = ["h264", "hevc", "h264_odd", "nv12"]
    report, results = run_streams([clips[n] for n in names], picture_pipeline)
    assert not report.errors
    streams = by_stream(results)
    for stream, name in enumerate(names):
        reference = reference_frames(clips[name])
        got = streams[stream]
        assert [r.index for r in got] == list(range(len(reference)))
        assert report.streams[stream].frames == len(reference) and report.streams[stream].dropped == 0
        assert [round(r.pts * 30) for r in got] == list(range(len(reference)))
        for r, bgr in zip(got, reference):
            want = picture_pipeline.process(bgr)[0]
            diff = np.abs(r.prediction[0] - want)
            assert diff.mean() < 1.0 and diff.max() < 4, (name, r.index, diff.mean(), diff.max())
    # a wrong pitch or plane would move the picture: the first and the last frame of the pan differ a lot
    first, last = streams[0][0].prediction[0], streams[0][-1].prediction[0]
    assert np.abs(first - last).mean() > 10
    assert report.stages["latency"].count == report.frames


@pytest.mark.parametrize("key", ["requests", "feeders", "deliverers", "workers", "worker_nice", "latency_budget_ms"])
def test_a_count_or_budget_of_the_wrong_kind_or_size_is_one_sentence(clips: dict[str, Path], picture_pipeline: Any,
                                                                      key: str) -> None:  # fmt: skip
    """Streams' counts are whole numbers within a machine's means (a bool, a float, text, NaN, a million threads or
    processes are refused before anything starts), its budget a positive number: InvalidArgumentError naming the
    argument, never int()'s or a comparison's own exception."""
    junk: list[Any] = [True, "3", float("nan"), float("inf"), -1, [1], None.__class__]
    if key != "latency_budget_ms":  # a budget may be 2.5 ms, or large
        junk += [2.5, 2**70, npu_zc.pipeline.streams.MAX_CONCURRENCY + 1]
    for value in junk:
        with pytest.raises(InvalidArgumentError, match=f"^{key} "):
            npu_zc.Streams([clips["nv12"]], picture_pipeline, **{key: value})
    with npu_zc.Streams([clips["nv12"]], picture_pipeline, **{key: np.int64(2)}) as streams:  # numpy's ints are ints
        assert key == "latency_budget_ms" or getattr(streams, key) == 2


def test_every_stream_is_served_throughout(picture_pipeline: Any) -> None:
    """Sources that always have a frame ready: every stream is served throughout the run, none left until the others
    are done. The scheduler's rule (least served first, no credit for idle time) is proven without threads in
    tests/pipeline/test_scheduler.py; here a source's thread may lag a moment on a loaded host (its lane is then
    empty and the others are fed meanwhile, by design), so no per-window balance is asserted."""
    sources = [Synthetic(f"s{i}", 60) for i in range(3)]
    report, results = run_streams(sources, picture_pipeline, deliverers=1)
    assert [s.frames for s in report.streams] == [60, 60, 60]
    order = [r.stream for r in results]
    firsts = [order.index(stream) for stream in range(3)]
    lasts = [len(order) - 1 - order[::-1].index(stream) for stream in range(3)]
    assert max(firsts) < min(lasts), f"a stream's first result came after another's last: {firsts} {lasts}"
    assert all(s.released == 60 for s in sources)  # every frame given back


@pytest.mark.parametrize("live_frames", [1, None])
def test_live_keeps_the_newest_and_counts_drops_files_keep_all(picture_pipeline: Any, clips: dict[str, Path],
                                                               live_frames: int | None) -> None:  # fmt: skip
    """A live lane keeps its newest ``live_frames`` (None: Streams' default, two); a file's loses nothing."""
    live = Synthetic("live", 400, live=True)
    given = {} if live_frames is None else {"live_frames": live_frames}
    kept = live_frames or LIVE_FRAMES
    report, results = run_streams([live, clips["nv12"]], picture_pipeline, **given)
    live_stats, file_stats = report.streams
    assert live_stats.frames + live_stats.dropped == 400
    assert live_stats.dropped > 0
    indices = [r.index for r in results if r.stream == 0]
    assert indices == sorted(indices) and len(set(indices)) == len(indices)
    assert indices[-kept:] == list(range(400 - kept, 400))  # the newest frames are never dropped
    assert file_stats.frames == 12 and file_stats.dropped == 0
    assert live.released == 400


def test_failing_streams_are_isolated(clips: dict[str, Path], picture_pipeline: Any, tmp_path: Path) -> None:
    bad = ["text", "truncated", "audio", "unknown"]
    sources = [clips["nv12"], *[clips[b] for b in bad], tmp_path / "missing.mp4", "rtsp://127.0.0.1:9/none", clips["h264"]]
    report, results = run_streams(sources, picture_pipeline, source_options={"timeout": 1, "reconnect": 0})
    stats = report.streams
    assert stats[0].frames == 12 and stats[-1].frames == 45 and not stats[0].error and not stats[-1].error
    errors = {s.stream: s.error for s in stats if s.error}
    assert set(errors) == {1, 2, 3, 4, 5, 6}
    assert "not a video FFmpeg can read" in errors[1] and "not a video FFmpeg can read" in errors[2]
    assert "no video track" in errors[3] and "cannot decode" in errors[4]
    assert "no such video" in errors[5] and "refused the connection" in errors[6]
    assert all(s.frames == 0 for s in stats[1:7])


def test_sixty_four_sources(clips: dict[str, Path], picture_pipeline: Any) -> None:
    sources = [clips["nv12"]] * 62 + [clips["text"], clips["audio"]]
    report, results = run_streams(sources, picture_pipeline)
    streams = by_stream(results)
    for stream in range(62):
        assert [r.index for r in streams[stream]] == list(range(12))
    assert [bool(s.error) for s in report.streams] == [False] * 62 + [True, True]


def test_tracker_per_stream_in_order(picture_pipeline: Any) -> None:
    made: list[Any] = []

    class Counter:
        def __init__(self) -> None:
            self.seen = 0
            made.append(self)

        def update(self, prediction: Any) -> Any:
            self.seen += 1
            return [("tracked", self.seen)]

    report, results = run_streams([Synthetic("a", 20), Synthetic("b", 30)], picture_pipeline, tracker=Counter)
    assert len(made) == 2 and [t.seen for t in made] == [20, 30]
    for stream, got in by_stream(results).items():
        assert [r.prediction[0][1] for r in got] == list(range(1, len(got) + 1))


def test_images_folder_beside_video(clips: dict[str, Path], picture_pipeline: Any, tmp_path: Path) -> None:
    import cv2

    for i, bgr in enumerate(reference_frames(clips["nv12"])[:3]):
        cv2.imwrite(str(tmp_path / f"{i:02d}.png"), bgr)
    report, results = run_streams([tmp_path, clips["nv12"]], picture_pipeline)
    assert [s.frames for s in report.streams] == [3, 12]


def test_outputs_json_lines_and_annotated_video(clips: dict[str, Path], picture_pipeline: Any, tmp_path: Path) -> None:
    lines, videos = JsonLines(tmp_path / "out.jsonl"), AnnotatedVideos(tmp_path / "video", overlay=lambda bgr, p: bgr)
    streams = npu_zc.Streams([clips["h264"], clips["hevc"]], picture_pipeline, keep_frames=True)
    seen: list[Any] = []
    report = streams.run([lines, videos, seen.append])
    lines.close()
    videos.close()
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(records) == report.frames == 75
    assert [r["index"] for r in records if r["stream"] == 1] == list(range(30))
    assert all(r.frame is None or r.frame.planes is None for r in seen)  # frames let go after the outputs
    import av

    for stream, (count, size) in {0: (45, (320, 240)), 1: (30, (322, 182))}.items():
        with av.open(str(videos.paths[stream])) as container:
            frames = list(container.decode(video=0))
        assert len(frames) == count and (frames[0].width, frames[0].height) == size


def test_keep_frames_asks_per_frame_which_to_keep(clips: dict[str, Path], picture_pipeline: Any) -> None:
    """keep_frames as a callable: asked with the stream's name as each frame is submitted; the frames it keeps come
    with their results (and are let go after the outputs), the others' buffers went back at once."""
    asked: list[str] = []

    def wants(name: str) -> bool:
        asked.append(name)
        return name == "kept" and asked.count(name) % 2 == 1  # every other frame of one stream

    with pytest.raises(InvalidArgumentError, match=r"^keep_frames is True, False or a callable"):
        npu_zc.Streams([clips["h264"]], picture_pipeline, keep_frames="yes")  # type: ignore[arg-type]
    streams = npu_zc.Streams([clips["h264"], clips["hevc"]], picture_pipeline, names=["kept", "other"], keep_frames=wants)
    seen: list[tuple[str, int, bool]] = []
    results: list[Any] = []

    def output(r: Any) -> None:
        seen.append((r.name, r.index, r.frame is not None and r.frame.planes is not None))
        results.append(r)

    report = streams.run(output)
    assert report.frames == len(seen) == len(asked) == 75
    assert sorted(asked) == sorted(name for name, _, _ in seen)
    assert [index for name, index, framed in seen if framed] == [k for k in range(45) if k % 2 == 0]
    assert all(name == "kept" for name, _, framed in seen if framed)
    assert all(r.frame is None or r.frame.planes is None for r in results)  # kept ones let go after the outputs


def _counts() -> tuple[int, int, int]:
    return len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task")), len(Path("/proc/self/maps").read_text().splitlines())


def test_fds_threads_mappings_flat_over_100_runs(clips: dict[str, Path], picture_pipeline: Any) -> None:
    def cycle() -> None:
        streams = npu_zc.Streams([VideoSource(clips["nv12"], limit=2), clips["text"]], picture_pipeline, requests=2)
        assert streams.run().streams[0].frames == 2
        streams.close()

    for _ in range(10):
        cycle()
    before = _counts()
    for _ in range(100):
        cycle()
    after = _counts()
    assert after[0] <= before[0] + 2, (before, after)
    assert after[1] <= before[1] + 2, (before, after)
    assert after[2] <= before[2] + 16, (before, after)


def test_duration_and_stop_end_a_live_run(picture_pipeline: Any) -> None:
    source = Synthetic("slow", 10_000, live=True, every_s=0.01)
    started = time.monotonic()
    report, _ = run_streams([source], picture_pipeline, duration=0.5)
    assert time.monotonic() - started < 5
    assert 0 < report.streams[0].frames < 10_000


def test_run_waits_between_ticks_without_a_tick(picture_pipeline: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """run() with a duration and no tick sleeps between wake-ups: it once spun on 0 s waits (its next tick never
    moved on), holding the GIL against the decoding, feeding and delivering threads (tens of ms a frame)."""
    main, zero_waits = threading.main_thread(), []
    wait = threading.Event.wait

    def counted(self: threading.Event, timeout: float | None = None) -> bool:
        if threading.current_thread() is main and timeout is not None and timeout <= 0:
            zero_waits.append(timeout)
        return wait(self, timeout)

    monkeypatch.setattr(threading.Event, "wait", counted)
    source = Synthetic("slow", 10_000, live=True, every_s=0.01)
    report, _ = run_streams([source], picture_pipeline, duration=1.2)
    assert report.streams[0].frames > 0
    assert len(zero_waits) < 5, f"the calling thread polled {len(zero_waits)} times instead of waiting"


def test_colour_standard_taken_from_the_stream(tmp_path: Path, picture_pipeline: Any) -> None:
    """A clip tagged BT.709 full range (yuvj420p): the engine converts it in that standard, as the layout engine's
    own conversion of the same planes does; BT.601 limited (the default) would give another picture."""
    import av

    from npu_zc import layout
    from npu_zc.sources.video import engine_takes_colour
    from streams_helpers import pan_frames

    if not engine_takes_colour():
        pytest.skip("this layout engine has no colour standards (matrix=, range=)")
    clip = tmp_path / "bt709-full.mp4"
    with av.open(str(clip), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuvj420p"
        stream.codec_context.colorspace, stream.codec_context.color_range = 1, 2  # AVCOL_SPC_BT709, AVCOL_RANGE_JPEG
        for rgb in pan_frames(320, 240, 6):
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    report, results = run_streams([clip], picture_pipeline)
    assert report.streams[0].frames == 6
    with av.open(str(clip)) as container:
        decoded = list(container.decode(video=0))
    for r, frame in zip(results, decoded, strict=True):
        y, u, v = (np.frombuffer(p, np.uint8).reshape(-1, p.line_size) for p in frame.planes)
        y, uv = np.ascontiguousarray(y[:240, :320]), np.stack([u[:120, :160], v[:120, :160]], axis=-1).reshape(120, 320)
        in_709 = layout.convert((y, uv), np.zeros((240, 320, 3), np.uint8), "NV12", "BGR", matrix="bt709", range="full")
        in_601 = layout.convert((y, uv), np.zeros((240, 320, 3), np.uint8), "NV12", "BGR")
        want, other = picture_pipeline.process(in_709)[0], picture_pipeline.process(in_601)[0]
        assert np.abs(r.prediction[0] - want).mean() < 1.0
        assert np.abs(r.prediction[0] - other).mean() > 3 * np.abs(r.prediction[0] - want).mean() + 1


def test_decoders_share_the_cores(clips: dict[str, Path], picture_pipeline: Any) -> None:
    from npu_zc.runtime.session import usable_cores

    mine = VideoSource(clips["nv12"], thread_count=3)
    streams = npu_zc.Streams([clips["nv12"], clips["h264"], mine], picture_pipeline)
    counts = [lane.source.thread_count for lane in streams.lanes]
    assert counts == [max(1, usable_cores() // 3), max(1, usable_cores() // 3), 3]
    assert streams.run().frames == 12 + 45 + 12
    streams.close()
