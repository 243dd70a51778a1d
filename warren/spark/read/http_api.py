"""A small blocking client of the broker's HTTP API: stream figures and bulk record ranges.

``http.client`` with one kept-alive connection per client (no new dependency): an executor task
fetches many ranges in a row, and a new TCP connection per range would cost more than the
small ones take to transfer. A connection the server closed between two requests (idle
time-out, broker restart) is reopened once; any other failure raises ``StreamApiError``.

Local reads: a broker at a loopback address is asked (``local=1``) to say where a range of
records lies in its segment files rather than send it; the reader then reads the file itself
(one ``preadv`` into the buffer the answer would have filled), which spares the broker's copy
to the socket and this process's copy from it. A file that cannot be opened here (another
user's data folder) or is not the one the broker named (its device and inode differ: deleted
by retention and made again) turns local reads off for this client, and the range is asked
again the ordinary way.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlencode, urlsplit

import numpy as np

from warren.spark.read.gather import PAD, BufferPool

__all__ = ["StreamApi", "StreamApiError", "StreamInfo", "RecordRange"]

RECORDS_CONTENT_TYPE = "application/x-warren-stream-records"
LOOPBACK_HOSTS = frozenset(("127.0.0.1", "localhost", "::1"))
FILES_KEPT = 16  # segment files a reader keeps open (a segment holds 64 MiB or so of records)


def _read_padded(response, pool: BufferPool | None = None) -> np.ndarray:
    """The body of ``response`` (its length known) in a uint8 array with ``PAD`` zero octets
    after it, read into place with ``readinto``; into a buffer of ``pool`` if given."""
    size = response.length
    if size == 0:  # (read, so that the connection takes the next request: a local answer's empty body)
        response.read()
    out = np.empty(size + PAD, dtype=np.uint8) if pool is None else pool.take(size + PAD)
    out[size:] = 0
    view = memoryview(out)
    got = 0
    while got < size:
        n = response.readinto(view[got:size])
        if not n:
            raise http.client.IncompleteRead(bytes(view[:got]), size - got)
        got += n
    return out


class StreamApiError(RuntimeError):
    """The HTTP API refused a request, or could not be reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class StreamInfo:
    name: str
    first_offset: int   # oldest retained
    last_offset: int    # highest committed, -1 if none
    next_offset: int
    messages: int
    bytes: int
    first_timestamp_ms: int | None = None  # when the oldest retained record was stored
    last_timestamp_ms: int | None = None   # when the newest was

    @property
    def end(self) -> int:
        """The offset after the last committed one: where a reader of committed data stops."""
        return self.last_offset + 1

    @property
    def average_record_size(self) -> float:
        """Octets per retained record (entry headers included), 0.0 for an empty stream."""
        return self.bytes / self.messages if self.messages > 0 else 0.0


@dataclass(frozen=True)
class RecordRange:
    first_offset: int   # offset of the first record of data (later than asked if retention passed it)
    count: int
    next_offset: int    # where to ask next
    last_offset: int    # the stream's highest committed offset when answered
    data: bytes         # BULK FORMAT (or a padded numpy buffer, see StreamApi.records)
    size: int = -1      # octets of entries in data

    def __post_init__(self) -> None:
        if self.size < 0:
            object.__setattr__(self, "size", len(self.data))


