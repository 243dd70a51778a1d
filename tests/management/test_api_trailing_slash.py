"""One trailing "/" on an HTTP API path (issue 36's small differences): RabbitMQ's management
plugin routes with cowboy, whose router drops a trailing empty path segment, so
``DELETE /api/vhosts/NAME/`` deletes the vhost; Warren answered 404. The same steps run against
Warren and against the session's private RabbitMQ node (where rabbitmq-server is installed) over
real HTTP, and each must give the same answers.
"""

from __future__ import annotations

import pytest

from tests.conftest import EXTERNAL_URL
from tests.management.api_client import call, q

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")


def _steps(base: str, name: str) -> list:
    v = q(name)
    answers = [call(base, "PUT", f"/api/vhosts/{v}/", {})[0]]
    status, body, _ = call(base, "GET", f"/api/vhosts/{v}/")
    answers.append((status, (body or {}).get("name")))
    status, body, _ = call(base, "GET", f"/api/queues/{v}/")  # the vhost's queues, not a queue named ""
    answers.append((status, body))
    status, body, _ = call(base, "GET", "/api/vhosts/")
    answers.append((status, name in [r["name"] for r in body or []]))
    answers.append(call(base, "DELETE", f"/api/vhosts/{v}/")[0])
    answers.append(call(base, "GET", f"/api/vhosts/{v}")[0])  # gone
    answers.append(call(base, "GET", "/api/vhosts//")[0])  # "//": an empty name, not a second trailing "/"
    return answers


@pytest.fixture(params=["warren", "rabbitmq"])
def base(request, broker) -> str:
    """The HTTP API of the session's Warren broker or of its private RabbitMQ node (skipped where
    rabbitmq-server is not installed, and under --workers: conftest.py, REFERENCE_ONLY_REASON)."""
    if request.param == "rabbitmq":
        return request.getfixturevalue("rabbitmq_node").http_url
    return broker.http_url


def test_one_trailing_slash_is_the_path_without_it(base, uid):
    name = f"slash-{uid}"
    # the same answers from both (RabbitMQ's were read from this test's run against it)
    assert _steps(base, name) == [201, (200, name), (200, []), (200, True), 204, 404, 404]
