"""AMQP 0-9 protocol tables.

Generated from amqp0-9.xml by tools/gen_spec.py; do not edit, run the tool.
"""

# fmt: off
from struct import Struct as _Struct

from warren.spec.fields import (
    decode_content, decode_longstr, decode_shortstr, decode_table, encode_content, encode_longstr, encode_shortstr, encode_table,
)
from warren.spec.base import Method, Properties, tables
from warren.spec.amqp0_8 import (
    ConnectionStart, ConnectionStartOk, ConnectionSecure, ConnectionSecureOk, ConnectionTune,
    ConnectionTuneOk, ConnectionOpen, ConnectionOpenOk, ChannelFlow, ChannelFlowOk, ChannelClose,
    ChannelCloseOk, AccessRequest, AccessRequestOk, ExchangeDeclare, ExchangeDeclareOk,
    ExchangeDelete, ExchangeDeleteOk, QueueDeclare, QueueDeclareOk, QueueBind, QueueBindOk,
    QueuePurge, QueuePurgeOk, QueueDelete, QueueDeleteOk, BasicQos, BasicQosOk, BasicCancel,
    BasicCancelOk, BasicPublish, BasicReturn, BasicDeliver, BasicGet, BasicGetOk, BasicGetEmpty,
    BasicAck, BasicReject, BasicRecover, BasicProperties, FileQos, FileQosOk, FileCancel,
    FileCancelOk, FileOpen, FileOpenOk, FileStage, FilePublish, FileReturn, FileDeliver, FileAck,
    FileReject, FileProperties, StreamQos, StreamQosOk, StreamCancel, StreamCancelOk, StreamPublish,
    StreamReturn, StreamDeliver, StreamProperties, TxSelect, TxSelectOk, TxCommit, TxCommitOk,
    TxRollback, TxRollbackOk, DtxSelect, DtxSelectOk, DtxStart, DtxStartOk, TunnelRequest,
    TunnelProperties,
)

VERSION = (0, 9, 0)

_H = _Struct('>H')
_HH = _Struct('>HH')
_IH = _Struct('>IH')
_Q = _Struct('>Q')
_QBQBQ = _Struct('>QBQBQ')

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
NO_ROUTE = 312  # soft-error
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
RESOURCE_ERROR = 506  # hard-error
NOT_ALLOWED = 530  # hard-error
NOT_IMPLEMENTED = 540  # hard-error
INTERNAL_ERROR = 541  # hard-error


class ConnectionRedirect(Method):
    __slots__ = ('host', 'known_hosts', )
    NAME = 'connection.redirect'
    CLASS_ID = 10
    METHOD_ID = 42
    INDEX = 0x000A002A
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('host', 'shortstr'), ('known_hosts', 'shortstr'), )

    def __init__(self, host='', known_hosts=''):
        self.host = host
        self.known_hosts = known_hosts

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.host, off = decode_shortstr(buf, off)
        m.known_hosts, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\n\x00*',
            encode_shortstr(self.host),
            encode_shortstr(self.known_hosts),
        ))


class ConnectionClose(Method):
    __slots__ = ('reply_code', 'reply_text', 'class_id', 'method_id', )
    NAME = 'connection.close'
    CLASS_ID = 10
    METHOD_ID = 50
    INDEX = 0x000A0032
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('reply_code', 'short'), ('reply_text', 'shortstr'), ('class_id', 'short'), ('method_id', 'short'), )

    def __init__(self, reply_code=0, reply_text='', class_id=0, method_id=0):
        self.reply_code = reply_code
        self.reply_text = reply_text
        self.class_id = class_id
        self.method_id = method_id

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.reply_code,) = _H.unpack_from(buf, off)
        off += 2
        m.reply_text, off = decode_shortstr(buf, off)
        (m.class_id, m.method_id,) = _HH.unpack_from(buf, off)
        off += 4
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\n\x002',
            _H.pack(self.reply_code),
            encode_shortstr(self.reply_text),
            _HH.pack(self.class_id, self.method_id),
        ))


class ConnectionCloseOk(Method):
    __slots__ = ()
    NAME = 'connection.close-ok'
    CLASS_ID = 10
    METHOD_ID = 51
    INDEX = 0x000A0033
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00\n\x003'


