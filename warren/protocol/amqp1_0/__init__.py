"""AMQP 1.0 over the broker: the sans-IO connection (``connection``, ``session``), its events, the
message mapping (``message``), RabbitMQ's addresses (``addresses``) and the broker adapter
(``adapter``)."""

from warren.protocol.amqp1_0.connection import HEADER_AMQP, HEADER_SASL, ServerConnection

__all__ = ["ServerConnection", "HEADER_AMQP", "HEADER_SASL"]
