"""Which queue class serves a queue.declare: the only place that decides it from arguments."""

from __future__ import annotations

from warren.broker.queue import Queue
from warren.broker.queues import qpid_args
from warren.broker.queues.base import QueueBase
from warren.broker.queues.last_value import LastValueQueue
from warren.broker.queues.message_groups import GroupQueue
from warren.broker.queues.priority import PriorityQueue, QpidPriorityQueue
from warren.broker.queues.quorum import QuorumQueue
from warren.broker.queues.quorum_args import is_quorum_declare
from warren.broker.queues.stream import StreamQueue
from warren.broker.queues.stream_args import is_stream_declare

__all__ = ["new_queue", "queue_class", "queue_type"]


def queue_class(arguments: dict) -> type[QueueBase]:
    """``StreamQueue`` for ``x-queue-type=stream``; ``QuorumQueue`` for ``x-queue-type=quorum``;
    Qpid's kinds (``queues/qpid_args.py``): ``LastValueQueue`` for a last-value key,
    ``GroupQueue`` for a group header, ``QpidPriorityQueue`` for Qpid's priority levels;
    ``PriorityQueue`` for ``x-max-priority`` 1..255 (validated by the vhost), else ``Queue``.
    ``x-max-priority`` 0 is accepted, as RabbitMQ does, and gives a plain FIFO queue. A classic
    kind declared with Qpid's limits (``qpid.max_count`` ...) is that class reading them too."""
    if is_stream_declare(arguments):
        return StreamQueue
    if is_quorum_declare(arguments):
        return QuorumQueue
    if not arguments:
        return Queue
    cls = Queue
    if qpid_args.lvq_header(arguments) is not None:
        cls = LastValueQueue
    elif qpid_args.group_header(arguments) is not None:
        cls = GroupQueue
    elif qpid_args.priority_levels(arguments) is not None:
        cls = QpidPriorityQueue
    else:
        p = arguments.get("x-max-priority")
        if isinstance(p, int) and not isinstance(p, bool) and p > 0:
            cls = PriorityQueue
    if qpid_args.has_limits(arguments):
        cls = qpid_args.with_qpid_limits(cls)
    return cls


def new_queue(vhost, name: str, durable: bool = False, exclusive_owner=None, auto_delete: bool = False,
              arguments: dict | None = None) -> QueueBase:
    arguments = arguments or {}
    if arguments and any(isinstance(k, str) and k.startswith(("qpid.", "x-qpid-")) for k in arguments):
        kind = "stream" if is_stream_declare(arguments) else "quorum" if is_quorum_declare(arguments) else "classic"
        where = f"queue '{name}' in vhost '{vhost.name}'"
        qpid_args.check(arguments, where, kind)  # 406 before the queue exists
    q = queue_class(arguments)(vhost, name, durable, exclusive_owner, auto_delete, arguments)
    if arguments and qpid_args.truthy(arguments.get("no-local")):
        qpid_args.no_local(q)
    return q


def queue_type(queue) -> str:
    """What RabbitMQ calls the queue's type: ``classic``, ``quorum`` or ``stream`` (the HTTP
    API's ``type``, and anything else that lists queues)."""
    if queue.is_stream:
        return "stream"
    return queue.queue_type
