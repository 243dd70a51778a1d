"""AMQP 1.0 type tables.

Generated from spec/amqp1_0/{types.xml,transport.xml,messaging.xml,security.xml,transactions.xml}
by tools/gen_spec.py; do not edit, run the tool. Classes and their meaning:
warren/spec/base1_0.py; wire forms: warren/codec/amqp1_0.
"""

# fmt: off
import enum

from warren.spec.base1_0 import Composite, Field as F, tables

VERSION = (1, 0, 0)
PORT = 5672
SECURE_PORT = 5671
MAJOR = 1
MINOR = 0
REVISION = 0
MIN_MAX_FRAME_SIZE = 512
MESSAGE_FORMAT = 0
TLS_MAJOR = 1
TLS_MINOR = 0
TLS_REVISION = 0
SASL_MAJOR = 1
SASL_MINOR = 0
SASL_REVISION = 0

# primitive -> ((encoding name or None, code, category, width), ...): part 1 §1.6
ENCODINGS = {
    'null': ((None, 0x40, 'fixed', 0), ),
    'boolean': ((None, 0x56, 'fixed', 1), ('true', 0x41, 'fixed', 0), ('false', 0x42, 'fixed', 0), ),
    'ubyte': ((None, 0x50, 'fixed', 1), ),
    'ushort': ((None, 0x60, 'fixed', 2), ),
    'uint': ((None, 0x70, 'fixed', 4), ('smalluint', 0x52, 'fixed', 1), ('uint0', 0x43, 'fixed', 0), ),
    'ulong': ((None, 0x80, 'fixed', 8), ('smallulong', 0x53, 'fixed', 1), ('ulong0', 0x44, 'fixed', 0), ),
    'byte': ((None, 0x51, 'fixed', 1), ),
    'short': ((None, 0x61, 'fixed', 2), ),
    'int': ((None, 0x71, 'fixed', 4), ('smallint', 0x54, 'fixed', 1), ),
    'long': ((None, 0x81, 'fixed', 8), ('smalllong', 0x55, 'fixed', 1), ),
    'float': (('ieee-754', 0x72, 'fixed', 4), ),
    'double': (('ieee-754', 0x82, 'fixed', 8), ),
    'decimal32': (('ieee-754', 0x74, 'fixed', 4), ),
    'decimal64': (('ieee-754', 0x84, 'fixed', 8), ),
    'decimal128': (('ieee-754', 0x94, 'fixed', 16), ),
    'char': (('utf32', 0x73, 'fixed', 4), ),
    'timestamp': (('ms64', 0x83, 'fixed', 8), ),
    'uuid': ((None, 0x98, 'fixed', 16), ),
    'binary': (('vbin8', 0xA0, 'variable', 1), ('vbin32', 0xB0, 'variable', 4), ),
    'string': (('str8-utf8', 0xA1, 'variable', 1), ('str32-utf8', 0xB1, 'variable', 4), ),
    'symbol': (('sym8', 0xA3, 'variable', 1), ('sym32', 0xB3, 'variable', 4), ),
    'list': (('list0', 0x45, 'fixed', 0), ('list8', 0xC0, 'compound', 1), ('list32', 0xD0, 'compound', 4), ),
    'map': (('map8', 0xC1, 'compound', 1), ('map32', 0xD1, 'compound', 4), ),
    'array': (('array8', 0xE0, 'array', 1), ('array32', 0xF0, 'array', 4), ),
}

