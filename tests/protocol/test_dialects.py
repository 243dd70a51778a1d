"""Dialects (warren.protocol.dialects) and the generated 0-8 / 0-9 / Qpid tables they use.

Ids and field lists are checked against INVENTORY.md §6, §7, §9.1 and §9.2; translation by
method name and field name; the server connection driven with bytes in each dialect.
"""

from __future__ import annotations

import importlib
import struct
import sys
from pathlib import Path

import pytest

from warren.spec.fields import encode_table
from warren.codec.frames import FRAME_HEADER, FrameBuffer, method_frame
from warren.errors import CommandInvalid, FrameError, NotAllowed, NotImplemented_, UnexpectedFrame
from warren.protocol.amqp0_9_1.connection import ServerConnection
from warren.protocol.dialects import DIALECT_0_9_1, DIALECTS, get_dialect
from warren.protocol.events import ChannelOpened, Method
from warren.protocol.header import HEADERS, match_header
from warren.spec import amqp0_8 as x08, amqp0_8_qpid as q08, amqp0_9 as x09, amqp0_9_qpid as q09
from warren.spec import amqp0_91_qpid as q91
from warren.spec import amqp0_9_1 as v091

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT.parent / "shared" / "spec"
ALL_MODULES = (x08, q08, x09, q09, q91, v091)


def ids(module, name: str) -> tuple[int, int]:
    [cls] = [c for c in module.METHODS.values() if c.NAME == name]
    return cls.CLASS_ID, cls.METHOD_ID


def names(module) -> set[str]:
    return {c.NAME for c in module.METHODS.values()}


# --- generated tables: INVENTORY.md §9.1 ids ----------------------------------------------------

@pytest.mark.parametrize("module, name, expected", [
    (x08, "connection.redirect", (10, 50)),
    (x08, "connection.close", (10, 60)),
    (x08, "connection.close-ok", (10, 61)),
    (q08, "connection.close", (10, 60)),
    (x09, "connection.redirect", (10, 42)),
    (x09, "connection.close", (10, 50)),
    (x09, "connection.close-ok", (10, 51)),
    (q91, "connection.close", (10, 50)),
    (x08, "channel.alert", (20, 30)),
    (x09, "channel.resume", (20, 50)),
    (x09, "channel.ping", (20, 60)),
    (x09, "channel.pong", (20, 70)),
    (x09, "channel.ok", (20, 80)),
    (x08, "access.request", (30, 10)),
    (x09, "access.request-ok", (30, 11)),
    (q08, "exchange.bound", (40, 22)),
    (q08, "exchange.bound-ok", (40, 23)),
    (q09, "exchange.bound", (40, 22)),
    (q91, "exchange.bound-ok", (40, 23)),
    (x09, "queue.unbind", (50, 50)),
    (x09, "queue.unbind-ok", (50, 51)),
    (x08, "basic.recover", (60, 100)),
    (x09, "basic.recover", (60, 100)),
    (q08, "basic.recover-ok", (60, 101)),
    (q09, "basic.recover-sync", (60, 102)),
    (q09, "basic.recover-sync-ok", (60, 101)),
    (q91, "basic.recover", (60, 100)),
    (q91, "basic.recover-sync", (60, 110)),
    (q91, "basic.recover-sync-ok", (60, 111)),
    (v091, "basic.recover-async", (60, 100)),
    (v091, "basic.recover", (60, 110)),
    (v091, "basic.recover-ok", (60, 111)),
    (x08, "file.stage", (70, 50)),
    (x08, "stream.deliver", (80, 60)),
    (x08, "dtx.start", (100, 20)),
    (x08, "tunnel.request", (110, 10)),
    (x08, "test.integer", (120, 10)),
    (x08, "test.content-ok", (120, 41)),
    (x09, "message.transfer", (120, 10)),
    (x09, "message.qos", (120, 110)),
    (x09, "message.ok", (120, 500)),
    (x09, "message.offset", (120, 530)),
])
def test_generated_method_ids_match_inventory_9_1(module, name, expected):
    assert ids(module, name) == expected


