"""Streams fits the CPU plugin's streams to its latency budget where a live source waits for results, and leaves
the throughput hint's own where only files run or no budget is asked for."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from streams_helpers import picture_model

import npu_zc
from npu_zc.cli.main import main
from npu_zc.runtime import CompileOptions

pytest.importorskip("openvino")

F32 = CompileOptions(inference_precision="f32")


def _streams(sources: list[Any], **kwargs: Any) -> npu_zc.Streams:
    return npu_zc.Streams(sources, picture_model(), device="CPU", fit="stretch", options=F32, **kwargs)


def test_a_live_source_fits_the_streams_to_the_budget(clips: dict[str, Path]) -> None:
    """The fit is applied and reported; the live source keeps what live sources promise (the newest frames win, so
    how many frames a loaded machine drops is its own business): every frame delivered in order or counted as
    dropped, the last one delivered."""
    streams = _streams([clips["nv12"]], realtime=True, latency_budget_ms=1e-6)  # nothing meets it: one stream
    results: list[Any] = []
    try:
        fit = streams.streams_fit
        assert fit is not None and fit.num_streams == 1 and not fit.fits
        assert int(streams.pipeline.session.property("NUM_STREAMS")) == 1
        report = streams.run([results.append])
        assert report.streams_fit is fit
        assert report.to_dict()["streams_fit"]["num_streams"] == 1
        (stream,) = report.streams
        assert stream.live and stream.done and not stream.error
        assert stream.frames + stream.dropped == 12 and stream.frames == len(results) >= 1
        indices = [r.index for r in results]
        assert indices == sorted(set(indices)) and indices[-1] == 11
    finally:
        streams.close()


def test_a_generous_budget_keeps_the_hints_streams(clips: dict[str, Path]) -> None:
    with _streams([clips["nv12"]], realtime=True, latency_budget_ms=1e9) as streams:
        fit = streams.streams_fit
        assert fit is not None and fit.fits and not fit.changed
        assert fit.num_streams == int(streams.pipeline.session.property("NUM_STREAMS"))


@pytest.mark.parametrize(
    "kwargs",
    [{"latency_budget_ms": 1e-6}, {"realtime": True, "latency_budget_ms": None},
     {"realtime": True, "latency_budget_ms": 1e-6, "options": CompileOptions(inference_precision="f32", extra={"NUM_STREAMS": 1})}],
    ids=["files alone", "no budget", "NUM_STREAMS given"],
)  # fmt: skip
def test_no_fit_without_a_live_source_a_budget_or_free_streams(clips: dict[str, Path], kwargs: dict[str, Any]) -> None:
    options = kwargs.pop("options", F32)
    with npu_zc.Streams([clips["nv12"]], picture_model(), device="CPU", fit="stretch", options=options, **kwargs) as streams:
        assert streams.streams_fit is None


def test_a_pipeline_passed_in_is_used_as_it_is(clips: dict[str, Path], picture_pipeline: Any) -> None:
    with npu_zc.Streams([clips["nv12"]], picture_pipeline, realtime=True, latency_budget_ms=1e-6) as streams:
        assert streams.pipeline is picture_pipeline and streams.streams_fit is None


@pytest.mark.parametrize("budget", [0.0, -3.0, math.nan])
def test_a_budget_that_is_not_positive_is_refused(clips: dict[str, Path], budget: float) -> None:
    with pytest.raises(npu_zc.InvalidArgumentError, match="latency_budget_ms must be positive"):
        _streams([clips["nv12"]], realtime=True, latency_budget_ms=budget)


@pytest.fixture(scope="module")
def model_xml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import openvino as ov

    path = tmp_path_factory.mktemp("model") / "picture.xml"
    ov.save_model(picture_model(), str(path))
    return path


def test_cli_fits_live_streams_and_says_so(clips: dict[str, Path], model_xml: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["stream", "-i", str(clips["nv12"]), "-i", str(clips["nv12"]), "--realtime", "-m", str(model_xml),
                 "-d", "CPU", "--latency-budget", "0.000001", "--no-progress"])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0
    assert "fitted   NUM_STREAMS 1: an inference" in text and "still above" in text
    code = main(["stream", "-i", str(clips["nv12"]), "-i", str(clips["nv12"]), "--realtime", "-m", str(model_xml),
                 "-d", "CPU", "--latency-budget", "0", "--json"])  # fmt: skip
    report = json.loads(capsys.readouterr().out.splitlines()[-1])["report"]
    assert code == 0 and report["streams_fit"] is None
    assert sum(stream["frames"] + stream["dropped"] for stream in report["streams"]) == 24  # realtime: drops counted


@pytest.mark.parametrize("budget", ["-5", "nan", "inf"])
def test_cli_refuses_a_negative_budget(clips: dict[str, Path], model_xml: Path, capsys: pytest.CaptureFixture[str], budget: str) -> None:
    code = main(["stream", "-i", str(clips["nv12"]), "--realtime", "-m", str(model_xml), "-d", "CPU", "--latency-budget", budget])
    assert code != 0
    assert "--latency-budget must be 0 (off) or positive" in capsys.readouterr().err
