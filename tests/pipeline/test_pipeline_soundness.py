"""The pipeline sound (docs/safety.md): Ctrl-C stops run_throughput even when on_result
never returns (a real SIGINT sent to a child process)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("openvino", reason="OpenVINO is not installed (a dependency of npu_zc)")

from npu_zc.pipeline.throughput import STOP_GRACE_S

CHILD = """
    import itertools, threading
    import numpy as np
    from npu_zc.pipeline import Pipeline
    from npu_zc.runtime import CompileOptions

    pipeline = Pipeline("efficientnet-lite0", "CPU", options=CompileOptions(inference_precision="f32"), hint="throughput")
    frame = np.zeros((240, 320, 3), np.uint8)

    def on_result(index, prediction):
        print("waiting", flush=True)
        threading.Event().wait()  # never returns

    try:
        pipeline.run_throughput(itertools.repeat(frame, 10_000), on_result, requests=2, workers=1)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


@pytest.mark.parametrize("signals", [1, 2])
def test_ctrl_c_stops_run_throughput_with_an_on_result_that_never_returns(signals: int) -> None:
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CHILD)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "waiting"
    started = time.monotonic()
    for _ in range(signals):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
    try:
        out, _ = proc.communicate(timeout=STOP_GRACE_S + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("run_throughput outlived Ctrl-C") from None
    assert "interrupted" in out
    took = time.monotonic() - started
    # One Ctrl-C waits the grace for the frames in flight; a second one stops at once.
    assert took < (STOP_GRACE_S + 20 if signals == 1 else STOP_GRACE_S)
