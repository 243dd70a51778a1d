"""A small asyncio client of etcd 3.4's JSON gateway (``/v3/...``), on aiohttp.

Why our own: the maintained Python clients of etcd speak gRPC with a thread or a gRPC event
loop of their own per stream; etcd 3.4 also serves every call as JSON over HTTP/1.1 (the
grpc-gateway), which aiohttp, already a dependency, speaks. What Warren needs is few calls:
put, range, delete, a compare-and-swap transaction, leases (grant, keep-alive, revoke) and
watch (a streamed response: one JSON object per line, read on the event loop, no thread).

Keys and values are bytes on the wire as base64 strings; 64-bit integers (revisions, lease
ids, TTLs) are JSON strings; fields that are zero or false are left out of answers.

Errors, each one line for the operator:

* ``EtcdUnreachable``: no endpoint answered (refused, reset, no answer in time);
* ``EtcdNoQuorum``: an endpoint answered, but the request could not be committed or read
  linearizably in time (no leader, request timed out: a minority partition or too few members);
* ``EtcdError``: any other answer of etcd (a bad request, a lease not found, ...).

Every call is bounded by ``timeout`` seconds per endpoint tried; a watch's stream has no read
time-out (it may stay silent for hours), only its connection is bounded.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from typing import AsyncIterator, Sequence

import aiohttp

__all__ = ["EtcdClient", "EtcdError", "EtcdUnreachable", "EtcdNoQuorum", "KeyValue", "WatchEvent", "prefix_end",
           "NO_QUORUM_MARKS"]

# what etcd answers when it cannot serve a request that needs its Raft majority
_NO_QUORUM_MARKS = ("no leader", "request timed out", "leader changed", "too many requests",
                    "timed out waiting for read index", "not capable")
NO_QUORUM_MARKS = _NO_QUORUM_MARKS  # for shared_files.py's blocking calls


class EtcdError(Exception):
    """etcd answered with an error, or could not be used; ``str()`` is one line."""


class EtcdUnreachable(EtcdError):
    """No endpoint of etcd answered."""


class EtcdNoQuorum(EtcdError):
    """etcd answered but could not commit or read linearizably: no quorum (no leader)."""


def _b64(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def prefix_end(prefix: bytes | str) -> bytes:
    """The ``range_end`` that makes a range (or a watch) cover every key starting with ``prefix``."""
    p = bytearray(prefix.encode() if isinstance(prefix, str) else prefix)
    while p:
        if p[-1] < 0xFF:
            p[-1] += 1
            return bytes(p)
        p.pop()
    return b"\0"  # every key


@dataclass(frozen=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int  # 0: none

    @classmethod
    def of(cls, kv: dict) -> "KeyValue":
        return cls(_unb64(kv.get("key")), _unb64(kv.get("value")), int(kv.get("create_revision", 0)),
                   int(kv.get("mod_revision", 0)), int(kv.get("lease", 0)))


@dataclass(frozen=True)
class WatchEvent:
    kind: str  # "PUT" or "DELETE"
    kv: KeyValue


class EtcdClient:
    """etcd's JSON gateway at one or more endpoints (``http://host:port``), tried in turn."""

    def __init__(self, endpoints: Sequence[str], *, timeout: float = 5.0) -> None:
        if not endpoints:
            raise ValueError("no etcd endpoint given")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._preferred = 0  # the endpoint that answered last

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> "EtcdClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _order(self) -> list[str]:
        n = len(self.endpoints)
        return [self.endpoints[(self._preferred + i) % n] for i in range(n)]

    async def call(self, path: str, body: dict, timeout: float | None = None) -> dict:
        """POST ``body`` to ``/v3/<path>`` at the first endpoint that answers; its JSON answer.

        An endpoint that cannot be reached is skipped for the next; one that answers "no
        quorum" is skipped too (another member may be on the majority's side)."""
        timeout = self.timeout if timeout is None else timeout
        failures: list[str] = []
        no_quorum = False
        for endpoint in self._order():
            url = f"{endpoint}/v3/{path}"
            try:
                async with self._http().post(url, json=body,
                                             timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                    text = await resp.text()
            except asyncio.TimeoutError:  # before ClientError: aiohttp's time-outs are both
                # connected (or connecting) but no answer in time: a member cut off from its
                # majority holds a write until its own request time-out
                failures.append(f"{endpoint}: no answer in {timeout:g} s")
                no_quorum = no_quorum or await self._reachable(endpoint)
                continue
            except (aiohttp.ClientError, OSError) as e:
                failures.append(f"{endpoint}: {_reason(e)}")
                continue
            try:
                answer = json.loads(text) if text else {}
            except ValueError:
                failures.append(f"{endpoint}: not etcd's JSON gateway (HTTP {resp.status}: {text[:80]!r})")
                continue
            if resp.status == 200 and "error" not in answer:
                self._preferred = self.endpoints.index(endpoint)
                return answer
            message = answer.get("message") or answer.get("error") or text[:200]
            if any(mark in message for mark in _NO_QUORUM_MARKS):
                failures.append(f"{endpoint}: {message}")
                no_quorum = True
                continue
            raise EtcdError(f"etcd at {endpoint} refused {path}: {message}")
        if no_quorum:
            raise EtcdNoQuorum("etcd has no quorum (" + "; ".join(failures) + ")")
        raise EtcdUnreachable("etcd is unreachable (" + "; ".join(failures) + ")")

    async def _reachable(self, endpoint: str) -> bool:
        """Whether ``endpoint`` answers at all (GET /version, 1 s): a write it did not answer in
        time then means no quorum rather than no etcd."""
        try:
            async with self._http().get(f"{endpoint}/version", timeout=aiohttp.ClientTimeout(total=1)) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
            return False

    # --- keys ------------------------------------------------------------------------------

    async def put(self, key: str | bytes, value: str | bytes, *, lease: int = 0) -> int:
        """Write ``key``; the revision of the write."""
        body = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        answer = await self.call("kv/put", body)
        return int(answer.get("header", {}).get("revision", 0))

    async def get(self, key: str | bytes) -> KeyValue | None:
        """``key``'s current value (a linearizable read), or None."""
        answer = await self.call("kv/range", {"key": _b64(key)})
        kvs = answer.get("kvs") or []
        return KeyValue.of(kvs[0]) if kvs else None

    async def get_prefix(self, prefix: str | bytes) -> list[KeyValue]:
        """Every key under ``prefix``, in key order."""
        return (await self.range_prefix(prefix))[0]

    async def range_prefix(self, prefix: str | bytes) -> tuple[list[KeyValue], int]:
        """Every key under ``prefix``, and the store's revision they were read at (a watch from
        that revision + 1 misses nothing and repeats nothing)."""
        answer = await self.call("kv/range", {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))})
        return [KeyValue.of(kv) for kv in answer.get("kvs") or []], int(answer.get("header", {}).get("revision", 0))

    async def delete(self, key: str | bytes) -> int:
        """Delete ``key``; how many keys went (0 or 1)."""
        answer = await self.call("kv/deleterange", {"key": _b64(key)})
        return int(answer.get("deleted", 0))

    async def write_many(self, puts: Sequence[tuple[str, str, int]], deletes: Sequence[str] = (),
                         absent: str | None = None) -> KeyValue | None:
        """Put each ``(key, value, lease)`` and delete each key of ``deletes``, in one transaction
        (etcd refuses more than 128 operations in one: the caller keeps below). With ``absent``,
        only if that key does not exist: else nothing is written and its value returned."""
        ops = [{"request_put": {"key": _b64(k), "value": _b64(v), **({"lease": str(lease)} if lease else {})}}
               for k, v, lease in puts]
        ops += [{"request_delete_range": {"key": _b64(k)}} for k in deletes]
        if not ops:
            return None
        if absent is None:
            await self.call("kv/txn", {"compare": [], "success": ops})
            return None
        answer = await self.call("kv/txn", {
            "compare": [{"key": _b64(absent), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
            "success": ops, "failure": [{"request_range": {"key": _b64(absent)}}]})
        if answer.get("succeeded"):
            return None
        kvs = (answer.get("responses") or [{}])[0].get("response_range", {}).get("kvs") or []
        return KeyValue.of(kvs[0]) if kvs else None

    async def put_if_absent(self, key: str | bytes, value: str | bytes, *, lease: int = 0,
                            also: dict | None = None) -> tuple[bool, KeyValue | None]:
        """Compare-and-swap: write ``key`` (and the keys of ``also``, in the same transaction)
        only if ``key`` does not exist (its create revision is 0). (True, None) when written;
        (False, the value there) when it existed."""
        puts = []
        for k, v in {key: value, **(also or {})}.items():
            put = {"key": _b64(k), "value": _b64(v)}
            if lease and k == key:
                put["lease"] = str(lease)
            puts.append({"request_put": put})
        answer = await self.call("kv/txn", {
            "compare": [{"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
            "success": puts,
            "failure": [{"request_range": {"key": _b64(key)}}]})
        if answer.get("succeeded"):
            return True, None
        kvs = (answer.get("responses") or [{}])[0].get("response_range", {}).get("kvs") or []
        return False, KeyValue.of(kvs[0]) if kvs else None

    async def put_if_none_under(self, key: str, value: str, prefix: str, *, lease: int = 0
                                ) -> tuple[int, list[KeyValue]]:
        """Write ``key`` only if no key under ``prefix`` exists (a compare over the range: etcd
        3.3 and later): (the write's revision, []) when written; (0, the keys there) when some
        existed."""
        put = {"key": _b64(key), "value": _b64(value), **({"lease": str(lease)} if lease else {})}
        end = _b64(prefix_end(prefix))
        answer = await self.call("kv/txn", {
            "compare": [{"key": _b64(prefix), "range_end": end, "target": "CREATE", "result": "EQUAL",
                         "create_revision": "0"}],
            "success": [{"request_put": put}],
            "failure": [{"request_range": {"key": _b64(prefix), "range_end": end}}]})
        if answer.get("succeeded"):
            return int(answer.get("header", {}).get("revision", 0)) or 1, []
        kvs = (answer.get("responses") or [{}])[0].get("response_range", {}).get("kvs") or []
        return 0, [KeyValue.of(kv) for kv in kvs]

    async def write_if_unchanged(self, key: str, mod_revision: int, puts: Sequence[tuple[str, str, int]],
                                 deletes: Sequence[str] = ()) -> bool:
        """Compare-and-swap: the puts and deletes in one transaction, only if ``key`` was last
        changed at ``mod_revision`` (nobody wrote it since it was read). True when written."""
        ops = [{"request_put": {"key": _b64(k), "value": _b64(v), **({"lease": str(lease)} if lease else {})}}
               for k, v, lease in puts]
        ops += [{"request_delete_range": {"key": _b64(k)}} for k in deletes]
        answer = await self.call("kv/txn", {
            "compare": [{"key": _b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(mod_revision)}],
            "success": ops})
        return bool(answer.get("succeeded"))

    # --- leases ----------------------------------------------------------------------------

    async def grant(self, ttl: int) -> tuple[int, int]:
        """A new lease of ``ttl`` seconds: (its id, the TTL etcd granted)."""
        answer = await self.call("lease/grant", {"TTL": str(ttl)})
        return int(answer["ID"]), int(answer.get("TTL", ttl))

    async def keep_alive(self, lease: int, *, timeout: float | None = None) -> int:
        """Renew ``lease`` once; the TTL it has again, 0 if it has expired (or never was)."""
        answer = await self.call("lease/keepalive", {"ID": str(lease)}, timeout)
        # a stream of one answer: {"result": {"ID": ..., "TTL": ...}}
        result = answer.get("result", answer)
        return int(result.get("TTL", 0))

    async def revoke(self, lease: int) -> None:
        """End ``lease`` now: its keys are deleted at once."""
        try:
            await self.call("lease/revoke", {"ID": str(lease)})
        except EtcdError as e:
            if "lease not found" not in str(e):
                raise

    # --- watch -----------------------------------------------------------------------------

    async def watch_prefix(self, prefix: str | bytes, *, start_revision: int = 0) -> AsyncIterator[WatchEvent]:
        """Every change under ``prefix`` from ``start_revision`` (0: from now), as it comes.

        One streamed HTTP response, read on the event loop; the generator ends when the stream
        does (etcd stopped: the caller watches again from the last revision seen + 1) and raises
        EtcdUnreachable if no endpoint takes the watch."""
        request = {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))}
        if start_revision:
            request["start_revision"] = str(start_revision)
        failures = []
        for endpoint in self._order():
            try:
                resp = await self._http().post(
                    f"{endpoint}/v3/watch", json={"create_request": request},
                    timeout=aiohttp.ClientTimeout(total=None, connect=self.timeout, sock_connect=self.timeout))
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as e:
                failures.append(f"{endpoint}: {_reason(e)}")
                continue
            async with resp:
                if resp.status != 200:
                    raise EtcdError(f"etcd at {endpoint} refused a watch: HTTP {resp.status}")
                while True:
                    try:
                        line = await resp.content.readline()
                    except (aiohttp.ClientError, OSError) as e:  # the member went away mid-stream
                        raise EtcdUnreachable(f"etcd at {endpoint} ended a watch: {_reason(e)}") from None
                    if not line:
                        return
                    if not line.strip():
                        continue
                    message = json.loads(line)
                    if "error" in message:
                        raise EtcdError(f"etcd at {endpoint} ended a watch: {message['error'].get('message')}")
                    for event in message.get("result", {}).get("events") or []:
                        yield WatchEvent(event.get("type", "PUT"), KeyValue.of(event.get("kv", {})))
        raise EtcdUnreachable("etcd is unreachable (" + "; ".join(failures) + ")")

    async def health(self) -> bool:
        """Whether every endpoint reports itself healthy (GET /health: it has a leader)."""
        for endpoint in self.endpoints:
            try:
                async with self._http().get(f"{endpoint}/health",
                                            timeout=aiohttp.ClientTimeout(total=self.timeout)) as resp:
                    if resp.status != 200 or (await resp.json(content_type=None)).get("health") != "true":
                        return False
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError, ValueError):
                return False
        return True


def _reason(e: BaseException) -> str:
    if isinstance(e, asyncio.TimeoutError):
        return "no answer in time"
    if isinstance(e, aiohttp.ClientConnectorError):
        return e.strerror or str(e.os_error) or "cannot connect"
    return str(e) or type(e).__name__
