"""A scripted AMQP 0-9-1 server on a thread, for what a real broker will not do on demand.

It answers the handshake, channel.open and confirm.select, counts basic.publish, and lets a
test decide what to send back after each publish (acks out of order, a nack, a channel close,
or nothing at all, to exercise the publisher's time-out). One connection, 127.0.0.1, an
ephemeral port; ``close()`` ends the thread within a second.
"""

from __future__ import annotations

import socket
import threading

from warren.codec.frames import FRAME_METHOD, FrameBuffer, method_frame
from warren.spec import amqp0_9_1 as spec

__all__ = ["FakeBroker"]


class FakeBroker:
    def __init__(self, on_publish=None) -> None:
        """``on_publish(n)`` -> list of methods to send on channel 1 after the n-th publish."""
        self.on_publish = on_publish or (lambda n: [])
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.port = self.listener.getsockname()[1]
        self.published = 0
        self.received: list = []  # methods the client sent, in order
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def close(self) -> None:
        self._stop = True
        self.listener.close()
        self.thread.join(5)

    def __enter__(self) -> FakeBroker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _serve(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        sock.settimeout(0.2)
        frames = FrameBuffer(0)
        header = b""
        with sock:
            while not self._stop:
                try:
                    data = sock.recv(1 << 16)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not data:
                    return
                if len(header) < 8:  # the protocol header, then frames
                    need = 8 - len(header)
                    header += data[:need]
                    data = data[need:]
                    if len(header) == 8:
                        sock.sendall(method_frame(0, spec.ConnectionStart(0, 9, {}, b"PLAIN", b"en_US").encode()))
                frames.compact()
                frames.feed(data)
                while (frame := frames.next_frame()) is not None:
                    ftype, channel, start, end = frame
                    if ftype != FRAME_METHOD:
                        continue
                    index = int.from_bytes(frames.buf[start:start + 4], "big")
                    method, _ = spec.METHODS[index].decode(frames.buf, start + 4)
                    self.received.append(method)
                    for ch, reply in self._answer(method, channel):
                        sock.sendall(method_frame(ch, reply.encode()))

    def _answer(self, method, channel: int):
        kind = type(method)
        if kind is spec.ConnectionStartOk:
            return [(0, spec.ConnectionTune(16, 131072, 0))]
        if kind is spec.ConnectionOpen:
            return [(0, spec.ConnectionOpenOk(""))]
        if kind is spec.ChannelOpen:
            return [(channel, spec.ChannelOpenOk())]
        if kind is spec.ConfirmSelect:
            return [(channel, spec.ConfirmSelectOk())]
        if kind is spec.ConnectionClose:
            return [(0, spec.ConnectionCloseOk())]
        if kind is spec.BasicPublish:
            self.published += 1
            return [(channel, m) for m in self.on_publish(self.published)]
        return []
