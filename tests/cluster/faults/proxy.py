"""A fault-injecting TCP proxy for the cluster fault harness (issue 33, item 5).

Why: the harness partitions, slows and cuts the network between processes on one machine, where
network namespaces and iptables may not be allowed. Every link it can fault goes through this
proxy instead: each node's cluster port is fronted by a proxy port (the node advertises it with
``--cluster-advertise``), and each node reaches each etcd member through a proxy port of its own.

A connection through the proxy is labelled (source, target): the target is the fronted process's
name; the source is fixed by the front (a node's own door to an etcd member) or learnt from the
first bytes of a Warren link, ``WARREN-NODE 1`` and a JSON line naming the dialling node
(warren/cluster/links.py). A link state belongs to the ordered pair and applies to both directions
of bytes on the connections ``source`` dialled to ``target`` (a node writes to another only on the
link it dialled, so a one-way fault is one pair; a partition sets both):

* ``pass``: bytes go through;
* ``delay``: each chunk goes through ``delay_s`` after it was read, in order (latency, not a cap
  on throughput: reading goes on meanwhile, up to ``QUEUE_CHUNKS`` chunks held per direction);
* ``drop``: the pair's connections are reset at once, new ones are accepted and reset;
* ``blackhole``: connections stay open and every byte is read and thrown away, both ways, a close
  too: the peers hear silence, as across a lost route. New connections are accepted and silenced
  (the target is not dialled). A connection that lost bytes (or was never joined to its target)
  has a hole in its stream that TCP would never leave, so it is reset when its pair leaves
  ``blackhole``: the peers dial afresh rather than read a torn record;
* ``cut``: the pair's connections are reset once, and the pair goes back to ``pass``.

The proxy runs an asyncio loop in a daemon thread of the test process; its control methods are
called from the test's thread and return once the change is made (the connections it resets are
reset by then). Resets are real TCP resets (``SO_LINGER`` 0), so a peer sees ECONNRESET or EOF.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Iterable

__all__ = ["FaultProxy", "STATES", "UNKNOWN"]

STATES = ("pass", "delay", "drop", "blackhole", "cut")
UNKNOWN = "?"  # the source of a connection whose first bytes are not a Warren link's hello
MAGIC = b"WARREN-NODE 1\n"  # warren/cluster/links.py's first bytes, written out as the wire has them

CHUNK = 64 * 1024  # octets read at a time from one side
QUEUE_CHUNKS = 64  # chunks held per direction (delayed ones); past that, reading that side waits
HELLO_LIMIT = 8192  # octets read at most to learn a Warren link's source (its hello line is under 4096)
HELLO_TIMEOUT_S = 10.0  # Warren's own handshake bound; a silent dialler is then labelled UNKNOWN
ACCEPT_BATCH = 64  # connections accepted per readiness of a listener
ACCEPT_RETRY_S = 0.1  # a listener that failed to accept (out of descriptors) rests this long
CONNECT_TIMEOUT_S = 5.0  # dialling the target; past it, the dialler's connection is reset
CONTROL_TIMEOUT_S = 10.0  # a control call waiting for the proxy's loop
STOP_TIMEOUT_S = 10.0  # stop(): connections reset, listeners closed, the thread joined
EVENTS_MAX = 10_000


@dataclass(frozen=True)
class Link:
    state: str = "pass"
    delay_s: float = 0.0


PASS = Link()


@dataclass
class Counter:
    connections: int = 0  # accepted and labelled with this pair, ever
    open: int = 0
    forwarded: int = 0  # octets written on, either way
    discarded: int = 0  # octets thrown away by a blackhole, either way


@dataclass(frozen=True)
class _Front:
    target: str
    host: str
    port: int
    source: str | None


def _linger_zero(sock) -> None:
    """A close of ``sock`` becomes a reset (RST, not FIN)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