# restricted type -> the type it restricts (part 1 §1.3)
RESTRICTED = {
    'role': 'boolean',
    'sender-settle-mode': 'ubyte',
    'receiver-settle-mode': 'ubyte',
    'handle': 'uint',
    'seconds': 'uint',
    'milliseconds': 'uint',
    'delivery-tag': 'binary',
    'delivery-number': 'sequence-no',
    'transfer-number': 'sequence-no',
    'sequence-no': 'uint',
    'message-format': 'uint',
    'ietf-language-tag': 'symbol',
    'fields': 'map',
    'amqp-error': 'symbol',
    'connection-error': 'symbol',
    'session-error': 'symbol',
    'link-error': 'symbol',
    'delivery-annotations': 'annotations',
    'message-annotations': 'annotations',
    'application-properties': 'map',
    'data': 'binary',
    'amqp-sequence': 'list',
    'amqp-value': '*',
    'footer': 'annotations',
    'annotations': 'map',
    'message-id-ulong': 'ulong',
    'message-id-uuid': 'uuid',
    'message-id-binary': 'binary',
    'message-id-string': 'string',
    'address-string': 'string',
    'terminus-durability': 'uint',
    'terminus-expiry-policy': 'symbol',
    'std-dist-mode': 'symbol',
    'filter-set': 'map',
    'node-properties': 'fields',
    'sasl-code': 'ubyte',
    'transaction-id': 'binary',
    'txn-capability': 'symbol',
    'transaction-error': 'symbol',
}
# restricted types with a descriptor (message sections): name -> (symbol, code, source)
DESCRIBED = {
    'delivery-annotations': ('amqp:delivery-annotations:map', 0x0000000000000071, 'annotations'),
    'message-annotations': ('amqp:message-annotations:map', 0x0000000000000072, 'annotations'),
    'application-properties': ('amqp:application-properties:map', 0x0000000000000074, 'map'),
    'data': ('amqp:data:binary', 0x0000000000000075, 'binary'),
    'amqp-sequence': ('amqp:amqp-sequence:list', 0x0000000000000076, 'list'),
    'amqp-value': ('amqp:amqp-value:*', 0x0000000000000077, '*'),
    'footer': ('amqp:footer:map', 0x0000000000000078, 'annotations'),
}
# what each type provides (part 1 §1.5: a field's "requires" names one of these)
PROVIDES = {
    'open': ('frame',),
    'begin': ('frame',),
    'attach': ('frame',),
    'flow': ('frame',),
    'transfer': ('frame',),
    'disposition': ('frame',),
    'detach': ('frame',),
    'end': ('frame',),
    'close': ('frame',),
    'amqp-error': ('error-condition',),
    'connection-error': ('error-condition',),
    'session-error': ('error-condition',),
    'link-error': ('error-condition',),
    'header': ('section',),
    'delivery-annotations': ('section',),
    'message-annotations': ('section',),
    'properties': ('section',),
    'application-properties': ('section',),
    'data': ('section',),
    'amqp-sequence': ('section',),
    'amqp-value': ('section',),
    'footer': ('section',),
    'message-id-ulong': ('message-id',),
    'message-id-uuid': ('message-id',),
    'message-id-binary': ('message-id',),
    'message-id-string': ('message-id',),
    'address-string': ('address',),
    'received': ('delivery-state',),
    'accepted': ('delivery-state', 'outcome'),
    'rejected': ('delivery-state', 'outcome'),
    'released': ('delivery-state', 'outcome'),
    'modified': ('delivery-state', 'outcome'),
    'source': ('source',),
    'target': ('target',),
    'std-dist-mode': ('distribution-mode',),
    'delete-on-close': ('lifetime-policy',),
    'delete-on-no-links': ('lifetime-policy',),
    'delete-on-no-messages': ('lifetime-policy',),
    'delete-on-no-links-or-messages': ('lifetime-policy',),
    'sasl-mechanisms': ('sasl-frame',),
    'sasl-init': ('sasl-frame',),
    'sasl-challenge': ('sasl-frame',),
    'sasl-response': ('sasl-frame',),
    'sasl-outcome': ('sasl-frame',),
    'coordinator': ('target',),
    'transaction-id': ('txn-id',),
    'declared': ('delivery-state', 'outcome'),
    'transactional-state': ('delivery-state',),
    'txn-capability': ('txn-capability',),
    'transaction-error': ('error-condition',),
}


class Role:
    """role (boolean)"""
    SENDER = False
    RECEIVER = True


class SenderSettleMode(enum.IntEnum):
    """sender-settle-mode (ubyte)"""
    UNSETTLED = 0
    SETTLED = 1
    MIXED = 2


