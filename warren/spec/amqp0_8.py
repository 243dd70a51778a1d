"""AMQP 0-8 protocol tables.

Generated from amqp0-8.xml by tools/gen_spec.py; do not edit, run the tool.
"""

# fmt: off
from struct import Struct as _Struct

from warren.spec.fields import (
    decode_longstr, decode_shortstr, decode_table, encode_longstr, encode_shortstr, encode_table,
)
from warren.spec.base import Method, Properties, tables

VERSION = (0, 8, 0)

_B = _Struct('>B')
_BB = _Struct('>BB')
_BHIQB = _Struct('>BHIQB')
_H = _Struct('>H')
_HH = _Struct('>HH')
_HIH = _Struct('>HIH')
_I = _Struct('>I')
_IH = _Struct('>IH')
_IHI = _Struct('>IHI')
_II = _Struct('>II')
_Q = _Struct('>Q')

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


class ConnectionStart(Method):
    __slots__ = ('version_major', 'version_minor', 'server_properties', 'mechanisms', 'locales', )
    NAME = 'connection.start'
    CLASS_ID = 10
    METHOD_ID = 10
    INDEX = 0x000A000A
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('version_major', 'octet'), ('version_minor', 'octet'), ('server_properties', 'table'), ('mechanisms', 'longstr'), ('locales', 'longstr'), )

    def __init__(self, version_major=0, version_minor=0, server_properties=None, mechanisms=b'', locales=b''):
        self.version_major = version_major
        self.version_minor = version_minor
        self.server_properties = {} if server_properties is None else server_properties
        self.mechanisms = mechanisms
        self.locales = locales

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.version_major, m.version_minor,) = _BB.unpack_from(buf, off)
        off += 2
        m.server_properties, off = decode_table(buf, off)
        m.mechanisms, off = decode_longstr(buf, off)
        m.locales, off = decode_longstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\n\x00\n',
            _BB.pack(self.version_major, self.version_minor),
            encode_table(self.server_properties),
            encode_longstr(self.mechanisms),
            encode_longstr(self.locales),
        ))


class ConnectionStartOk(Method):
    __slots__ = ('client_properties', 'mechanism', 'response', 'locale', )
    NAME = 'connection.start-ok'
    CLASS_ID = 10
    METHOD_ID = 11
    INDEX = 0x000A000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('client_properties', 'table'), ('mechanism', 'shortstr'), ('response', 'longstr'), ('locale', 'shortstr'), )

    def __init__(self, client_properties=None, mechanism='', response=b'', locale=''):
        self.client_properties = {} if client_properties is None else client_properties
        self.mechanism = mechanism
        self.response = response
        self.locale = locale

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.client_properties, off = decode_table(buf, off)
        m.mechanism, off = decode_shortstr(buf, off)
        m.response, off = decode_longstr(buf, off)
        m.locale, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\n\x00\x0b',
            encode_table(self.client_properties),
            encode_shortstr(self.mechanism),
            encode_longstr(self.response),
            encode_shortstr(self.locale),
        ))


class ConnectionSecure(Method):
    __slots__ = ('challenge', )
    NAME = 'connection.secure'
    CLASS_ID = 10
    METHOD_ID = 20
    INDEX = 0x000A0014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('challenge', 'longstr'), )

    def __init__(self, challenge=b''):
        self.challenge = challenge

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.challenge, off = decode_longstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\n\x00\x14',
            encode_longstr(self.challenge),
        ))


class ConnectionSecureOk(Method):
    __slots__ = ('response', )
    NAME = 'connection.secure-ok'
    CLASS_ID = 10
    METHOD_ID = 21
    INDEX = 0x000A0015
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('response', 'longstr'), )

    def __init__(self, response=b''):
        self.response = response

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.response, off = decode_longstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\n\x00\x15',
            encode_longstr(self.response),
        ))


class ConnectionTune(Method):
    __slots__ = ('channel_max', 'frame_max', 'heartbeat', )
    NAME = 'connection.tune'
    CLASS_ID = 10
    METHOD_ID = 30
    INDEX = 0x000A001E
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('channel_max', 'short'), ('frame_max', 'long'), ('heartbeat', 'short'), )

    def __init__(self, channel_max=0, frame_max=0, heartbeat=0):
        self.channel_max = channel_max
        self.frame_max = frame_max
        self.heartbeat = heartbeat

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.channel_max, m.frame_max, m.heartbeat,) = _HIH.unpack_from(buf, off)
        off += 8
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\n\x00\x1e',
            _HIH.pack(self.channel_max, self.frame_max, self.heartbeat),
        ))


class ConnectionTuneOk(Method):
    __slots__ = ('channel_max', 'frame_max', 'heartbeat', )
    NAME = 'connection.tune-ok'
    CLASS_ID = 10
    METHOD_ID = 31
    INDEX = 0x000A001F
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('channel_max', 'short'), ('frame_max', 'long'), ('heartbeat', 'short'), )

    def __init__(self, channel_max=0, frame_max=0, heartbeat=0):
        self.channel_max = channel_max
        self.frame_max = frame_max
        self.heartbeat = heartbeat

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.channel_max, m.frame_max, m.heartbeat,) = _HIH.unpack_from(buf, off)
        off += 8
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\n\x00\x1f',
            _HIH.pack(self.channel_max, self.frame_max, self.heartbeat),
        ))


class ConnectionOpen(Method):
    __slots__ = ('virtual_host', 'capabilities', 'insist', )
    NAME = 'connection.open'
    CLASS_ID = 10
    METHOD_ID = 40
    INDEX = 0x000A0028
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('virtual_host', 'shortstr'), ('capabilities', 'shortstr'), ('insist', 'bit'), )

    def __init__(self, virtual_host='', capabilities='', insist=False):
        self.virtual_host = virtual_host
        self.capabilities = capabilities
        self.insist = insist

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.virtual_host, off = decode_shortstr(buf, off)
        m.capabilities, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.insist = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\n\x00(',
            encode_shortstr(self.virtual_host),
            encode_shortstr(self.capabilities),
            bytes(((1 if self.insist else 0),)),
        ))


class ConnectionOpenOk(Method):
    __slots__ = ('known_hosts', )
    NAME = 'connection.open-ok'
    CLASS_ID = 10
    METHOD_ID = 41
    INDEX = 0x000A0029
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('known_hosts', 'shortstr'), )

    def __init__(self, known_hosts=''):
        self.known_hosts = known_hosts

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.known_hosts, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\n\x00)',
            encode_shortstr(self.known_hosts),
        ))


class ConnectionRedirect(Method):
    __slots__ = ('host', 'known_hosts', )
    NAME = 'connection.redirect'
    CLASS_ID = 10
    METHOD_ID = 50
    INDEX = 0x000A0032
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
            b'\x00\n\x002',
            encode_shortstr(self.host),
            encode_shortstr(self.known_hosts),
        ))


class ConnectionClose(Method):
    __slots__ = ('reply_code', 'reply_text', 'class_id', 'method_id', )
    NAME = 'connection.close'
    CLASS_ID = 10
    METHOD_ID = 60
    INDEX = 0x000A003C
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
            b'\x00\n\x00<',
            _H.pack(self.reply_code),
            encode_shortstr(self.reply_text),
            _HH.pack(self.class_id, self.method_id),
        ))