class _Connection:
    """One accepted connection: its label, the dialler's socket, its streams once made (the
    dialler's, then the target's) and the task serving it."""

    def __init__(self, dialler: socket.socket) -> None:
        self.pair: tuple[str, str] | None = None
        self.dialler = dialler
        self.writers: list[asyncio.StreamWriter] = []
        self.task: asyncio.Task | None = None
        self.holed = False  # lost bytes to a blackhole, or never joined to its target

    def reset(self) -> None:
        """Both sockets reset now (what was queued is lost, as on a broken link)."""
        if not self.writers:  # accepted, its stream not made yet: closed once its task ends (``ended``)
            _linger_zero(self.dialler)
        for writer in self.writers:
            if not writer.transport.is_closing():
                _linger_zero(writer.get_extra_info("socket"))
            writer.transport.abort()
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()

    def close(self) -> None:
        for writer in self.writers:
            writer.close()

    def ended(self, task: asyncio.Task) -> None:
        """Its task's done callback: a socket no stream took (the task was cancelled before it
        made one, maybe before it ever ran) is closed here."""
        if not self.writers:
            self.dialler.close()


def _hello_node(seen: bytes) -> str | None:
    """The dialling node named by a Warren link's first bytes; None while they may still be one
    and are incomplete; UNKNOWN when they are not one."""
    if not seen.startswith(MAGIC):
        return None if MAGIC.startswith(seen) else UNKNOWN
    line, newline, _ = seen[len(MAGIC):].partition(b"\n")
    if not newline:
        return None
    try:
        hello = json.loads(line)
    except ValueError:
        return UNKNOWN
    node = hello.get("node") if isinstance(hello, dict) else None
    return node if isinstance(node, str) and node else UNKNOWN


