"""RabbitMQ's permission matching and the cached per-connection checker."""

import pytest

from warren.access import AccessControl, Invalid
from warren.access.permissions import (
    CONFIGURE, READ, WRITE, expand_topic_pattern, resource_matches, topic_matches, validate_regex,
)


@pytest.mark.parametrize("pattern,name,expected", [
    (".*", "anything", True), (".*", "", True),
    ("", "anything", False), ("", "", False),       # empty = nothing (RabbitMQ special-cases it)
    ("^$", "", True), ("^$", "q", False),
    ("q", "my-queue", True),                        # unanchored, as re:run
    ("^q", "my-queue", False), ("^my", "my-queue", True),
    ("^amq\\.gen", "amq.gen-abc", True),
])
def test_resource_patterns_match_unanchored(pattern, name, expected):
    assert resource_matches(pattern, name) is expected


def test_topic_patterns_expand_variables_and_read_empty_as_nothing_but_the_empty_key():
    assert expand_topic_pattern("^{username}\\.{vhost}", "bob", "v1") == "^bob\\.v1"
    assert topic_matches("^{username}\\.", "bob.x", "bob", "/")
    assert not topic_matches("^{username}\\.", "alice.x", "bob", "/")
    assert topic_matches("", "", "bob", "/") and not topic_matches("", "x", "bob", "/")


def test_a_bad_regex_is_refused_with_its_name():
    with pytest.raises(Invalid, match="not a valid regular expression"):
        validate_regex("(", "configure permission")
    a = AccessControl()
    with pytest.raises(Invalid):
        a.set_permissions("guest", "/", "(", ".*", ".*")


def test_connection_access_follows_changes_at_once():
    a = AccessControl()
    a.add_user("bob", "pw")
    a.set_permissions("bob", "/", "^c", "^w", "^r")
    acc = a.connection_access("bob", "/")
    assert acc.vhost_allowed()
    assert acc.allowed(CONFIGURE, "queue", "c1") and not acc.allowed(CONFIGURE, "queue", "w1")
    assert acc.allowed(WRITE, "exchange", "w1") and not acc.allowed(WRITE, "exchange", "")
    a.set_permissions("bob", "/", "^c", "^w|^amq\\.default$", "")
    assert acc.allowed(WRITE, "exchange", "")       # the default exchange is "amq.default"
    assert not acc.allowed(READ, "queue", "r1")
    a.clear_permissions("bob", "/")
    assert not acc.vhost_allowed() and not acc.allowed(CONFIGURE, "queue", "c1")


def test_topic_permissions_apply_only_where_set():
    a = AccessControl()
    a.add_user("bob", "pw")
    a.set_permissions("bob", "/", ".*", ".*", ".*")
    acc = a.connection_access("bob", "/")
    assert acc.topic_allowed(WRITE, "amq.topic", "anything")
    a.set_topic_permissions("bob", "/", "amq.topic", "^{username}\\.", "^public\\.")
    assert acc.has_topic_permission("amq.topic") and not acc.has_topic_permission("other")
    assert acc.topic_allowed(WRITE, "amq.topic", "bob.x")
    assert not acc.topic_allowed(WRITE, "amq.topic", "alice.x")
    assert acc.topic_allowed(READ, "amq.topic", "public.news") and not acc.topic_allowed(READ, "amq.topic", "bob.x")
    assert acc.topic_allowed(WRITE, "other", "alice.x")
    a.clear_topic_permissions("bob", "/", "amq.topic")
    assert acc.topic_allowed(WRITE, "amq.topic", "alice.x")


def test_a_deleted_user_is_refused_everything():
    a = AccessControl()
    a.add_user("bob", "pw")
    a.set_permissions("bob", "/", ".*", ".*", ".*")
    acc = a.connection_access("bob", "/")
    assert acc.allowed(READ, "queue", "q")
    a.delete_user("bob")
    assert not acc.allowed(READ, "queue", "q") and acc.user is None and a.permissions(user="bob") == []
