#!/usr/bin/env python3
"""End-to-end publish -> consume throughput and latency benchmark for any AMQP 0-9-1 broker.

What it measures
----------------
For every combination of message size (``--sizes``, default 16 and 1024 bytes)
and acknowledgement mode (``--modes``: ``ack`` = manual per-message
``basic.ack``, ``noack`` = ``basic.consume(no_ack=True)``), it runs

* an **open-loop** scenario: one publisher process publishes flat out for
  ``--seconds`` while one consumer process consumes, and
* a **rate-limited** scenario (``--rate N`` msg/s, default 1000, ``--rate 0``
  skips it) for latency figures that are not dominated by a broker backlog.

Per scenario it reports msg/s published, msg/s consumed, the backlog left when
the publisher stopped, and end-to-end latency p50/p95/p99/max in ms.

Method
------
* The publisher and the consumer are separate processes
  (``multiprocessing``, spawn), so each gets its own interpreter/GIL.
* Each scenario uses a fresh, uniquely named, non-durable, ``auto_delete``
  queue (``warren-bench-<hex>``), published to through the default exchange
  with transient messages (no ``delivery_mode=2``). The consumer deletes the
  queue at the end; the parent process deletes it again (ignoring errors) as a
  fallback.
* Every message body starts with 16 bytes ``<QQ`` = (sequence number,
  ``time.perf_counter_ns()`` at publish) and is zero-padded to the requested
  size (so the minimum size is 16 B). On Linux ``perf_counter`` is
  ``CLOCK_MONOTONIC``, which is system-wide, so publisher and consumer stamps
  are comparable: latency = consumer receive time - publisher stamp. Both
  processes run on the benchmark host, so the broker may be remote.
* Latency includes client-side buffering: the publisher keeps at most
  ``--high-water`` bytes (default 256 KiB) in pika's output buffer and
  otherwise publishes as fast as the connection drains; messages are stamped
  when handed to the client. In rate-limited runs each message is stamped
  with its *scheduled* send time (correcting for coordinated omission: if the
  publisher stalls, the stall shows up as latency).
* Open-loop latency is mostly queueing delay whenever the consumer is slower
  than the publisher (see the "backlog" column); use the rate-limited rows for
  latency comparisons.
* The consumer sets ``basic.qos(prefetch_count=--prefetch)`` (default 1000;
  RabbitMQ ignores prefetch for no-ack consumers) and in ``ack`` mode acks
  every message individually (``--ack-every N`` switches to one
  ``multiple=True`` ack per N messages; the mode is then shown as ``ackN``).
* "pub msg/s" = messages published / (time from first publish until pika's
  output buffer was flushed to the socket). "cons msg/s" = (messages
  consumed - 1) / (last receive - first receive). "backlog" = published - consumed at the
  moment the consumer noticed the publisher had finished (approximate,
  checked every 20 ms). "lost" = published - consumed after draining for at
  most ``--drain-timeout`` seconds.
* ``--pid PID`` samples the broker's ``VmRSS`` from ``/proc/PID/status`` every
  0.25 s during each scenario and reports the peak sample and the value at the
  end of the scenario.
* Each scenario is bounded: setup (15 s max) + ``--seconds`` + drain
  (``--drain-timeout``) + 10 s grace, after which child processes are
  terminated.

Client choice
-------------
Both sides use **pika SelectConnection** (pika's own callback-based I/O loop).
Measured with a throw-away script against RabbitMQ 3.10.8 on the 2-vCPU
development VM, one client process at a time, one run each (indicative):
publish flat out for 5 s into a queue with no consumer, then consume that
backlog with prefetch 1000. msg/s:

=====================  =========  ============  =========  ==============
client                 pub 16 B   cons+ack 16B  pub 1 KiB  cons noack 1KiB
=====================  =========  ============  =========  ==============
pika SelectConnection  27.0k      15.8k         23.5k      19.8k
py-amqp 5.x            12.9k      6.3k          12.6k      11.8k
pika BlockingConn.     8.8k       7.1k          -          -
aiormq + uvloop        7.5k       7.5k          -          -
aio-pika + uvloop      5.8k       4.5k          4.5k       5.1k
=====================  =========  ============  =========  ==============

aio-pika/aiormq pay for one coroutine/future round trip per message even with
uvloop; py-amqp and BlockingConnection write synchronously per message.
SelectConnection just appends frames to a buffer that its loop flushes in
large writes, which is why it is ~2x faster than the next best; the publisher
bounds that buffer itself (``--high-water``) so the reported publish rate is
what actually reached the socket, not what piled up in client memory.

Usage
-----
    python bench/throughput.py --url amqp://guest:guest@127.0.0.1:5672/ \\
        --seconds 10 [--sizes 16,1024] [--modes ack,noack] [--rate 1000] \\
        [--pid BROKER_PID] [--json]
"""

