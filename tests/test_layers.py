"""The layers import only downwards. Each rule names a set of modules and what they must never
import (a module or any module below it):

* the protocol core stays sans-IO: ``warren.codec``, ``warren.protocol`` and ``warren.spec``
  import no asyncio, socket or ssl, and nothing from the server or store layers; only a
  protocol's adapter modules (``ADAPTERS``: its method handlers over the broker's operations,
  its delivery sink) import the broker; the codec, the spec tables and the protocol cores never do;
* the broker is protocol-neutral: ``warren.broker`` imports nothing from ``warren.protocol``
  (each protocol adapts itself to the broker's operations, not the reverse) nor the protocols'
  tables in ``warren.spec`` (the message container reads its property list through the codec's accessors,
  ``warren/codec/properties.py``; the 0-9-1 methods' name checks are the protocol's), nor from the
  asyncio glue in ``warren.server``; nor from the metrics or the HTTP API, which read it (the
  node-wide counts it keeps are ``warren/broker/totals.py``);
* the store keeps bytes: ``warren.store`` imports nothing from the broker, server or protocol;
* the Spark data source runs in Spark's Python workers, far from any broker: it may use the
  sans-IO codec and protocol layers, never the broker's or the store's internals (what it needs
  from there, property-list edits, flags and header names, the records endpoint's entry header,
  lives in ``warren/codec``);
* the settings are read before anything runs: ``warren.config`` and ``warren.config_sources``
  import nothing from the server (the TLS settings' valid values live in config, server/tls.py
  applies them);
* shovels and federation links are clients of the broker, not of its HTTP API: ``warren.federation``
  imports nothing from ``warren.management`` (their HTTP routes are management/api/federation.py);
* the HTTP base (``warren.http``: limits and the guarded site) serves both the management API and
  the Prometheus endpoint, and imports neither; the metrics import nothing from the management API
  either (the names they share are read models of the broker and the server: ``node_name``,
  ``connection_name``, a channel's ``consumer_count()``);
* where a queue lives is the broker directory's business (``warren/broker/directory.py``): the
  protocols, the broker, the HTTP API, the metrics and federation import nothing from
  ``warren.spread`` (the server makes the spread directory; the spread package implements the
  directory and the handles of queues on other workers, never the reverse); the spread in turn imports nothing from the
  server, the HTTP API or the metrics (placement, which moves sockets, is server glue:
  ``warren/server/placement.py``; the ownership rule is ``warren/broker/ownership.py``).

* a cluster is the server's business (issue 32): ``warren.protocol``, ``warren.management``,
  ``warren.spark``, ``warren.broker``, ``warren.store``, ``warren.access`` and ``warren.federation``
  import nothing from ``warren.cluster`` (the server joins the cluster at start-up; a queue on
  another node will be a handle behind the broker's directory, as a queue on another worker is;
  the node files reach etcd through hooks the cluster registers in ``warren/store/node_file.py``,
  and a shovel's node is chosen through the federation manager's ``runs_here``).

* one broker channel, one adapter per protocol family: the classes extending ``BrokerChannel`` are
  ``CHANNEL_ADAPTERS`` (and ``CHANNEL_CLASSES_PENDING``, each with the reason it is still there);
  where a queue lives never makes another channel class.

* no two packages import each other, directly or round a longer loop (a package's name is the
  folder under ``warren/``): the server composes the HTTP API and the metrics, which read the
  server's objects through their own methods (a connection's ``api_name()``), never its modules.

Every rule is checked against a deliberate breach too (``test_each_rule_catches_a_breach``).

A rule that the code does not keep yet is marked ``xfail(strict=True)`` with the step of
issue 14's seam that fixes it; once fixed, the strict mark fails until it is removed.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "warren"


def _imports(path: Path):
    """Every module a file imports, at any depth; ``from P import M`` names ``P`` and ``P.M`` too
    (M may be a module: ``from warren.spec import amqp0_9_1``)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def _forbidden(path: Path, forbidden) -> list[str]:
    return [m for m in _imports(path) if any(m == f or m.startswith(f + ".") for f in forbidden)]


def _modules(*dirs: str, extra=()) -> list[Path]:
    return sorted([*(p for d in dirs for p in (ROOT / d).rglob("*.py")), *extra])


def _ids(path: Path) -> str:
    return str(path.relative_to(ROOT.parent))


def _cases(paths, pending: dict[str, str]):
    """``paths`` as pytest params, those in ``pending`` (path relative to warren/ -> why) xfail."""
    out = []
    for p in paths:
        why = pending.get(str(p.relative_to(ROOT)))
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        out.append(pytest.param(p, marks=marks, id=_ids(p)))
    return out