class ChannelOpen(Method):
    __slots__ = ('out_of_band', )
    NAME = 'channel.open'
    CLASS_ID = 20
    METHOD_ID = 10
    INDEX = 0x0014000A
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('out_of_band', 'shortstr'), )

    def __init__(self, out_of_band=''):
        self.out_of_band = out_of_band

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.out_of_band, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\x14\x00\n',
            encode_shortstr(self.out_of_band),
        ))


class ChannelOpenOk(Method):
    __slots__ = ('channel_id', )
    NAME = 'channel.open-ok'
    CLASS_ID = 20
    METHOD_ID = 11
    INDEX = 0x0014000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('channel_id', 'longstr'), )

    def __init__(self, channel_id=b''):
        self.channel_id = channel_id

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.channel_id, off = decode_longstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\x14\x00\x0b',
            encode_longstr(self.channel_id),
        ))


class ChannelResume(Method):
    __slots__ = ('channel_id', )
    NAME = 'channel.resume'
    CLASS_ID = 20
    METHOD_ID = 50
    INDEX = 0x00140032
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('channel_id', 'longstr'), )

    def __init__(self, channel_id=b''):
        self.channel_id = channel_id

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.channel_id, off = decode_longstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\x14\x002',
            encode_longstr(self.channel_id),
        ))


class ChannelPing(Method):
    __slots__ = ()
    NAME = 'channel.ping'
    CLASS_ID = 20
    METHOD_ID = 60
    INDEX = 0x0014003C
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00\x14\x00<'


class ChannelPong(Method):
    __slots__ = ()
    NAME = 'channel.pong'
    CLASS_ID = 20
    METHOD_ID = 70
    INDEX = 0x00140046
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00\x14\x00F'


class ChannelOk(Method):
    __slots__ = ()
    NAME = 'channel.ok'
    CLASS_ID = 20
    METHOD_ID = 80
    INDEX = 0x00140050
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00\x14\x00P'


class QueueUnbind(Method):
    __slots__ = ('ticket', 'queue', 'exchange', 'routing_key', 'arguments', )
    NAME = 'queue.unbind'
    CLASS_ID = 50
    METHOD_ID = 50
    INDEX = 0x00320032
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), ('arguments', 'table'), )

    def __init__(self, ticket=0, queue='', exchange='', routing_key='', arguments=None):
        self.ticket = ticket
        self.queue = queue
        self.exchange = exchange
        self.routing_key = routing_key
        self.arguments = {} if arguments is None else arguments

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.queue, off = decode_shortstr(buf, off)
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        m.arguments, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x002\x002',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
            encode_table(self.arguments),
        ))


class QueueUnbindOk(Method):
    __slots__ = ()
    NAME = 'queue.unbind-ok'
    CLASS_ID = 50
    METHOD_ID = 51
    INDEX = 0x00320033
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x002\x003'


class BasicConsume(Method):
    __slots__ = ('ticket', 'queue', 'consumer_tag', 'no_local', 'no_ack', 'exclusive', 'nowait', 'filter', )
    NAME = 'basic.consume'
    CLASS_ID = 60
    METHOD_ID = 20
    INDEX = 0x003C0014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('consumer_tag', 'shortstr'), ('no_local', 'bit'), ('no_ack', 'bit'), ('exclusive', 'bit'), ('nowait', 'bit'), ('filter', 'table'), )

    def __init__(self, ticket=0, queue='', consumer_tag='', no_local=False, no_ack=False, exclusive=False, nowait=False, filter=None):
        self.ticket = ticket
        self.queue = queue
        self.consumer_tag = consumer_tag
        self.no_local = no_local
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.nowait = nowait
        self.filter = {} if filter is None else filter

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
        m.filter, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00\x14',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.consumer_tag),
            bytes(((1 if self.no_local else 0) | (2 if self.no_ack else 0) | (4 if self.exclusive else 0) | (8 if self.nowait else 0),)),
            encode_table(self.filter),
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


class FileConsume(Method):
    __slots__ = ('ticket', 'queue', 'consumer_tag', 'no_local', 'no_ack', 'exclusive', 'nowait', 'filter', )
    NAME = 'file.consume'
    CLASS_ID = 70
    METHOD_ID = 20
    INDEX = 0x00460014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('consumer_tag', 'shortstr'), ('no_local', 'bit'), ('no_ack', 'bit'), ('exclusive', 'bit'), ('nowait', 'bit'), ('filter', 'table'), )

    def __init__(self, ticket=0, queue='', consumer_tag='', no_local=False, no_ack=False, exclusive=False, nowait=False, filter=None):
        self.ticket = ticket
        self.queue = queue
        self.consumer_tag = consumer_tag
        self.no_local = no_local
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.nowait = nowait
        self.filter = {} if filter is None else filter

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
        m.filter, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00F\x00\x14',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.consumer_tag),
            bytes(((1 if self.no_local else 0) | (2 if self.no_ack else 0) | (4 if self.exclusive else 0) | (8 if self.nowait else 0),)),
            encode_table(self.filter),
        ))


