"""The files a node's processes share (warren/store/node_file.py): stamps, the lock, durable replace."""

from __future__ import annotations

import os
import stat
import threading
import time

from warren.store.node_file import file_stamp, locked, replace_durably


def test_a_replaced_file_gets_another_stamp_and_a_missing_one_none(tmp_path):
    path = tmp_path / "f.json"
    assert file_stamp(path) is None
    replace_durably(path, b"[1]")
    first = file_stamp(path)
    assert first is not None and path.read_bytes() == b"[1]"
    replace_durably(path, b"[1]")  # the same octets: a new inode all the same
    assert file_stamp(path) != first
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]  # no temporary file left


def test_replace_keeps_the_mode_asked_for(tmp_path):
    path = tmp_path / "sub" / "access.json"
    replace_durably(path, b"{}", mode=0o600, fsync=False)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_the_lock_holds_others_until_it_is_let_go(tmp_path):
    path = tmp_path / "f.json"
    order: list[str] = []
    with locked(path):
        def other() -> None:
            with locked(path):
                order.append("other")

        t = threading.Thread(target=other)
        t.start()
        time.sleep(0.2)
        order.append("first")
    t.join(5)
    assert order == ["first", "other"]
