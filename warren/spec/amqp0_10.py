"""AMQP 0-10 protocol tables.

Generated from amqp0-10.qpid-errata.xml by tools/gen_spec.py; do not edit, run the tool. Classes and
their meaning: warren/spec/base010.py; wire forms: warren/codec/amqp0_10.

Where amqp0-10.qpid-errata.xml differs from amqp0-10.xml (Qpid's corrections, which Qpid's
clients follow):

* struct dtx.xid: size 4 (official: 2)
* struct dtx.xid: code 4 (official: None)
* control connection.heartbeat: implement [('client', 'may'), ('server', 'may')] (official: [])
"""

# fmt: off
import enum

from warren.spec.base010 import Command, Control, Struct, tables

VERSION = (0, 10, 0)

MIN_MAX_FRAME_SIZE = 4096

# type name -> (type code or None, fixed width or None, size-prefix width or None)
TYPES = {
    'bin8': (0x00, 1, None),
    'int8': (0x01, 1, None),
    'uint8': (0x02, 1, None),
    'char': (0x04, 1, None),
    'boolean': (0x08, 1, None),
    'bin16': (0x10, 2, None),
    'int16': (0x11, 2, None),
    'uint16': (0x12, 2, None),
    'bin32': (0x20, 4, None),
    'int32': (0x21, 4, None),
    'uint32': (0x22, 4, None),
    'float': (0x23, 4, None),
    'char-utf32': (0x27, 4, None),
    'sequence-no': (None, 4, None),
    'bin64': (0x30, 8, None),
    'int64': (0x31, 8, None),
    'uint64': (0x32, 8, None),
    'double': (0x33, 8, None),
    'datetime': (0x38, 8, None),
    'bin128': (0x40, 16, None),
    'uuid': (0x48, 16, None),
    'bin256': (0x50, 32, None),
    'bin512': (0x60, 64, None),
    'bin1024': (0x70, 128, None),
    'vbin8': (0x80, None, 1),
    'str8-latin': (0x84, None, 1),
    'str8': (0x85, None, 1),
    'str8-utf16': (0x86, None, 1),
    'vbin16': (0x90, None, 2),
    'str16-latin': (0x94, None, 2),
    'str16': (0x95, None, 2),
    'str16-utf16': (0x96, None, 2),
    'byte-ranges': (None, None, 2),
    'sequence-set': (None, None, 2),
    'vbin32': (0xA0, None, 4),
    'map': (0xA8, None, 4),
    'list': (0xA9, None, 4),
    'array': (0xAA, None, 4),
    'struct32': (0xAB, None, 4),
    'bin40': (0xC0, 5, None),
    'dec32': (0xC8, 5, None),
    'bin72': (0xD0, 9, None),
    'dec64': (0xD8, 9, None),
    'void': (0xF0, 0, None),
    'bit': (0xF1, 0, None),
}


class SegmentType(enum.IntEnum):
    """segment-type (uint8)"""
    CONTROL = 0
    COMMAND = 1
    HEADER = 2
    BODY = 3


class Track(enum.IntEnum):
    """track (uint8)"""
    CONTROL = 0
    COMMAND = 1


class ConnectionCloseCode(enum.IntEnum):
    """connection.close-code (uint16)"""
    NORMAL = 200
    CONNECTION_FORCED = 320
    INVALID_PATH = 402
    FRAMING_ERROR = 501


class SessionDetachCode(enum.IntEnum):
    """session.detach-code (uint8)"""
    NORMAL = 0
    SESSION_BUSY = 1
    TRANSPORT_BUSY = 2
    NOT_ATTACHED = 3
    UNKNOWN_IDS = 4


class ExecutionErrorCode(enum.IntEnum):
    """execution.error-code (uint16)"""
    UNAUTHORIZED_ACCESS = 403
    NOT_FOUND = 404
    RESOURCE_LOCKED = 405
    PRECONDITION_FAILED = 406
    RESOURCE_DELETED = 408
    ILLEGAL_STATE = 409
    COMMAND_INVALID = 503
    RESOURCE_LIMIT_EXCEEDED = 506
    NOT_ALLOWED = 530
    ILLEGAL_ARGUMENT = 531
    NOT_IMPLEMENTED = 540
    INTERNAL_ERROR = 541
    INVALID_ARGUMENT = 542


class MessageAcceptMode(enum.IntEnum):
    """message.accept-mode (uint8)"""
    EXPLICIT = 0
    NONE = 1


class MessageAcquireMode(enum.IntEnum):
    """message.acquire-mode (uint8)"""
    PRE_ACQUIRED = 0
    NOT_ACQUIRED = 1


class MessageRejectCode(enum.IntEnum):
    """message.reject-code (uint16)"""
    UNSPECIFIED = 0
    UNROUTABLE = 1
    IMMEDIATE = 2


class MessageDeliveryMode(enum.IntEnum):
    """message.delivery-mode (uint8)"""
    NON_PERSISTENT = 1
    PERSISTENT = 2


class MessageDeliveryPriority(enum.IntEnum):
    """message.delivery-priority (uint8)"""
    LOWEST = 0
    LOWER = 1
    LOW = 2
    BELOW_AVERAGE = 3
    MEDIUM = 4
    ABOVE_AVERAGE = 5
    HIGH = 6
    HIGHER = 7
    VERY_HIGH = 8
    HIGHEST = 9


class MessageFlowMode(enum.IntEnum):
    """message.flow-mode (uint8)"""
    CREDIT = 0
    WINDOW = 1


class MessageCreditUnit(enum.IntEnum):
    """message.credit-unit (uint8)"""
    MESSAGE = 0
    BYTE = 1


class DtxXaStatus(enum.IntEnum):
    """dtx.xa-status (uint16)"""
    XA_OK = 0
    XA_RBROLLBACK = 1
    XA_RBTIMEOUT = 2
    XA_HEURHAZ = 3
    XA_HEURCOM = 4
    XA_HEURRB = 5
    XA_HEURMIX = 6
    XA_RDONLY = 7


class FileReturnCode(enum.IntEnum):
    """file.return-code (uint16)"""
    CONTENT_TOO_LARGE = 311
    NO_ROUTE = 312
    NO_CONSUMERS = 313


class StreamReturnCode(enum.IntEnum):
    """stream.return-code (uint16)"""
    CONTENT_TOO_LARGE = 311
    NO_ROUTE = 312
    NO_CONSUMERS = 313


class SessionHeader(Struct):
    __slots__ = ('sync', )
    NAME = 'session.header'
    CLASS_CODE = 2
    CODE = None
    INDEX = None
    SIZE = 1
    PACK = 1
    FIELDS = (('sync', 'bit', False), )

    def __init__(self, sync=False):
        self.sync = sync


class SessionCommandFragment(Struct):
    __slots__ = ('command_id', 'byte_ranges', )
    NAME = 'session.command-fragment'
    CLASS_CODE = 2
    CODE = None
    INDEX = None
    SIZE = 0
    PACK = 0
    FIELDS = (('command_id', 'sequence-no', True), ('byte_ranges', 'byte-ranges', True), )

    def __init__(self, command_id=None, byte_ranges=None):
        self.command_id = command_id
        self.byte_ranges = byte_ranges