class FileConsumeOk(Method):
    __slots__ = ('consumer_tag', )
    NAME = 'file.consume-ok'
    CLASS_ID = 70
    METHOD_ID = 21
    INDEX = 0x00460015
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
            b'\x00F\x00\x15',
            encode_shortstr(self.consumer_tag),
        ))


class StreamConsume(Method):
    __slots__ = ('ticket', 'queue', 'consumer_tag', 'no_local', 'exclusive', 'nowait', 'filter', )
    NAME = 'stream.consume'
    CLASS_ID = 80
    METHOD_ID = 20
    INDEX = 0x00500014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('consumer_tag', 'shortstr'), ('no_local', 'bit'), ('exclusive', 'bit'), ('nowait', 'bit'), ('filter', 'table'), )

    def __init__(self, ticket=0, queue='', consumer_tag='', no_local=False, exclusive=False, nowait=False, filter=None):
        self.ticket = ticket
        self.queue = queue
        self.consumer_tag = consumer_tag
        self.no_local = no_local
        self.exclusive = exclusive
        self.nowait = nowait
        self.filter = {} if filter is None else filter

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
        m.exclusive = bool(bits & 2)
        m.nowait = bool(bits & 4)
        m.filter, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00P\x00\x14',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.consumer_tag),
            bytes(((1 if self.no_local else 0) | (2 if self.exclusive else 0) | (4 if self.nowait else 0),)),
            encode_table(self.filter),
        ))


class StreamConsumeOk(Method):
    __slots__ = ('consumer_tag', )
    NAME = 'stream.consume-ok'
    CLASS_ID = 80
    METHOD_ID = 21
    INDEX = 0x00500015
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
            b'\x00P\x00\x15',
            encode_shortstr(self.consumer_tag),
        ))


class MessageTransfer(Method):
    __slots__ = ('ticket', 'destination', 'redelivered', 'immediate', 'ttl', 'priority', 'timestamp', 'delivery_mode', 'expiration', 'exchange', 'routing_key', 'message_id', 'correlation_id', 'reply_to', 'content_type', 'content_encoding', 'user_id', 'app_id', 'transaction_id', 'security_token', 'application_headers', 'body', )
    NAME = 'message.transfer'
    CLASS_ID = 120
    METHOD_ID = 10
    INDEX = 0x0078000A
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('destination', 'shortstr'), ('redelivered', 'bit'), ('immediate', 'bit'), ('ttl', 'longlong'), ('priority', 'octet'), ('timestamp', 'timestamp'), ('delivery_mode', 'octet'), ('expiration', 'timestamp'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), ('message_id', 'shortstr'), ('correlation_id', 'shortstr'), ('reply_to', 'shortstr'), ('content_type', 'shortstr'), ('content_encoding', 'shortstr'), ('user_id', 'shortstr'), ('app_id', 'shortstr'), ('transaction_id', 'shortstr'), ('security_token', 'longstr'), ('application_headers', 'table'), ('body', 'content'), )

    def __init__(self, ticket=0, destination='', redelivered=False, immediate=False, ttl=0, priority=0, timestamp=0, delivery_mode=0, expiration=0, exchange='', routing_key='', message_id='', correlation_id='', reply_to='', content_type='', content_encoding='', user_id='', app_id='', transaction_id='', security_token=b'', application_headers=None, body=(0, b'')):
        self.ticket = ticket
        self.destination = destination
        self.redelivered = redelivered
        self.immediate = immediate
        self.ttl = ttl
        self.priority = priority
        self.timestamp = timestamp
        self.delivery_mode = delivery_mode
        self.expiration = expiration
        self.exchange = exchange
        self.routing_key = routing_key
        self.message_id = message_id
        self.correlation_id = correlation_id
        self.reply_to = reply_to
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.user_id = user_id
        self.app_id = app_id
        self.transaction_id = transaction_id
        self.security_token = security_token
        self.application_headers = {} if application_headers is None else application_headers
        self.body = body

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.destination, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.redelivered = bool(bits & 1)
        m.immediate = bool(bits & 2)
        (m.ttl, m.priority, m.timestamp, m.delivery_mode, m.expiration,) = _QBQBQ.unpack_from(buf, off)
        off += 26
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        m.message_id, off = decode_shortstr(buf, off)
        m.correlation_id, off = decode_shortstr(buf, off)
        m.reply_to, off = decode_shortstr(buf, off)
        m.content_type, off = decode_shortstr(buf, off)
        m.content_encoding, off = decode_shortstr(buf, off)
        m.user_id, off = decode_shortstr(buf, off)
        m.app_id, off = decode_shortstr(buf, off)
        m.transaction_id, off = decode_shortstr(buf, off)
        m.security_token, off = decode_longstr(buf, off)
        m.application_headers, off = decode_table(buf, off)
        m.body, off = decode_content(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00\n',
            _H.pack(self.ticket),
            encode_shortstr(self.destination),
            bytes(((1 if self.redelivered else 0) | (2 if self.immediate else 0),)),
            _QBQBQ.pack(self.ttl, self.priority, self.timestamp, self.delivery_mode, self.expiration),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
            encode_shortstr(self.message_id),
            encode_shortstr(self.correlation_id),
            encode_shortstr(self.reply_to),
            encode_shortstr(self.content_type),
            encode_shortstr(self.content_encoding),
            encode_shortstr(self.user_id),
            encode_shortstr(self.app_id),
            encode_shortstr(self.transaction_id),
            encode_longstr(self.security_token),
            encode_table(self.application_headers),
            encode_content(self.body),
        ))