class ConnectionCloseOk(Method):
    __slots__ = ()
    NAME = 'connection.close-ok'
    CLASS_ID = 10
    METHOD_ID = 61
    INDEX = 0x000A003D
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00\n\x00='


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
    __slots__ = ()
    NAME = 'channel.open-ok'
    CLASS_ID = 20
    METHOD_ID = 11
    INDEX = 0x0014000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00\x14\x00\x0b'


class ChannelFlow(Method):
    __slots__ = ('active', )
    NAME = 'channel.flow'
    CLASS_ID = 20
    METHOD_ID = 20
    INDEX = 0x00140014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('active', 'bit'), )

    def __init__(self, active=False):
        self.active = active

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        bits = buf[off]
        off += 1
        m.active = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\x14\x00\x14',
            bytes(((1 if self.active else 0),)),
        ))


class ChannelFlowOk(Method):
    __slots__ = ('active', )
    NAME = 'channel.flow-ok'
    CLASS_ID = 20
    METHOD_ID = 21
    INDEX = 0x00140015
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('active', 'bit'), )

    def __init__(self, active=False):
        self.active = active

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        bits = buf[off]
        off += 1
        m.active = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\x14\x00\x15',
            bytes(((1 if self.active else 0),)),
        ))


class ChannelAlert(Method):
    __slots__ = ('reply_code', 'reply_text', 'details', )
    NAME = 'channel.alert'
    CLASS_ID = 20
    METHOD_ID = 30
    INDEX = 0x0014001E
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('reply_code', 'short'), ('reply_text', 'shortstr'), ('details', 'table'), )

    def __init__(self, reply_code=0, reply_text='', details=None):
        self.reply_code = reply_code
        self.reply_text = reply_text
        self.details = {} if details is None else details

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.reply_code,) = _H.unpack_from(buf, off)
        off += 2
        m.reply_text, off = decode_shortstr(buf, off)
        m.details, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\x14\x00\x1e',
            _H.pack(self.reply_code),
            encode_shortstr(self.reply_text),
            encode_table(self.details),
        ))


class ChannelClose(Method):
    __slots__ = ('reply_code', 'reply_text', 'class_id', 'method_id', )
    NAME = 'channel.close'
    CLASS_ID = 20
    METHOD_ID = 40
    INDEX = 0x00140028
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
            b'\x00\x14\x00(',
            _H.pack(self.reply_code),
            encode_shortstr(self.reply_text),
            _HH.pack(self.class_id, self.method_id),
        ))


class ChannelCloseOk(Method):
    __slots__ = ()
    NAME = 'channel.close-ok'
    CLASS_ID = 20
    METHOD_ID = 41
    INDEX = 0x00140029
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00\x14\x00)'


class AccessRequest(Method):
    __slots__ = ('realm', 'exclusive', 'passive', 'active', 'write', 'read', )
    NAME = 'access.request'
    CLASS_ID = 30
    METHOD_ID = 10
    INDEX = 0x001E000A
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('realm', 'shortstr'), ('exclusive', 'bit'), ('passive', 'bit'), ('active', 'bit'), ('write', 'bit'), ('read', 'bit'), )

    def __init__(self, realm='', exclusive=False, passive=False, active=False, write=False, read=False):
        self.realm = realm
        self.exclusive = exclusive
        self.passive = passive
        self.active = active
        self.write = write
        self.read = read

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.realm, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.exclusive = bool(bits & 1)
        m.passive = bool(bits & 2)
        m.active = bool(bits & 4)
        m.write = bool(bits & 8)
        m.read = bool(bits & 16)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\x1e\x00\n',
            encode_shortstr(self.realm),
            bytes(((1 if self.exclusive else 0) | (2 if self.passive else 0) | (4 if self.active else 0) | (8 if self.write else 0) | (16 if self.read else 0),)),
        ))


class AccessRequestOk(Method):
    __slots__ = ('ticket', )
    NAME = 'access.request-ok'
    CLASS_ID = 30
    METHOD_ID = 11
    INDEX = 0x001E000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), )

    def __init__(self, ticket=0):
        self.ticket = ticket

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        return m, off

    def encode(self):
        return b''.join((
            b'\x00\x1e\x00\x0b',
            _H.pack(self.ticket),
        ))


class ExchangeDeclare(Method):
    __slots__ = ('ticket', 'exchange', 'type', 'passive', 'durable', 'auto_delete', 'internal', 'nowait', 'arguments', )
    NAME = 'exchange.declare'
    CLASS_ID = 40
    METHOD_ID = 10
    INDEX = 0x0028000A
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('exchange', 'shortstr'), ('type', 'shortstr'), ('passive', 'bit'), ('durable', 'bit'), ('auto_delete', 'bit'), ('internal', 'bit'), ('nowait', 'bit'), ('arguments', 'table'), )

    def __init__(self, ticket=0, exchange='', type='', passive=False, durable=False, auto_delete=False, internal=False, nowait=False, arguments=None):
        self.ticket = ticket
        self.exchange = exchange
        self.type = type
        self.passive = passive
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.nowait = nowait
        self.arguments = {} if arguments is None else arguments

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.exchange, off = decode_shortstr(buf, off)
        m.type, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.passive = bool(bits & 1)
        m.durable = bool(bits & 2)
        m.auto_delete = bool(bits & 4)
        m.internal = bool(bits & 8)
        m.nowait = bool(bits & 16)
        m.arguments, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00(\x00\n',
            _H.pack(self.ticket),
            encode_shortstr(self.exchange),
            encode_shortstr(self.type),
            bytes(((1 if self.passive else 0) | (2 if self.durable else 0) | (4 if self.auto_delete else 0) | (8 if self.internal else 0) | (16 if self.nowait else 0),)),
            encode_table(self.arguments),
        ))


class ExchangeDeclareOk(Method):
    __slots__ = ()
    NAME = 'exchange.declare-ok'
    CLASS_ID = 40
    METHOD_ID = 11
    INDEX = 0x0028000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00(\x00\x0b'


class ExchangeDelete(Method):
    __slots__ = ('ticket', 'exchange', 'if_unused', 'nowait', )
    NAME = 'exchange.delete'
    CLASS_ID = 40
    METHOD_ID = 20
    INDEX = 0x00280014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('exchange', 'shortstr'), ('if_unused', 'bit'), ('nowait', 'bit'), )

    def __init__(self, ticket=0, exchange='', if_unused=False, nowait=False):
        self.ticket = ticket
        self.exchange = exchange
        self.if_unused = if_unused
        self.nowait = nowait

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.exchange, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.if_unused = bool(bits & 1)
        m.nowait = bool(bits & 2)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00(\x00\x14',
            _H.pack(self.ticket),
            encode_shortstr(self.exchange),
            bytes(((1 if self.if_unused else 0) | (2 if self.nowait else 0),)),
        ))


