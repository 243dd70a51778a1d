"""numpy gathers over a byte buffer, and Arrow binary views built from them.

The bulk parser (``records.py``) and the property decoder (``property_columns.py``) both know,
for every row, where a value sits in one big buffer (an HTTP answer); these helpers read
fixed-width integers at all those positions at once and wrap variable-length values as Arrow
*binary views* (16 octets per row pointing into the buffer), which Arrow casts in C++ into
the plain ``binary``/``string`` arrays Spark wants. No Python code runs per row.
"""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa

__all__ = ["PAD", "padded", "gather", "be_uint", "views", "validity", "BufferPool"]

INLINE = 12  # a binary view holds values up to 12 octets inline
PAD = 16  # zero octets after the data: any fixed-width read (at most 12) stays in bounds
# row L: L octets kept, the rest of the 12 cleared, as three native uint32 words
_MASKS = np.array([[0xFF] * k + [0] * (INLINE - k) for k in range(INLINE + 1)], dtype=np.uint8).view(np.uint32)


def padded(data) -> np.ndarray:
    """``data`` as uint8 with ``PAD`` zero octets after it, so that a fixed-width read at any
    position inside it stays in bounds (one memcpy of the buffer)."""
    u8 = np.zeros(len(data) + PAD, dtype=np.uint8)
    u8[:len(data)] = np.frombuffer(data, dtype=np.uint8)
    return u8


class BufferPool:
    """A few uint8 buffers handed out again once nothing uses them any more, for one thread.

    A read moves the same amount of data again and again (an HTTP answer, then its bodies
    copied out); a fresh buffer for each is memory the kernel maps and zeroes page by page
    (in a Spark worker, about 13,000 page faults per task of 500,000 rows of 100 octets, a
    quarter of the worker's own CPU time). ``take`` returns a view of a kept buffer that no
    array, Arrow buffer or memoryview refers to any more (its reference count is back to the
    pool's own: anything made from the view, however far passed on, holds the buffer), else
    a new one, kept if the pool has room. Nothing is ever handed out while in use, so the
    pool needs no help from whoever consumes the batches; it is not thread-safe (one per
    thread).
    """

    def __init__(self, keep: int = 4) -> None:
        self._keep = keep
        self._buffers: list[np.ndarray] = []
        probe = [np.empty(1, dtype=np.uint8)]
        self._idle = self._refs(probe, 0)  # what an unused kept buffer counts, measured the way it is checked

    @staticmethod
    def _refs(buffers: list, i: int) -> int:
        return sys.getrefcount(buffers[i])

    def take(self, size: int) -> np.ndarray:
        """A uint8 array of ``size`` octets (its contents undefined)."""
        buffers = self._buffers
        fit = free = None  # the smallest unused one that is large enough; an unused one too small
        for i in range(len(buffers)):
            if self._refs(buffers, i) == self._idle:
                if buffers[i].size < size:
                    free = i
                elif fit is None or buffers[i].size < buffers[fit].size:
                    fit = i
        if fit is not None:
            return buffers[fit][:size]
        new = np.empty(max(size, 1), dtype=np.uint8)
        if len(buffers) < self._keep:
            buffers.append(new)
        elif free is not None:  # a kept one too small for this read: replace it
            buffers[free] = new
        return new[:size]


def gather(u8: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` octets at each position ``at`` of the padded ``u8``, as an (n, width) array.

    The buffer is seen as overlapping ``width``-octet records one octet apart, so the gather
    copies whole records (one small memcpy each in numpy's loop) rather than single octets.
    """
    windows = np.ndarray(shape=(len(u8) - width + 1,), dtype=np.dtype((np.void, width)), buffer=u8, strides=(1,))
    return windows[at].view(np.uint8).reshape(len(at), width)


def be_uint(u8: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Big-endian unsigned integers of ``width`` (1, 2, 4 or 8) octets at positions ``at``, as int64
    (8-octet values above 2**63 wrap; callers that care check)."""
    if width == 1:
        return u8[at].astype(np.int64)
    octets = gather(u8, at, width)
    return octets.view(f">u{width}").reshape(len(at)).astype(np.int64)


def validity(present: np.ndarray | None) -> pa.Buffer | None:
    """An Arrow validity bitmap from a boolean mask (None: all valid)."""
    if present is None or present.all():
        return None
    return pa.py_buffer(np.packbits(present, bitorder="little"))


def views(u8: np.ndarray, buffer: pa.Buffer, starts: np.ndarray, lengths: np.ndarray,
          vtype=pa.binary_view(), present: np.ndarray | None = None) -> pa.Array:
    """A binary_view array of the values at [starts, starts + lengths) of ``buffer`` (``u8``: the
    same octets, padded); rows where ``present`` is False are null (their length must be 0).

    Layout of a view (Arrow columnar format): int32 length, then either the value zero-padded
    to 12 octets (length <= 12) or a 4-octet prefix, the buffer index and the int32 position.
    """
    n = len(starts)
    out = np.empty((n, 16), dtype=np.uint8)
    out[:, 0:4] = lengths.astype("<i4").view(np.uint8).reshape(n, 4)
    head = gather(u8, starts, INLINE)
    # zero what follows a short value: AND with a per-length mask, three uint32 words per row
    words = head.view(np.uint32)
    words &= _MASKS[np.minimum(lengths, INLINE)]
    out[:, 4:16] = head
    long = lengths > INLINE
    if long.any():
        out[long, 8:12] = 0
        out[long, 12:16] = starts[long].astype("<i4").view(np.uint8).reshape(-1, 4)
    return pa.Array.from_buffers(vtype, n, [validity(present), pa.py_buffer(out), buffer])
