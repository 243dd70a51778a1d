"""Warren: an AMQP 0-9-1 (with RabbitMQ's extensions) message broker written in Python."""

__version__ = "0.1.0"
__all__ = ["__version__"]
