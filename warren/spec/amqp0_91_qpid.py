"""Qpid's AMQP "0-91" protocol tables.

Generated from amqp0-9-1.qpid-stripped.xml by tools/gen_spec.py; do not edit, run the tool.
"""

# fmt: off
from struct import Struct as _Struct

from warren.spec.fields import (
    decode_shortstr, decode_table, encode_shortstr, encode_table,
)
from warren.spec.base import Method, Properties, tables
from warren.spec.amqp0_8 import (
    ConnectionStart, ConnectionStartOk, ConnectionSecure, ConnectionSecureOk, ConnectionTune,
    ConnectionTuneOk, ConnectionOpen, ConnectionOpenOk, ChannelFlow, ChannelFlowOk, ChannelClose,
    ChannelCloseOk, ExchangeDeclare, ExchangeDeclareOk, ExchangeDelete, ExchangeDeleteOk,
    QueueDeclare, QueueDeclareOk, QueueBind, QueueBindOk, QueuePurge, QueuePurgeOk, QueueDelete,
    QueueDeleteOk, BasicQos, BasicQosOk, BasicCancel, BasicCancelOk, BasicPublish, BasicReturn,
    BasicDeliver, BasicGet, BasicGetOk, BasicGetEmpty, BasicAck, BasicReject, BasicRecover,
    TxSelect, TxSelectOk, TxCommit, TxCommitOk, TxRollback, TxRollbackOk,
)
from warren.spec.amqp0_9 import (
    ConnectionClose, ConnectionCloseOk, ChannelOpen, ChannelOpenOk, QueueUnbind, QueueUnbindOk,
)
from warren.spec.amqp0_8_qpid import (
    ExchangeBound, ExchangeBoundOk, BasicConsume, BasicConsumeOk,
)

VERSION = (0, 91, 0)

_B = _Struct('>B')
_H = _Struct('>H')
_Q = _Struct('>Q')

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_MIN_SIZE = 4096
FRAME_END = 206
REPLY_SUCCESS = 200
CONTENT_TOO_LARGE = 311  # soft-error
NO_CONSUMERS = 313  # soft-error
CONNECTION_FORCED = 320  # hard-error
INVALID_PATH = 402  # hard-error
ACCESS_REFUSED = 403  # soft-error
NOT_FOUND = 404  # soft-error
RESOURCE_LOCKED = 405  # soft-error
PRECONDITION_FAILED = 406  # soft-error
FRAME_ERROR = 501  # hard-error
SYNTAX_ERROR = 502  # hard-error
COMMAND_INVALID = 503  # hard-error
CHANNEL_ERROR = 504  # hard-error
UNEXPECTED_FRAME = 505  # hard-error
RESOURCE_ERROR = 506  # hard-error
NOT_ALLOWED = 530  # hard-error
NOT_IMPLEMENTED = 540  # hard-error
INTERNAL_ERROR = 541  # hard-error


class BasicRecoverSync(Method):
    __slots__ = ('requeue', )
    NAME = 'basic.recover-sync'
    CLASS_ID = 60
    METHOD_ID = 110
    INDEX = 0x003C006E
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('requeue', 'bit'), )

    def __init__(self, requeue=False):
        self.requeue = requeue

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        bits = buf[off]
        off += 1
        m.requeue = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00n',
            bytes(((1 if self.requeue else 0),)),
        ))


class BasicRecoverSyncOk(Method):
    __slots__ = ()
    NAME = 'basic.recover-sync-ok'
    CLASS_ID = 60
    METHOD_ID = 111
    INDEX = 0x003C006F
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00<\x00o'


