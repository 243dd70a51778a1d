"""RabbitMQ's password hashes: made, checked, and one taken from RabbitMQ 3.10 itself."""

import base64
import hashlib

import pytest

from warren.access import passwords

# GET /api/users/<name> on RabbitMQ 3.10.8 for a user added with `rabbitmqctl add_user <name> pw`
RABBITMQ_SHA256_OF_PW = "oIk44k9futamKgWb280Moq0NxbaFfFU0fChUMqxknQmq6kh6"


def test_a_hash_made_by_rabbitmq_checks():
    assert passwords.check_password("pw", RABBITMQ_SHA256_OF_PW, passwords.SHA256)
    assert not passwords.check_password("pW", RABBITMQ_SHA256_OF_PW, passwords.SHA256)


@pytest.mark.parametrize("algorithm,digest", [
    (passwords.SHA256, hashlib.sha256), (passwords.SHA512, hashlib.sha512), (passwords.MD5, hashlib.md5)])
def test_the_layout_is_salt_then_digest_of_salt_and_password(algorithm, digest):
    salt = b"\x01\x02\x03\x04"
    h = passwords.hash_password("sécret", algorithm, salt=salt)
    assert base64.b64decode(h) == salt + digest(salt + "sécret".encode()).digest()
    assert passwords.check_password("sécret", h, algorithm)
    assert not passwords.check_password("secret", h, algorithm)
    assert passwords.is_valid_hash(h, algorithm)


def test_new_hashes_are_salted_at_random():
    a, b = passwords.hash_password("x"), passwords.hash_password("x")
    assert a != b and passwords.check_password("x", a) and passwords.check_password("x", b)


@pytest.mark.parametrize("bad", ["", "not base64!", base64.b64encode(b"short").decode(),
                                 base64.b64encode(b"\0" * 40).decode()])
def test_empty_or_malformed_hashes_never_check(bad):
    assert not passwords.check_password("", bad)
    assert not passwords.check_password("x", bad)


def test_the_algorithm_of_a_hash_matters():
    h = passwords.hash_password("x", passwords.SHA512)
    assert not passwords.check_password("x", h, passwords.SHA256)
    assert not passwords.is_valid_hash(h, passwords.SHA256)
    with pytest.raises(ValueError, match="unknown hashing algorithm"):
        passwords.hash_password("x", "rabbit_password_hashing_rot13")
