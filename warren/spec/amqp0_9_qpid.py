"""AMQP 0-9, Qpid's variant protocol tables.

Generated from amqp0-9.qpid.xml by tools/gen_spec.py; do not edit, run the tool.
"""

# fmt: off
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
from warren.spec.amqp0_9 import (
    ConnectionRedirect, ConnectionClose, ConnectionCloseOk, ChannelOpen, ChannelOpenOk,
    ChannelResume, ChannelPing, ChannelPong, ChannelOk, QueueUnbind, QueueUnbindOk, FileConsume,
    FileConsumeOk, StreamConsume, StreamConsumeOk, MessageTransfer, MessageConsume, MessageCancel,
    MessageGet, MessageRecover, MessageOpen, MessageClose, MessageAppend, MessageCheckpoint,
    MessageResume, MessageQos, MessageOk, MessageEmpty, MessageReject, MessageOffset,
)
from warren.spec.amqp0_8_qpid import (
    ExchangeBound, ExchangeBoundOk, BasicConsume, BasicConsumeOk,
)

VERSION = (0, 9, 0)

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


class BasicRecoverSync(Method):
    __slots__ = ('requeue', )
    NAME = 'basic.recover-sync'
    CLASS_ID = 60
    METHOD_ID = 102
    INDEX = 0x003C0066
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
            b'\x00<\x00f',
            bytes(((1 if self.requeue else 0),)),
        ))


class BasicRecoverSyncOk(Method):
    __slots__ = ()
    NAME = 'basic.recover-sync-ok'
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