from __future__ import annotations

import argparse
import array
import datetime as _dt
import json
import math
import multiprocessing as mp
import os
import platform
import queue as _queue
import struct
import sys
import time
import urllib.parse
import uuid

HDR = struct.Struct("<QQ")  # (sequence number, perf_counter_ns at publish)
HIGH_WATER = 256 * 1024  # default cap on bytes queued in pika's output buffer (--high-water)
OPEN_BATCH = 500  # messages per publisher loop iteration in open-loop mode
SETUP_TIMEOUT = 15.0
CHECK_INTERVAL = 0.02


# --------------------------------------------------------------------------
# helpers


def read_rss_kib(pid: int) -> int | None:
    """VmRSS of *pid* in KiB, or None if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def percentile(sorted_vals, p: float):
    """Nearest-rank percentile of an already sorted sequence."""
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, math.ceil(p / 100.0 * len(sorted_vals)) - 1))
    return sorted_vals[k]


def mask_url(url: str) -> str:
    try:
        u = urllib.parse.urlsplit(url)
        if u.password:
            netloc = u.netloc.replace(":" + u.password + "@", ":***@", 1)
            return urllib.parse.urlunsplit(u._replace(netloc=netloc))
    except ValueError:
        pass
    return url


def _params(url: str):
    import pika

    p = pika.URLParameters(url)
    p.connection_attempts = 1
    p.socket_timeout = 10
    return p


def _write_buffer_size(conn) -> int:
    try:
        return conn._get_write_buffer_size()
    except Exception:  # pragma: no cover - pika internals changed
        return 0


# --------------------------------------------------------------------------
# consumer process


def _select_connection(url: str, res: dict, sh: dict, on_channel_open, closing_is_error, where=lambda: ""):
    """A pika SelectConnection that opens one channel (``on_channel_open``); a failed connect, or a
    close while ``closing_is_error()``, is the side's error (``res``) and aborts the scenario."""
    from pika.adapters.select_connection import SelectConnection

    def on_open(conn):
        conn.channel(on_open_callback=on_channel_open)

    def on_open_error(conn, err):
        res["error"] = f"connect failed: {err!r}"
        sh["abort"].set()
        conn.ioloop.stop()

    def on_closed(conn, reason):
        if closing_is_error() and res["error"] is None:
            res["error"] = f"connection closed: {reason!r}" + where()
            sh["abort"].set()
        conn.ioloop.stop()

    return SelectConnection(_params(url), on_open_callback=on_open, on_open_error_callback=on_open_error,
                            on_close_callback=on_closed)


