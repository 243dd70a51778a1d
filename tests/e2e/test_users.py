"""Users: password logins and their refusals (same texts as RabbitMQ 3.10), passwordless
users, RabbitMQ's imported hashes, the loopback-only guest, the default user of a new data
folder, and a user change that survives kill -9 of the broker. pika and aio-pika. The login
tests run against a private Warren and the session's private RabbitMQ node (``rabbitmq_node``)."""

from __future__ import annotations

import signal
import socket
import uuid

import aio_pika
import pika
import pytest
from pika.exceptions import ProbableAuthenticationError

from tests.conftest import launch_broker, skip_under_cluster
from tests.e2e.access_admin import WarrenAdmin, admin  # noqa: F401 (admin: a fixture)
from warren.access import passwords

LOGIN_REFUSED = ("ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
                 "For details see the broker logfile.")


def connect(host, port, user, password, vhost="/") -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host, port, vhost, pika.PlainCredentials(user, password), connection_attempts=1,
        socket_timeout=10, stack_timeout=15))


def new_user(admin, password: str | None = "pw", tags: str = "") -> str:
    name = f"h6-login-{uuid.uuid4().hex[:8]}"
    admin.add_user(name, password, tags=tags)
    admin.set_permissions(name, "/", "^h6-login-", "^h6-login-", "^h6-login-")
    admin.settle()
    return name


def test_a_new_user_logs_in_and_a_wrong_password_is_refused(admin):
    user = new_user(admin)
    with connect(admin.host, admin.port, user, "pw") as c:
        c.channel().queue_declare(f"{user}-q", exclusive=True)
    with pytest.raises(ProbableAuthenticationError) as e:
        connect(admin.host, admin.port, user, "wrong")
    assert LOGIN_REFUSED in str(e.value)
    if isinstance(admin, WarrenAdmin):  # the log says why; the client is not told
        assert f"login refused for user '{user}': wrong password" in admin.broker.log()


def test_a_passwordless_user_cannot_log_in_by_password(admin):
    user = new_user(admin, password=None)
    for attempt in ("", "pw"):
        with pytest.raises(ProbableAuthenticationError) as e:
            connect(admin.host, admin.port, user, attempt)
        assert LOGIN_REFUSED in str(e.value)


async def test_aio_pika_logs_in_and_is_refused_as_the_permissions_say(admin):
    user = new_user(admin)
    conn = await aio_pika.connect(host=admin.host, port=admin.port, login=user, password="pw", timeout=10)
    try:
        ch = await conn.channel()
        await ch.declare_queue(f"{user}-ok", exclusive=True)
        ch = await conn.channel()
        with pytest.raises(aio_pika.exceptions.ChannelClosed) as e:
            await ch.declare_queue("not-mine", exclusive=True)
        assert f"ACCESS_REFUSED - access to queue 'not-mine' in vhost '/' refused for user '{user}'" in str(e.value)
    finally:
        await conn.close()
    with pytest.raises(aio_pika.exceptions.ProbableAuthenticationError):
        await aio_pika.connect(host=admin.host, port=admin.port, login=user, password="nope", timeout=10)


@pytest.mark.parametrize("algorithm", [passwords.SHA256, passwords.SHA512, passwords.MD5])
def test_users_carrying_rabbitmq_hashes_log_in(tmp_path, algorithm):
    b = launch_broker(tmp_path)
    try:
        admin = WarrenAdmin(b)
        admin.access.put_user("imported", password_hash=passwords.hash_password("pw", algorithm),
                              hashing_algorithm=algorithm)
        admin.set_permissions("imported", "/", ".*", ".*", ".*")
        admin.settle()
        with connect(b.host, b.port, "imported", "pw"):
            pass
    finally:
        b.stop()


def _non_loopback_address() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: only picks the outgoing address
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def test_guest_may_only_log_in_from_loopback(tmp_path):
    addr = _non_loopback_address()
    if addr is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    b = launch_broker(tmp_path, "--host", "0.0.0.0")
    try:
        admin = WarrenAdmin(b)
        user = new_user(admin)
        with connect(addr, b.port, user, "pw"):  # other users may come from anywhere
            pass
        with pytest.raises(ProbableAuthenticationError) as e:
            connect(addr, b.port, "guest", "guest")
        assert LOGIN_REFUSED in str(e.value)
        assert "login refused for user 'guest': user may only connect via localhost" in b.log()
        with connect("127.0.0.1", b.port, "guest", "guest"):
            pass
    finally:
        b.stop()


def test_the_default_user_replaces_guest_in_a_new_data_folder(tmp_path):
    b = launch_broker(tmp_path, "--default-user", "admin", "--default-pass", "s3cret")
    try:
        with connect(b.host, b.port, "admin", "s3cret") as c:
            c.channel().queue_declare("admin-q")
        with pytest.raises(ProbableAuthenticationError):
            connect(b.host, b.port, "guest", "guest")
    finally:
        b.stop()
    # an existing data folder is never re-seeded, whatever the options say now
    b = launch_broker(tmp_path, "--default-user", "other", "--default-pass", "x", data_dir=b.data_dir)
    try:
        with pytest.raises(ProbableAuthenticationError):
            connect(b.host, b.port, "other", "x")
        with connect(b.host, b.port, "admin", "s3cret"):
            pass
    finally:
        b.stop()


def test_the_default_user_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("WARREN_DEFAULT_USER", "envadmin")
    monkeypatch.setenv("WARREN_DEFAULT_PASS", "envpass")
    b = launch_broker(tmp_path)
    try:
        with connect(b.host, b.port, "envadmin", "envpass"):
            pass
    finally:
        b.stop()


def test_an_acknowledged_user_change_survives_kill_9_of_the_broker(tmp_path):
    skip_under_cluster("changes users in the data folder's access.json from outside (WarrenAdmin), which a "
                       "cluster's node does not write to etcd: the restarted cluster takes etcd's users")
    b = launch_broker(tmp_path)
    admin = WarrenAdmin(b)
    user = new_user(admin)
    admin.access.delete_user("guest")  # acknowledged: durable once the call returned
    b.signal(signal.SIGKILL)
    b.wait()
    b = launch_broker(tmp_path, data_dir=b.data_dir)
    try:
        with connect(b.host, b.port, user, "pw"):
            pass
        with pytest.raises(ProbableAuthenticationError):
            connect(b.host, b.port, "guest", "guest")
    finally:
        b.stop()