class ReceiverSettleMode(enum.IntEnum):
    """receiver-settle-mode (ubyte)"""
    FIRST = 0
    SECOND = 1


class AmqpError(str, enum.Enum):
    """amqp-error (symbol)"""
    INTERNAL_ERROR = 'amqp:internal-error'
    NOT_FOUND = 'amqp:not-found'
    UNAUTHORIZED_ACCESS = 'amqp:unauthorized-access'
    DECODE_ERROR = 'amqp:decode-error'
    RESOURCE_LIMIT_EXCEEDED = 'amqp:resource-limit-exceeded'
    NOT_ALLOWED = 'amqp:not-allowed'
    INVALID_FIELD = 'amqp:invalid-field'
    NOT_IMPLEMENTED = 'amqp:not-implemented'
    RESOURCE_LOCKED = 'amqp:resource-locked'
    PRECONDITION_FAILED = 'amqp:precondition-failed'
    RESOURCE_DELETED = 'amqp:resource-deleted'
    ILLEGAL_STATE = 'amqp:illegal-state'
    FRAME_SIZE_TOO_SMALL = 'amqp:frame-size-too-small'


class ConnectionError(str, enum.Enum):
    """connection-error (symbol)"""
    CONNECTION_FORCED = 'amqp:connection:forced'
    FRAMING_ERROR = 'amqp:connection:framing-error'
    REDIRECT = 'amqp:connection:redirect'


class SessionError(str, enum.Enum):
    """session-error (symbol)"""
    WINDOW_VIOLATION = 'amqp:session:window-violation'
    ERRANT_LINK = 'amqp:session:errant-link'
    HANDLE_IN_USE = 'amqp:session:handle-in-use'
    UNATTACHED_HANDLE = 'amqp:session:unattached-handle'


class LinkError(str, enum.Enum):
    """link-error (symbol)"""
    DETACH_FORCED = 'amqp:link:detach-forced'
    TRANSFER_LIMIT_EXCEEDED = 'amqp:link:transfer-limit-exceeded'
    MESSAGE_SIZE_EXCEEDED = 'amqp:link:message-size-exceeded'
    REDIRECT = 'amqp:link:redirect'
    STOLEN = 'amqp:link:stolen'


class TerminusDurability(enum.IntEnum):
    """terminus-durability (uint)"""
    NONE = 0
    CONFIGURATION = 1
    UNSETTLED_STATE = 2


class TerminusExpiryPolicy(str, enum.Enum):
    """terminus-expiry-policy (symbol)"""
    LINK_DETACH = 'link-detach'
    SESSION_END = 'session-end'
    CONNECTION_CLOSE = 'connection-close'
    NEVER = 'never'


class StdDistMode(str, enum.Enum):
    """std-dist-mode (symbol)"""
    MOVE = 'move'
    COPY = 'copy'


class SaslCode(enum.IntEnum):
    """sasl-code (ubyte)"""
    OK = 0
    AUTH = 1
    SYS = 2
    SYS_PERM = 3
    SYS_TEMP = 4


class TxnCapability(str, enum.Enum):
    """txn-capability (symbol)"""
    LOCAL_TRANSACTIONS = 'amqp:local-transactions'
    DISTRIBUTED_TRANSACTIONS = 'amqp:distributed-transactions'
    PROMOTABLE_TRANSACTIONS = 'amqp:promotable-transactions'
    MULTI_TXNS_PER_SSN = 'amqp:multi-txns-per-ssn'
    MULTI_SSNS_PER_TXN = 'amqp:multi-ssns-per-txn'


class TransactionError(str, enum.Enum):
    """transaction-error (symbol)"""
    UNKNOWN_ID = 'amqp:transaction:unknown-id'
    TRANSACTION_ROLLBACK = 'amqp:transaction:rollback'
    TRANSACTION_TIMEOUT = 'amqp:transaction:timeout'


