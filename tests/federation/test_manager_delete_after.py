"""A shovel that reached its ``src-delete-after`` deletes its own runtime parameter through
``FederationManager.write`` (the HTTP API's writer thread, handed in by the server), never on
the loop; a definition put again before that write runs is kept. The same through a real broker
with the disk stalled: tests/store/test_powerloss_disks.py
``test_a_shovels_own_delete_after_waits_for_a_stalled_fsync_off_the_loop``."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from warren.federation.manager import SHOVEL, FederationManager
from warren.management.parameters import ParameterStore

VALUE = {"src-uri": "amqp://", "src-queue": "a", "dest-uri": "amqp://", "dest-queue": "b", "src-delete-after": 1}


def manager_with(write) -> tuple[FederationManager, ParameterStore]:
    parameters = ParameterStore(None)
    manager = FederationManager(SimpleNamespace(cluster_name=None), parameters)
    manager.write = write
    parameters.put(SHOVEL, "/", "s", dict(VALUE))
    return manager, parameters


def test_without_a_writer_the_delete_is_at_once():
    manager, parameters = manager_with(None)
    manager._shovel_finished("/", "s")
    assert parameters.get(SHOVEL, "/", "s") is parameters.MISSING


def test_the_delete_runs_on_the_writer_and_spares_a_definition_put_again():
    threads = []

    async def write(change, *args):  # a writer thread, as api/common.py's off_loop
        def run():
            threads.append(threading.current_thread())
            return change(*args)
        return await asyncio.get_running_loop().run_in_executor(None, run)

    async def main():
        manager, parameters = manager_with(write)
        manager._shovel_finished("/", "s")
        assert parameters.get(SHOVEL, "/", "s") == VALUE  # listed until the write ran
        await asyncio.gather(*manager._deleting)
        assert parameters.get(SHOVEL, "/", "s") is parameters.MISSING
        assert threads and threads[0] is not threading.current_thread()
        # put again (a new definition) before the finished shovel's delete ran: kept
        parameters.put(SHOVEL, "/", "s", dict(VALUE))
        manager._shovel_finished("/", "s")
        parameters.put(SHOVEL, "/", "s", {**VALUE, "src-delete-after": 7})
        await asyncio.gather(*manager._deleting)
        assert parameters.get(SHOVEL, "/", "s")["src-delete-after"] == 7

    asyncio.run(main())
