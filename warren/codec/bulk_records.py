"""The header of one entry of a stream, as a segment file stores it and as the HTTP records
endpoint sends it (its bulk format, read by the Spark source): the layout lives here, below both
the store (``warren/store/stream_format.py`` writes, scans and repairs entries) and the readers
far from any broker (``warren/spark/read/records.py``).

    crc32 (uint32)  offset (uint64)  timestamp_ms (int64)  length (uint32)  record (length octets)

all big-endian; ``crc32`` covers the 20 header octets after it and the record."""

from __future__ import annotations

import struct

__all__ = ["ENTRY_HEADER", "ENTRY_HEADER_SIZE"]

ENTRY_HEADER = struct.Struct(">IQqI")   # crc, offset, timestamp_ms, length
ENTRY_HEADER_SIZE = ENTRY_HEADER.size   # 24
