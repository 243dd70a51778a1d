"""warren/config.py's own rules (the TLS settings' values live there, applied by warren/server/tls.py;
the settings' sources, flags, file and environment, are tests/test_config_sources.py)."""

import ssl

import pytest

from warren.config import parse_tls_versions


def test_versions_are_tls_1_2_and_1_3_only():
    assert parse_tls_versions(("tlsv1.2", "tlsv1.3")) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    assert parse_tls_versions(["TLSv1.3"]) == (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    for bad in (("tlsv1.1",), ("tlsv1.2", "sslv3"), ()):
        with pytest.raises(ValueError):
            parse_tls_versions(bad)
