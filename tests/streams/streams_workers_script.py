"""A Streams program with a decoding worker, for the Ctrl-C test (tests/streams/test_streams_workers.py).

``python streams_workers_script.py TESTS CLIP``: runs ``Streams(workers=1)`` on ``CLIP`` paced at its frame rate
(realtime); at its first result prints ``started <the worker's pid>``; once Ctrl-C has stopped the run, prints
``interrupted <the stream's state> <the worker's exit status>`` (the worker is reaped by then) and exits 0.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

# As tests/conftest.py: a run started in the background by a shell inherits SIGINT ignored; Ctrl-C is what is tested.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path[:0] = [sys.argv[1]]

import npu_zc  # noqa: E402
from npu_zc.runtime import CompileOptions  # noqa: E402
from npu_zc.sources import VideoSource  # noqa: E402
from streams_helpers import picture_model  # noqa: E402


def main() -> int:
    pipeline = npu_zc.Pipeline(picture_model(), "CPU", hint="throughput", fit="stretch",
                               options=CompileOptions(inference_precision="f32"))  # fmt: skip
    streams = npu_zc.Streams([VideoSource(sys.argv[2], realtime=True)], pipeline, workers=1)
    first = threading.Event()

    def on_result(result: Any) -> None:
        if not first.is_set():
            first.set()
            print("started", streams.lanes[0].worker.process.pid, flush=True)

    try:
        streams.run(on_result)
    except KeyboardInterrupt:
        assert streams._workers is not None
        codes = [worker.process.returncode for worker in streams._workers.processes]
        print("interrupted", streams.stats[0].state, *codes, flush=True)
    else:
        print("not interrupted", flush=True)
    streams.close()
    pipeline.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
