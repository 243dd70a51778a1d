"""Password hashes in RabbitMQ's format, so users move between RabbitMQ and Warren with their hashes.

RabbitMQ keeps ``password_hash`` = base64(salt + H(salt + UTF-8 password)) with a 4-octet random
salt, and names H in the user's ``hashing_algorithm``:

* ``rabbit_password_hashing_sha256`` (RabbitMQ's default since 3.6, and Warren's for new hashes),
* ``rabbit_password_hashing_sha512``,
* ``rabbit_password_hashing_md5`` (users carried over from RabbitMQ before 3.6).

An empty ``password_hash`` means "no password": such a user cannot log in by password at all
(RabbitMQ's passwordless users, for certificate login).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

__all__ = ["SHA256", "SHA512", "MD5", "ALGORITHMS", "DEFAULT_ALGORITHM", "SALT_SIZE",
           "hash_password", "check_password", "is_valid_hash"]

SHA256 = "rabbit_password_hashing_sha256"
SHA512 = "rabbit_password_hashing_sha512"
MD5 = "rabbit_password_hashing_md5"
ALGORITHMS = {SHA256: hashlib.sha256, SHA512: hashlib.sha512, MD5: hashlib.md5}
DEFAULT_ALGORITHM = SHA256
SALT_SIZE = 4


def hash_password(password: str, algorithm: str = DEFAULT_ALGORITHM, salt: bytes | None = None) -> str:
    """``password``'s hash in RabbitMQ's format (a fresh random salt unless one is given)."""
    digest = _digest_of(algorithm)
    salt = os.urandom(SALT_SIZE) if salt is None else salt
    return base64.b64encode(salt + digest(salt + password.encode("utf-8")).digest()).decode("ascii")


def check_password(password: str, password_hash: str, algorithm: str = DEFAULT_ALGORITHM) -> bool:
    """True if ``password`` is the one ``password_hash`` was made from. Never true for an empty
    hash (no password set) or a malformed one; compared in constant time."""
    if not password_hash:
        return False
    digest = _digest_of(algorithm)
    try:
        raw = base64.b64decode(password_hash, validate=True)
    except (binascii.Error, ValueError):
        return False
    size = digest().digest_size
    if len(raw) != SALT_SIZE + size:
        return False
    salt, expected = raw[:SALT_SIZE], raw[SALT_SIZE:]
    return hmac.compare_digest(digest(salt + password.encode("utf-8")).digest(), expected)


def is_valid_hash(password_hash: str, algorithm: str) -> bool:
    """True if ``password_hash`` is empty or well-formed for ``algorithm`` (base64 of salt + digest)."""
    if algorithm not in ALGORITHMS:
        return False
    if not password_hash:
        return True
    try:
        raw = base64.b64decode(password_hash, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(raw) == SALT_SIZE + ALGORITHMS[algorithm]().digest_size


def _digest_of(algorithm: str):
    try:
        return ALGORITHMS[algorithm]
    except KeyError:
        raise ValueError(f"unknown hashing algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})") from None
