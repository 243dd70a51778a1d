"""The node of two workers in one vhost (`--worker-mode queues`) that tests/e2e/test_spread.py starts."""

from tests.e2e.test_spread import node  # noqa: F401 (a fixture, for tests/spread/test_dtx.py)
