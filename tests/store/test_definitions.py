"""DefinitionsStore (warren.store.definitions): replay, cascades, compaction, lossless arguments."""

from __future__ import annotations

import datetime
import decimal
import errno
import math
import os

import pytest
from hypothesis import given, settings, strategies as st

from warren.store import definitions as defs_mod
from warren.store.definitions import (
    BindingDef, DefinitionsStore, ExchangeDef, QueueDef, from_tagged, to_tagged,
)
from warren.store.record import HEADER_SIZE, FormatError

UTC = datetime.timezone.utc


@pytest.fixture
def path(tmp_path):
    return tmp_path / "definitions"


def reopen(store: DefinitionsStore, **kw) -> DefinitionsStore:
    store.close()
    return DefinitionsStore(store.path, **kw)


def topology(store: DefinitionsStore) -> None:
    store.declare_exchange("/", "orders", "topic", arguments={"alternate-exchange": "ae"})
    store.declare_exchange("/", "ae", "fanout")
    store.declare_queue("/", "q1", arguments={"x-max-length": 10})
    store.declare_queue("/", "q2")
    store.bind("/", "orders", "q1", "order.#")
    store.bind("/", "orders", "q2", "order.eu.*", {"x-match": "all"})
    store.bind("/", "ae", "orders", "", destination_kind="exchange")


# --- basics ------------------------------------------------------------------------------------------

def test_declare_and_load_after_reopen(path):
    s = DefinitionsStore(path)
    topology(s)
    s = reopen(s)
    d = s.load()
    assert d.exchanges == [ExchangeDef("/", "orders", "topic", True, False, False, {"alternate-exchange": "ae"}),
                           ExchangeDef("/", "ae", "fanout")]
    assert d.queues == [QueueDef("/", "q1", arguments={"x-max-length": 10}), QueueDef("/", "q2")]
    assert d.bindings == [
        BindingDef("/", "orders", "q1", "order.#"),
        BindingDef("/", "orders", "q2", "order.eu.*", {"x-match": "all"}),
        BindingDef("/", "ae", "orders", "", destination_kind="exchange"),
    ]
    s.close()


def test_load_returns_copies(path):
    s = DefinitionsStore(path)
    s.declare_queue("/", "q", arguments={"a": [1]})
    s.load().queues[0].arguments["a"].append(2)
    assert s.load().queues[0].arguments == {"a": [1]}
    s.close()


def test_vhosts_are_separate(path):
    s = DefinitionsStore(path)
    s.declare_queue("/", "q")
    s.declare_queue("other", "q", arguments={"x": 1})
    s.delete_queue("/", "q")
    s = reopen(s)
    assert s.load().queues == [QueueDef("other", "q", arguments={"x": 1})]
    s.close()


def test_deletes_cascade_to_bindings(path):
    s = DefinitionsStore(path)
    topology(s)
    s.delete_queue("/", "q1")
    assert [b.destination for b in s.load().bindings] == ["q2", "orders"]
    s.delete_exchange("/", "orders")  # source of q2's binding, destination of ae's
    s = reopen(s)
    d = s.load()
    assert [e.name for e in d.exchanges] == ["ae"] and [q.name for q in d.queues] == ["q2"]
    assert d.bindings == []
    s.close()


def test_unbind_matches_arguments(path):
    s = DefinitionsStore(path)
    topology(s)
    assert s.unbind("/", "orders", "q2", "order.eu.*") is False  # other arguments: not this binding
    assert s.unbind("/", "orders", "q2", "order.eu.*", {"x-match": "all"}) is True
    s = reopen(s)
    assert [b.destination for b in s.load().bindings] == ["q1", "orders"]
    s.close()


def test_redeclare_replaces(path):
    s = DefinitionsStore(path)
    s.declare_queue("/", "q", arguments={"x-max-length": 1})
    s.declare_queue("/", "q", arguments={"x-max-length": 2})
    s = reopen(s)
    assert s.load().queues == [QueueDef("/", "q", arguments={"x-max-length": 2})]
    s.close()


