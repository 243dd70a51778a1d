"""The one table of answers to input that does not decode (warren/codec/refusals.py): each kind
of failure per protocol family, and every malformed property list mapped to a client's-fault
code, never 541."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings

from tests.codec.test_properties import REFUSED, hostile_lists
from warren.spec.fields import FieldTruncated, decode_table
from warren.codec.properties import properties_error, properties_failure
from warren.codec.refusals import (
    DECODE_FAILURES, INVALID, MALFORMED, TRUNCATED, amqp0_9_1_refusal, amqp0_10_execution_code,
    amqp0_10_framing_code, failure_kind, http_status,
)
from warren.errors import FrameError, PreconditionFailed, SyntaxError_
from warren.spec import amqp0_10 as spec010


@pytest.mark.parametrize("exc, kind", [
    (FieldTruncated("longstr runs past the end of the frame"), TRUNCATED),
    (IndexError("index out of range"), TRUNCATED),
    (struct.error("unpack_from requires a buffer"), TRUNCATED),
    (ValueError("unknown field-table type 'Z'"), MALFORMED),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), MALFORMED),
    (OverflowError("too large"), MALFORMED),
    (RecursionError("maximum recursion depth exceeded"), MALFORMED),
    (KeyError("x"), None), (TypeError("x"), None), (AttributeError("x"), None),  # our bugs: 541
])
def test_a_decoders_exception_names_its_kind_and_anything_else_is_ours(exc, kind):
    assert failure_kind(exc) == kind
    assert isinstance(exc, DECODE_FAILURES) == (kind is not None)


def test_the_0_8_family_answers_501_502_and_406_naming_the_method():
    truncated = amqp0_9_1_refusal(TRUNCATED, "cut", 60, 40)
    assert (type(truncated), truncated.reply_code, truncated.hard, truncated.class_id, truncated.method_id) == \
        (FrameError, 501, True, 60, 40)
    malformed = amqp0_9_1_refusal(MALFORMED, "bad", 50, 10)
    assert (type(malformed), malformed.reply_code, malformed.hard) == (SyntaxError_, 502, True)
    invalid = amqp0_9_1_refusal(INVALID, "no", 60, 40, channel=3)
    assert (type(invalid), invalid.reply_code, invalid.hard, invalid.channel) == (PreconditionFailed, 406, False, 3)


def test_the_0_10_codes_are_the_specs():
    E = spec010.ExecutionErrorCode
    assert amqp0_10_execution_code(TRUNCATED) == amqp0_10_execution_code(MALFORMED) == E.ILLEGAL_ARGUMENT
    assert amqp0_10_execution_code(INVALID) == E.PRECONDITION_FAILED
    assert amqp0_10_framing_code() == spec010.ConnectionCloseCode.FRAMING_ERROR


def test_the_http_api_answers_400_for_every_kind():
    assert {http_status(k) for k in (TRUNCATED, MALFORMED, INVALID)} == {400}


def test_a_json_body_nested_past_the_parsers_depth_is_a_malformed_body():
    with pytest.raises(DECODE_FAILURES) as e:
        json.loads(b"[" * 100_000)
    assert failure_kind(e.value) == MALFORMED


def test_a_table_cut_by_the_frame_is_truncated_one_with_a_bad_type_malformed():
    with pytest.raises(DECODE_FAILURES) as cut:
        decode_table(struct.pack(">I", 50) + b"\x01k", 0)
    assert failure_kind(cut.value) == TRUNCATED
    with pytest.raises(DECODE_FAILURES) as bad:
        decode_table(struct.pack(">I", 4) + b"\x01kZ\x00", 0)
    assert failure_kind(bad.value) == MALFORMED


@pytest.mark.parametrize("props", list(REFUSED.values()), ids=list(REFUSED))
def test_every_property_list_rabbitmq_refuses_541_has_a_clients_fault_kind(props):
    kind, why = properties_failure(props)
    assert kind in (TRUNCATED, MALFORMED) and why == properties_error(props)
    assert amqp0_9_1_refusal(kind, why, 60, 40).reply_code in (501, 502)


@settings(max_examples=300, deadline=None)
@given(hostile_lists)
def test_any_octets_get_a_verdict_and_a_kind_together(props):
    failure = properties_failure(props)
    assert (failure is None) == (properties_error(props) is None)
    if failure is not None:
        assert failure[0] in (TRUNCATED, MALFORMED)