@pytest.mark.parametrize("module, classes", [
    (x08, {"connection": 10, "channel": 20, "access": 30, "exchange": 40, "queue": 50, "basic": 60, "file": 70,
           "stream": 80, "tx": 90, "dtx": 100, "tunnel": 110, "test": 120}),
    (x09, {"connection": 10, "channel": 20, "access": 30, "exchange": 40, "queue": 50, "basic": 60, "file": 70,
           "stream": 80, "tx": 90, "dtx": 100, "tunnel": 110, "message": 120}),
    (q91, {"connection": 10, "channel": 20, "exchange": 40, "queue": 50, "basic": 60, "tx": 90}),
])
def test_generated_classes_match_inventory_6(module, classes):
    assert module.CLASS_IDS == classes


@pytest.mark.parametrize("module, counts", [
    # INVENTORY.md §6.1 / §6.2: methods per class
    (x08, {"connection": 11, "channel": 7, "access": 2, "exchange": 4, "queue": 8, "basic": 15, "file": 14,
           "stream": 9, "tx": 6, "dtx": 4, "tunnel": 1, "test": 8}),
    (x09, {"connection": 11, "channel": 10, "access": 2, "exchange": 4, "queue": 10, "basic": 15, "file": 14,
           "stream": 9, "tx": 6, "dtx": 4, "tunnel": 1, "message": 15}),
])
def test_generated_method_counts_match_inventory_6(module, counts):
    got: dict[str, int] = {}
    for cls in module.METHODS.values():
        got[cls.NAME.split(".")[0]] = got.get(cls.NAME.split(".")[0], 0) + 1
    assert got == counts


def test_qpid_tables_add_what_inventory_7_1_1_and_9_7_say():
    assert names(q08) - names(x08) == {"exchange.bound", "exchange.bound-ok", "basic.recover-ok"}
    assert names(q09) - names(x09) == {"exchange.bound", "exchange.bound-ok", "basic.recover-sync",
                                       "basic.recover-sync-ok"}
    assert "access.request" not in names(q91) and "confirm.select" not in names(q91)


def wire(cls) -> list[str]:
    return [t for _, t in cls.FIELDS]


def test_field_lists_that_change_the_wire_inventory_9_2():
    assert x08.ChannelOpenOk.FIELDS == () and x08.ChannelOpenOk().encode() == b"\x00\x14\x00\x0b"
    assert x09.ChannelOpenOk.FIELDS == (("channel_id", "longstr"),)
    assert wire(x08.BasicConsume) == ["short", "shortstr", "shortstr", "bit", "bit", "bit", "bit"]
    assert wire(q08.BasicConsume) == wire(v091.BasicConsume) == wire(x08.BasicConsume) + ["table"]
    assert x09.BasicConsume.FIELDS[-1] == ("filter", "table") and q09.BasicConsume.FIELDS[-1] == ("arguments", "table")
    assert wire(x09.StreamConsume)[-1] == "table" and wire(x08.StreamConsume)[-1] == "bit"
    assert x09.MessageTransfer.FIELDS[-1] == ("body", "content")
    # 0-8/0-9 connection.open has insist; open-ok has known-hosts (same wire as 0-9-1's)
    assert wire(x08.ConnectionOpen) == wire(v091.ConnectionOpen) == ["shortstr", "shortstr", "bit"]
    assert x08.ConnectionOpenOk.FIELDS == (("known_hosts", "shortstr"),)


