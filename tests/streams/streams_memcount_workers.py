"""A Streams run with a decoding worker, both processes under LD_PRELOAD=libmemcount.so (run by
test_streams_memcount.py); prints one JSON object: what the worker copied from ready to bye.

    python streams_memcount_workers.py CLIP
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE.parent)]

from streams_helpers import picture_model  # noqa: E402

import npu_zc  # noqa: E402
from npu_zc.runtime import CompileOptions  # noqa: E402


def main() -> None:
    pipeline = npu_zc.Pipeline(picture_model(), "CPU", hint="throughput", fit="stretch",
                               options=CompileOptions(inference_precision="f32"))  # fmt: skip
    pipeline.postprocess = lambda outputs: [np.array(outputs[0], np.float32)]
    streams = npu_zc.Streams([sys.argv[1]], pipeline, workers=1)
    report = streams.run()
    streams.close()
    pipeline.close()
    stats = report.streams[0]
    print(json.dumps({"frames": report.frames, "copied": stats.copied, "error": stats.error,
                      "worker": streams.worker_copies}))  # fmt: skip


if __name__ == "__main__":
    main()