class ExchangeDeleteOk(Method):
    __slots__ = ()
    NAME = 'exchange.delete-ok'
    CLASS_ID = 40
    METHOD_ID = 21
    INDEX = 0x00280015
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00(\x00\x15'


class QueueDeclare(Method):
    __slots__ = ('ticket', 'queue', 'passive', 'durable', 'exclusive', 'auto_delete', 'nowait', 'arguments', )
    NAME = 'queue.declare'
    CLASS_ID = 50
    METHOD_ID = 10
    INDEX = 0x0032000A
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('passive', 'bit'), ('durable', 'bit'), ('exclusive', 'bit'), ('auto_delete', 'bit'), ('nowait', 'bit'), ('arguments', 'table'), )

    def __init__(self, ticket=0, queue='', passive=False, durable=False, exclusive=False, auto_delete=False, nowait=False, arguments=None):
        self.ticket = ticket
        self.queue = queue
        self.passive = passive
        self.durable = durable
        self.exclusive = exclusive
        self.auto_delete = auto_delete
        self.nowait = nowait
        self.arguments = {} if arguments is None else arguments

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.queue, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.passive = bool(bits & 1)
        m.durable = bool(bits & 2)
        m.exclusive = bool(bits & 4)
        m.auto_delete = bool(bits & 8)
        m.nowait = bool(bits & 16)
        m.arguments, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x002\x00\n',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            bytes(((1 if self.passive else 0) | (2 if self.durable else 0) | (4 if self.exclusive else 0) | (8 if self.auto_delete else 0) | (16 if self.nowait else 0),)),
            encode_table(self.arguments),
        ))


class QueueDeclareOk(Method):
    __slots__ = ('queue', 'message_count', 'consumer_count', )
    NAME = 'queue.declare-ok'
    CLASS_ID = 50
    METHOD_ID = 11
    INDEX = 0x0032000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('queue', 'shortstr'), ('message_count', 'long'), ('consumer_count', 'long'), )

    def __init__(self, queue='', message_count=0, consumer_count=0):
        self.queue = queue
        self.message_count = message_count
        self.consumer_count = consumer_count

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.queue, off = decode_shortstr(buf, off)
        (m.message_count, m.consumer_count,) = _II.unpack_from(buf, off)
        off += 8
        return m, off

    def encode(self):
        return b''.join((
            b'\x002\x00\x0b',
            encode_shortstr(self.queue),
            _II.pack(self.message_count, self.consumer_count),
        ))


class QueueBind(Method):
    __slots__ = ('ticket', 'queue', 'exchange', 'routing_key', 'nowait', 'arguments', )
    NAME = 'queue.bind'
    CLASS_ID = 50
    METHOD_ID = 20
    INDEX = 0x00320014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), ('nowait', 'bit'), ('arguments', 'table'), )

    def __init__(self, ticket=0, queue='', exchange='', routing_key='', nowait=False, arguments=None):
        self.ticket = ticket
        self.queue = queue
        self.exchange = exchange
        self.routing_key = routing_key
        self.nowait = nowait
        self.arguments = {} if arguments is None else arguments

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.queue, off = decode_shortstr(buf, off)
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.nowait = bool(bits & 1)
        m.arguments, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x002\x00\x14',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
            bytes(((1 if self.nowait else 0),)),
            encode_table(self.arguments),
        ))


class QueueBindOk(Method):
    __slots__ = ()
    NAME = 'queue.bind-ok'
    CLASS_ID = 50
    METHOD_ID = 21
    INDEX = 0x00320015
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x002\x00\x15'


class QueuePurge(Method):
    __slots__ = ('ticket', 'queue', 'nowait', )
    NAME = 'queue.purge'
    CLASS_ID = 50
    METHOD_ID = 30
    INDEX = 0x0032001E
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('nowait', 'bit'), )

    def __init__(self, ticket=0, queue='', nowait=False):
        self.ticket = ticket
        self.queue = queue
        self.nowait = nowait

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.queue, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.nowait = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x002\x00\x1e',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            bytes(((1 if self.nowait else 0),)),
        ))


class QueuePurgeOk(Method):
    __slots__ = ('message_count', )
    NAME = 'queue.purge-ok'
    CLASS_ID = 50
    METHOD_ID = 31
    INDEX = 0x0032001F
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('message_count', 'long'), )

    def __init__(self, message_count=0):
        self.message_count = message_count

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.message_count,) = _I.unpack_from(buf, off)
        off += 4
        return m, off

    def encode(self):
        return b''.join((
            b'\x002\x00\x1f',
            _I.pack(self.message_count),
        ))


class QueueDelete(Method):
    __slots__ = ('ticket', 'queue', 'if_unused', 'if_empty', 'nowait', )
    NAME = 'queue.delete'
    CLASS_ID = 50
    METHOD_ID = 40
    INDEX = 0x00320028
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('if_unused', 'bit'), ('if_empty', 'bit'), ('nowait', 'bit'), )

    def __init__(self, ticket=0, queue='', if_unused=False, if_empty=False, nowait=False):
        self.ticket = ticket
        self.queue = queue
        self.if_unused = if_unused
        self.if_empty = if_empty
        self.nowait = nowait

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.queue, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.if_unused = bool(bits & 1)
        m.if_empty = bool(bits & 2)
        m.nowait = bool(bits & 4)
        return m, off

    def encode(self):
        return b''.join((
            b'\x002\x00(',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            bytes(((1 if self.if_unused else 0) | (2 if self.if_empty else 0) | (4 if self.nowait else 0),)),
        ))


class QueueDeleteOk(Method):
    __slots__ = ('message_count', )
    NAME = 'queue.delete-ok'
    CLASS_ID = 50
    METHOD_ID = 41
    INDEX = 0x00320029
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('message_count', 'long'), )

    def __init__(self, message_count=0):
        self.message_count = message_count

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.message_count,) = _I.unpack_from(buf, off)
        off += 4
        return m, off

    def encode(self):
        return b''.join((
            b'\x002\x00)',
            _I.pack(self.message_count),
        ))


class BasicQos(Method):
    __slots__ = ('prefetch_size', 'prefetch_count', 'global_', )
    NAME = 'basic.qos'
    CLASS_ID = 60
    METHOD_ID = 10
    INDEX = 0x003C000A
    SYNCHRONOUS = True
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
            b'\x00<\x00\n',
            _IH.pack(self.prefetch_size, self.prefetch_count),
            bytes(((1 if self.global_ else 0),)),
        ))


class BasicQosOk(Method):
    __slots__ = ()
    NAME = 'basic.qos-ok'
    CLASS_ID = 60
    METHOD_ID = 11
    INDEX = 0x003C000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00<\x00\x0b'


class BasicConsume(Method):
    __slots__ = ('ticket', 'queue', 'consumer_tag', 'no_local', 'no_ack', 'exclusive', 'nowait', )
    NAME = 'basic.consume'
    CLASS_ID = 60
    METHOD_ID = 20
    INDEX = 0x003C0014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('consumer_tag', 'shortstr'), ('no_local', 'bit'), ('no_ack', 'bit'), ('exclusive', 'bit'), ('nowait', 'bit'), )

    def __init__(self, ticket=0, queue='', consumer_tag='', no_local=False, no_ack=False, exclusive=False, nowait=False):
        self.ticket = ticket
        self.queue = queue
        self.consumer_tag = consumer_tag
        self.no_local = no_local
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.nowait = nowait

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
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00\x14',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.consumer_tag),
            bytes(((1 if self.no_local else 0) | (2 if self.no_ack else 0) | (4 if self.exclusive else 0) | (8 if self.nowait else 0),)),
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


class BasicCancel(Method):
    __slots__ = ('consumer_tag', 'nowait', )
    NAME = 'basic.cancel'
    CLASS_ID = 60
    METHOD_ID = 30
    INDEX = 0x003C001E
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('consumer_tag', 'shortstr'), ('nowait', 'bit'), )

    def __init__(self, consumer_tag='', nowait=False):
        self.consumer_tag = consumer_tag
        self.nowait = nowait

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.consumer_tag, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.nowait = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00\x1e',
            encode_shortstr(self.consumer_tag),
            bytes(((1 if self.nowait else 0),)),
        ))