@pytest.mark.parametrize("module", ALL_MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_basic_deliver_and_basic_properties_are_the_same_on_the_wire_in_every_version(module):
    # send_deliver is hand-encoded once for all dialects; property lists pass through unchanged
    assert module.BasicDeliver.INDEX == 60 << 16 | 60
    assert wire(module.BasicDeliver) == wire(v091.BasicDeliver)
    assert [n for n, _ in module.BasicDeliver.FIELDS] == [n for n, _ in v091.BasicDeliver.FIELDS]
    assert wire(module.BasicProperties) == wire(v091.BasicProperties)
    assert module.BasicPublish.INDEX == v091.BasicPublish.INDEX and wire(module.BasicPublish) == wire(v091.BasicPublish)


def test_0_8_constants_lack_the_0_9_1_reply_codes():
    assert x08.NOT_DELIVERED == 310 and x08.FRAME_OOB_METHOD == 4 and x08.FRAME_TRACE == 7
    for name in ("NO_ROUTE", "PRECONDITION_FAILED", "UNEXPECTED_FRAME"):
        assert not hasattr(x08, name)
    assert x09.NO_ROUTE == 312 and x09.PRECONDITION_FAILED == 406 and not hasattr(x09, "UNEXPECTED_FRAME")


@pytest.mark.parametrize("module", [x08, q08, x09, q09, q91], ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_every_generated_method_round_trips_with_defaults(module):
    for cls in module.METHODS.values():
        m = cls()
        payload = m.encode()
        assert struct.unpack_from(">HH", payload) == (cls.CLASS_ID, cls.METHOD_ID)
        back, off = cls.decode(payload, 4)
        assert off == len(payload) and back == m


# --- the XML loader ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gen_spec():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        yield importlib.import_module("gen_spec")
    finally:
        sys.path.remove(str(ROOT / "tools"))


def test_xml_loader_resolves_spaced_names_domains_and_qpid_label_references(gen_spec, tmp_path):
    xml = tmp_path / "t.xml"
    xml.write_text("""<amqp major="8" minor="0">
      <constant name="frame min size" value="4096"/>
      <constant name="not delivered" value="310" class="soft error"/>
      <domain name="queue-name" type="shortstr" label="queue name"/>
      <domain name="access ticket" type="short"/>
      <domain name="bit" type="bit"/>
      <class name="basic" index="60">
        <field name="content type" type="shortstr"/>
        <method name="get" index="70" synchronous="1">
          <field name="ticket" domain="access ticket"/>
          <field name="queue" domain="queue name"/>
          <field name="no ack" domain="bit"/>
        </method>
        <method name="x" index="71" content="1"><field name="body" domain="content"/></method>
      </class>
    </amqp>""")
    spec = gen_spec.load_xml(xml, (0, 8, 0))
    assert spec.constants == [("frame-min-size", 4096, ""), ("not-delivered", 310, "soft-error")]
    [cls] = spec.classes
    get, x = cls.methods
    assert [(f.name, f.type) for f in get.fields] == [("ticket", "short"), ("queue", "shortstr"), ("no-ack", "bit")]
    assert get.synchronous and not get.content and x.content and x.fields[0].type == "content"
    assert [(p.name, p.type) for p in cls.properties] == [("content-type", "shortstr")]
    namespace: dict = {}
    exec(compile(gen_spec.generate("t", spec, "Test"), "t", "exec"), namespace)
    assert namespace["FRAME_MIN_SIZE"] == 4096 and namespace["BasicGet"].FIELDS[2] == ("no_ack", "bit")


def test_xml_loader_refuses_an_unknown_domain(gen_spec, tmp_path):
    xml = tmp_path / "bad.xml"
    xml.write_text('<amqp><class name="c" index="1"><method name="m" index="1">'
                   '<field name="f" domain="nowhere"/></method></class></amqp>')
    with pytest.raises(SystemExit, match="nowhere"):
        gen_spec.load_xml(xml, (0, 0, 0))


@pytest.mark.skipif(not SPEC_DIR.is_dir(), reason="../shared/spec is not beside the checkout")
def test_generator_targets_cover_every_dialect_table(gen_spec):
    assert set(gen_spec.TARGETS) == {"amqp0_9_1", "amqp0_8", "amqp0_8_qpid", "amqp0_9", "amqp0_9_qpid",
                                     "amqp0_91_qpid"}


# --- headers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("header, key", [
    (b"AMQP\x00\x00\x09\x01", "0-9-1"),
    (b"AMQP\x01\x01\x08\x00", "0-8"),
    (b"AMQP\x01\x01\x09\x01", "0-8"),
    (b"AMQP\x01\x01\x00\x09", "0-9"),
    (b"AMQP\x01\x01\x00\x5b", "0-91-qpid"),
])
def test_each_header_maps_to_its_dialect(header, key):
    assert match_header(header).key == key and HEADERS[header] == key


