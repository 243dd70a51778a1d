"""Which columns of the data source schema a DataFrame to write has, checked once on the driver.

The checks run when Spark creates the writer, before any task starts: a misspelt column or a
column of the wrong type fails the query at once with a message naming it, instead of failing
every task later.
"""

from __future__ import annotations

from dataclasses import dataclass

from warren.spark.options import WriteOptions
from warren.spark.schema import PROPERTY_FIELDS

__all__ = ["RowLayout", "IGNORED_COLUMNS"]

# columns of the read schema the writer ignores: where and when a message sat in a stream (the
# broker stamps a new one with its own)
IGNORED_COLUMNS = ("offset", "stream", "timestamp")
# flat columns that set one basic property each (over the properties struct's field)
FLAT_PROPERTIES = ("message_id", "content_type")
PROPERTY_TYPES = dict(PROPERTY_FIELDS)
_INTEGRAL = ("byte", "short", "integer", "long")


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
                   ("body", "routing_key", "exchange", "headers", "properties", "property_list", *FLAT_PROPERTIES,
                    *IGNORED_COLUMNS)]
        if unknown:
            raise ValueError(f"the warren writer does not know the column(s) {', '.join(unknown)}: it uses body, "
                             "routing_key, exchange, message_id, content_type, headers, properties and property_list "
                             "(offset, stream "
                             "and timestamp are ignored); "
                             "drop or rename the others")
        if "body" not in fields:
            raise ValueError("the warren writer needs a body column (binary, or string sent as UTF-8)")
        body = fields["body"].typeName()
        if body not in ("binary", "string"):
            raise ValueError(f"the body column must be binary or string, not {body}")
        for name in ("routing_key", "exchange", *FLAT_PROPERTIES):
            if name in fields and fields[name].typeName() != "string":
                raise ValueError(f"the {name} column must be a string, not {fields[name].typeName()}")
        if "property_list" in fields and fields["property_list"].typeName() != "binary":
            raise ValueError(f"the property_list column must be binary (the encoded AMQP property list), "
                             f"not {fields['property_list'].typeName()}")
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
