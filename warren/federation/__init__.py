"""Beyond one broker: RabbitMQ's dynamic shovels and federation, run by Warren (docs/federation.md).

* ``uri.py``: AMQP URIs as RabbitMQ parses them;
* ``client.py``: the outgoing AMQP 0-9-1 client (Warren's sans-IO client mode over asyncio);
* ``links.py``: several URIs in turn, back-off, shared helpers;
* ``shovel.py``: shovel definitions (runtime parameters of component ``shovel``) and their runs;
* ``federation.py``: upstreams, upstream sets, federated exchanges and queues by policy;
* ``manager.py``: the parameter store's listener that starts and stops all of them;
* ``api.py``: ``/api/shovels`` and ``/api/federation-links``.

The upstream side of exchange federation, the ``x-federation-upstream`` exchange type, is an
exchange type like the others: ``warren/broker/exchanges/federation_upstream.py``.
Nothing is imported here, so that the broker's modules may import that type cheaply.
"""
