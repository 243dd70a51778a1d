"""The victim of test_crash.py's kill -9 test: appends, acks and syncs until it is killed.

Usage: crash_child.py DIRECTORY SEED

Reopens the store (recovering what the previous victim left), then loops over batches:
append 1-40 messages, pick some messages to ack and print ``P <seqs>`` (the acks it is about
to make, so the parent knows which may be gone if the kill comes before the sync), ack them,
mark a few others delivered, ``sync()``, and print ``S <highest synced seq> D <seqs marked
delivered>``. Every line is flushed at once; a line is only printed after the thing it reports
has happened, so the parent may rely on it.
"""

from __future__ import annotations

import random
import sys

from warren.store import QueueStore

SEGMENT_SIZE = 16 * 1024


def payload(seq: int) -> bytes:
    """Deterministic content, so the parent can check every record it gets back."""
    n = (seq * 7919) % 900 + 1
    return (b"<%d>" % seq * n)[:n]


def main() -> None:
    directory, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    out = sys.stdout
    store = QueueStore(directory, segment_size=SEGMENT_SIZE)
    live = [seq for seq, _ in store.unacked()]
    seq = store.last_seq
    out.write(f"R {seq}\n")
    out.flush()
    while True:
        for _ in range(rng.randint(1, 40)):
            seq += 1
            store.append(seq, payload(seq))
            live.append(seq)
        acks = []
        for _ in range(rng.randint(0, 45)):
            if not live:
                break
            # mostly from the head, like a consumer; sometimes anywhere, like a reject
            acks.append(live.pop(0 if rng.random() < 0.85 else rng.randrange(len(live))))
        out.write("P " + " ".join(map(str, acks)) + "\n")
        out.flush()
        for a in acks:
            store.ack(a)
        marked = rng.sample(live, min(len(live), rng.randint(0, 3)))
        for m in marked:
            store.mark_delivered(m)
        covered = store.sync()
        assert covered == seq
        out.write(f"S {seq} D " + " ".join(map(str, marked)) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
