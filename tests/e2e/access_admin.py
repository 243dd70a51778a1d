"""Setting up users, vhosts and permissions on the broker under test, the same calls for both:

* ``RabbitAdmin``: the session's private RabbitMQ node (the ``rabbitmq_node`` fixture,
  tests/rabbitmq_node.py), through its management HTTP API;
* ``WarrenAdmin``: a private Warren, through its access store (``warren.access.AccessControl``
  on the broker's ``access.json``). The broker re-reads the file within ``POLICY_CHECK``
  seconds (the way ``--workers`` processes share it), so ``settle()`` waits for that.

Names are unique per test module; RabbitMQ's objects are deleted afterwards (``cleanup``): the
node serves the whole session.

The ``admin`` fixture (params ``warren`` and ``rabbitmq``) gives either, for tests that run the
same steps against both; a test module takes it with ``from tests.e2e.access_admin import admin``.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.conftest import launch_broker
from warren.access import AccessControl


@pytest.fixture(params=["warren", "rabbitmq"])
def admin(request, tmp_path):
    """A ``WarrenAdmin`` of a private Warren (stopped after the test) or a ``RabbitAdmin`` of the
    session's RabbitMQ node (what the test made there is deleted after it)."""
    if request.param == "rabbitmq":
        a = RabbitAdmin(request.getfixturevalue("rabbitmq_node"))
        try:
            yield a
        finally:
            a.cleanup()
        return
    b = launch_broker(tmp_path)
    try:
        yield WarrenAdmin(b)
    finally:
        b.stop()


class RabbitAdmin:
    def __init__(self, node) -> None:
        self.node = node
        self.host, self.port, self.api = node.host, node.amqp_port, node.http_url
        self.users: list[str] = []
        self.vhosts: list[str] = []

    def _call(self, method: str, path: str, body=None):
        req = urllib.request.Request(self.api + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as r:
            data = r.read()
        return json.loads(data) if data else None

    @staticmethod
    def _q(name: str) -> str:
        return urllib.parse.quote(name, safe="")

    def add_user(self, name: str, password: str | None, tags: str = "") -> None:
        body = {"tags": tags}
        body.update({"password": password} if password is not None else {"password_hash": ""})
        self._call("PUT", f"/api/users/{self._q(name)}", body)
        self.users.append(name)

    def delete_user(self, name: str) -> None:
        self._call("DELETE", f"/api/users/{self._q(name)}")

    def add_vhost(self, name: str) -> None:
        self._call("PUT", f"/api/vhosts/{self._q(name)}", {})
        self.vhosts.append(name)

    def delete_vhost(self, name: str) -> None:
        self._call("DELETE", f"/api/vhosts/{self._q(name)}")

    def set_permissions(self, user: str, vhost: str, configure: str, write: str, read: str) -> None:
        self._call("PUT", f"/api/permissions/{self._q(vhost)}/{self._q(user)}",
                   {"configure": configure, "write": write, "read": read})

    def clear_permissions(self, user: str, vhost: str) -> None:
        self._call("DELETE", f"/api/permissions/{self._q(vhost)}/{self._q(user)}")

    def set_topic_permissions(self, user: str, vhost: str, exchange: str, write: str, read: str) -> None:
        self._call("PUT", f"/api/topic-permissions/{self._q(vhost)}/{self._q(user)}",
                   {"exchange": exchange, "write": write, "read": read})

    def set_vhost_limit(self, vhost: str, name: str, value: int) -> None:
        self._call("PUT", f"/api/vhost-limits/{self._q(vhost)}/{name}", {"value": value})

    def clear_vhost_limit(self, vhost: str, name: str) -> None:
        self._call("DELETE", f"/api/vhost-limits/{self._q(vhost)}/{name}")

    def settle(self) -> None:
        pass  # RabbitMQ applies each call before answering

    def cleanup(self) -> None:
        for name in self.users:
            try:
                self.delete_user(name)
            except urllib.error.HTTPError:
                pass
        for name in self.vhosts:
            try:
                self.delete_vhost(name)
            except urllib.error.HTTPError:
                pass


class WarrenAdmin:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.host, self.port = broker.host, broker.port
        self.access = AccessControl.in_data_dir(broker.data_dir)

    def add_user(self, name: str, password: str | None, tags: str = "") -> None:
        self.access.put_user(name, password, tags=tags)

    def delete_user(self, name: str) -> None:
        self.access.delete_user(name)

    def add_vhost(self, name: str) -> None:
        self.access.add_vhost(name)

    def delete_vhost(self, name: str) -> None:
        self.access.delete_vhost(name)

    def set_permissions(self, user: str, vhost: str, configure: str, write: str, read: str) -> None:
        self.access.set_permissions(user, vhost, configure, write, read)

    def clear_permissions(self, user: str, vhost: str) -> None:
        self.access.clear_permissions(user, vhost)

    def set_topic_permissions(self, user: str, vhost: str, exchange: str, write: str, read: str) -> None:
        self.access.set_topic_permissions(user, vhost, exchange, write, read)

    def set_vhost_limit(self, vhost: str, name: str, value: int) -> None:
        self.access.set_vhost_limit(vhost, name, value)

    def clear_vhost_limit(self, vhost: str, name: str) -> None:
        self.access.clear_vhost_limit(vhost, name)

    def settle(self) -> None:
        """Wait until the broker has re-read access.json (Broker.tick looks every POLICY_CHECK s)."""
        time.sleep(1.2)

    def cleanup(self) -> None:
        pass  # the private broker and its data folder go with the test
