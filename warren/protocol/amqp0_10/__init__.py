"""AMQP 0-10, sans-IO: the session layer shared by both roles (``session``), the server side
(``connection.ServerConnection``), client mode for the tests (``client.ClientConnection``) and
the events they hand out (``events``). The wire format is ``warren.codec.amqp0_10``; the tables
``warren.spec.amqp0_10``. docs/versions.md (AMQP 0-10) describes the model and the event
interface a broker adapter maps onto broker operations.
"""