@pytest.mark.parametrize("header", [b"AMQP\x01\x01\x00\x0a", b"AMQP\x00\x00\x09\x02", b"HTTP/1.1"])
def test_unknown_headers_map_to_nothing(header):
    assert match_header(header) is None


def test_unknown_dialect_key_is_refused():
    with pytest.raises(ValueError, match="0-7"):
        get_dialect("0-7")


# --- translation --------------------------------------------------------------------------------

def test_0_9_1_is_the_identity():
    d = get_dialect("0-9-1")
    assert d is DIALECT_0_9_1 and d.identity
    assert d.server_methods is v091.METHODS  # the hot path decodes with the very same dict
    m = v091.BasicPublish(0, "ex", "rk")
    assert d.translate_in(m) is m and d.translate_out(m) is m and d.encode(m) == m.encode()


@pytest.mark.parametrize("key", ["0-8", "0-9", "0-91-qpid"])
def test_methods_with_the_same_wire_form_decode_straight_into_0_9_1_classes(key):
    d = get_dialect(key)
    for name in ("basic.publish", "basic.ack", "basic.get", "queue.declare", "exchange.declare",
                 "connection.start-ok", "connection.tune-ok", "connection.open", "channel.open", "tx.select"):
        cls = next(c for c in v091.METHODS.values() if c.NAME == name)
        assert d.server_methods[cls.INDEX] is cls, name
        assert d.encoders[cls] == cls.encode


def test_0_8_connection_close_moves_to_10_60_both_ways():
    d = get_dialect("0-8")
    close = x08.ConnectionClose(404, "NOT_FOUND - x", 50, 10)
    assert d.translate_in(close) == v091.ConnectionClose(404, "NOT_FOUND - x", 50, 10)
    assert d.encode(v091.ConnectionClose(320, "bye", 0, 0))[:4] == b"\x00\x0a\x00\x3c"
    assert d.encode(v091.ConnectionCloseOk()) == b"\x00\x0a\x00\x3d"
    m, off = d.server_methods[0x000A003C].decode(x08.ConnectionClose(200, "ok", 0, 0).encode(), 4)
    assert type(m) is v091.ConnectionClose and m.reply_text == "ok"
    # 10.60/10.61 are 0-9-1's connection.blocked/unblocked: never sent to a 0-8 client
    assert d.encode(v091.ConnectionBlocked("low memory")) is None
    assert d.translate_out(v091.ConnectionUnblocked()) is None


def test_0_8_channel_open_ok_has_no_payload_and_0_9_keeps_its_longstr():
    assert get_dialect("0-8").encode(v091.ChannelOpenOk()) == b"\x00\x14\x00\x0b"
    assert get_dialect("0-9").encode(v091.ChannelOpenOk()) == b"\x00\x14\x00\x0b\x00\x00\x00\x00"
    assert get_dialect("0-8").translate_out(v091.ChannelOpenOk(b"x")) == x08.ChannelOpenOk()


def test_fields_absent_in_one_version_get_defaults_and_renamed_fields_map():
    d8, d9 = get_dialect("0-8"), get_dialect("0-9")
    consume = d8.translate_in(x08.BasicConsume(1, "q", "t", False, True, False, True))
    assert consume == v091.BasicConsume(1, "q", "t", False, True, False, True, {})
    assert d9.translate_in(x09.BasicConsume(0, "q", "t", filter={"k": 1})).arguments == {"k": 1}
    assert d9.translate_out(v091.BasicConsume(queue="q", arguments={"k": 2})).filter == {"k": 2}
    assert d8.translate_out(v091.BasicConsume(queue="q", arguments={"k": 2})) == x08.BasicConsume(0, "q")
    assert d8.translate_in(x08.ConnectionOpen("/", "", True)) == v091.ConnectionOpen("/", "", True)


