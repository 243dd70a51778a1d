"""SQL filter expressions and JMS selectors (warren/protocol/amqp1_0/sql_filter.py) and how a
link's filter set takes them (filters.py): values, three-valued logic, LIKE, the errors found
at attach, and a fuzz of the parser and evaluator."""

from __future__ import annotations

import random
import re
import uuid

import pytest

from warren.codec.amqp1_0.types import Described, Symbol, Timestamp, UByte, UInt, ULong
from warren.protocol.amqp1_0.filters import InvalidSelector, parse_filter
from warren.protocol.amqp1_0.sql_filter import JMS, MAX_LENGTH, SQL, SqlError, parse
from warren.spec import amqp1_0 as spec

S = Symbol


def message(**fields):
    header = spec.Header(durable=fields.pop("durable", False), priority=fields.pop("priority", None),
                         delivery_count=UInt(fields.pop("delivery_count", 0)))
    annotations = fields.pop("annotations", {})
    application = fields.pop("application", {})
    return spec.Properties(**fields), application, header, annotations


ORDER = message(subject="Order.created", message_id="id-7", user_id=b"John", to="/queues/orders",
                content_type=S("application/json"), creation_time=Timestamp(1_753_365_622_460),
                group_id="Group A", group_sequence=UInt(9), correlation_id=ULong(42), priority=UByte(7),
                durable=True,
                application={"region": "emea", "price": 99.99, "qty": 3, "premium": True, "name": "John Smith",
                             "weight": UInt(12), "kind": S("gold"), "blob": b"\x01\x02", "nothing": None,
                             "order-status": "pending", "注文": "はい", "items": [1, 2]})


def sql(text: str, m=ORDER, dialect=SQL):
    return parse(text, dialect).matches(*m)


@pytest.mark.parametrize("text,want", [
    # the examples of RabbitMQ 4.2's stream-filtering guide
    ("header.priority = 7", True), ("h.priority > 4", True),
    ("p.user_id = 'John'", True), ("p.user_id = 0x4A6F686E", True),
    ("p.to = '/queues/orders'", True), ("p.subject LIKE 'Order%'", True),
    ("p.correlation_id IS NOT NULL", True), ("p.content_type = 'application/json'", True),
    ("p.content_encoding IN ('gzip', 'zstd')", False), ("p.content_encoding IS NULL", True),
    ("p.creation_time < 1753365622461", True), ("p.group_id = 'Group A'", True),
    ("p.group_sequence % 3 = 0", True), ("p.reply_to_group_id IS NULL", True),
    ("properties.message_id = 'id-7'", True), ("p.correlation_id = 42", True),
    ("application_properties.region = 'emea'", True), ("a.region = 'emea'", True), ("region = 'emea'", True),
    ("region = \"emea\"", True), ("name LIKE 'John % Smith'", False), ("name LIKE 'John%Smith'", True),
    ("[order-status] = 'pending'", True), ("[注文] = 'はい'", True),
    ("price >= 99.99 AND qty * price > 299", True), ("qty / 2 = 1.5", True), ("qty + 5 > weight", False),
    ("price - 0.99 = 99", True), ("-qty < +qty", True), ("value = 1.23E6", False), ("qty = 3.0", True),
    ("premium = TRUE", True), ("premium", True), ("NOT premium", False), ("premium = 1", False),
    ("kind = 'gold'", True), ("blob = 0x0102", True), ("region > 'ab' AND region < 'f'", True),
    ("region IN ('amer', 'emea', 'apj')", True), ("region NOT IN ('amer', 'apj')", True),
    ("region <> 'emea'", False), ("region != 'amer'", True),
    ("(region = 'x' OR qty = 3) AND NOT premium = FALSE", True),
    ("p.absolute_expiry_time IS NULL OR p.absolute_expiry_time > UTC()", True),
    ("p.creation_time > UTC() - 3600000", False),
    ("items IS NULL", True),  # a list is no value an expression reads
    ("qty % 2 = 1", True), ("-7 % 3 = -1", True), ("qty % 1.5 = 0", False), ("qty / 0 = 1", False),
])
def test_sql_expressions(text, want):
    assert sql(text) is want


def test_a_message_without_a_priority_has_the_default_four():
    assert sql("h.priority = 4", message())