class Open(Composite):
    __slots__ = ('container_id', 'hostname', 'max_frame_size', 'channel_max', 'idle_time_out', 'outgoing_locales', 'incoming_locales', 'offered_capabilities', 'desired_capabilities', 'properties', )
    NAME = 'open'
    SYMBOL = 'amqp:open:list'
    CODE = 0x0000000000000010
    PROVIDES = ('frame',)
    FIELDS = (
        F('container_id', 'string', 'string', True, False, None, None),
        F('hostname', 'string', 'string', False, False, None, None),
        F('max_frame_size', 'uint', 'uint', False, False, 4294967295, None),
        F('channel_max', 'ushort', 'ushort', False, False, 65535, None),
        F('idle_time_out', 'milliseconds', 'uint', False, False, None, None),
        F('outgoing_locales', 'ietf-language-tag', 'symbol', False, True, None, None),
        F('incoming_locales', 'ietf-language-tag', 'symbol', False, True, None, None),
        F('offered_capabilities', 'symbol', 'symbol', False, True, None, None),
        F('desired_capabilities', 'symbol', 'symbol', False, True, None, None),
        F('properties', 'fields', 'map', False, False, None, None),
    )


class Begin(Composite):
    __slots__ = ('remote_channel', 'next_outgoing_id', 'incoming_window', 'outgoing_window', 'handle_max', 'offered_capabilities', 'desired_capabilities', 'properties', )
    NAME = 'begin'
    SYMBOL = 'amqp:begin:list'
    CODE = 0x0000000000000011
    PROVIDES = ('frame',)
    FIELDS = (
        F('remote_channel', 'ushort', 'ushort', False, False, None, None),
        F('next_outgoing_id', 'transfer-number', 'uint', True, False, None, None),
        F('incoming_window', 'uint', 'uint', True, False, None, None),
        F('outgoing_window', 'uint', 'uint', True, False, None, None),
        F('handle_max', 'handle', 'uint', False, False, 4294967295, None),
        F('offered_capabilities', 'symbol', 'symbol', False, True, None, None),
        F('desired_capabilities', 'symbol', 'symbol', False, True, None, None),
        F('properties', 'fields', 'map', False, False, None, None),
    )


class Attach(Composite):
    __slots__ = ('name', 'handle', 'role', 'snd_settle_mode', 'rcv_settle_mode', 'source', 'target', 'unsettled', 'incomplete_unsettled', 'initial_delivery_count', 'max_message_size', 'offered_capabilities', 'desired_capabilities', 'properties', )
    NAME = 'attach'
    SYMBOL = 'amqp:attach:list'
    CODE = 0x0000000000000012
    PROVIDES = ('frame',)
    FIELDS = (
        F('name', 'string', 'string', True, False, None, None),
        F('handle', 'handle', 'uint', True, False, None, None),
        F('role', 'role', 'boolean', True, False, None, None),
        F('snd_settle_mode', 'sender-settle-mode', 'ubyte', False, False, 2, None),
        F('rcv_settle_mode', 'receiver-settle-mode', 'ubyte', False, False, 0, None),
        F('source', '*', '*', False, False, None, 'source'),
        F('target', '*', '*', False, False, None, 'target'),
        F('unsettled', 'map', 'map', False, False, None, None),
        F('incomplete_unsettled', 'boolean', 'boolean', False, False, False, None),
        F('initial_delivery_count', 'sequence-no', 'uint', False, False, None, None),
        F('max_message_size', 'ulong', 'ulong', False, False, None, None),
        F('offered_capabilities', 'symbol', 'symbol', False, True, None, None),
        F('desired_capabilities', 'symbol', 'symbol', False, True, None, None),
        F('properties', 'fields', 'map', False, False, None, None),
    )


class Flow(Composite):
    __slots__ = ('next_incoming_id', 'incoming_window', 'next_outgoing_id', 'outgoing_window', 'handle', 'delivery_count', 'link_credit', 'available', 'drain', 'echo', 'properties', )
    NAME = 'flow'
    SYMBOL = 'amqp:flow:list'
    CODE = 0x0000000000000013
    PROVIDES = ('frame',)
    FIELDS = (
        F('next_incoming_id', 'transfer-number', 'uint', False, False, None, None),
        F('incoming_window', 'uint', 'uint', True, False, None, None),
        F('next_outgoing_id', 'transfer-number', 'uint', True, False, None, None),
        F('outgoing_window', 'uint', 'uint', True, False, None, None),
        F('handle', 'handle', 'uint', False, False, None, None),
        F('delivery_count', 'sequence-no', 'uint', False, False, None, None),
        F('link_credit', 'uint', 'uint', False, False, None, None),
        F('available', 'uint', 'uint', False, False, None, None),
        F('drain', 'boolean', 'boolean', False, False, False, None),
        F('echo', 'boolean', 'boolean', False, False, False, None),
        F('properties', 'fields', 'map', False, False, None, None),
    )


