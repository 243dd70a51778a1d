"""Which answer refuses input that does not decode or is not valid: one table per protocol family.

A client that sends octets Warren cannot take is at fault, and the answer must say so: 541
INTERNAL_ERROR tells the client, its library and the operator's monitoring that the *broker*
broke, so it is kept for Warren's own bugs (logged with a traceback where they are caught:
``warren/protocol/amqp0_9_1/adapter.py``, ``warren/protocol/amqp0_10/adapter.py``, the HTTP
API's error middleware). Every place that parses client input (the 0-9-1 frame-by-frame path,
the publish fast path and what the compiled ``_speedups.c`` leaves to it, the 0-10 session
layer, the HTTP API's JSON bodies) names the kind of failure, and the answer comes from here.

Kinds of failure:

* ``TRUNCATED``: a length or a value runs past the frame (or the property list) holding it;
* ``MALFORMED``: octets inside their frame that cannot be what they claim (an unknown field
  type letter, tables nested past ``MAX_TABLE_DEPTH``, octets after the last property, a
  timestamp past the year 9999, JSON that does not parse or nests past the parser's depth);
* ``INVALID``: well-formed values the command cannot take (checked by the broker's own rules:
  those raise ``warren.errors`` classes directly, ``PreconditionFailed`` mostly).

The answers, side by side with RabbitMQ 3.10 where it has one (``tests/e2e/test_hostile_answers.py``
sends both brokers the same octets)::

                 0-8, 0-9, 0-9-1                 0-10                               HTTP API
    TRUNCATED    connection.close 501            connection.close framing-error     400 bad_request
                 FRAME_ERROR                     (frames), execution.exception
                                                 illegal-argument 531 (a command)
    MALFORMED    connection.close 502            execution.exception                400 bad_request
                 SYNTAX_ERROR                    illegal-argument 531
    INVALID      channel.close 406               execution.exception                400 bad_request
                 PRECONDITION_FAILED             precondition-failed 406

RabbitMQ answers a content header whose property list does not decode with 541 (its channel
process crashes decoding it) and takes headers nested past 100 deep: Warren answers both as
the table says, 501 or 502 with the class and method of the content's method
(``docs/compatibility.md``, "Hostile input").
"""

from __future__ import annotations

import struct

from warren.errors import AMQPError, FrameError, PreconditionFailed, SyntaxError_
from warren.spec.fields import FieldTruncated

__all__ = [
    "TRUNCATED", "MALFORMED", "INVALID", "DECODE_FAILURES", "TRUNCATIONS", "failure_kind",
    "amqp0_9_1_refusal", "amqp0_10_execution_code", "amqp0_10_framing_code", "http_status", "HTTP_ERROR",
]

TRUNCATED = "truncated"
MALFORMED = "malformed"
INVALID = "invalid"

# What the decoders raise for octets that do not decode, and nothing else of theirs: a
# decoder's other exceptions (TypeError, KeyError, AttributeError...) are Warren's bugs.
# FieldTruncated is a ValueError, so it is tested first (TRUNCATIONS). RecursionError: a
# parser (JSON's) that recurses once per level of nesting the client chose.
TRUNCATIONS = (IndexError, struct.error, FieldTruncated)
DECODE_FAILURES = TRUNCATIONS + (ValueError, UnicodeDecodeError, OverflowError, RecursionError)

# 0-8 family: the class of the error raised (each knows its reply code and hard/soft scope)
_AMQP0_9_1 = {TRUNCATED: FrameError, MALFORMED: SyntaxError_, INVALID: PreconditionFailed}
# 0-10: execution.exception error codes (spec.ExecutionErrorCode) and the connection.close
# code for frames (spec.ConnectionCloseCode.FRAMING_ERROR); literal numbers, so the codec
# needs no spec import here. tests/codec/test_refusals.py checks them against the spec.
_AMQP0_10_EXECUTION = {TRUNCATED: 531, MALFORMED: 531, INVALID: 406}
_AMQP0_10_FRAMING = 501
# HTTP API: every kind is the client's request; RabbitMQ's API answers 400 bad_request
HTTP_ERROR = "bad_request"
_HTTP = {TRUNCATED: 400, MALFORMED: 400, INVALID: 400}


def failure_kind(exc: BaseException) -> str | None:
    """TRUNCATED or MALFORMED for what a decoder raises for bad octets; None for anything else
    (a bug of ours, to be answered 541 and logged with its traceback)."""
    if isinstance(exc, TRUNCATIONS):
        return TRUNCATED
    if isinstance(exc, DECODE_FAILURES):
        return MALFORMED
    return None


def amqp0_9_1_refusal(kind: str, text: str, class_id: int = 0, method_id: int = 0, channel: int = 0) -> AMQPError:
    """The error that refuses input of ``kind`` on a 0-8, 0-9 or 0-9-1 connection."""
    err = _AMQP0_9_1[kind](text, class_id, method_id)
    err.channel = channel
    return err


def amqp0_10_execution_code(kind: str) -> int:
    """The execution.exception error code that refuses a 0-10 command (or its header) of ``kind``."""
    return _AMQP0_10_EXECUTION[kind]


def amqp0_10_framing_code() -> int:
    """The connection.close code for 0-10 frames, segments or controls that cannot be trusted."""
    return _AMQP0_10_FRAMING


def http_status(kind: str) -> int:
    """The HTTP status that refuses a request body (or path, or query) of ``kind``."""
    return _HTTP[kind]
