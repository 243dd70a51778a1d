"""Warren's HTTP API: stream records in bulk (for readers such as the Spark data source) and a
few read-only views of the broker, served by aiohttp on the broker's own event loop.

``app.py`` builds the aiohttp application over any object shaped like ``Broker`` (``vhosts``
and ``users``), which is how the tests drive it without a server; ``runner.py`` starts and
stops it for ``Server``. docs/stream-storage.md has the reference.
"""

from warren.management.app import RECORDS_CONTENT_TYPE, build_app
from warren.management.runner import HttpServer

__all__ = ["build_app", "HttpServer", "RECORDS_CONTENT_TYPE"]