class MessageDeliveryProperties(Struct):
    __slots__ = ('discard_unroutable', 'immediate', 'redelivered', 'priority', 'delivery_mode', 'ttl', 'timestamp', 'expiration', 'exchange', 'routing_key', 'resume_id', 'resume_ttl', )
    NAME = 'message.delivery-properties'
    CLASS_CODE = 4
    CODE = 1
    INDEX = 0x0401
    SIZE = 4
    PACK = 2
    FIELDS = (('discard_unroutable', 'bit', False), ('immediate', 'bit', False), ('redelivered', 'bit', False), ('priority', 'uint8', True), ('delivery_mode', 'uint8', True), ('ttl', 'uint64', False), ('timestamp', 'datetime', False), ('expiration', 'datetime', False), ('exchange', 'str8', False), ('routing_key', 'str8', False), ('resume_id', 'str16', False), ('resume_ttl', 'uint64', False), )

    def __init__(self, discard_unroutable=False, immediate=False, redelivered=False, priority=None, delivery_mode=None, ttl=None, timestamp=None, expiration=None, exchange=None, routing_key=None, resume_id=None, resume_ttl=None):
        self.discard_unroutable = discard_unroutable
        self.immediate = immediate
        self.redelivered = redelivered
        self.priority = priority
        self.delivery_mode = delivery_mode
        self.ttl = ttl
        self.timestamp = timestamp
        self.expiration = expiration
        self.exchange = exchange
        self.routing_key = routing_key
        self.resume_id = resume_id
        self.resume_ttl = resume_ttl


class MessageFragmentProperties(Struct):
    __slots__ = ('first', 'last', 'fragment_size', )
    NAME = 'message.fragment-properties'
    CLASS_CODE = 4
    CODE = 2
    INDEX = 0x0402
    SIZE = 4
    PACK = 2
    FIELDS = (('first', 'bit', False), ('last', 'bit', False), ('fragment_size', 'uint64', False), )

    def __init__(self, first=True, last=True, fragment_size=None):
        self.first = first
        self.last = last
        self.fragment_size = fragment_size


class MessageMessageProperties(Struct):
    __slots__ = ('content_length', 'message_id', 'correlation_id', 'reply_to', 'content_type', 'content_encoding', 'user_id', 'app_id', 'application_headers', )
    NAME = 'message.message-properties'
    CLASS_CODE = 4
    CODE = 3
    INDEX = 0x0403
    SIZE = 4
    PACK = 2
    FIELDS = (('content_length', 'uint64', False), ('message_id', 'uuid', False), ('correlation_id', 'vbin16', False), ('reply_to', 'message.reply-to', False), ('content_type', 'str8', False), ('content_encoding', 'str8', False), ('user_id', 'vbin16', False), ('app_id', 'vbin16', False), ('application_headers', 'map', False), )

    def __init__(self, content_length=None, message_id=None, correlation_id=None, reply_to=None, content_type=None, content_encoding=None, user_id=None, app_id=None, application_headers=None):
        self.content_length = content_length
        self.message_id = message_id
        self.correlation_id = correlation_id
        self.reply_to = reply_to
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.user_id = user_id
        self.app_id = app_id
        self.application_headers = application_headers


class MessageAcquired(Struct):
    __slots__ = ('transfers', )
    NAME = 'message.acquired'
    CLASS_CODE = 4
    CODE = 4
    INDEX = 0x0404
    SIZE = 4
    PACK = 2
    FIELDS = (('transfers', 'sequence-set', True), )

    def __init__(self, transfers=None):
        self.transfers = transfers


class MessageMessageResumeResult(Struct):
    __slots__ = ('offset', )
    NAME = 'message.message-resume-result'
    CLASS_CODE = 4
    CODE = 5
    INDEX = 0x0405
    SIZE = 4
    PACK = 2
    FIELDS = (('offset', 'uint64', False), )

    def __init__(self, offset=None):
        self.offset = offset


class MessageReplyTo(Struct):
    __slots__ = ('exchange', 'routing_key', )
    NAME = 'message.reply-to'
    CLASS_CODE = 4
    CODE = None
    INDEX = None
    SIZE = 2
    PACK = 2
    FIELDS = (('exchange', 'str8', False), ('routing_key', 'str8', False), )

    def __init__(self, exchange=None, routing_key=None):
        self.exchange = exchange
        self.routing_key = routing_key


class DtxXaResult(Struct):
    __slots__ = ('status', )
    NAME = 'dtx.xa-result'
    CLASS_CODE = 6
    CODE = 1
    INDEX = 0x0601
    SIZE = 4
    PACK = 2
    FIELDS = (('status', 'uint16', True), )

    def __init__(self, status=None):
        self.status = status


class DtxGetTimeoutResult(Struct):
    __slots__ = ('timeout', )
    NAME = 'dtx.get-timeout-result'
    CLASS_CODE = 6
    CODE = 2
    INDEX = 0x0602
    SIZE = 4
    PACK = 2
    FIELDS = (('timeout', 'uint32', True), )

    def __init__(self, timeout=None):
        self.timeout = timeout


class DtxRecoverResult(Struct):
    __slots__ = ('in_doubt', )
    NAME = 'dtx.recover-result'
    CLASS_CODE = 6
    CODE = 3
    INDEX = 0x0603
    SIZE = 4
    PACK = 2
    FIELDS = (('in_doubt', 'array', True), )

    def __init__(self, in_doubt=None):
        self.in_doubt = in_doubt


class DtxXid(Struct):
    __slots__ = ('format', 'global_id', 'branch_id', )
    NAME = 'dtx.xid'
    CLASS_CODE = 6
    CODE = 4
    INDEX = 0x0604
    SIZE = 4
    PACK = 2
    FIELDS = (('format', 'uint32', True), ('global_id', 'vbin8', True), ('branch_id', 'vbin8', True), )

    def __init__(self, format=None, global_id=None, branch_id=None):
        self.format = format
        self.global_id = global_id
        self.branch_id = branch_id


class ExchangeExchangeQueryResult(Struct):
    __slots__ = ('type', 'durable', 'not_found', 'arguments', )
    NAME = 'exchange.exchange-query-result'
    CLASS_CODE = 7
    CODE = 1
    INDEX = 0x0701
    SIZE = 4
    PACK = 2
    FIELDS = (('type', 'str8', False), ('durable', 'bit', False), ('not_found', 'bit', False), ('arguments', 'map', False), )

    def __init__(self, type=None, durable=False, not_found=False, arguments=None):
        self.type = type
        self.durable = durable
        self.not_found = not_found
        self.arguments = arguments


class ExchangeExchangeBoundResult(Struct):
    __slots__ = ('exchange_not_found', 'queue_not_found', 'queue_not_matched', 'key_not_matched', 'args_not_matched', )
    NAME = 'exchange.exchange-bound-result'
    CLASS_CODE = 7
    CODE = 2
    INDEX = 0x0702
    SIZE = 4
    PACK = 2
    FIELDS = (('exchange_not_found', 'bit', False), ('queue_not_found', 'bit', False), ('queue_not_matched', 'bit', False), ('key_not_matched', 'bit', False), ('args_not_matched', 'bit', False), )

    def __init__(self, exchange_not_found=False, queue_not_found=False, queue_not_matched=False, key_not_matched=False, args_not_matched=False):
        self.exchange_not_found = exchange_not_found
        self.queue_not_found = queue_not_found
        self.queue_not_matched = queue_not_matched
        self.key_not_matched = key_not_matched
        self.args_not_matched = args_not_matched