def consumer_main(cfg: dict, sh: dict, out) -> None:
    res = {"role": "cons", "consumed": 0, "error": None, "deleted": False}
    lat = array.array("q")
    lat_append = lat.append
    now = time.perf_counter_ns
    unpack = HDR.unpack_from
    qname = cfg["queue"]
    ack = cfg["ack"]
    ack_every = cfg["ack_every"]
    drain_timeout = cfg["drain_timeout"]
    hard_deadline = time.monotonic() + SETUP_TIMEOUT + cfg["seconds"] + drain_timeout + 5
    pub_total = sh["pub_total"]
    n = 0
    first = last = 0
    stopping = False
    backlog = None
    drain_deadline = None
    state = {"conn": None, "ch": None}

    def on_message(ch, method, _props, body):
        nonlocal n, first, last
        t = now()
        if stopping:
            return
        lat_append(t - unpack(body)[1])
        n += 1
        if n == 1:
            first = t
        last = t
        if ack:
            if ack_every == 1:
                ch.basic_ack(method.delivery_tag)
            elif n % ack_every == 0:
                ch.basic_ack(method.delivery_tag, multiple=True)

    def check():
        nonlocal backlog, drain_deadline
        total = pub_total.value
        mono = time.monotonic()
        if total >= 0 and backlog is None:
            backlog = total - n
            drain_deadline = mono + drain_timeout
        if total >= 0 and n >= total:
            finish(None)
        elif sh["abort"].is_set() and total < 0:
            finish("aborted (publisher failed)")
        elif drain_deadline is not None and mono > drain_deadline:
            finish(f"drain timeout ({drain_timeout:g}s)")
        elif mono > hard_deadline:
            finish("hard deadline")
        else:
            state["conn"].ioloop.call_later(CHECK_INTERVAL, check)

    def finish(note):
        nonlocal stopping
        if stopping:
            return
        stopping = True
        if note:
            res["note"] = note
        conn = state["conn"]
        ch = state["ch"]
        conn.ioloop.call_later(5, lambda: conn.is_open and conn.close())

        def deleted(_frame):
            res["deleted"] = True
            if conn.is_open:
                conn.close()

        if ch is not None and ch.is_open:
            ch.queue_delete(qname, callback=deleted)
        elif conn.is_open:
            conn.close()

    def on_consume_ok(_frame):
        sh["ready"].set()
        state["conn"].ioloop.call_later(CHECK_INTERVAL, check)

    def on_qos_ok(_frame):
        state["ch"].basic_consume(qname, on_message, auto_ack=not ack, callback=on_consume_ok)

    def on_declare_ok(_frame):
        state["ch"].basic_qos(prefetch_count=cfg["prefetch"], callback=on_qos_ok)

    def where():
        secs = (now() - first) / 1e9 if n else 0.0
        return f" (consumer: after {n} msgs, {secs:.1f}s after first)"

    def on_channel_closed(_ch, reason):
        state["ch"] = None
        if not stopping:
            res["error"] = f"channel closed: {reason!r}" + where()
            sh["abort"].set()
        if state["conn"].is_open:
            state["conn"].close()

    def on_channel_open(ch):
        state["ch"] = ch
        ch.add_on_close_callback(on_channel_closed)
        ch.queue_declare(qname, durable=False, exclusive=False, auto_delete=True, callback=on_declare_ok)

    try:
        conn = _select_connection(cfg["url"], res, sh, on_channel_open, lambda: not stopping, where)
        state["conn"] = conn

        def on_setup_timeout():
            if not sh["ready"].is_set():
                res["error"] = "setup timeout"
                sh["abort"].set()
                finish("setup timeout")

        conn.ioloop.call_later(SETUP_TIMEOUT, on_setup_timeout)
        conn.ioloop.call_later(hard_deadline - time.monotonic() + 5, conn.ioloop.stop)
        conn.ioloop.start()
    except Exception as e:  # noqa: BLE001 - report anything to the parent
        res["error"] = res["error"] or f"{type(e).__name__}: {e}"
        sh["abort"].set()

    res["consumed"] = n
    res["backlog"] = backlog
    res["cons_seconds"] = (last - first) / 1e9 if n > 1 else None
    vals = sorted(lat)
    res["lat_ms"] = {
        k: (None if not vals else percentile(vals, p) / 1e6)
        for k, p in (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100))
    }
    out.put(res)


# --------------------------------------------------------------------------
# publisher process