def test_noops_write_nothing(path, monkeypatch):
    s = DefinitionsStore(path)
    topology(s)
    size = os.path.getsize(path)
    fsyncs = []
    monkeypatch.setattr(defs_mod.os, "fsync", lambda fd: fsyncs.append(fd))
    assert s.declare_queue("/", "q1", arguments={"x-max-length": 10}) is False  # clients redeclare on connect
    assert s.declare_exchange("/", "ae", "fanout") is False
    assert s.bind("/", "orders", "q1", "order.#") is False
    assert s.delete_queue("/", "nope") is False
    assert s.delete_exchange("/", "nope") is False
    assert s.unbind("/", "orders", "q1", "nope") is False
    assert os.path.getsize(path) == size and fsyncs == []
    s.close()


def test_every_change_is_fsynced_before_returning(path, monkeypatch):
    s = DefinitionsStore(path)
    events = []
    real_write, real_fsync = os.write, os.fsync
    monkeypatch.setattr(defs_mod.os, "write", lambda fd, b: events.append("write") or real_write(fd, b))
    monkeypatch.setattr(defs_mod.os, "fsync", lambda fd: events.append("fsync") or real_fsync(fd))
    topology(s)
    assert events == ["write", "fsync"] * 7
    s.close()


# --- deferred fsyncs (the broker's group commit fsyncs the log off the event loop) -------------

def test_a_deferred_change_is_applied_at_once_and_written_and_fsynced_by_sync(path, monkeypatch):
    s = DefinitionsStore(path)
    woken = []
    s.on_change = lambda: woken.append(s.changes)
    events = []
    real_fsync = os.fsync
    monkeypatch.setattr(defs_mod.os, "fsync", lambda fd: events.append("fsync") or real_fsync(fd))
    s.defer_fsync = True
    assert s.declare_queue("/", "q") and s.bind("/", "amq.direct", "q", "k")
    assert events == [] and woken == [1, 2] and s.answers_held == 2
    assert (s.changes, s.durable) == (2, 0)
    assert [q.name for q in s.load().queues] == ["q"]  # applied, in the order written
    assert s.sync() == 2 and events == ["fsync"]  # one fsync covers both
    assert s.sync() == 2 and events == ["fsync"]  # nothing new: no fsync
    s.close()
    assert [q.name for q in DefinitionsStore(path).load().queues] == ["q"]


def test_a_redeclare_while_the_declare_is_not_durable_waits_too(path):
    """An answer to a call that changed nothing must not go before the change it repeats is
    durable: it counts as held while earlier changes wait for their fsync, and without
    defer_fsync it fsyncs them itself."""
    s = DefinitionsStore(path)
    s.defer_fsync = True
    s.declare_queue("/", "q")
    assert not s.declare_queue("/", "q") and s.answers_held == 2
    s.sync()
    assert not s.declare_queue("/", "q") and s.answers_held == 2  # durable now: nothing to wait for
    s.declare_queue("/", "r")
    s.defer_fsync = False
    assert not s.declare_queue("/", "r") and s.durable == s.changes == 2
    s.close()


def test_a_delete_is_deferred_like_a_declare_and_its_token_outlives_compactions(path):
    """A queue's or exchange's delete waits for the group commit's fsync like a declare (its
    store folder is only put aside meanwhile, warren/store/aside.py); the token it carries stays
    in the log through compactions, ahead of a declare of the same name, until forgotten."""
    s = DefinitionsStore(path, compact_after=2)
    s.defer_fsync = True
    s.declare_queue("/", "q")
    s.declare_exchange("/", "x", "fanout")
    assert s.delete_queue("/", "q", token="t1") and s.delete_exchange("/", "x", token="t2")
    assert s.durable == 0 and s.changes == 4 and s.answers_held == 4
    s.declare_queue("/", "q", arguments={"again": 1})
    s.sync()  # fsyncs, and compacts: the deletes' records stay, before the new declare
    assert s.durable == s.changes == 5 and s.delete_tokens == {"t1", "t2"} and s.dead_records == 0
    s.close()
    s = DefinitionsStore(path, compact_after=4)
    assert s.delete_tokens == {"t1", "t2"}
    assert [q.arguments for q in s.load().queues] == [{"again": 1}] and s.load().exchanges == []
    s.forget_deletes(["t1", "t2"])
    s.compact()
    s.close()
    s = DefinitionsStore(path)
    assert s.delete_tokens == frozenset() and [q.name for q in s.load().queues] == ["q"]
    s.close()