class QueueQueueQueryResult(Struct):
    __slots__ = ('queue', 'alternate_exchange', 'durable', 'exclusive', 'auto_delete', 'arguments', 'message_count', 'subscriber_count', )
    NAME = 'queue.queue-query-result'
    CLASS_CODE = 8
    CODE = 1
    INDEX = 0x0801
    SIZE = 4
    PACK = 2
    FIELDS = (('queue', 'str8', True), ('alternate_exchange', 'str8', False), ('durable', 'bit', False), ('exclusive', 'bit', False), ('auto_delete', 'bit', False), ('arguments', 'map', False), ('message_count', 'uint32', True), ('subscriber_count', 'uint32', True), )

    def __init__(self, queue=None, alternate_exchange=None, durable=False, exclusive=False, auto_delete=False, arguments=None, message_count=None, subscriber_count=None):
        self.queue = queue
        self.alternate_exchange = alternate_exchange
        self.durable = durable
        self.exclusive = exclusive
        self.auto_delete = auto_delete
        self.arguments = arguments
        self.message_count = message_count
        self.subscriber_count = subscriber_count


class FileFileProperties(Struct):
    __slots__ = ('content_type', 'content_encoding', 'headers', 'priority', 'reply_to', 'message_id', 'filename', 'timestamp', 'cluster_id', )
    NAME = 'file.file-properties'
    CLASS_CODE = 9
    CODE = 1
    INDEX = 0x0901
    SIZE = 4
    PACK = 2
    FIELDS = (('content_type', 'str8', False), ('content_encoding', 'str8', False), ('headers', 'map', False), ('priority', 'uint8', False), ('reply_to', 'str8', False), ('message_id', 'str8', False), ('filename', 'str8', False), ('timestamp', 'datetime', False), ('cluster_id', 'str8', False), )

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


class StreamStreamProperties(Struct):
    __slots__ = ('content_type', 'content_encoding', 'headers', 'priority', 'timestamp', )
    NAME = 'stream.stream-properties'
    CLASS_CODE = 10
    CODE = 1
    INDEX = 0x0A01
    SIZE = 4
    PACK = 2
    FIELDS = (('content_type', 'str8', False), ('content_encoding', 'str8', False), ('headers', 'map', False), ('priority', 'uint8', False), ('timestamp', 'datetime', False), )

    def __init__(self, content_type=None, content_encoding=None, headers=None, priority=None, timestamp=None):
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.headers = headers
        self.priority = priority
        self.timestamp = timestamp


class ConnectionStart(Control):
    __slots__ = ('server_properties', 'mechanisms', 'locales', )
    NAME = 'connection.start'
    CLASS_CODE = 1
    CODE = 1
    INDEX = 0x0101
    FIELDS = (('server_properties', 'map', False), ('mechanisms', 'array', True), ('locales', 'array', True), )
    IMPLEMENT = (('client', 'must'),)
    RESPONSES = ('connection.start-ok',)

    def __init__(self, server_properties=None, mechanisms=None, locales=None):
        self.server_properties = server_properties
        self.mechanisms = mechanisms
        self.locales = locales


class ConnectionStartOk(Control):
    __slots__ = ('client_properties', 'mechanism', 'response', 'locale', )
    NAME = 'connection.start-ok'
    CLASS_CODE = 1
    CODE = 2
    INDEX = 0x0102
    FIELDS = (('client_properties', 'map', False), ('mechanism', 'str8', True), ('response', 'vbin32', True), ('locale', 'str8', True), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, client_properties=None, mechanism=None, response=None, locale=None):
        self.client_properties = client_properties
        self.mechanism = mechanism
        self.response = response
        self.locale = locale


class ConnectionSecure(Control):
    __slots__ = ('challenge', )
    NAME = 'connection.secure'
    CLASS_CODE = 1
    CODE = 3
    INDEX = 0x0103
    FIELDS = (('challenge', 'vbin32', True), )
    IMPLEMENT = (('client', 'must'),)
    RESPONSES = ('connection.secure-ok',)

    def __init__(self, challenge=None):
        self.challenge = challenge


class ConnectionSecureOk(Control):
    __slots__ = ('response', )
    NAME = 'connection.secure-ok'
    CLASS_CODE = 1
    CODE = 4
    INDEX = 0x0104
    FIELDS = (('response', 'vbin32', True), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, response=None):
        self.response = response


class ConnectionTune(Control):
    __slots__ = ('channel_max', 'max_frame_size', 'heartbeat_min', 'heartbeat_max', )
    NAME = 'connection.tune'
    CLASS_CODE = 1
    CODE = 5
    INDEX = 0x0105
    FIELDS = (('channel_max', 'uint16', False), ('max_frame_size', 'uint16', False), ('heartbeat_min', 'uint16', False), ('heartbeat_max', 'uint16', False), )
    IMPLEMENT = (('client', 'must'),)
    RESPONSES = ('connection.tune-ok',)

    def __init__(self, channel_max=None, max_frame_size=None, heartbeat_min=None, heartbeat_max=None):
        self.channel_max = channel_max
        self.max_frame_size = max_frame_size
        self.heartbeat_min = heartbeat_min
        self.heartbeat_max = heartbeat_max


class ConnectionTuneOk(Control):
    __slots__ = ('channel_max', 'max_frame_size', 'heartbeat', )
    NAME = 'connection.tune-ok'
    CLASS_CODE = 1
    CODE = 6
    INDEX = 0x0106
    FIELDS = (('channel_max', 'uint16', True), ('max_frame_size', 'uint16', False), ('heartbeat', 'uint16', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, channel_max=None, max_frame_size=None, heartbeat=None):
        self.channel_max = channel_max
        self.max_frame_size = max_frame_size
        self.heartbeat = heartbeat


class ConnectionOpen(Control):
    __slots__ = ('virtual_host', 'capabilities', 'insist', )
    NAME = 'connection.open'
    CLASS_CODE = 1
    CODE = 7
    INDEX = 0x0107
    FIELDS = (('virtual_host', 'str8', True), ('capabilities', 'array', False), ('insist', 'bit', False), )
    IMPLEMENT = (('server', 'must'),)
    RESPONSES = ('connection.open-ok', 'connection.redirect')

    def __init__(self, virtual_host=None, capabilities=None, insist=False):
        self.virtual_host = virtual_host
        self.capabilities = capabilities
        self.insist = insist


class ConnectionOpenOk(Control):
    __slots__ = ('known_hosts', )
    NAME = 'connection.open-ok'
    CLASS_CODE = 1
    CODE = 8
    INDEX = 0x0108
    FIELDS = (('known_hosts', 'array', False), )
    IMPLEMENT = (('client', 'must'),)

    def __init__(self, known_hosts=None):
        self.known_hosts = known_hosts


class ConnectionRedirect(Control):
    __slots__ = ('host', 'known_hosts', )
    NAME = 'connection.redirect'
    CLASS_CODE = 1
    CODE = 9
    INDEX = 0x0109
    FIELDS = (('host', 'str16', True), ('known_hosts', 'array', False), )
    IMPLEMENT = (('client', 'must'),)

    def __init__(self, host=None, known_hosts=None):
        self.host = host
        self.known_hosts = known_hosts


class ConnectionHeartbeat(Control):
    __slots__ = ()
    NAME = 'connection.heartbeat'
    CLASS_CODE = 1
    CODE = 10
    INDEX = 0x010A
    FIELDS = ()
    IMPLEMENT = (('client', 'may'), ('server', 'may'))


class ConnectionClose(Control):
    __slots__ = ('reply_code', 'reply_text', )
    NAME = 'connection.close'
    CLASS_CODE = 1
    CODE = 11
    INDEX = 0x010B
    FIELDS = (('reply_code', 'uint16', True), ('reply_text', 'str8', False), )
    IMPLEMENT = (('client', 'must'), ('server', 'must'))
    RESPONSES = ('connection.close-ok',)

    def __init__(self, reply_code=None, reply_text=None):
        self.reply_code = reply_code
        self.reply_text = reply_text


class ConnectionCloseOk(Control):
    __slots__ = ()
    NAME = 'connection.close-ok'
    CLASS_CODE = 1
    CODE = 12
    INDEX = 0x010C
    FIELDS = ()
    IMPLEMENT = (('client', 'must'), ('server', 'must'))


class SessionAttach(Control):
    __slots__ = ('name', 'force', )
    NAME = 'session.attach'
    CLASS_CODE = 2
    CODE = 1
    INDEX = 0x0201
    FIELDS = (('name', 'vbin16', True), ('force', 'bit', False), )
    IMPLEMENT = (('server', 'must'), ('client', 'may'))
    RESPONSES = ('session.attached', 'session.detached')

    def __init__(self, name=None, force=False):
        self.name = name
        self.force = force


class SessionAttached(Control):
    __slots__ = ('name', )
    NAME = 'session.attached'
    CLASS_CODE = 2
    CODE = 2
    INDEX = 0x0202
    FIELDS = (('name', 'vbin16', True), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))

    def __init__(self, name=None):
        self.name = name


