"""The stateful hostile-client fuzzer (issue 29): a Hypothesis state machine that keeps 0-9-1
connections and channels and 0-10 sessions open against a private broker, drives them with valid
methods, then mutated methods, property lists, field tables and 0-10 structs, and the HTTP API
with hostile bodies (``hostile.py`` says what is sent and how answers are read). It counts every
answer; the findings are 541 INTERNAL_ERROR (on any connection, channel or session) and HTTP 5xx,
which say the broker broke when the input was the client's fault. Both must be 0.

The bounded run here is part of every CI run (``WARREN_FUZZ_STEPS`` examples of up to 25 steps
each; about a minute). A failure prints the seed (``WARREN_FUZZ_SEED=<seed>`` replays it, as
does ``--hypothesis-seed``) and Hypothesis's shrunk steps. The longer run is under the marker
``fuzz_long`` (``pytest -m fuzz_long tests/protocol/test_hostile_fuzz.py``; WARREN_FUZZ_LONG_EXAMPLES
examples, 2,000 by default), and ``bench/fuzz.py --stateful --minutes N`` runs it for as long as asked.
"""

from __future__ import annotations

import os
import random
import struct

import pytest
from hypothesis import HealthCheck, seed, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from tests.conftest import EXTERNAL_URL, launch_broker
from tests.e2e import rawamqp as raw
from tests.protocol.hostile import (
    CHANNELS, EXCHANGE_TYPES, QUEUES, Amqp010, Amqp091, Http, Tally, amqp0_10_assemblies, argument_tables,
    channel_method_payloads, http_requests, method_frame, property_lists, texts,
)
from warren.spec import amqp0_9_1 as spec

pytestmark = [pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren (its log and its HTTP API)"),
              pytest.mark.timeout(900)]

CI_EXAMPLES = int(os.environ.get("WARREN_FUZZ_STEPS", "30"))
LONG_EXAMPLES = int(os.environ.get("WARREN_FUZZ_LONG_EXAMPLES", "2000"))
SEED = int(os.environ.get("WARREN_FUZZ_SEED") or random.SystemRandom().randrange(2**32))


