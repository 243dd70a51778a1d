"""Certificates for the TLS tests, made on the spot with trustme (a throwaway CA per test).

``Pki(folder)`` writes a CA, a server certificate for ``localhost`` and 127.0.0.1, and on
request client certificates (a CN, SANs, expired); ``broker_args`` gives the ``warren serve``
options that use them, ``client_context`` an ``ssl.SSLContext`` as a client would build it.
"""

from __future__ import annotations

import datetime
import ssl
import uuid
from dataclasses import dataclass
from pathlib import Path

import trustme

SERVER_NAME = "localhost"


@dataclass
class ClientCert:
    cert: Path
    key: Path


class Pki:
    def __init__(self, folder: Path, *, server_expired: bool = False) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA(organization_name="Warren test CA")
        tag = uuid.uuid4().hex[:8]
        self.ca_file = self.folder / f"ca-{tag}.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        self.server_cert = self.folder / f"server-{tag}.pem"
        self.server_key = self.folder / f"server-{tag}.key"
        self.write_server_cert(expired=server_expired)

    def write_server_cert(self, *, expired: bool = False, ca: trustme.CA | None = None) -> None:
        """(Re)write the server's certificate and key files, signed by ``ca`` (default: ours)."""
        ca = ca or self.ca
        kw = _expired() if expired else {}
        leaf = ca.issue_cert(SERVER_NAME, "127.0.0.1", common_name="warren-test-server", **kw)
        # write the key first, then the certificate: a reload between the two sees a mismatch and
        # keeps the old pair (which the tests rely on not happening: they signal after both)
        leaf.private_key_pem.write_to_path(str(self.server_key))
        with open(self.server_cert, "wb") as f:
            for pem in leaf.cert_chain_pems:
                f.write(pem.bytes())

    def client(self, common_name: str | None = None, *sans: str, expired: bool = False,
               ca: trustme.CA | None = None, organization: str | None = None, unit: str | None = None) -> ClientCert:
        """A client certificate (signed by ``ca``, default ours) with that CN, SANs, O and OU."""
        ca = ca or self.ca
        kw = _expired() if expired else {}
        if not sans:
            sans = ("client.invalid",)  # trustme needs one identity; a DNS name that names nobody
        leaf = ca.issue_cert(*sans, common_name=common_name, organization_name=organization,
                             organization_unit_name=unit, **kw)
        tag = uuid.uuid4().hex[:8]
        cert, key = self.folder / f"client-{tag}.pem", self.folder / f"client-{tag}.key"
        leaf.private_key_pem.write_to_path(str(key))
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        return ClientCert(cert, key)

    def broker_args(self, verify: str = "require", *extra: str) -> list[str]:
        """``warren serve`` options: an ephemeral TLS port with our files and ``verify``."""
        return ["--tls-port", "0", "--tls-cert", str(self.server_cert), "--tls-key", str(self.server_key),
                "--tls-ca", str(self.ca_file), "--tls-verify", verify, *extra]

    def client_context(self, client: ClientCert | None = None, cafile: Path | None = None) -> ssl.SSLContext:
        """What a client builds: trust ``cafile`` (default: our CA), present ``client`` if given."""
        ctx = ssl.create_default_context(cafile=str(cafile or self.ca_file))
        if client is not None:
            ctx.load_cert_chain(str(client.cert), str(client.key))
        return ctx


def _expired() -> dict:
    now = datetime.datetime.now(datetime.timezone.utc)
    return {"not_before": now - datetime.timedelta(days=30), "not_after": now - datetime.timedelta(days=1)}
