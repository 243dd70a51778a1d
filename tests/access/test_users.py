"""Users and the password login check."""

import pytest

from warren.access import AccessControl, AlreadyExists, Invalid, LoginRefused, NotFound, User, passwords
from warren.access.users import is_loopback, normalize_tags


def refusal(a, name, password, host="127.0.0.1") -> str:
    with pytest.raises(LoginRefused) as e:
        a.authenticate(name, password, host)
    return e.value.reason


def test_each_refusal_says_why():
    a = AccessControl()
    a.add_user("bob", "pw")
    a.add_user("nopass")
    assert refusal(a, "nobody", "x") == LoginRefused.UNKNOWN_USER
    assert refusal(a, "bob", "x") == LoginRefused.WRONG_PASSWORD
    assert refusal(a, "nopass", "") == LoginRefused.NO_PASSWORD
    assert refusal(a, "guest", "guest", "192.0.2.7") == LoginRefused.LOOPBACK_ONLY
    assert a.authenticate("bob", "pw", "192.0.2.7").name == "bob"
    assert a.authenticate("guest", "guest", "::1").name == "guest"


def test_loopback_addresses():
    for host in ("127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "localhost"):
        assert is_loopback(host), host
    for host in ("192.0.2.1", "::ffff:192.0.2.1", "", None, "example.com"):
        assert not is_loopback(host), host


def test_password_changes_and_clearing():
    a = AccessControl()
    a.add_user("bob", "one", tags="management")
    a.change_password("bob", "two")
    assert refusal(a, "bob", "one") == LoginRefused.WRONG_PASSWORD
    assert a.authenticate("bob", "two", "127.0.0.1").tags == ("management",)
    a.clear_password("bob")
    assert refusal(a, "bob", "two") == LoginRefused.NO_PASSWORD


def test_users_imported_with_any_rabbitmq_hash_log_in():
    a = AccessControl()
    for i, algorithm in enumerate((passwords.SHA256, passwords.SHA512, passwords.MD5)):
        a.put_user(f"u{i}", password_hash=passwords.hash_password("pw", algorithm), hashing_algorithm=algorithm)
        assert a.authenticate(f"u{i}", "pw", "127.0.0.1").hashing_algorithm == algorithm
    with pytest.raises(Invalid):
        a.put_user("bad", password_hash="abc", hashing_algorithm=passwords.SHA256)
    with pytest.raises(Invalid):
        a.put_user("bad", password="x", hashing_algorithm="sha3")


def test_tags_are_kept_as_rabbitmq_keeps_them():
    assert normalize_tags("administrator, monitoring,,custom") == ("administrator", "monitoring", "custom")
    assert normalize_tags(["impersonator", "impersonator"]) == ("impersonator",)
    a = AccessControl()
    a.add_user("bob", "pw", tags=["impersonator", "whatever-else"])
    u = a.user("bob")
    assert u.is_impersonator and not u.is_administrator and u.has_tag("whatever-else")
    a.set_user_tags("bob", "")
    assert a.user("bob").tags == ()


def test_definitions_form_round_trips():
    u = User("bob", passwords.hash_password("pw"), passwords.SHA256, ("management",))
    d = u.to_json()
    assert d["tags"] == ["management"] and d["hashing_algorithm"] == passwords.SHA256
    assert User.from_json(d) == u
    assert User.from_json({"name": "x", "password_hash": "", "tags": "a,b"}).tags == ("a", "b")


def test_adding_twice_and_deleting_a_stranger_are_refused():
    a = AccessControl()
    with pytest.raises(AlreadyExists):
        a.add_user("guest", "x")
    with pytest.raises(NotFound):
        a.delete_user("nobody")
    with pytest.raises(NotFound):
        a.change_password("nobody", "x")
    a.delete_user("guest")
    assert a.users() == [] and a.permissions() == []