@pytest.mark.parametrize("text,want", [
    ("region = 'emea' AND qty BETWEEN 1 AND 5", True), ("qty NOT BETWEEN 1 AND 5", False),
    ("qty between 4 and 5", False), ("name like 'J_hn%'", True), ("name NOT LIKE 'J%'", False),
    ("region in ('emea')", True), ("missing IS NULL", True), ("missing is not null", False),
    ("JMSPriority = 7", True), ("JMSDeliveryMode = 'PERSISTENT'", True), ("JMSMessageID = 'id-7'", True),
    ("JMSCorrelationID = 'ID:AMQP_ULONG:42'", True), ("JMSTimestamp > 1000", True), ("JMSType = 'Order.created'", True),
    ("JMSXUserID = 'John'", True), ("JMSXGroupID = 'Group A'", True), ("JMSXGroupSeq = 9", True),
    ("JMSXDeliveryCount = 1", True), ("qty = 3L", True), ("qty = 0x3", True), ("qty = 03", True),
    ("price > 1e1", True), ("price < 100.", True), ("price > .5", True), ("TRUE", True), ("false OR premium", True),
    ("$odd_name IS NULL", True),
])
def test_jms_selectors(text, want):
    assert sql(text, dialect=JMS) is want


def test_jms_type_is_qpid_jms_annotation_first():
    m = message(subject="s", annotations={S("x-opt-jms-type"): "t"})
    assert sql("JMSType = 't'", m, JMS)


def test_an_empty_jms_selector_selects_everything():
    assert sql("  ", message(), JMS)


def test_message_ids_of_other_types_as_jms_shows_them():
    u = uuid.UUID(int=5)
    assert sql(f"JMSMessageID = 'ID:AMQP_UUID:{u}'", message(message_id=u), JMS)
    assert sql("JMSMessageID = 'ID:AMQP_BINARY:0AFF'", message(message_id=b"\x0a\xff"), JMS)


T, F, U = "TRUE", "FALSE", "missing = 1"  # U: unknown (a missing property)


@pytest.mark.parametrize("a", [T, F, U])
@pytest.mark.parametrize("b", [T, F, U])
def test_three_valued_logic(a, b):
    value = {T: True, F: False, U: None}

    def and3(x, y):
        return False if False in (x, y) else None if None in (x, y) else True

    def or3(x, y):
        return True if True in (x, y) else None if None in (x, y) else False

    def not3(x):
        return None if x is None else not x

    for dialect in (SQL, JMS):
        # a message matches only when the expression is true; NOT tells false from unknown
        for text, want in ((f"{a} AND {b}", and3(value[a], value[b])), (f"{a} OR {b}", or3(value[a], value[b]))):
            assert parse(text, dialect).matches(*ORDER) is (want is True)
            assert parse(f"NOT ({text})", dialect).matches(*ORDER) is (not3(want) is True)


@pytest.mark.parametrize("text", [
    "", "region =", "region = 'emea' =", "a = 1 = 2", "and = 1", "Region = 'x' and qty = 3", "exists = 1",
    "p.no_such_field = 1", "header.durable = TRUE", "m.x = 1", "x LIKE 'a\\' ESCAPE '\\'", "x LIKE 'a' ESCAPE 'ab'",
    "x LIKE 5", "x LIKE 'a\x01'", "'a' IS NULL", "(a = 1", "a = 1)", "a IN ()", "a BETWEEN 1 AND 2", "UTC = 1",
    "a = 0xab", "a = 1E5", "a = #", "[a\nb] = 1", "x = " + "(" * 60 + "1" + ")" * 60,
    "a = 1 AND " * 60 + "b = 2", "a = '" + "x" * MAX_LENGTH + "'", "a = 'unterminated",
])
def test_sql_expressions_refused_at_attach(text):
    with pytest.raises(SqlError):
        parse(text, SQL)


@pytest.mark.parametrize("text", [
    "a =", "a % 2 = 1", "a = \"x\"", "a != 1", "p.subject = 'x'", "[a] = 1", "a BETWEEN 1", "a LIKE 'x' ESCAPE",
    "NOT", "a IS NULL NULL", "a = 0x1G",
])
def test_jms_selectors_refused(text):
    with pytest.raises(SqlError):
        parse(text, JMS)


def test_a_non_string_expression_is_refused():
    with pytest.raises(SqlError):
        parse(Described(S("amqp:sql-filter"), "a = 1"), SQL)
    with pytest.raises(SqlError):
        parse(5, SQL)


# --- LIKE --------------------------------------------------------------------------------------

def reference_like(pattern: str, subject: str, escape: str | None) -> bool:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.fullmatch("".join(out), subject, re.DOTALL) is not None


def test_like_agrees_with_a_regular_expression_on_random_patterns():
    rng = random.Random(36)
    for _ in range(3000):
        pattern = "".join(rng.choice("ab%_!") for _ in range(rng.randrange(0, 8)))
        if pattern.endswith("!") and (len(pattern) - len(pattern.rstrip("!"))) % 2:
            pattern += "a"  # no dangling escape
        subject = "".join(rng.choice("ab_%!") for _ in range(rng.randrange(0, 10)))
        quoted = pattern.replace("'", "''")
        got = parse(f"s LIKE '{quoted}' ESCAPE '!'").matches(None, {"s": subject})
        assert got is reference_like(pattern, subject, "!"), (pattern, subject)