class MessageConsume(Method):
    __slots__ = ('ticket', 'queue', 'destination', 'no_local', 'no_ack', 'exclusive', 'filter', )
    NAME = 'message.consume'
    CLASS_ID = 120
    METHOD_ID = 20
    INDEX = 0x00780014
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('destination', 'shortstr'), ('no_local', 'bit'), ('no_ack', 'bit'), ('exclusive', 'bit'), ('filter', 'table'), )

    def __init__(self, ticket=0, queue='', destination='', no_local=False, no_ack=False, exclusive=False, filter=None):
        self.ticket = ticket
        self.queue = queue
        self.destination = destination
        self.no_local = no_local
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.filter = {} if filter is None else filter

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.queue, off = decode_shortstr(buf, off)
        m.destination, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.no_local = bool(bits & 1)
        m.no_ack = bool(bits & 2)
        m.exclusive = bool(bits & 4)
        m.filter, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00\x14',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.destination),
            bytes(((1 if self.no_local else 0) | (2 if self.no_ack else 0) | (4 if self.exclusive else 0),)),
            encode_table(self.filter),
        ))


class MessageCancel(Method):
    __slots__ = ('destination', )
    NAME = 'message.cancel'
    CLASS_ID = 120
    METHOD_ID = 30
    INDEX = 0x0078001E
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('destination', 'shortstr'), )

    def __init__(self, destination=''):
        self.destination = destination

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.destination, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00\x1e',
            encode_shortstr(self.destination),
        ))


class MessageGet(Method):
    __slots__ = ('ticket', 'queue', 'destination', 'no_ack', )
    NAME = 'message.get'
    CLASS_ID = 120
    METHOD_ID = 40
    INDEX = 0x00780028
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('destination', 'shortstr'), ('no_ack', 'bit'), )

    def __init__(self, ticket=0, queue='', destination='', no_ack=False):
        self.ticket = ticket
        self.queue = queue
        self.destination = destination
        self.no_ack = no_ack

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.queue, off = decode_shortstr(buf, off)
        m.destination, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.no_ack = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00(',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.destination),
            bytes(((1 if self.no_ack else 0),)),
        ))


class MessageRecover(Method):
    __slots__ = ('requeue', )
    NAME = 'message.recover'
    CLASS_ID = 120
    METHOD_ID = 50
    INDEX = 0x00780032
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
            b'\x00x\x002',
            bytes(((1 if self.requeue else 0),)),
        ))


class MessageOpen(Method):
    __slots__ = ('reference', )
    NAME = 'message.open'
    CLASS_ID = 120
    METHOD_ID = 60
    INDEX = 0x0078003C
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('reference', 'longstr'), )

    def __init__(self, reference=b''):
        self.reference = reference

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.reference, off = decode_longstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00<',
            encode_longstr(self.reference),
        ))


