"""warren/store/node_file.py's hooks for files shared with a cluster (warren/cluster/shared_files.py
registers them), with a recording hook in place of etcd: what a change does in which order, that a
change etcd refused leaves the file as it was, that the loop's looks never wait on the cluster,
and that the watcher's writes are not sent back."""

from __future__ import annotations

import pytest

from warren.access.control import AccessControl
from warren.access.errors import AlreadyExists
from warren.store import node_file


class Hook:
    def __init__(self, refuse: bool = False) -> None:
        self.calls: list = []
        self.refuse = refuse

    def acquire(self) -> None:
        self.calls.append("acquire")

    def release(self) -> None:
        self.calls.append("release")

    def publish(self, data: bytes) -> None:
        self.calls.append(("publish", data))
        if self.refuse:
            raise RuntimeError("etcd has no quorum")


@pytest.fixture
def shared(tmp_path):
    path = tmp_path / "policies.json"

    def share(hook):
        node_file.share(path, hook)
        return hook

    try:
        yield path, share
    finally:
        node_file.unshare(path)


def test_a_change_takes_the_cluster_lock_around_its_read_and_publishes_before_the_file(shared):
    path, share = shared
    hook = share(Hook())
    with node_file.locked(path):
        assert hook.calls == ["acquire"]
        node_file.replace_durably(path, b"[]\n")
        assert path.read_bytes() == b"[]\n"
    assert hook.calls == ["acquire", ("publish", b"[]\n"), "release"]


def test_a_change_the_cluster_refused_leaves_the_file_as_it_was(shared):
    path, share = shared
    path.write_bytes(b"old\n")
    share(Hook(refuse=True))
    with pytest.raises(RuntimeError, match="no quorum"), node_file.locked(path):
        node_file.replace_durably(path, b"new\n")
    assert path.read_bytes() == b"old\n"


def test_the_loops_looks_and_the_watchers_writes_do_not_reach_the_cluster(shared):
    path, share = shared
    hook = share(Hook())
    with node_file.locked(path, wait=False) as got:
        assert got
    assert node_file.apply_shared(path, b"from another node\n", still_new=lambda: True)
    assert not node_file.apply_shared(path, b"from another node\n")  # the file holds it already
    assert not node_file.apply_shared(path, b"older\n", still_new=lambda: False)
    assert path.read_bytes() == b"from another node\n"
    assert hook.calls == []


def test_a_file_not_shared_costs_no_hook(tmp_path):
    path = tmp_path / "access.json"
    node_file.replace_durably(path, b"{}")
    with node_file.locked(path):
        pass
    assert path.read_bytes() == b"{}"


def test_a_vhost_read_again_inside_a_change_is_announced(tmp_path):
    """Another node's vhost, brought into the file by the cluster's lock, is made on this node
    even when this node's own change, made on top of it, is refused by the store."""
    path = tmp_path / "access.json"
    here = AccessControl(path, fsync=False)
    seen = []

    class Listener:
        def vhost_added(self, info):
            seen.append(("added", info.name))

        def vhost_deleted(self, name):
            seen.append(("deleted", name))

        def access_changed(self):
            pass

    here.listeners.append(Listener())
    other = AccessControl(path, fsync=False)  # another writer of the same file (a node, a worker)
    other.add_vhost("elsewhere")
    with pytest.raises(AlreadyExists):
        here.add_vhost("/")  # exists: refused, after the file was read again
    assert seen == [("added", "elsewhere")]
