"""`warren store check DATA_DIR` (warren/store/check.py, warren/cli/store.py), run as the command
an operator runs, on data folders written by the real stores and then damaged.

It must name every damaged record and what it costs, and change nothing: each test compares
every file of the folder, octet for octet, before and after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from warren.broker.durability import Durability
from warren.store.damage import DamagedFile
from warren.store.definitions import DefinitionsStore
from warren.store.node_file import check_node_files
from warren.store.queue_store import QueueStore
from warren.store.record import FILE_HEADER_SIZE, HEADER_SIZE
from warren.store.stream_store import StreamStore


def warren_store(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "warren", "store", *args], capture_output=True, text=True,
                          timeout=60)


def files_of(folder) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = f.read()
    return out


def flip(path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        octet = f.read(1)[0]
        f.seek(offset)
        f.write(bytes((octet ^ 0x10,)))


@pytest.fixture
def data_dir(tmp_path):
    """A data folder as the broker leaves it: definitions, a durable queue with 200 messages
    and some acks, a stream of 200 entries, access.json and policies.json."""
    data = tmp_path / "data"
    d = Durability(data, fsync=False)
    d.definitions.declare_queue("/", "orders")
    d.definitions.declare_queue("/", "events", arguments={"x-queue-type": "stream"})
    d.definitions.declare_exchange("/", "x", "topic")
    d.definitions.bind("/", "x", "orders", "#")
    q = d.open_queue_store("/", "orders")
    for seq in range(1, 201):
        q.append(seq, b"order %d " % seq * 8)
    for seq in range(1, 21):
        q.ack(seq)
    q.close()
    s = d.open_stream_store("/", "events")
    for i in range(200):
        s.append(b"event %d " % i * 8, 1000 + i)
    s.close()
    d.definitions.close()
    (data / "access.json").write_text('{"users": {}}')
    (data / "policies.json").write_text("[]\n")
    return data


def queue_file(data, name: str = "msgs.0000000001"):
    return data / "queues" / Durability(data, fsync=False).queue_dir("/", "orders").name / name


def test_a_clean_folder_reports_no_damage_and_exits_0(data_dir):
    before = files_of(data_dir)
    r = warren_store("check", str(data_dir))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no damage" in r.stdout
    assert files_of(data_dir) == before


def test_damage_in_every_kind_of_file_is_named_with_its_cost_and_nothing_changes(data_dir):
    msgs = queue_file(data_dir)
    flip(msgs, msgs.read_bytes().index(b"order 51 ") + 30)  # in message 51
    flip(queue_file(data_dir, "acks.0000000001"), FILE_HEADER_SIZE + 3 * (HEADER_SIZE + 8) + 14)  # ack 4
    stream = next((data_dir / "streams").iterdir()) / "stream.00000000000000000000"
    flip(stream, 3000)
    defs = data_dir / "definitions.log"
    flip(defs, defs.read_bytes().index(b'"name":"x"') + 8)  # the exchange's record: the binding follows
    (data_dir / "policies.json").write_text('[{"name": "p", "pattern": ')  # cut short
    before = files_of(data_dir)
    r = warren_store("check", "--json", str(data_dir))
    assert r.returncode == 1, r.stdout + r.stderr
    assert files_of(data_dir) == before  # octet for octet: the check changed nothing
    report = json.loads(r.stdout)
    found = {(os.path.basename(f["file"]), f["status"]): f for f in report["findings"]}
    m = found[("msgs.0000000001", "damage")]
    assert m["of"] == "queue 'orders' in vhost '/'" and m["records"] == 1 and "seqs 51..51" in m["detail"]
    assert found[("acks.0000000001", "damage")]["records"] == 1
    s = found[("stream.00000000000000000000", "damage")]
    assert s["of"] == "stream 'events' in vhost '/'" and s["records"] == 1
    assert "1 readable records after it" in found[("definitions.log", "damage")]["detail"]
    assert "not valid JSON" in found[("policies.json", "damage")]["detail"]
    assert report["damaged"] == 5
    # the same as lines, for a person
    r = warren_store("check", str(data_dir))
    assert r.returncode == 1 and "5 damaged" in r.stdout.splitlines()[-1]
    assert files_of(data_dir) == before


def test_a_torn_tail_is_reported_but_is_not_damage(data_dir):
    msgs = queue_file(data_dir)
    with open(msgs, "ab") as f:
        f.write(b"\x4d\x00\x00\x01")  # the start of a record whose write was cut short
    r = warren_store("check", str(data_dir))
    assert r.returncode == 0 and "torn" in r.stdout and "1 torn tails" in r.stdout


def test_an_ack_log_tail_a_power_cut_left_is_torn_not_damage(data_dir):
    """Zeros (writes lost since the ack log's last fsync) then a later write's records: the
    check calls it a torn tail, as the start treats it, not damage."""
    acks = queue_file(data_dir, "acks.0000000001")
    data = bytearray(acks.read_bytes())
    at = FILE_HEADER_SIZE + 5 * (HEADER_SIZE + 8)
    data[at:at + 6 * (HEADER_SIZE + 8)] = bytes(6 * (HEADER_SIZE + 8))
    acks.write_bytes(bytes(data))
    r = warren_store("check", str(data_dir))
    assert r.returncode == 0 and "1 torn tails" in r.stdout, r.stdout + r.stderr


def test_a_damaged_definitions_log_stops_the_start_with_one_line_and_repair_keeps_the_rest(data_dir):
    log_path = data_dir / "definitions.log"
    flip(log_path, 40)  # in the first record: three readable ones follow
    damaged = log_path.read_bytes()
    with pytest.raises(DamagedFile) as e:
        DefinitionsStore(log_path, fsync=False)
    line = str(e.value)
    assert "\n" not in line and str(log_path) in line and "warren store check --repair" in line
    assert log_path.read_bytes() == damaged  # nothing cut or changed
    r = warren_store("check", "--repair", str(data_dir))
    assert "repaired definitions.log: 3 records kept" in r.stdout, r.stdout + r.stderr
    assert r.returncode == 0 and "no damage" in r.stdout  # the log's damage is gone...
    copies = sorted(os.listdir(data_dir / "quarantine"))
    assert len(copies) == 2 and copies[0].startswith("definitions.log.")
    # the lost declare was the queue "orders": its messages are kept aside, the start removes its folder
    orders = queue_file(data_dir).parent.name
    assert copies[1].startswith(f"queues-{orders}.") and f"kept {data_dir / 'quarantine' / copies[1]}" in r.stdout
    assert (data_dir / "quarantine" / copies[1] / "msgs.0000000001").read_bytes() == queue_file(data_dir).read_bytes()
    store = DefinitionsStore(log_path, fsync=False)  # ...and it opens: the first queue is what was lost
    defs = store.load()
    assert [q.name for q in defs.queues] == ["events"] and [b.destination for b in defs.bindings] == ["orders"]
    store.close()


def test_a_torn_last_definition_is_still_cut_at_open(data_dir):
    log_path = data_dir / "definitions.log"
    size = log_path.stat().st_size
    with open(log_path, "ab") as f:
        f.write(b"\x4a\x00\x00\x00\x30{\"op\"")  # a change whose call never returned
    store = DefinitionsStore(log_path, fsync=False)
    assert len(store.load().queues) == 2 and log_path.stat().st_size == size
    store.close()


@pytest.mark.parametrize("name", ["access.json", "policies.json"])
def test_an_unreadable_node_file_stops_the_start_with_one_line(data_dir, name):
    path = data_dir / name
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(DamagedFile) as e:
        check_node_files(data_dir)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_repair_refuses_beside_a_running_broker(data_dir):
    import fcntl
    with open(data_dir / "warren.lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = warren_store("check", "--repair", str(data_dir))
    assert r.returncode != 0 and "in use by a running warren serve" in r.stderr


def test_stream_and_queue_stores_the_check_read_still_open(data_dir):
    """The check only read: the stores open afterwards and do their own repair."""
    flip(queue_file(data_dir), FILE_HEADER_SIZE + HEADER_SIZE + 8 + 20)  # message 1
    assert warren_store("check", str(data_dir)).returncode == 1
    q = QueueStore(queue_file(data_dir).parent, fsync=False)
    assert len(q) == 180 and list(q.unacked())[0][0] == 21  # message 1 was acked anyway
    q.close()
    s = StreamStore(next((data_dir / "streams").iterdir()), fsync=False)
    assert s.message_count == 200
    s.close()


def rot(path, offset: int) -> None:
    """A flipped bit as the disk does it: the file's modification time stays as it was."""
    st = os.stat(path)
    flip(path, offset)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_flipped_bit_that_leaves_valid_json_is_caught_by_the_checksum(tmp_path):
    from warren.store.node_file import replace_durably
    path = tmp_path / "access.json"
    replace_durably(path, b'{"users": {"guest": {"tags": ["administrator"]}}}', fsync=False)
    replace_durably(path, b'{"users": {"guest": {"tags": ["administrator"]}, "bob": {}}}', fsync=False)
    check_node_files(tmp_path)  # intact
    rot(path, path.read_bytes().index(b"guest") + 1)  # "guest" becomes another name: still JSON
    json.loads(path.read_bytes())
    with pytest.raises(DamagedFile) as e:
        check_node_files(tmp_path)
    assert str(path) in str(e.value) and "checksum" in str(e.value) and "\n" not in str(e.value)
    r = warren_store("check", str(tmp_path))
    assert r.returncode == 1 and "access.json" in r.stdout


def test_a_node_file_edited_by_hand_is_taken_as_it_is(tmp_path):
    from warren.store.node_file import checksum_path, replace_durably
    path = tmp_path / "policies.json"
    replace_durably(path, b"[]\n", fsync=False)
    sums = checksum_path(path)
    os.utime(sums, ns=(1, 1_000_000_000))  # the checksum is older than any edit below
    path.write_text('[{"name": "p", "pattern": ".*", "definition": {}}]\n')
    check_node_files(tmp_path)  # newer than its checksum: an edit, not damage


def test_a_flipped_bit_in_a_checksum_file_is_no_reason_to_refuse(tmp_path):
    from warren.store.node_file import checksum_path, replace_durably
    path = tmp_path / "access.json"
    replace_durably(path, b'{"users": {}}', fsync=False)
    sums = checksum_path(path)
    rot(sums, sums.read_bytes().index(b'"sha256": ["') + 15)  # a digit of the digest
    check_node_files(tmp_path)  # the file itself is intact


def test_each_workers_folder_is_checked_too(data_dir):
    """With --workers N each worker keeps its stores in <data>/workers/<index>."""
    import shutil
    worker = data_dir / "workers" / "1"
    worker.mkdir(parents=True)
    shutil.move(str(data_dir / "queues"), str(worker / "queues"))
    shutil.copy(data_dir / "definitions.log", worker / "definitions.log")
    msgs = next((worker / "queues").iterdir()) / "msgs.0000000001"
    flip(msgs, msgs.read_bytes().index(b"order 77 ") + 3)
    r = warren_store("check", "--json", str(data_dir))
    [finding] = json.loads(r.stdout)["findings"]
    assert r.returncode == 1 and finding["file"] == str(msgs) and "seqs 77..77" in finding["detail"]
