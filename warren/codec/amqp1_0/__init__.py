"""AMQP 1.0 wire forms: the type system (``types``) and frames (``frames``)."""

from warren.codec.amqp1_0.frames import FRAME_AMQP, FRAME_SASL, FrameReader, FramingError, encode_frame
from warren.codec.amqp1_0.types import DecodeError, decode, decode_value, encode

__all__ = ["DecodeError", "FramingError", "FrameReader", "FRAME_AMQP", "FRAME_SASL", "encode", "encode_frame",
           "decode", "decode_value"]
