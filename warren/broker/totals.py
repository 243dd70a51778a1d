"""Node-wide counts that outlive the objects that counted them.

Prometheus counters must never go back, but Warren counts messages on the objects that handle
them (a channel's publishes and confirms, a queue's deliveries and acks: plain integer
increments, warren/management/api/stats.py). When a channel closes or a queue is deleted its
counts are added here, once, so a scrape reports ``retired + sum over the live objects`` and
the total only grows. The same object counts the few events that have no object to live on:
connections closed, flow-control pauses.

Nothing here is on the publish path: a channel is retired when it closes, a queue when it is
deleted. This module imports nothing: the broker counts here, and the metrics and the HTTP API read it.
One instance per process (``TOTALS``), as one Warren process is one node.

The same counts are also kept per vhost (``by_vhost``), for the HTTP API's vhost and overview
``message_stats`` (warren/management/api/stats.py), so those never go back either.
"""

from __future__ import annotations

__all__ = ["NodeTotals", "TOTALS", "QUEUE_TYPES", "VHOST_COUNTS"]

QUEUE_TYPES = ("classic", "quorum", "stream")
# the per-vhost counts of closed channels and deleted queues (``NodeTotals.by_vhost``), in order
VHOST_COUNTS = ("publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "get", "ack", "redeliver")


class NodeTotals:
    def __init__(self) -> None:
        self.connections_closed = 0
        self.channels_closed = 0
        self.queues_deleted = 0
        # counts of closed channels (Channel.stats_*, confirmed_upto, publish_seq)
        self.received = 0
        self.received_confirm = 0
        self.confirmed = 0
        self.unroutable_dropped = 0
        self.unroutable_returned = 0
        # counts of deleted queues per queue type: [delivered, got, acknowledged, redelivered]
        self.by_queue_type: dict[str, list[int]] = {t: [0, 0, 0, 0] for t in QUEUE_TYPES}
        # flow control: a connection stopped being read (connection.py)
        self.queue_flow_pauses = 0  # a queue it published to passed its flow mark
        self.alarm_flow_pauses = 0  # a resource alarm blocked it as a publisher
        # vhost name -> counts of its closed channels and deleted queues, VHOST_COUNTS order
        self.by_vhost: dict[str, list[int]] = {}

    def vhost_counts(self, name: str) -> list[int]:
        counts = self.by_vhost.get(name)
        if counts is None:
            counts = self.by_vhost[name] = [0] * len(VHOST_COUNTS)
        return counts

    def forget_vhost(self, name: str) -> None:
        """A deleted vhost's counts go with it (a new vhost of that name starts at 0)."""
        self.by_vhost.pop(name, None)

    def channel_closed(self, ch) -> None:
        """Channel.close: its counts join the node's."""
        self.channels_closed += 1
        self.received += ch.stats_publish
        self.unroutable_dropped += ch.stats_unroutable_dropped
        self.unroutable_returned += ch.stats_unroutable_returned
        self.confirmed += ch.confirmed_upto
        if ch.confirm_mode:
            self.received_confirm += ch.publish_seq
        vhost = ch.vhost
        if vhost is not None:
            counts = self.vhost_counts(vhost.name)
            counts[0] += ch.stats_publish
            counts[1] += ch.confirmed_upto
            counts[2] += ch.stats_unroutable_returned
            counts[3] += ch.stats_unroutable_dropped

    def queue_deleted(self, q) -> None:
        """A queue left its vhost (deleted, expired, auto-deleted, its vhost deleted)."""
        self.queues_deleted += 1
        counts = self.by_queue_type.setdefault(q.queue_type, [0, 0, 0, 0])
        counts[0] += q.stats_deliver
        counts[1] += q.stats_get
        counts[2] += q.stats_ack
        counts[3] += q.stats_redeliver
        counts = self.vhost_counts(q.vhost.name)
        counts[4] += q.stats_deliver
        counts[5] += q.stats_get
        counts[6] += q.stats_ack
        counts[7] += q.stats_redeliver


TOTALS = NodeTotals()