def test_close_fsyncs_what_was_deferred(path, monkeypatch):
    s = DefinitionsStore(path)
    s.defer_fsync = True
    s.declare_exchange("/", "x", "topic")
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(defs_mod.os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
    s.close()
    assert len(fsyncs) == 1


def test_sync_compacts_without_holding_the_lock_through_its_fsyncs(path, monkeypatch):
    s = DefinitionsStore(path, compact_after=10)
    s.defer_fsync = True
    for i in range(12):  # each redeclare with other arguments leaves the one before it dead
        s.declare_queue("/", "kept", arguments={"x-n": i})
    held = []
    real_fsync = os.fsync
    monkeypatch.setattr(defs_mod.os, "fsync", lambda fd: held.append(s._lock.locked()) or real_fsync(fd))
    s.sync()
    assert held and not any(held)  # the loop's next declare never waits for a disk
    assert s.dead_records == 0 and os.path.getsize(path) < 200
    assert [(q.name, q.arguments) for q in reopen(s).load().queues] == [("kept", {"x-n": 11})]


def test_a_compaction_overtaken_by_a_change_is_left_for_the_next_sync(path, monkeypatch):
    """A change logged while ``sync`` writes the compacted file is not in it: that file is
    dropped, and the next sync compacts again, with the change."""
    s = DefinitionsStore(path, compact_after=4)
    s.defer_fsync = True
    for i in range(6):
        s.declare_queue("/", "kept", arguments={"x-n": i})
    real_create = s._create

    def create_racing(tmp, content):
        monkeypatch.setattr(s, "_create", real_create)
        s.declare_queue("/", "meanwhile")  # the loop's declare, between the snapshot and the rename
        return real_create(tmp, content)

    monkeypatch.setattr(s, "_create", create_racing)
    s.sync()
    assert s.dead_records > 0 and not os.path.exists(str(path) + ".compact")
    s.sync()
    assert s.dead_records == 0
    assert [q.name for q in reopen(s).load().queues] == ["kept", "meanwhile"]


def test_bad_argument_writes_nothing(path):
    s = DefinitionsStore(path)
    size = os.path.getsize(path)
    with pytest.raises(TypeError):
        s.declare_queue("/", "q", arguments={"x": {1, 2}})
    with pytest.raises(TypeError):
        s.declare_queue("/", "q", arguments={"x": {1: "non-str key"}})
    with pytest.raises(ValueError):
        s.bind("/", "a", "b", "", destination_kind="stream")
    assert os.path.getsize(path) == size and s.load().queues == []
    s.close()


def test_closed(path):
    s = DefinitionsStore(path)
    s.close()
    with pytest.raises(ValueError):
        s.declare_queue("/", "q")


# --- crash leftovers ---------------------------------------------------------------------------------

def test_torn_last_record_at_every_offset(path, tmp_path):
    s = DefinitionsStore(path)
    topology(s)
    s.close()
    before = os.path.getsize(path)
    s = DefinitionsStore(path)
    s.declare_queue("/", "last", arguments={"k": "v" * 20})
    s.close()
    full = path.read_bytes()
    assert len(full) > before + HEADER_SIZE
    for cut in range(before, len(full)):
        p = tmp_path / f"cut{cut}"
        p.write_bytes(full[:cut])
        s = DefinitionsStore(p)
        assert [q.name for q in s.load().queues] == ["q1", "q2"], cut
        assert os.path.getsize(p) == before  # cut back, so the next record follows a valid one
        s.declare_queue("/", "after")
        s = reopen(s)
        assert [q.name for q in s.load().queues] == ["q1", "q2", "after"]
        s.close()


@pytest.mark.parametrize("content", [b"", b"WR", b"\x00" * 5])
def test_torn_file_header_starts_over(path, content):
    path.write_bytes(content)
    s = DefinitionsStore(path)
    s.declare_queue("/", "q")
    s = reopen(s)
    assert [q.name for q in s.load().queues] == ["q"]
    s.close()


def test_foreign_file_refused(path):
    path.write_bytes(b"{\"json\": true}")
    with pytest.raises(FormatError):
        DefinitionsStore(path)


def test_leftover_compaction_file_is_ignored(path):
    s = DefinitionsStore(path)
    s.declare_queue("/", "q")
    s.close()
    with open(str(path) + ".compact", "wb") as f:
        f.write(b"WRN\x01D half written")
    s = DefinitionsStore(path)
    assert [q.name for q in s.load().queues] == ["q"]
    assert not os.path.exists(str(path) + ".compact")
    s.close()


# --- compaction ----------------------------------------------------------------------------------

def test_compaction_after_n_deletes(path):
    s = DefinitionsStore(path, compact_after=50)
    topology(s)
    compacted_at = None
    for i in range(30):
        s.declare_queue("/", f"tmp{i}")
        s.bind("/", "orders", f"tmp{i}", "k")
        s.delete_queue("/", f"tmp{i}")  # 3 dead records: the delete, the declare, the binding
        if s.dead_records == 0:
            compacted_at = i
            break
    assert compacted_at == 16  # 17 x 3 = 51 >= 50
    assert b"tmp" not in path.read_bytes()
    want = s.load()
    s = reopen(s, compact_after=50)
    assert s.load() == want
    size = os.path.getsize(path)
    s.compact()
    assert os.path.getsize(path) <= size and s.dead_records == 0
    s.declare_queue("/", "after")  # appends go to the compacted file
    s = reopen(s)
    assert [q.name for q in s.load().queues] == ["q1", "q2", "after"]
    assert not os.path.exists(str(path) + ".compact")
    s.close()


def test_compaction_shrinks_the_file(path):
    s = DefinitionsStore(path, compact_after=10_000)
    s.declare_queue("/", "keep", arguments={"x-max-length": 5})
    for i in range(200):
        s.declare_queue("/", f"tmp{i}")
        s.delete_queue("/", f"tmp{i}")
    big = os.path.getsize(path)
    s.compact()
    assert os.path.getsize(path) < big / 50
    s = reopen(s)
    assert s.load().queues == [QueueDef("/", "keep", arguments={"x-max-length": 5})]
    s.close()


def test_compaction_on_open(path):
    s = DefinitionsStore(path, compact_after=10_000)
    for i in range(20):
        s.declare_exchange("/", f"x{i}", "direct")
        s.delete_exchange("/", f"x{i}")
    s.close()
    big = os.path.getsize(path)
    s = DefinitionsStore(path, compact_after=10)
    assert os.path.getsize(path) < big and s.dead_records == 0
    s.close()


# --- lossless arguments ------------------------------------------------------------------------------

wire_text = st.binary(max_size=20).map(lambda b: b.decode("utf-8", "surrogateescape"))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), wire_text,
    st.floats(allow_nan=False), st.binary(max_size=20),
    st.decimals(allow_nan=False, allow_infinity=False, places=None),
    st.datetimes(timezones=st.sampled_from([None, UTC, datetime.timezone(datetime.timedelta(hours=-5, minutes=-30))])),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(wire_text, inner, max_size=4)), max_leaves=20)


