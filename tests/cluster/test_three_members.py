"""Three etcd members and clustered Warren nodes: a node joins through any member that answers,
the nodes keep serving when etcd loses a member, and a node cannot start once etcd has no
quorum (one line naming it)."""

from __future__ import annotations

import asyncio

from tests.cluster.cluster_nodes import declare, declare_refused, members, publish_and_get
from warren.cluster.node import join
from warren.config import Config


def test_nodes_start_through_three_members_and_not_without_a_quorum(etcd3, nodes, cluster_name, tmp_path):
    a = nodes.start(etcd3.endpoints, cluster_name, "a")
    # in this process: two members whose watch and renewals go to the first member, killed
    asyncio.run(_views_survive_the_loss_of_their_member(etcd3, cluster_name, tmp_path))
    # the first URL given is dead: the next node joins through another member
    b = nodes.start(etcd3.endpoints, cluster_name, "b")
    assert sorted(members(etcd3, cluster_name)) == ["a", "b"]
    for node, name in ((a, "a"), (b, "b")):
        declare(node, f"quorumless-{name}")
    etcd3.kill(1)  # one member of three left: no quorum
    line = nodes.refused(etcd3.endpoints, cluster_name, "c")
    assert line.startswith(f"Error: cannot join cluster '{cluster_name}': etcd has no quorum ("), line
    # the running nodes go on serving their queues; a new queue is refused (a metadata change)
    for node, name in ((a, "a"), (b, "b")):
        assert publish_and_get(node, f"quorumless-{name}", declare=False) == f"to quorumless-{name}".encode()
        assert "etcd" in declare_refused(node, f"new-{name}")


async def _views_survive_the_loss_of_their_member(etcd3, cluster_name, tmp_path):
    def config(name):
        (tmp_path / name).mkdir()
        return Config(data_dir=tmp_path / name, cluster_etcd=tuple(etcd3.urls), node_name=name,
                      cluster_name=cluster_name).validate()

    async def until(condition, what, timeout=20.0):
        for _ in range(int(timeout / 0.05)):
            if condition():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"not within {timeout:g} s: {what}")

    x = await join(config("x"))
    try:
        y = await join(config("y"))
        try:
            await until(lambda: sorted(x.members) == ["a", "x", "y"], "x sees a, x and y")
            etcd3.kill(0)  # x's watch stream breaks: it reads again through another member
            # once the two left have a leader (an election if the killed one led)
            await asyncio.to_thread(etcd3.wait_healthy, etcd3.members[1:], 30.0)
        finally:
            await y.leave()
        await until(lambda: sorted(x.members) == ["a", "x"], "x sees y leave, through another member")
        assert sorted(await x.read_members()) == ["a", "x"]
    finally:
        await x.leave()