class BasicCancelOk(Method):
    __slots__ = ('consumer_tag', )
    NAME = 'basic.cancel-ok'
    CLASS_ID = 60
    METHOD_ID = 31
    INDEX = 0x003C001F
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
            b'\x00<\x00\x1f',
            encode_shortstr(self.consumer_tag),
        ))


class BasicPublish(Method):
    __slots__ = ('ticket', 'exchange', 'routing_key', 'mandatory', 'immediate', )
    NAME = 'basic.publish'
    CLASS_ID = 60
    METHOD_ID = 40
    INDEX = 0x003C0028
    SYNCHRONOUS = False
    CONTENT = True
    FIELDS = (('ticket', 'short'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), ('mandatory', 'bit'), ('immediate', 'bit'), )

    def __init__(self, ticket=0, exchange='', routing_key='', mandatory=False, immediate=False):
        self.ticket = ticket
        self.exchange = exchange
        self.routing_key = routing_key
        self.mandatory = mandatory
        self.immediate = immediate

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.mandatory = bool(bits & 1)
        m.immediate = bool(bits & 2)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00(',
            _H.pack(self.ticket),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
            bytes(((1 if self.mandatory else 0) | (2 if self.immediate else 0),)),
        ))


class BasicReturn(Method):
    __slots__ = ('reply_code', 'reply_text', 'exchange', 'routing_key', )
    NAME = 'basic.return'
    CLASS_ID = 60
    METHOD_ID = 50
    INDEX = 0x003C0032
    SYNCHRONOUS = False
    CONTENT = True
    FIELDS = (('reply_code', 'short'), ('reply_text', 'shortstr'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), )

    def __init__(self, reply_code=0, reply_text='', exchange='', routing_key=''):
        self.reply_code = reply_code
        self.reply_text = reply_text
        self.exchange = exchange
        self.routing_key = routing_key

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.reply_code,) = _H.unpack_from(buf, off)
        off += 2
        m.reply_text, off = decode_shortstr(buf, off)
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x002',
            _H.pack(self.reply_code),
            encode_shortstr(self.reply_text),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
        ))


class BasicDeliver(Method):
    __slots__ = ('consumer_tag', 'delivery_tag', 'redelivered', 'exchange', 'routing_key', )
    NAME = 'basic.deliver'
    CLASS_ID = 60
    METHOD_ID = 60
    INDEX = 0x003C003C
    SYNCHRONOUS = False
    CONTENT = True
    FIELDS = (('consumer_tag', 'shortstr'), ('delivery_tag', 'longlong'), ('redelivered', 'bit'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), )

    def __init__(self, consumer_tag='', delivery_tag=0, redelivered=False, exchange='', routing_key=''):
        self.consumer_tag = consumer_tag
        self.delivery_tag = delivery_tag
        self.redelivered = redelivered
        self.exchange = exchange
        self.routing_key = routing_key

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.consumer_tag, off = decode_shortstr(buf, off)
        (m.delivery_tag,) = _Q.unpack_from(buf, off)
        off += 8
        bits = buf[off]
        off += 1
        m.redelivered = bool(bits & 1)
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00<',
            encode_shortstr(self.consumer_tag),
            _Q.pack(self.delivery_tag),
            bytes(((1 if self.redelivered else 0),)),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
        ))


class BasicGet(Method):
    __slots__ = ('ticket', 'queue', 'no_ack', )
    NAME = 'basic.get'
    CLASS_ID = 60
    METHOD_ID = 70
    INDEX = 0x003C0046
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('no_ack', 'bit'), )

    def __init__(self, ticket=0, queue='', no_ack=False):
        self.ticket = ticket
        self.queue = queue
        self.no_ack = no_ack

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.queue, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.no_ack = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00F',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            bytes(((1 if self.no_ack else 0),)),
        ))


class BasicGetOk(Method):
    __slots__ = ('delivery_tag', 'redelivered', 'exchange', 'routing_key', 'message_count', )
    NAME = 'basic.get-ok'
    CLASS_ID = 60
    METHOD_ID = 71
    INDEX = 0x003C0047
    SYNCHRONOUS = True
    CONTENT = True
    FIELDS = (('delivery_tag', 'longlong'), ('redelivered', 'bit'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), ('message_count', 'long'), )

    def __init__(self, delivery_tag=0, redelivered=False, exchange='', routing_key='', message_count=0):
        self.delivery_tag = delivery_tag
        self.redelivered = redelivered
        self.exchange = exchange
        self.routing_key = routing_key
        self.message_count = message_count

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.delivery_tag,) = _Q.unpack_from(buf, off)
        off += 8
        bits = buf[off]
        off += 1
        m.redelivered = bool(bits & 1)
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        (m.message_count,) = _I.unpack_from(buf, off)
        off += 4
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00G',
            _Q.pack(self.delivery_tag),
            bytes(((1 if self.redelivered else 0),)),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
            _I.pack(self.message_count),
        ))


class BasicGetEmpty(Method):
    __slots__ = ('cluster_id', )
    NAME = 'basic.get-empty'
    CLASS_ID = 60
    METHOD_ID = 72
    INDEX = 0x003C0048
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('cluster_id', 'shortstr'), )

    def __init__(self, cluster_id=''):
        self.cluster_id = cluster_id

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.cluster_id, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00H',
            encode_shortstr(self.cluster_id),
        ))


class BasicAck(Method):
    __slots__ = ('delivery_tag', 'multiple', )
    NAME = 'basic.ack'
    CLASS_ID = 60
    METHOD_ID = 80
    INDEX = 0x003C0050
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('delivery_tag', 'longlong'), ('multiple', 'bit'), )

    def __init__(self, delivery_tag=0, multiple=False):
        self.delivery_tag = delivery_tag
        self.multiple = multiple

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.delivery_tag,) = _Q.unpack_from(buf, off)
        off += 8
        bits = buf[off]
        off += 1
        m.multiple = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00P',
            _Q.pack(self.delivery_tag),
            bytes(((1 if self.multiple else 0),)),
        ))


class BasicReject(Method):
    __slots__ = ('delivery_tag', 'requeue', )
    NAME = 'basic.reject'
    CLASS_ID = 60
    METHOD_ID = 90
    INDEX = 0x003C005A
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('delivery_tag', 'longlong'), ('requeue', 'bit'), )

    def __init__(self, delivery_tag=0, requeue=False):
        self.delivery_tag = delivery_tag
        self.requeue = requeue

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.delivery_tag,) = _Q.unpack_from(buf, off)
        off += 8
        bits = buf[off]
        off += 1
        m.requeue = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00<\x00Z',
            _Q.pack(self.delivery_tag),
            bytes(((1 if self.requeue else 0),)),
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


