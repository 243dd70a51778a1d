"""Warren's storage layer: append-only segment logs for durable queues, a log for the topology.

``QueueStore`` keeps the messages of one durable queue (queue_store.py), ``DefinitionsStore``
the durable exchanges, queues and bindings (definitions.py); both use the record framing of
record.py. Everything here is synchronous and free of asyncio; docs/storage.md has the design.
"""

from warren.store.definitions import BindingDef, Definitions, DefinitionsStore, ExchangeDef, QueueDef
from warren.store.queue_store import QueueStore, RecoveryStats, StoreError, decode_message, encode_message
from warren.store.record import FormatError
from warren.store.segment import DEFAULT_SEGMENT_SIZE

__all__ = [
    "QueueStore", "RecoveryStats", "StoreError", "FormatError", "encode_message", "decode_message",
    "DEFAULT_SEGMENT_SIZE", "DefinitionsStore", "Definitions", "ExchangeDef", "QueueDef", "BindingDef",
]
