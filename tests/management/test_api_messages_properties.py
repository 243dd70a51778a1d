"""Properties of a message published over HTTP (warren.management.api.messages) are held to what
AMQP publishers are held to at the edge (issue 16): nothing the AMQP side would refuse is stored."""

from __future__ import annotations

import pytest

from warren.codec.properties import properties_error
from warren.management.api.common import ApiError
from warren.management.api.messages import properties_from_json


def nested(depth: int) -> dict:
    top = cur = {}
    for _ in range(depth - 1):
        cur["a"] = {}
        cur = cur["a"]
    return top


def test_ordinary_headers_are_encoded_well_formed():
    encoded = properties_from_json({"headers": {"x": 1, "y": [1, "two"], "z": nested(99)}, "delivery_mode": 2})
    assert properties_error(encoded) is None


@pytest.mark.parametrize("depth", [101, 2000])
def test_headers_nested_past_the_limit_are_a_bad_request_not_a_crash(depth):
    with pytest.raises(ApiError) as ei:
        properties_from_json({"headers": {"k": nested(depth)}})
    assert ei.value.status_code == 400 and "properties cannot be encoded" in ei.value.text
