"""Message groups (Qpid's ``qpid.group_header_key``): one consumer at a time per group.

A message's group is the value of the queue's group header (compared as a string); a message
without the header is in the group ``qpid.no-group``, as in Qpid. Qpid's shared groups
(``qpid.shared_msg_group``, the only kind its brokers implement; Warren reads a group queue
that way with or without the flag):

* a consumer that takes a message of a group owns the group until every message of the group
  it took is settled (acked, rejected, requeued); meanwhile only it takes messages of that
  group. Its unacked messages keep the group after it cancels, until its channel settles them
  (or closes, which requeues them);
* each consumer in turn gets the first ready message (in queue order) whose group is free or
  its own: another consumer skips the messages of groups it does not own;
* messages in a transaction are settled at the commit, so a group stays owned until then;
* a ``basic.get`` (or 0-10's acquire of a browsed message) takes only from a free group, and
  holds that group until the message is settled; a consumer without acks holds nothing.

``_owners`` maps each owned group to ``[owner, unsettled count]``; ``_held`` maps each taken,
unsettled message's seq to its group. Browsers see every ready message, owned group or not.
The scan for a consumer's next message walks past the messages of groups others own (and drops
expired messages it meets, dead-lettered as at the head): a long run of one owned group ahead of
the free ones costs that walk on each delivery. Paging, TTL, limits, dead-lettering and
durability are the classic queue's; which consumer owns what is not kept across a restart.
"""

from __future__ import annotations

import time
from bisect import bisect_left

from warren.broker.queue import Queue

from warren.broker.queues.paging import PAGE_LOW, PAGE_LOW_BYTES
from warren.broker.queues.qpid_args import DEFAULT_GROUP, group_header, header_key

__all__ = ["GroupQueue"]


def _seq_of(entry) -> int:
    return entry[0]


class GroupQueue(Queue):
    def __init__(self, vhost, name: str, durable: bool = False, exclusive_owner=None,
                 auto_delete: bool = False, arguments: dict | None = None) -> None:
        super().__init__(vhost, name, durable, exclusive_owner, auto_delete, arguments)
        self.group_header: str = group_header(self.arguments)
        self._owners: dict[str, list] = {}  # group -> [owner, taken and unsettled messages]
        self._held: dict[int, str] = {}  # seq -> group, for each taken and unsettled message

    def group_of(self, msg) -> str:
        try:
            value = msg.headers.get(self.group_header)
        except Exception:  # a property list we cannot read: no group header
            value = None
        group = header_key(value)
        return DEFAULT_GROUP if group is None else group

    def owner_of(self, group: str):
        """The consumer (or getter) that owns a group now, None when it is free."""
        o = self._owners.get(group)
        return o[0] if o is not None else None

    # --- ownership ----------------------------------------------------------------------------

    def _hold(self, seq: int, group: str, owner) -> None:
        o = self._owners.get(group)
        if o is None:
            self._owners[group] = [owner, 1]
        else:
            o[1] += 1
        self._held[seq] = group

    def _settled(self, seq: int) -> bool:
        """A taken message is settled; True when that frees its group."""
        group = self._held.pop(seq, None)
        if group is None:
            return False
        o = self._owners[group]
        o[1] -= 1
        if o[1]:
            return False
        del self._owners[group]
        return True

    def forget(self, seq: int, message) -> None:
        super().forget(seq, message)
        if self._held and self._settled(seq) and self.consumers:
            self.dispatch()  # acked: its group is free for the others

    def reject(self, seq: int, message) -> None:
        freed = self._settled(seq)
        super().reject(seq, message)
        if freed and self.consumers:
            self.dispatch()

    def requeue(self, entries, redelivered: bool = True) -> None:
        for seq, _ in entries:
            self._settled(seq)
        super().requeue(entries, redelivered)  # puts them back, then dispatches

    # --- choosing the next message ------------------------------------------------------------

    def _find(self, owner) -> int | None:
        """The index in ``ready`` of the first message ``owner`` may take (its group free or
        owned by it), dropping the expired messages it walks past; None if there is none."""
        ready = self.ready
        owners = self._owners
        if not owners:
            if ready and ready[0][3]:
                self.expire()
            return 0 if ready else None
        found = None
        expired = []
        now = time.monotonic()
        group_of = self.group_of
        for i, entry in enumerate(ready):
            deadline = entry[3]
            if deadline and deadline <= now:
                expired.append(i)
                continue
            o = owners.get(group_of(entry[1]))
            if o is None or o[0] is owner:
                found = i
                break
        if expired:
            gone = [ready[i] for i in expired]
            for i in reversed(expired):
                del ready[i]
            self.expired(gone)
            if found is not None:
                found -= len(expired)
        return found

    def _deliver_one(self) -> bool:
        """One message to the first consumer in turn that has capacity and may take one."""
        ready = self.ready
        for c in self.choice.turns():
            if not c.has_capacity():  # a browser sends its copies here, and answers False
                continue
            i = self._find(c)
            if i is None:
                continue
            seq, msg, redelivered, deadline = ready[i]
            del ready[i]
            self.ready_bytes -= len(msg.body)
            self.choice.took(c)
            if deadline and deadline <= time.monotonic():
                self.expired([(seq, msg, redelivered, deadline)])
                return True
            group = self.group_of(msg)
            if deadline or self.counts_deliveries:
                msg = self.taken.taking(seq, msg, deadline, c.no_ack)
            if not c.no_ack:
                self._hold(seq, group, c)
            if self.store is not None:
                self.delivered(seq, msg, c.no_ack)
            c.channel.deliver(c, self, seq, msg, redelivered)
            return True
        return False

    def dispatch(self) -> None:
        if self._dispatching:
            return
        self._dispatching = True
        try:
            while self.consumers and (self.ready or self.paged):
                if self.paged and len(self.ready) < PAGE_LOW and self.ready_bytes < PAGE_LOW_BYTES:
                    self.page_in()
                    if not self.ready:
                        break
                if not self._deliver_one():
                    break
        finally:
            self._dispatching = False
            if self.congested:
                self._check_drained()

    def take(self, no_ack: bool = False):
        """basic.get: the first message of a free group; it holds the group until settled."""
        self.last_used = time.monotonic()
        if self.paged and len(self.ready) < PAGE_LOW and self.ready_bytes < PAGE_LOW_BYTES:
            self.page_in()
        getter = object()  # owns nothing yet: only free groups qualify
        i = self._find(getter)
        if i is None:
            return None
        seq, msg, redelivered, deadline = self.ready[i]
        del self.ready[i]
        self.ready_bytes -= len(msg.body)
        group = self.group_of(msg)
        if deadline or self.counts_deliveries:
            msg = self.taken.taking(seq, msg, deadline, no_ack, True)
        if not no_ack:
            self._hold(seq, group, getter)
        self.delivered(seq, msg, no_ack)
        if self.congested:
            self._check_drained()
        return seq, msg, redelivered, deadline

    def take_seq(self, seq: int):
        """0-10's acquire of a browsed message: only from a free group, which it then holds."""
        ready = self.ready
        i = bisect_left(ready, seq, key=_seq_of)
        if i >= len(ready) or ready[i][0] != seq:
            return None
        group = self.group_of(ready[i][1])
        if group in self._owners:
            return None
        got = super().take_seq(seq)
        if got is not None:
            self._hold(seq, group, object())
        return got

    def __repr__(self) -> str:
        return f"<GroupQueue {self.name!r} header={self.group_header!r} ready={len(self.ready)} " \
               f"groups owned={len(self._owners)}>"
