"""The group commit's file I/O in as few releases of the GIL as possible.

A queue store's sync (queue_store.py) runs on a worker thread while the event loop's thread holds
the GIL nearly all the time on a busy broker. Each ``os.write``, ``os.dup``, ``os.fsync`` and
``os.close`` lets the GIL go and has to win it back from the loop, which can take up to a switch
interval (5 ms) every time: with one call per file and per step, a sync of one queue made 6 to 9
such trips, and the 1p1c-1KiB-persist-confirm row measured 1.9 ms per sync of which 0.6 ms was
the disk (docs/performance.md, session 7 HC). The two steps of a sync are therefore one call
each:

* ``write_and_dup(writes, dup_fds)``: every ``(fd, octets)`` written whole, in order (a short
  write or EINTR writes the rest), then each of ``dup_fds`` duplicated; returns the duplicates.
  On an error nothing more is written, the duplicates already made are closed, OSError.
* ``fsync_and_close(fds)``: fsync each descriptor in order and close it; all are closed
  whatever happens, no fsync is tried after a failed one, the first error raises OSError.

Compiled in warren/codec/_speedups.c (the GIL let go once per call); the ``_py`` functions here
are the same steps one system call at a time, used without the extension and compared with it
in tests/protocol/test_speedups.py.
"""

from __future__ import annotations

import os

__all__ = ["write_and_dup", "fsync_and_close", "write_and_dup_py", "fsync_and_close_py"]


def write_and_dup_py(writes: list, dup_fds: list) -> list[int]:
    for fd, data in writes:
        mv = memoryview(data)
        while mv:
            mv = mv[os.write(fd, mv):]  # os.write retries EINTR itself (PEP 475)
    duplicates: list[int] = []
    try:
        for fd in dup_fds:
            duplicates.append(os.dup(fd))
    except BaseException:
        for fd in duplicates:
            os.close(fd)
        raise
    return duplicates


def fsync_and_close_py(fds: list) -> None:
    error: OSError | None = None
    for fd in fds:
        if error is None:
            try:
                os.fsync(fd)
            except OSError as e:
                error = e
        try:
            os.close(fd)
        except OSError as e:
            if error is None:
                error = e
    if error is not None:
        raise error


try:
    from warren.codec._speedups import fsync_and_close, write_and_dup
except ImportError:
    write_and_dup, fsync_and_close = write_and_dup_py, fsync_and_close_py