class FaultProxy:
    """Fronts processes with proxy ports and faults the links through them.

    ``start()``, then ``front(...)`` per process (and per source where the source cannot be
    learnt), then ``set_link``/``partition``/``heal`` as the faults go; ``counters()`` and
    ``events()`` for the report; ``stop()`` (or use it as a context manager)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._listeners: list[socket.socket] = []
        self._links: dict[tuple[str, str], Link] = {}
        self._counters: dict[tuple[str, str], Counter] = {}
        self._connections: set[_Connection] = set()
        self._events: deque[tuple[float, str]] = deque(maxlen=EVENTS_MAX)

    # --- life ------------------------------------------------------------------------------------

    def start(self) -> "FaultProxy":
        if self._thread is not None:
            raise RuntimeError("the proxy was started already")
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), name="fault-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(CONTROL_TIMEOUT_S):
            raise RuntimeError("the proxy's loop did not start")
        return self

    def stop(self) -> None:
        """Every listener closed and every connection reset; the loop's thread ends (bounded)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        try:
            loop.call_soon_threadsafe(self._stopping.set)
        except RuntimeError:  # the loop closed meanwhile
            pass
        thread.join(STOP_TIMEOUT_S + 1)
        if thread.is_alive():
            raise RuntimeError(f"the proxy did not stop within {STOP_TIMEOUT_S:g} s")

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._ready.set()
        await self._stopping.wait()
        for listener in self._listeners:
            self._loop.remove_reader(listener.fileno())
            listener.close()
        # every connection accepted is in _connections from its accept on (``_accept``)
        serving = [conn.task for conn in self._connections]
        for conn in list(self._connections):
            conn.reset()
        if serving:
            await asyncio.wait(serving, timeout=STOP_TIMEOUT_S)
        # asyncio.run cancels whatever task is left and closes the loop

    def _call(self, fn, *args):
        """``fn(*args)`` run in the proxy's loop (awaited if it is a coroutine function): its result."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._stopping.is_set():
            raise RuntimeError("the proxy is not running")

        async def run():
            result = fn(*args)
            return await result if asyncio.iscoroutine(result) else result
        return asyncio.run_coroutine_threadsafe(run(), loop).result(CONTROL_TIMEOUT_S)

    # --- control (from the test's thread) ---------------------------------------------------------

    def front(self, target_name: str, host: str, port: int, source: str | None = None) -> int:
        """A listener on 127.0.0.1 (a port of its own) forwarding to host:port: its port.
        Its connections go to ``target_name`` from ``source``, or, when None, from the node
        a Warren link's hello names (UNKNOWN when the first bytes are not such a hello, as on a
        link under ``--cluster-tls``, whose hello is inside TLS)."""
        return self._call(self._listen, _Front(target_name, host, port, source))

    def set_link(self, source: str, target: str, state: str, delay_s: float = 0.0) -> None:
        """The state of the connections ``source`` dials to ``target`` (module doc), now."""
        _check(state, delay_s)
        self._call(self._set_link, source, target, state, delay_s)

    def partition(self, group_a: Iterable[str], group_b: Iterable[str], state: str = "blackhole",
                  delay_s: float = 0.0) -> None:
        """Every pair across the groups, both ways, set to ``state`` (a lost route by default:
        Jepsen's partition drops packets; "drop" makes it a refusal the peers see at once)."""
        _check(state, delay_s)
        self._call(self._partition, list(group_a), list(group_b), state, delay_s)

    def heal(self) -> None:
        """Every pair back to ``pass``."""
        self._call(self._heal)

    def link(self, source: str, target: str) -> tuple[str, float]:
        """(state, delay_s) of the pair."""
        found = self._call(self._links.get, (source, target), PASS)
        return found.state, found.delay_s

    def counters(self) -> dict[tuple[str, str], dict[str, int]]:
        """Per (source, target): connections (ever), open, forwarded and discarded (octets)."""
        return self._call(lambda: {pair: asdict(counter) for pair, counter in self._counters.items()})

    def events(self) -> list[tuple[float, str]]:
        """The state changes made, oldest first: (time.monotonic(), what), the last EVENTS_MAX."""
        return self._call(lambda: list(self._events))

    # --- control (in the loop) -------------------------------------------------------------------

    def _listen(self, front: _Front) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", 0))
            listener.listen(128)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listeners.append(listener)
        self._loop.add_reader(listener.fileno(), self._accept, front, listener)
        return listener.getsockname()[1]

    def _set_link(self, source: str, target: str, state: str, delay_s: float) -> None:
        reset = self._apply((source, target), state, delay_s)
        self._record(f"{source}->{target} {_describe(state, delay_s)}", reset)

    def _partition(self, group_a: list[str], group_b: list[str], state: str, delay_s: float) -> None:
        reset = 0
        for a in group_a:
            for b in group_b:
                reset += self._apply((a, b), state, delay_s) + self._apply((b, a), state, delay_s)
        self._record(f"partition {sorted(group_a)} | {sorted(group_b)} {_describe(state, delay_s)}", reset)

    def _heal(self) -> None:
        reset = sum(self._apply(pair, "pass", 0.0) for pair in list(self._links))
        self._record("heal", reset)

    def _apply(self, pair: tuple[str, str], state: str, delay_s: float) -> int:
        """The pair's new state, and the connections it resets: how many."""
        before = self._links.get(pair, PASS)
        if state in ("pass", "cut"):
            self._links.pop(pair, None)
        else:
            self._links[pair] = Link(state, delay_s if state == "delay" else 0.0)
        if state in ("drop", "cut"):
            return self._reset(pair, holed_only=False)
        if before.state == "blackhole" and state != "blackhole":
            return self._reset(pair, holed_only=True)
        return 0

    def _reset(self, pair: tuple[str, str], holed_only: bool) -> int:
        chosen = [conn for conn in self._connections if conn.pair == pair and (conn.holed or not holed_only)]
        for conn in chosen:
            conn.reset()
        return len(chosen)

    def _record(self, what: str, reset: int) -> None:
        if reset:
            what += f" ({reset} connection{'s' if reset != 1 else ''} reset)"
        self._events.append((time.monotonic(), what))

    # --- the connections -------------------------------------------------------------------------

    def _counter(self, pair: tuple[str, str]) -> Counter:
        counter = self._counters.get(pair)
        if counter is None:
            counter = self._counters[pair] = Counter()
        return counter

    def _accept(self, front: _Front, listener: socket.socket) -> None:
        """The front's listener is readable: its connections, each served by a task of its own
        and known to stop() from its accept on (so no accepted socket is left open by a stop:
        asyncio's own servers and ``sock_accept`` both have a moment where one would be)."""
        for _ in range(ACCEPT_BATCH):
            try:
                dialler, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors, say: listen again a moment later, not in a busy loop
                self._loop.remove_reader(listener.fileno())
                self._loop.call_later(ACCEPT_RETRY_S, self._resume_accepting, front, listener)
                return
            dialler.setblocking(False)
            conn = _Connection(dialler)
            conn.task = asyncio.ensure_future(self._serve(front, conn))
            conn.task.add_done_callback(conn.ended)
            self._connections.add(conn)

    def _resume_accepting(self, front: _Front, listener: socket.socket) -> None:
        if listener.fileno() != -1:  # not closed by stop() meanwhile
            self._loop.add_reader(listener.fileno(), self._accept, front, listener)

    async def _serve(self, front: _Front, conn: _Connection) -> None:
        try:
            reader, writer = await asyncio.open_connection(sock=conn.dialler)
            conn.writers.append(writer)
            await self._relay(front, conn, reader, writer)
        except (OSError, asyncio.TimeoutError):
            pass  # reset by the peer, or the target could not be dialled (conn.reset() told the dialler)
        finally:
            self._connections.discard(conn)
            if conn.pair is not None:
                self._counter(conn.pair).open -= 1
            conn.close()

    async def _relay(self, front: _Front, conn: _Connection, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        first = b""
        source = front.source
        if source is None:
            source, first = await self._learn_source(reader)
        conn.pair = pair = (source, front.target)
        counter = self._counter(pair)
        counter.connections += 1
        counter.open += 1
        state = self._links.get(pair, PASS).state
        if state == "drop":
            conn.reset()
            return
        if state == "blackhole":  # silenced from the start: the target never hears of it
            conn.holed = True
            counter.discarded += len(first)
            while data := await reader.read(CHUNK):
                counter.discarded += len(data)
            return
        try:
            target_reader, target_writer = await asyncio.wait_for(
                asyncio.open_connection(front.host, front.port), CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError):
            conn.reset()  # as the target's refusal would have been seen without the proxy
            return
        conn.writers.append(target_writer)
        toward_target: asyncio.Queue = asyncio.Queue(QUEUE_CHUNKS)
        toward_dialler: asyncio.Queue = asyncio.Queue(QUEUE_CHUNKS)
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._take(conn, reader, toward_target, first))
            tasks.create_task(self._give(conn, target_writer, toward_target))
            tasks.create_task(self._take(conn, target_reader, toward_dialler, b""))
            tasks.create_task(self._give(conn, writer, toward_dialler))

    async def _learn_source(self, reader: asyncio.StreamReader) -> tuple[str, bytes]:
        """The dialling node as its hello names it, and the octets read to learn it (forwarded after)."""
        seen = b""
        try:
            async with asyncio.timeout(HELLO_TIMEOUT_S):
                while (node := _hello_node(seen)) is None and len(seen) < HELLO_LIMIT:
                    data = await reader.read(HELLO_LIMIT - len(seen))
                    if not data:
                        break
                    seen += data
        except TimeoutError:
            node = None
        return node or UNKNOWN, seen

    async def _take(self, conn: _Connection, reader: asyncio.StreamReader, chunks: asyncio.Queue,
                    first: bytes) -> None:
        """One side's bytes, stamped with when they may go on (or thrown away), then its close."""
        loop = asyncio.get_running_loop()
        data = first
        try:
            while True:
                if data:
                    link = self._links.get(conn.pair, PASS)
                    if link.state == "blackhole":
                        self._discard(conn, len(data))
                    else:
                        await chunks.put((loop.time() + link.delay_s, data))
                data = await reader.read(CHUNK)
                if not data:
                    break
        except OSError:
            conn.reset()  # one side reset: so is the other, as on a broken link
            return
        link = self._links.get(conn.pair, PASS)
        if link.state == "blackhole":
            conn.holed = True  # the close is lost with the bytes: the other side hears nothing
            return
        await chunks.put((loop.time() + link.delay_s, None))

    async def _give(self, conn: _Connection, writer: asyncio.StreamWriter, chunks: asyncio.Queue) -> None:
        """What ``_take`` queued, written to the other side when due, in order; then the close."""
        loop = asyncio.get_running_loop()
        counter = self._counter(conn.pair)
        try:
            while True:
                due, data = await chunks.get()
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                if data is None:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                if self._links.get(conn.pair, PASS).state == "blackhole":  # went dark while it waited
                    self._discard(conn, len(data))
                    continue
                writer.write(data)
                await writer.drain()
                counter.forwarded += len(data)
        except OSError:
            conn.reset()

    def _discard(self, conn: _Connection, size: int) -> None:
        conn.holed = True
        self._counter(conn.pair).discarded += size


def _check(state: str, delay_s: float) -> None:
    if state not in STATES:
        raise ValueError(f"a link state is one of {', '.join(STATES)}, not {state!r}")
    if delay_s < 0 or (state == "delay" and delay_s == 0):
        raise ValueError(f"a delay of {delay_s!r} s")


def _describe(state: str, delay_s: float) -> str:
    return f"delay {delay_s:g} s" if state == "delay" else state
