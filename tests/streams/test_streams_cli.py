"""`npu-zc stream` with several sources: one process, one model, results per stream, the tables at the end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streams_helpers import picture_model

from npu_zc.cli.main import main

pytest.importorskip("openvino")


@pytest.fixture(scope="module")
def model_xml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import openvino as ov

    path = tmp_path_factory.mktemp("model") / "picture.xml"
    ov.save_model(picture_model(), str(path))
    return path


def test_stream_many_sources(clips: dict[str, Path], model_xml: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.jsonl"
    code = main(["stream", "-i", str(clips["h264"]), "-i", str(clips["hevc"]), "-i", str(clips["text"]),
                 "-m", str(model_xml), "-d", "CPU", "--jsonl", str(out), "--save", str(tmp_path / "video"), "--no-progress"])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 1  # one stream failed; the others ran to their end
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["index"] for r in records if r["stream"] == 0] == list(range(45))
    assert [r["index"] for r in records if r["stream"] == 1] == list(range(30))
    assert "streams  3: 75 frames" in text
    assert "error    stream 2 (notes.mp4): notes.mp4 is not a video FFmpeg can read" in text
    assert "latency" in text and "preprocess" in text
    assert sorted(p.name for p in (tmp_path / "video").iterdir()) == ["00-pan.mp4.mp4", "01-pan.mkv.mp4"]


def test_stream_json_lines_on_stdout(clips: dict[str, Path], model_xml: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["stream", "-i", str(clips["nv12"]), "-i", str(clips["nv12"]), "-m", str(model_xml), "-d", "CPU", "--json"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    results, report = [json.loads(line) for line in lines[:-1]], json.loads(lines[-1])["report"]
    assert len(results) == 24 and report["frames"] == 24
    assert [s["frames"] for s in report["streams"]] == [12, 12]


def test_stream_hardware_decoding_refused(clips: dict[str, Path], model_xml: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import av

    if "vaapi" in av.codec.hwaccel.hwdevices_available():
        pytest.skip("this FFmpeg build has VA-API")
    code = main(["stream", "-i", str(clips["nv12"]), "-m", str(model_xml), "-d", "CPU", "--hwaccel", "vaapi", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1
    assert "hardware decoding through vaapi is not in this FFmpeg build" in captured.out


def test_live_table_redraws_in_place() -> None:
    import io

    from npu_zc.cli.report import LiveTable
    from npu_zc.pipeline.streams import StreamStats

    out = io.StringIO()
    table = LiveTable(out)
    stats = [StreamStats(0, "a.mp4", False, frames=3), StreamStats(1, "rtsp://127.0.0.1:8554/cam1", True, dropped=2)]
    table(stats)
    first = out.getvalue()
    assert first.count("\n") == 3 and "a.mp4" in first and "\x1b[" in first and "\x1b[3F" not in first
    table(stats)
    assert out.getvalue()[len(first) :].startswith("\x1b[3F")  # back up over the three lines drawn
    table.close()
    assert out.getvalue().endswith("\x1b[3F\x1b[J")  # the table leaves the terminal as it found it


def test_stream_plugin_option_and_delivery_threads(clips: dict[str, Path], model_xml: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--option reaches the compiled model (NUM_STREAMS=1: one optimal request, so twice that in flight, where the
    throughput hint gives more on this machine's cores) and --deliverers runs the streams with that many threads."""
    import os

    args = ["stream", "-i", str(clips["nv12"]), "-i", str(clips["h264"]), "-m", str(model_xml), "-d", "CPU", "--json"]
    code = main([*args, "--option", "NUM_STREAMS=1", "--deliverers", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    results, report = [json.loads(line) for line in lines[:-1]], json.loads(lines[-1])["report"]
    assert report["requests"] == 2
    assert [r["index"] for r in results if r["stream"] == 0] == list(range(12))
    assert [r["index"] for r in results if r["stream"] == 1] == list(range(45))
    if len(os.sched_getaffinity(0)) >= 2:  # the hint alone gives a stream per core or so
        assert main(args) == 0
        assert json.loads(capsys.readouterr().out.splitlines()[-1])["report"]["requests"] > 2


def test_stream_receiving_thread_delivers(clips: dict[str, Path], model_xml: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--deliverers 0 with --workers (and the workers 5 nice levels down): the thread receiving the workers' frames
    calls the outputs (every result, each stream's in order); without workers it is refused in one sentence, before
    anything runs, and so (by argparse) is a nice level past 19."""
    args = ["stream", "-i", str(clips["nv12"]), "-i", str(clips["h264"]), "-m", str(model_xml), "-d", "CPU", "--json"]
    assert main([*args, "--workers", "1", "--deliverers", "0", "--worker-nice", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    results = [json.loads(line) for line in lines[:-1]]
    assert [r["index"] for r in results if r["stream"] == 0] == list(range(12))
    assert [r["index"] for r in results if r["stream"] == 1] == list(range(45))
    assert main([*args, "--deliverers", "0"]) == 1
    captured = capsys.readouterr()
    assert not captured.out
    assert "deliverers=0 leaves the delivering to the decoding workers' receiving thread" in captured.err
    with pytest.raises(SystemExit) as refused:  # argparse's line, before anything runs
        main([*args, "--workers", "1", "--worker-nice", "20"])
    captured = capsys.readouterr()
    assert refused.value.code == 2 and not captured.out
    assert "argument --worker-nice: must be at most 19, got 20" in captured.err


def test_stream_live_frames(clips: dict[str, Path], model_xml: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--live-frames runs even one file through the many-streams scheduler (its report, every frame in order); a
    count past what a live lane may keep is refused in one sentence, before anything runs."""
    args = ["stream", "-i", str(clips["nv12"]), "-m", str(model_xml), "-d", "CPU", "--json"]
    assert main([*args, "--live-frames", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["index"] for line in lines[:-1]] == list(range(12))
    assert json.loads(lines[-1])["report"]["streams"][0]["state"] == "done"
    assert main([*args, "--live-frames", "5"]) == 1
    captured = capsys.readouterr()
    assert not captured.out and "live_frames" in captured.err and captured.err.count("\n") == 1, captured.err


def squares_clip(path: Path, frames: int = 8) -> tuple[Path, list[list[tuple[int, int, int, int]]]]:
    """A 640x640 NV12 clip (rawvideo: no loss past 4:2:0) of two red squares moving one anchor a frame, where the
    red-square YOLO's anchors fire; and each frame's squares in pixels."""
    import av
    import cv2

    from conftest import red_square_input_box

    boxes = []
    with av.open(str(path), "w") as out:
        stream = out.add_stream("rawvideo", rate=30)
        stream.width, stream.height, stream.pix_fmt = 640, 640, "nv12"
        for t in range(frames):
            img = np.full((640, 640, 3), 90, np.uint8)
            here = [red_square_input_box(8 + t, 10), red_square_input_box(30 - t, 25)]
            for x1, y1, x2, y2 in here:
                img[y1:y2, x1:x2] = (0, 0, 255)
            boxes.append(here)
            for packet in stream.encode(av.VideoFrame.from_ndarray(cv2.cvtColor(img, cv2.COLOR_BGR2RGB), format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path, boxes


def test_stream_detector_on_the_many_streams_path_tracks_and_draws(red_square_yolo: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Several -i with a detector: each stream tracked by default (track ids in the JSON lines, --no-track none), and
    --save draws the boxes with npu_zc.draw (it wrote the text of a Detections repr in a corner and drew no box)."""
    import av

    clip, boxes = squares_clip(tmp_path / "squares.mkv")
    out, saved = tmp_path / "results.jsonl", tmp_path / "video"
    code = main(["stream", "-i", str(clip), "-i", str(clip), "-m", str(red_square_yolo), "-d", "CPU", "--jsonl", str(out),
                 "--save", str(saved), "--no-progress"])  # fmt: skip
    assert code == 0, capsys.readouterr().out
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 16
    for r in records:
        found = r["result"]["detections"]
        assert sorted(d["track_id"] for d in found) == [1, 2], r
        got = sorted(d["box"] for d in found)
        want = sorted(boxes[r["index"]])
        assert np.abs(np.array(got) - np.array(want)).max() < 4, (r["index"], got, want)  # the tracker's boxes
    for stream in range(2):
        (video,) = saved.glob(f"{stream:02d}-*.mp4")
        with av.open(str(video)) as container:
            drawn = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
        assert len(drawn) == 8
        for t in (0, 7):
            for x1, y1, x2, y2 in boxes[t]:
                # Above the square: grey in the clip, the label's filled box (the class colour) in the saved video.
                label = drawn[t][y1 - 14 : y1 - 4, x1 + 4 : x1 + 40].astype(int)
                assert (label[..., 0] - label[..., 2]).mean() > 80, (stream, t, label.mean(axis=(0, 1)))
            # Far from any square: the grey is left alone (no overlay text in the corner).
            assert np.abs(drawn[t][600:630, 5:200].astype(int) - 90).mean() < 6
    code = main(["stream", "-i", str(clip), "-i", str(clip), "-m", str(red_square_yolo), "-d", "CPU", "--jsonl", str(out),
                 "--no-track", "--no-progress"])  # fmt: skip
    assert code == 0
    assert all("track_id" not in d for line in out.read_text().splitlines() for d in json.loads(line)["result"]["detections"])
