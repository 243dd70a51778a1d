"""Queue kinds besides the classic queue (``warren/broker/queue.py``), and the one place that
maps declare arguments to a kind (``factory.py``)."""

from warren.broker.queues.factory import new_queue, queue_class, queue_type
from warren.broker.queues.priority import PriorityQueue, PriorityReady
from warren.broker.queues.quorum import QuorumQueue
from warren.broker.queues.stream import StreamQueue

__all__ = ["new_queue", "queue_class", "queue_type", "PriorityQueue", "PriorityReady", "QuorumQueue", "StreamQueue"]