class SessionDetach(Control):
    __slots__ = ('name', )
    NAME = 'session.detach'
    CLASS_CODE = 2
    CODE = 3
    INDEX = 0x0203
    FIELDS = (('name', 'vbin16', True), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))
    RESPONSES = ('session.detached',)

    def __init__(self, name=None):
        self.name = name


class SessionDetached(Control):
    __slots__ = ('name', 'code', )
    NAME = 'session.detached'
    CLASS_CODE = 2
    CODE = 4
    INDEX = 0x0204
    FIELDS = (('name', 'vbin16', True), ('code', 'uint8', True), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))

    def __init__(self, name=None, code=None):
        self.name = name
        self.code = code


class SessionRequestTimeout(Control):
    __slots__ = ('timeout', )
    NAME = 'session.request-timeout'
    CLASS_CODE = 2
    CODE = 5
    INDEX = 0x0205
    FIELDS = (('timeout', 'uint32', False), )
    IMPLEMENT = (('sender', 'must'), ('receiver', 'must'))
    RESPONSES = ('session.timeout',)

    def __init__(self, timeout=None):
        self.timeout = timeout


class SessionTimeout(Control):
    __slots__ = ('timeout', )
    NAME = 'session.timeout'
    CLASS_CODE = 2
    CODE = 6
    INDEX = 0x0206
    FIELDS = (('timeout', 'uint32', False), )
    IMPLEMENT = (('sender', 'must'), ('receiver', 'must'))

    def __init__(self, timeout=None):
        self.timeout = timeout


class SessionCommandPoint(Control):
    __slots__ = ('command_id', 'command_offset', )
    NAME = 'session.command-point'
    CLASS_CODE = 2
    CODE = 7
    INDEX = 0x0207
    FIELDS = (('command_id', 'sequence-no', True), ('command_offset', 'uint64', True), )
    IMPLEMENT = (('receiver', 'must'),)

    def __init__(self, command_id=None, command_offset=None):
        self.command_id = command_id
        self.command_offset = command_offset


class SessionExpected(Control):
    __slots__ = ('commands', 'fragments', )
    NAME = 'session.expected'
    CLASS_CODE = 2
    CODE = 8
    INDEX = 0x0208
    FIELDS = (('commands', 'sequence-set', True), ('fragments', 'array', False), )
    IMPLEMENT = (('sender', 'must'),)

    def __init__(self, commands=None, fragments=None):
        self.commands = commands
        self.fragments = fragments


class SessionConfirmed(Control):
    __slots__ = ('commands', 'fragments', )
    NAME = 'session.confirmed'
    CLASS_CODE = 2
    CODE = 9
    INDEX = 0x0209
    FIELDS = (('commands', 'sequence-set', False), ('fragments', 'array', False), )
    IMPLEMENT = (('sender', 'must'),)

    def __init__(self, commands=None, fragments=None):
        self.commands = commands
        self.fragments = fragments


class SessionCompleted(Control):
    __slots__ = ('commands', 'timely_reply', )
    NAME = 'session.completed'
    CLASS_CODE = 2
    CODE = 10
    INDEX = 0x020A
    FIELDS = (('commands', 'sequence-set', False), ('timely_reply', 'bit', False), )
    IMPLEMENT = (('sender', 'must'),)

    def __init__(self, commands=None, timely_reply=False):
        self.commands = commands
        self.timely_reply = timely_reply


class SessionKnownCompleted(Control):
    __slots__ = ('commands', )
    NAME = 'session.known-completed'
    CLASS_CODE = 2
    CODE = 11
    INDEX = 0x020B
    FIELDS = (('commands', 'sequence-set', False), )
    IMPLEMENT = (('receiver', 'must'),)

    def __init__(self, commands=None):
        self.commands = commands


class SessionFlush(Control):
    __slots__ = ('expected', 'confirmed', 'completed', )
    NAME = 'session.flush'
    CLASS_CODE = 2
    CODE = 12
    INDEX = 0x020C
    FIELDS = (('expected', 'bit', False), ('confirmed', 'bit', False), ('completed', 'bit', False), )
    IMPLEMENT = (('receiver', 'must'),)

    def __init__(self, expected=False, confirmed=False, completed=False):
        self.expected = expected
        self.confirmed = confirmed
        self.completed = completed


class SessionGap(Control):
    __slots__ = ('commands', )
    NAME = 'session.gap'
    CLASS_CODE = 2
    CODE = 13
    INDEX = 0x020D
    FIELDS = (('commands', 'sequence-set', False), )
    IMPLEMENT = (('receiver', 'must'),)

    def __init__(self, commands=None):
        self.commands = commands


class ExecutionSync(Command):
    __slots__ = ()
    NAME = 'execution.sync'
    CLASS_CODE = 3
    CODE = 1
    INDEX = 0x0301
    FIELDS = ()
    IMPLEMENT = (('server', 'must'), ('client', 'must'))


class ExecutionResult(Command):
    __slots__ = ('command_id', 'value', )
    NAME = 'execution.result'
    CLASS_CODE = 3
    CODE = 2
    INDEX = 0x0302
    FIELDS = (('command_id', 'sequence-no', True), ('value', 'struct32', False), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))

    def __init__(self, command_id=None, value=None):
        self.command_id = command_id
        self.value = value


class ExecutionException(Command):
    __slots__ = ('error_code', 'command_id', 'class_code', 'command_code', 'field_index', 'description', 'error_info', )
    NAME = 'execution.exception'
    CLASS_CODE = 3
    CODE = 3
    INDEX = 0x0303
    FIELDS = (('error_code', 'uint16', True), ('command_id', 'sequence-no', False), ('class_code', 'uint8', False), ('command_code', 'uint8', False), ('field_index', 'uint8', False), ('description', 'str16', False), ('error_info', 'map', False), )
    IMPLEMENT = (('client', 'must'), ('server', 'must'))

    def __init__(self, error_code=None, command_id=None, class_code=None, command_code=None, field_index=None, description=None, error_info=None):
        self.error_code = error_code
        self.command_id = command_id
        self.class_code = class_code
        self.command_code = command_code
        self.field_index = field_index
        self.description = description
        self.error_info = error_info


