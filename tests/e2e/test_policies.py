"""Policies end to end: `warren policy` (an alias of `warren ctl set_policy|clear_policy|list_policies`)
sets them through the running broker's HTTP API, which applies them to existing and new
queues/exchanges without redeclaring before it answers (RabbitMQ's semantics: one policy per
entity, declared arguments win except numeric limits, lower wins)."""

from __future__ import annotations

import subprocess
import sys
import time

import pika
import pytest

from .helpers import connect, get, message_count, wait_until

pytestmark = pytest.mark.timeout(60)


def cli(b, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "warren", "policy", "--url", b.http_url, *args],
                          capture_output=True, text=True, timeout=30)


def set_policy(b, name: str, pattern: str, definition: str, *opts: str) -> None:
    r = cli(b, "set", name, pattern, definition, *opts)
    assert r.returncode == 0, r.stderr  # in force once it answers: no waiting


def clear_policy(b, name: str) -> None:
    r = cli(b, "clear", name)
    assert r.returncode == 0, r.stderr


@pytest.fixture
def b(start_broker):
    return start_broker()


@pytest.fixture
def chan(b):
    c = connect(b)
    yield c.channel()
    if c.is_open:
        c.close()


def test_message_ttl_policy_applies_to_an_existing_queue(b, chan):
    chan.queue_declare("ttl-q")
    set_policy(b, "ttl", "^ttl-", '{"message-ttl": 500}', "--apply-to", "queues")
    chan.basic_publish("", "ttl-q", b"short-lived")
    assert message_count(chan.connection, "ttl-q") == 1
    assert wait_until(lambda: message_count(chan.connection, "ttl-q") == 0, timeout=5)
    # and a queue declared afterwards gets it too; the declare-ok is unaffected
    ok = chan.queue_declare("ttl-new")
    assert ok.method.message_count == 0
    chan.basic_publish("", "ttl-new", b"x")
    assert wait_until(lambda: message_count(chan.connection, "ttl-new") == 0, timeout=5)
    # the policy did not change the queue's declared arguments: a plain redeclare is equivalent
    chan.queue_declare("ttl-q")


def test_dead_letter_exchange_policy_routes_rejected_messages(b, chan):
    chan.exchange_declare("dlx", "fanout")
    chan.queue_declare("dl-catch")
    chan.queue_bind("dl-catch", "dlx")
    chan.queue_declare("dl-src")
    set_policy(b, "dl", "^dl-src$", '{"dead-letter-exchange": "dlx"}')
    chan.basic_publish("", "dl-src", b"bad")
    method, _, _ = get(chan, "dl-src")
    chan.basic_reject(method.delivery_tag, requeue=False)
    method, props, body = get(chan, "dl-catch", auto_ack=True)
    assert body == b"bad"
    assert props.headers["x-death"][0]["reason"] == "rejected"
    assert props.headers["x-death"][0]["queue"] == "dl-src"


def test_max_length_policy_trims_an_existing_queue_and_later_publishes(b, chan):
    chan.queue_declare("ml-q")
    for i in range(5):
        chan.basic_publish("", "ml-q", str(i).encode())
    assert message_count(chan.connection, "ml-q") == 5
    set_policy(b, "ml", "^ml-", '{"max-length": 2}')
    assert message_count(chan.connection, "ml-q") == 2
    chan.basic_publish("", "ml-q", b"5")
    assert message_count(chan.connection, "ml-q") == 2
    assert [get(chan, "ml-q", auto_ack=True)[2] for _ in range(2)] == [b"4", b"5"]


def test_queue_argument_beats_the_policy_but_limits_take_the_lower(b, chan):
    chan.exchange_declare("mine", "fanout")
    chan.queue_declare("mine-catch")
    chan.queue_bind("mine-catch", "mine")
    chan.exchange_declare("theirs", "fanout")
    chan.queue_declare("theirs-catch")
    chan.queue_bind("theirs-catch", "theirs")
    chan.queue_declare("prec-a", arguments={"x-dead-letter-exchange": "mine", "x-max-length": 3})
    chan.queue_declare("prec-b", arguments={"x-max-length": 1})
    set_policy(b, "prec", "^prec-", '{"dead-letter-exchange": "theirs", "max-length": 2}')
    for q in ("prec-a", "prec-b"):
        for i in range(4):
            chan.basic_publish("", q, str(i).encode())
    assert message_count(chan.connection, "prec-a") == 2  # policy 2 < declared 3
    assert message_count(chan.connection, "prec-b") == 1  # declared 1 < policy 2
    # the declared DLX wins: prec-a's 2 dropped messages went to "mine"; prec-b has no DLX of its
    # own and takes the policy's: its 3 went to "theirs"
    assert message_count(chan.connection, "mine-catch") == 2
    assert message_count(chan.connection, "theirs-catch") == 3


