"""Who owns a vhost or a queue with --workers N (warren/broker/ownership.py): the rule, and the
data folder's record of the count, mode and rule it was written with."""

from __future__ import annotations

import json
import random
import string
import zlib

import pytest

from warren.broker.ownership import LEGACY_PLACEMENT, PLACEMENT, LayoutMismatch, check_layout, check_single, place
from warren.store.definitions import DefinitionsStore
from warren.spread import queue_owner
from warren.server.workers import owner_of


@pytest.mark.parametrize("workers", [2, 3, 4, 8])
def test_a_numbered_family_of_queues_is_dealt_one_per_worker(workers):
    for family in ("bench-4p4c-16B-4q-", "orders.", "shard", "celery@host-"):
        owners = [queue_owner("/", f"{family}{i}", workers) for i in range(workers * 3)]
        assert sorted(owners[:workers]) == list(range(workers)), (family, owners)
        assert owners[workers:] == owners[:workers] * 2  # then round again, in the same order


def test_crc32_placed_a_numbered_family_on_one_worker_which_is_why_the_rule_changed():
    legacy = [queue_owner("/", f"bench-4p4c-16B-4q-{i}", 2, LEGACY_PLACEMENT) for i in range(4)]
    assert legacy == [0, 0, 0, 0]
    assert sorted(queue_owner("/", f"bench-4p4c-16B-4q-{i}", 2) for i in range(4)) == [0, 0, 1, 1]


def test_the_legacy_rule_is_the_first_one_exactly():
    """A data folder written before the layout file keeps crc32 of the whole key."""
    for name in ("q", "orders-1", "ünï", "x\udcff"):
        key = f"/\0{name}"
        assert queue_owner("/", name, 3, LEGACY_PLACEMENT) == zlib.crc32(key.encode("utf-8", "surrogateescape")) % 3
        assert owner_of(name, 3, LEGACY_PLACEMENT) == zlib.crc32(name.encode("utf-8", "surrogateescape")) % 3


def test_names_without_a_number_spread_evenly():
    rng = random.Random(7)
    names = ["".join(rng.choices(string.ascii_letters, k=12)) for _ in range(4000)]
    counts = [0, 0, 0, 0]
    for n in names:
        counts[queue_owner("vh", n, 4)] += 1
    assert all(850 < c < 1150 for c in counts), counts


def test_the_vhost_is_part_of_a_queues_key():
    owners = {queue_owner(f"tenant-{v}", "jobs", 2) for v in range(16)}
    assert owners == {0, 1}


def test_the_rule_is_the_same_in_every_process():
    """Python's hash() differs per process; the rule must not (workers are separate processes)."""
    assert place("/\0jobs", "jobs", 1 << 30) == place("/\0jobs", "jobs", 1 << 30)
    assert [place("/\0q-7", "q-7", 5), place("/\0q-8", "q-8", 5)] in ([a, (a + 1) % 5] for a in range(5))


def test_a_new_data_folder_records_its_layout(tmp_path):
    assert check_layout(tmp_path, 2, "queues") == PLACEMENT
    assert json.loads((tmp_path / "workers" / "layout.json").read_text()) == {
        "workers": 2, "mode": "queues", "placement": PLACEMENT}
    assert check_layout(tmp_path, 2, "queues") == PLACEMENT  # the same again: fine


def test_a_folder_from_before_the_layout_file_keeps_the_first_rule(tmp_path):
    (tmp_path / "workers" / "0").mkdir(parents=True)
    (tmp_path / "workers" / "1").mkdir()
    assert check_layout(tmp_path, 2, "vhosts") == LEGACY_PLACEMENT
    assert check_layout(tmp_path, 2, "vhosts") == LEGACY_PLACEMENT  # and records it


@pytest.mark.parametrize("workers, mode", [(3, "queues"), (2, "vhosts")])
def test_another_count_or_mode_is_refused_with_both_named(tmp_path, workers, mode):
    check_layout(tmp_path, 2, "queues")
    with pytest.raises(LayoutMismatch) as e:
        check_layout(tmp_path, workers, mode)
    assert "written by --workers 2 --worker-mode queues" in str(e.value)
    assert f"this start has --workers {workers} --worker-mode {mode}" in str(e.value)


def test_one_process_refuses_a_folder_that_workers_wrote(tmp_path):
    check_single(tmp_path)  # nothing there: fine
    check_layout(tmp_path, 2, "vhosts")
    with pytest.raises(LayoutMismatch) as e:
        check_single(tmp_path)
    assert "written by --workers 2 --worker-mode vhosts" in str(e.value)


def test_workers_refuse_a_folder_that_one_process_wrote_definitions_in(tmp_path):
    log = DefinitionsStore(tmp_path / "definitions.log", fsync=False)
    log.close()
    assert check_layout(tmp_path, 2, "queues") == PLACEMENT  # only the log's header: nothing to lose
    (tmp_path / "workers" / "layout.json").unlink()
    log = DefinitionsStore(tmp_path / "definitions.log", fsync=False)
    log.declare_queue("/", "jobs", True)
    log.close()
    with pytest.raises(LayoutMismatch) as e:
        check_layout(tmp_path, 2, "queues")
    assert "run as one process" in str(e.value)
