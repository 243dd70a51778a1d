"""A disk that fills under a confirming publisher: the group commit's write fails, the broker
stops rather than confirm what it could not write, and every message it did confirm is there
after a restart.

The data folder is a small tmpfs mounted for the test (root only; skipped with the reason
otherwise), with the disk-free alarm off so that the publisher reaches the full disk. The
write that fails is the loop's part of a group commit (QueueStore.sync_begin); what follows is
Server._sync_done's "stop rather than lie".
"""

from __future__ import annotations

import os
import subprocess
import time

import pika
import pytest
from pika.exceptions import AMQPError

from tests.conftest import EXTERNAL_URL, launch_broker, skip_under_cluster

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")

BODY = b"x" * 1024


@pytest.fixture
def small_disk(tmp_path):
    """A 6 MiB tmpfs, unmounted afterwards; skips where this process may not mount."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


def test_a_full_disk_stops_the_broker_and_loses_no_confirmed_message(tmp_path, small_disk):
    skip_under_cluster("a full disk stops the node whose message store it fills, node n1 (the queue's), and the client's "
                       "node n2 rightly runs on: the test waits for the client's broker to exit")
    data = small_disk / "data"
    broker = launch_broker(tmp_path, "--disk-free-limit", "0", "--http-port", "-1", data_dir=data)
    confirmed = 0
    try:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.port, socket_timeout=10))
        ch = conn.channel()
        ch.queue_declare("fills", durable=True)
        ch.confirm_delivery()
        deadline = time.monotonic() + 60
        with pytest.raises(AMQPError):  # the broker goes away, or refuses, before the disk takes more
            while time.monotonic() < deadline:
                ch.basic_publish("", "fills", BODY, pika.BasicProperties(delivery_mode=2))
                confirmed += 1
        try:
            status = broker.wait(30)
        except subprocess.TimeoutExpired:
            pytest.fail("the broker kept running on a full disk")
        assert status == 1  # a failure for a service manager, not a clean stop
    finally:
        broker.stop()
    assert confirmed > 100, confirmed  # some fitted before the disk was full
    assert "message store sync failed, shutting down" in broker.log()
    # room again: every message the broker confirmed comes back
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True, timeout=30)
    broker = launch_broker(tmp_path, "--disk-free-limit", "0", "--http-port", "-1", data_dir=data)
    try:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.port, socket_timeout=10))
        ch = conn.channel()
        count = ch.queue_declare("fills", durable=True, passive=True).method.message_count
        assert count >= confirmed, f"{confirmed} confirmed, {count} after the restart"
        conn.close()
    finally:
        broker.stop()
