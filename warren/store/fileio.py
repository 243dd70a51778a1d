"""A group commit's writes in one call that lets the GIL go once.

``write_and_dup(writes, dup_fds)``: every ``(fd, octets)`` written whole, in order (a short write
or EINTR writes the rest), then each of ``dup_fds`` duplicated; returns the duplicates. On an
error nothing more is written, the duplicates already made are closed, OSError.

It runs on the event loop's thread (``QueueStore.sync_begin``: the writes only reach the page
cache) and, for a flush past the buffer threshold, wherever the store is appended to; the
fsyncs that follow are an ``FsyncWorker``'s (fsync_worker.py). Compiled in
warren/store/_fsync.c, beside the worker; ``write_and_dup_py`` is the same steps one system call at a time,
used without the extension and compared with it in tests/protocol/test_speedups.py.
"""

from __future__ import annotations

import os

__all__ = ["write_and_dup", "write_and_dup_py"]


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


try:
    from warren.store._fsync import write_and_dup
except ImportError:
    write_and_dup = write_and_dup_py