SANS_IO_FORBIDDEN = ("asyncio", "socket", "ssl", "selectors", "warren.server", "warren.store", "warren.spread")
# the modules of warren/protocol that adapt a protocol to the broker's operations
ADAPTERS = {"protocol/amqp0_9_1/adapter.py", "protocol/amqp0_9_1/channel.py", "protocol/amqp0_9_1/delivery.py",
            "protocol/amqp0_10/adapter.py", "protocol/amqp0_10/channel.py", "protocol/amqp0_10/message.py",
            "protocol/amqp0_10/delivery.py", "protocol/amqp0_10/dtx.py", "protocol/amqp1_0/adapter.py",
            "protocol/amqp1_0/credit.py", "protocol/amqp1_0/management.py"}


@pytest.mark.parametrize("path", _modules("codec", "protocol", "spec"), ids=_ids)
def test_sans_io_module_imports_no_io_and_no_upper_layer(path):
    forbidden = SANS_IO_FORBIDDEN
    if str(path.relative_to(ROOT)) not in ADAPTERS:
        forbidden += ("warren.broker",)
    bad = _forbidden(path, forbidden)
    assert not bad, f"{path.name} imports {bad}"


# the protocols' generated tables and their bases (the field-table codec, warren/spec/fields.py,
# is the broker's to use: headers and arguments are field tables in every protocol)
SPEC_TABLES = tuple(f"warren.spec.{p.stem}" for p in sorted((ROOT / "spec").glob("*.py"))
                    if p.stem not in ("__init__", "fields"))
BROKER_FORBIDDEN = ("warren.protocol", *SPEC_TABLES, "warren.server", "warren.metrics", "warren.management",
                    "warren.spread")
STORE_FORBIDDEN = ("warren.broker", "warren.server", "warren.protocol", "warren.management", "asyncio")
SPARK_FORBIDDEN = ("warren.broker", "warren.server", "warren.management", "warren.store")
CONFIG_FORBIDDEN = ("warren.server",)
FEDERATION_FORBIDDEN = ("warren.management", "warren.spread")
HTTP_BASE_FORBIDDEN = ("warren.management", "warren.metrics")
METRICS_FORBIDDEN = ("warren.management", "warren.spread")
MANAGEMENT_FORBIDDEN = ("warren.spread",)
SPREAD_FORBIDDEN = ("warren.server", "warren.management", "warren.metrics")
CLUSTER_FORBIDDEN = ("warren.cluster",)

# each rule of the module docstring but the sans-IO one: (its name, the modules it covers, what
# none of them may import)
RULES = [
    ("broker", _modules("broker"), BROKER_FORBIDDEN),
    ("store", _modules("store"), STORE_FORBIDDEN),
    ("spark", _modules("spark", extra=(ROOT.parent / "pyspark_warren").rglob("*.py")), SPARK_FORBIDDEN),
    ("config", [ROOT / "config.py", ROOT / "config_sources.py"], CONFIG_FORBIDDEN),
    ("federation", _modules("federation"), FEDERATION_FORBIDDEN),
    ("http", _modules("http"), HTTP_BASE_FORBIDDEN),
    ("metrics", _modules("metrics"), METRICS_FORBIDDEN),
    ("management", _modules("management"), MANAGEMENT_FORBIDDEN),
    ("spread", _modules("spread"), SPREAD_FORBIDDEN),
    ("cluster", _modules("protocol", "management", "spark", "broker", "store", "access", "federation"),
     CLUSTER_FORBIDDEN),
]


@pytest.mark.parametrize("path, forbidden", [pytest.param(path, forbidden, id=f"{rule}:{_ids(path)}")
                                             for rule, paths, forbidden in RULES for path in paths])
