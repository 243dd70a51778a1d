"""The property-list edits the broker's features use; they live in ``warren/codec/property_edits.py``
(sans-IO, shared with the Spark reader) and are re-exported here for the broker's modules."""

from warren.codec.property_edits import REPLY_TO_FLAG, headers_span, remove_header, replace_header, replace_reply_to

__all__ = ["headers_span", "remove_header", "replace_header", "replace_reply_to", "REPLY_TO_FLAG"]
