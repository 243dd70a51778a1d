"""warren/server/relay.py and the relayed hand-over record (warren/server/handoff.py).

The relay is driven as the supervisor drives it, over real sockets in one event loop: the
client's side is a TCP connection (the relay does not care that the supervisor's is TLS), the
worker's side one end of a Unix socket pair whose other end the test reads and writes as a
worker would. The whole path through TLS and worker processes is tested with real clients in
tests/e2e/test_tls_clients.py."""

from __future__ import annotations

import asyncio
import socket

import pytest

from warren.server.handoff_records import RELAYED, Relayed, pack_relayed, unpack_handoff, unpack_relayed
from warren.server.relay import Relay
from warren.server.tls import CertificateLogin, TlsSession


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


class ClientSide(asyncio.Protocol):
    """The supervisor's protocol on the client's connection, after connection.open (the Greeter's part)."""

    def __init__(self, worker_end: socket.socket, made: asyncio.Future) -> None:
        self.worker_end = worker_end
        self.made = made
        self.relay: Relay | None = None

    def connection_made(self, transport) -> None:
        self.relay = Relay(asyncio.get_running_loop(), transport)
        self.relay.start(self.worker_end)
        self.made.set_result(self)

    def data_received(self, data: bytes) -> None:
        self.relay.from_client(data)

    def pause_writing(self) -> None:
        self.relay.client_cannot_take_more()

    def resume_writing(self) -> None:
        self.relay.client_drained()

    def connection_lost(self, exc) -> None:
        self.relay.client_closed()


async def relayed():
    """(client reader, client writer, the worker's socket, the supervisor's ClientSide)."""
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    made = loop.create_future()
    server = await loop.create_server(lambda: ClientSide(ours, made), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    side = await made
    server.close()
    worker_reader, worker_writer = await asyncio.open_unix_connection(sock=theirs)
    return reader, writer, (worker_reader, worker_writer), side


async def read_exactly(reader, n: int) -> bytes:
    return await asyncio.wait_for(reader.readexactly(n), 10)


def test_octets_cross_both_ways_in_order_and_more_than_the_buffers_hold():
    async def main():
        reader, writer, (wr, ww), side = await relayed()
        writer.write(b"AMQP\x00\x00\x09\x01")
        assert await read_exactly(wr, 8) == b"AMQP\x00\x00\x09\x01"
        ww.write(b"answer")
        assert await read_exactly(reader, 6) == b"answer"
        # 8 MiB each way while the other side does not read: both sides pause and resume
        big = bytes(range(256)) * (32 * 1024)
        writer.write(big)
        ww.write(big[::-1])
        got_worker, got_client = await asyncio.gather(read_exactly(wr, len(big)), read_exactly(reader, len(big)))
        assert got_worker == big and got_client == big[::-1]
        await asyncio.gather(writer.drain(), ww.drain())
        writer.close()
        ww.close()
    run(main())


def test_the_worker_closing_closes_the_client_after_its_last_words():
    async def main():
        reader, writer, (wr, ww), side = await relayed()
        ww.write(b"connection.close")
        ww.close()
        assert await asyncio.wait_for(reader.read(), 10) == b"connection.close"  # then EOF
        writer.close()
    run(main())


def test_the_client_closing_gives_the_worker_what_it_sent_then_eof():
    async def main():
        reader, writer, (wr, ww), side = await relayed()
        writer.write(b"close-ok")
        await writer.drain()
        writer.close()
        assert await asyncio.wait_for(wr.read(), 10) == b"close-ok"
        ww.close()
    run(main())


def test_what_the_client_sends_before_the_worker_side_is_up_waits_for_it():
    async def main():
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

        class Transport:  # a client transport that records what the relay writes to it
            def __init__(self):
                self.closing = False

            def is_closing(self):
                return self.closing

            def close(self):
                self.closing = True

            def abort(self):
                self.closing = True
        relay = Relay(loop, Transport())
        relay.from_client(b"early ")  # before start: kept
        relay.start(ours)
        relay.from_client(b"and later")
        theirs.setblocking(False)
        got = b""
        for _ in range(200):
            try:
                got += theirs.recv(100)
            except BlockingIOError:
                await asyncio.sleep(0.01)
            if got == b"early and later":
                break
        assert got == b"early and later"
        relay.client_closed()
        await asyncio.sleep(0.05)
        assert theirs.recv(100) == b""  # EOF: the client went
        theirs.close()
    run(main())


@pytest.mark.parametrize("login", [None, CertificateLogin("carol"), CertificateLogin(None, "no common name")])
def test_a_relayed_record_carries_the_addresses_and_the_tls_session(login):
    relayed = Relayed(("10.0.0.7", 50123), ("10.0.0.1", 5671), TlsSession("TLSv1.3", "TLS_AES_256_GCM_SHA384", login))
    record = pack_relayed(relayed, "vh/ä", b"AMQP\x00\x00\x09\x01start-ok")
    assert record[:1] == RELAYED
    back, inner = unpack_relayed(record)
    assert (back.peer, back.local, back.tls) == (relayed.peer, relayed.local, relayed.tls)
    assert back.tls.mechanisms.endswith(b"EXTERNAL") == (login is not None)
    assert unpack_handoff(inner) == (("10.0.0.7", 50123), "vh/ä", b"AMQP\x00\x00\x09\x01start-ok")
    with pytest.raises((ValueError, KeyError)):
        unpack_relayed(RELAYED + b"\x00\x00\x00\x02{}" + inner)
