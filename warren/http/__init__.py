"""The HTTP base that the management API (warren/management) and the Prometheus endpoint
(warren/metrics) share, so that neither imports the other: time and size limits on every
connection and request (limits.py) and the listening site that applies them (site.py)."""
