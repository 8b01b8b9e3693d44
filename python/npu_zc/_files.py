"""Reading a file named by a user: only a regular file, and only up to a
bound. A FIFO would block the open (and the read) until a writer comes;
/dev/zero or /dev/urandom would be read until memory runs out."""

from __future__ import annotations

import os
import stat
from typing import Callable

MAX_FILE_BYTES = 1 << 30
"""The most bytes an image or labels file may have (1 GiB): far beyond any photo, far below memory."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(
    path: str | os.PathLike[str], what: str, error: Callable[[str], Exception], *, limit: int = MAX_FILE_BYTES
) -> bytes:
    """The bytes of the regular file at ``path``; ``error(sentence)`` is raised
    for anything else (a FIFO, a device, a folder), a file over ``limit`` bytes,
    or one that cannot be read."""
    try:
        # O_NONBLOCK: opening a FIFO returns at once (its fstat then refuses it);
        # it changes nothing for a regular file.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"cannot read {what} {os.fspath(path)!s}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{what} {os.fspath(path)!s} is {_kind(st.st_mode)}: give a regular file")
        if st.st_size > limit:
            raise error(f"{what} {os.fspath(path)!s} has {st.st_size:,} bytes, over the limit of {limit:,}")
        # In chunks: read(n) allocates n bytes before reading, so one read of `limit` would take a GiB.
        chunks: list[bytes] = []
        total, chunk_size = 0, max(st.st_size + 1, 1 << 16)
        try:
            while chunk := f.read(min(chunk_size, limit + 1 - total)):
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:  # it grew while we read
                    raise error(f"{what} {os.fspath(path)!s} has more than {limit:,} bytes, over the limit")
        except OSError as exc:
            raise error(f"cannot read {what} {os.fspath(path)!s}: {exc.strerror or exc}") from None
    return b"".join(chunks)