@pytest.mark.parametrize("key, native, target", [
    ("0-8", x08.BasicRecover(True), v091.BasicRecoverAsync(True)),
    ("0-8-qpid", x08.BasicRecover(True), v091.BasicRecover(True)),
    ("0-8-qpid", q08.BasicRecoverOk(), v091.BasicRecoverOk()),
    ("0-9", x09.BasicRecover(True), v091.BasicRecoverAsync(True)),
    ("0-9", q09.BasicRecoverSync(True), v091.BasicRecover(True)),
    ("0-9", q09.BasicRecoverSyncOk(), v091.BasicRecoverOk()),
    ("0-91-qpid", q91.BasicRecover(True), v091.BasicRecoverAsync(True)),
    ("0-91-qpid", q91.BasicRecoverSync(True), v091.BasicRecover(True)),
])
def test_basic_recover_forms_translate_to_0_9_1_async_or_sync(key, native, target):
    assert get_dialect(key).translate_in(native) == target


def test_sync_recover_is_answered_in_the_form_of_the_table_it_came_from():
    d8, q8, d9 = get_dialect("0-8"), get_dialect("0-8-qpid"), get_dialect("0-9")
    ok = v091.BasicRecoverOk()
    assert d8.replies[60 << 16 | 110][1](ok) == b"\x00\x3c\x00\x6f"  # RabbitMQ's 0-8: 60.111
    assert 60 << 16 | 100 not in d8.replies  # 0-8's own recover is asynchronous
    assert q8.replies[60 << 16 | 100][1](ok) == b"\x00\x3c\x00\x65"  # Qpid 0-8: 60.101
    assert d9.replies[60 << 16 | 102][1](ok) == b"\x00\x3c\x00\x65"  # Qpid 0-9 recover-sync: 60.101
    assert d9.replies[60 << 16 | 110][1](ok) == b"\x00\x3c\x00\x6f"


@pytest.mark.parametrize("key, method", [
    ("0-9", x09.MessageTransfer()), ("0-9", x09.ChannelPing()), ("0-9", x09.FileQos()), ("0-9", x09.StreamQos()),
    ("0-9", x09.TunnelRequest()), ("0-9", x09.DtxSelect()),
    ("0-8", x08.TestInteger()), ("0-8", x08.ChannelAlert()),
])
def test_methods_without_a_0_9_1_equivalent_are_refused_with_540_naming_them(key, method):
    d = get_dialect(key)
    assert d.translate_in(method) is None
    with pytest.raises(NotImplemented_) as ei:
        d.server_methods[method.INDEX].decode(method.encode(), 4)
    e = ei.value
    assert (e.reply_code, e.class_id, e.method_id) == (540, method.CLASS_ID, method.METHOD_ID)
    assert method.NAME in e.text
    # the client mode decodes them as they are
    assert d.decoder(method.INDEX).decode(method.encode(), 4)[0] == method


def test_0_9_and_0_91_accept_the_free_0_9_1_extensions_but_0_8_does_not():
    for name in ("confirm.select", "basic.nack", "exchange.bind", "exchange.unbind-ok", "connection.update-secret"):
        cls = next(c for c in v091.METHODS.values() if c.NAME == name)
        assert get_dialect("0-9").server_methods[cls.INDEX] is cls
        assert get_dialect("0-91-qpid").server_methods[cls.INDEX] is cls
        assert cls.INDEX not in get_dialect("0-8").server_methods
        assert get_dialect("0-8").encode(cls()) is None
    # RabbitMQ's own 0-8 additions are there
    assert get_dialect("0-8").server_methods[v091.QueueUnbind.INDEX] is v091.QueueUnbind
    assert get_dialect("0-8").server_methods[v091.BasicRecover.INDEX] is v091.BasicRecover


def test_0_8_consume_reads_qpid_s_trailing_arguments_table_when_present():
    d = get_dialect("0-8")
    assert d.tails[v091.BasicConsume.INDEX] is v091.BasicConsume
    assert d.translate_in(q08.BasicConsume(0, "q", "t", arguments={"a": 1})).arguments == {"a": 1}


