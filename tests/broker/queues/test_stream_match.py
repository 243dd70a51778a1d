"""The records endpoint's property and header filter (warren/broker/queues/stream_match.py) over
a real StreamStore: it keeps exactly the records whose property or header, rendered as the
Spark source renders it (warren/codec/render.py), is one of the values asked for. Through the
HTTP API and Spark: tests/spark/read/test_pushdown_properties.py."""

from __future__ import annotations

import datetime
import decimal
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multidict import MultiDict

from warren.broker.queues import stream_match
from warren.broker.queues.stream_match import MatchedRecords, record_match
from warren.codec.render import render_value
from warren.spec.amqp0_9_1 import BasicProperties
from warren.store.stream_format import parse_entries
from warren.store.stream_store import StreamStore


def record(props: BasicProperties | None, body: bytes = b"body", key: bytes = b"k") -> bytes:
    encoded = props.encode() if props is not None else b""
    return b"".join((b"\x02ex", bytes([len(key)]), key, struct.pack(">I", len(encoded)), encoded, body))


@pytest.fixture
def store(tmp_path):
    s = StreamStore(tmp_path / "s", fsync=False)
    yield s
    s.close()


def fill(store, messages) -> None:
    for props in messages:
        store.append(record(props), 0)
    store.sync()


def offsets_read(store, query, start=0, end=None, max_records=100_000, max_bytes=1 << 24):
    match = record_match(MultiDict(query))
    first, count, data = MatchedRecords(store, match).read_raw(start, max_records, max_bytes, end)
    got = [o for o, _ts, _rec in parse_entries(data)]
    assert len(got) == count
    return got, first + count


# header values of every kind that renders to text, some rendering to the same text as another
TYPED = [5, "5", True, "true", 1.5, "1.5", decimal.Decimal("1.50"), b"eu", "eu", "eu-west", None,
         datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc), "2024-05-01T12:00:00Z",
         {"a": 1}, '{"a":1}', [1, "eu"], "caf\u00e9"]


def test_a_header_matches_by_its_rendering_whatever_its_type(store):
    fill(store, [BasicProperties(headers={"region": v}) for v in TYPED] + [BasicProperties(), None])
    for wanted in ("5", "true", "1.5", "1.50", "eu", "eu-west", "2024-05-01T12:00:00Z", '{"a":1}', '[1,"eu"]',
                   "caf\u00e9", "nowhere"):
        got, following = offsets_read(store, [("header.region", wanted)])
        assert got == [i for i, v in enumerate(TYPED) if render_value(v) == wanted], wanted
        assert following == len(TYPED) + 2


def test_values_of_one_name_are_any_and_names_are_all(store):
    fill(store, [BasicProperties(content_type=ct, headers={"region": r}, delivery_mode=dm)
                 for ct in ("text/plain", "application/json") for r in ("eu", "us", "ap") for dm in (1, 2)])
    got, _ = offsets_read(store, [("header.region", "eu"), ("header.region", "ap")])
    assert got == [0, 1, 4, 5, 6, 7, 10, 11]
    got, _ = offsets_read(store, [("header.region", "eu"), ("property.content_type", "application/json")])
    assert got == [6, 7]
    got, _ = offsets_read(store, [("property.delivery_mode", "2"), ("property.content_type", "text/plain")])
    assert got == [1, 3, 5]


def test_a_page_says_where_to_go_on_and_a_bounded_scan_may_answer_nothing(store, monkeypatch):
    fill(store, [BasicProperties(app_id="hit" if i % 10 == 3 else "miss") for i in range(500)])
    wanted = [("property.app_id", "hit")]
    got, following = offsets_read(store, wanted, max_records=5)
    assert got == [3, 13, 23, 33, 43] and following == 53  # the next match, not sent: go on from it
    got, following = offsets_read(store, wanted, start=44, end=100)
    assert got == [53, 63, 73, 83, 93] and following == 100
    monkeypatch.setattr(stream_match, "SCAN_BYTES", 1)  # one read of the store per request
    monkeypatch.setattr(stream_match, "_READ_BYTES", 40 * 64)
    got, following = offsets_read(store, wanted, start=4, end=10)
    assert got == [] and following == 10
    # reading page by page from wherever each answer stops gives every match once
    cursor, seen = 0, []
    for _ in range(1000):
        if cursor >= 500:
            break
        got, cursor = offsets_read(store, wanted, start=cursor, max_records=3)
        seen += got
    assert seen == list(range(3, 500, 10))


def test_requests_naming_what_cannot_be_filtered_are_refused():
    with pytest.raises(ValueError, match="property.headers"):
        record_match(MultiDict([("property.headers", "x")]))
    with pytest.raises(ValueError, match="header name"):
        record_match(MultiDict([("header.", "x")]))
    assert record_match(MultiDict([("offset", "3")])) is None


_texts = st.sampled_from(["eu", "us", "5", "true", "1.5", "", "x" * 40, "\u00e9t\u00e9"])
_values = st.one_of(_texts, st.integers(-10, 10), st.booleans(), st.sampled_from([1.5, decimal.Decimal("5")]),
                    st.binary(max_size=4), st.lists(_texts, max_size=2), st.dictionaries(_texts, _texts, max_size=2),
                    st.none())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tables=st.lists(st.dictionaries(st.sampled_from(["region", "n", "other"]), _values, max_size=3),
                       min_size=1, max_size=20),
       wanted=st.lists(_texts, min_size=1, max_size=2))
def test_the_filter_keeps_exactly_what_the_readers_rendering_would(tmp_path_factory, tables, wanted):
    s = StreamStore(tmp_path_factory.mktemp("m") / "s", fsync=False)
    try:
        fill(s, [BasicProperties(headers=t or None) for t in tables])
        got, _ = offsets_read(s, [("header.region", w) for w in wanted])
        assert got == [i for i, t in enumerate(tables) if render_value(t.get("region")) in wanted]
    finally:
        s.close()
