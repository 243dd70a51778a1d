"""AMQP 0-8, Qpid's variant protocol tables.

Generated from amqp0-8.qpid.xml by tools/gen_spec.py; do not edit, run the tool.
"""

# fmt: off
from struct import Struct as _Struct

from warren.spec.fields import (
    decode_shortstr, decode_table, encode_shortstr, encode_table,
)
from warren.spec.base import Method, Properties, tables
from warren.spec.amqp0_8 import (
    ConnectionStart, ConnectionStartOk, ConnectionSecure, ConnectionSecureOk, ConnectionTune,
    ConnectionTuneOk, ConnectionOpen, ConnectionOpenOk, ConnectionRedirect, ConnectionClose,
    ConnectionCloseOk, ChannelOpen, ChannelOpenOk, ChannelFlow, ChannelFlowOk, ChannelAlert,
    ChannelClose, ChannelCloseOk, AccessRequest, AccessRequestOk, ExchangeDeclare,
    ExchangeDeclareOk, ExchangeDelete, ExchangeDeleteOk, QueueDeclare, QueueDeclareOk, QueueBind,
    QueueBindOk, QueuePurge, QueuePurgeOk, QueueDelete, QueueDeleteOk, BasicQos, BasicQosOk,
    BasicCancel, BasicCancelOk, BasicPublish, BasicReturn, BasicDeliver, BasicGet, BasicGetOk,
    BasicGetEmpty, BasicAck, BasicReject, BasicProperties, FileQos, FileQosOk, FileConsume,
    FileConsumeOk, FileCancel, FileCancelOk, FileOpen, FileOpenOk, FileStage, FilePublish,
    FileReturn, FileDeliver, FileAck, FileReject, FileProperties, StreamQos, StreamQosOk,
    StreamConsume, StreamConsumeOk, StreamCancel, StreamCancelOk, StreamPublish, StreamReturn,
    StreamDeliver, StreamProperties, TxSelect, TxSelectOk, TxCommit, TxCommitOk, TxRollback,
    TxRollbackOk, DtxSelect, DtxSelectOk, DtxStart, DtxStartOk, TunnelRequest, TunnelProperties,
    TestInteger, TestIntegerOk, TestString, TestStringOk, TestTable, TestTableOk, TestContent,
    TestContentOk,
)

VERSION = (0, 8, 0)

_H = _Struct('>H')

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_OOB_METHOD = 4
FRAME_OOB_HEADER = 5
FRAME_OOB_BODY = 6
FRAME_TRACE = 7
FRAME_HEARTBEAT = 8
FRAME_MIN_SIZE = 4096
FRAME_END = 206
REPLY_SUCCESS = 200
NOT_DELIVERED = 310  # soft-error
CONTENT_TOO_LARGE = 311  # soft-error
CONNECTION_FORCED = 320  # hard-error
INVALID_PATH = 402  # hard-error
ACCESS_REFUSED = 403  # soft-error
NOT_FOUND = 404  # soft-error
RESOURCE_LOCKED = 405  # soft-error
FRAME_ERROR = 501  # hard-error
SYNTAX_ERROR = 502  # hard-error
COMMAND_INVALID = 503  # hard-error
CHANNEL_ERROR = 504  # hard-error
RESOURCE_ERROR = 506  # hard-error
NOT_ALLOWED = 530  # hard-error
NOT_IMPLEMENTED = 540  # hard-error
INTERNAL_ERROR = 541  # hard-error


class ExchangeBound(Method):
    __slots__ = ('exchange', 'routing_key', 'queue', )
    NAME = 'exchange.bound'
    CLASS_ID = 40
    METHOD_ID = 22
    INDEX = 0x00280016
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('exchange', 'shortstr'), ('routing_key', 'shortstr'), ('queue', 'shortstr'), )

    def __init__(self, exchange='', routing_key='', queue=''):
        self.exchange = exchange
        self.routing_key = routing_key
        self.queue = queue

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        m.queue, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00(\x00\x16',
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
            encode_shortstr(self.queue),
        ))


class ExchangeBoundOk(Method):
    __slots__ = ('reply_code', 'reply_text', )
    NAME = 'exchange.bound-ok'
    CLASS_ID = 40
    METHOD_ID = 23
    INDEX = 0x00280017
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('reply_code', 'short'), ('reply_text', 'shortstr'), )

    def __init__(self, reply_code=0, reply_text=''):
        self.reply_code = reply_code
        self.reply_text = reply_text

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.reply_code,) = _H.unpack_from(buf, off)
        off += 2
        m.reply_text, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00(\x00\x17',
            _H.pack(self.reply_code),
            encode_shortstr(self.reply_text),
        ))


class BasicConsume(Method):
    __slots__ = ('ticket', 'queue', 'consumer_tag', 'no_local', 'no_ack', 'exclusive', 'nowait', 'arguments', )
    NAME = 'basic.consume'
    CLASS_ID = 60
    METHOD_ID = 20
    INDEX = 0x003C0014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('consumer_tag', 'shortstr'), ('no_local', 'bit'), ('no_ack', 'bit'), ('exclusive', 'bit'), ('nowait', 'bit'), ('arguments', 'table'), )

    def __init__(self, ticket=0, queue='', consumer_tag='', no_local=False, no_ack=False, exclusive=False, nowait=False, arguments=None):
        self.ticket = ticket
        self.queue = queue
        self.consumer_tag = consumer_tag
        self.no_local = no_local
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.nowait = nowait
        self.arguments = {} if arguments is None else arguments

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.queue, off = decode_shortstr(buf, off)
        m.consumer_tag, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.no_local = bool(bits & 1)
        m.no_ack = bool(bits & 2)
        m.exclusive = bool(bits & 4)
        m.nowait = bool(bits & 8)
        m.arguments, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00\x14',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.consumer_tag),
            bytes(((1 if self.no_local else 0) | (2 if self.no_ack else 0) | (4 if self.exclusive else 0) | (8 if self.nowait else 0),)),
            encode_table(self.arguments),
        ))


class BasicConsumeOk(Method):
    __slots__ = ('consumer_tag', )
    NAME = 'basic.consume-ok'
    CLASS_ID = 60
    METHOD_ID = 21
    INDEX = 0x003C0015
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('consumer_tag', 'shortstr'), )

    def __init__(self, consumer_tag=''):
        self.consumer_tag = consumer_tag

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.consumer_tag, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00\x15',
            encode_shortstr(self.consumer_tag),
        ))


class BasicRecover(Method):
    __slots__ = ('requeue', )
    NAME = 'basic.recover'
    CLASS_ID = 60
    METHOD_ID = 100
    INDEX = 0x003C0064
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
            b'\x00<\x00d',
            bytes(((1 if self.requeue else 0),)),
        ))


class BasicRecoverOk(Method):
    __slots__ = ()
    NAME = 'basic.recover-ok'
    CLASS_ID = 60
    METHOD_ID = 101
    INDEX = 0x003C0065
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00<\x00e'


# METHODS: class_id << 16 | method_id -> method class; PROPERTIES: class id -> properties
# class; CLASS_IDS: class name -> id (of every class defined or imported above)
METHODS, PROPERTIES, CLASS_IDS = tables(globals())