class BasicProperties(Properties):
    __slots__ = ('content_type', 'content_encoding', 'headers', 'delivery_mode', 'priority', 'correlation_id', 'reply_to', 'expiration', 'message_id', 'timestamp', 'type', 'user_id', 'app_id', 'cluster_id', )
    CLASS_ID = 60
    FIELDS = (('content_type', 'shortstr'), ('content_encoding', 'shortstr'), ('headers', 'table'), ('delivery_mode', 'octet'), ('priority', 'octet'), ('correlation_id', 'shortstr'), ('reply_to', 'shortstr'), ('expiration', 'shortstr'), ('message_id', 'shortstr'), ('timestamp', 'timestamp'), ('type', 'shortstr'), ('user_id', 'shortstr'), ('app_id', 'shortstr'), ('cluster_id', 'shortstr'), )

    def __init__(self, content_type=None, content_encoding=None, headers=None, delivery_mode=None, priority=None, correlation_id=None, reply_to=None, expiration=None, message_id=None, timestamp=None, type=None, user_id=None, app_id=None, cluster_id=None):
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
        self.cluster_id = cluster_id

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
            p.cluster_id, off = decode_shortstr(buf, off)
        else:
            p.cluster_id = None
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
        if self.cluster_id is not None:
            flags |= 0x0004
            parts.append(encode_shortstr(self.cluster_id))
        parts[0] = _H.pack(flags)
        return b''.join(parts)


class FileQos(Method):
    __slots__ = ('prefetch_size', 'prefetch_count', 'global_', )
    NAME = 'file.qos'
    CLASS_ID = 70
    METHOD_ID = 10
    INDEX = 0x0046000A
    SYNCHRONOUS = True
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
            b'\x00F\x00\n',
            _IH.pack(self.prefetch_size, self.prefetch_count),
            bytes(((1 if self.global_ else 0),)),
        ))


class FileQosOk(Method):
    __slots__ = ()
    NAME = 'file.qos-ok'
    CLASS_ID = 70
    METHOD_ID = 11
    INDEX = 0x0046000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00F\x00\x0b'


class FileConsume(Method):
    __slots__ = ('ticket', 'queue', 'consumer_tag', 'no_local', 'no_ack', 'exclusive', 'nowait', )
    NAME = 'file.consume'
    CLASS_ID = 70
    METHOD_ID = 20
    INDEX = 0x00460014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('consumer_tag', 'shortstr'), ('no_local', 'bit'), ('no_ack', 'bit'), ('exclusive', 'bit'), ('nowait', 'bit'), )

    def __init__(self, ticket=0, queue='', consumer_tag='', no_local=False, no_ack=False, exclusive=False, nowait=False):
        self.ticket = ticket
        self.queue = queue
        self.consumer_tag = consumer_tag
        self.no_local = no_local
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.nowait = nowait

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
        return m, off

    def encode(self):
        return b''.join((
            b'\x00F\x00\x14',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.consumer_tag),
            bytes(((1 if self.no_local else 0) | (2 if self.no_ack else 0) | (4 if self.exclusive else 0) | (8 if self.nowait else 0),)),
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


class FileCancel(Method):
    __slots__ = ('consumer_tag', 'nowait', )
    NAME = 'file.cancel'
    CLASS_ID = 70
    METHOD_ID = 30
    INDEX = 0x0046001E
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('consumer_tag', 'shortstr'), ('nowait', 'bit'), )

    def __init__(self, consumer_tag='', nowait=False):
        self.consumer_tag = consumer_tag
        self.nowait = nowait

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.consumer_tag, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.nowait = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00F\x00\x1e',
            encode_shortstr(self.consumer_tag),
            bytes(((1 if self.nowait else 0),)),
        ))


class FileCancelOk(Method):
    __slots__ = ('consumer_tag', )
    NAME = 'file.cancel-ok'
    CLASS_ID = 70
    METHOD_ID = 31
    INDEX = 0x0046001F
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
            b'\x00F\x00\x1f',
            encode_shortstr(self.consumer_tag),
        ))


class FileOpen(Method):
    __slots__ = ('identifier', 'content_size', )
    NAME = 'file.open'
    CLASS_ID = 70
    METHOD_ID = 40
    INDEX = 0x00460028
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('identifier', 'shortstr'), ('content_size', 'longlong'), )

    def __init__(self, identifier='', content_size=0):
        self.identifier = identifier
        self.content_size = content_size

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.identifier, off = decode_shortstr(buf, off)
        (m.content_size,) = _Q.unpack_from(buf, off)
        off += 8
        return m, off

    def encode(self):
        return b''.join((
            b'\x00F\x00(',
            encode_shortstr(self.identifier),
            _Q.pack(self.content_size),
        ))


class FileOpenOk(Method):
    __slots__ = ('staged_size', )
    NAME = 'file.open-ok'
    CLASS_ID = 70
    METHOD_ID = 41
    INDEX = 0x00460029
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('staged_size', 'longlong'), )

    def __init__(self, staged_size=0):
        self.staged_size = staged_size

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.staged_size,) = _Q.unpack_from(buf, off)
        off += 8
        return m, off

    def encode(self):
        return b''.join((
            b'\x00F\x00)',
            _Q.pack(self.staged_size),
        ))


class FileStage(Method):
    __slots__ = ()
    NAME = 'file.stage'
    CLASS_ID = 70
    METHOD_ID = 50
    INDEX = 0x00460032
    SYNCHRONOUS = False
    CONTENT = True
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00F\x002'


class FilePublish(Method):
    __slots__ = ('ticket', 'exchange', 'routing_key', 'mandatory', 'immediate', 'identifier', )
    NAME = 'file.publish'
    CLASS_ID = 70
    METHOD_ID = 60
    INDEX = 0x0046003C
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), ('mandatory', 'bit'), ('immediate', 'bit'), ('identifier', 'shortstr'), )

    def __init__(self, ticket=0, exchange='', routing_key='', mandatory=False, immediate=False, identifier=''):
        self.ticket = ticket
        self.exchange = exchange
        self.routing_key = routing_key
        self.mandatory = mandatory
        self.immediate = immediate
        self.identifier = identifier

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.mandatory = bool(bits & 1)
        m.immediate = bool(bits & 2)
        m.identifier, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00F\x00<',
            _H.pack(self.ticket),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
            bytes(((1 if self.mandatory else 0) | (2 if self.immediate else 0),)),
            encode_shortstr(self.identifier),
        ))


class FileReturn(Method):
    __slots__ = ('reply_code', 'reply_text', 'exchange', 'routing_key', )
    NAME = 'file.return'
    CLASS_ID = 70
    METHOD_ID = 70
    INDEX = 0x00460046
    SYNCHRONOUS = False
    CONTENT = True
    FIELDS = (('reply_code', 'short'), ('reply_text', 'shortstr'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), )

    def __init__(self, reply_code=0, reply_text='', exchange='', routing_key=''):
        self.reply_code = reply_code
        self.reply_text = reply_text
        self.exchange = exchange
        self.routing_key = routing_key

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.reply_code,) = _H.unpack_from(buf, off)
        off += 2
        m.reply_text, off = decode_shortstr(buf, off)
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00F\x00F',
            _H.pack(self.reply_code),
            encode_shortstr(self.reply_text),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
        ))


class FileDeliver(Method):
    __slots__ = ('consumer_tag', 'delivery_tag', 'redelivered', 'exchange', 'routing_key', 'identifier', )
    NAME = 'file.deliver'
    CLASS_ID = 70
    METHOD_ID = 80
    INDEX = 0x00460050
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('consumer_tag', 'shortstr'), ('delivery_tag', 'longlong'), ('redelivered', 'bit'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), ('identifier', 'shortstr'), )

    def __init__(self, consumer_tag='', delivery_tag=0, redelivered=False, exchange='', routing_key='', identifier=''):
        self.consumer_tag = consumer_tag
        self.delivery_tag = delivery_tag
        self.redelivered = redelivered
        self.exchange = exchange
        self.routing_key = routing_key
        self.identifier = identifier

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.consumer_tag, off = decode_shortstr(buf, off)
        (m.delivery_tag,) = _Q.unpack_from(buf, off)
        off += 8
        bits = buf[off]
        off += 1
        m.redelivered = bool(bits & 1)
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        m.identifier, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00F\x00P',
            encode_shortstr(self.consumer_tag),
            _Q.pack(self.delivery_tag),
            bytes(((1 if self.redelivered else 0),)),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
            encode_shortstr(self.identifier),
        ))


