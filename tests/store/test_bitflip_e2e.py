"""Bit flips in a stopped broker's data folder, then a restart and a real client (issue 35, point 3).

A broker holds a durable queue of 3,000 persistent messages (the first 100 consumed and acked,
so the queue has an ack log too) and a stream of 3,000 entries. It is stopped; bits are flipped
at random offsets (seeded; the seed is in every assertion message, and WARREN_BITFLIP_SEED
replays one) in its queue and stream files; it is started again without a hand, and pika
consumes everything. Checked:

* no damaged message is delivered: every body is exactly what was published under its number;
* what is lost is the records the flips touched and nothing else (one more flip goes to the
  ack log, whose lost ack may bring back its message, and only that one) (the framing finds the next
  record after each one): lost ⊆ touched, so lost ≤ records touched;
* the damaged files were copied to ``<data>/quarantine`` before recovery changed them;
* ``/api/health/checks/store-damage`` fails naming the queue and the stream with the seqs and
  offsets lost, and ``warren_store_damaged_records_total`` counts them.

The issue's baseline, before this framing: 24 flips kept 193 of 3,000 queue messages and 239 of
3,000 stream entries. The figures of each run are printed (pytest -s shows them).

A flip in the definitions log is the other case: the broker must refuse to start with one line
naming the file and the way out, and start after `warren store check --repair` with the queue
and stream whose records were readable.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pika
import pytest

from tests.conftest import launch_broker, skip_under_workers
from tests.metrics.scrape import fetch, samples
from warren.store.record import FILE_HEADER_SIZE, KIND_ACKS, KIND_MESSAGES, SeqScan, T_ACK, T_DELIVERED, T_MESSAGE, \
    T_RETURNED
from warren.store.stream_format import EntryScan

pytestmark = pytest.mark.timeout(300)

MESSAGES = 3000
ACKED_FIRST = 100  # consumed and acked before the stop: the queue gets an ack log
FLIPS = 24
QUEUE = "bitflip-queue"
STREAM = "bitflip-stream"


def body(kind: str, i: int) -> bytes:
    """Message i's body: its number, then octets that depend on it (a damaged body cannot pass)."""
    return f"{kind}:{i:06d}:".encode() + bytes((i * 31 + k) % 251 for k in range(90))


def number(kind: str, data: bytes) -> int | None:
    """The number of a body that is exactly what was published, else None."""
    try:
        prefix, n, _ = data.split(b":", 2)
        i = int(n)
    except ValueError:
        return None
    return i if prefix == kind.encode() and data == body(kind, i) else None


def connect(b) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", b.port, credentials=pika.PlainCredentials("guest", "guest"), socket_timeout=15,
        blocked_connection_timeout=30))


def fill(b, messages: int = MESSAGES) -> None:
    conn = connect(b)
    try:
        ch = conn.channel()
        ch.queue_declare(QUEUE, durable=True)
        ch.queue_declare(STREAM, durable=True, arguments={"x-queue-type": "stream"})
        ch.confirm_delivery()
        persistent = pika.BasicProperties(delivery_mode=2)
        for i in range(messages):  # one confirm per publish: slow but simple, and certain
            ch.basic_publish("", QUEUE, body("q", i), persistent)
            ch.basic_publish("", STREAM, body("s", i), persistent)
        for _ in range(ACKED_FIRST):
            method, _, data = ch.basic_get(QUEUE)
            assert number("q", data) is not None
            ch.basic_ack(method.delivery_tag)
        ch.queue_declare(QUEUE, durable=True, passive=True)  # a round trip: the acks are in
    finally:
        conn.close()


def queue_records(folder: Path) -> list[tuple[Path, int, int, object]]:
    """(file, start, end, what) of every record of a queue's files: what is the message seq
    (message files) or ("ack", k) (ack logs)."""
    out = []
    for path in sorted(folder.iterdir()):
        data = path.read_bytes()
        if path.name.startswith("msgs."):
            scan = SeqScan().run(data, FILE_HEADER_SIZE, frozenset((T_MESSAGE,)))
            ends = list(scan.offsets[1:]) + [scan.end]
            out += [(path, s, e, seq) for s, e, seq in zip(scan.offsets, ends, scan.seqs)]
        elif path.name.startswith("acks."):
            scan = SeqScan().run(data, FILE_HEADER_SIZE, frozenset((T_ACK, T_DELIVERED, T_RETURNED)))
            ends = list(scan.offsets[1:]) + [scan.end]
            out += [(path, s, e, ("ack", seq)) for s, e, seq in zip(scan.offsets, ends, scan.seqs)]
        assert scan.error is None, f"{path}: {scan.error} before any flip"
        out.append((path, 0, FILE_HEADER_SIZE, "header"))
    return out


