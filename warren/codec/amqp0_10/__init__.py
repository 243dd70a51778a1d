"""AMQP 0-10 wire format, sans-IO: frames and assemblies (``frames``), types, structs, controls
and commands (``types``), sequence sets (``sets``); ``DecodeError`` is the only error a decoder
raises (``errors``). The tables come from ``warren/spec/amqp0_10.py``; the session and
connection layer that uses them is ``warren.protocol.amqp0_10``.

0-10 has its own package beside the 0-8 family's ``frames.py``/``fields.py`` because nothing of
their wire format carries over (another frame header, typed values with type codes instead of
field-table tags, packed structs); what it shares with them is the rule of this layer: bytes in,
values out, no I/O.
"""
