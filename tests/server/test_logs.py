"""Client strings in the log are bounded (issue 29): ``warren/server/logs.py``'s ``clip`` cuts a
string past ``LOG_STRING_MAX`` characters and notes its full length, on every record of the
process, text and JSON alike. The end-to-end tests send a broker 60 KB user names, client
properties and names over real sockets and read its log file."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from tests.e2e import rawamqp as raw
from tests.e2e.helpers import wait_until
from warren.server.logs import LOG_LINE_MAX, LOG_STRING_MAX, ClipFilter, JsonFormatter, TextFormatter, clip

# what "a few KB" means here: the longest line a record may make (time, level, logger and the
# bounded message; a traceback is several lines, each bounded)
LINE_BOUND = LOG_LINE_MAX + 200
HUGE = 60_000


def test_clip_keeps_short_strings_and_notes_the_length_of_long_ones():
    assert clip("guest") == "guest"
    assert clip("x" * LOG_STRING_MAX) == "x" * LOG_STRING_MAX
    cut = clip("u" * HUGE)
    assert cut.startswith("u" * LOG_STRING_MAX) and cut.endswith(f"[{HUGE} chars in all]")
    assert len(cut) < LOG_STRING_MAX + 40
    assert clip(b"\x00" * 1000).endswith("chars in all]")  # anything, as its str


def record(msg, *args, **extra) -> logging.LogRecord:
    r = logging.LogRecord("warren.test", logging.WARNING, __file__, 1, msg, args, None)
    for key, value in extra.items():
        setattr(r, key, value)
    return r


@pytest.mark.parametrize("formatter", [TextFormatter("%(levelname)s %(message)s"), JsonFormatter()],
                         ids=["text", "json"])
def test_every_argument_and_extra_field_is_clipped_numbers_are_kept(formatter):
    r = record("login refused for user %r from %s: %d attempts, %.1f s", "u" * HUGE, "v" * HUGE, 3, 0.5,
               user="u" * HUGE, lived_s=1.5)
    assert ClipFilter().filter(r)
    line = formatter.format(r)
    assert len(line) < 4 * LOG_STRING_MAX, len(line)  # three clipped strings at most
    assert "3 attempts, 0.5 s" in line and f"[{HUGE} chars in all]" in line
    assert line.count("chars in all]") == (3 if isinstance(formatter, JsonFormatter) else 2)
    if isinstance(formatter, JsonFormatter):
        out = json.loads(line)
        assert out["lived_s"] == 1.5 and out["user"].endswith(f"[{HUGE} chars in all]")


def test_a_message_built_with_the_string_in_it_is_bounded_too():
    r = record(f"queue {'q' * HUGE} refused")
    ClipFilter().filter(r)
    assert len(TextFormatter("%(message)s").format(r)) < LOG_LINE_MAX + 40


def test_a_traceback_quoting_a_client_string_has_bounded_lines():
    try:
        raise KeyError("k" * HUGE)
    except KeyError:
        r = logging.LogRecord("warren.test", logging.ERROR, __file__, 1, "failed on %s", ("x",),
                              exc_info=sys.exc_info())
    ClipFilter().filter(r)
    text = TextFormatter("%(message)s").format(r)
    assert "Traceback" in text and "KeyError" in text
    assert max(len(line) for line in text.splitlines()) < LOG_LINE_MAX


# --- over real sockets -----------------------------------------------------------------------------


def long_lines(broker) -> list[int]:
    return [len(line) for line in broker.log().splitlines() if len(line) > LINE_BOUND]


def test_a_refused_login_with_a_60_kb_user_name_logs_lines_of_a_few_kb(start_broker):
    b = start_broker()
    with raw.RawConnection(b.host, b.port) as c:
        port = c.sock.getsockname()[1]
        c.send(raw.PROTOCOL_HEADER)
        c.expect(raw.CONNECTION_START, 0)
        c.send(raw.start_ok("u" * HUGE, "p", client_properties={  # within frame-max (128 KiB)
            "product": "x" * HUGE, "capabilities": {"authentication_failure_close": True}}))
        assert raw.parse_close(c.read_method()).reply_code == 403
    peer = f"127.0.0.1:{port}"
    assert wait_until(lambda: any(peer in line and "connection closed" in line for line in b.log().splitlines()),
                      timeout=10), b.log()[-3000:]
    mine = [line for line in b.log().splitlines() if peer in line]
    assert any("login refused" in line and "chars in all]" in line for line in mine), mine
    assert not long_lines(b), long_lines(b)


def test_json_logs_are_bounded_too(start_broker):
    b = start_broker("--log-format", "json")
    with raw.RawConnection(b.host, b.port) as c:
        c.send(raw.PROTOCOL_HEADER)
        c.expect(raw.CONNECTION_START, 0)
        c.send(raw.start_ok("u" * HUGE, "p", client_properties={"product": "x" * HUGE}))
        raw.parse_close(c.read_method())
    assert wait_until(lambda: "connection closed" in b.log(), timeout=10)
    lines = [json.loads(line) for line in b.log().splitlines() if line.startswith("{")]
    closed = [r for r in lines if "connection closed" in r["message"]]
    assert closed and all(len(json.dumps(r)) <= LINE_BOUND for r in lines)
    assert closed[0]["client"].endswith(f"[{HUGE} chars in all]")


def test_refusals_quoting_long_names_and_client_reasons_stay_bounded(start_broker):
    """Names are shortstrs (255 octets at most: shown whole); an argument's value (a longstr)
    reaches the log through the refusal that quotes it."""
    b = start_broker()
    name = "n" * 255
    with raw.RawConnection(b.host, b.port) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        c.send(raw.queue_declare(1, name, passive=True))  # 404 naming the queue
        close = c.expect_channel_close(1)
        assert close.reply_code == 404
        c.open_channel(2)
        c.send(raw.queue_declare(2, "q", arguments={"x-queue-type": "t" * HUGE}))  # 406 quoting the value
        assert c.expect_channel_close(2).reply_code == 406
        c.send(raw.connection_close(200, "r" * 255))
        c.expect(raw.CONNECTION_CLOSE_OK, 0)
    assert wait_until(lambda: "connection closed" in b.log(), timeout=10)
    log = b.log()
    assert name in log  # a whole shortstr is shown whole
    assert not long_lines(b), long_lines(b)
