"""Session and link bookkeeping: serial numbers, the credit a client's flow allows, windows."""

import pytest

from warren.protocol.amqp1_0.session import Link, Session, serial_add, serial_diff
from warren.spec import amqp1_0 as spec


@pytest.mark.parametrize("a, b, diff", [(5, 3, 2), (3, 5, -2), (1, 0xFFFFFFFF, 2), (0xFFFFFFFF, 1, -2), (0, 0, 0)])
def test_serial_numbers_wrap(a, b, diff):
    assert serial_diff(a, b) == diff and serial_add(b, diff) == a


def session() -> Session:
    return Session(0, spec.Begin(next_outgoing_id=7, incoming_window=3, outgoing_window=9))


@pytest.mark.parametrize("ours, theirs, credit, want", [
    (0, 0, 10, 10),  # nothing in flight
    (4, 0, 10, 6),  # four sent that the client's count does not include yet
    (4, 4, 10, 10),
    (0, 0, 0xFFFFFFFF, 0xFFFFFFFF),  # all the credit there is: not -1
    (2, 0xFFFFFFFF, 5, 2),  # across the wrap: three in flight
    (0, 9, 5, 5),  # a count from the future: nothing in flight
])
def test_the_credit_a_flow_allows(ours, theirs, credit, want):
    s, link = session(), Link(0, "l", True, None)
    link.delivery_count = ours
    s.link_credit(link, spec.Flow(incoming_window=1, next_outgoing_id=0, outgoing_window=1, handle=0,
                                  delivery_count=theirs, link_credit=credit, drain=True))
    assert link.credit == want and link.drain


def test_the_clients_window_counts_what_we_sent_since_its_flow():
    s = session()
    assert s.remote_incoming_window == 3 and s.next_incoming_id == 7
    s.next_outgoing_id = 5
    s.window_from(spec.Flow(next_incoming_id=4, incoming_window=3, next_outgoing_id=0, outgoing_window=1))
    assert s.remote_incoming_window == 2  # one of ours (id 4) is in flight
    s.window_from(spec.Flow(next_incoming_id=None, incoming_window=3, next_outgoing_id=0, outgoing_window=1))
    assert s.remote_incoming_window == 0  # no next-incoming-id: counted from 0, all 5 in flight