def publisher_main(cfg: dict, sh: dict, out) -> None:
    res = {"role": "pub", "published": 0, "error": None}
    qname = cfg["queue"]
    size = cfg["size"]
    pad = b"\0" * (size - HDR.size)
    pack = HDR.pack
    now = time.perf_counter_ns
    rate = cfg["rate"]
    seconds = cfg["seconds"]
    high_water = cfg["high_water"]
    seq = 0
    t0 = end = 0
    finished = False
    state = {"conn": None, "ch": None}

    def pump_open():
        nonlocal seq
        conn = state["conn"]
        if sh["abort"].is_set():
            return done("aborted (consumer failed)")
        wrote = False
        if _write_buffer_size(conn) < high_water:
            publish = state["ch"].basic_publish
            for _ in range(OPEN_BATCH):
                publish("", qname, pack(seq, now()) + pad)
                seq += 1
            wrote = True
        if now() >= end:
            return done(None)
        # When the buffer is full, wait ~1 ms for the socket instead of spinning.
        conn.ioloop.call_later(0 if wrote else 0.001, pump_open)

    interval = 1e9 / rate if rate else 0.0
    limit = int(rate * seconds) if rate else 0
    next_due = 0.0

    def pump_rate():
        nonlocal seq, next_due
        conn = state["conn"]
        if sh["abort"].is_set():
            return done("aborted (consumer failed)")
        t = now()
        if _write_buffer_size(conn) < high_water:
            publish = state["ch"].basic_publish
            while next_due <= t and seq < limit:
                # stamp with the scheduled time (coordinated-omission correction)
                publish("", qname, pack(seq, int(next_due)) + pad)
                seq += 1
                next_due += interval
        if seq >= limit or t >= end + 1e9:  # 1 s grace to finish the schedule
            return done(None if seq >= limit else "rate not sustained")
        delay = max(0.0, (next_due - now()) / 1e9)
        conn.ioloop.call_later(delay, pump_rate)

    def done(note):
        nonlocal finished
        if finished:
            return
        finished = True
        if note:
            res["note"] = note
        conn = state["conn"]
        flush_deadline = time.monotonic() + 10

        def wait_flush():
            if _write_buffer_size(conn) > 0 and time.monotonic() < flush_deadline and conn.is_open:
                conn.ioloop.call_later(0.001, wait_flush)
                return
            t_end = now()
            res["published"] = seq
            res["pub_seconds"] = (t_end - t0) / 1e9
            sh["pub_total"].value = seq  # tells the consumer how many to expect
            if conn.is_open:
                conn.close()

        wait_flush()

    def on_channel_open(ch):
        nonlocal t0, end, next_due
        state["ch"] = ch
        ch.add_on_close_callback(on_channel_closed)
        # Block (briefly) until the consumer is attached.
        deadline = time.monotonic() + SETUP_TIMEOUT
        while not sh["ready"].wait(0.05):
            if sh["abort"].is_set() or time.monotonic() > deadline:
                res["error"] = "consumer not ready"
                sh["abort"].set()
                state["conn"].close()
                return
        t0 = now()
        end = t0 + int(seconds * 1e9)
        next_due = float(t0)
        (pump_rate if rate else pump_open)()

    def on_channel_closed(_ch, reason):
        if not finished:
            res["error"] = f"channel closed: {reason!r}"
            sh["abort"].set()
            if state["conn"].is_open:
                state["conn"].close()

    try:
        conn = _select_connection(cfg["url"], res, sh, on_channel_open, lambda: sh["pub_total"].value < 0)
        state["conn"] = conn
        conn.ioloop.call_later(2 * SETUP_TIMEOUT + seconds + 15, conn.ioloop.stop)
        conn.ioloop.start()
    except Exception as e:  # noqa: BLE001
        res["error"] = res["error"] or f"{type(e).__name__}: {e}"
        sh["abort"].set()
    if res["error"] or sh["pub_total"].value < 0:
        sh["abort"].set()
    res["published"] = seq
    out.put(res)


# --------------------------------------------------------------------------
# parent: orchestration


def cleanup_queue(url: str, qname: str) -> None:
    """Best-effort fallback delete; errors (e.g. 404 not found) are ignored."""
    try:
        import pika

        c = pika.BlockingConnection(_params(url))
        try:
            c.channel().queue_delete(qname)
        finally:
            if c.is_open:
                c.close()
    except Exception:  # noqa: BLE001
        pass


