"""The writer's options and the columns it uses, checked once on the driver.

Spark hands options over with lower-cased keys (``routingKey`` arrives as ``routingkey``), so
every key is looked up lower-cased (``option_values``). The checks run when Spark creates the writer, before any
task starts: a misspelt column or a bad option fails the query at once with a message naming
it, instead of failing every task later.
"""

from __future__ import annotations

from dataclasses import dataclass

from warren.broker.dedup import DEFAULT_HEADER
from warren.spark.amqp_link import DEFAULT_URL, parse_url
from warren.spark.option_values import OptionError, bool_option, float_option, int_option, option_map
from warren.spark.publisher import DEFAULT_CONFIRM_TIMEOUT, DEFAULT_WINDOW
from warren.spark.schema import PROPERTY_FIELDS

__all__ = ["WriteOptions", "RowLayout"]

# columns of the data source schema the writer ignores: where a message sat in a stream
IGNORED_COLUMNS = ("offset", "stream")
PROPERTY_TYPES = dict(PROPERTY_FIELDS)
MAX_WRITE_ID = 200
_INTEGRAL = ("byte", "short", "integer", "long")


@dataclass(frozen=True)
class WriteOptions:
    url: str = DEFAULT_URL
    exchange: str | None = None  # None: every row's exchange column
    routing_key: str | None = None  # None: every row's routing_key column
    mandatory: bool = False
    confirm_window: int = DEFAULT_WINDOW
    confirm_timeout: float = DEFAULT_CONFIRM_TIMEOUT
    connect_timeout: float = 10.0
    write_id: str | None = None
    dedup_header: str | None = DEFAULT_HEADER  # None: no deduplication header

    @classmethod
    def from_options(cls, options) -> WriteOptions:
        o = option_map(options)
        url = o.get("url", DEFAULT_URL)
        parse_url(url)  # a bad URL fails here, on the driver
        dedup = o.get("dedupheader", DEFAULT_HEADER)
        write_id = o.get("writeid") or None
        if write_id is not None and len(write_id.encode()) > MAX_WRITE_ID:
            # the id (write id, batch, partition, row) must fit the message-id shortstr
            raise OptionError(f"option writeId: at most {MAX_WRITE_ID} octets, got {len(write_id.encode())}")
        return cls(
            url=url,
            exchange=o.get("exchange"),
            routing_key=o.get("routingkey"),
            mandatory=bool_option(o, "mandatory", False),
            confirm_window=int_option(o, "confirmWindow", DEFAULT_WINDOW),
            confirm_timeout=float_option(o, "confirmTimeout", DEFAULT_CONFIRM_TIMEOUT),
            connect_timeout=float_option(o, "connectTimeout", 10.0),
            write_id=write_id,
            # "" or "none" turns the header off (message_id is still set)
            dedup_header=None if dedup.lower() in ("", "none") else dedup,
        )


@dataclass(frozen=True)
class RowLayout:
    """Which of the schema's columns a DataFrame has, and how to read them."""

    names: tuple[str, ...]  # every column, in order
    body_is_text: bool
    property_fields: tuple[str, ...]  # the properties struct's fields present

    @classmethod
    def from_schema(cls, schema, options: WriteOptions) -> RowLayout:
        fields = {f.name: f.dataType for f in schema.fields}
        unknown = [n for n in fields if n not in
                   ("body", "routing_key", "exchange", "headers", "properties", *IGNORED_COLUMNS)]
        if unknown:
            raise ValueError(f"the warren writer does not know the column(s) {', '.join(unknown)}: it uses body, "
                             "routing_key, exchange, headers and properties (offset and stream are ignored); "
                             "drop or rename the others")
        if "body" not in fields:
            raise ValueError("the warren writer needs a body column (binary, or string sent as UTF-8)")
        body = fields["body"].typeName()
        if body not in ("binary", "string"):
            raise ValueError(f"the body column must be binary or string, not {body}")
        for name in ("routing_key", "exchange"):
            if name in fields and fields[name].typeName() != "string":
                raise ValueError(f"the {name} column must be a string, not {fields[name].typeName()}")
        if options.exchange is None and "exchange" not in fields:
            raise ValueError("say where to publish: the exchange option (\"\" is the default exchange) "
                             "or an exchange column")
        if "headers" in fields:
            headers = fields["headers"]
            if headers.typeName() != "map" or headers.keyType.typeName() != "string":
                raise ValueError(f"the headers column must be a map with string keys, not {headers.simpleString()}")
        props: tuple[str, ...] = ()
        if "properties" in fields:
            struct = fields["properties"]
            if struct.typeName() != "struct":
                raise ValueError(f"the properties column must be a struct, not {struct.simpleString()}")
            for f in struct.fields:
                want = PROPERTY_TYPES.get(f.name)
                if want is None:
                    raise ValueError(f"properties.{f.name} is not a basic property; known: {', '.join(PROPERTY_TYPES)}")
                got = f.dataType.typeName()
                ok = (got in _INTEGRAL if want == "int" else
                      got in ("timestamp", "timestamp_ntz", *_INTEGRAL) if want == "timestamp" else got == "string")
                if not ok:
                    raise ValueError(f"properties.{f.name} must be {want}, not {got}")
            props = tuple(f.name for f in struct.fields)
        return cls(tuple(fields), body == "string", props)