def stream_records(folder: Path) -> list[tuple[Path, int, int, object]]:
    out = []
    for path in sorted(folder.iterdir()):
        data = path.read_bytes()
        base = int(path.name.split(".")[1])
        scan = EntryScan().run(data, FILE_HEADER_SIZE, base)
        assert scan.error is None, f"{path}: {scan.error} before any flip"
        ends = list(scan.positions[1:]) + [scan.end]
        out += [(path, s, e, base + i) for i, (s, e) in enumerate(zip(scan.positions, ends))]
        out.append((path, 0, FILE_HEADER_SIZE, "header"))
    return out


def flip_bits(rng: random.Random, files: list[Path], count: int) -> list[tuple[Path, int]]:
    """Flip ``count`` bits at random offsets of the files taken as one (a bigger file gets more)."""
    sizes = [f.stat().st_size for f in files]
    total = sum(sizes)
    flips = []
    for _ in range(count):
        at = rng.randrange(total)
        for f, size in zip(files, sizes):
            if at < size:
                with open(f, "r+b") as fh:
                    fh.seek(at)
                    octet = fh.read(1)[0]
                    fh.seek(at)
                    fh.write(bytes((octet ^ (1 << rng.randrange(8)),)))
                flips.append((f, at))
                break
            at -= size
    return flips


def touched(records, flips) -> set:
    return {what for path, at in flips for f, s, e, what in records if f == path and s <= at < e}


def consume_queue(ch) -> list[bytes]:
    count = ch.queue_declare(QUEUE, durable=True, passive=True).method.message_count
    out = []
    for _ in range(count):
        method, _, data = ch.basic_get(QUEUE, auto_ack=True)
        assert method is not None, f"the queue said {count} messages and ran dry after {len(out)}"
        out.append(data)
    return out


def consume_stream(ch, count: int) -> list[tuple[int, bytes]]:
    """The stream's ``count`` entries (as the broker counts them), from the first."""
    ch.basic_qos(prefetch_count=500)
    got: list[tuple[int, bytes]] = []

    def on_message(chan, method, props, data):
        got.append((props.headers["x-stream-offset"], data))
        chan.basic_ack(method.delivery_tag)
        if len(got) >= count:
            chan.stop_consuming()

    ch.basic_consume(STREAM, on_message, arguments={"x-stream-offset": "first"})
    ch.connection.call_later(120, ch.stop_consuming)  # a bound: the assertion below says what came
    ch.start_consuming()
    return got


def http_get(b, path: str) -> tuple[int, dict]:
    request = urllib.request.Request(b.http_url + path)
    request.add_header("Authorization", "Basic Z3Vlc3Q6Z3Vlc3Q=")  # guest:guest
    try:
        with urllib.request.urlopen(request, timeout=15) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def stream_count(b) -> int:
    status, info = http_get(b, f"/api/queues/%2F/{STREAM}")
    assert status == 200, info
    return info["messages"]


