"""Who may do what through the management API (RabbitMQ's tags), its error answers, and changes
that are durable before they are answered (kill -9 right after)."""

from __future__ import annotations

import signal

import pytest

from tests.conftest import EXTERNAL_URL
from tests.management.api_client import call, q

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")


@pytest.fixture(scope="module")
def warren(tmp_path_factory):
    from tests.conftest import launch_broker
    b = launch_broker(tmp_path_factory.mktemp("apiauth"))
    yield b
    b.stop()


def api(b, method, path, body=None, **kw):
    return call(b.http_url, method, path, body, **kw)


def make_user(b, name, tags, vhost=None):
    assert api(b, "PUT", f"/api/users/{name}", {"password": "pw", "tags": tags})[0] in (201, 204)
    if vhost:
        assert api(b, "PUT", f"/api/permissions/{q(vhost)}/{name}",
                   {"configure": ".*", "write": ".*", "read": ".*"})[0] in (201, 204)


def test_errors_are_json(warren):
    status, body, headers = api(warren, "GET", "/api/overview", user=None)
    assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="RabbitMQ Management"'
    assert body["error"] == "not_authorized"
    assert api(warren, "GET", "/api/overview", password="wrong")[0] == 401
    assert api(warren, "GET", "/api/nope") == (404, {"error": "Object Not Found", "reason": "Not Found"},
                                               api(warren, "GET", "/api/nope")[2])
    status, body, headers = api(warren, "POST", "/api/overview", {})
    assert status == 405 and body["error"] == "Method Not Allowed" and "GET" in headers["Allow"]
    assert api(warren, "GET", "/api/queues/no-such-vhost")[1] == {"error": "not_found", "reason": "vhost_not_found"}
    assert api(warren, "PUT", "/api/permissions/%2F/nobody", {"configure": "", "write": "", "read": ""})[1] == {
        "error": "bad_request", "reason": "vhost_or_user_not_found"}


def test_tags(warren, uid):
    mine, other = f"mine-{uid}", f"other-{uid}"
    for vh in (mine, other):
        assert api(warren, "PUT", f"/api/vhosts/{vh}", {})[0] == 201
        assert api(warren, "PUT", f"/api/queues/{vh}/q-{vh}", {})[0] == 201
    make_user(warren, f"mgmt-{uid}", "management", mine)
    make_user(warren, f"mon-{uid}", "monitoring", mine)
    make_user(warren, f"pol-{uid}", "policymaker", mine)
    make_user(warren, f"none-{uid}", "", mine)
    as_ = lambda who, *a, **kw: api(warren, *a, user=f"{who}-{uid}", password="pw", **kw)  # noqa: E731

    assert as_("none", "GET", "/api/overview")[1] == {"error": "not_authorised", "reason": "Not management user"}
    # management: its own vhosts' objects only, nothing of the node's
    names = {i["name"] for i in as_("mgmt", "GET", "/api/queues")[1]}
    assert f"q-{mine}" in names and f"q-{other}" not in names
    assert as_("mgmt", "GET", f"/api/queues/{other}")[0] == 401
    assert as_("mgmt", "GET", "/api/users")[1]["reason"] == "Not administrator user"
    assert as_("mgmt", "GET", "/api/nodes")[1]["reason"] == "Not monitor user"
    assert as_("mgmt", "PUT", f"/api/policies/{mine}/p", {"pattern": ".*", "definition": {"max-length": 1}})[0] == 401
    assert as_("mgmt", "GET", "/api/whoami")[1] == {"name": f"mgmt-{uid}", "tags": ["management"]}
    # monitoring: every vhost's objects and the node, no changes to users or vhosts
    names = {i["name"] for i in as_("mon", "GET", "/api/queues")[1]}
    assert {f"q-{mine}", f"q-{other}"} <= names
    assert as_("mon", "GET", "/api/nodes")[0] == 200
    assert as_("mon", "PUT", f"/api/vhosts/x-{uid}", {})[0] == 401
    # policymaker: policies in its own vhosts
    assert as_("pol", "PUT", f"/api/policies/{mine}/p", {"pattern": "^zz", "definition": {"max-length": 1}})[0] == 201
    assert as_("pol", "PUT", f"/api/policies/{other}/p", {"pattern": "^zz", "definition": {"max-length": 1}})[0] == 401
    assert as_("pol", "DELETE", f"/api/policies/{mine}/p")[0] == 204
    # administrator: users, without-permissions, definitions
    make_user(warren, f"lonely-{uid}", "")
    assert f"lonely-{uid}" in {u["name"] for u in api(warren, "GET", "/api/users/without-permissions")[1]}
    for vh in (mine, other):
        assert api(warren, "DELETE", f"/api/vhosts/{vh}")[0] == 204
    for who in ("mgmt", "mon", "pol", "none", "lonely"):
        assert api(warren, "DELETE", f"/api/users/{who}-{uid}")[0] == 204


def test_changes_survive_kill_9(start_broker, uid):
    b = start_broker()
    assert api(b, "PUT", f"/api/vhosts/k-{uid}", {})[0] == 201
    assert api(b, "PUT", f"/api/users/k-{uid}", {"password": "pw", "tags": "management"})[0] == 201
    assert api(b, "PUT", f"/api/policies/k-{uid}/cap", {"pattern": "^q", "definition": {"max-length": 3},
                                                        "apply-to": "queues"})[0] == 201
    assert api(b, "PUT", f"/api/queues/k-{uid}/q1", {"durable": True})[0] == 201
    assert api(b, "PUT", f"/api/parameters/federation-upstream/k-{uid}/up", {"value": {"uri": "amqp://x"}})[0] == 201
    b.signal(signal.SIGKILL)
    b.wait()
    b2 = start_broker(data_dir=b.data_dir)
    assert api(b2, "GET", f"/api/vhosts/k-{uid}")[0] == 200
    assert api(b2, "GET", f"/api/users/k-{uid}")[1]["tags"] == ["management"]
    assert api(b2, "GET", f"/api/policies/k-{uid}/cap")[1]["definition"] == {"max-length": 3}
    assert api(b2, "GET", f"/api/queues/k-{uid}/q1")[1]["policy"] == "cap"
    assert api(b2, "GET", f"/api/parameters/federation-upstream/k-{uid}/up")[1]["value"] == {"uri": "amqp://x"}
