"""A group commit's writes (warren/store/fileio.py): the compiled ``write_and_dup``
(warren/store/_fsync.c) against its Python twin."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings, strategies as st

from warren.store import fileio

needs_file_io = pytest.mark.skipif(fileio.write_and_dup is fileio.write_and_dup_py,
                                   reason="warren.store._fsync is not built (setup.py)")


def _io_outcome(call):
    try:
        return call(), None
    except OSError as e:
        return None, e.errno


@needs_file_io
@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.binary(max_size=3000)), max_size=6), st.lists(st.integers(0, 2),
       max_size=3))
def test_write_and_dup_writes_what_its_python_twin_writes(tmp_path_factory, writes, dups):
    """The same octets in the same files, in order, and working duplicates of the same files."""
    results = []
    for twin in (fileio.write_and_dup, fileio.write_and_dup_py):
        d = tmp_path_factory.mktemp("io")
        fds = [os.open(d / f"f{i}", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644) for i in range(3)]
        try:
            got = twin([(fds[i], bytearray(data)) for i, data in writes], [fds[i] for i in dups])
            assert len(got) == len(dups) and not set(got) & set(fds)
            for fd, i in zip(got, dups):  # each duplicate is the file it duplicates
                assert os.fstat(fd).st_ino == os.fstat(fds[i]).st_ino
            for fd in got:
                os.close(fd)
        finally:
            for fd in fds:
                os.close(fd)
        results.append([(d / f"f{i}").read_bytes() for i in range(3)])
    assert results[0] == results[1] == [b"".join(data for i, data in writes if i == k) for k in range(3)]


@needs_file_io
def test_file_io_twins_fail_alike_and_leave_no_descriptor_open(tmp_path):
    """A closed descriptor: the same OSError from both, and no duplicate left open (the fsyncs'
    twins: tests/store/test_fsync_worker.py)."""
    good = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    bad = 1_000_000  # a descriptor number nothing has open (nor gets: lower ones are taken first)
    try:
        open_before = set(os.listdir("/proc/self/fd"))
        for twin in (fileio.write_and_dup, fileio.write_and_dup_py):
            assert _io_outcome(lambda: twin([(bad, b"x")], [good])) == (None, 9)  # EBADF, nothing duplicated
            assert _io_outcome(lambda: twin([(good, b"y")], [good, bad])) == (None, 9)  # the first duplicate closed
            assert set(os.listdir("/proc/self/fd")) == open_before
        assert (tmp_path / "f").read_bytes() == b"yy"  # written before the failed dup, both times
        with pytest.raises(TypeError):
            fileio.write_and_dup([(good, b"x", 1)], [])
    finally:
        os.close(good)