class StreamApi:
    """Client of the stream endpoints under ``base_url`` for one vhost."""

    def __init__(self, base_url: str, user: str, password: str, vhost: str, timeout_s: float = 30.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"the HTTP API URL must be http:// or https://, not {base_url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self.vhost = vhost
        self._vhost_path = quote(vhost, safe="")
        self._auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        self._timeout = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self.base_url = base_url
        # a broker on this machine may say where a range lies in its files, for us to read it
        # (module doc, "local reads"); off for good once a file could not be read here
        self.local_reads = self._host in LOOPBACK_HOSTS
        self._files: dict[str, tuple[int, str]] = {}  # path -> (open descriptor, "device:inode")
        self.local_answers = 0  # answers read from the broker's files (the tests', the benches' figure)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        files, self._files = self._files, {}
        for fd, _ in files.values():
            os.close(fd)

    def __enter__(self) -> "StreamApi":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout)
        return self._conn

    def _get(self, path: str, padded: bool = False, pool: BufferPool | None = None) -> tuple[int, dict, bytes]:
        """(status, headers, body); ``padded``: a 200 answer's body comes as a numpy uint8
        array with ``PAD`` spare octets after it, read straight from the socket (no copy),
        into a buffer of ``pool`` if given."""
        headers = {"Authorization": self._auth, "Connection": "keep-alive"}
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request("GET", self._prefix + path, headers=headers)
                response = conn.getresponse()
                if padded and response.status == 200 and response.length is not None:
                    body = _read_padded(response, pool)
                else:
                    body = response.read()
                if response.will_close:
                    self.close()
                return response.status, {k.lower(): v for k, v in response.getheaders()}, body
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest) as e:
                # a kept-alive connection the server closed meanwhile: once more on a new one
                self.close()
                if attempt == 2:
                    raise StreamApiError(f"HTTP API at {self.base_url}: {e}") from None
            except (OSError, socket.timeout, http.client.HTTPException) as e:
                self.close()
                raise StreamApiError(f"HTTP API at {self.base_url} unreachable or failing: {e}") from None
        raise AssertionError("unreachable")

    @staticmethod
    def _error_text(status: int, body: bytes) -> str:
        try:  # RabbitMQ's error body: {"error": "bad_request", "reason": "what was wrong"}
            answer = json.loads(body)
            error, reason = answer["error"], answer.get("reason")
        except (ValueError, KeyError, TypeError, AttributeError):
            return body[:200].decode("utf-8", "replace") or f"HTTP {status}"
        return f"{error}: {reason}" if reason else error

    def _refused(self, name: str, status: int, body: bytes) -> StreamApiError:
        """The error of a non-200 answer, naming the API it came from: a default that points at
        another broker (a RabbitMQ on 15672) shows in the message, not only as "HTTP 400"."""
        return StreamApiError(f"HTTP API at {self.base_url}: stream {name!r}: {self._error_text(status, body)} "
                              f"(HTTP {status})", status)

    def _stream_path(self, name: str) -> str:
        return f"/api/streams/{self._vhost_path}/{quote(name, safe='')}"

    def _read_file_part(self, headers: dict, padded: bool, pool: BufferPool | None):
        """The octets a local answer names (``X-Warren-File``...), read from the broker's file
        (as ``_read_padded`` shapes a body); None if it cannot be opened or read here, or is
        another file than the broker's (deleted and made again meanwhile)."""
        path, ident = unquote(headers["x-warren-file"]), headers.get("x-warren-file-id", "")
        position, length = int(headers["x-warren-file-position"]), int(headers["x-warren-file-length"])
        fd = self._file(path, ident)
        if fd is None:
            return None
        out = np.empty(length + PAD, dtype=np.uint8) if pool is None else pool.take(length + PAD)
        out[length:] = 0
        view = memoryview(out)
        got = 0
        while got < length:
            n = os.preadv(fd, [view[got:length]], position + got)
            if n <= 0:
                return None  # shorter than the broker said: not the file it read
            got += n
        self.local_answers += 1
        return out if padded else bytes(view[:length])

    def _file(self, path: str, ident: str) -> int | None:
        known = self._files.get(path)
        if known is not None and known[1] == ident:
            return known[0]
        if known is not None:
            os.close(known[0])
            del self._files[path]
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        st = os.fstat(fd)
        if f"{st.st_dev}:{st.st_ino}" != ident:
            os.close(fd)
            return None
        if len(self._files) >= FILES_KEPT:
            for old_fd, _ in self._files.values():
                os.close(old_fd)
            self._files.clear()
        self._files[path] = (fd, ident)
        return fd

    def offset_for_timestamp(self, name: str, timestamp_ms: int) -> int:
        """The first offset of ``name`` stored at ``timestamp_ms`` or later (the stream's next
        offset when none is)."""
        status, _, body = self._get(self._stream_path(name) + "/offset?" + urlencode({"timestamp": timestamp_ms}))
        if status != 200:
            raise self._refused(name, status, body)
        return int(json.loads(body)["offset"])

    def stream_names(self) -> list[str]:
        """Every stream queue of the vhost, by name (``GET /api/queues/{vhost}``)."""
        status, _, body = self._get(f"/api/queues/{self._vhost_path}?columns=name,type")
        if status != 200:
            raise StreamApiError(f"HTTP API at {self.base_url}: listing the queues of vhost {self.vhost!r}: "
                                 f"{self._error_text(status, body)} (HTTP {status})", status)
        return sorted(q["name"] for q in json.loads(body) if q.get("type") == "stream")

    def info(self, name: str) -> StreamInfo:
        status, _, body = self._get(self._stream_path(name))
        if status != 200:
            raise self._refused(name, status, body)
        d = json.loads(body)
        return StreamInfo(name=name, first_offset=int(d["first_offset"]), last_offset=int(d["last_offset"]),
                          next_offset=int(d["next_offset"]), messages=int(d["messages"]), bytes=int(d["bytes"]),
                          first_timestamp_ms=d.get("first_timestamp"), last_timestamp_ms=d.get("last_timestamp"))

    def records(self, name: str, offset: int, end: int | None, max_records: int, max_bytes: int,
                padded: bool = False, routing_keys: frozenset | None = None, reader: str | None = None,
                matches: tuple = (), pool: BufferPool | None = None) -> RecordRange:
        """Committed records from ``offset`` (BULK FORMAT); ``padded``: ``data`` is a numpy
        buffer with ``PAD`` spare octets after the ``size`` octets of entries (``parse_padded``);
        ``routing_keys``: only the blocks the broker's filter says may hold one of them;
        ``matches``: only the records whose properties or headers match (``(parameter, texts)``
        pairs, ``PushedRange.matches``);
        ``reader``: the name the broker keeps this reader's position under (its lag metric);
        ``pool``: where a padded answer's buffer comes from (``BufferPool``: one per thread)."""
        query: dict = {"offset": offset, "max_records": max_records, "max_bytes": max_bytes}
        if end is not None:
            query["end"] = end
        if routing_keys:
            query["routing_key"] = sorted(routing_keys)
        for parameter, texts in matches:
            query[parameter] = sorted(texts)
        if reader:
            query["reader"] = reader
        if self.local_reads:
            query["local"] = 1
        status, headers, body = self._get(self._stream_path(name) + "/records?" + urlencode(query, doseq=True),
                                          padded, pool)
        if status == 200 and "x-warren-file" in headers:
            body = self._read_file_part(headers, padded, pool)
            if body is None:  # not readable here: the broker sends the octets, from now on
                self.local_reads = False
                del query["local"]
                status, headers, body = self._get(self._stream_path(name) + "/records?" + urlencode(query, doseq=True),
                                                  padded, pool)
        if status != 200:
            raise self._refused(name, status, body)
        try:
            return RecordRange(
                first_offset=int(headers["x-warren-first-offset"]),
                count=int(headers["x-warren-record-count"]),
                next_offset=int(headers["x-warren-next-offset"]),
                last_offset=int(headers["x-warren-last-offset"]),
                data=body,
                size=len(body) - PAD if padded else len(body),
            )
        except (KeyError, ValueError) as e:
            raise StreamApiError(f"HTTP API at {self.base_url}: stream {name!r}: records answer without valid "
                                 f"X-Warren headers ({e}): is it a Warren broker's API?") from None