def test_bit_flips_cost_the_records_they_touch_and_the_broker_starts_without_a_hand(tmp_path):
    skip_under_workers("the test flips bits in one process's data folder, laid out as one broker writes it")
    seed = int(os.environ.get("WARREN_BITFLIP_SEED", random.randrange(1 << 31)))
    rng = random.Random(seed)
    why = f"(seed {seed}; WARREN_BITFLIP_SEED={seed} replays it)"
    data = tmp_path / "data"
    b = launch_broker(tmp_path, data_dir=data)
    try:
        fill(b)
    finally:
        b.stop()
    qfolder = next((data / "queues").iterdir())
    sfolder = next((data / "streams").iterdir())
    qrecords, srecords = queue_records(qfolder), stream_records(sfolder)
    files = sorted(qfolder.iterdir()) + sorted(sfolder.iterdir())
    flips = flip_bits(rng, files, FLIPS)
    flips += flip_bits(rng, sorted(qfolder.glob("acks.*")), 1)  # the ack log is small: make sure it is hit
    q_touched = {w for w in touched(qrecords, flips) if isinstance(w, int)}
    acks_touched = {w for w in touched(qrecords, flips) if isinstance(w, tuple)}
    s_touched = {w for w in touched(srecords, flips) if isinstance(w, int)}

    b, metrics = launch_with_metrics(tmp_path, data)  # no hand: it starts on the damaged folder
    try:
        conn = connect(b)
        ch = conn.channel()
        q_bodies = consume_queue(ch)
        count = stream_count(b)
        s_entries = consume_stream(conn.channel(), count)
        conn.close()
        status, health = http_get(b, "/api/health/checks/store-damage")
        text, _ = fetch(metrics + "/metrics")
    finally:
        b.stop()
    log_text = b.log()

    # no damaged message delivered: every body is exactly one that was published
    q_numbers = [number("q", d) for d in q_bodies]
    s_numbers = [number("s", d) for _, d in s_entries]
    assert None not in q_numbers, f"a damaged queue message was delivered {why}"
    assert None not in s_numbers, f"a damaged stream entry was delivered {why}"
    assert all(off == n for (off, _), n in zip(s_entries, s_numbers)), f"an entry under another offset {why}"
    # lost: the records the flips touched, nothing else (seqs are 1 + the publish number)
    q_lost = set(range(ACKED_FIRST, MESSAGES)) - set(q_numbers)
    q_lost_seqs = {n + 1 for n in q_lost}
    s_lost = set(range(MESSAGES)) - set(s_numbers)
    q_touched_live = {seq for seq in q_touched if seq > ACKED_FIRST}
    print(f"\nbit flips {why}: {FLIPS} flips + 1 in the ack log ({(len(q_lost) + len(s_lost)) / (FLIPS + 1):.2f} "
          f"records lost per flipped octet); queue kept {MESSAGES - ACKED_FIRST - len(q_lost)} of "
          f"{MESSAGES - ACKED_FIRST} (lost {len(q_lost)}, message records touched {len(q_touched_live)}, ack records "
          f"touched {len(acks_touched)}); stream kept {MESSAGES - len(s_lost)} of {MESSAGES} (lost {len(s_lost)}, "
          f"entries touched {len(s_touched)}); acked messages back {len(set(q_numbers) & set(range(ACKED_FIRST)))}")
    assert q_lost_seqs <= q_touched_live, \
        f"queue messages lost that no flip touched: {sorted(q_lost_seqs - q_touched_live)} {why}"
    assert s_lost <= s_touched, f"stream entries lost that no flip touched: {sorted(s_lost - s_touched)} {why}"
    assert len(q_lost) <= len(q_touched_live) and len(s_lost) <= len(s_touched)
    assert len(q_numbers) == len(set(q_numbers)), f"a message delivered twice {why}"
    # a lost ack brings its message back (at least once), only a message whose ack was touched
    back = {n + 1 for n in set(q_numbers) & set(range(ACKED_FIRST))}
    assert back <= {seq for _, seq in acks_touched}, f"acked messages back whose ack was intact {why}"
    assert count == MESSAGES - len(s_lost), f"the stream's count {count} {why}"

    # the damaged files were kept aside before anything changed, and the damage is reported
    damaged = q_touched | acks_touched | s_touched
    if damaged:
        quarantined = [p for p in (data / "quarantine").rglob("*") if p.is_file()]
        assert quarantined, f"no quarantine copy {why}"
        assert status == 503 and health["status"] == "failed", health
        by_name = {d["name"]: d for d in health["damaged"]}
        if q_touched_live:
            assert by_name[QUEUE]["records"] >= len(q_lost), (by_name, why)
        if s_touched:
            assert by_name[STREAM]["records"] == len(s_lost), (by_name, why)
        parsed = samples(text)
        for name, kind in ((QUEUE, "queue"), (STREAM, "stream")):
            if name in by_name:
                labels = frozenset({"vhost": "/", "queue": name, "kind": kind}.items())
                key = ("warren_store_damaged_records_total", labels)
                assert parsed[key] == by_name[name]["records"]
        assert "lost" in log_text and "to damaged files" in log_text
    else:
        assert status == 200


def launch_with_metrics(tmp: Path, data: Path):
    b = launch_broker(tmp, "--prometheus-port", "0", data_dir=data)
    ready = Path(b.args[b.args.index("--ready-file") + 1])
    return b, f"http://127.0.0.1:{json.loads(ready.read_text())['prometheus_port']}"


def test_a_flipped_bit_in_the_definitions_log_stops_the_start_until_repaired(tmp_path):
    skip_under_workers("the test flips bits in one process's data folder, laid out as one broker writes it")
    seed = int(os.environ.get("WARREN_BITFLIP_SEED", random.randrange(1 << 31)))
    rng = random.Random(seed)
    why = f"(seed {seed})"
    data = tmp_path / "data"
    b = launch_broker(tmp_path, data_dir=data)
    try:
        conn = connect(b)
        ch = conn.channel()
        for k in range(20):  # a log of a few dozen records: exchanges, queues, bindings
            ch.exchange_declare(f"bitflip-x{k}", "topic", durable=True)
            ch.queue_declare(f"bitflip-q{k}", durable=True)
            ch.queue_bind(f"bitflip-q{k}", f"bitflip-x{k}", "#")
        conn.close()
    finally:
        b.stop()
    log_path = data / "definitions.log"
    [(_, at)] = flip_bits(rng, [log_path], 1)
    with pytest.raises(RuntimeError) as e:
        launch_broker(tmp_path, data_dir=data)
    said = [line for line in str(e.value).splitlines() if str(log_path) in line]
    assert said and ("warren store check" in said[0]), f"{e.value} {why} flip at {at}"
    # the way out the line names
    r = subprocess.run([sys.executable, "-m", "warren", "store", "check", "--repair", str(data)],
                       capture_output=True, text=True, timeout=60)
    assert "repaired definitions.log" in r.stdout, r.stdout + r.stderr
    assert list((data / "quarantine").glob("definitions.log.*")), why
    b = launch_broker(tmp_path, data_dir=data)  # starts now, with what was readable
    try:
        conn = connect(b)
        ch = conn.channel()
        kept = 0
        for k in range(20):
            probe = conn.channel()
            try:
                probe.queue_declare(f"bitflip-q{k}", durable=True, passive=True)
                kept += 1
                probe.close()
            except pika.exceptions.ChannelClosedByBroker:
                pass
        conn.close()
    finally:
        b.stop()
    assert kept >= 19, f"{kept} of 20 queues kept after one flip {why}"  # one record lost at most


