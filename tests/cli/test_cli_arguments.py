"""The argument types `npu-zc` and the benches share: what each takes and what it refuses, with argparse's error."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npu_zc.cli import arguments


@given(st.integers(min_value=0, max_value=arguments.MAX_COUNT))
def test_whole_takes_each_count_in_range_written_either_way(value: int) -> None:
    assert arguments.count(str(value)) == value
    assert arguments.count(repr(float(value))) == value  # 12.0 is a whole number too


def test_whole_takes_exponent_notation() -> None:
    assert arguments.count("2e9") == 2_000_000_000


def test_nice_levels_take_0_to_19() -> None:
    assert [arguments.nice_levels(str(n)) for n in (0, 10, 19)] == [0, 10, 19]


@pytest.mark.parametrize(
    ("parse", "text", "said"),
    [
        (arguments.positive, "0", "must be at least 1, got 0"),
        (arguments.count, "-1", "must be at least 0, got -1"),
        (arguments.whole(3), "2", "must be at least 3, got 2"),
        (arguments.count, str(arguments.MAX_COUNT + 1), f"must be at most {arguments.MAX_COUNT}"),
        (arguments.nice_levels, "20", "must be at most 19, got 20"),
        (arguments.nice_levels, "-1", "must be at least 0, got -1"),
        (arguments.count, "1.5", "'1.5' is not a whole number"),
        (arguments.count, "nan", "'nan' is not a whole number"),
        (arguments.count, "inf", "'inf' is not a whole number"),
        (arguments.count, "four", "'four' is not a whole number"),
    ],
)
def test_whole_refuses_with_a_sentence(parse, text: str, said: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{said}"):
        parse(text)


@pytest.mark.parametrize(
    ("zero", "unlimited", "taken", "refused"),
    [
        (False, False, ["0.5", "3", "1e3"], ["0", "-1", "nan", "inf", "-inf", "soon"]),
        (True, False, ["0", "0.5", "3"], ["-0.1", "nan", "inf", "soon"]),
        (False, True, ["0.5", "inf"], ["0", "-1", "nan", "-inf", "soon"]),
    ],
)
def test_seconds_takes_and_refuses(zero: bool, unlimited: bool, taken: list[str], refused: list[str]) -> None:
    parse = arguments.seconds(zero=zero, unlimited=unlimited)
    for text in taken:
        assert parse(text) == float(text)
    least = "of 0 or more" if zero else "more than 0"
    for text in refused:
        with pytest.raises(argparse.ArgumentTypeError, match=f"^expected a number of seconds {least}.*got '{text}'$"):
            parse(text)


def test_a_parser_says_the_option_and_the_reason_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench")
    parser.add_argument("--streams", type=arguments.positive)
    parser.add_argument("--config", type=arguments.setting, action="append", default=[])
    assert parser.parse_args(["--streams", "2e1", "--config", " NUM_STREAMS = 4 "]).config == [("NUM_STREAMS", "4")]
    for argv, said in [(["--streams", "0"], "argument --streams: must be at least 1, got 0"),
                       (["--config", "NUM_STREAMS"], "argument --config: 'NUM_STREAMS' is not KEY=VALUE")]:  # fmt: skip
        with pytest.raises(SystemExit) as ended:
            parser.parse_args(argv)
        assert ended.value.code == 2
        assert said in capsys.readouterr().err
