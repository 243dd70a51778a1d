"""A blocking publisher that keeps a window of publishes in flight under publisher confirms.

Waiting for each confirm before the next publish (pika's BlockingConnection) costs a round
trip per message. Here ``publish`` encodes the frames into the link's buffer and returns at
once while fewer than ``window`` publishes are unconfirmed and less than ``FLUSH_BYTES`` are
buffered; otherwise it sends and reads confirms until both are below their marks again.
``finish`` waits for the last confirms. Measured figures are in docs/spark.md.

Delivery tags are the publish sequence numbers (1, 2, ...). A confirm covers one tag or, with
``multiple``, every tag up to it; confirms may come out of order (RabbitMQ confirms a message
once every queue it went to has it), so tags confirmed ahead of the oldest one wait in
``_early`` until the oldest is confirmed. Unconfirmed tags are kept as runs of consecutive tags
(``[first, last, time of the first]``), not one entry per publish: a batch of publishes costs
one run, and a ``multiple`` confirm releases whole runs. Any failure ends the publisher: the first
``basic.nack``, a ``basic.return`` (mandatory publishes the broker could not route), the broker
closing the channel or the connection, or a publish left unconfirmed for ``confirm_timeout``
seconds raise a ``PublishError`` naming what happened; the caller (a Spark task) fails with it.
"""

from __future__ import annotations

import struct
import time
from collections import deque

from warren.codec.frames import FRAME_OVERHEAD
from warren.protocol.events import Content, Method
from warren.spark.amqp_link import AmqpLink, LinkError
from warren.spark.options import DEFAULT_CONFIRM_TIMEOUT, DEFAULT_CONFIRM_WINDOW
from warren.spec import amqp0_9_1 as spec

__all__ = ["ConfirmPublisher", "PublishError", "PublishNacked", "PublishReturned", "PublishTimeout",
           "DEFAULT_WINDOW", "DEFAULT_CONFIRM_TIMEOUT"]

DEFAULT_WINDOW = DEFAULT_CONFIRM_WINDOW
FLUSH_BYTES = 1 << 18  # send once this much is buffered, even with room in the window
# a run of unconfirmed tags takes further publishes for this long: its time (the first's) is
# then at most this much older than any of its tags', so a time-out comes at most this early
RUN_SPAN = 0.1

_frame_header = struct.Struct(">BHI")
_content_header = struct.Struct(">BHIHHQ")
_FRAME_END = b"\xce"


class PublishError(Exception):
    """Publishing failed; some messages may not have reached the broker."""


class PublishNacked(PublishError):
    pass


class PublishReturned(PublishError):
    pass


class PublishTimeout(PublishError):
    pass


