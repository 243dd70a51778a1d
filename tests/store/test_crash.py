"""Crash consistency of QueueStore: torn tails, corrupt records, simulated power cuts, kill -9."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warren.store import QueueStore
from warren.store.record import HEADER_SIZE

from .crash_child import SEGMENT_SIZE, payload

CHILD = Path(__file__).with_name("crash_child.py")
N = 6


def make_store(d: Path, n: int = N, acks=()) -> None:
    with QueueStore(d, fsync=False) as s:
        for q in range(1, n + 1):
            s.append(q, payload(q))
        for a in acks:
            s.ack(a)


def last_record_start(path: Path, last_payload_len: int) -> int:
    return path.stat().st_size - HEADER_SIZE - last_payload_len


def check_reopen_and_append(d: Path, want: list[int]) -> None:
    with QueueStore(d, fsync=False) as s:
        assert [q for q, _, _ in s.recover()] == want
        s.append(s.last_seq + 1, payload(s.last_seq + 1))
        new = s.last_seq
    with QueueStore(d, fsync=False) as s:
        got = s.recover()
        assert [q for q, _, _ in got] == want + [new]
        assert all(r == payload(q) for q, r, _ in got)
        assert s.recovery_stats.truncated_files == 0  # the first open left a clean file


# --- torn and corrupt tails --------------------------------------------------------------------------

def test_segment_truncated_at_every_offset_of_last_record(tmp_path):
    src = tmp_path / "src"
    make_store(src)
    seg = src / "msgs.0000000001"
    full = seg.read_bytes()
    start = last_record_start(seg, 8 + len(payload(N)))
    for cut in range(start, len(full)):  # every offset inside the header and the payload
        d = tmp_path / f"c{cut}"
        d.mkdir()
        (d / seg.name).write_bytes(full[:cut])
        with QueueStore(d, fsync=False) as s:
            assert [q for q, _, _ in s.recover()] == list(range(1, N)), cut
            assert s.recovery_stats.truncated_bytes == cut - start
        assert (d / seg.name).stat().st_size == start  # cut back at the last valid record
        check_reopen_and_append(d, list(range(1, N)))
        shutil.rmtree(d)


def test_ack_log_truncated_at_every_offset_of_last_record(tmp_path):
    src = tmp_path / "src"
    make_store(src, acks=(2, 4))
    log = src / "acks.0000000001"
    full = log.read_bytes()
    start = last_record_start(log, 8)
    for cut in range(start, len(full)):
        d = tmp_path / f"c{cut}"
        shutil.copytree(src, d)
        (d / log.name).write_bytes(full[:cut])
        check_reopen_and_append(d, [1, 3, 4, 5, 6])  # the torn ack of 4 is lost: 4 comes back
        shutil.rmtree(d)


@pytest.mark.parametrize("where", ["header", "seq", "payload", "end"])
def test_flipped_byte_in_last_record_drops_it(tmp_path, where):
    d = tmp_path / "q"
    make_store(d)
    seg = d / "msgs.0000000001"
    data = bytearray(seg.read_bytes())
    start = last_record_start(seg, 8 + len(payload(N)))
    pos = {"header": start + 2, "seq": start + HEADER_SIZE + 7, "payload": start + HEADER_SIZE + 8 + 5,
           "end": len(data) - 1}[where]
    data[pos] ^= 0x10
    seg.write_bytes(bytes(data))
    check_reopen_and_append(d, list(range(1, N)))


@pytest.mark.parametrize("zeros", [1, HEADER_SIZE, 4096, 65536])
def test_zero_filled_tail_is_ignored(tmp_path, zeros):
    d = tmp_path / "q"
    make_store(d, acks=(1,))
    for name in ("msgs.0000000001", "acks.0000000001"):
        with open(d / name, "ab") as f:
            f.write(bytes(zeros))
    check_reopen_and_append(d, list(range(2, N + 1)))


def test_torn_header_of_new_segment(tmp_path):
    d = tmp_path / "q"
    with QueueStore(d, segment_size=1024, fsync=False) as s:
        for q in range(1, 20):
            s.append(q, payload(q))
        in_last = set(s._segments[-1].seqs)
    newest = max(p for p in d.iterdir() if p.name.startswith("msgs"))
    newest.write_bytes(b"WR")  # the newest segment was created, the crash came mid-header
    want = [q for q in range(1, 20) if q not in in_last]
    with QueueStore(d, segment_size=1024, fsync=False) as s:
        assert [q for q, _, _ in s.recover()] == want
        s.append(100, b"after")
    with QueueStore(d, segment_size=1024, fsync=False) as s:
        assert [q for q, _, _ in s.recover()] == want + [100]


# --- simulated power cuts ------------------------------------------------------------------------------

def crash_image(rng: random.Random, live_dir: Path, snapshot: dict[str, bytes], dest: Path) -> None:
    """What a power cut might leave: the synced content, plus any prefix of later writes, plus zeros."""
    dest.mkdir()
    for name in sorted(set(os.listdir(live_dir)) | set(snapshot)):
        now = (live_dir / name).read_bytes() if (live_dir / name).exists() else b""
        base = snapshot.get(name)
        if base is None:  # created after the last sync: may be missing or hold any prefix
            if rng.random() < 0.3:
                continue
            base = b""
        extra = now[len(base):] if now.startswith(base) else b""
        content = base + extra[:rng.randint(0, len(extra))]
        if rng.random() < 0.2:
            content += bytes(rng.choice((1, 9, 512, 4096)))
        (dest / name).write_bytes(content)


def test_simulated_power_cut(tmp_path):
    """Only what sync() covered may be relied on; everything else may be lost, torn or zeroed."""
    rng = random.Random(42)
    d = tmp_path / "q"
    s = QueueStore(d, segment_size=4096)
    live: dict[int, bool] = {}  # seq -> delivered
    acked: set[int] = set()
    seq = 0
    images = 0
    for round_ in range(40):
        for _ in range(rng.randint(1, 30)):
            seq += 1
            s.append(seq, payload(seq))
            live[seq] = False
        for _ in range(rng.randint(0, 30)):
            if live:
                q = min(live) if rng.random() < 0.8 else rng.choice(list(live))
                s.ack(q)
                del live[q]
                acked.add(q)
        for q in rng.sample(sorted(live), min(2, len(live))):
            s.mark_delivered(q)
            live[q] = True
        s.sync()
        snapshot = {p.name: p.read_bytes() for p in d.iterdir()}
        synced_live, synced_acked, synced_seq = dict(live), set(acked), seq
        # unsynced work, handed to the OS (so it may or may not reach the disk)
        unsynced_acks = set()
        for _ in range(rng.randint(0, 20)):
            seq += 1
            s.append(seq, payload(seq))
            live[seq] = False
        for q in rng.sample(sorted(live), min(len(live), rng.randint(0, 10))):
            s.ack(q)
            del live[q]
            acked.add(q)
            unsynced_acks.add(q)
        s.flush()
        for k in range(3):
            img = tmp_path / f"img{round_}.{k}"
            crash_image(rng, d, snapshot, img)
            with QueueStore(img, segment_size=4096, fsync=False) as r:
                got = r.recover()
                seqs = [q for q, _, _ in got]
                assert seqs == sorted(set(seqs))
                assert all(rec == payload(q) for q, rec, _ in got)
                present = set(seqs)
                assert not present & synced_acked, "an acked message came back"
                missing = set(synced_live) - present - unsynced_acks
                assert not missing, f"synced messages lost: {sorted(missing)[:10]}"
                for q, _, delivered in got:
                    if synced_live.get(q):
                        assert delivered
                assert r.last_seq >= synced_seq
            shutil.rmtree(img)
            images += 1
    s.close()
    assert images == 120


# --- kill -9 -------------------------------------------------------------------------------------------

def test_kill_9(tmp_path):
    """A child appends, acks and syncs; SIGKILL at random moments; every reported sync must hold."""
    d = tmp_path / "q"
    rng = random.Random()
    gone: set[int] = set()       # acked, and known to be gone for good
    delivered: set[int] = set()  # delivered marks covered by a sync
    synced_max = 0
    deadline = time.monotonic() + 22
    cycles = 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(Path(__file__).parents[2]),
                                                                   os.environ.get("PYTHONPATH")) if p))
    marked_by: dict[int, tuple[int, int]] = {}  # seq -> (cycle, child seed) whose synced line marked it
    while cycles < 30 and time.monotonic() < deadline:
        cycles += 1
        seed = rng.randrange(1 << 30)
        p = subprocess.Popen([sys.executable, str(CHILD), str(d), str(seed)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            ready = p.stdout.readline()
            assert ready.startswith(b"R "), p.stderr.read().decode()
            time.sleep(rng.uniform(0.0, 0.2))
        finally:
            p.kill()
        # not communicate(): it reads the raw pipe and would miss what readline() buffered
        out, err = p.stdout.read(), p.stderr.read()
        p.wait()
        p.stdout.close()
        p.stderr.close()
        assert p.returncode == -9, err.decode()
        pending: set[int] = set()
        for line in out.split(b"\n")[:-1]:  # the last piece is cut short or empty
            kind, *rest = line.split()
            if kind == b"P":
                pending = set(map(int, rest))
            elif kind == b"S":
                synced_max = int(rest[0])
                gone |= pending
                pending = set()
                delivered |= set(map(int, rest[2:]))
                marked_by.update((int(q), (cycles, seed)) for q in rest[2:])
        with QueueStore(d, segment_size=SEGMENT_SIZE) as s:
            got = s.recover()
            seqs = [q for q, _, _ in got]
            assert seqs == sorted(set(seqs)), "duplicates or disorder"
            for q, rec, dl in got:
                assert rec == payload(q), f"seq {q} corrupt"
                if q in delivered:  # (what the next failure needs to be understood: seen once, CI, session 14)
                    assert dl, (f"seq {q} lost its delivered mark (marked in cycle {marked_by[q][0]} by child seed "
                                f"{marked_by[q][1]}; now cycle {cycles}; files: "
                                f"{sorted((n.name, n.stat().st_size) for n in d.iterdir())})")
            present = set(seqs)
            assert not present & gone, f"acked seqs came back: {sorted(present & gone)[:10]}"
            missing = set(range(1, synced_max + 1)) - gone - pending - present
            assert not missing, f"synced seqs lost: {sorted(missing)[:10]}"
            assert s.last_seq >= synced_max
            # acks of the killed batch that did land are final (their seqs are never reused)
            gone |= {q for q in pending - present if q <= s.last_seq}
    assert cycles >= 10 and synced_max > 100
    ids = [int(n.split(".")[1]) for n in os.listdir(d) if n.startswith("msgs.")]
    assert max(ids) > len(ids)  # fully acked segments were deleted along the way
