"""A raw AMQP 1.0 client over a real socket, for what no well-behaved client sends: frames are
encoded with Warren's own codec (warren/codec/amqp1_0), read back with its frame reader."""

from __future__ import annotations

import socket
import time

from warren.codec.amqp1_0.frames import FrameReader, encode_frame, split_body
from warren.codec.amqp1_0.types import Symbol
from warren.spec import amqp1_0 as spec

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


class Raw10:
    def __init__(self, broker, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((broker.host, broker.port), timeout=timeout)
        self.port = self.sock.getsockname()[1]
        self.reader = FrameReader(1 << 24)
        self.timeout = timeout
        self.eof = False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, channel: int, performative, payload: bytes = b"", sasl: bool = False) -> None:
        self.sock.sendall(encode_frame(channel, performative, payload, 1 if sasl else 0))

    def _read(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            self.eof = True
        self.reader.feed(data)

    def header(self) -> bytes:
        while (h := self.reader.maybe_header()) is None:
            self._read()
            if self.eof:
                raise EOFError("closed before a protocol header")
        return h

    def next(self):
        """The next performative the broker sent (and its payload), skipping empty frames."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            frame = self.reader.maybe_frame()
            if frame is not None:
                if frame.body:
                    return split_body(frame.body)
                continue
            if self.eof:
                raise EOFError("the broker closed the socket")
            self._read()
        raise TimeoutError("no frame from the broker")

    def expect(self, kind):
        """Performatives up to the first of ``kind`` (which is returned); the others are kept."""
        self.skipped = []
        while True:
            p, payload = self.next()
            if type(p) is kind:
                return p
            self.skipped.append(p)

    def login(self, user: str = "guest", password: str = "guest", hostname: str | None = None):
        self.send_raw(SASL_HEADER)
        assert self.header() == SASL_HEADER
        self.expect(spec.SaslMechanisms)
        self.send(0, spec.SaslInit(mechanism=Symbol("PLAIN"), initial_response=f"\0{user}\0{password}".encode()), sasl=True)
        outcome = self.expect(spec.SaslOutcome)
        if outcome.code != 0:
            return outcome
        self.send_raw(AMQP_HEADER)
        assert self.header() == AMQP_HEADER
        self.send(0, spec.Open(container_id="raw10", hostname=hostname))
        return self.expect(spec.Open)

    def begin(self, channel: int = 0):
        self.send(channel, spec.Begin(next_outgoing_id=0, incoming_window=1000, outgoing_window=1000))
        return self.expect(spec.Begin)

    def attach_sender(self, channel: int, handle: int, address: str):
        """A link we send on; returns the broker's flow granting credit."""
        self.send(channel, spec.Attach(name=f"raw-{handle}", handle=handle, role=False,
                                       source=spec.Source(), target=spec.Target(address=address)))
        attach = self.expect(spec.Attach)
        assert attach.target is not None, self.expect(spec.Detach)
        return self.expect(spec.Flow)

    def attach_receiver(self, channel: int, handle: int, address: str):
        self.send(channel, spec.Attach(name=f"raw-{handle}", handle=handle, role=True,
                                       source=spec.Source(address=address), target=spec.Target()))
        return self.expect(spec.Attach)


def data_message(body: bytes) -> bytes:
    from warren.codec.amqp1_0.types import Described, ULong, encode
    return encode(Described(ULong(0x75), body))