class Transfer(Composite):
    __slots__ = ('handle', 'delivery_id', 'delivery_tag', 'message_format', 'settled', 'more', 'rcv_settle_mode', 'state', 'resume', 'aborted', 'batchable', )
    NAME = 'transfer'
    SYMBOL = 'amqp:transfer:list'
    CODE = 0x0000000000000014
    PROVIDES = ('frame',)
    FIELDS = (
        F('handle', 'handle', 'uint', True, False, None, None),
        F('delivery_id', 'delivery-number', 'uint', False, False, None, None),
        F('delivery_tag', 'delivery-tag', 'binary', False, False, None, None),
        F('message_format', 'message-format', 'uint', False, False, None, None),
        F('settled', 'boolean', 'boolean', False, False, None, None),
        F('more', 'boolean', 'boolean', False, False, False, None),
        F('rcv_settle_mode', 'receiver-settle-mode', 'ubyte', False, False, None, None),
        F('state', '*', '*', False, False, None, 'delivery-state'),
        F('resume', 'boolean', 'boolean', False, False, False, None),
        F('aborted', 'boolean', 'boolean', False, False, False, None),
        F('batchable', 'boolean', 'boolean', False, False, False, None),
    )


class Disposition(Composite):
    __slots__ = ('role', 'first', 'last', 'settled', 'state', 'batchable', )
    NAME = 'disposition'
    SYMBOL = 'amqp:disposition:list'
    CODE = 0x0000000000000015
    PROVIDES = ('frame',)
    FIELDS = (
        F('role', 'role', 'boolean', True, False, None, None),
        F('first', 'delivery-number', 'uint', True, False, None, None),
        F('last', 'delivery-number', 'uint', False, False, None, None),
        F('settled', 'boolean', 'boolean', False, False, False, None),
        F('state', '*', '*', False, False, None, 'delivery-state'),
        F('batchable', 'boolean', 'boolean', False, False, False, None),
    )


class Detach(Composite):
    __slots__ = ('handle', 'closed', 'error', )
    NAME = 'detach'
    SYMBOL = 'amqp:detach:list'
    CODE = 0x0000000000000016
    PROVIDES = ('frame',)
    FIELDS = (
        F('handle', 'handle', 'uint', True, False, None, None),
        F('closed', 'boolean', 'boolean', False, False, False, None),
        F('error', 'error', 'list', False, False, None, None),
    )


class End(Composite):
    __slots__ = ('error', )
    NAME = 'end'
    SYMBOL = 'amqp:end:list'
    CODE = 0x0000000000000017
    PROVIDES = ('frame',)
    FIELDS = (
        F('error', 'error', 'list', False, False, None, None),
    )


class Close(Composite):
    __slots__ = ('error', )
    NAME = 'close'
    SYMBOL = 'amqp:close:list'
    CODE = 0x0000000000000018
    PROVIDES = ('frame',)
    FIELDS = (
        F('error', 'error', 'list', False, False, None, None),
    )


class Error(Composite):
    __slots__ = ('condition', 'description', 'info', )
    NAME = 'error'
    SYMBOL = 'amqp:error:list'
    CODE = 0x000000000000001D
    PROVIDES = ()
    FIELDS = (
        F('condition', 'symbol', 'symbol', True, False, None, 'error-condition'),
        F('description', 'string', 'string', False, False, None, None),
        F('info', 'fields', 'map', False, False, None, None),
    )


