"""The durable access store: seeding, persistence, other processes' changes, kill -9."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from warren.access import FILE_NAME, AccessControl, AlreadyExists, Invalid, NotFound


def test_a_new_data_folder_gets_guest_and_an_old_one_is_never_reseeded(tmp_path):
    a = AccessControl.in_data_dir(tmp_path)
    assert a.created
    assert [u.name for u in a.users()] == ["guest"] and a.user("guest").is_administrator
    assert [v.name for v in a.vhosts()] == ["/"] and a.vhost("/").description == "Default virtual host"
    p = a.permission("guest", "/")
    assert (p.configure, p.write, p.read) == (".*", ".*", ".*")
    a.delete_user("guest")
    b = AccessControl.in_data_dir(tmp_path)
    assert not b.created and b.users() == []


def test_the_default_user_replaces_guest(tmp_path):
    a = AccessControl.in_data_dir(tmp_path, default_user="admin", default_pass="s3cret")
    assert [u.name for u in a.users()] == ["admin"]
    assert a.authenticate("admin", "s3cret", "192.0.2.9").name == "admin"  # not loopback-only
    assert a.permission("admin", "/") is not None


def test_every_kind_of_change_survives_a_reopen(tmp_path):
    a = AccessControl.in_data_dir(tmp_path)
    a.add_user("bob", "pw", tags="monitoring")
    a.add_vhost("v1", description="team one", tags=["prod"], default_queue_type="quorum")
    a.set_permissions("bob", "v1", "^c", "^w", "^r")
    a.set_topic_permissions("bob", "v1", "amq.topic", "^{username}", "")
    a.set_vhost_limits("v1", {"max-connections": 10, "max-queues": -1})
    b = AccessControl.in_data_dir(tmp_path)
    assert b.authenticate("bob", "pw", "127.0.0.1").tags == ("monitoring",)
    v = b.vhost("v1")
    assert (v.description, v.tags, v.default_queue_type) == ("team one", ("prod",), "quorum")
    assert v.limit("max-connections") == 10 and v.limit("max-queues") is None
    assert b.permission("bob", "v1").configure == "^c"
    assert b.topic_permissions(user="bob")[0].write == "^{username}"
    assert json.loads((tmp_path / FILE_NAME).read_text())["format"] == "warren-access/1"
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()


def test_deleting_a_vhost_takes_its_permissions_and_limits(tmp_path):
    a = AccessControl.in_data_dir(tmp_path)
    a.add_vhost("v1")
    a.set_permissions("guest", "v1", ".*", ".*", ".*")
    a.set_topic_permissions("guest", "v1", "t", ".*", ".*")
    a.set_vhost_limit("v1", "max-queues", 3)
    a.delete_vhost("v1")
    assert a.vhost("v1") is None and a.permissions(vhost="v1") == [] and a.topic_permissions(vhost="v1") == []
    assert a.vhost_limits() == {}
    with pytest.raises(NotFound):
        a.delete_vhost("v1")


def test_refusals(tmp_path):
    a = AccessControl.in_data_dir(tmp_path)
    before = (tmp_path / FILE_NAME).read_bytes()
    with pytest.raises(AlreadyExists):
        a.add_vhost("/")
    with pytest.raises(NotFound):
        a.set_permissions("nobody", "/", ".*", ".*", ".*")
    with pytest.raises(NotFound):
        a.set_permissions("guest", "nowhere", ".*", ".*", ".*")
    with pytest.raises(Invalid):
        a.set_vhost_limits("/", {"max-channels": 1})
    with pytest.raises(Invalid):
        a.set_vhost_limits("/", {"max-queues": "10"})
    with pytest.raises(Invalid):
        a.add_vhost("")
    with pytest.raises(NotFound):
        a.clear_vhost_limit("/", "max-queues")
    assert (tmp_path / FILE_NAME).read_bytes() == before  # a refused change writes nothing
    assert a.version == 0


def test_put_vhost_keeps_what_it_is_not_told(tmp_path):
    a = AccessControl.in_data_dir(tmp_path)
    info, created = a.put_vhost("v", description="d", tags="a,b")
    assert created and info.tags == ("a", "b")
    a.set_vhost_limit("v", "max-connections", 2)
    info, created = a.put_vhost("v", default_queue_type="stream")
    assert not created and info.description == "d" and info.limits == {"max-connections": 2}
    assert info.default_queue_type == "stream"


def test_put_user_sets_limits_over_the_old_ones_in_one_durable_change(tmp_path):
    a = AccessControl.in_data_dir(tmp_path)
    a.put_user("u", "pw", limits={"max-connections": 3})
    a.put_user("u", "pw2", limits={"max-channels": 7})  # merged, as RabbitMQ's import and PUT
    a.put_user("u", "pw3")  # no limits given: kept
    assert a.user_limits("u") == {"u": {"max-connections": 3, "max-channels": 7}}
    before, version = (tmp_path / FILE_NAME).read_bytes(), a.version
    for bad in ({"bogus": 1}, {"max-channels": "3"}, 5):
        with pytest.raises(Invalid):
            a.put_user("u", "other", tags="administrator", limits=bad)
    assert (tmp_path / FILE_NAME).read_bytes() == before and a.version == version  # nothing changed
    assert a.user("u").tags == () and a.authenticate("u", "pw3", "127.0.0.1").name == "u"
    assert AccessControl.in_data_dir(tmp_path).user_limits("u") == {"u": {"max-connections": 3, "max-channels": 7}}


def test_listeners_hear_of_vhosts_including_other_processes_changes(tmp_path):
    heard = []

    class Listener:
        def vhost_added(self, info):
            heard.append(("added", info.name))

        def vhost_deleted(self, name):
            heard.append(("deleted", name))

        def access_changed(self):
            pass

    a = AccessControl.in_data_dir(tmp_path)
    a.listeners.append(Listener())
    a.add_vhost("mine")
    other = AccessControl.in_data_dir(tmp_path)  # another process's view of the same file
    other.add_vhost("theirs")
    other.delete_vhost("mine")
    v = a.version
    assert a.refresh() and a.version > v
    assert heard == [("added", "mine"), ("deleted", "mine"), ("added", "theirs")]
    assert not a.refresh()  # nothing new
    a.add_user("carol", "pw")  # a writer starts from the latest file: nothing of theirs is lost
    assert {v.name for v in AccessControl.in_data_dir(tmp_path).vhosts()} == {"/", "theirs"}


WRITER = """
import sys
from warren.access import AccessControl
a = AccessControl.in_data_dir(sys.argv[1])
for i in range(10**6):
    a.add_user(f"u{i}", "pw")
    print(i, flush=True)
"""


def test_an_acknowledged_change_survives_kill_9(tmp_path):
    """A process adds users one by one and says so after each call returns; killed -9 at some
    point, every user it announced is there and the file is whole."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    acknowledged = -1
    deadline = time.monotonic() + 30
    try:
        while acknowledged < 40 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acknowledged = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert acknowledged >= 40, "the writer did not get going"
    a = AccessControl.in_data_dir(tmp_path)
    names = {u.name for u in a.users()}
    assert all(f"u{i}" in names for i in range(acknowledged + 1))
    assert not a.created