class MessageTransfer(Command):
    __slots__ = ('destination', 'accept_mode', 'acquire_mode', )
    NAME = 'message.transfer'
    CLASS_CODE = 4
    CODE = 1
    INDEX = 0x0401
    FIELDS = (('destination', 'str8', False), ('accept_mode', 'uint8', True), ('acquire_mode', 'uint8', True), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))
    HEADER = True
    HEADER_STRUCTS = ('message.delivery-properties', 'message.fragment-properties', 'message.message-properties')
    BODY = True

    def __init__(self, destination=None, accept_mode=None, acquire_mode=None):
        self.destination = destination
        self.accept_mode = accept_mode
        self.acquire_mode = acquire_mode


class MessageAccept(Command):
    __slots__ = ('transfers', )
    NAME = 'message.accept'
    CLASS_CODE = 4
    CODE = 2
    INDEX = 0x0402
    FIELDS = (('transfers', 'sequence-set', True), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))

    def __init__(self, transfers=None):
        self.transfers = transfers


class MessageReject(Command):
    __slots__ = ('transfers', 'code', 'text', )
    NAME = 'message.reject'
    CLASS_CODE = 4
    CODE = 3
    INDEX = 0x0403
    FIELDS = (('transfers', 'sequence-set', True), ('code', 'uint16', True), ('text', 'str8', False), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))

    def __init__(self, transfers=None, code=None, text=None):
        self.transfers = transfers
        self.code = code
        self.text = text


class MessageRelease(Command):
    __slots__ = ('transfers', 'set_redelivered', )
    NAME = 'message.release'
    CLASS_CODE = 4
    CODE = 4
    INDEX = 0x0404
    FIELDS = (('transfers', 'sequence-set', True), ('set_redelivered', 'bit', False), )
    IMPLEMENT = (('server', 'must'), ('client', 'may'))

    def __init__(self, transfers=None, set_redelivered=False):
        self.transfers = transfers
        self.set_redelivered = set_redelivered


class MessageAcquire(Command):
    __slots__ = ('transfers', )
    NAME = 'message.acquire'
    CLASS_CODE = 4
    CODE = 5
    INDEX = 0x0405
    FIELDS = (('transfers', 'sequence-set', True), )
    IMPLEMENT = (('server', 'must'),)
    RESULT = 'message.acquired'

    def __init__(self, transfers=None):
        self.transfers = transfers


class MessageResume(Command):
    __slots__ = ('destination', 'resume_id', )
    NAME = 'message.resume'
    CLASS_CODE = 4
    CODE = 6
    INDEX = 0x0406
    FIELDS = (('destination', 'str8', False), ('resume_id', 'str16', True), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))
    RESULT = 'message.message-resume-result'

    def __init__(self, destination=None, resume_id=None):
        self.destination = destination
        self.resume_id = resume_id


class MessageSubscribe(Command):
    __slots__ = ('queue', 'destination', 'accept_mode', 'acquire_mode', 'exclusive', 'resume_id', 'resume_ttl', 'arguments', )
    NAME = 'message.subscribe'
    CLASS_CODE = 4
    CODE = 7
    INDEX = 0x0407
    FIELDS = (('queue', 'str8', True), ('destination', 'str8', False), ('accept_mode', 'uint8', True), ('acquire_mode', 'uint8', True), ('exclusive', 'bit', False), ('resume_id', 'str16', False), ('resume_ttl', 'uint64', False), ('arguments', 'map', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, queue=None, destination=None, accept_mode=None, acquire_mode=None, exclusive=False, resume_id=None, resume_ttl=None, arguments=None):
        self.queue = queue
        self.destination = destination
        self.accept_mode = accept_mode
        self.acquire_mode = acquire_mode
        self.exclusive = exclusive
        self.resume_id = resume_id
        self.resume_ttl = resume_ttl
        self.arguments = arguments


class MessageCancel(Command):
    __slots__ = ('destination', )
    NAME = 'message.cancel'
    CLASS_CODE = 4
    CODE = 8
    INDEX = 0x0408
    FIELDS = (('destination', 'str8', True), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, destination=None):
        self.destination = destination


class MessageSetFlowMode(Command):
    __slots__ = ('destination', 'flow_mode', )
    NAME = 'message.set-flow-mode'
    CLASS_CODE = 4
    CODE = 9
    INDEX = 0x0409
    FIELDS = (('destination', 'str8', False), ('flow_mode', 'uint8', True), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))

    def __init__(self, destination=None, flow_mode=None):
        self.destination = destination
        self.flow_mode = flow_mode


class MessageFlow(Command):
    __slots__ = ('destination', 'unit', 'value', )
    NAME = 'message.flow'
    CLASS_CODE = 4
    CODE = 10
    INDEX = 0x040A
    FIELDS = (('destination', 'str8', False), ('unit', 'uint8', True), ('value', 'uint32', False), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))

    def __init__(self, destination=None, unit=None, value=None):
        self.destination = destination
        self.unit = unit
        self.value = value


class MessageFlush(Command):
    __slots__ = ('destination', )
    NAME = 'message.flush'
    CLASS_CODE = 4
    CODE = 11
    INDEX = 0x040B
    FIELDS = (('destination', 'str8', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, destination=None):
        self.destination = destination


class MessageStop(Command):
    __slots__ = ('destination', )
    NAME = 'message.stop'
    CLASS_CODE = 4
    CODE = 12
    INDEX = 0x040C
    FIELDS = (('destination', 'str8', False), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))

    def __init__(self, destination=None):
        self.destination = destination


class TxSelect(Command):
    __slots__ = ()
    NAME = 'tx.select'
    CLASS_CODE = 5
    CODE = 1
    INDEX = 0x0501
    FIELDS = ()
    IMPLEMENT = (('server', 'must'),)


class TxCommit(Command):
    __slots__ = ()
    NAME = 'tx.commit'
    CLASS_CODE = 5
    CODE = 2
    INDEX = 0x0502
    FIELDS = ()
    IMPLEMENT = (('server', 'must'),)


class TxRollback(Command):
    __slots__ = ()
    NAME = 'tx.rollback'
    CLASS_CODE = 5
    CODE = 3
    INDEX = 0x0503
    FIELDS = ()
    IMPLEMENT = (('server', 'must'),)


class DtxSelect(Command):
    __slots__ = ()
    NAME = 'dtx.select'
    CLASS_CODE = 6
    CODE = 1
    INDEX = 0x0601
    FIELDS = ()
    IMPLEMENT = (('server', 'may'),)


class DtxStart(Command):
    __slots__ = ('xid', 'join', 'resume', )
    NAME = 'dtx.start'
    CLASS_CODE = 6
    CODE = 2
    INDEX = 0x0602
    FIELDS = (('xid', 'dtx.xid', True), ('join', 'bit', False), ('resume', 'bit', False), )
    IMPLEMENT = (('server', 'may'),)
    RESULT = 'dtx.xa-result'

    def __init__(self, xid=None, join=False, resume=False):
        self.xid = xid
        self.join = join
        self.resume = resume