class Header(Composite):
    __slots__ = ('durable', 'priority', 'ttl', 'first_acquirer', 'delivery_count', )
    NAME = 'header'
    SYMBOL = 'amqp:header:list'
    CODE = 0x0000000000000070
    PROVIDES = ('section',)
    FIELDS = (
        F('durable', 'boolean', 'boolean', False, False, False, None),
        F('priority', 'ubyte', 'ubyte', False, False, 4, None),
        F('ttl', 'milliseconds', 'uint', False, False, None, None),
        F('first_acquirer', 'boolean', 'boolean', False, False, False, None),
        F('delivery_count', 'uint', 'uint', False, False, 0, None),
    )


class Properties(Composite):
    __slots__ = ('message_id', 'user_id', 'to', 'subject', 'reply_to', 'correlation_id', 'content_type', 'content_encoding', 'absolute_expiry_time', 'creation_time', 'group_id', 'group_sequence', 'reply_to_group_id', )
    NAME = 'properties'
    SYMBOL = 'amqp:properties:list'
    CODE = 0x0000000000000073
    PROVIDES = ('section',)
    FIELDS = (
        F('message_id', '*', '*', False, False, None, 'message-id'),
        F('user_id', 'binary', 'binary', False, False, None, None),
        F('to', '*', '*', False, False, None, 'address'),
        F('subject', 'string', 'string', False, False, None, None),
        F('reply_to', '*', '*', False, False, None, 'address'),
        F('correlation_id', '*', '*', False, False, None, 'message-id'),
        F('content_type', 'symbol', 'symbol', False, False, None, None),
        F('content_encoding', 'symbol', 'symbol', False, False, None, None),
        F('absolute_expiry_time', 'timestamp', 'timestamp', False, False, None, None),
        F('creation_time', 'timestamp', 'timestamp', False, False, None, None),
        F('group_id', 'string', 'string', False, False, None, None),
        F('group_sequence', 'sequence-no', 'uint', False, False, None, None),
        F('reply_to_group_id', 'string', 'string', False, False, None, None),
    )


class Received(Composite):
    __slots__ = ('section_number', 'section_offset', )
    NAME = 'received'
    SYMBOL = 'amqp:received:list'
    CODE = 0x0000000000000023
    PROVIDES = ('delivery-state',)
    FIELDS = (
        F('section_number', 'uint', 'uint', True, False, None, None),
        F('section_offset', 'ulong', 'ulong', True, False, None, None),
    )


class Accepted(Composite):
    __slots__ = ()
    NAME = 'accepted'
    SYMBOL = 'amqp:accepted:list'
    CODE = 0x0000000000000024
    PROVIDES = ('delivery-state', 'outcome')
    FIELDS = (
    )


class Rejected(Composite):
    __slots__ = ('error', )
    NAME = 'rejected'
    SYMBOL = 'amqp:rejected:list'
    CODE = 0x0000000000000025
    PROVIDES = ('delivery-state', 'outcome')
    FIELDS = (
        F('error', 'error', 'list', False, False, None, None),
    )


class Released(Composite):
    __slots__ = ()
    NAME = 'released'
    SYMBOL = 'amqp:released:list'
    CODE = 0x0000000000000026
    PROVIDES = ('delivery-state', 'outcome')
    FIELDS = (
    )


class Modified(Composite):
    __slots__ = ('delivery_failed', 'undeliverable_here', 'message_annotations', )
    NAME = 'modified'
    SYMBOL = 'amqp:modified:list'
    CODE = 0x0000000000000027
    PROVIDES = ('delivery-state', 'outcome')
    FIELDS = (
        F('delivery_failed', 'boolean', 'boolean', False, False, None, None),
        F('undeliverable_here', 'boolean', 'boolean', False, False, None, None),
        F('message_annotations', 'fields', 'map', False, False, None, None),
    )