class FileAck(Method):
    __slots__ = ('delivery_tag', 'multiple', )
    NAME = 'file.ack'
    CLASS_ID = 70
    METHOD_ID = 90
    INDEX = 0x0046005A
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('delivery_tag', 'longlong'), ('multiple', 'bit'), )

    def __init__(self, delivery_tag=0, multiple=False):
        self.delivery_tag = delivery_tag
        self.multiple = multiple

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.delivery_tag,) = _Q.unpack_from(buf, off)
        off += 8
        bits = buf[off]
        off += 1
        m.multiple = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00F\x00Z',
            _Q.pack(self.delivery_tag),
            bytes(((1 if self.multiple else 0),)),
        ))


class FileReject(Method):
    __slots__ = ('delivery_tag', 'requeue', )
    NAME = 'file.reject'
    CLASS_ID = 70
    METHOD_ID = 100
    INDEX = 0x00460064
    SYNCHRONOUS = False
    CONTENT = False
    FIELDS = (('delivery_tag', 'longlong'), ('requeue', 'bit'), )

    def __init__(self, delivery_tag=0, requeue=False):
        self.delivery_tag = delivery_tag
        self.requeue = requeue

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.delivery_tag,) = _Q.unpack_from(buf, off)
        off += 8
        bits = buf[off]
        off += 1
        m.requeue = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00F\x00d',
            _Q.pack(self.delivery_tag),
            bytes(((1 if self.requeue else 0),)),
        ))


class FileProperties(Properties):
    __slots__ = ('content_type', 'content_encoding', 'headers', 'priority', 'reply_to', 'message_id', 'filename', 'timestamp', 'cluster_id', )
    CLASS_ID = 70
    FIELDS = (('content_type', 'shortstr'), ('content_encoding', 'shortstr'), ('headers', 'table'), ('priority', 'octet'), ('reply_to', 'shortstr'), ('message_id', 'shortstr'), ('filename', 'shortstr'), ('timestamp', 'timestamp'), ('cluster_id', 'shortstr'), )

    def __init__(self, content_type=None, content_encoding=None, headers=None, priority=None, reply_to=None, message_id=None, filename=None, timestamp=None, cluster_id=None):
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.headers = headers
        self.priority = priority
        self.reply_to = reply_to
        self.message_id = message_id
        self.filename = filename
        self.timestamp = timestamp
        self.cluster_id = cluster_id

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
            (p.priority,) = _B.unpack_from(buf, off)
            off += 1
        else:
            p.priority = None
        if flags & 0x0800:
            p.reply_to, off = decode_shortstr(buf, off)
        else:
            p.reply_to = None
        if flags & 0x0400:
            p.message_id, off = decode_shortstr(buf, off)
        else:
            p.message_id = None
        if flags & 0x0200:
            p.filename, off = decode_shortstr(buf, off)
        else:
            p.filename = None
        if flags & 0x0100:
            (p.timestamp,) = _Q.unpack_from(buf, off)
            off += 8
        else:
            p.timestamp = None
        if flags & 0x0080:
            p.cluster_id, off = decode_shortstr(buf, off)
        else:
            p.cluster_id = None
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
        if self.priority is not None:
            flags |= 0x1000
            parts.append(_B.pack(self.priority))
        if self.reply_to is not None:
            flags |= 0x0800
            parts.append(encode_shortstr(self.reply_to))
        if self.message_id is not None:
            flags |= 0x0400
            parts.append(encode_shortstr(self.message_id))
        if self.filename is not None:
            flags |= 0x0200
            parts.append(encode_shortstr(self.filename))
        if self.timestamp is not None:
            flags |= 0x0100
            parts.append(_Q.pack(self.timestamp))
        if self.cluster_id is not None:
            flags |= 0x0080
            parts.append(encode_shortstr(self.cluster_id))
        parts[0] = _H.pack(flags)
        return b''.join(parts)


class StreamQos(Method):
    __slots__ = ('prefetch_size', 'prefetch_count', 'consume_rate', 'global_', )
    NAME = 'stream.qos'
    CLASS_ID = 80
    METHOD_ID = 10
    INDEX = 0x0050000A
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('prefetch_size', 'long'), ('prefetch_count', 'short'), ('consume_rate', 'long'), ('global_', 'bit'), )

    def __init__(self, prefetch_size=0, prefetch_count=0, consume_rate=0, global_=False):
        self.prefetch_size = prefetch_size
        self.prefetch_count = prefetch_count
        self.consume_rate = consume_rate
        self.global_ = global_

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.prefetch_size, m.prefetch_count, m.consume_rate,) = _IHI.unpack_from(buf, off)
        off += 10
        bits = buf[off]
        off += 1
        m.global_ = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00P\x00\n',
            _IHI.pack(self.prefetch_size, self.prefetch_count, self.consume_rate),
            bytes(((1 if self.global_ else 0),)),
        ))


class StreamQosOk(Method):
    __slots__ = ()
    NAME = 'stream.qos-ok'
    CLASS_ID = 80
    METHOD_ID = 11
    INDEX = 0x0050000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00P\x00\x0b'


class StreamConsume(Method):
    __slots__ = ('ticket', 'queue', 'consumer_tag', 'no_local', 'exclusive', 'nowait', )
    NAME = 'stream.consume'
    CLASS_ID = 80
    METHOD_ID = 20
    INDEX = 0x00500014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('ticket', 'short'), ('queue', 'shortstr'), ('consumer_tag', 'shortstr'), ('no_local', 'bit'), ('exclusive', 'bit'), ('nowait', 'bit'), )

    def __init__(self, ticket=0, queue='', consumer_tag='', no_local=False, exclusive=False, nowait=False):
        self.ticket = ticket
        self.queue = queue
        self.consumer_tag = consumer_tag
        self.no_local = no_local
        self.exclusive = exclusive
        self.nowait = nowait

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
        return m, off

    def encode(self):
        return b''.join((
            b'\x00P\x00\x14',
            _H.pack(self.ticket),
            encode_shortstr(self.queue),
            encode_shortstr(self.consumer_tag),
            bytes(((1 if self.no_local else 0) | (2 if self.exclusive else 0) | (4 if self.nowait else 0),)),
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


class StreamCancel(Method):
    __slots__ = ('consumer_tag', 'nowait', )
    NAME = 'stream.cancel'
    CLASS_ID = 80
    METHOD_ID = 30
    INDEX = 0x0050001E
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('consumer_tag', 'shortstr'), ('nowait', 'bit'), )

    def __init__(self, consumer_tag='', nowait=False):
        self.consumer_tag = consumer_tag
        self.nowait = nowait

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.consumer_tag, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.nowait = bool(bits & 1)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00P\x00\x1e',
            encode_shortstr(self.consumer_tag),
            bytes(((1 if self.nowait else 0),)),
        ))


