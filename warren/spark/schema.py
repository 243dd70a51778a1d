"""The one row schema of the ``warren`` data source, for reading and writing.

body: the message body; routing_key and exchange as published; headers: the AMQP headers table
with every value rendered as a string; properties: the other basic properties; offset and
stream: where a stream message sits (null for messages not read from a stream).
"""

from __future__ import annotations

__all__ = ["SCHEMA_DDL", "PROPERTY_FIELDS"]

# basic properties other than headers, in the order of the AMQP property list
PROPERTY_FIELDS = (
    ("content_type", "string"), ("content_encoding", "string"), ("delivery_mode", "int"),
    ("priority", "int"), ("correlation_id", "string"), ("reply_to", "string"),
    ("expiration", "string"), ("message_id", "string"), ("timestamp", "timestamp"),
    ("type", "string"), ("user_id", "string"), ("app_id", "string"),
)

SCHEMA_DDL = (
    "body binary, routing_key string, exchange string, headers map<string,string>, "
    "properties struct<" + ", ".join(f"{n}: {t}" for n, t in PROPERTY_FIELDS) + ">, "
    "offset bigint, stream string"
)