def run_scenario(args, size: int, mode: str, rate: int) -> dict:
    ctx = mp.get_context("spawn")
    qname = "warren-bench-" + uuid.uuid4().hex[:12]
    ack = mode == "ack"
    cfg = {
        "url": args.url,
        "queue": qname,
        "size": size,
        "ack": ack,
        "ack_every": args.ack_every,
        "prefetch": args.prefetch,
        "seconds": args.seconds,
        "drain_timeout": args.drain_timeout,
        "rate": rate,
        "high_water": args.high_water,
    }
    sh = {"ready": ctx.Event(), "abort": ctx.Event(), "pub_total": ctx.Value("q", -1, lock=False)}
    out = ctx.Queue()
    cons = ctx.Process(target=consumer_main, args=(cfg, sh, out), name="bench-consumer", daemon=True)
    pub = ctx.Process(target=publisher_main, args=(cfg, sh, out), name="bench-publisher", daemon=True)
    rss_peak = None
    results: dict = {}
    cons.start()
    pub.start()
    deadline = time.monotonic() + SETUP_TIMEOUT + args.seconds + args.drain_timeout + 10
    while len(results) < 2 and time.monotonic() < deadline:
        if args.pid:
            rss = read_rss_kib(args.pid)
            if rss is not None and (rss_peak is None or rss > rss_peak):
                rss_peak = rss
        try:
            r = out.get(timeout=0.25)
            results[r["role"]] = r
        except _queue.Empty:
            if not cons.is_alive() and not pub.is_alive():
                # drain anything that raced with the exit
                try:
                    while True:
                        r = out.get(timeout=0.5)
                        results[r["role"]] = r
                except _queue.Empty:
                    break
    for p in (pub, cons):
        p.join(timeout=5)
        if p.is_alive():
            p.terminate()  # only our own child processes
            p.join(timeout=5)
    pr = results.get("pub", {"error": "publisher produced no result", "published": 0})
    cr = results.get("cons", {"error": "consumer produced no result", "consumed": 0, "lat_ms": {}})
    if not cr.get("deleted"):
        cleanup_queue(args.url, qname)
    published = pr.get("published", 0)
    consumed = cr.get("consumed", 0)
    pub_s = pr.get("pub_seconds")
    cons_s = cr.get("cons_seconds")
    mode_label = mode if (mode == "noack" or args.ack_every == 1) else f"ack{args.ack_every}"
    row = {
        "size": size,
        "mode": mode_label,
        "load": f"rate={rate}" if rate else "open",
        "published": published,
        "consumed": consumed,
        "pub_msg_s": round(published / pub_s, 1) if pub_s else None,
        # n messages received at first..last span n-1 inter-arrival intervals
        "cons_msg_s": round((consumed - 1) / cons_s, 1) if cons_s else None,
        "backlog": cr.get("backlog"),
        "lost": published - consumed if pub_s else None,
        "latency_ms": {k: (round(v, 3) if v is not None else None) for k, v in cr.get("lat_ms", {}).items()},
        "queue": qname,
        "queue_deleted": bool(cr.get("deleted")),
    }
    if args.pid:
        rss_end = read_rss_kib(args.pid)
        row["broker_rss_kib_peak"] = max((x for x in (rss_peak, rss_end) if x is not None), default=None)
        row["broker_rss_kib_end"] = rss_end
    errors = [x for x in (pr.get("error"), cr.get("error")) if x]
    notes = [x for x in (pr.get("note"), cr.get("note")) if x]
    if errors:
        row["error"] = "; ".join(dict.fromkeys(errors))
    if notes:
        row["notes"] = "; ".join(dict.fromkeys(notes))
    return row


def _fmt(v, spec):
    if v is None:
        width = "".join(c for c in spec.split(".")[0] if c.isdigit())
        return "-".rjust(int(width or 0))
    return format(v, spec)


