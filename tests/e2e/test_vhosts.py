"""Virtual hosts at run time: created and used, deleted with their connections (320) and
objects, limits max-connections (530) and max-queues (406); against a private Warren and the
session's private RabbitMQ node (``rabbitmq_node``) with the same expectations. Warren only: ``--vhost`` across restarts and a
vhost created at run time under ``--workers``."""

from __future__ import annotations

import hashlib
import uuid

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker, ProbableAccessDeniedError

from tests.conftest import launch_broker, skip_under_cluster
from tests.e2e.access_admin import WarrenAdmin, admin  # noqa: F401 (admin: a fixture)
from tests.e2e.helpers import wait_until


def guest(admin, vhost: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        admin.host, admin.port, vhost, pika.PlainCredentials("guest", "guest"), connection_attempts=1,
        socket_timeout=10, stack_timeout=15))


def new_vhost(admin) -> str:
    name = f"h6-vh-{uuid.uuid4().hex[:8]}"
    admin.add_vhost(name)
    admin.set_permissions("guest", name, ".*", ".*", ".*")
    admin.settle()
    return name


def test_a_vhost_created_at_run_time_serves_at_once(admin):
    if admin.__class__.__name__ == "WarrenAdmin":
        skip_under_cluster("makes its vhosts in the data folder's access.json from outside (access_admin.WarrenAdmin): node n1, where the queues go, never sees them (a cluster's vhosts and users are etcd's)")
    vhost = new_vhost(admin)
    with guest(admin, vhost) as c:
        ch = c.channel()
        ch.queue_declare("q", durable=True)
        ch.basic_publish("", "q", b"hello")
        assert wait_until(lambda: ch.basic_get("q", auto_ack=True)[2] == b"hello", 5)


def test_deleting_a_vhost_closes_its_connections_and_removes_its_objects(admin):
    if admin.__class__.__name__ == "WarrenAdmin":
        skip_under_cluster("makes its vhosts in the data folder's access.json from outside (access_admin.WarrenAdmin): node n1, where the queues go, never sees them (a cluster's vhosts and users are etcd's)")
    vhost = new_vhost(admin)
    c = guest(admin, vhost)
    ch = c.channel()
    ch.exchange_declare("x", "fanout", durable=True)
    ch.queue_declare("q", durable=True)
    ch.queue_bind("q", "x")
    ch.basic_publish("x", "", b"m", pika.BasicProperties(delivery_mode=2))
    digest = hashlib.sha256(f"{vhost}\0q".encode()).hexdigest()[:32]  # Durability.queue_dir
    if isinstance(admin, WarrenAdmin):
        assert list(admin.broker.data_dir.rglob(digest))
    admin.delete_vhost(vhost)
    closed = []

    def gone() -> bool:
        try:
            c.process_data_events(0.1)
        except ConnectionClosedByBroker as e:
            closed.append(e)
            return True
        return False
    assert wait_until(gone, timeout=10, interval=0)
    # RabbitMQ 3.10 says "is deleted", or "is down" when its vhost process stops first (a race)
    texts = {f"CONNECTION_FORCED - vhost '{vhost}' is deleted"}
    if not isinstance(admin, WarrenAdmin):
        texts.add(f"CONNECTION_FORCED - vhost '{vhost}' is down")
    assert closed[0].reply_code == 320 and closed[0].reply_text in texts
    with pytest.raises(ProbableAccessDeniedError, match=f"vhost {vhost} not found"):
        guest(admin, vhost)
    # every process has seen the deletion in access.json (under --worker-mode queues every worker
    # serves the vhost: one that looked only after the re-add below would keep its objects)
    admin.settle()
    if isinstance(admin, WarrenAdmin):  # the queue's stored messages went with it
        assert not list(admin.broker.data_dir.rglob(digest))
    admin.add_vhost(vhost)  # the same name again: nothing of the old one is left
    admin.set_permissions("guest", vhost, ".*", ".*", ".*")
    admin.settle()
    with guest(admin, vhost) as c2:
        ch2 = c2.channel()
        with pytest.raises(ChannelClosedByBroker, match="NOT_FOUND - no queue 'q'"):
            ch2.queue_declare("q", passive=True)
        ch2 = c2.channel()
        with pytest.raises(ChannelClosedByBroker, match="NOT_FOUND - no exchange 'x'"):
            ch2.exchange_declare("x", passive=True)


def test_max_connections_refuses_at_open(admin):
    vhost = new_vhost(admin)
    admin.set_vhost_limit(vhost, "max-connections", 1)
    admin.settle()
    with guest(admin, vhost):
        with pytest.raises(ProbableAccessDeniedError) as e:
            guest(admin, vhost)
        assert (f"NOT_ALLOWED - access to vhost '{vhost}' refused for user 'guest': connection limit (1) is reached"
                in str(e.value))
    admin.set_vhost_limit(vhost, "max-connections", -1)  # -1 = unlimited
    admin.settle()
    with guest(admin, vhost), guest(admin, vhost):
        pass


def test_max_queues_refuses_a_new_queue_at_declare(admin):
    if admin.__class__.__name__ == "WarrenAdmin":
        skip_under_cluster("makes its vhosts in the data folder's access.json from outside (access_admin.WarrenAdmin): node n1, where the queues go, never sees them (a cluster's vhosts and users are etcd's)")
    vhost = new_vhost(admin)
    admin.set_vhost_limit(vhost, "max-queues", 1)
    admin.settle()
    with guest(admin, vhost) as c:
        ch = c.channel()
        ch.queue_declare("first")
        ch.queue_declare("first")  # redeclaring an existing queue is no new queue
        with pytest.raises(ChannelClosedByBroker) as e:
            ch.queue_declare("second")
        assert (e.value.reply_code, e.value.reply_text) == (
            406, f"PRECONDITION_FAILED - cannot declare queue 'second': queue limit in vhost '{vhost}' (1) is reached")


def test_vhost_flag_makes_sure_it_exists_and_the_vhost_outlives_the_flag(tmp_path):
    b = launch_broker(tmp_path, "--vhost", "/", "--vhost", "team")
    try:
        with guest(b, "team") as c:
            c.channel().queue_declare("kept", durable=True)
    finally:
        b.stop()
    b = launch_broker(tmp_path)  # no --vhost team this time: it stays, with its queue
    try:
        with guest(b, "team") as c:
            assert c.channel().queue_declare("kept", passive=True).method.queue == "kept"
    finally:
        b.stop()


def test_workers_serve_a_vhost_created_at_run_time(tmp_path):
    b = launch_broker(tmp_path, "--workers", "2")
    try:
        admin = WarrenAdmin(b)
        names = [f"h6-w-{i}" for i in range(4)]  # four names: both workers get some, by hash
        for name in names:
            admin.add_vhost(name)
            admin.set_permissions("guest", name, ".*", ".*", ".*")

        def served(name) -> bool:
            try:
                with guest(b, name) as c:
                    ch = c.channel()
                    ch.queue_declare("q")
                    ch.basic_publish("", "q", name.encode())
                    return ch.basic_get("q", auto_ack=True)[2] == name.encode()
            except ProbableAccessDeniedError:
                return False  # the worker has not read access.json yet
        for name in names:
            assert wait_until(lambda: served(name), timeout=15, interval=0.2), name
    finally:
        b.stop()
