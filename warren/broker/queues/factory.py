"""Which queue class serves a queue.declare: the only place that decides it from arguments."""

from __future__ import annotations

from warren.broker.queue import Queue
from warren.broker.queues.priority import PriorityQueue
from warren.broker.queues.stream import StreamQueue
from warren.broker.queues.stream_args import is_stream_declare

__all__ = ["new_queue", "queue_class"]


def queue_class(arguments: dict) -> type[Queue]:
    """``StreamQueue`` for ``x-queue-type=stream``; ``PriorityQueue`` for ``x-max-priority``
    1..255 (validated by the vhost), else ``Queue``. ``x-max-priority`` 0 is accepted, as
    RabbitMQ does, and gives a plain FIFO queue."""
    if is_stream_declare(arguments):
        return StreamQueue
    p = arguments.get("x-max-priority") if arguments else None
    if isinstance(p, int) and not isinstance(p, bool) and p > 0:
        return PriorityQueue
    return Queue


def new_queue(vhost, name: str, durable: bool = False, exclusive_owner=None, auto_delete: bool = False,
              arguments: dict | None = None) -> Queue:
    return queue_class(arguments or {})(vhost, name, durable, exclusive_owner, auto_delete, arguments)
