"""The bulk read path's own loop (warren/spark/read/http.py), without Spark: the requests of a
range grow from an eighth of ``fetchMaxBytes``, the batches parsed ahead on the helper
thread hold what one big answer holds, and every batch still held keeps its values."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from tests.conftest import skip_under_cluster, skip_under_spread
from tests.spark.stream_helpers import EXCHANGE, api, declare_stream, publish_raw, wait_committed
from warren.spark.options import parse_read_options
from warren.spark.read import http
from warren.spark.read.planning import StreamRange
from warren.spark.read.records import FULL_ARROW_SCHEMA, arrow_schema, parse_bulk
from warren.spec.amqp0_9_1 import BasicProperties

FLAT = arrow_schema(("body", "routing_key", "exchange", "offset", "stream"))


def test_request_sizes_start_at_an_eighth_and_double_up_to_fetch_max_bytes():
    assert list(itertools.islice(http._ramp(4 << 20), 5)) == [512 << 10, 1 << 20, 2 << 20, 4 << 20, 4 << 20]
    assert list(itertools.islice(http._ramp(100_000), 3)) == [64 << 10, 100_000, 100_000]  # the floor
    assert list(itertools.islice(http._ramp(1000), 2)) == [1000, 1000]  # never above fetchMaxBytes


def test_a_range_read_in_growing_requests_gives_the_rows_of_one_answer(broker, uid):
    stream = f"http-read-{uid}"
    declare_stream(broker, stream)
    count = 3000
    # one size and layout for the first 2,000 (the strided path), then sizes that differ
    bodies = [b"%06d" % i + b"u" * 94 for i in range(2000)] + [b"v" * (i % 300) for i in range(1000)]
    publish_raw(broker, f"{stream}.k", bodies, BasicProperties(content_type="text/plain").encode())
    wait_committed(broker, stream, count)
    with api(broker) as client:
        whole = client.records(stream, 0, count, count, 16 << 20)
    assert whole.count == count
    options = parse_read_options({"url": broker.url, "stream": stream, "fetchMaxBytes": str(128 << 10)}, batch=True)
    for schema in (FLAT, FULL_ARROW_SCHEMA):
        batches = list(http.read_range_http(options, StreamRange(stream, 0, count), schema))
        sizes = [b.num_rows for b in batches]
        assert sizes[0] < sizes[1], sizes  # 64 KiB first (the floor), then 128 KiB
        got = pa.Table.from_batches(batches).to_pylist()  # every batch held till now: none overwritten
        assert got == parse_bulk(whole.data, stream, schema=schema).to_pylist()
        assert got[0]["body"] == bodies[0] and got[0]["exchange"] == EXCHANGE
    assert http._IDLE, "the read gave its pools back for the next one"


# a stream of another process (its worker, or node 1) is answered with its octets: only the
# process holding the segment file can name it
LOCAL_READS_HERE_ONLY = "the stream lives in another process, which sends its octets: only a file here is named"


def _publish_past_the_tail_cache(broker, stream: str) -> int:
    """30,000 records of about 130 octets: the oldest lie in the segment file alone (the
    newest megabyte is also in the broker's tail cache, answered from memory)."""
    skip_under_spread(LOCAL_READS_HERE_ONLY)
    skip_under_cluster(LOCAL_READS_HERE_ONLY)
    if broker.data_dir is None:
        pytest.skip("needs a private Warren broker on this machine")
    declare_stream(broker, stream)
    count = 30_000
    publish_raw(broker, f"{stream}.k", [b"%06d" % i + b"w" * 94 for i in range(count)],
                BasicProperties(content_type="text/plain").encode())
    wait_committed(broker, stream, count)
    return count


def test_a_reader_on_the_brokers_machine_reads_the_segment_file_itself(broker, uid):
    """Asked from 127.0.0.1, the broker names where a range lies in its segment file and the
    reader reads it there (``local=1``, warren/spark/read/http_api.py): the same octets and
    offsets as the answer sent over the socket; the newest records, in the tail cache, still
    come over the socket."""
    stream = f"local-read-{uid}"
    count = _publish_past_the_tail_cache(broker, stream)
    with api(broker) as local, api(broker) as sent:
        sent.local_reads = False
        for offset in (0, 5000):
            a = local.records(stream, offset, count, 2000, 1 << 20)
            b = sent.records(stream, offset, count, 2000, 1 << 20)
            assert (a.first_offset, a.count, a.next_offset) == (b.first_offset, b.count, b.next_offset) == \
                (offset, 2000, offset + 2000)
            assert bytes(a.data) == bytes(b.data)
        assert local.local_answers == 2 and local.local_reads and sent.local_answers == 0
        for offset in (0, 2000):  # padded, as the read path asks, one request after the other
            expected = sent.records(stream, offset, count, 2000, 1 << 20).data
            a = local.records(stream, offset, count, 2000, 1 << 20, padded=True)
            assert a.size == len(expected) and bytes(a.data[:a.size]) == expected
        assert local.local_answers == 4
        newest = local.records(stream, count - 10, count, 10, 1 << 20)
        assert newest.count == 10 and local.local_answers == 4  # from the tail cache, sent


def test_a_reader_that_cannot_open_the_brokers_files_is_sent_the_records(broker, uid):
    """A reader on the broker's machine that may not open the broker's files (the data folder
    made mode 000 for the test, the reader a root process without the capabilities that
    override file modes, through setpriv's bounding set) asks again without ``local``, gets
    the same octets over the socket, and asks no more."""
    import hashlib
    import json
    import os
    import shutil
    import subprocess
    import sys
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv (a reader without the capabilities that override file modes)")
    stream = f"local-denied-{uid}"
    count = _publish_past_the_tail_cache(broker, stream)
    with api(broker) as own:
        expected = hashlib.sha256(bytes(own.records(stream, 0, count, 4000, 1 << 20).data)).hexdigest()
        assert own.local_answers == 1
    script = (
        "import hashlib, json, sys\n"
        "from warren.spark.read.http_api import StreamApi\n"
        "api = StreamApi(sys.argv[1], 'guest', 'guest', '/')\n"
        "answers = [api.records(sys.argv[2], o, None, 2000, 1 << 20) for o in (0, 2000)]\n"
        "print(json.dumps({'digest': hashlib.sha256(b''.join(bytes(a.data) for a in answers)).hexdigest(),\n"
        "                  'local_answers': api.local_answers, 'local_reads': api.local_reads}))\n")
    mode = os.stat(broker.data_dir).st_mode & 0o7777
    os.chmod(broker.data_dir, 0)
    try:
        out = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-c",
                              script, broker.http_url, stream], capture_output=True, text=True, timeout=60)
    finally:
        os.chmod(broker.data_dir, mode)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got == {"digest": expected, "local_answers": 0, "local_reads": False}