class DtxEnd(Command):
    __slots__ = ('xid', 'fail', 'suspend', )
    NAME = 'dtx.end'
    CLASS_CODE = 6
    CODE = 3
    INDEX = 0x0603
    FIELDS = (('xid', 'dtx.xid', True), ('fail', 'bit', False), ('suspend', 'bit', False), )
    IMPLEMENT = (('server', 'may'),)
    RESULT = 'dtx.xa-result'

    def __init__(self, xid=None, fail=False, suspend=False):
        self.xid = xid
        self.fail = fail
        self.suspend = suspend


class DtxCommit(Command):
    __slots__ = ('xid', 'one_phase', )
    NAME = 'dtx.commit'
    CLASS_CODE = 6
    CODE = 4
    INDEX = 0x0604
    FIELDS = (('xid', 'dtx.xid', True), ('one_phase', 'bit', False), )
    IMPLEMENT = (('server', 'may'),)
    RESULT = 'dtx.xa-result'

    def __init__(self, xid=None, one_phase=False):
        self.xid = xid
        self.one_phase = one_phase


class DtxForget(Command):
    __slots__ = ('xid', )
    NAME = 'dtx.forget'
    CLASS_CODE = 6
    CODE = 5
    INDEX = 0x0605
    FIELDS = (('xid', 'dtx.xid', True), )
    IMPLEMENT = (('server', 'may'),)

    def __init__(self, xid=None):
        self.xid = xid


class DtxGetTimeout(Command):
    __slots__ = ('xid', )
    NAME = 'dtx.get-timeout'
    CLASS_CODE = 6
    CODE = 6
    INDEX = 0x0606
    FIELDS = (('xid', 'dtx.xid', True), )
    IMPLEMENT = (('server', 'may'),)
    RESULT = 'dtx.get-timeout-result'

    def __init__(self, xid=None):
        self.xid = xid


class DtxPrepare(Command):
    __slots__ = ('xid', )
    NAME = 'dtx.prepare'
    CLASS_CODE = 6
    CODE = 7
    INDEX = 0x0607
    FIELDS = (('xid', 'dtx.xid', True), )
    IMPLEMENT = (('server', 'may'),)
    RESULT = 'dtx.xa-result'

    def __init__(self, xid=None):
        self.xid = xid


class DtxRecover(Command):
    __slots__ = ()
    NAME = 'dtx.recover'
    CLASS_CODE = 6
    CODE = 8
    INDEX = 0x0608
    FIELDS = ()
    IMPLEMENT = (('server', 'may'),)
    RESULT = 'dtx.recover-result'


class DtxRollback(Command):
    __slots__ = ('xid', )
    NAME = 'dtx.rollback'
    CLASS_CODE = 6
    CODE = 9
    INDEX = 0x0609
    FIELDS = (('xid', 'dtx.xid', True), )
    IMPLEMENT = (('server', 'may'),)
    RESULT = 'dtx.xa-result'

    def __init__(self, xid=None):
        self.xid = xid


class DtxSetTimeout(Command):
    __slots__ = ('xid', 'timeout', )
    NAME = 'dtx.set-timeout'
    CLASS_CODE = 6
    CODE = 10
    INDEX = 0x060A
    FIELDS = (('xid', 'dtx.xid', True), ('timeout', 'uint32', True), )
    IMPLEMENT = (('server', 'may'),)

    def __init__(self, xid=None, timeout=None):
        self.xid = xid
        self.timeout = timeout


