"""Sessions and links of a server-side AMQP 1.0 connection (part 2 §2.5, §2.6): the bookkeeping.

A session (``Session``) is begun by the client on a channel; we answer on the same channel
number, and each link the client attaches is answered on the same handle number (the broker
never begins sessions or attaches links of its own, so the numbers are always free on our side).

Windows (§2.5.6): a transfer frame costs one unit of the receiver's incoming window. Ours is
``INCOMING_WINDOW`` transfer frames, given back with a session flow once half of it is used.
Theirs (``remote_incoming_window``) stops our deliveries at 0 until their next flow.

Credit (§2.6.7): on a link we send on, ``credit`` deliveries may go out, each one adding 1 to
``delivery_count``; the client's flow says ``delivery-count + link-credit`` is how far it lets us
go. ``drain``: once nothing more is available, the credit left is spent at once (the
delivery-count advances past it) and a flow says so. On a link the client sends on, we grant
``LINK_CREDIT`` and top it up when half is used, each time when our output is next written (the
connection's ``_flush_grants``): a transfer beyond what was granted by then is
``amqp:link:transfer-limit-exceeded``.

Sequence numbers (delivery-id, transfer-id, delivery-count) are 32-bit serial numbers (RFC 1982):
they wrap, and ``serial_add``/``serial_diff`` compute with them.
"""

from __future__ import annotations

__all__ = ["Session", "Link", "INCOMING_WINDOW", "OUTGOING_WINDOW", "LINK_CREDIT", "HANDLE_MAX", "serial_add",
           "serial_diff"]

INCOMING_WINDOW = 8192  # transfer frames the client may send before our next session flow
OUTGOING_WINDOW = 0xFFFFFFFF - 1  # we never hold back on our side of the window (§2.5.6 "outgoing-window")
LINK_CREDIT = 256  # messages a client's sender may send before we top its credit up (RabbitMQ: 128..170)
HANDLE_MAX = 1023  # links per session (RabbitMQ's handle-max is 255)
_MASK = 0xFFFFFFFF


def serial_add(a: int, b: int) -> int:
    return (a + b) & _MASK


def serial_diff(a: int, b: int) -> int:
    """a - b as a signed distance between two 32-bit serial numbers."""
    d = (a - b) & _MASK
    return d - (1 << 32) if d & 0x80000000 else d


class Link:
    """One attached link; ``sending`` is True when the broker sends on it (the client receives)."""

    __slots__ = ("handle", "name", "sending", "attach", "delivery_count", "credit", "drain", "detached",
                 "partial", "partial_id", "partial_tag", "partial_settled", "context", "granted")

    def __init__(self, handle: int, name: str, sending: bool, attach) -> None:
        self.handle = handle
        self.name = name
        self.sending = sending
        self.attach = attach  # the client's attach
        # sending: the deliveries we sent (our delivery-count) and the credit left;
        # receiving: the client's delivery-count as we count it and the credit we granted
        self.delivery_count = 0
        self.credit = 0
        self.drain = False
        self.detached = False  # we sent detach and wait for the client's: its transfers are dropped
        # a transfer of several frames being assembled (receiving links)
        self.partial: bytearray | None = None
        self.partial_id = 0
        self.partial_tag = b""
        self.partial_settled = False
        self.context = None  # the adapter's state of the link (its consumer, its destination)
        self.granted = False  # receiving: our first flow (its credit) went out


class Session:
    __slots__ = ("channel", "links", "next_incoming_id", "incoming_window", "next_outgoing_id",
                 "remote_incoming_window", "remote_outgoing_window", "next_delivery_id", "ending", "handle_max")

    def __init__(self, channel: int, begin) -> None:
        self.channel = channel
        self.links: dict[int, Link] = {}
        self.next_incoming_id = begin.next_outgoing_id  # the transfer-id of the client's next transfer frame
        self.incoming_window = INCOMING_WINDOW
        self.next_outgoing_id = 0  # our next transfer frame's id
        self.remote_incoming_window = begin.incoming_window
        self.remote_outgoing_window = begin.outgoing_window
        self.next_delivery_id = 0
        self.ending = False  # we sent end (an error): frames on the channel are dropped until its end
        self.handle_max = min(HANDLE_MAX, begin.handle_max if begin.handle_max is not None else HANDLE_MAX)

    def link_credit(self, link: Link, flow) -> None:
        """The client's flow about a link we send on (§2.6.7): the credit it allows now."""
        their_count = flow.delivery_count if flow.delivery_count is not None else 0
        # what the client allows minus what we sent that its count does not include yet (a
        # credit of 0xFFFFFFFF is a large number, not -1; a count from the future is ignored)
        in_flight = max(0, serial_diff(link.delivery_count, their_count))
        link.credit = max(0, (flow.link_credit or 0) - in_flight)
        link.drain = bool(flow.drain)

    def window_from(self, flow) -> None:
        """The client's session flow: how many transfer frames it takes before the next one."""
        next_incoming = flow.next_incoming_id if flow.next_incoming_id is not None else 0
        self.remote_incoming_window = max(0, serial_diff(serial_add(next_incoming, flow.incoming_window),
                                                         self.next_outgoing_id))
        self.remote_outgoing_window = flow.outgoing_window