def http_put(b, path: str, doc: dict) -> int:
    request = urllib.request.Request(b.http_url + path, data=json.dumps(doc).encode(), method="PUT")
    request.add_header("Authorization", "Basic Z3Vlc3Q6Z3Vlc3Q=")  # guest:guest
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=15) as r:
        return r.status


@pytest.mark.parametrize("name", ["access.json", "policies.json"])
def test_a_flipped_bit_in_users_or_policies_stops_the_start_with_one_line(tmp_path, name):
    """A flip that leaves valid JSON (a letter of a user's name) would lose that user without a
    word; the checksum written with the file catches it. The disk's damage keeps the file's
    modification time, so the test keeps it too."""
    skip_under_workers("the test flips bits in one process's data folder, laid out as one broker writes it")
    seed = int(os.environ.get("WARREN_BITFLIP_SEED", random.randrange(1 << 31)))
    rng = random.Random(seed)
    data = tmp_path / "data"
    b = launch_broker(tmp_path, data_dir=data)
    try:
        assert http_put(b, "/api/users/bitflip-bob", {"password": "s3cret", "tags": ""}) in (201, 204)
        assert http_put(b, "/api/policies/%2F/bitflip-policy",
                        {"pattern": "^bitflip", "definition": {"max-length": 10}, "apply-to": "queues"}) in (201, 204)
    finally:
        b.stop()
    path = data / name
    st = path.stat()
    [(_, at)] = flip_bits(rng, [path], 1)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(RuntimeError) as e:
        launch_broker(tmp_path, data_dir=data)
    said = [line for line in str(e.value).splitlines() if str(path) in line]
    assert len(said) == 1 and "does not start" in said[0], f"{e.value} (seed {seed}, flip at {at})"


def test_a_file_cut_at_a_random_offset_costs_what_followed_the_cut_and_the_broker_starts(tmp_path):
    """A truncation is a torn tail wherever it falls: what follows the cut is gone (nothing can
    bring it back), what precedes it is delivered whole, and the start needs no hand."""
    skip_under_workers("the test cuts files in one process's data folder, laid out as one broker writes it")
    seed = int(os.environ.get("WARREN_BITFLIP_SEED", random.randrange(1 << 31)))
    rng = random.Random(seed)
    why = f"(seed {seed})"
    messages = 500
    data = tmp_path / "data"
    b = launch_broker(tmp_path, data_dir=data)
    try:
        fill(b, messages)
    finally:
        b.stop()
    qfolder = next((data / "queues").iterdir())
    sfolder = next((data / "streams").iterdir())
    records = queue_records(qfolder) + stream_records(sfolder)
    cuts = {}
    for path in [*qfolder.glob("msgs.*"), *sfolder.iterdir()]:
        cuts[path] = rng.randrange(path.stat().st_size)
        os.truncate(path, cuts[path])
    whole = {(f.parent == qfolder, what) for f, s, e, what in records if f in cuts and isinstance(what, int)
             and e <= cuts[f]}  # the records the cuts left whole
    b = launch_broker(tmp_path, data_dir=data)
    try:
        conn = connect(b)
        q_numbers = [number("q", d) for d in consume_queue(conn.channel())]
        count = stream_count(b)
        s_numbers = [number("s", d) for _, d in consume_stream(conn.channel(), count)] if count else []
        conn.close()
    finally:
        b.stop()
    assert None not in q_numbers and None not in s_numbers, f"a damaged message delivered {why}"
    # what is left is every record the cut left whole (seqs are 1 + the publish number), in order
    assert q_numbers == sorted(seq - 1 for in_queue, seq in whole if in_queue and seq > ACKED_FIRST), why
    assert s_numbers == sorted(offset for in_queue, offset in whole if not in_queue), why
    print(f"\ncuts {why}: queue kept {len(q_numbers)} of {messages - ACKED_FIRST}, "
          f"stream {len(s_numbers)} of {messages}")