class StreamCancelOk(Method):
    __slots__ = ('consumer_tag', )
    NAME = 'stream.cancel-ok'
    CLASS_ID = 80
    METHOD_ID = 31
    INDEX = 0x0050001F
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
            b'\x00P\x00\x1f',
            encode_shortstr(self.consumer_tag),
        ))


class StreamPublish(Method):
    __slots__ = ('ticket', 'exchange', 'routing_key', 'mandatory', 'immediate', )
    NAME = 'stream.publish'
    CLASS_ID = 80
    METHOD_ID = 40
    INDEX = 0x00500028
    SYNCHRONOUS = False
    CONTENT = True
    FIELDS = (('ticket', 'short'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), ('mandatory', 'bit'), ('immediate', 'bit'), )

    def __init__(self, ticket=0, exchange='', routing_key='', mandatory=False, immediate=False):
        self.ticket = ticket
        self.exchange = exchange
        self.routing_key = routing_key
        self.mandatory = mandatory
        self.immediate = immediate

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.ticket,) = _H.unpack_from(buf, off)
        off += 2
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        bits = buf[off]
        off += 1
        m.mandatory = bool(bits & 1)
        m.immediate = bool(bits & 2)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00P\x00(',
            _H.pack(self.ticket),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
            bytes(((1 if self.mandatory else 0) | (2 if self.immediate else 0),)),
        ))


class StreamReturn(Method):
    __slots__ = ('reply_code', 'reply_text', 'exchange', 'routing_key', )
    NAME = 'stream.return'
    CLASS_ID = 80
    METHOD_ID = 50
    INDEX = 0x00500032
    SYNCHRONOUS = False
    CONTENT = True
    FIELDS = (('reply_code', 'short'), ('reply_text', 'shortstr'), ('exchange', 'shortstr'), ('routing_key', 'shortstr'), )

    def __init__(self, reply_code=0, reply_text='', exchange='', routing_key=''):
        self.reply_code = reply_code
        self.reply_text = reply_text
        self.exchange = exchange
        self.routing_key = routing_key

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.reply_code,) = _H.unpack_from(buf, off)
        off += 2
        m.reply_text, off = decode_shortstr(buf, off)
        m.exchange, off = decode_shortstr(buf, off)
        m.routing_key, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00P\x002',
            _H.pack(self.reply_code),
            encode_shortstr(self.reply_text),
            encode_shortstr(self.exchange),
            encode_shortstr(self.routing_key),
        ))


class StreamDeliver(Method):
    __slots__ = ('consumer_tag', 'delivery_tag', 'exchange', 'queue', )
    NAME = 'stream.deliver'
    CLASS_ID = 80
    METHOD_ID = 60
    INDEX = 0x0050003C
    SYNCHRONOUS = False
    CONTENT = True
    FIELDS = (('consumer_tag', 'shortstr'), ('delivery_tag', 'longlong'), ('exchange', 'shortstr'), ('queue', 'shortstr'), )

    def __init__(self, consumer_tag='', delivery_tag=0, exchange='', queue=''):
        self.consumer_tag = consumer_tag
        self.delivery_tag = delivery_tag
        self.exchange = exchange
        self.queue = queue

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.consumer_tag, off = decode_shortstr(buf, off)
        (m.delivery_tag,) = _Q.unpack_from(buf, off)
        off += 8
        m.exchange, off = decode_shortstr(buf, off)
        m.queue, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00P\x00<',
            encode_shortstr(self.consumer_tag),
            _Q.pack(self.delivery_tag),
            encode_shortstr(self.exchange),
            encode_shortstr(self.queue),
        ))


class StreamProperties(Properties):
    __slots__ = ('content_type', 'content_encoding', 'headers', 'priority', 'timestamp', )
    CLASS_ID = 80
    FIELDS = (('content_type', 'shortstr'), ('content_encoding', 'shortstr'), ('headers', 'table'), ('priority', 'octet'), ('timestamp', 'timestamp'), )

    def __init__(self, content_type=None, content_encoding=None, headers=None, priority=None, timestamp=None):
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.headers = headers
        self.priority = priority
        self.timestamp = timestamp

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
            (p.priority,) = _B.unpack_from(buf, off)
            off += 1
        else:
            p.priority = None
        if flags & 0x0800:
            (p.timestamp,) = _Q.unpack_from(buf, off)
            off += 8
        else:
            p.timestamp = None
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
        if self.priority is not None:
            flags |= 0x1000
            parts.append(_B.pack(self.priority))
        if self.timestamp is not None:
            flags |= 0x0800
            parts.append(_Q.pack(self.timestamp))
        parts[0] = _H.pack(flags)
        return b''.join(parts)


class TxSelect(Method):
    __slots__ = ()
    NAME = 'tx.select'
    CLASS_ID = 90
    METHOD_ID = 10
    INDEX = 0x005A000A
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00Z\x00\n'


class TxSelectOk(Method):
    __slots__ = ()
    NAME = 'tx.select-ok'
    CLASS_ID = 90
    METHOD_ID = 11
    INDEX = 0x005A000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00Z\x00\x0b'


class TxCommit(Method):
    __slots__ = ()
    NAME = 'tx.commit'
    CLASS_ID = 90
    METHOD_ID = 20
    INDEX = 0x005A0014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00Z\x00\x14'


class TxCommitOk(Method):
    __slots__ = ()
    NAME = 'tx.commit-ok'
    CLASS_ID = 90
    METHOD_ID = 21
    INDEX = 0x005A0015
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00Z\x00\x15'


class TxRollback(Method):
    __slots__ = ()
    NAME = 'tx.rollback'
    CLASS_ID = 90
    METHOD_ID = 30
    INDEX = 0x005A001E
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00Z\x00\x1e'


class TxRollbackOk(Method):
    __slots__ = ()
    NAME = 'tx.rollback-ok'
    CLASS_ID = 90
    METHOD_ID = 31
    INDEX = 0x005A001F
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00Z\x00\x1f'


class DtxSelect(Method):
    __slots__ = ()
    NAME = 'dtx.select'
    CLASS_ID = 100
    METHOD_ID = 10
    INDEX = 0x0064000A
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00d\x00\n'


class DtxSelectOk(Method):
    __slots__ = ()
    NAME = 'dtx.select-ok'
    CLASS_ID = 100
    METHOD_ID = 11
    INDEX = 0x0064000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00d\x00\x0b'


class DtxStart(Method):
    __slots__ = ('dtx_identifier', )
    NAME = 'dtx.start'
    CLASS_ID = 100
    METHOD_ID = 20
    INDEX = 0x00640014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('dtx_identifier', 'shortstr'), )

    def __init__(self, dtx_identifier=''):
        self.dtx_identifier = dtx_identifier

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.dtx_identifier, off = decode_shortstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00d\x00\x14',
            encode_shortstr(self.dtx_identifier),
        ))


class DtxStartOk(Method):
    __slots__ = ()
    NAME = 'dtx.start-ok'
    CLASS_ID = 100
    METHOD_ID = 21
    INDEX = 0x00640015
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00d\x00\x15'


class TunnelRequest(Method):
    __slots__ = ('meta_data', )
    NAME = 'tunnel.request'
    CLASS_ID = 110
    METHOD_ID = 10
    INDEX = 0x006E000A
    SYNCHRONOUS = False
    CONTENT = True
    FIELDS = (('meta_data', 'table'), )

    def __init__(self, meta_data=None):
        self.meta_data = {} if meta_data is None else meta_data

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.meta_data, off = decode_table(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00n\x00\n',
            encode_table(self.meta_data),
        ))