class Source(Composite):
    __slots__ = ('address', 'durable', 'expiry_policy', 'timeout', 'dynamic', 'dynamic_node_properties', 'distribution_mode', 'filter', 'default_outcome', 'outcomes', 'capabilities', )
    NAME = 'source'
    SYMBOL = 'amqp:source:list'
    CODE = 0x0000000000000028
    PROVIDES = ('source',)
    FIELDS = (
        F('address', '*', '*', False, False, None, 'address'),
        F('durable', 'terminus-durability', 'uint', False, False, 0, None),
        F('expiry_policy', 'terminus-expiry-policy', 'symbol', False, False, 'session-end', None),
        F('timeout', 'seconds', 'uint', False, False, 0, None),
        F('dynamic', 'boolean', 'boolean', False, False, False, None),
        F('dynamic_node_properties', 'node-properties', 'map', False, False, None, None),
        F('distribution_mode', 'symbol', 'symbol', False, False, None, 'distribution-mode'),
        F('filter', 'filter-set', 'map', False, False, None, None),
        F('default_outcome', '*', '*', False, False, None, 'outcome'),
        F('outcomes', 'symbol', 'symbol', False, True, None, None),
        F('capabilities', 'symbol', 'symbol', False, True, None, None),
    )


class Target(Composite):
    __slots__ = ('address', 'durable', 'expiry_policy', 'timeout', 'dynamic', 'dynamic_node_properties', 'capabilities', )
    NAME = 'target'
    SYMBOL = 'amqp:target:list'
    CODE = 0x0000000000000029
    PROVIDES = ('target',)
    FIELDS = (
        F('address', '*', '*', False, False, None, 'address'),
        F('durable', 'terminus-durability', 'uint', False, False, 0, None),
        F('expiry_policy', 'terminus-expiry-policy', 'symbol', False, False, 'session-end', None),
        F('timeout', 'seconds', 'uint', False, False, 0, None),
        F('dynamic', 'boolean', 'boolean', False, False, False, None),
        F('dynamic_node_properties', 'node-properties', 'map', False, False, None, None),
        F('capabilities', 'symbol', 'symbol', False, True, None, None),
    )


class DeleteOnClose(Composite):
    __slots__ = ()
    NAME = 'delete-on-close'
    SYMBOL = 'amqp:delete-on-close:list'
    CODE = 0x000000000000002B
    PROVIDES = ('lifetime-policy',)
    FIELDS = (
    )


class DeleteOnNoLinks(Composite):
    __slots__ = ()
    NAME = 'delete-on-no-links'
    SYMBOL = 'amqp:delete-on-no-links:list'
    CODE = 0x000000000000002C
    PROVIDES = ('lifetime-policy',)
    FIELDS = (
    )


class DeleteOnNoMessages(Composite):
    __slots__ = ()
    NAME = 'delete-on-no-messages'
    SYMBOL = 'amqp:delete-on-no-messages:list'
    CODE = 0x000000000000002D
    PROVIDES = ('lifetime-policy',)
    FIELDS = (
    )


class DeleteOnNoLinksOrMessages(Composite):
    __slots__ = ()
    NAME = 'delete-on-no-links-or-messages'
    SYMBOL = 'amqp:delete-on-no-links-or-messages:list'
    CODE = 0x000000000000002E
    PROVIDES = ('lifetime-policy',)
    FIELDS = (
    )


class SaslMechanisms(Composite):
    __slots__ = ('sasl_server_mechanisms', )
    NAME = 'sasl-mechanisms'
    SYMBOL = 'amqp:sasl-mechanisms:list'
    CODE = 0x0000000000000040
    PROVIDES = ('sasl-frame',)
    FIELDS = (
        F('sasl_server_mechanisms', 'symbol', 'symbol', True, True, None, None),
    )


class SaslInit(Composite):
    __slots__ = ('mechanism', 'initial_response', 'hostname', )
    NAME = 'sasl-init'
    SYMBOL = 'amqp:sasl-init:list'
    CODE = 0x0000000000000041
    PROVIDES = ('sasl-frame',)
    FIELDS = (
        F('mechanism', 'symbol', 'symbol', True, False, None, None),
        F('initial_response', 'binary', 'binary', False, False, None, None),
        F('hostname', 'string', 'string', False, False, None, None),
    )


