"""Which queue class serves a queue.declare: the only place that decides it from arguments."""

from __future__ import annotations

from warren.broker.queue import Queue
from warren.broker.queues.priority import PriorityQueue
from warren.broker.queues.quorum import QuorumQueue
from warren.broker.queues.quorum_args import is_quorum_declare
from warren.broker.queues.stream import StreamQueue
from warren.broker.queues.stream_args import is_stream_declare

__all__ = ["new_queue", "queue_class", "queue_type"]


def queue_class(arguments: dict) -> type[Queue]:
    """``StreamQueue`` for ``x-queue-type=stream``; ``QuorumQueue`` for ``x-queue-type=quorum``;
    ``PriorityQueue`` for ``x-max-priority`` 1..255 (validated by the vhost), else ``Queue``. ``x-max-priority`` 0 is accepted, as
    RabbitMQ does, and gives a plain FIFO queue."""
    if is_stream_declare(arguments):
        return StreamQueue
    if is_quorum_declare(arguments):
        return QuorumQueue
    p = arguments.get("x-max-priority") if arguments else None
    if isinstance(p, int) and not isinstance(p, bool) and p > 0:
        return PriorityQueue
    return Queue


def new_queue(vhost, name: str, durable: bool = False, exclusive_owner=None, auto_delete: bool = False,
              arguments: dict | None = None) -> Queue:
    return queue_class(arguments or {})(vhost, name, durable, exclusive_owner, auto_delete, arguments)


def queue_type(queue) -> str:
    """What RabbitMQ calls the queue's type: ``classic``, ``quorum`` or ``stream`` (the HTTP
    API's ``type``, and anything else that lists queues)."""
    if getattr(queue, "is_stream", False):
        return "stream"
    return getattr(queue, "queue_type", "classic")
