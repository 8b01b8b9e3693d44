"""`npu-zc stream` with several sources: one process, one model, results per stream, the tables at the end."""

from __future__ import annotations

import json
from pathlib import Path

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
