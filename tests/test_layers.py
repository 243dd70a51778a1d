"""The protocol core stays sans-IO: warren.codec, warren.protocol and warren.spec import no
asyncio, socket or ssl, and nothing from the broker, server or store layers above them."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "warren"
FORBIDDEN = ("asyncio", "socket", "ssl", "selectors", "warren.server", "warren.broker", "warren.store")


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.mark.parametrize("path", sorted(p for d in ("codec", "protocol", "spec") for p in (ROOT / d).rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_sans_io_module_imports_no_io_and_no_upper_layer(path):
    bad = [m for m in _imports(path) if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert not bad, f"{path.name} imports {bad}"


# The Spark data source runs in Spark's Python workers, far from any broker: it may use the
# sans-IO codec and protocol layers, never the broker's internals (what it needs from there,
# property-list edits and header names, lives in warren/codec).
SPARK_FORBIDDEN = ("warren.broker", "warren.server", "warren.management")


@pytest.mark.parametrize("path", sorted([*(ROOT / "spark").rglob("*.py"), *(ROOT.parent / "pyspark_warren").rglob("*.py")]),
                         ids=lambda p: str(p.relative_to(ROOT.parent)))
def test_spark_imports_nothing_from_the_broker(path):
    bad = [m for m in _imports(path) if any(m == f or m.startswith(f + ".") for f in SPARK_FORBIDDEN)]
    assert not bad, f"{path.name} imports {bad}"
