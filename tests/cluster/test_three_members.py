"""Three etcd members and clustered Warren nodes: a node joins through any member that answers,
the nodes keep serving when etcd loses a member, and a node cannot start once etcd has no
quorum (one line naming it)."""

from __future__ import annotations

from tests.cluster.cluster_nodes import members, publish_and_get


def test_nodes_start_through_three_members_and_not_without_a_quorum(etcd3, nodes, cluster_name):
    a = nodes.start(etcd3.endpoints, cluster_name, "a")
    etcd3.kill(0)  # the first URL given: the next node joins through another member
    b = nodes.start(etcd3.endpoints, cluster_name, "b")
    assert sorted(members(etcd3, cluster_name)) == ["a", "b"]
    etcd3.kill(1)  # one member of three left: no quorum
    line = nodes.refused(etcd3.endpoints, cluster_name, "c")
    assert line.startswith(f"Error: cannot join cluster '{cluster_name}': etcd has no quorum ("), line
    # the running nodes go on serving AMQP (nothing depends on etcd yet)
    for node, name in ((a, "a"), (b, "b")):
        assert publish_and_get(node, f"quorumless-{name}") == f"to quorumless-{name}".encode()
