"""The 0-10 ``dtx`` class over the broker's distributed transactions (``warren/broker/dtx.py``).

``channel.py`` routes every ``dtx.*`` command here (``handle``), with the session's
``SessionChannel`` and the decoded command; as its own handlers, ``handle`` returns None (complete
now), a result struct (``execution.result``, then completion) or ``LATER`` (``dtx.commit`` whose
work waits for the disk: the result is sent from the durability callback; with ``--worker-mode
queues`` any outcome command and ``dtx.recover`` may wait for the other workers). Refusals are the
broker's exceptions with their 0-10 codes (404, 409, 503, 530, 542): the adapter answers
``execution.exception`` and the session ends, which ends its association with a branch
implicitly (the branch becomes rollback-only).

The xid travels as the coded ``dtx.xid`` struct of Qpid's errata (0x0604), so that
``dtx.recover`` can answer an array of them; the broker names it ``Xid(format, global id,
branch id)``.
"""

from __future__ import annotations

import logging

from warren.broker.dtx import Xid, manager
from warren.errors import AMQPError
from warren.protocol.amqp0_10.channel import LATER, ExecutionError
from warren.protocol.amqp0_10.session import error_code_for
from warren.spec import amqp0_10 as spec

__all__ = ["handle"]

log = logging.getLogger("warren.dtx")

E = spec.ExecutionErrorCode


def _xid(channel, command) -> Xid:
    x = command.xid
    if x is None:
        if not manager(channel.session.broker).is_selected(channel):
            raise ExecutionError(E.COMMAND_INVALID, f"{command.NAME}: session not selected for use with dtx")
        raise ExecutionError(E.ILLEGAL_ARGUMENT, f"{command.NAME} names no xid")
    return Xid(x.format or 0, bytes(x.global_id or b""), bytes(x.branch_id or b""))


def _result(status) -> spec.DtxXaResult:
    return spec.DtxXaResult(status=int(status))


class _Answer:
    """``done`` for ``DtxManager.run``: a value given during the call is the handler's answer;
    one given later (a prepare or commit waiting for disks, a command another worker ran) is
    sent from here, as ``execution.result`` (or completion) or ``execution.exception``."""

    def __init__(self, channel, shape) -> None:
        self.channel, self.shape = channel, shape  # shape: the value's result struct (None: none)
        self.command_id = channel.current
        self.now: list | None = []

    def __call__(self, value) -> None:
        if self.now is not None:  # during the call: answered by ``returned``
            self.now.append(value)
            return
        ch = self.channel
        if ch.closed:
            return
        if isinstance(value, ExecutionError):
            ch.session.session_exception(ch.number, self.command_id, value.code, value.text)
        elif isinstance(value, AMQPError):
            ch.session.session_exception(ch.number, self.command_id, error_code_for(value.reply_code), value.text)
        elif isinstance(value, BaseException):  # our bug: as the adapter answers one raised at once
            log.error("dtx: %s failed on session channel %d", type(value).__name__, ch.number,
                      exc_info=(type(value), value, value.__traceback__))
            ch.session.session_exception(ch.number, self.command_id, E.INTERNAL_ERROR, "internal error")
        else:
            result = self.shape(value)
            if result is None:
                ch.conn.complete(ch.number, self.command_id)
            else:
                ch.conn.send_result(ch.number, self.command_id, result)
        ch.session.want_flush()

    def returned(self):
        now, self.now = self.now, None
        if now:
            if isinstance(now[0], BaseException):
                raise now[0]
            return self.shape(now[0])
        return LATER


def _select(channel, c, dtx):
    dtx.select(channel)
    return None


def _start(channel, c, dtx):
    answer = _Answer(channel, _result)
    dtx.start_unique(channel, _xid(channel, c), bool(c.join), bool(c.resume), answer)
    return answer.returned()


def _end(channel, c, dtx):
    return _result(dtx.end(channel, _xid(channel, c), fail=bool(c.fail), suspend=bool(c.suspend)))


def _outcome(op: str, shape, args=lambda c: ()):
    """The handler of an outcome command: run on the branch's worker, wherever it is."""
    def handler(channel, c, dtx):
        answer = _Answer(channel, shape)
        dtx.run(op, channel, _xid(channel, c), args(c), answer)
        return answer.returned()
    return handler


def _none(value) -> None:
    return None


def _recover(channel, c, dtx):
    answer = _Answer(channel, lambda xids: spec.DtxRecoverResult(in_doubt=[
        spec.DtxXid(format=x.format, global_id=x.global_id, branch_id=x.branch_id) for x in xids]))
    dtx.recover_all(answer)
    return answer.returned()


_HANDLERS = {
    spec.DtxSelect.INDEX: _select, spec.DtxStart.INDEX: _start, spec.DtxEnd.INDEX: _end,
    spec.DtxPrepare.INDEX: _outcome("prepare", _result),
    spec.DtxCommit.INDEX: _outcome("commit", _result, lambda c: (bool(c.one_phase),)),
    spec.DtxRollback.INDEX: _outcome("rollback", _result),
    spec.DtxForget.INDEX: _outcome("forget", _none),
    spec.DtxGetTimeout.INDEX: _outcome("get_timeout", lambda t: spec.DtxGetTimeoutResult(timeout=t)),
    spec.DtxSetTimeout.INDEX: _outcome("set_timeout", _none, lambda c: (c.timeout or 0,)),
    spec.DtxRecover.INDEX: _recover,
}


def handle(channel, command):
    """Execute one dtx command of the session whose ``SessionChannel`` is ``channel``."""
    handler = _HANDLERS.get(command.INDEX)
    if handler is None:
        raise ExecutionError(E.NOT_IMPLEMENTED, f"{command.NAME} is not implemented")
    return handler(channel, command, manager(channel.session.broker))