def test_0_8_server_properties_have_empty_capabilities_and_only_0_8_table_types():
    props = {"product": "Warren", "capabilities": {"publisher_confirms": True}, "flag": True, "f": 1.5,
             "nested": {"b": False, "s": "x"}}
    assert get_dialect("0-8").server_properties(props) == {"product": "Warren", "capabilities": {}, "flag": 1,
                                                            "nested": {"b": 0, "s": "x"}}
    assert get_dialect("0-9").server_properties(props) is props


def test_reply_codes_and_method_ids_in_closes_as_the_version_names_them():
    d8, d9, d91 = get_dialect("0-8"), get_dialect("0-9"), get_dialect("0-91-qpid")
    assert d8.reply(505, "UNEXPECTED_FRAME - x", 60, 40) == (503, "COMMAND_INVALID - x", 60, 40)
    assert d9.reply(505, "UNEXPECTED_FRAME - x", 0, 0) == (503, "COMMAND_INVALID - x", 0, 0)
    assert d91.reply(505, "UNEXPECTED_FRAME - x", 0, 0) == (505, "UNEXPECTED_FRAME - x", 0, 0)
    assert d8.reply(406, "PRECONDITION_FAILED", 60, 80) == (406, "PRECONDITION_FAILED", 60, 80)
    assert d8.reply(503, "COMMAND_INVALID - close", 10, 50) == (503, "COMMAND_INVALID - close", 10, 60)


@pytest.mark.parametrize("key", DIALECTS)
def test_fields_with_the_same_name_have_the_same_type_in_every_translation(key):
    d = get_dialect(key)
    for native, convert in d._to_091.items():
        target = type(convert(native()))
        types = dict(target.FIELDS)
        for name, t in native.FIELDS:
            if name in types:
                assert types[name] == t, (native.NAME, name)


@pytest.mark.parametrize("response, expected", [
    (encode_table({"LOGIN": "u", "PASSWORD": "p"}), b"\0u\0p"),  # the 0-8 XML's PLAIN
    (encode_table({"LOGIN": "u", "PASSWORD": "p"})[4:], b"\0u\0p"),  # without the table length
    (b"\0u\0p", b"\0u\0p"),  # SASL PLAIN as every client sends it
    (b"\0\0\0\0", b"\0\0\0\0"),  # an empty table: left for the broker to refuse
])
def test_0_8_plain_response_in_table_form_becomes_sasl_plain(response, expected):
    m = v091.ConnectionStartOk({}, "PLAIN", response, "en_US")
    assert get_dialect("0-8").start_ok(m).response == expected
    assert get_dialect("0-9").start_ok(v091.ConnectionStartOk({}, "PLAIN", response)).response == response


def test_qpid_clients_are_recognised_from_their_client_properties():
    d = get_dialect("0-8")
    assert d.refine({"product": "Qpid"}).key == "0-8-qpid"
    assert d.refine({"product": "x", "qpid.client_process": "p"}).key == "0-8-qpid"
    assert d.refine({"product": "py-amqplib"}).key == "0-8"
    assert get_dialect("0-9").refine({"product": "Qpid"}).key == "0-9"


# --- the server connection in each dialect (bytes only) ---------------------------------------------

def frames_of(conn: ServerConnection) -> list[tuple[int, int, bytes]]:
    fb = FrameBuffer(0)
    fb.feed(b"".join(bytes(p) for p in conn.data_to_send()))
    out = []
    while (f := fb.next_frame()) is not None:
        ftype, channel, start, end = f
        out.append((ftype, channel, bytes(fb.buf[start:end])))
    return out


def events(conn: ServerConnection, data: bytes) -> list:
    conn.receive_data(data)
    out = []
    while (e := conn.next_event()) is not None:
        out.append(e)
    return out