class SaslChallenge(Composite):
    __slots__ = ('challenge', )
    NAME = 'sasl-challenge'
    SYMBOL = 'amqp:sasl-challenge:list'
    CODE = 0x0000000000000042
    PROVIDES = ('sasl-frame',)
    FIELDS = (
        F('challenge', 'binary', 'binary', True, False, None, None),
    )


class SaslResponse(Composite):
    __slots__ = ('response', )
    NAME = 'sasl-response'
    SYMBOL = 'amqp:sasl-response:list'
    CODE = 0x0000000000000043
    PROVIDES = ('sasl-frame',)
    FIELDS = (
        F('response', 'binary', 'binary', True, False, None, None),
    )


class SaslOutcome(Composite):
    __slots__ = ('code', 'additional_data', )
    NAME = 'sasl-outcome'
    SYMBOL = 'amqp:sasl-outcome:list'
    CODE = 0x0000000000000044
    PROVIDES = ('sasl-frame',)
    FIELDS = (
        F('code', 'sasl-code', 'ubyte', True, False, None, None),
        F('additional_data', 'binary', 'binary', False, False, None, None),
    )


class Coordinator(Composite):
    __slots__ = ('capabilities', )
    NAME = 'coordinator'
    SYMBOL = 'amqp:coordinator:list'
    CODE = 0x0000000000000030
    PROVIDES = ('target',)
    FIELDS = (
        F('capabilities', 'symbol', 'symbol', False, True, None, 'txn-capability'),
    )


class Declare(Composite):
    __slots__ = ('global_id', )
    NAME = 'declare'
    SYMBOL = 'amqp:declare:list'
    CODE = 0x0000000000000031
    PROVIDES = ()
    FIELDS = (
        F('global_id', '*', '*', False, False, None, 'global-tx-id'),
    )


class Discharge(Composite):
    __slots__ = ('txn_id', 'fail', )
    NAME = 'discharge'
    SYMBOL = 'amqp:discharge:list'
    CODE = 0x0000000000000032
    PROVIDES = ()
    FIELDS = (
        F('txn_id', '*', '*', True, False, None, 'txn-id'),
        F('fail', 'boolean', 'boolean', False, False, None, None),
    )


class Declared(Composite):
    __slots__ = ('txn_id', )
    NAME = 'declared'
    SYMBOL = 'amqp:declared:list'
    CODE = 0x0000000000000033
    PROVIDES = ('delivery-state', 'outcome')
    FIELDS = (
        F('txn_id', '*', '*', True, False, None, 'txn-id'),
    )


class TransactionalState(Composite):
    __slots__ = ('txn_id', 'outcome', )
    NAME = 'transactional-state'
    SYMBOL = 'amqp:transactional-state:list'
    CODE = 0x0000000000000034
    PROVIDES = ('delivery-state',)
    FIELDS = (
        F('txn_id', '*', '*', True, False, None, 'txn-id'),
        F('outcome', '*', '*', False, False, None, 'outcome'),
    )


# numeric descriptor -> class, symbolic descriptor -> class: every composite
BY_CODE, BY_SYMBOL = tables(globals())
PERFORMATIVES = {0x10: Open, 0x11: Begin, 0x12: Attach, 0x13: Flow, 0x14: Transfer, 0x15: Disposition, 0x16: Detach, 0x17: End, 0x18: Close}
SASL_FRAMES = {0x40: SaslMechanisms, 0x41: SaslInit, 0x42: SaslChallenge, 0x43: SaslResponse, 0x44: SaslOutcome}
OUTCOMES = {0x24: Accepted, 0x25: Rejected, 0x26: Released, 0x27: Modified, 0x33: Declared}
DELIVERY_STATES = {0x23: Received, 0x24: Accepted, 0x25: Rejected, 0x26: Released, 0x27: Modified, 0x33: Declared, 0x34: TransactionalState}
# the sections of a message, in the order they may appear (part 3 §3.2)
SECTIONS = {'header': 0x70, 'delivery-annotations': 0x71, 'message-annotations': 0x72, 'properties': 0x73, 'application-properties': 0x74, 'data': 0x75, 'amqp-sequence': 0x76, 'amqp-value': 0x77, 'footer': 0x78}