class HostileClients(RuleBasedStateMachine):
    """One example: a 0-9-1 connection, a 0-10 connection and the HTTP API, against the broker
    set on the class (``run``), for up to ``stateful_step_count`` steps."""

    broker = None
    tally: Tally = Tally()

    @initialize()
    def connect(self):
        self.findings_before = len(self.tally.internal)  # the tally spans examples; this one's start
        self.amqp = Amqp091(self.broker.host, self.broker.port, self.tally)
        self.amqp010 = Amqp010(self.broker, self.tally)
        self.http = Http(self.broker.http_url, self.tally)

    def teardown(self):
        for peer in (getattr(self, "amqp", None), getattr(self, "amqp010", None)):
            if peer is not None:
                try:
                    peer.close()
                except Exception:  # noqa: BLE001 - closing what the broker may have closed already
                    pass

    # --- 0-9-1: valid steps that build state --------------------------------------------------

    @rule(channel=st.sampled_from(CHANNELS), queue=st.sampled_from(QUEUES[:5]), args=argument_tables,
          flags=st.integers(0, 31))
    def declare_queue(self, channel, queue, args, flags):
        self.amqp.ensure_channel(channel)
        passive, durable, exclusive, auto_delete, nowait = (bool(flags >> i & 1) for i in range(5))
        self.amqp.step(method_frame(channel, spec.QueueDeclare(0, queue, passive, durable, exclusive, auto_delete,
                                                               nowait, args)), ("queue.declare", queue, args))

    @rule(channel=st.sampled_from(CHANNELS), name=st.sampled_from(["fz-ex", "fz-hash", "fz-delay", "fz-headers"]),
          kind=st.sampled_from(EXCHANGE_TYPES), args=argument_tables)
    def declare_exchange(self, channel, name, kind, args):
        self.amqp.ensure_channel(channel)
        self.amqp.step(method_frame(channel, spec.ExchangeDeclare(exchange=name, type=kind, arguments=args)),
                       ("exchange.declare", name, kind, args))

    @rule(channel=st.sampled_from(CHANNELS), queue=st.sampled_from(QUEUES[:5]),
          exchange=st.sampled_from(["amq.direct", "amq.headers", "amq.topic", "fz-ex", "fz-hash", "fz-headers"]),
          key=texts.filter(lambda t: len(t.encode()) < 200), args=argument_tables)
    def bind(self, channel, queue, exchange, key, args):
        self.amqp.ensure_channel(channel)
        self.amqp.step(method_frame(channel, spec.QueueBind(queue=queue, exchange=exchange, routing_key=key,
                                                            arguments=args)), ("queue.bind", queue, exchange, key, args))

    @rule(channel=st.sampled_from(CHANNELS), queue=st.sampled_from(QUEUES[:5]), args=argument_tables,
          no_ack=st.booleans())
    def consume(self, channel, queue, args, no_ack):
        self.amqp.ensure_channel(channel)
        self.amqp.step(method_frame(channel, spec.BasicConsume(queue=queue, no_ack=no_ack, arguments=args)),
                       ("basic.consume", queue, args))

    @rule(channel=st.sampled_from(CHANNELS), mode=st.sampled_from([(85, 10, b"\x00"), (90, 10, b""), (60, 10,
                                                                   b"\x00\x00\x00\x00\x00\x02\x00")]))
    def select_mode(self, channel, mode):
        """confirm.select, tx.select or basic.qos: the modes later steps run in."""
        self.amqp.ensure_channel(channel)
        self.amqp.step(raw.method_frame(channel, mode[0], mode[1], mode[2]), ("mode", mode))

    # --- 0-9-1: hostile steps ------------------------------------------------------------------

    @rule(channel=st.sampled_from(CHANNELS), payload=channel_method_payloads())
    def method(self, channel, payload):
        """Any channel method, its fields drawn from what brokers read, maybe mutated."""
        self.amqp.ensure_channel(channel)
        self.amqp.step(raw.frame(raw.FRAME_METHOD, channel, payload), ("method", channel, payload))

    @rule(channel=st.sampled_from(CHANNELS), exchange=st.sampled_from(["", "amq.direct", "amq.headers", "amq.fanout",
                                                                       "fz-ex", "fz-hash", "fz-delay", "fz-headers"]),
          key=st.sampled_from(list(QUEUES) + ["#", "nowhere"]), mandatory=st.booleans(), props=property_lists(),
          body=st.binary(max_size=40), split=st.booleans())
    def publish(self, channel, exchange, key, mandatory, props, body, split):
        """basic.publish with a valid, out-of-range, mutated or poisoned property list, in one
        write (the compiled fast path) or with its body in two frames (the frame-by-frame path)."""
        self.amqp.ensure_channel(channel)
        header = raw.frame(raw.FRAME_HEADER, channel, struct.pack(">HHQ", 60, 0, len(body)) + props)
        if split and len(body) > 1:
            bodies = raw.body_frame(channel, body[:1]) + raw.body_frame(channel, body[1:])
        else:
            bodies = raw.body_frame(channel, body) if body else b""
        self.amqp.step(raw.basic_publish(channel, exchange, key, mandatory) + header + bodies,
                       ("publish", exchange, key, props, body))

    # --- 0-10 ------------------------------------------------------------------------------------

    @rule(segments=amqp0_10_assemblies())
    def command_0_10(self, segments):
        self.amqp010.step(segments, ("0-10", [(t, bytes(p)[:120]) for t, p in segments]))

    # --- HTTP ------------------------------------------------------------------------------------

    @rule(request=http_requests())
    def http_request(self, request):
        self.http.request(*request)

    @invariant()
    def nothing_answered_as_the_brokers_fault(self):
        found = self.tally.internal[getattr(self, "findings_before", 0):]
        assert not found, (
            f"answered as the broker's fault (seed {SEED}: WARREN_FUZZ_SEED={SEED} replays it): {found[:3]}")


def run(broker, examples: int, steps: int = 25) -> Tally:
    """Run the machine against ``broker``; the tally of every answer (the failure, if any, raised
    with Hypothesis's shrunk steps and the seed)."""
    HostileClients.broker = broker
    HostileClients.tally = Tally()
    print(f"stateful fuzzing with seed {SEED} (WARREN_FUZZ_SEED={SEED} replays it)")
    machine = seed(SEED)(HostileClients)
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, database=None, print_blob=True,
        suppress_health_check=list(HealthCheck)))
    return HostileClients.tally


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    b = launch_broker(tmp_path_factory.mktemp("hostile"))
    try:
        yield b
    finally:
        b.stop()


def assert_broker_kept_well(broker, tally: Tally) -> None:
    assert broker.proc.poll() is None, "the broker died"
    log = broker.log()
    assert "Traceback" not in log, log[log.find("Traceback") - 1500:][:5000]
    assert not tally.internal, tally.internal
    # the run reached the broker: answers of several kinds were counted (a fuzzer that only
    # sends what the broker takes would find nothing)
    scopes = {scope for scope, _ in tally.codes}
    assert {"0-9-1 connection", "0-9-1 channel", "http"} <= scopes, tally.summary()


def test_hostile_clients_get_no_541_and_no_5xx(fuzz_broker):
    tally = run(fuzz_broker, CI_EXAMPLES)
    print(tally.summary())
    assert_broker_kept_well(fuzz_broker, tally)


@pytest.mark.fuzz_long
@pytest.mark.timeout(4 * 3600)
def test_hostile_clients_long_run(fuzz_broker, request):
    if "fuzz_long" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the long run takes tens of minutes: run with -m fuzz_long")
    tally = run(fuzz_broker, LONG_EXAMPLES, steps=50)
    print(tally.summary())
    assert_broker_kept_well(fuzz_broker, tally)
