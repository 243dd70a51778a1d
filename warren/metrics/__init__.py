"""Prometheus metrics: RabbitMQ's ``rabbitmq_prometheus`` names on their own port, plus Warren's own.

``totals`` (node-wide counts that outlive channels and queues) is imported by the broker and
imports nothing; the server side (``server``, ``collect``, ``text``, ``probes``) is imported only
when ``--prometheus-port`` is on. docs/metrics.md lists every metric.
"""