def test_layer_imports_only_downwards(path, forbidden):
    bad = _forbidden(path, forbidden)
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("forbidden, breach", [
    (SANS_IO_FORBIDDEN, "import asyncio"),
    (SANS_IO_FORBIDDEN + ("warren.broker",), "from warren.broker.vhost import VHost"),
    (SANS_IO_FORBIDDEN, "def channel_class():\n    from warren.spread.channel import SpreadChannel"),
    (BROKER_FORBIDDEN, "from warren.spread.remote_queue import RemoteQueue"),
    (MANAGEMENT_FORBIDDEN, "from warren.spread.definitions import ADMIN"),
    (SPREAD_FORBIDDEN, "from warren.server.ownership import place"),
    (BROKER_FORBIDDEN, "from warren.protocol.amqp0_9_1 import adapter"),
    (BROKER_FORBIDDEN, "from warren.metrics.collect import snapshot"),
    (BROKER_FORBIDDEN, "from warren.spec.amqp0_9_1 import BasicProperties"),
    (BROKER_FORBIDDEN, "from warren.spec import amqp0_10 as spec010"),
    (STORE_FORBIDDEN, "from warren.broker import queue"),
    (SPARK_FORBIDDEN, "from warren.management.api.common import BROKER"),
    (SPARK_FORBIDDEN, "from warren.store.stream_format import ENTRY_HEADER_SIZE"),
    (CONFIG_FORBIDDEN, "def late():\n    from warren.server.tls import TlsContexts"),
    (FEDERATION_FORBIDDEN, "from warren.management.api.policies import may_change"),
    (HTTP_BASE_FORBIDDEN, "import warren.metrics.collect"),
    (METRICS_FORBIDDEN, "def scrape():\n    from warren.management.api.common import node_name"),
    (CLUSTER_FORBIDDEN, "def nodes():\n    from warren.cluster.node import ClusterNode"),
    (CLUSTER_FORBIDDEN, "import warren.cluster"),
])
def test_each_rule_catches_a_breach(tmp_path, forbidden, breach):
    """A module that breaks the rule, top-level or inside a function, is named by the check."""
    module = tmp_path / "breach.py"
    module.write_text(breach + "\n")
    assert _forbidden(module, forbidden), breach


FLAG_CONSTANT = re.compile(r"^_?[A-Z_]*FLAGS?(_HI)?\s*=\s*(0x[0-9a-fA-F]+|b['\"])", re.M)
FLAGS_PENDING: dict[str, str] = {}


@pytest.mark.parametrize("path", _cases(_modules("broker", "store", "server", "spark", "protocol", "federation",
                                                 "management"), FLAGS_PENDING))
def test_property_flags_are_defined_once_in_the_codec(path):
    """The basic property flags live in ``warren/codec/properties.py``: no module above the
    codec spells one as a literal constant of its own (it imports the codec's)."""
    offenders = [m.group(0) for m in FLAG_CONSTANT.finditer(path.read_text())]
    assert not offenders, offenders


# --- read models, not private fields -----------------------------------------------------------
#
# A module reads another object's state through what that object makes public (a property, an
# ``info()``-like method), never through an attribute whose name starts with ``_`` that the
# module itself does not define (the closest a check without types gets to "another module's
# private attribute"). Private names of the libraries below are theirs to allow.
FOREIGN_PRIVATE_OK = {"os._exit", "sys._getframe", "spark.sparkContext._jvm", "context._jsc",
                      "E._value2member_map_"}
PRIVATE_READS_PENDING: dict[str, str] = {}


def _own_private_names(tree) -> set:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _private_reads(source: str) -> list[str]:
    tree = ast.parse(source)
    own = _own_private_names(tree)
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls"):
            continue
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
            continue
        text = ast.unparse(node)
        if node.attr not in own and text not in FOREIGN_PRIVATE_OK:
            out.append(f"line {node.lineno}: {text}")
    return out


# a compiled twin is imported as a private module (``from warren.codec import _speedups``): the
# names inside it are public
C_TWINS = {"_speedups", "_records", "_messages", "_fsync"}