def format_header(with_rss: bool) -> str:
    h = (
        f"{'size':>5} {'mode':>6} {'load':>10} {'pub msg/s':>10} {'cons msg/s':>10} "
        f"{'backlog':>8} {'lost':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    )
    if with_rss:
        h += f" {'rss MiB':>13}"
    return h


def format_row(r: dict, with_rss: bool) -> str:
    lat = r["latency_ms"]
    s = (
        f"{r['size']:>5} {r['mode']:>6} {r['load']:>10} {_fmt(r['pub_msg_s'], '10.0f')} "
        f"{_fmt(r['cons_msg_s'], '10.0f')} {_fmt(r['backlog'], '8d')} {_fmt(r['lost'], '6d')} "
        f"{_fmt(lat.get('p50'), '8.2f')} {_fmt(lat.get('p95'), '8.2f')} "
        f"{_fmt(lat.get('p99'), '8.2f')} {_fmt(lat.get('max'), '8.2f')}"
    )
    if with_rss:
        peak, endv = r.get("broker_rss_kib_peak"), r.get("broker_rss_kib_end")
        s += " " + (
            f"{_fmt(endv and endv / 1024, '.0f')} (pk {_fmt(peak and peak / 1024, '.0f')})".rjust(13)
        )
    for k in ("error", "notes"):
        if r.get(k):
            s += f"  [{k}: {r[k]}]"
    return s


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/%2F", help="broker AMQP URL")
    ap.add_argument("--seconds", type=float, default=10.0, help="publish duration per scenario")
    ap.add_argument("--sizes", default="16,1024", help="comma-separated body sizes in bytes (>= 16)")
    ap.add_argument("--modes", default="ack,noack", help="comma-separated: ack, noack")
    ap.add_argument(
        "--rate",
        type=int,
        default=1000,
        help="msg/s for the additional rate-limited latency run per scenario (0 = open loop only)",
    )
    ap.add_argument("--prefetch", type=int, default=1000, help="consumer basic.qos prefetch_count")
    ap.add_argument(
        "--ack-every",
        type=int,
        default=1,
        help="ack mode: ack every Nth message with multiple=True (default 1 = per-message acks)",
    )
    ap.add_argument(
        "--high-water",
        type=int,
        default=HIGH_WATER,
        help="publisher: max bytes buffered in the client before waiting for the socket",
    )
    ap.add_argument("--drain-timeout", type=float, default=20.0, help="max seconds to drain after publishing")
    ap.add_argument("--pid", type=int, help="broker PID: report its VmRSS")
    ap.add_argument("--json", action="store_true", help="print results as JSON instead of a table")
    args = ap.parse_args(argv)
    try:
        args.sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        ap.error("--sizes must be comma-separated integers")
    if not args.sizes or any(s < HDR.size for s in args.sizes):
        ap.error(f"--sizes must be >= {HDR.size} bytes (timestamp header)")
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.modes or any(m not in ("ack", "noack") for m in args.modes):
        ap.error("--modes must be a comma-separated subset of: ack, noack")
    if args.seconds <= 0 or args.rate < 0 or args.prefetch < 0 or args.ack_every < 1:
        ap.error("--seconds must be > 0, --rate/--prefetch >= 0, --ack-every >= 1")
    if args.prefetch and args.ack_every > args.prefetch:
        ap.error("--ack-every must be <= --prefetch (otherwise the consumer stalls)")
    if args.pid and read_rss_kib(args.pid) is None:
        ap.error(f"cannot read /proc/{args.pid}/status")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    import pika  # fail early if the client is missing

    meta = {
        "url": mask_url(args.url),
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "client": f"pika {pika.__version__} SelectConnection",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "seconds": args.seconds,
        "prefetch": args.prefetch,
        "ack_every": args.ack_every,
        "drain_timeout": args.drain_timeout,
        "high_water": args.high_water,
        "broker_pid": args.pid,
    }
    if args.pid:
        meta["broker_rss_kib_start"] = read_rss_kib(args.pid)
    with_rss = bool(args.pid)
    if not args.json:
        print(
            f"# {meta['url']}  {meta['date']}  {meta['client']}  python {meta['python']}  "
            f"cpus={meta['cpus']}  {args.seconds:g}s/scenario  prefetch={args.prefetch}"
            + (f"  broker rss start {meta['broker_rss_kib_start'] / 1024:.0f} MiB" if with_rss else "")
        )
        print(format_header(with_rss), flush=True)
    rows = []
    rates = [0] + ([args.rate] if args.rate else [])
    for size in args.sizes:
        for mode in args.modes:
            for rate in rates:
                if args.json:
                    load = f"rate={rate}" if rate else "open"
                    print(f"running size={size} mode={mode} load={load} ...", file=sys.stderr, flush=True)
                row = run_scenario(args, size, mode, rate)
                rows.append(row)
                if not args.json:
                    print(format_row(row, with_rss), flush=True)
                time.sleep(0.5)  # let the broker settle between scenarios
    if args.json:
        json.dump({"meta": meta, "results": rows}, sys.stdout, indent=2)
        print()
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
