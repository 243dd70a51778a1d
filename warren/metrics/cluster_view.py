"""``/metrics/cluster``: every running node's aggregated families (``/metrics``) in one answer.

Each node renders its own ``/metrics`` text; the node scraped asks the others for theirs over the
inter-node links (warren/metrics/server.py, ``cluster_texts``) and merges them here: one HELP and
TYPE header per family, then the samples of every node under it, each carrying a
``rabbitmq_node`` label naming its node, so no two nodes' samples are the same series. A text is
a few hundred lines whatever the number of queues (the queue families are sums), so parsing it
back is cheap.

``rabbitmq_identity_info`` names its node already (``rabbitmq_node``): its samples are kept as
they are. The answer ends with ``warren_cluster_metrics_nodes``: 1 for each node whose figures
it holds, 0 for a node of the cluster left out (down, no answer within the links' bound, or no
Prometheus port), so a dashboard can tell a missing node from an idle one.
"""

from __future__ import annotations

from typing import Iterator

from warren.metrics.text import escape_label, header

__all__ = ["merge_nodes", "NODE_LABEL", "NODES_FAMILY"]

NODE_LABEL = "rabbitmq_node"
NODES_FAMILY = "warren_cluster_metrics_nodes"
# families whose samples carry the node's name already
NAMED_FAMILIES = frozenset({"rabbitmq_identity_info"})


class _Family:
    __slots__ = ("header", "samples")

    def __init__(self) -> None:
        self.header: list[str] = []  # its # HELP and # TYPE lines, from the first node that has it
        self.samples: list[str] = []


def _with_node(line: str, label: str) -> str:
    """Sample ``line`` with ``label`` (``rabbitmq_node="..."``) as its first label."""
    name_end = len(line)
    for stop in ("{", " "):
        at = line.find(stop)
        if at != -1 and at < name_end:
            name_end = at
    rest = line[name_end:]
    if rest.startswith("{"):
        return f"{line[:name_end]}{{{label}{'' if rest.startswith('{}') else ','}{rest[1:]}"
    return f"{line[:name_end]}{{{label}}}{rest}"


def _add_node(families: dict[str, _Family], node: str, text: str) -> None:
    """Fold ``node``'s exposition ``text`` into ``families`` (name -> _Family, in first-seen order)."""
    label = f'{NODE_LABEL}="{escape_label(node)}"'
    family = None
    named = False
    fresh = False  # its header comes from this text
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
                continue  # another comment: Prometheus ignores it
            name = parts[2]
            if family is None or name not in families or families[name] is not family:
                fresh = name not in families
                family = families.setdefault(name, _Family())
                named = name in NAMED_FAMILIES
            if fresh:
                family.header.append(line)
            continue
        if family is None:  # a sample before any header: a family of its own, untyped
            family = families.setdefault("", _Family())
            named = False
        family.samples.append(line if named else _with_node(line, label))


def merge_nodes(texts: list[tuple[str, str]], left_out: list[str]) -> Iterator[str]:
    """The merged exposition of ``texts`` ((node name, its /metrics text)), a family at a time,
    then ``warren_cluster_metrics_nodes``: 1 for each node of ``texts``, 0 for each of ``left_out``."""
    families: dict[str, _Family] = {}
    for node, text in sorted(texts):
        _add_node(families, node, text)
    for family in families.values():
        yield "".join(f"{line}\n" for line in (*family.header, *family.samples))
    nodes = [(node, 1) for node, _ in sorted(texts)] + [(node, 0) for node in sorted(left_out)]
    yield (header(NODES_FAMILY, "gauge", "Nodes of the cluster in this answer (1), or left out of it (0): "
                  "not running, no answer in time, or no Prometheus port")
           + "".join(f'{NODES_FAMILY}{{{NODE_LABEL}="{escape_label(node)}"}} {value}\n' for node, value in nodes))
