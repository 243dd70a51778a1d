"""One vhost over several worker processes (``warren serve --workers N --worker-mode queues``).

Experimental: docs/performance.md, "One vhost over worker processes", says why this shape, what
it costs, what is built and what is not.

* ``links.py``: the socket pairs between workers, records asked and answered.
* ``coordinator.py``: ``Spread``, the worker's part: life cycle, the node's connection counts,
  the merged HTTP API rows, what the other workers ask and tell; its four parts:
  ``definitions.py`` (definitions ordered by worker 0 and applied by every worker, queue
  owners), ``messages.py`` (messages, confirms and flow control across workers),
  ``consumers.py`` (consumers of another worker's queue) and ``dtx.py`` (0-10 dtx branches
  whose accepted messages other workers hold, and dtx commands from any worker).
* ``remote_queue.py``: what a worker holds of a queue another worker owns.
* ``proxy.py``: the owner's channel for a consumer on another worker, and the consuming side's
  settler and consumer records.
* ``remote_reads.py``: what a client's channel reads from queues other workers own (consumes,
  gets, the shared prefetch count: ``shared_prefetch.py``), reached through the queue's
  handle; a channel of any protocol asks the same ``BrokerChannel`` operations and never which
  worker holds the queue. A consumer whose client grants credit (0-10, 1.0) has its credit
  kept by the queue's owner (warren/broker/credit.py).
* ``placement.py``: a connection moving to the worker that owns the queue it uses.
"""

from warren.spread.coordinator import SEQUENCER, Spread, queue_owner

__all__ = ["Spread", "queue_owner", "SEQUENCER", "parse_peer_fds"]


def parse_peer_fds(values) -> dict[int, int]:
    """``("1:7", "2:9")`` (``--peer-fd PEER:FD``, set by the supervisor) as ``{1: 7, 2: 9}``."""
    out = {}
    for v in values:
        peer, _, fd = str(v).partition(":")
        out[int(peer)] = int(fd)
    return out
