"""Argument parsing and error reporting for `npu-zc`.

Errors a person can act on print one line on stderr and exit non-zero; the
traceback only with --debug.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..errors import Error


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="npu-zc",
        description="Zero-copy NPU inference pipelines: inspect the machine, run and compare zero-copy and copy modes.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    info = sub.add_parser("info", help="OpenVINO devices, DMA-BUF heaps, and what heap='auto' would take")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "info":
            from . import info

            return info.run(args.json)
        parser.error(f"unknown command {args.command}")
    except (Error, OSError, ValueError, RuntimeError) as e:
        if args.debug:
            raise
        print(f"npu-zc: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