class TunnelProperties(Properties):
    __slots__ = ('headers', 'proxy_name', 'data_name', 'durable', 'broadcast', )
    CLASS_ID = 110
    FIELDS = (('headers', 'table'), ('proxy_name', 'shortstr'), ('data_name', 'shortstr'), ('durable', 'octet'), ('broadcast', 'octet'), )

    def __init__(self, headers=None, proxy_name=None, data_name=None, durable=None, broadcast=None):
        self.headers = headers
        self.proxy_name = proxy_name
        self.data_name = data_name
        self.durable = durable
        self.broadcast = broadcast

    @classmethod
    def decode(cls, buf, off):
        p = cls.__new__(cls)
        (flags,) = _H.unpack_from(buf, off)
        off += 2
        while (buf[off - 1] & 1):  # a continuation flag word follows; no class here needs it
            off += 2
        if flags & 0x8000:
            p.headers, off = decode_table(buf, off)
        else:
            p.headers = None
        if flags & 0x4000:
            p.proxy_name, off = decode_shortstr(buf, off)
        else:
            p.proxy_name = None
        if flags & 0x2000:
            p.data_name, off = decode_shortstr(buf, off)
        else:
            p.data_name = None
        if flags & 0x1000:
            (p.durable,) = _B.unpack_from(buf, off)
            off += 1
        else:
            p.durable = None
        if flags & 0x0800:
            (p.broadcast,) = _B.unpack_from(buf, off)
            off += 1
        else:
            p.broadcast = None
        return p, off

    def encode(self):
        flags = 0
        parts = [b'']
        if self.headers is not None:
            flags |= 0x8000
            parts.append(encode_table(self.headers))
        if self.proxy_name is not None:
            flags |= 0x4000
            parts.append(encode_shortstr(self.proxy_name))
        if self.data_name is not None:
            flags |= 0x2000
            parts.append(encode_shortstr(self.data_name))
        if self.durable is not None:
            flags |= 0x1000
            parts.append(_B.pack(self.durable))
        if self.broadcast is not None:
            flags |= 0x0800
            parts.append(_B.pack(self.broadcast))
        parts[0] = _H.pack(flags)
        return b''.join(parts)


class TestInteger(Method):
    __slots__ = ('integer_1', 'integer_2', 'integer_3', 'integer_4', 'operation', )
    NAME = 'test.integer'
    CLASS_ID = 120
    METHOD_ID = 10
    INDEX = 0x0078000A
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('integer_1', 'octet'), ('integer_2', 'short'), ('integer_3', 'long'), ('integer_4', 'longlong'), ('operation', 'octet'), )

    def __init__(self, integer_1=0, integer_2=0, integer_3=0, integer_4=0, operation=0):
        self.integer_1 = integer_1
        self.integer_2 = integer_2
        self.integer_3 = integer_3
        self.integer_4 = integer_4
        self.operation = operation

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.integer_1, m.integer_2, m.integer_3, m.integer_4, m.operation,) = _BHIQB.unpack_from(buf, off)
        off += 16
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00\n',
            _BHIQB.pack(self.integer_1, self.integer_2, self.integer_3, self.integer_4, self.operation),
        ))


class TestIntegerOk(Method):
    __slots__ = ('result', )
    NAME = 'test.integer-ok'
    CLASS_ID = 120
    METHOD_ID = 11
    INDEX = 0x0078000B
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('result', 'longlong'), )

    def __init__(self, result=0):
        self.result = result

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.result,) = _Q.unpack_from(buf, off)
        off += 8
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00\x0b',
            _Q.pack(self.result),
        ))


class TestString(Method):
    __slots__ = ('string_1', 'string_2', 'operation', )
    NAME = 'test.string'
    CLASS_ID = 120
    METHOD_ID = 20
    INDEX = 0x00780014
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('string_1', 'shortstr'), ('string_2', 'longstr'), ('operation', 'octet'), )

    def __init__(self, string_1='', string_2=b'', operation=0):
        self.string_1 = string_1
        self.string_2 = string_2
        self.operation = operation

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.string_1, off = decode_shortstr(buf, off)
        m.string_2, off = decode_longstr(buf, off)
        (m.operation,) = _B.unpack_from(buf, off)
        off += 1
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00\x14',
            encode_shortstr(self.string_1),
            encode_longstr(self.string_2),
            _B.pack(self.operation),
        ))


class TestStringOk(Method):
    __slots__ = ('result', )
    NAME = 'test.string-ok'
    CLASS_ID = 120
    METHOD_ID = 21
    INDEX = 0x00780015
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('result', 'longstr'), )

    def __init__(self, result=b''):
        self.result = result

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.result, off = decode_longstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00\x15',
            encode_longstr(self.result),
        ))


class TestTable(Method):
    __slots__ = ('table', 'integer_op', 'string_op', )
    NAME = 'test.table'
    CLASS_ID = 120
    METHOD_ID = 30
    INDEX = 0x0078001E
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('table', 'table'), ('integer_op', 'octet'), ('string_op', 'octet'), )

    def __init__(self, table=None, integer_op=0, string_op=0):
        self.table = {} if table is None else table
        self.integer_op = integer_op
        self.string_op = string_op

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        m.table, off = decode_table(buf, off)
        (m.integer_op, m.string_op,) = _BB.unpack_from(buf, off)
        off += 2
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00\x1e',
            encode_table(self.table),
            _BB.pack(self.integer_op, self.string_op),
        ))


class TestTableOk(Method):
    __slots__ = ('integer_result', 'string_result', )
    NAME = 'test.table-ok'
    CLASS_ID = 120
    METHOD_ID = 31
    INDEX = 0x0078001F
    SYNCHRONOUS = True
    CONTENT = False
    FIELDS = (('integer_result', 'longlong'), ('string_result', 'longstr'), )

    def __init__(self, integer_result=0, string_result=b''):
        self.integer_result = integer_result
        self.string_result = string_result

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.integer_result,) = _Q.unpack_from(buf, off)
        off += 8
        m.string_result, off = decode_longstr(buf, off)
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00\x1f',
            _Q.pack(self.integer_result),
            encode_longstr(self.string_result),
        ))


class TestContent(Method):
    __slots__ = ()
    NAME = 'test.content'
    CLASS_ID = 120
    METHOD_ID = 40
    INDEX = 0x00780028
    SYNCHRONOUS = True
    CONTENT = True
    FIELDS = ()

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        return m, off

    def encode(self):
        return b'\x00x\x00('


class TestContentOk(Method):
    __slots__ = ('content_checksum', )
    NAME = 'test.content-ok'
    CLASS_ID = 120
    METHOD_ID = 41
    INDEX = 0x00780029
    SYNCHRONOUS = True
    CONTENT = True
    FIELDS = (('content_checksum', 'long'), )

    def __init__(self, content_checksum=0):
        self.content_checksum = content_checksum

    @classmethod
    def decode(cls, buf, off):
        m = cls.__new__(cls)
        (m.content_checksum,) = _I.unpack_from(buf, off)
        off += 4
        return m, off

    def encode(self):
        return b''.join((
            b'\x00x\x00)',
            _I.pack(self.content_checksum),
        ))


# METHODS: class_id << 16 | method_id -> method class; PROPERTIES: class id -> properties
# class; CLASS_IDS: class name -> id (of every class defined or imported above)
METHODS, PROPERTIES, CLASS_IDS = tables(globals())