class MessageClose(Method):
    __slots__ = ('reference', )
    NAME = 'message.close'
    CLASS_ID = 120
    METHOD_ID = 70
    INDEX = 0x00780046
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('reference', 'longstr'), )

    def __init__(self, reference=b''):
        self.reference = reference

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.reference, off = decode_longstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00F',
            encode_longstr(self.reference),
        ))


class MessageAppend(Method):
    __slots__ = ('reference', 'bytes', )
    NAME = 'message.append'
    CLASS_ID = 120
    METHOD_ID = 80
    INDEX = 0x00780050
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('reference', 'longstr'), ('bytes', 'longstr'), )

    def __init__(self, reference=b'', bytes=b''):
        self.reference = reference
        self.bytes = bytes

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.reference, off = decode_longstr(buf, off)
        m.bytes, off = decode_longstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00P',
            encode_longstr(self.reference),
            encode_longstr(self.bytes),
        ))


class MessageCheckpoint(Method):
    __slots__ = ('reference', 'identifier', )
    NAME = 'message.checkpoint'
    CLASS_ID = 120
    METHOD_ID = 90
    INDEX = 0x0078005A
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('reference', 'longstr'), ('identifier', 'shortstr'), )

    def __init__(self, reference=b'', identifier=''):
        self.reference = reference
        self.identifier = identifier

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.reference, off = decode_longstr(buf, off)
        m.identifier, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00Z',
            encode_longstr(self.reference),
            encode_shortstr(self.identifier),
        ))


class MessageResume(Method):
    __slots__ = ('reference', 'identifier', )
    NAME = 'message.resume'
    CLASS_ID = 120
    METHOD_ID = 100
    INDEX = 0x00780064
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('reference', 'longstr'), ('identifier', 'shortstr'), )

    def __init__(self, reference=b'', identifier=''):
        self.reference = reference
        self.identifier = identifier

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.reference, off = decode_longstr(buf, off)
        m.identifier, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00d',
            encode_longstr(self.reference),
            encode_shortstr(self.identifier),
        ))


class MessageQos(Method):
    __slots__ = ('prefetch_size', 'prefetch_count', 'global_', )
    NAME = 'message.qos'
    CLASS_ID = 120
    METHOD_ID = 110
    INDEX = 0x0078006E
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('prefetch_size', 'long'), ('prefetch_count', 'short'), ('global_', 'bit'), )

    def __init__(self, prefetch_size=0, prefetch_count=0, global_=False):
        self.prefetch_size = prefetch_size
        self.prefetch_count = prefetch_count
        self.global_ = global_

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.prefetch_size, m.prefetch_count,) = _IH.unpack_from(buf, off)
        off += 6
        bits = buf[off]
        off += 1
        m.global_ = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00n',
            _IH.pack(self.prefetch_size, self.prefetch_count),
            bytes(((1 if self.global_ else 0),)),
        ))


class MessageOk(Method):
    __slots__ = ()
    NAME = 'message.ok'
    CLASS_ID = 120
    METHOD_ID = 500
    INDEX = 0x007801F4
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00x\x01\xf4'


class MessageEmpty(Method):
    __slots__ = ()
    NAME = 'message.empty'
    CLASS_ID = 120
    METHOD_ID = 510
    INDEX = 0x007801FE
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00x\x01\xfe'


class MessageReject(Method):
    __slots__ = ('code', 'text', )
    NAME = 'message.reject'
    CLASS_ID = 120
    METHOD_ID = 520
    INDEX = 0x00780208
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('code', 'short'), ('text', 'shortstr'), )

    def __init__(self, code=0, text=''):
        self.code = code
        self.text = text

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.code,) = _H.unpack_from(buf, off)
        off += 2
        m.text, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x02\x08',
            _H.pack(self.code),
            encode_shortstr(self.text),
        ))


class MessageOffset(Method):
    __slots__ = ('value', )
    NAME = 'message.offset'
    CLASS_ID = 120
    METHOD_ID = 530
    INDEX = 0x00780212
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('value', 'longlong'), )

    def __init__(self, value=0):
        self.value = value

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.value,) = _Q.unpack_from(buf, off)
        off += 8
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x02\x12',
            _Q.pack(self.value),
        ))


# METHODS: class_id << 16 | method_id -> method class; PROPERTIES: class id -> properties
# class; CLASS_IDS: class name -> id (of every class defined or imported above)
METHODS, PROPERTIES, CLASS_IDS = tables(globals())