def test_the_highest_priority_policy_is_the_only_one(b, chan):
    chan.queue_declare("prio-q")
    set_policy(b, "wide", ".*", '{"max-length": 1, "message-ttl": 100}', "--priority", "1")
    set_policy(b, "narrow", "^prio-", '{"max-length": 3}', "--priority", "5")
    for i in range(5):
        chan.basic_publish("", "prio-q", str(i).encode())
    time.sleep(0.3)
    assert message_count(chan.connection, "prio-q") == 3  # narrow's limit, and no TTL from wide
    listing = cli(b, "list")
    assert listing.returncode == 0
    assert "narrow" in listing.stdout and "wide" in listing.stdout


def test_apply_to_exchanges_sets_the_alternate_exchange(b, chan):
    chan.exchange_declare("ae", "fanout")
    chan.queue_declare("ae-catch")
    chan.queue_bind("ae-catch", "ae")
    chan.exchange_declare("ex-src", "direct")
    chan.queue_declare("ex-src-q")  # a queue the pattern matches too: apply-to keeps it out
    set_policy(b, "ae", "^ex-src", '{"alternate-exchange": "ae", "max-length": 0}', "--apply-to", "exchanges")
    chan.basic_publish("ex-src", "unroutable", b"via-ae")
    chan.basic_publish("", "ex-src-q", b"kept")
    assert get(chan, "ae-catch", auto_ack=True)[2] == b"via-ae"
    assert message_count(chan.connection, "ex-src-q") == 1


def test_clearing_a_policy_stops_it(b, chan):
    chan.queue_declare("clr-q")
    set_policy(b, "clr", "^clr-", '{"max-length": 1}')
    for i in range(3):
        chan.basic_publish("", "clr-q", str(i).encode())
    assert message_count(chan.connection, "clr-q") == 1
    clear_policy(b, "clr")
    for i in range(3):
        chan.basic_publish("", "clr-q", str(i).encode())
    assert message_count(chan.connection, "clr-q") == 4
    assert cli(b, "clear", "clr").returncode != 0  # not there any more


def test_policies_survive_a_restart(start_broker, tmp_path):
    data = tmp_path / "restart-data"
    b = start_broker(data_dir=data)
    c = connect(b)
    ch = c.channel()
    ch.queue_declare("keep-q", durable=True)
    set_policy(b, "keep", "^keep-", '{"max-length": 2}')
    c.close()
    b.stop()
    b2 = start_broker(data_dir=data)
    c = connect(b2)
    ch = c.channel()
    for i in range(4):
        ch.basic_publish("", "keep-q", str(i).encode(), pika.BasicProperties(delivery_mode=2))
    assert message_count(c, "keep-q") == 2
    c.close()


@pytest.mark.parametrize("definition", ['{not json', '{"bogus-key": 1}', '{"max-length": -5}',
                                        '{"max-priority": 10}', '[]'])
def test_cli_refuses_bad_definitions(b, definition):
    r = cli(b, "set", "p", ".*", definition)
    assert r.returncode == 65, r.stderr  # a data error (docs/ctl.md), and nothing set
    assert "p" not in cli(b, "list", "-s").stdout.split()


def test_cli_refuses_a_bad_pattern_apply_to_and_an_unknown_vhost(b):
    r = cli(b, "set", "p", "(", '{"max-length": 1}')
    assert r.returncode == 65, r.stderr
    r = cli(b, "set", "p", ".*", '{"max-length": 1}', "--apply-to", "topics")
    assert r.returncode == 64, r.stderr  # a usage error, refused before asking the broker
    r = cli(b, "set", "p", ".*", '{"max-length": 1}', "--vhost", "no-such-vhost")
    assert r.returncode == 65 and "does not exist" in r.stderr
    assert cli(b, "list", "-s").stdout.strip() == ""


def test_cli_without_a_broker_says_so(tmp_path):
    r = subprocess.run([sys.executable, "-m", "warren", "policy", "--url", "http://127.0.0.1:9", "list"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 69 and "unable to reach the broker" in r.stderr
