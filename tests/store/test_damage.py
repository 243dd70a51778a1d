"""Damage inside store files (warren/store/damage.py): it costs the damaged records, not the rest.

Each test writes real store files, damages them (a flipped bit, a smashed length, garbage over
several records, a damaged last record), reopens the store, and checks what came back: every
record outside the damage, none that is damaged, the file copied aside before it changed, and a
report saying what was lost.
"""

from __future__ import annotations

import os
import random
import struct
import zlib

import pytest

from warren.store.damage import quarantine_dir_for, scan_seq_file
from warren.store.queue_store import QueueStore
from warren.store.record import FILE_HEADER_SIZE, HEADER_SIZE, T_MESSAGE, append_record, file_header, KIND_MESSAGES
from warren.codec.bulk_records import ENTRY_HEADER_SIZE
from warren.store.stream_store import StreamStore

RECORD = 100  # octets of each test message's record


def body(seq: int) -> bytes:
    return (b"m%07d-" % seq) * (RECORD // 9) + b"." * (RECORD % 9)


def write_queue(directory, n: int = 300, acked=(), delivered=()) -> None:
    s = QueueStore(directory, fsync=False)
    for seq in range(1, n + 1):
        s.append(seq, body(seq))
    for seq in delivered:
        s.mark_delivered(seq)
    for seq in acked:
        s.ack(seq)
    s.close()


def record_offset(seq: int) -> int:
    """Where message ``seq``'s record starts in the first segment (records of one size)."""
    return FILE_HEADER_SIZE + (seq - 1) * (HEADER_SIZE + 8 + RECORD)


def flip(path, offset: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def live(store) -> dict[int, bytes]:
    return {seq: rec for seq, rec, _ in store.recover()}


# --- queue message files ------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["payload", "crc", "length", "type", "seq"])
def test_a_flipped_bit_in_the_middle_costs_one_message(tmp_path, where):
    qdir = tmp_path / "queues" / "q"
    write_queue(qdir)
    msgs = qdir / "msgs.0000000001"
    original = msgs.read_bytes()
    at = record_offset(150) + {"payload": HEADER_SIZE + 8 + 40, "crc": 6, "length": 3, "type": 0, "seq": 12}[where]
    flip(msgs, at, 5)
    s = QueueStore(qdir, fsync=False)
    got = live(s)
    assert sorted(got) == [seq for seq in range(1, 301) if seq != 150]
    assert all(rec == body(seq) for seq, rec in got.items())
    [d] = s.recovery_stats.damage
    assert (d.kind, d.first, d.last, d.records, d.tail) == ("messages", 150, 150, 1, False)
    assert (d.start, d.end) == (record_offset(150), record_offset(151))
    # the file as it was, kept aside in the data folder's quarantine folder before the rewrite
    copy = d.quarantined
    assert copy.startswith(str(tmp_path / "quarantine" / "q")) and open(copy, "rb").read()[at] == original[at] ^ 32
    s.append(301, body(301))  # appends go on after the rewritten file's last record
    s.close()
    again = QueueStore(qdir, fsync=False)
    assert again.recovery_stats.damage == [] and sorted(live(again)) == sorted([*got, 301])
    again.close()


def test_garbage_over_several_records_costs_those_records_only(tmp_path):
    qdir = tmp_path / "q"
    write_queue(qdir)
    msgs = qdir / "msgs.0000000001"
    data = bytearray(msgs.read_bytes())
    start = record_offset(100) + 30
    data[start:start + 3 * (HEADER_SIZE + 8 + RECORD)] = random.Random(7).randbytes(3 * (HEADER_SIZE + 8 + RECORD))
    msgs.write_bytes(bytes(data))
    s = QueueStore(qdir, fsync=False)
    got = live(s)
    lost = set(range(1, 301)) - set(got)
    assert lost == {100, 101, 102, 103}  # the records the garbage touched
    assert all(rec == body(seq) for seq, rec in got.items())
    assert s.recovery_stats.lost_messages == 4
    s.close()


def test_a_torn_tail_is_cut_without_a_copy(tmp_path):
    qdir = tmp_path / "q"
    write_queue(qdir, 50)
    msgs = qdir / "msgs.0000000001"
    with open(msgs, "r+b") as f:
        f.truncate(record_offset(50) + 20)  # the last write cut short, as a crash leaves it
    s = QueueStore(qdir, fsync=False)
    assert sorted(live(s)) == list(range(1, 50))
    assert s.recovery_stats.damage == [] and s.recovery_stats.truncated_bytes == 20
    assert not (tmp_path / "quarantine").exists()
    s.close()


def test_a_damaged_last_record_is_damage_not_a_torn_tail(tmp_path):
    qdir = tmp_path / "q"
    write_queue(qdir, 50)
    flip(qdir / "msgs.0000000001", record_offset(50) + HEADER_SIZE + 20)
    s = QueueStore(qdir, fsync=False)
    assert sorted(live(s)) == list(range(1, 50))
    [d] = s.recovery_stats.damage
    assert d.tail and d.first == 50 and os.path.exists(d.quarantined)
    s.close()


def test_acked_messages_in_a_damaged_stretch_are_not_counted_lost(tmp_path):
    qdir = tmp_path / "q"
    write_queue(qdir, 300, acked=[150])
    flip(qdir / "msgs.0000000001", record_offset(150) + 50)
    s = QueueStore(qdir, fsync=False)
    assert 150 not in live(s) and len(s) == 299
    assert s.recovery_stats.lost_messages == 0  # it was acked: nothing live went with it
    s.close()


# --- ack logs -------------------------------------------------------------------------------------

def test_a_damaged_ack_record_costs_that_ack_only(tmp_path):
    qdir = tmp_path / "q"
    acked = list(range(1, 200, 2))
    write_queue(qdir, 300, acked=acked)
    acks = qdir / "acks.0000000001"
    flip(acks, FILE_HEADER_SIZE + 10 * (HEADER_SIZE + 8) + 12)  # the seq of the 11th ack record
    s = QueueStore(qdir, fsync=False)
    back = set(live(s)) & set(acked)
    assert back == {acked[10]}  # one acked message comes back (at least once), no other
    assert s.recovery_stats.lost_acks == 1
    s.close()


ACK_RECORD = HEADER_SIZE + 8


def ack_log_after_a_power_cut(qdir, synced: int, lost: int, kept: int, torn: int = 0) -> tuple[list[int], bytes]:
    """An ack log as a power cut leaves it when the first ``lost`` ack records written since the
    last fsync never reached the disk (zeros: the file's size did) and the newest write's
    ``kept`` did, its last record cut ``torn`` octets short. Returns (acks in order, the file)."""
    acked = list(range(1, 2 * (synced + lost + kept), 2))
    write_queue(qdir, 300, acked=acked)
    acks = qdir / "acks.0000000001"
    data = bytearray(acks.read_bytes())
    zeros_at = FILE_HEADER_SIZE + synced * ACK_RECORD
    data[zeros_at:zeros_at + lost * ACK_RECORD] = bytes(lost * ACK_RECORD)
    if torn:
        del data[-torn:]
    acks.write_bytes(bytes(data))
    return acked, bytes(data)


@pytest.mark.parametrize("torn", [0, 5])
def test_an_ack_log_tail_of_zeros_then_records_is_a_torn_tail_not_damage(tmp_path, torn):
    """A power cut in an ack log written twice since its fsync: the first write reads back as
    zeros, the second is there. That is a crash's tail: cut at the zeros, with no damage report
    and no copy kept aside; the acks cut off bring their messages back (at least once)."""
    qdir = tmp_path / "q"
    acked, data = ack_log_after_a_power_cut(qdir, synced=40, lost=25, kept=10, torn=torn)
    s = QueueStore(qdir, fsync=False)
    assert s.recovery_stats.damage == [] and s.recovery_stats.lost_acks == 0
    assert not (tmp_path / "quarantine").exists()
    assert s.recovery_stats.truncated_bytes == len(data) - (FILE_HEADER_SIZE + 40 * ACK_RECORD)
    assert (qdir / "acks.0000000001").stat().st_size == FILE_HEADER_SIZE + 40 * ACK_RECORD
    back = set(live(s)) & set(acked)
    assert back == set(acked[40:])  # the acks after the last fsync, none before it
    s.close()
    again = QueueStore(qdir, fsync=False)  # and the next start finds a clean file
    assert again.recovery_stats.damage == [] and again.recovery_stats.truncated_bytes == 0
    again.close()


def test_zeros_then_a_flipped_bit_in_an_ack_log_is_still_damage(tmp_path):
    """What a crash cannot write is damage even behind zeros: a flipped bit in a record after
    them (followed by good ones) is reported, and the file kept aside."""
    qdir = tmp_path / "q"
    acked, data = ack_log_after_a_power_cut(qdir, synced=40, lost=5, kept=20)
    acks = qdir / "acks.0000000001"
    flip(acks, FILE_HEADER_SIZE + 50 * ACK_RECORD + 12)  # the seq of the 51st ack record
    s = QueueStore(qdir, fsync=False)
    assert s.recovery_stats.damage and s.recovery_stats.damage[0].kind == "acks"
    assert (tmp_path / "quarantine").exists()
    s.close()


def test_damage_in_the_middle_of_an_ack_log_is_still_reported_and_read_around(tmp_path):
    """A flipped bit in a synced ack record with good ones after it: reported, copied aside,
    and the good acks after it still count (one message comes back, not all of them)."""
    qdir = tmp_path / "q"
    acked = list(range(1, 200, 2))
    write_queue(qdir, 300, acked=acked)
    acks = qdir / "acks.0000000001"
    flip(acks, FILE_HEADER_SIZE + 30 * ACK_RECORD + 2)  # the length of the 31st ack record
    s = QueueStore(qdir, fsync=False)
    [d] = s.recovery_stats.damage
    assert d.kind == "acks" and not d.tail and os.path.exists(d.quarantined)
    assert set(live(s)) & set(acked) == {acked[30]}
    s.close()


def test_zeros_in_a_message_file_before_good_records_are_still_read_around_and_reported(tmp_path):
    """In a message file the zeros may be confirmed messages the disk lost: the records after
    them are kept and the loss reported, as before (only ack logs take them for a power cut)."""
    qdir = tmp_path / "q"
    write_queue(qdir, 50)
    msgs = qdir / "msgs.0000000001"
    data = bytearray(msgs.read_bytes())
    data[record_offset(20):record_offset(25)] = bytes(record_offset(25) - record_offset(20))
    msgs.write_bytes(bytes(data))
    s = QueueStore(qdir, fsync=False)
    assert sorted(live(s)) == [*range(1, 20), *range(25, 51)]
    [d] = s.recovery_stats.damage
    assert (d.first, d.last) == (20, 24) and os.path.exists(d.quarantined)
    s.close()


# --- streams --------------------------------------------------------------------------------------

def entry(i: int) -> bytes:
    return (b"e%06d|" % i) * 12


def write_stream(directory, n: int = 400) -> list[int]:
    st = StreamStore(directory, fsync=False)
    for i in range(n):
        st.append(entry(i), 1_000 + i)
    st.close()
    return [FILE_HEADER_SIZE + i * (ENTRY_HEADER_SIZE + len(entry(0))) for i in range(n)]


@pytest.mark.parametrize("field_at", [0, 5, 13, 21, 40])  # crc, offset, timestamp, length, record
def test_a_damaged_stream_entry_costs_that_entry(tmp_path, field_at):
    sdir = tmp_path / "streams" / "s"
    positions = write_stream(sdir)
    seg = sdir / "stream.00000000000000000000"
    flip(seg, positions[200] + field_at, 3)
    st = StreamStore(sdir, fsync=False)
    got = st.read(0, 1000, 1 << 30)
    assert [o for o, _, _ in got] == [o for o in range(400) if o != 200]
    assert all(rec == entry(o) for o, _, rec in got)
    [d] = st.recovery_stats.damage
    assert (d.first, d.last, d.records) == (200, 200, 1) and os.path.exists(d.quarantined)
    assert st.next_offset == 400
    assert st.append(entry(400), 2_000) == 400  # offsets go on, never reused
    st.close()
    again = StreamStore(sdir, fsync=False)
    assert again.recovery_stats.damage == [] and again.message_count == 400
    assert [o for o, _, _ in again.read(0, 1000, 1 << 30)][-2:] == [399, 400]
    again.close()


def test_a_split_interrupted_before_the_cut_is_done_again(tmp_path):
    """A crash after the split-off segment was renamed into place but before the damaged one was
    cut: the next open finds the damage again, rewrites the same split and cuts."""
    sdir = tmp_path / "s"
    positions = write_stream(sdir)
    seg = sdir / "stream.00000000000000000000"
    flip(seg, positions[100] + 30)
    damaged = seg.read_bytes()
    st = StreamStore(sdir, fsync=False)
    st.close()
    seg.write_bytes(damaged)  # as if the cut never happened
    (sdir / "stream.00000000000000000101.repair").write_bytes(b"half")  # and a split left half-written
    st = StreamStore(sdir, fsync=False)
    assert [o for o, _, _ in st.read(0, 1000, 1 << 30)] == [o for o in range(400) if o != 100]
    assert sorted(os.listdir(sdir)) == ["stream.00000000000000000000", "stream.00000000000000000101"]
    st.close()


# --- framing that only looks right -----------------------------------------------------------------

def test_garbage_that_looks_like_records_is_not_taken_for_them(tmp_path):
    """Type octets, plausible lengths and seqs everywhere, but no CRC that checks: nothing of the
    garbage comes back as a message."""
    rng = random.Random(3)
    path = tmp_path / "msgs.0000000001"
    buf = bytearray(file_header(KIND_MESSAGES))
    for seq in (1, 2):
        append_record(buf, T_MESSAGE, struct.pack(">Q", seq), body(seq))
    bad = len(buf)
    for _ in range(2000):  # headers with the right type, a small length, a seq above 2, a wrong crc
        n = rng.randrange(8, 40)
        buf += struct.pack(">BIIQ", T_MESSAGE, n, rng.getrandbits(32), rng.randrange(3, 1000))
        buf += rng.randbytes(n - 8)
    path.write_bytes(bytes(buf))
    scan, damage, _ = scan_seq_file(str(path), bytes(buf), frozenset((T_MESSAGE,)), "messages")
    assert list(scan.seqs) == [1, 2] and damage[0].start == bad and damage[0].tail


def test_a_record_found_again_must_pass_its_crc(tmp_path):
    """A header whose CRC happens to be right for a different payload is still refused: the CRC
    covers type, length and payload, so a candidate is only taken when all of it agrees."""
    buf = bytearray(file_header(KIND_MESSAGES))
    append_record(buf, T_MESSAGE, struct.pack(">Q", 1), body(1))
    bad = len(buf)
    buf += b"\xff" * 7  # damage
    payload = struct.pack(">Q", 2) + body(2)
    crc = zlib.crc32(payload, zlib.crc32(struct.pack(">BI", T_MESSAGE, len(payload))))
    buf += struct.pack(">BII", T_MESSAGE, len(payload), crc) + payload[:-1] + b"X"  # one octet off
    append_record(buf, T_MESSAGE, struct.pack(">Q", 3), body(3))
    scan, damage, _ = scan_seq_file("f", bytes(buf), frozenset((T_MESSAGE,)), "messages")
    assert list(scan.seqs) == [1, 3]
    assert damage[0].start == bad and (damage[0].first, damage[0].last) == (2, 2)


def test_random_flips_cost_about_the_records_they_touch(tmp_path):
    """Seeded random flips over a whole queue folder: what is lost stays within the records hit."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    qdir = tmp_path / "q"
    write_queue(qdir, 2000)
    msgs = qdir / "msgs.0000000001"
    data = bytearray(msgs.read_bytes())
    touched = set()
    for _ in range(24):
        at = rng.randrange(FILE_HEADER_SIZE, len(data))
        data[at] ^= 1 << rng.randrange(8)
        touched.add((at - FILE_HEADER_SIZE) // (HEADER_SIZE + 8 + RECORD) + 1)
    msgs.write_bytes(bytes(data))
    s = QueueStore(qdir, fsync=False)
    got = live(s)
    lost = set(range(1, 2001)) - set(got)
    assert all(rec == body(seq) for seq, rec in got.items()), f"seed {seed}"
    assert lost <= touched, f"seed {seed}: lost {sorted(lost - touched)} that no flip touched"
    s.close()


def test_quarantine_folder_is_in_the_data_folder(tmp_path):
    assert quarantine_dir_for(str(tmp_path / "data" / "queues" / "abc")) == str(tmp_path / "data" / "quarantine")
    assert quarantine_dir_for(str(tmp_path / "data" / "streams" / "abc")) == str(tmp_path / "data" / "quarantine")
    assert quarantine_dir_for(str(tmp_path / "q")) == str(tmp_path / "quarantine")


@pytest.mark.parametrize("kind", ["msgs", "acks", "stream"])
def test_a_flipped_bit_in_a_file_header_costs_nothing(tmp_path, kind):
    if kind == "stream":
        write_stream(tmp_path / "s", 50)
        path = tmp_path / "s" / "stream.00000000000000000000"
    else:
        write_queue(tmp_path / "q", 50, acked=[3, 4])
        path = tmp_path / "q" / f"{kind}.0000000001"
    flip(path, 3, 1)  # the version octet
    if kind == "stream":
        st = StreamStore(tmp_path / "s", fsync=False)
        assert st.message_count == 50 and [d.reason for d in st.recovery_stats.damage] == ["damaged file header"]
        st.close()
    else:
        s = QueueStore(tmp_path / "q", fsync=False)
        assert sorted(live(s)) == [seq for seq in range(1, 51) if seq not in (3, 4)]
        assert [d.reason for d in s.recovery_stats.damage] == ["damaged file header"]
        s.close()
    assert path.read_bytes()[:FILE_HEADER_SIZE] == file_header(path.read_bytes()[4:5])  # mended


def test_random_flips_in_a_stream_cost_the_entries_they_touch(tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    sdir = tmp_path / "s"
    positions = write_stream(sdir, 2000)
    seg = sdir / "stream.00000000000000000000"
    data = bytearray(seg.read_bytes())
    ends = positions[1:] + [len(data)]
    touched = set()
    for _ in range(24):
        at = rng.randrange(FILE_HEADER_SIZE, len(data))
        data[at] ^= 1 << rng.randrange(8)
        touched |= {i for i, (p, e) in enumerate(zip(positions, ends)) if p <= at < e}
    seg.write_bytes(bytes(data))
    st = StreamStore(sdir, fsync=False)
    got = st.read(0, 5000, 1 << 30)
    assert all(rec == entry(o) for o, _, rec in got), f"seed {seed}"
    lost = set(range(2000)) - {o for o, _, _ in got}
    assert lost == touched, f"seed {seed}: lost {sorted(lost ^ touched)} beyond the entries touched"
    assert st.recovery_stats.lost_records == len(lost) or st.recovery_stats.damage[-1].tail, f"seed {seed}"
    st.close()


@pytest.mark.parametrize("seed", range(20))
def test_garbage_between_good_records_is_stepped_over(seed):
    """Good records with stretches of random octets (or zeros) between them: every good record
    is found again, in order, and no record is made up from the garbage."""
    rng = random.Random(seed)
    buf = bytearray(file_header(KIND_MESSAGES))
    seqs = []
    for seq in range(1, 60):
        if rng.random() < 0.2:
            buf += rng.randbytes(rng.randrange(1, 300)) if rng.random() < 0.7 else bytes(rng.randrange(1, 300))
        append_record(buf, T_MESSAGE, struct.pack(">Q", seq), body(seq))
        seqs.append(seq)
    scan, damage, stretches = scan_seq_file("f", bytes(buf), frozenset((T_MESSAGE,)), "messages")
    assert list(scan.seqs) == seqs, f"seed {seed}"
    assert all(bytes(buf[scan.offsets[i] + HEADER_SIZE + 8:scan.offsets[i] + HEADER_SIZE + 8 + scan.lengths[i]])
               == body(seq) for i, seq in enumerate(scan.seqs))


def test_a_stale_record_out_of_seq_order_is_kept_aside_before_the_cut(tmp_path):
    """Valid records whose seqs go back (stale data, never written by appends) end the file as
    before; the file is copied to the quarantine folder first and the cut is reported."""
    qdir = tmp_path / "q"
    write_queue(qdir, 10)
    msgs = qdir / "msgs.0000000001"
    buf = bytearray(msgs.read_bytes())
    append_record(buf, T_MESSAGE, struct.pack(">Q", 4), body(4))  # a seq already there
    msgs.write_bytes(bytes(buf))
    s = QueueStore(qdir, fsync=False)
    assert sorted(live(s)) == list(range(1, 11))
    [d] = s.recovery_stats.damage
    assert d.reason == "seq 4 out of order" and os.path.getsize(d.quarantined) == len(buf)
    s.close()
