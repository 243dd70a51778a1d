"""Warren: an AMQP 0-9-1 (with RabbitMQ's extensions) message broker written in Python.

The distribution on PyPI is ``warren-broker`` (``pip install warren-broker``); the import
package and the command are ``warren``. PyPI's distribution named ``warren`` is an unrelated
project that also installs a top-level ``warren`` package, so the two cannot share an
environment: ``warren --version`` and the start-up log name the distribution this package
came from, and both warn when another distribution claims the ``warren`` package
(``other_distributions``).

``__version__`` is the one place the version is written (pyproject.toml reads it from here);
what changed in each version is in CHANGELOG.md.
"""

__version__ = "0.9.0"
DISTRIBUTION = "warren-broker"  # the name on PyPI; `warren` there is someone else's project
__all__ = ["__version__", "DISTRIBUTION", "other_distributions"]


def other_distributions() -> list[str]:
    """The installed distributions other than warren-broker that also provide a top-level
    ``warren`` package (PyPI's unrelated ``warren``, typically): each can overwrite our files."""
    import importlib.metadata

    def canonical(name: str) -> str:
        return name.lower().replace("_", "-").replace(".", "-")

    try:
        providers = importlib.metadata.packages_distributions().get("warren", [])
    except Exception:  # a broken dist-info elsewhere in the environment: nothing to report
        return []
    return sorted({name for name in providers if canonical(name) != DISTRIBUTION})
