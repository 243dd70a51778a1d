"""The columns of the ``warren`` data source, for reading and writing.

Reading gives, by default, flat columns only (``DEFAULT_COLUMNS``): Spark turns an Arrow batch
of flat columns into rows several times faster than one holding a map and a 12-field struct, and
most jobs want only these. The full ``headers`` map and ``properties`` struct are opt-in: the
options ``includeHeaders`` / ``includeProperties``, or a schema given with
``spark.read.schema(...)``, which may name any of ``COLUMNS`` in any order; the reader then
builds only those (a column nobody asked for is never built).

* ``body``: the message body; ``routing_key``, ``exchange``: as published;
* ``offset``, ``stream``: where a stream message sits (null for a drained classic queue);
* ``timestamp``: when the broker appended the message to the stream (millisecond precision;
  null for a drained queue, and over ``transport=amqp``, whose deliveries do not carry it);
* ``message_id``, ``content_type``: the two basic properties most jobs use, flat;
* ``headers``: the AMQP headers table, every value rendered as a string; or, when a read schema
  gives it as ``struct<name: string, ...>``, only the headers named there (null when absent),
  on which filters are pushed down to the broker;
* ``properties``: every other basic property (``PROPERTY_FIELDS``; its ``timestamp`` is the
  publisher's AMQP timestamp property, not the broker's);
* ``property_list``: the basic property list exactly as the publisher encoded it (AMQP 0-9-1
  content-header encoding: flag word, then the present properties; every header keeps its
  field type). ``headers`` and ``properties`` are readable renderings of it; this column is
  what makes an archive lossless: the writer publishes it octet for octet (write/messages.py).
"""

from __future__ import annotations

__all__ = [
    "PROPERTY_FIELDS", "COLUMN_TYPES", "COLUMNS", "DEFAULT_COLUMNS", "SCHEMA_DDL", "FULL_SCHEMA_DDL",
    "read_schema_ddl", "check_read_schema", "spark_type", "named_headers", "LOSSLESS_COLUMNS", "OPT_IN_COLUMNS",
    "columns_ddl",
]

# basic properties other than headers, in the order of the AMQP property list
PROPERTY_FIELDS = (
    ("content_type", "string"), ("content_encoding", "string"), ("delivery_mode", "int"),
    ("priority", "int"), ("correlation_id", "string"), ("reply_to", "string"),
    ("expiration", "string"), ("message_id", "string"), ("timestamp", "timestamp"),
    ("type", "string"), ("user_id", "string"), ("app_id", "string"),
)
PROPERTIES_DDL = "struct<" + ", ".join(f"{n}: {t}" for n, t in PROPERTY_FIELDS) + ">"

# every column a reader can give, in the default order, with its Spark SQL type
COLUMN_TYPES = {
    "body": "binary", "routing_key": "string", "exchange": "string", "offset": "bigint", "stream": "string",
    "timestamp": "timestamp", "message_id": "string", "content_type": "string",
    "headers": "map<string,string>", "properties": PROPERTIES_DDL, "property_list": "binary",
}
COLUMNS = tuple(COLUMN_TYPES)
DEFAULT_COLUMNS = COLUMNS[:8]
OPT_IN_COLUMNS = ("headers", "properties", "property_list")
# what `warren pipeline archive` keeps by default: everything, so that a replay is lossless
LOSSLESS_COLUMNS = COLUMNS


def _ddl(columns) -> str:
    return ", ".join(f"{c} {COLUMN_TYPES[c]}" for c in columns)


SCHEMA_DDL = _ddl(DEFAULT_COLUMNS)
FULL_SCHEMA_DDL = _ddl(COLUMNS)


def read_schema_ddl(include_headers: bool = False, include_properties: bool = False,
                    include_property_list: bool = False) -> str:
    """The default read schema, with the opt-in columns asked for."""
    return _ddl([*DEFAULT_COLUMNS, *(["headers"] if include_headers else []),
                 *(["properties"] if include_properties else []),
                 *(["property_list"] if include_property_list else [])])


def columns_ddl(columns) -> str:
    """The DDL of the named columns (ValueError naming one the source does not give)."""
    names = [c.strip() for c in columns if c.strip()]
    unknown = [c for c in names if c not in COLUMN_TYPES]
    if unknown:
        raise ValueError(f"the warren source has no column {', '.join(map(repr, unknown))}; "
                         f"it gives {', '.join(COLUMNS)}")
    if not names:
        raise ValueError(f"no columns named; the warren source gives {', '.join(COLUMNS)}")
    return _ddl(names)


def spark_type(column: str):
    """The pyspark DataType of a column (built in Python: the worker that plans a read has no JVM
    to parse DDL with)."""
    from pyspark.sql import types as t

    simple = {"binary": t.BinaryType(), "string": t.StringType(), "bigint": t.LongType(), "int": t.IntegerType(),
              "timestamp": t.TimestampType()}
    kind = COLUMN_TYPES[column]
    if column == "headers":
        return t.MapType(t.StringType(), t.StringType(), True)
    if column == "properties":
        return t.StructType([t.StructField(n, simple[k], True) for n, k in PROPERTY_FIELDS])
    return simple[kind]


def named_headers(field) -> tuple[tuple[str, bool], ...] | None:
    """(name, nullable) of each header a ``headers`` column of type ``struct<name: string, ...>``
    names (None for any other type): a read schema may ask for chosen headers as struct fields
    instead of the whole map, and Spark pushes filters on struct fields down (``headers.region
    = 'eu'``), never on map lookups."""
    from pyspark.sql import types as t

    if field.name != "headers" or not isinstance(field.dataType, t.StructType):
        return None
    fields = field.dataType.fields
    if not fields or not all(isinstance(f.dataType, t.StringType) for f in fields):
        return None
    return tuple((f.name, f.nullable) for f in fields)


def check_read_schema(schema) -> tuple[str, ...]:
    """The column names of a read schema (Spark's StructType); ValueError naming a column the
    source cannot give, or a type it cannot give it as."""
    names = []
    for field in schema.fields:
        if field.name not in COLUMN_TYPES:
            raise ValueError(f"the warren source has no column {field.name!r}; it gives {', '.join(COLUMNS)}")
        if named_headers(field) is not None:
            names.append(field.name)
            continue
        if field.dataType != spark_type(field.name):
            also = " (or struct<name: string, ...> of chosen headers)" if field.name == "headers" else ""
            raise ValueError(f"column {field.name} is {COLUMN_TYPES[field.name]}{also} in the warren source, not "
                             f"{field.dataType.simpleString()}")
        names.append(field.name)
    return tuple(names)