def open_conn(key: str, client_properties=None, tune=(16, 4096 * 4, 0), **kw) -> ServerConnection:
    d = get_dialect(key)
    conn = ServerConnection({"product": "warren", "capabilities": {"basic.nack": True}}, dialect=d,
                            frame_max=4096 * 4, channel_max=16, **kw)
    [(_, _, start)] = frames_of(conn)
    m, _ = d.decoder(struct.unpack_from(">I", start)[0]).decode(start, 4)
    conn.start = m
    events(conn, method_frame(0, d.encode(v091.ConnectionStartOk(client_properties or {"product": "t"}, "PLAIN",
                                                                  b"\0guest\0guest", "en_US"))))
    conn.accept_login()
    frames_of(conn)
    events(conn, method_frame(0, d.encode(v091.ConnectionTuneOk(*tune))))
    events(conn, method_frame(0, d.encode(v091.ConnectionOpen("/"))))
    conn.accept_open()
    frames_of(conn)
    assert conn.is_open
    return conn


def test_0_8_connection_start_names_version_8_0_with_empty_capabilities():
    conn = open_conn("0-8")
    assert (conn.start.version_major, conn.start.version_minor) == (8, 0)
    assert conn.start.server_properties == {"product": "warren", "capabilities": {}}
    assert (open_conn("0-91-qpid").start.version_minor, open_conn("0-9").start.version_minor) == (91, 9)


def test_server_connection_translates_0_8_channel_open_ok_close_and_connection_close():
    conn = open_conn("0-8")
    [ev] = events(conn, method_frame(1, v091.ChannelOpen().encode()))
    assert isinstance(ev, ChannelOpened)
    assert frames_of(conn) == [(1, 1, b"\x00\x14\x00\x0b")]
    conn.close_connection(320, "CONNECTION_FORCED - bye")
    [(_, _, payload)] = frames_of(conn)
    assert payload[:4] == b"\x00\x0a\x00\x3c"
    [ev] = events(conn, method_frame(0, b"\x00\x0a\x00\x3d"))  # 0-8 close-ok
    assert conn.is_closed


def test_server_connection_refines_0_8_to_qpid_at_start_ok():
    assert open_conn("0-8", {"product": "Qpid"}).dialect.key == "0-8-qpid"
    assert open_conn("0-8", {"product": "amqplib"}).dialect.key == "0-8"


def test_server_connection_answers_qpid_0_8_recover_with_60_101_and_0_8_recover_not_at_all():
    conn = open_conn("0-8", {"product": "Qpid"})
    events(conn, method_frame(1, v091.ChannelOpen().encode()))
    frames_of(conn)
    [ev] = events(conn, method_frame(1, x08.BasicRecover(True).encode()))
    assert isinstance(ev, Method) and type(ev.method) is v091.BasicRecover  # the broker replies recover-ok
    conn.send_method(1, v091.BasicRecoverOk())
    assert frames_of(conn) == [(1, 1, b"\x00\x3c\x00\x65")]
    plain = open_conn("0-8")
    events(plain, method_frame(1, v091.ChannelOpen().encode()))
    [ev] = events(plain, method_frame(1, x08.BasicRecover(True).encode()))
    assert type(ev.method) is v091.BasicRecoverAsync  # no reply


def test_server_connection_drops_methods_the_version_does_not_have():
    conn = open_conn("0-8")
    frames_of(conn)
    conn.send_method(0, v091.ConnectionBlocked("memory"))
    conn.send_method(1, v091.ConfirmSelectOk())
    assert frames_of(conn) == [] and conn.dropped == 2


def test_server_connection_refuses_unknown_ids_per_dialect():
    conn = open_conn("0-8")
    with pytest.raises(NotImplemented_, match="unknown method 85.10"):
        events(conn, method_frame(1, v091.ConfirmSelect().encode()))  # no confirms in 0-8


def test_server_connection_reads_the_trailing_consume_table_of_qpid_0_8():
    conn = open_conn("0-8")
    events(conn, method_frame(1, v091.ChannelOpen().encode()))
    [ev] = events(conn, method_frame(1, q08.BasicConsume(0, "q", "t", arguments={"x": 1}).encode()))
    assert ev.method.arguments == {"x": 1}
    [ev] = events(conn, method_frame(1, x08.BasicConsume(0, "q", "u").encode()))
    assert ev.method.arguments == {} and ev.method.consumer_tag == "u"