class ExchangeDeclare(Command):
    __slots__ = ('exchange', 'type', 'alternate_exchange', 'passive', 'durable', 'auto_delete', 'arguments', )
    NAME = 'exchange.declare'
    CLASS_CODE = 7
    CODE = 1
    INDEX = 0x0701
    FIELDS = (('exchange', 'str8', True), ('type', 'str8', True), ('alternate_exchange', 'str8', False), ('passive', 'bit', False), ('durable', 'bit', False), ('auto_delete', 'bit', False), ('arguments', 'map', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, exchange=None, type=None, alternate_exchange=None, passive=False, durable=False, auto_delete=False, arguments=None):
        self.exchange = exchange
        self.type = type
        self.alternate_exchange = alternate_exchange
        self.passive = passive
        self.durable = durable
        self.auto_delete = auto_delete
        self.arguments = arguments


class ExchangeDelete(Command):
    __slots__ = ('exchange', 'if_unused', )
    NAME = 'exchange.delete'
    CLASS_CODE = 7
    CODE = 2
    INDEX = 0x0702
    FIELDS = (('exchange', 'str8', True), ('if_unused', 'bit', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, exchange=None, if_unused=False):
        self.exchange = exchange
        self.if_unused = if_unused


class ExchangeQuery(Command):
    __slots__ = ('name', )
    NAME = 'exchange.query'
    CLASS_CODE = 7
    CODE = 3
    INDEX = 0x0703
    FIELDS = (('name', 'str8', False), )
    IMPLEMENT = (('server', 'must'),)
    RESULT = 'exchange.exchange-query-result'

    def __init__(self, name=None):
        self.name = name


class ExchangeBind(Command):
    __slots__ = ('queue', 'exchange', 'binding_key', 'arguments', )
    NAME = 'exchange.bind'
    CLASS_CODE = 7
    CODE = 4
    INDEX = 0x0704
    FIELDS = (('queue', 'str8', True), ('exchange', 'str8', True), ('binding_key', 'str8', True), ('arguments', 'map', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, queue=None, exchange=None, binding_key=None, arguments=None):
        self.queue = queue
        self.exchange = exchange
        self.binding_key = binding_key
        self.arguments = arguments


class ExchangeUnbind(Command):
    __slots__ = ('queue', 'exchange', 'binding_key', )
    NAME = 'exchange.unbind'
    CLASS_CODE = 7
    CODE = 5
    INDEX = 0x0705
    FIELDS = (('queue', 'str8', True), ('exchange', 'str8', True), ('binding_key', 'str8', True), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, queue=None, exchange=None, binding_key=None):
        self.queue = queue
        self.exchange = exchange
        self.binding_key = binding_key


class ExchangeBound(Command):
    __slots__ = ('exchange', 'queue', 'binding_key', 'arguments', )
    NAME = 'exchange.bound'
    CLASS_CODE = 7
    CODE = 6
    INDEX = 0x0706
    FIELDS = (('exchange', 'str8', False), ('queue', 'str8', True), ('binding_key', 'str8', False), ('arguments', 'map', False), )
    IMPLEMENT = (('server', 'must'),)
    RESULT = 'exchange.exchange-bound-result'

    def __init__(self, exchange=None, queue=None, binding_key=None, arguments=None):
        self.exchange = exchange
        self.queue = queue
        self.binding_key = binding_key
        self.arguments = arguments


class QueueDeclare(Command):
    __slots__ = ('queue', 'alternate_exchange', 'passive', 'durable', 'exclusive', 'auto_delete', 'arguments', )
    NAME = 'queue.declare'
    CLASS_CODE = 8
    CODE = 1
    INDEX = 0x0801
    FIELDS = (('queue', 'str8', True), ('alternate_exchange', 'str8', False), ('passive', 'bit', False), ('durable', 'bit', False), ('exclusive', 'bit', False), ('auto_delete', 'bit', False), ('arguments', 'map', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, queue=None, alternate_exchange=None, passive=False, durable=False, exclusive=False, auto_delete=False, arguments=None):
        self.queue = queue
        self.alternate_exchange = alternate_exchange
        self.passive = passive
        self.durable = durable
        self.exclusive = exclusive
        self.auto_delete = auto_delete
        self.arguments = arguments


class QueueDelete(Command):
    __slots__ = ('queue', 'if_unused', 'if_empty', )
    NAME = 'queue.delete'
    CLASS_CODE = 8
    CODE = 2
    INDEX = 0x0802
    FIELDS = (('queue', 'str8', True), ('if_unused', 'bit', False), ('if_empty', 'bit', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, queue=None, if_unused=False, if_empty=False):
        self.queue = queue
        self.if_unused = if_unused
        self.if_empty = if_empty


class QueuePurge(Command):
    __slots__ = ('queue', )
    NAME = 'queue.purge'
    CLASS_CODE = 8
    CODE = 3
    INDEX = 0x0803
    FIELDS = (('queue', 'str8', True), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, queue=None):
        self.queue = queue


class QueueQuery(Command):
    __slots__ = ('queue', )
    NAME = 'queue.query'
    CLASS_CODE = 8
    CODE = 4
    INDEX = 0x0804
    FIELDS = (('queue', 'str8', True), )
    IMPLEMENT = (('server', 'must'),)
    RESULT = 'queue.queue-query-result'

    def __init__(self, queue=None):
        self.queue = queue


class FileQos(Command):
    __slots__ = ('prefetch_size', 'prefetch_count', 'global_', )
    NAME = 'file.qos'
    CLASS_CODE = 9
    CODE = 1
    INDEX = 0x0901
    FIELDS = (('prefetch_size', 'uint32', False), ('prefetch_count', 'uint16', False), ('global_', 'bit', False), )
    IMPLEMENT = (('server', 'must'),)
    RESPONSES = ('file.qos-ok',)

    def __init__(self, prefetch_size=None, prefetch_count=None, global_=False):
        self.prefetch_size = prefetch_size
        self.prefetch_count = prefetch_count
        self.global_ = global_


class FileQosOk(Command):
    __slots__ = ()
    NAME = 'file.qos-ok'
    CLASS_CODE = 9
    CODE = 2
    INDEX = 0x0902
    FIELDS = ()
    IMPLEMENT = (('client', 'must'),)


class FileConsume(Command):
    __slots__ = ('queue', 'consumer_tag', 'no_local', 'no_ack', 'exclusive', 'nowait', 'arguments', )
    NAME = 'file.consume'
    CLASS_CODE = 9
    CODE = 3
    INDEX = 0x0903
    FIELDS = (('queue', 'str8', False), ('consumer_tag', 'str8', False), ('no_local', 'bit', False), ('no_ack', 'bit', False), ('exclusive', 'bit', False), ('nowait', 'bit', False), ('arguments', 'map', False), )
    IMPLEMENT = (('server', 'must'),)
    RESPONSES = ('file.consume-ok',)

    def __init__(self, queue=None, consumer_tag=None, no_local=False, no_ack=False, exclusive=False, nowait=False, arguments=None):
        self.queue = queue
        self.consumer_tag = consumer_tag
        self.no_local = no_local
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.nowait = nowait
        self.arguments = arguments


class FileConsumeOk(Command):
    __slots__ = ('consumer_tag', )
    NAME = 'file.consume-ok'
    CLASS_CODE = 9
    CODE = 4
    INDEX = 0x0904
    FIELDS = (('consumer_tag', 'str8', False), )
    IMPLEMENT = (('client', 'must'),)

    def __init__(self, consumer_tag=None):
        self.consumer_tag = consumer_tag


class FileCancel(Command):
    __slots__ = ('consumer_tag', )
    NAME = 'file.cancel'
    CLASS_CODE = 9
    CODE = 5
    INDEX = 0x0905
    FIELDS = (('consumer_tag', 'str8', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, consumer_tag=None):
        self.consumer_tag = consumer_tag


class FileOpen(Command):
    __slots__ = ('identifier', 'content_size', )
    NAME = 'file.open'
    CLASS_CODE = 9
    CODE = 6
    INDEX = 0x0906
    FIELDS = (('identifier', 'str8', False), ('content_size', 'uint64', False), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))
    RESPONSES = ('file.open-ok',)

    def __init__(self, identifier=None, content_size=None):
        self.identifier = identifier
        self.content_size = content_size


class FileOpenOk(Command):
    __slots__ = ('staged_size', )
    NAME = 'file.open-ok'
    CLASS_CODE = 9
    CODE = 7
    INDEX = 0x0907
    FIELDS = (('staged_size', 'uint64', False), )
    IMPLEMENT = (('server', 'must'), ('client', 'must'))
    RESPONSES = ('file.stage',)

    def __init__(self, staged_size=None):
        self.staged_size = staged_size


class FileStage(Command):
    __slots__ = ()
    NAME = 'file.stage'
    CLASS_CODE = 9
    CODE = 8
    INDEX = 0x0908
    FIELDS = ()
    IMPLEMENT = (('server', 'must'), ('client', 'must'))
    HEADER = True
    HEADER_STRUCTS = ('file.file-properties',)
    BODY = True


class FilePublish(Command):
    __slots__ = ('exchange', 'routing_key', 'mandatory', 'immediate', 'identifier', )
    NAME = 'file.publish'
    CLASS_CODE = 9
    CODE = 9
    INDEX = 0x0909
    FIELDS = (('exchange', 'str8', False), ('routing_key', 'str8', False), ('mandatory', 'bit', False), ('immediate', 'bit', False), ('identifier', 'str8', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, exchange=None, routing_key=None, mandatory=False, immediate=False, identifier=None):
        self.exchange = exchange
        self.routing_key = routing_key
        self.mandatory = mandatory
        self.immediate = immediate
        self.identifier = identifier


class FileReturn(Command):
    __slots__ = ('reply_code', 'reply_text', 'exchange', 'routing_key', )
    NAME = 'file.return'
    CLASS_CODE = 9
    CODE = 10
    INDEX = 0x090A
    FIELDS = (('reply_code', 'uint16', False), ('reply_text', 'str8', False), ('exchange', 'str8', False), ('routing_key', 'str8', False), )
    IMPLEMENT = (('client', 'must'),)
    HEADER = True
    HEADER_STRUCTS = ('file.file-properties',)
    BODY = True

    def __init__(self, reply_code=None, reply_text=None, exchange=None, routing_key=None):
        self.reply_code = reply_code
        self.reply_text = reply_text
        self.exchange = exchange
        self.routing_key = routing_key


class FileDeliver(Command):
    __slots__ = ('consumer_tag', 'delivery_tag', 'redelivered', 'exchange', 'routing_key', 'identifier', )
    NAME = 'file.deliver'
    CLASS_CODE = 9
    CODE = 11
    INDEX = 0x090B
    FIELDS = (('consumer_tag', 'str8', False), ('delivery_tag', 'uint64', False), ('redelivered', 'bit', False), ('exchange', 'str8', False), ('routing_key', 'str8', False), ('identifier', 'str8', False), )
    IMPLEMENT = (('client', 'must'),)

    def __init__(self, consumer_tag=None, delivery_tag=None, redelivered=False, exchange=None, routing_key=None, identifier=None):
        self.consumer_tag = consumer_tag
        self.delivery_tag = delivery_tag
        self.redelivered = redelivered
        self.exchange = exchange
        self.routing_key = routing_key
        self.identifier = identifier


class FileAck(Command):
    __slots__ = ('delivery_tag', 'multiple', )
    NAME = 'file.ack'
    CLASS_CODE = 9
    CODE = 12
    INDEX = 0x090C
    FIELDS = (('delivery_tag', 'uint64', False), ('multiple', 'bit', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, delivery_tag=None, multiple=False):
        self.delivery_tag = delivery_tag
        self.multiple = multiple


class FileReject(Command):
    __slots__ = ('delivery_tag', 'requeue', )
    NAME = 'file.reject'
    CLASS_CODE = 9
    CODE = 13
    INDEX = 0x090D
    FIELDS = (('delivery_tag', 'uint64', False), ('requeue', 'bit', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, delivery_tag=None, requeue=False):
        self.delivery_tag = delivery_tag
        self.requeue = requeue


class StreamQos(Command):
    __slots__ = ('prefetch_size', 'prefetch_count', 'consume_rate', 'global_', )
    NAME = 'stream.qos'
    CLASS_CODE = 10
    CODE = 1
    INDEX = 0x0A01
    FIELDS = (('prefetch_size', 'uint32', False), ('prefetch_count', 'uint16', False), ('consume_rate', 'uint32', False), ('global_', 'bit', False), )
    IMPLEMENT = (('server', 'must'),)
    RESPONSES = ('stream.qos-ok',)

    def __init__(self, prefetch_size=None, prefetch_count=None, consume_rate=None, global_=False):
        self.prefetch_size = prefetch_size
        self.prefetch_count = prefetch_count
        self.consume_rate = consume_rate
        self.global_ = global_


class StreamQosOk(Command):
    __slots__ = ()
    NAME = 'stream.qos-ok'
    CLASS_CODE = 10
    CODE = 2
    INDEX = 0x0A02
    FIELDS = ()
    IMPLEMENT = (('client', 'must'),)


class StreamConsume(Command):
    __slots__ = ('queue', 'consumer_tag', 'no_local', 'exclusive', 'nowait', 'arguments', )
    NAME = 'stream.consume'
    CLASS_CODE = 10
    CODE = 3
    INDEX = 0x0A03
    FIELDS = (('queue', 'str8', False), ('consumer_tag', 'str8', False), ('no_local', 'bit', False), ('exclusive', 'bit', False), ('nowait', 'bit', False), ('arguments', 'map', False), )
    IMPLEMENT = (('server', 'must'),)
    RESPONSES = ('stream.consume-ok',)

    def __init__(self, queue=None, consumer_tag=None, no_local=False, exclusive=False, nowait=False, arguments=None):
        self.queue = queue
        self.consumer_tag = consumer_tag
        self.no_local = no_local
        self.exclusive = exclusive
        self.nowait = nowait
        self.arguments = arguments


class StreamConsumeOk(Command):
    __slots__ = ('consumer_tag', )
    NAME = 'stream.consume-ok'
    CLASS_CODE = 10
    CODE = 4
    INDEX = 0x0A04
    FIELDS = (('consumer_tag', 'str8', False), )
    IMPLEMENT = (('client', 'must'),)

    def __init__(self, consumer_tag=None):
        self.consumer_tag = consumer_tag


class StreamCancel(Command):
    __slots__ = ('consumer_tag', )
    NAME = 'stream.cancel'
    CLASS_CODE = 10
    CODE = 5
    INDEX = 0x0A05
    FIELDS = (('consumer_tag', 'str8', False), )
    IMPLEMENT = (('server', 'must'),)

    def __init__(self, consumer_tag=None):
        self.consumer_tag = consumer_tag


class StreamPublish(Command):
    __slots__ = ('exchange', 'routing_key', 'mandatory', 'immediate', )
    NAME = 'stream.publish'
    CLASS_CODE = 10
    CODE = 6
    INDEX = 0x0A06
    FIELDS = (('exchange', 'str8', False), ('routing_key', 'str8', False), ('mandatory', 'bit', False), ('immediate', 'bit', False), )
    IMPLEMENT = (('server', 'must'),)
    HEADER = True
    HEADER_STRUCTS = ('stream.stream-properties',)
    BODY = True

    def __init__(self, exchange=None, routing_key=None, mandatory=False, immediate=False):
        self.exchange = exchange
        self.routing_key = routing_key
        self.mandatory = mandatory
        self.immediate = immediate


class StreamReturn(Command):
    __slots__ = ('reply_code', 'reply_text', 'exchange', 'routing_key', )
    NAME = 'stream.return'
    CLASS_CODE = 10
    CODE = 7
    INDEX = 0x0A07
    FIELDS = (('reply_code', 'uint16', False), ('reply_text', 'str8', False), ('exchange', 'str8', False), ('routing_key', 'str8', False), )
    IMPLEMENT = (('client', 'must'),)
    HEADER = True
    HEADER_STRUCTS = ('stream.stream-properties',)
    BODY = True

    def __init__(self, reply_code=None, reply_text=None, exchange=None, routing_key=None):
        self.reply_code = reply_code
        self.reply_text = reply_text
        self.exchange = exchange
        self.routing_key = routing_key


class StreamDeliver(Command):
    __slots__ = ('consumer_tag', 'delivery_tag', 'exchange', 'queue', )
    NAME = 'stream.deliver'
    CLASS_CODE = 10
    CODE = 8
    INDEX = 0x0A08
    FIELDS = (('consumer_tag', 'str8', False), ('delivery_tag', 'uint64', False), ('exchange', 'str8', False), ('queue', 'str8', True), )
    IMPLEMENT = (('client', 'must'),)
    HEADER = True
    HEADER_STRUCTS = ('stream.stream-properties',)
    BODY = True

    def __init__(self, consumer_tag=None, delivery_tag=None, exchange=None, queue=None):
        self.consumer_tag = consumer_tag
        self.delivery_tag = delivery_tag
        self.exchange = exchange
        self.queue = queue


# CONTROLS, COMMANDS: class code << 8 | op code -> class; STRUCTS: the same for coded structs;
# BY_NAME: NAME -> class (every control, command and struct)
CONTROLS, COMMANDS, STRUCTS, BY_NAME = tables(globals())
# enum domain of a field: (NAME of the control/command/struct, field) -> enum class
FIELD_ENUMS = {
    ('message.delivery-properties', 'priority'): MessageDeliveryPriority,
    ('message.delivery-properties', 'delivery_mode'): MessageDeliveryMode,
    ('dtx.xa-result', 'status'): DtxXaStatus,
    ('connection.close', 'reply_code'): ConnectionCloseCode,
    ('session.detached', 'code'): SessionDetachCode,
    ('execution.exception', 'error_code'): ExecutionErrorCode,
    ('message.transfer', 'accept_mode'): MessageAcceptMode,
    ('message.transfer', 'acquire_mode'): MessageAcquireMode,
    ('message.reject', 'code'): MessageRejectCode,
    ('message.subscribe', 'accept_mode'): MessageAcceptMode,
    ('message.subscribe', 'acquire_mode'): MessageAcquireMode,
    ('message.set-flow-mode', 'flow_mode'): MessageFlowMode,
    ('message.flow', 'unit'): MessageCreditUnit,
    ('file.return', 'reply_code'): FileReturnCode,
    ('stream.return', 'reply_code'): StreamReturnCode,
}
