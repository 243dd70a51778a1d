"""warren/cluster/etcd.py against a real etcd 3.4 (one member; three in test_three_members.py):
keys, the compare-and-swap, leases, a streamed watch, and the errors' one line."""

from __future__ import annotations

import asyncio
import socket
import uuid

import pytest

from warren.cluster.etcd import EtcdClient, EtcdError, EtcdUnreachable, prefix_end


@pytest.fixture
def prefix() -> str:
    return f"/test-{uuid.uuid4().hex[:8]}/"


def test_prefix_end():
    assert prefix_end(b"/a/") == b"/a0"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") == b"\0"


async def test_keys_and_the_compare_and_swap(etcd1, prefix):
    async with EtcdClient(etcd1.urls) as etcd:
        revision = await etcd.put(prefix + "x", b"1")
        kv = await etcd.get(prefix + "x")
        assert (kv.key, kv.value, kv.mod_revision) == ((prefix + "x").encode(), b"1", revision)
        assert await etcd.get(prefix + "nothing") is None
        written, there = await etcd.put_if_absent(prefix + "x", b"2")
        assert (written, there.value) == (False, b"1")
        written, there = await etcd.put_if_absent(prefix + "y", b"3", also={prefix + "z": b"4"})
        assert (written, there) == (True, None)
        assert [(kv.key, kv.value) for kv in await etcd.get_prefix(prefix)] == [
            ((prefix + k).encode(), v) for k, v in (("x", b"1"), ("y", b"3"), ("z", b"4"))]
        assert await etcd.delete(prefix + "z") == 1


async def test_a_lease_holds_its_key_until_revoked_or_expired(etcd1, prefix):
    async with EtcdClient(etcd1.urls) as etcd:
        lease, ttl = await etcd.grant(2)
        assert ttl >= 2
        await etcd.put(prefix + "held", b"v", lease=lease)
        assert (await etcd.get(prefix + "held")).lease == lease
        assert await etcd.keep_alive(lease) >= 2
        await etcd.revoke(lease)
        assert await etcd.get(prefix + "held") is None
        assert await etcd.keep_alive(lease) == 0  # gone: nothing to renew
        await etcd.revoke(lease)  # twice is no error
        with pytest.raises(EtcdError, match="lease not found|requested lease not found"):
            await etcd.put(prefix + "late", b"v", lease=lease)


async def test_a_watch_streams_the_changes_of_a_prefix(etcd1, prefix):
    async with EtcdClient(etcd1.urls) as etcd:
        seen = []
        created = asyncio.Event()

        async def watch():
            stream = etcd.watch_prefix(prefix)
            created.set()
            async for event in stream:
                seen.append((event.kind, event.kv.key.decode()[len(prefix):], event.kv.value))
                if event.kind == "DELETE":
                    return

        task = asyncio.create_task(watch())
        await created.wait()
        # the watch is taken once etcd has answered its create request: put until it sees one
        for i in range(100):
            await etcd.put(prefix + "w", str(i))
            await asyncio.sleep(0.05)
            if seen:
                break
        await etcd.delete(prefix + "w")
        await asyncio.wait_for(task, 10)
        assert seen[-1] == ("DELETE", "w", b"")
        assert all(kind == "PUT" for kind, _, _ in seen[:-1]) and seen[0][1] == "w"


async def test_an_etcd_out_of_reach_is_one_line_and_bounded():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with EtcdClient([f"http://127.0.0.1:{port}"], timeout=2) as etcd:
        with pytest.raises(EtcdUnreachable) as e:
            await etcd.put("k", "v")
    assert str(e.value).startswith(f"etcd is unreachable (http://127.0.0.1:{port}: ")
    assert "\n" not in str(e.value)
