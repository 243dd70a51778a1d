"""dtx branches across the workers of `--worker-mode queues` (warren/spread/dtx.py), end to end:
a node of two workers started here, 0-10 clients over real sockets, kill -9 of the whole node.
Qpid's own dtx suite runs under the mode too (tests/interop_0_10, tools/test-workers)."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.conftest import EXTERNAL_URL
from tests.e2e.test_spread import connect, owned_by, ready, spread_node, wait_for

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")


def _prepare_two_branches(b) -> list[tuple]:
    """One 0-10 connection, one session per worker's queue: each consumes a persistent message
    and publishes one under its own dtx branch, then prepares. Whichever worker the connection
    landed on, one of the two branches accepted a message another worker owns (a part there).
    Returns [(xid, source queue, destination queue)]."""
    from tests.e2e.amqp0_10.client010 import Client010
    from warren.spec import amqp0_10 as spec
    branches = []
    with Client010(b) as client:
        for i, (src, dest) in enumerate(zip(owned_by(0, "spread-dtx-src", 1) + owned_by(1, "spread-dtx-src", 1),
                                            owned_by(0, "spread-dtx-dest", 1) + owned_by(1, "spread-dtx-dest", 1))):
            s = client.session(1 + i)
            for q in (src, dest):
                s.send(spec.QueueDeclare(queue=q, durable=True))
            s.transfer("", b"swap me %d" % i, routing_key=src, delivery=spec.MessageDeliveryProperties(delivery_mode=2))
            xid = spec.DtxXid(format=1, global_id=b"g-%d" % i, branch_id=b"b")
            s.send(spec.DtxSelect())
            assert s.send(spec.DtxStart(xid=xid)).status == 0
            s.subscribe(src, "d")
            m = s.get("d")
            s.accept(m.id)
            s.transfer("", b"swapped %d" % i, routing_key=dest, delivery=spec.MessageDeliveryProperties(delivery_mode=2))
            assert s.send(spec.DtxEnd(xid=xid)).status == 0
            assert s.send(spec.DtxPrepare(xid=xid)).status == 0
            branches.append((xid, src, dest))
    return branches


def _counts(b, queues) -> list[int]:
    with connect(b) as c:
        ch = c.channel()
        return [ch.queue_declare(q, passive=True).method.message_count for q in queues]


def _kill_node(b) -> None:
    pids = [ready(b)["pid"]] + [w["pid"] for w in ready(b)["workers"]]
    for pid in pids:  # the node crashes whole: the PIDs this test started
        os.kill(pid, signal.SIGKILL)
    b.proc.wait(timeout=10)


def _in_doubt_from_each_worker(b) -> list[set]:
    """dtx.recover asked on connections until both workers answered (they are dealt in turn)."""
    from tests.e2e.amqp0_10.client010 import Client010
    from warren.spec import amqp0_10 as spec
    answers = []
    for i in range(2):
        with Client010(b) as client:
            r = client.session(1).send(spec.DtxRecover())
            answers.append({(x.format, bytes(x.global_id), bytes(x.branch_id)) for x in r.in_doubt})
    return answers


def test_prepared_dtx_branches_that_accepted_messages_of_both_workers_survive_kill_9(tmp_path):
    """A branch whose accepted message another worker owns is prepared in two records (the part
    on the owner, the branch on its session's worker) and survives kill -9 of the whole node:
    after the restart both source messages stay held, dtx.recover on either worker lists both
    branches, a commit from either completes the swap and a rollback puts the message back."""
    from tests.e2e.amqp0_10.client010 import Client010
    from warren.spec import amqp0_10 as spec
    data = tmp_path / "data"
    b = spread_node(tmp_path, data_dir=data)
    branches = _prepare_two_branches(b)
    held = sorted(p.name for p in data.glob("workers/*/dtx/*.held"))
    assert len(held) == 1, held  # the branch that crossed: its part's record
    queues = [q for _, src, dest in branches for q in (src, dest)]
    assert _counts(b, queues) == [0, 0, 0, 0]  # held by the branches; nothing published yet
    _kill_node(b)
    b = spread_node(tmp_path, data_dir=data)
    try:
        assert _counts(b, queues) == [0, 0, 0, 0]
        want = {(1, b"g-0", b"b"), (1, b"g-1", b"b")}
        assert _in_doubt_from_each_worker(b) == [want, want]
        (commit_xid, src0, dest0), (rollback_xid, src1, dest1) = branches
        for turn in range(2):  # the outcomes from connections on different workers
            with Client010(b) as client:
                s = client.session(1)
                if turn == 0:
                    assert s.send(spec.DtxCommit(xid=commit_xid, one_phase=False)).status == 0
                else:
                    assert s.send(spec.DtxRollback(xid=rollback_xid)).status == 0
        assert _counts(b, [src0, dest0, src1, dest1]) == [0, 1, 1, 0]
        assert _in_doubt_from_each_worker(b) == [set(), set()]
        assert list(data.glob("workers/*/dtx/*.held")) == [] and list(data.glob("workers/*/dtx/*.prepared")) == []
        with connect(b) as c:
            ch = c.channel()
            assert ch.basic_get(dest0, auto_ack=True)[2] == b"swapped 0"
            method, _, body = ch.basic_get(src1, auto_ack=True)
            assert body == b"swap me 1" and method.redelivered
    finally:
        b.stop()


def test_a_part_whose_branch_record_never_reached_the_disk_is_rolled_back_at_start(tmp_path):
    """The branch's worker writes its record after the parts wrote theirs: a crash between the
    two leaves a part without a branch. At start-up the part's worker asks, hears the branch is
    not prepared, and puts the message back; only the complete branch is in doubt."""
    data = tmp_path / "data"
    b = spread_node(tmp_path, data_dir=data)
    branches = _prepare_two_branches(b)
    _kill_node(b)
    [held] = data.glob("workers/*/dtx/*.held")
    home = data / "workers" / str(json.loads(held.read_text())["home"]) / "dtx" / (held.stem + ".prepared")
    assert json.loads(home.read_text())["parts"] == [int(held.parent.parent.name)]
    home.unlink()  # as if the crash came between the part's record and the branch's
    b = spread_node(tmp_path, data_dir=data)
    try:
        crossed = next(i for i, (xid, _, _) in enumerate(branches) if held.stem.endswith(xid.global_id.hex() + "-62"))
        src = branches[crossed][1]
        wait_for("the orphaned part's message back in its queue", lambda: _counts(b, [src]) == [1])
        assert "goes back to their queues" in b.log() or "go back to their queues" in b.log()
        kept = {(1, xid.global_id, xid.branch_id) for i, (xid, _, _) in enumerate(branches) if i != crossed}
        assert _in_doubt_from_each_worker(b) == [kept, kept]
        assert not held.exists()
    finally:
        b.stop()


def test_a_prepared_cross_worker_branch_commits_without_a_restart_after_its_session_closed(node):
    """The part is held by the owner, not by the consuming channel: the session that accepted
    the message closes after the prepare, and a commit from a new connection still acks it
    (the message is never delivered again) and publishes the other."""
    from tests.e2e.amqp0_10.client010 import Client010
    from warren.spec import amqp0_10 as spec
    branches = _prepare_two_branches(node)
    for xid, _, _ in branches:
        with Client010(node) as client:
            assert client.session(1).send(spec.DtxCommit(xid=xid, one_phase=False)).status == 0
    queues = [q for _, src, dest in branches for q in (src, dest)]
    assert _counts(node, queues) == [0, 1, 0, 1]
