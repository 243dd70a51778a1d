"""Which member takes a replicated queue whose leader is down (warren/cluster/replicas.py
``best_vote``): the rule itself, on the votes members write to etcd. The elections it decides
run through real nodes in test_replicated_quorum.py and the fault harness; a replica left on an
older leader's copy needs five members and a fault at one moment, so the rule is checked here."""

from warren.cluster.replicas import best_vote


def vote(node, copy, applied, in_step=True):
    return {"node": node, "epoch": 4, "copy": copy, "applied": applied, "in_step": in_step}


def test_a_longer_copy_of_an_older_leader_loses_to_the_newest_leader_copy():
    # n3 followed epoch 3's leader and never got epoch 4's snapshot: its count is of other operations
    votes = [vote("n2", 4, 10), vote("n3", 3, 500)]
    assert best_vote(votes)["node"] == "n2"


def test_of_copies_of_one_leader_the_longest_wins():
    assert best_vote([vote("n2", 4, 10), vote("n3", 4, 11)])["node"] == "n3"


def test_a_replica_out_of_step_never_wins():
    assert best_vote([vote("n2", 4, 10, in_step=False), vote("n3", 2, 1)])["node"] == "n3"
    assert best_vote([vote("n2", 4, 10, in_step=False)]) is None


def test_a_vote_of_a_node_before_copies_were_voted_counts_as_the_oldest():
    old = {"node": "n3", "epoch": 4, "applied": 900, "in_step": True}
    assert best_vote([old, vote("n2", 1, 5)])["node"] == "n2"