class ConfirmPublisher:
    """Publishes on one channel in confirm mode with a bounded window (see module docstring)."""

    def __init__(self, url: str, window: int = DEFAULT_WINDOW, confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT,
                 connect_timeout: float = 10.0) -> None:
        if window < 1:
            raise ValueError("the confirm window must be at least 1")
        self.link = AmqpLink(url, connect_timeout)
        self.window = window
        self.confirm_timeout = confirm_timeout
        self.published = 0  # = the delivery tag of the last publish
        self.confirmed = 0
        self._pending: deque = deque()  # runs [first tag, last tag, monotonic time of the first], oldest first
        self._early: set[int] = set()  # tags confirmed while an older one is still pending
        self._method_frames: dict = {}  # (exchange, routing key, mandatory) -> encoded basic.publish frame
        self._body_max = 0
        self.failure: PublishError | None = None

    def open(self) -> ConfirmPublisher:
        try:
            self.link.open()
            self.link.call(spec.ConfirmSelect(False), spec.ConfirmSelectOk)
        except LinkError as e:
            self.link.close()
            raise PublishError(f"cannot start publishing to {self.link.address}: {e}") from e
        self._body_max = (self.link.conn.frame_max or 131072) - FRAME_OVERHEAD
        return self

    def close(self) -> None:
        self.link.close()

    def __enter__(self) -> ConfirmPublisher:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def unconfirmed(self) -> int:
        return self.published - self.confirmed

    # --- publishing --------------------------------------------------------------------------

    def publish(self, exchange: str, routing_key: str, properties: bytes, body: bytes, mandatory: bool = False) -> None:
        """Queue one publish; blocks only while the window is full or the buffer is large.

        ``properties`` is the encoded property list (flags + fields, ``BasicProperties.encode()``).
        """
        if self.failure is not None:
            raise self.failure
        key = (exchange, routing_key, mandatory)
        method = self._method_frames.get(key)
        if method is None:
            if len(self._method_frames) > 10_000:  # one entry per distinct routing key: keep it bounded
                self._method_frames.clear()
            method = self._method_frames[key] = self._encode_method(exchange, routing_key, mandatory)
        out = self.link.out
        out += method
        size = len(body)
        out += _content_header.pack(2, 1, 12 + len(properties), 60, 0, size)
        out += properties
        out += _FRAME_END
        if size <= self._body_max:
            if size:
                out += _frame_header.pack(3, 1, size)
                out += body
                out += _FRAME_END
        else:
            view = memoryview(body)
            for start in range(0, size, self._body_max):
                piece = view[start:start + self._body_max]
                out += _frame_header.pack(3, 1, len(piece))
                out += piece
                out += _FRAME_END
        self.published += 1
        self._add_pending(self.published, self.published)
        if self.published - self.confirmed >= self.window or len(out) >= FLUSH_BYTES:
            self._drive(lambda: self.published - self.confirmed < self.window and len(self.link.out) < FLUSH_BYTES)

    def publish_frames(self, frames, count: int) -> None:
        """Queue ``count`` whole publishes already encoded as frames on channel 1, back to back
        (``frames.batch_publishes``). Waits first while they would take the window past its size
        (a chunk larger than the window goes alone)."""
        if self.failure is not None:
            raise self.failure
        if count <= 0:
            return
        limit = max(self.window - count, 0)
        if self.published - self.confirmed > limit:
            self._drive(lambda: self.published - self.confirmed <= limit)
        self.link.out += frames
        first = self.published + 1
        self.published += count
        self._add_pending(first, self.published)
        if len(self.link.out) >= FLUSH_BYTES:
            self._drive(lambda: len(self.link.out) < FLUSH_BYTES)

    def _add_pending(self, first: int, last: int) -> None:
        now = time.monotonic()
        pending = self._pending
        if pending:
            run = pending[-1]
            if run[1] == first - 1 and now - run[2] < RUN_SPAN:
                run[1] = last
                return
        pending.append([first, last, now])

    @property
    def body_max(self) -> int:
        """The largest body one frame carries on this connection."""
        return self._body_max

    def _encode_method(self, exchange: str, routing_key: str, mandatory: bool) -> bytes:
        payload = spec.BasicPublish(0, exchange, routing_key, mandatory, False).encode()
        return _frame_header.pack(1, 1, len(payload)) + payload + _FRAME_END

    def finish(self) -> int:
        """Wait until every publish is confirmed; returns how many were. Raises PublishError."""
        if self.failure is not None:
            raise self.failure
        self._drive(lambda: not self.link.out and self.confirmed == self.published)
        return self.confirmed

    # --- confirms ----------------------------------------------------------------------------

    def _drive(self, done) -> None:
        """Move bytes until ``done()``; raise on a failure or the oldest publish's time-out."""
        link = self.link
        try:
            while not done():
                link.pump(0.5)
                if link.events:
                    self._take_events()
                if self.failure is not None:
                    raise self.failure
                if self._pending and time.monotonic() - self._pending[0][2] > self.confirm_timeout:
                    raise self._fail(PublishTimeout(self._timeout_text()))
        except LinkError as e:
            if self.failure is None:
                self._take_events()  # a nack or return that came just before a close says more
            if self.failure is not None:
                raise self.failure from e
            raise self._fail(PublishError(f"publishing to {link.address} failed with {self.unconfirmed} "
                                          f"publish(es) unconfirmed: {e}")) from e

    def _timeout_text(self) -> str:
        tag = self._pending[0][0]
        text = (f"publish #{tag} to {self.link.address} was not confirmed within {self.confirm_timeout:g}s "
                f"({self.unconfirmed} unconfirmed)")
        if self.link.blocked:
            text += f"; the broker is blocking publishers: {self.link.blocked}"
        return text

    def _fail(self, error: PublishError) -> PublishError:
        if self.failure is None:
            self.failure = error
        return self.failure

    def _take_events(self) -> None:
        events = self.link.events
        while events:
            event = events.popleft()
            method = event.method if isinstance(event, (Method, Content)) else None
            kind = type(method)
            if kind is spec.BasicAck:
                self._confirm(method.delivery_tag, method.multiple)
            elif kind is spec.BasicNack:
                count = self._confirm(method.delivery_tag, method.multiple)
                self._fail(PublishNacked(
                    f"the broker refused (basic.nack) {count} publish(es) up to #{method.delivery_tag} "
                    f"of {self.published} (a queue at its x-max-length with x-overflow=reject-publish, "
                    f"or an internal error)"))
            elif kind is spec.BasicReturn:
                self._fail(PublishReturned(
                    f"the broker returned a mandatory publish: {method.reply_code} {method.reply_text} "
                    f"(exchange {method.exchange!r}, routing key {method.routing_key!r}): no queue is bound for it"))

    def _confirm(self, tag: int, multiple: bool) -> int:
        """Mark ``tag`` (and every older one when ``multiple``) confirmed; returns how many were new."""
        pending, early = self._pending, self._early
        before = self.confirmed
        if multiple:
            while pending and pending[0][0] <= tag:
                run = pending[0]
                upto = min(run[1], tag)
                count = upto - run[0] + 1
                if early:  # confirmed already, one by one: counted then
                    inside = [t for t in early if run[0] <= t <= upto]
                    early.difference_update(inside)
                    count -= len(inside)
                self.confirmed += count
                if upto == run[1]:
                    pending.popleft()
                else:
                    run[0] = upto + 1
        elif pending and pending[0][0] == tag:
            self._release_oldest()
            self.confirmed += 1
        elif tag not in early and pending and pending[0][0] < tag <= self.published:
            early.add(tag)
            self.confirmed += 1
        while pending and pending[0][0] in early:  # the oldest is confirmed: release those behind it
            early.discard(pending[0][0])
            self._release_oldest()
        return self.confirmed - before

    def _release_oldest(self) -> None:
        run = self._pending[0]
        if run[0] == run[1]:
            self._pending.popleft()
        else:
            run[0] += 1
