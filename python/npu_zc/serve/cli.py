"""``npu-zc serve --config FILE``: the service until SIGTERM or Ctrl-C (logs on stderr)."""

from __future__ import annotations

import logging
import sys

from .config import load


def run(path: str, *, check: bool = False) -> int:
    """Exit status: 0 after a clean stop (or, with ``check``, a config and sources that check out), 1 when it cannot
    start or the streams fail."""
    config = load(path)  # a bad config is one sentence before anything starts
    if check:
        from .service import check_source

        for k, stream in enumerate(config.streams):
            check_source(stream.source, config.base, f"streams[{k}].source")
        print(f"{path}: {len(config.streams)} streams, {len(config.lines)} lines, {len(config.zones)} zones: OK")
        return 0
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="npu-zc serve: %(message)s")
    from .service import Service

    return Service(config).run()


__all__ = ["run"]