def _private_imports(source: str) -> list[str]:
    """Names starting with ``_`` that ``from X import`` takes from another module."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__") and alias.name not in C_TWINS:
                    out.append(f"line {node.lineno}: from {node.module} import {alias.name}")
    return out


@pytest.mark.parametrize("path", _cases(_modules(*(p.name for p in ROOT.iterdir() if p.is_dir()
                                                   and not p.name.startswith("__"))), {}))
def test_no_module_imports_another_modules_private_names(path):
    assert not _private_imports(path.read_text())


def test_the_private_import_check_catches_a_breach():
    assert _private_imports("from warren.spread.definitions import queue_owner, _deferred\n") == [
        "line 1: from warren.spread.definitions import _deferred"]
    assert not _private_imports("from warren.codec import _speedups\nfrom __future__ import annotations\n")


@pytest.mark.parametrize("path", _cases(_modules(*(p.name for p in ROOT.iterdir() if p.is_dir()
                                                   and not p.name.startswith("__"))), PRIVATE_READS_PENDING))
def test_no_module_reads_another_modules_private_attributes(path):
    assert not _private_reads(path.read_text())


def test_the_private_read_check_catches_a_breach():
    assert _private_reads("def f(conn):\n    return conn._blocked\n") == ["line 2: conn._blocked"]
    assert not _private_reads("class C:\n    def f(self):\n        return self._x\n")


# --- no import cycle between packages ------------------------------------------------------------

def _package_of(module: str) -> str | None:
    """``warren.broker.queue`` -> ``broker``; a module at the top (``warren.config``) is its own."""
    parts = module.split(".")
    return parts[1] if parts[0] == "warren" and len(parts) > 1 else None


def _package_graph(root: Path) -> dict[str, set[str]]:
    """Which package of ``root`` imports which other (absolute imports, at any depth)."""
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).parts
        source = rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")
        for module in _imports(path):
            target = _package_of(module)
            if target is not None and target != source:
                graph.setdefault(source, set()).add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one package (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycle_between_packages():
    """The field codec lives under the spec (``warren/spec/fields.py``) since session 17: the
    generated 0-8/0-9-1 tables encode with it, and the 0-10 and 1.0 codecs read the spec's tables,
    so codec -> spec is the one direction."""
    assert _cycles(_package_graph(ROOT)) == []


def test_the_cycle_check_catches_a_breach(tmp_path):
    for name, text in (("metrics/collect.py", "from warren.server.connection import AMQPConnection\n"),
                       ("server/server.py", "def late():\n    import warren.metrics.collect\n"),
                       ("broker/queue.py", "")):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _cycles(_package_graph(tmp_path)) == [["metrics", "server"]]


# --- one broker channel, one adapter per protocol family ---------------------------------------
# Where a queue lives is asked of the directory and the queue's handle (warren/broker/directory.py,
# QueueBase and RemoteQueue), never by subclassing a protocol's channel: the classes that extend
# BrokerChannel, directly or not, are the protocols' adapters, one each.
CHANNEL_ADAPTERS = {
    "protocol/amqp0_9_1/channel.py:Channel",  # 0-9-1 and the 0-8 family (dialects.py)
    "protocol/amqp0_10/channel.py:SessionChannel",
    "protocol/amqp1_0/adapter.py:SessionChannel",
    # the owner's side of a connection on another worker: the adapter of the workers' links
    "spread/proxy.py:ProxyChannel",
}


def _channel_classes(root: Path) -> set[str]:
    """Every class under ``root`` that extends BrokerChannel or one of its subclasses (by name)."""
    bases: dict[str, tuple[str, set[str]]] = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = {b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                         if isinstance(b, (ast.Name, ast.Attribute))}
                bases[f"{path.relative_to(root)}:{node.name}"] = (node.name, names)
    found, grew = {"BrokerChannel"}, True
    classes: set[str] = set()
    while grew:
        grew = False
        for where, (name, names) in bases.items():
            if where not in classes and names & found:
                classes.add(where)
                found.add(name)
                grew = True
    return classes


def test_one_channel_adapter_per_protocol_family():
    assert _channel_classes(ROOT) == CHANNEL_ADAPTERS


def test_the_channel_class_check_catches_a_breach(tmp_path):
    (tmp_path / "protocol").mkdir()
    (tmp_path / "protocol/channel.py").write_text("class Channel(BrokerChannel):\n    pass\n")
    (tmp_path / "spread").mkdir()
    (tmp_path / "spread/channel.py").write_text("from x import Channel\nclass SpreadChannel(Lender, Channel):\n"
                                                "    pass\n")
    assert _channel_classes(tmp_path) == {"protocol/channel.py:Channel", "spread/channel.py:SpreadChannel"}


# --- one message container -----------------------------------------------------------------------
# The broker keeps a message's properties as an encoded 0-9-1 property list; what it tests of the
# list's flags is named once, in warren/broker/message.py. No other broker module imports the
# codec's flag constants.
def _flag_imports(path: Path) -> list[str]:
    return [m for m in _imports(path) if m.startswith("warren.codec.properties.") and m.endswith("_FLAG")]


@pytest.mark.parametrize("path", [p for p in _modules("broker") if p.name != "message.py"], ids=_ids)
def test_the_broker_tests_property_flags_through_the_message_container(path):
    assert not _flag_imports(path), f"{path.name} reads the codec's flags; ask warren/broker/message.py"


def test_the_flag_check_catches_a_breach(tmp_path):
    breach = tmp_path / "queue.py"
    breach.write_text("from warren.codec.properties import HEADERS_FLAG, decode_basic_properties\n")
    assert _flag_imports(breach) == ["warren.codec.properties.HEADERS_FLAG"]
