"""The stream reader asks a stream's HTTP API again while it answers 503 (in a cluster, the node
asked cannot reach the stream's leader while another is elected: warren/management/api/streams.py),
for a bounded time, and fails at once on any other error. No Spark session: the reader's helper is
called with an API object that answers as the HTTP client does."""

from __future__ import annotations

import pytest

from warren.spark.read import stream as stream_module
from warren.spark.read.http_api import StreamApiError
from warren.spark.read.stream import WarrenStreamReader


class Answers:
    """An API whose ``info`` raises the given errors in turn, then answers."""

    def __init__(self, *errors: StreamApiError) -> None:
        self.errors = list(errors)
        self.asked = 0

    def info(self, name: str):
        self.asked += 1
        if self.errors:
            raise self.errors.pop(0)
        return f"info of {name}"


def test_a_503_is_asked_again_until_the_stream_answers(monkeypatch):
    monkeypatch.setattr(stream_module, "UNAVAILABLE_POLL_S", 0.0)
    api = Answers(StreamApiError("no leader", 503), StreamApiError("no leader", 503))
    assert WarrenStreamReader._info(api, "s") == "info of s"
    assert api.asked == 3


def test_another_error_fails_at_once_and_a_503_past_the_bound_too(monkeypatch):
    api = Answers(StreamApiError("gone", 404))
    with pytest.raises(StreamApiError) as raised:
        WarrenStreamReader._info(api, "s")
    assert raised.value.status == 404 and api.asked == 1
    monkeypatch.setattr(stream_module, "UNAVAILABLE_POLL_S", 0.0)
    monkeypatch.setattr(stream_module, "UNAVAILABLE_WAIT_S", -1.0)  # past its bound at once
    api = Answers(*[StreamApiError("no leader", 503)] * 5)
    with pytest.raises(StreamApiError) as raised:
        WarrenStreamReader._info(api, "s")
    assert raised.value.status == 503 and api.asked == 1
