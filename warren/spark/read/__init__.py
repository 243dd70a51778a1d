"""Reading with the ``warren`` source: stream queues by offset (bulk HTTP or AMQP) and ``mode=drain``."""
