"""AMQP URIs parsed as RabbitMQ parses them (warren/federation/uri.py)."""

import pytest

from warren.federation.uri import UriError, parse_uri, parse_uris


@pytest.mark.parametrize("uri,host,port,user,password,vhost", [
    ("amqp://", "", 5672, None, None, "/"),
    ("amqp:///%2F", "", 5672, None, None, "/"),
    ("amqp:///vh", "", 5672, None, None, "vh"),
    ("amqp://h", "h", 5672, None, None, "/"),
    ("amqp://h/", "h", 5672, None, None, ""),
    ("amqps://h", "h", 5671, None, None, "/"),
    ("amqp://u:p%40ss@h:1234/v%2Fh", "h", 1234, "u", "p@ss", "v/h"),
    ("amqp://u@h", "h", 5672, "u", "", "/"),
    ("amqp://[::1]:99/x", "::1", 99, None, None, "x"),
])
def test_parts(uri, host, port, user, password, vhost):
    ep = parse_uri(uri)
    assert (ep.host, ep.port, ep.username, ep.password, ep.vhost) == (host, port, user, password, vhost)
    assert ep.local == (host == "")


def test_query_parameters_and_redaction():
    ep = parse_uri("amqp://guest:secret@h:1/v?heartbeat=5&connection_timeout=2500&auth_mechanism=amqplain")
    assert ep.heartbeat == 5 and ep.connect_timeout == 2.5 and ep.mechanism == "AMQPLAIN"
    assert ep.redacted == "amqp://h:1/v?heartbeat=5&connection_timeout=2500&auth_mechanism=amqplain"
    assert "secret" not in parse_uri("amqp://u:secret@h").redacted


@pytest.mark.parametrize("bad,word", [
    ("http://h", "scheme"), ("amqp://h:99999", "port"), ("amqp://h/a/b", "one path segment"),
    ("amqp://h?bogus=1", "unknown URI parameter"), ("amqp://h?heartbeat=x", "heartbeat"),
    ("amqp://h?auth_mechanism=external", "auth_mechanism"), ("amqp://h?cacertfile=/x", "amqps"),
    ("amqp://u:secret@h:0", "port"),
])
def test_refused(bad, word):
    with pytest.raises(UriError) as e:
        parse_uri(bad)
    assert word in str(e.value)
    assert "secret" not in str(e.value), "a password never reaches an error message"


def test_lists():
    assert [e.host for e in parse_uris(["amqp://a", "amqp://b"])] == ["a", "b"]
    with pytest.raises(UriError):
        parse_uris([])
    with pytest.raises(UriError):
        parse_uris(5)