class BasicProperties(Properties):
    __slots__ = ('content_type', 'content_encoding', 'headers', 'delivery_mode', 'priority', 'correlation_id', 'reply_to', 'expiration', 'message_id', 'timestamp', 'type', 'user_id', 'app_id', 'reserved', )
    CLASS_ID = 60
    FIELDS = (('content_type', 'shortstr'), ('content_encoding', 'shortstr'), ('headers', 'table'), ('delivery_mode', 'octet'), ('priority', 'octet'), ('correlation_id', 'shortstr'), ('reply_to', 'shortstr'), ('expiration', 'shortstr'), ('message_id', 'shortstr'), ('timestamp', 'timestamp'), ('type', 'shortstr'), ('user_id', 'shortstr'), ('app_id', 'shortstr'), ('reserved', 'shortstr'), )

    def __init__(self, content_type=None, content_encoding=None, headers=None, delivery_mode=None, priority=None, correlation_id=None, reply_to=None, expiration=None, message_id=None, timestamp=None, type=None, user_id=None, app_id=None, reserved=None):
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.headers = headers
        self.delivery_mode = delivery_mode
        self.priority = priority
        self.correlation_id = correlation_id
        self.reply_to = reply_to
        self.expiration = expiration
        self.message_id = message_id
        self.timestamp = timestamp
        self.type = type
        self.user_id = user_id
        self.app_id = app_id
        self.reserved = reserved

    @classmethod
    def decode(cls, buf, off):
        p = cls.__new__(cls)
        (flags,) = _H.unpack_from(buf, off)
        off += 2
        while (buf[off - 1] & 1):  # a continuation flag word follows; no class here needs it
            off += 2
        if flags & 0x8000:
            p.content_type, off = decode_shortstr(buf, off)
        else:
            p.content_type = None
        if flags & 0x4000:
            p.content_encoding, off = decode_shortstr(buf, off)
        else:
            p.content_encoding = None
        if flags & 0x2000:
            p.headers, off = decode_table(buf, off)
        else:
            p.headers = None
        if flags & 0x1000:
            (p.delivery_mode,) = _B.unpack_from(buf, off)
            off += 1
        else:
            p.delivery_mode = None
        if flags & 0x0800:
            (p.priority,) = _B.unpack_from(buf, off)
            off += 1
        else:
            p.priority = None
        if flags & 0x0400:
            p.correlation_id, off = decode_shortstr(buf, off)
        else:
            p.correlation_id = None
        if flags & 0x0200:
            p.reply_to, off = decode_shortstr(buf, off)
        else:
            p.reply_to = None
        if flags & 0x0100:
            p.expiration, off = decode_shortstr(buf, off)
        else:
            p.expiration = None
        if flags & 0x0080:
            p.message_id, off = decode_shortstr(buf, off)
        else:
            p.message_id = None
        if flags & 0x0040:
            (p.timestamp,) = _Q.unpack_from(buf, off)
            off += 8
        else:
            p.timestamp = None
        if flags & 0x0020:
            p.type, off = decode_shortstr(buf, off)
        else:
            p.type = None
        if flags & 0x0010:
            p.user_id, off = decode_shortstr(buf, off)
        else:
            p.user_id = None
        if flags & 0x0008:
            p.app_id, off = decode_shortstr(buf, off)
        else:
            p.app_id = None
        if flags & 0x0004:
            p.reserved, off = decode_shortstr(buf, off)
        else:
            p.reserved = None
        return p, off

    def encode(self):
        flags = 0
        parts = [b'']
        if self.content_type is not None:
            flags |= 0x8000
            parts.append(encode_shortstr(self.content_type))
        if self.content_encoding is not None:
            flags |= 0x4000
            parts.append(encode_shortstr(self.content_encoding))
        if self.headers is not None:
            flags |= 0x2000
            parts.append(encode_table(self.headers))
        if self.delivery_mode is not None:
            flags |= 0x1000
            parts.append(_B.pack(self.delivery_mode))
        if self.priority is not None:
            flags |= 0x0800
            parts.append(_B.pack(self.priority))
        if self.correlation_id is not None:
            flags |= 0x0400
            parts.append(encode_shortstr(self.correlation_id))
        if self.reply_to is not None:
            flags |= 0x0200
            parts.append(encode_shortstr(self.reply_to))
        if self.expiration is not None:
            flags |= 0x0100
            parts.append(encode_shortstr(self.expiration))
        if self.message_id is not None:
            flags |= 0x0080
            parts.append(encode_shortstr(self.message_id))
        if self.timestamp is not None:
            flags |= 0x0040
            parts.append(_Q.pack(self.timestamp))
        if self.type is not None:
            flags |= 0x0020
            parts.append(encode_shortstr(self.type))
        if self.user_id is not None:
            flags |= 0x0010
            parts.append(encode_shortstr(self.user_id))
        if self.app_id is not None:
            flags |= 0x0008
            parts.append(encode_shortstr(self.app_id))
        if self.reserved is not None:
            flags |= 0x0004
            parts.append(encode_shortstr(self.reserved))
        parts[0] = _H.pack(flags)
        return b''.join(parts)


# METHODS: class_id << 16 | method_id -> method class; PROPERTIES: class id -> properties
# class; CLASS_IDS: class name -> id (of every class defined or imported above)
METHODS, PROPERTIES, CLASS_IDS = tables(globals())