def same(a, b) -> bool:
    """Equal, with the type, float sign and Decimal exponent as well (1 == 1.0 == True is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, decimal.Decimal):
        return a.as_tuple() == b.as_tuple()
    if isinstance(a, datetime.datetime):
        return a == b and a.utcoffset() == b.utcoffset() and a.isoformat() == b.isoformat()
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


@given(st.dictionaries(wire_text, values, max_size=6))
@settings(max_examples=150, deadline=None)
def test_tagged_round_trip(table):
    assert same(from_tagged(to_tagged(table)), table)


def test_awkward_values_survive_the_file(path):
    args = {
        "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "-0": -0.0, "float": 0.1,
        "int": 2**64 + 1, "neg": -(2**63), "bool": True, "zero": 0, "none": None,
        "bytes": b"\x00\xff", "decimal": decimal.Decimal("1.230E+5"), "dec-neg": decimal.Decimal("-0.00"),
        "naive": datetime.datetime(2024, 2, 29, 23, 59, 59, 123456),
        "utc": datetime.datetime(1970, 1, 1, tzinfo=UTC),
        "offset": datetime.datetime(2030, 1, 1, 12, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=45))),
        "list": [1, "two", [3.0, None], {"four": b"4"}], "empty": {}, "empty-list": [],
        "tagged-looking": ["f", "1.0"], "dict-looking": {"$t": "b", "v": "AA=="},
        "surrogate \udcff name": "value \udc80", "unicode": "héllo ☃",
    }
    s = DefinitionsStore(path)
    s.declare_queue("/", "q \udcfe", arguments=args)
    s.bind("/", "amq.headers", "q \udcfe", "", {"x-match": "any", "when": args["utc"], "n": decimal.Decimal("7")})
    s = reopen(s)
    d = s.load()
    assert d.queues[0].name == "q \udcfe"
    assert same(d.queues[0].arguments, args)
    assert d.bindings[0].arguments["n"] == decimal.Decimal("7")
    # the stored binding is found again by unbind with the same arguments
    assert s.unbind("/", "amq.headers", "q \udcfe", "", {"x-match": "any", "when": args["utc"],
                                                       "n": decimal.Decimal("7")}) is True
    s.close()


def test_tuples_and_bytearrays_normalise():
    assert from_tagged(to_tagged({"t": (1, 2), "b": bytearray(b"ab")})) == {"t": [1, 2], "b": b"ab"}
    with pytest.raises(FormatError):
        from_tagged(["?", 1])


def _failing_fsync(monkeypatch, path, times: int = 1) -> list:
    """os.fsync fails with EIO on the file now at ``path`` (its inode), ``times`` times."""
    real = os.fsync
    ino = os.stat(path).st_ino
    failed: list = []

    def fsync(fd):
        if len(failed) < times and os.fstat(fd).st_ino == ino:
            failed.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return failed


@pytest.mark.parametrize("deferred", [False, True])
def test_a_failed_fsync_is_not_retried_but_the_log_rewritten_from_memory(tmp_path, monkeypatch, deferred):
    """In a call (the change being logged goes into the new file) and in the group commit's
    ``sync`` (every change applied so far does): the store carries on, nothing lost."""
    path = tmp_path / "definitions.log"
    store = DefinitionsStore(path)
    store.declare_queue("/", "a")
    old_ino = os.stat(path).st_ino
    failed = _failing_fsync(monkeypatch, path)
    store.defer_fsync = deferred
    assert store.declare_queue("/", "b")
    if deferred:
        assert store.durable < store.changes
        assert store.sync() == store.changes
    assert failed and store.rewrites == 1 and os.stat(path).st_ino != old_ino
    assert store.durable == store.changes
    store.defer_fsync = False
    store.declare_queue("/", "c")  # into the new file
    store.close()
    again = DefinitionsStore(path)
    try:
        assert [q.name for q in again.load().queues] == ["a", "b", "c"]
    finally:
        again.close()


def test_a_failed_fsync_whose_rewrite_fails_too_fails_the_store(tmp_path, monkeypatch):
    path = tmp_path / "definitions.log"
    store = DefinitionsStore(path)
    store.declare_queue("/", "a")
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "Input/output error")))
    with pytest.raises(OSError):
        store.declare_queue("/", "b")
    monkeypatch.setattr(os, "fsync", real)
    with pytest.raises(OSError, match="failed earlier"):  # refused until a restart
        store.declare_queue("/", "c")
    assert store.rewrites == 0
    assert [q.name for q in store.load().queues] == ["a"]
    store.close()