def test_a_pattern_made_to_backtrack_still_answers():
    # a pattern of many wildcards, which a regular-expression LIKE may backtrack on for long
    pattern = "%_" * 1000 + "%X"
    expression = parse(f"s LIKE '{pattern}'")
    assert not expression.matches(None, {"s": "a" * 3000})
    assert expression.matches(None, {"s": "a" * 1999 + "X"})


def test_like_on_something_not_a_string_is_unknown():
    assert not sql("qty LIKE '3'")
    assert not sql("NOT (qty LIKE '3')")
    assert sql("p.user_id LIKE 'Jo%'")  # a binary of UTF-8 reads as its text


# --- the fuzz: any input parses or raises SqlError; evaluation never raises -------------------

WORDS = ["AND", "OR", "NOT", "LIKE", "IN", "IS", "NULL", "ESCAPE", "TRUE", "FALSE", "UTC", "BETWEEN", "and",
         "region", "qty", "price", "p.subject", "h.priority", "a.region", "[x]", "JMSPriority", "'emea'", "'%a_'",
         "\"q\"", "0x0A", "3", "1.5", "1e3", "2L", "=", "<>", "!=", "<", ">=", "+", "-", "*", "/", "%", "(", ")",
         ",", "'", "[", ".", "\\", "\x00", "é"]


def test_fuzz_parse_and_evaluate():
    rng = random.Random(2026)
    parsed = 0
    for _ in range(20000):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 12)))
        if rng.random() < 0.2:  # and some without the spaces
            text = text.replace(" ", "")
        for dialect in (SQL, JMS):
            try:
                expression = parse(text, dialect)
            except SqlError:
                continue
            parsed += 1
            assert expression.matches(*ORDER) in (True, False)
            assert expression.matches(*message()) in (True, False)
    assert parsed > 500  # the fuzz reaches the evaluator


# --- a link's filter set -----------------------------------------------------------------------

def d(descriptor, value):
    return Described(S(descriptor) if isinstance(descriptor, str) else ULong(descriptor), value)


def test_an_sql_expression_by_symbol_or_code_is_in_place_on_a_stream():
    for descriptor in ("amqp:sql-filter", 0x120):
        f = parse_filter({S("sql-filter"): d(descriptor, "region = 'emea'")}, stream=True)
        assert list(f.effective) == ["sql-filter"] and f.refused == []
        assert f.match.matches(*ORDER)
        assert not f.match.matches(*message(application={"region": "amer"}))


def test_an_sql_expression_that_does_not_parse_is_left_out_and_said_why():
    f = parse_filter({S("o"): d("rabbitmq:stream-offset-spec", "first"), S("sql-filter"): d(0x120, "region =")},
                     stream=True)
    assert list(f.effective) == ["o"] and f.match is None
    assert [name for name, _ in f.refused] == ["sql-filter"]


def test_sql_and_property_expressions_exclude_each_other():
    prop = d("amqp:application-properties-filter", {"region": "emea"})
    f = parse_filter({S("sql-filter"): d(0x120, "qty = 3"), S("p"): prop}, stream=True)
    assert list(f.effective) == ["sql-filter"]
    f = parse_filter({S("p"): prop, S("sql-filter"): d(0x120, "qty = 3")}, stream=True)
    assert list(f.effective) == ["p"]


def test_a_jms_selector_holds_beside_the_others():
    f = parse_filter({S("jms-selector"): d("apache.org:selector-filter:string", "qty > 2"),
                      S("sql-filter"): d(0x120, "region = 'emea'")}, stream=True)
    assert set(f.effective) == {"jms-selector", "sql-filter"}
    assert f.match.matches(*ORDER)
    assert not f.match.matches(*message(application={"region": "emea", "qty": 1}))
    by_code = parse_filter({S("selector"): d(0x0000468C00000004, "qty > 2")}, stream=True)
    assert list(by_code.effective) == ["selector"] and by_code.match.matches(*ORDER)


def test_a_jms_selector_that_does_not_parse_refuses_the_link():
    with pytest.raises(InvalidSelector):
        parse_filter({S("jms-selector"): d("apache.org:selector-filter:string", "qty >")}, stream=True)


def test_a_queue_that_is_not_a_stream_takes_no_expression():
    f = parse_filter({S("jms-selector"): d("apache.org:selector-filter:string", "qty >"),
                      S("sql-filter"): d(0x120, "qty = 3")}, stream=False)
    assert f.effective == {} and f.match is None
