"""Queue kinds besides the classic queue (``warren/broker/queue.py``), and the one place that
maps declare arguments to a kind (``factory.py``); Qpid's queue arguments in ``qpid_args.py``."""

from warren.broker.queues.factory import new_queue, queue_class, queue_type
from warren.broker.queues.last_value import LastValueQueue
from warren.broker.queues.message_groups import GroupQueue
from warren.broker.queues.priority import PriorityQueue, PriorityReady, QpidPriorityQueue
from warren.broker.queues.quorum import QuorumQueue
from warren.broker.queues.stream import StreamQueue

__all__ = ["new_queue", "queue_class", "queue_type", "PriorityQueue", "PriorityReady", "QpidPriorityQueue",
           "LastValueQueue", "GroupQueue", "QuorumQueue", "StreamQueue"]