@pytest.mark.parametrize("key, tune, frame_max, refused", [
    ("0-8", (16, 0, 0), 4096 * 4, False),
    ("0-8", (16, 1 << 20, 0), 4096 * 4, False),
    ("0-8", (16, 8192, 0), 8192, False),
    ("0-9", (0, 0, 0), 4096 * 4, False),
    ("0-8", (16, 2048, 0), None, True),
    ("0-8", (17, 8192, 0), None, True),
    ("0-9-1", (16, 0, 0), None, True),
    ("0-9-1", (16, 1 << 20, 0), None, True),
])
def test_tune_ok_rules_per_version(key, tune, frame_max, refused):
    if refused:
        with pytest.raises(NotAllowed):
            open_conn(key, tune=tune)
        return
    conn = open_conn(key, tune=tune)
    assert conn.frame_max == frame_max and conn.frames.max_frame_size == frame_max
    assert conn.channel_max == 16


@pytest.mark.parametrize("key", ["0-8", "0-9", "0-9-1"])
def test_channel_max_counts_open_channels_in_every_version(key):
    # 0-8/0-9: "the maximum total number of channels"; 0-9-1 as RabbitMQ reads it (any number
    # 1..65535, channel-max open at once), not D89's highest number
    conn = open_conn(key, tune=(2, 8192, 0))
    events(conn, method_frame(300, v091.ChannelOpen().encode()))
    events(conn, method_frame(65535, v091.ChannelOpen().encode()))
    with pytest.raises(NotAllowed, match="number of channels opened"):
        events(conn, method_frame(3, v091.ChannelOpen().encode()))


def test_reserved_0_8_frame_types_are_not_implemented_but_unknown_in_0_9_1():
    frame = struct.pack(">BHI", 7, 0, 0) + b"\xce"
    with pytest.raises(NotImplemented_, match="trace"):
        events(open_conn("0-9"), frame)
    with pytest.raises(FrameError, match="unknown frame type 7"):
        events(open_conn("0-9-1"), frame)


def test_unexpected_frame_goes_out_as_503_on_0_8():
    conn = open_conn("0-8")
    events(conn, method_frame(1, v091.ChannelOpen().encode()))
    frames_of(conn)
    header = struct.pack(">BHIHHQH", FRAME_HEADER, 1, 14, 60, 0, 0, 0) + b"\xce"
    with pytest.raises(UnexpectedFrame) as ei:
        events(conn, header)
    conn.close_connection(ei.value.reply_code, ei.value.reply_text)
    [(_, _, payload)] = frames_of(conn)
    close, _ = x08.ConnectionClose.decode(payload, 4)
    assert close.reply_code == 503 and close.reply_text.startswith("COMMAND_INVALID")


def test_connection_method_on_a_channel_is_still_503_in_0_8():
    conn = open_conn("0-8")
    events(conn, method_frame(1, v091.ChannelOpen().encode()))
    with pytest.raises(CommandInvalid):
        events(conn, method_frame(1, x08.ConnectionClose(200, "", 0, 0).encode()))


@pytest.mark.parametrize("key, method", [
    ("0-9", q09.ExchangeBound("x", "k", "q")), ("0-8", q08.ExchangeBound("x", "k", "q")),
    ("0-8-qpid", q08.ExchangeBound("x", "k", "q")), ("0-91-qpid", q91.ExchangeBound("x", "k", "q")),
])
def test_qpid_exchange_bound_reaches_the_broker_in_its_native_form(key, method):
    d = get_dialect(key)
    assert method.INDEX not in d.unsupported
    decoded, _ = d.server_methods[method.INDEX].decode(method.encode(), 4)
    assert decoded == method
    reply = type(method).__module__
    assert d.encode(__import__(reply, fromlist=["x"]).ExchangeBoundOk(0, "")) is not None
