"""Runtime parameters on disk: per-vhost ones with the process, global ones shared by the
processes of one node when a shared file is given (``--workers``, warren/management/parameters.py)."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

from warren.management.parameters import FILE_NAME, GLOBAL_FILE_NAME, ParameterStore


class Heard:
    def __init__(self) -> None:
        self.globals: list = []
        self.changes: list = []

    def parameter_changed(self, component, vhost, name, value) -> None:
        self.changes.append((component, vhost, name, value))

    def global_parameter_changed(self, name, value) -> None:
        self.globals.append((name, value))


def test_without_a_shared_file_globals_live_in_parameters_json(tmp_path):
    store = ParameterStore.in_data_dir(tmp_path)
    store.put_global("cluster_name", "solo")
    store.put("shovel", "/", "s", {"src-queue": "q"})
    data = json.loads((tmp_path / FILE_NAME).read_text())
    assert data["global_parameters"] == [{"name": "cluster_name", "value": "solo"}]
    again = ParameterStore.in_data_dir(tmp_path)
    assert again.global_parameters == {"cluster_name": "solo"} and again.get("shovel", "/", "s") == {"src-queue": "q"}
    assert not again.refresh_global()  # nothing shared to look at


def test_workers_share_the_global_parameters_and_hear_each_others_changes(tmp_path):
    shared = tmp_path / GLOBAL_FILE_NAME
    one = ParameterStore.in_data_dir(tmp_path / "w0", shared)
    two = ParameterStore.in_data_dir(tmp_path / "w1", shared)
    heard = Heard()
    two.listeners.append(heard)
    assert one.put_global("cluster_name", "node-a")
    one.put("shovel", "/", "s", {"src-queue": "q"})  # a vhost's: stays with its worker
    assert "global_parameters" not in json.loads((tmp_path / "w0" / FILE_NAME).read_text())
    assert two.refresh_global() and two.global_parameters == {"cluster_name": "node-a"}
    assert heard.globals == [("cluster_name", "node-a")] and two.list() == []
    assert not two.refresh_global() and heard.globals == [("cluster_name", "node-a")]  # heard once
    assert two.delete_global("cluster_name")
    assert one.refresh_global() and one.global_parameters == {}
    assert heard.globals[-1] == ("cluster_name", None)  # its own change, told to its listeners
    # a later process reads the shared file, not its own parameters.json
    assert ParameterStore.in_data_dir(tmp_path / "w2", shared).global_parameters == {}


def test_changes_made_at_once_through_two_stores_are_all_kept(tmp_path):
    """The read-modify-write happens under the shared file's lock, read again inside it."""
    shared = tmp_path / GLOBAL_FILE_NAME
    stores = [ParameterStore.in_data_dir(tmp_path / f"w{i}", shared) for i in range(2)]

    def put(i: int) -> bool:
        return stores[i % 2].put_global(f"g{i}", i)

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(put, range(40)))
    kept = {g["name"]: g["value"] for g in json.loads(shared.read_text())["global_parameters"]}
    assert kept == {f"g{i}": i for i in range(40)}


def test_an_unreadable_shared_file_keeps_what_was_known(tmp_path, caplog):
    shared = tmp_path / GLOBAL_FILE_NAME
    store = ParameterStore.in_data_dir(tmp_path / "w0", shared)
    store.put_global("cluster_name", "kept")
    shared.write_text("{not json")
    os.utime(shared, ns=(1, 1))  # a stamp of its own, whatever the clock's resolution
    assert not store.refresh_global()
    assert store.global_parameters == {"cluster_name": "kept"}
    assert "cannot be read" in caplog.text


def test_under_worker_mode_queues_per_vhost_parameters_are_the_nodes_too(tmp_path):
    """--worker-mode queues: every worker serves every vhost, so a shovel or upstream set
    through one worker's store is every worker's, kept in the shared file with the globals."""
    shared = tmp_path / GLOBAL_FILE_NAME
    one = ParameterStore.in_data_dir(tmp_path / "w0", shared, node_wide=True)
    two = ParameterStore.in_data_dir(tmp_path / "w1", shared, node_wide=True)
    heard = Heard()
    two.listeners.append(heard)
    assert one.put("shovel", "/", "s", {"src-queue": "q"})
    assert one.put_global("cluster_name", "node-a")  # written with the per-vhost ones, not over them
    assert not (tmp_path / "w0" / FILE_NAME).exists()
    assert two.refresh_global()
    assert two.get("shovel", "/", "s") == {"src-queue": "q"} and two.global_parameters == {"cluster_name": "node-a"}
    assert heard.changes == [("shovel", "/", "s", {"src-queue": "q"})]
    assert two.put("federation-upstream", "/", "up", {"uri": "amqp://"})
    assert two.delete("shovel", "/", "s")
    assert one.refresh_global() and one.list() == two.list() == [
        {"value": {"uri": "amqp://"}, "vhost": "/", "component": "federation-upstream", "name": "up"}]
    # a new worker (a restart) starts from the shared file
    assert ParameterStore.in_data_dir(tmp_path / "w2", shared, node_wide=True).list() == one.list()
