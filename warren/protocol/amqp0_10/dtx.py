"""The 0-10 ``dtx`` class over the broker's distributed transactions (``warren/broker/dtx.py``).

``channel.py`` routes every ``dtx.*`` command here (``handle``), with the session's
``SessionChannel`` and the decoded command; as its own handlers, ``handle`` returns None (complete
now), a result struct (``execution.result``, then completion) or ``LATER`` (``dtx.commit`` whose
work waits for the disk: the result is sent from the durability callback). Refusals are the
broker's exceptions with their 0-10 codes (404, 409, 503, 530, 542): the adapter answers
``execution.exception`` and the session ends, which ends its association with a branch
implicitly (the branch becomes rollback-only).

The xid travels as the coded ``dtx.xid`` struct of Qpid's errata (0x0604), so that
``dtx.recover`` can answer an array of them; the broker names it ``Xid(format, global id,
branch id)``.
"""

from __future__ import annotations

from warren.broker.dtx import Xid, manager
from warren.protocol.amqp0_10.channel import LATER, ExecutionError
from warren.spec import amqp0_10 as spec

__all__ = ["handle"]

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


def _select(channel, c, dtx):
    dtx.select(channel)
    return None


def _start(channel, c, dtx):
    return _result(dtx.start(channel, _xid(channel, c), join=bool(c.join), resume=bool(c.resume)))


def _end(channel, c, dtx):
    return _result(dtx.end(channel, _xid(channel, c), fail=bool(c.fail), suspend=bool(c.suspend)))


def _prepare(channel, c, dtx):
    return _result(dtx.prepare(_xid(channel, c)))


def _commit(channel, c, dtx):
    command_id, number, conn = channel.current, channel.number, channel.conn
    now: list = []

    def done(status) -> None:
        if now is not None:  # during the call: answered below
            now.append(status)
            return
        if not channel.closed:
            conn.send_result(number, command_id, _result(status))
            channel.session.want_flush()

    dtx.commit(channel, _xid(channel, c), bool(c.one_phase), done)
    if now:
        return _result(now[0])
    now = None  # from here on, done answers by itself
    return LATER


def _rollback(channel, c, dtx):
    return _result(dtx.rollback(_xid(channel, c)))


def _forget(channel, c, dtx):
    dtx.forget(_xid(channel, c))
    return None


def _get_timeout(channel, c, dtx):
    return spec.DtxGetTimeoutResult(timeout=dtx.get_timeout(_xid(channel, c)))


def _set_timeout(channel, c, dtx):
    dtx.set_timeout(_xid(channel, c), c.timeout or 0)
    return None


def _recover(channel, c, dtx):
    return spec.DtxRecoverResult(in_doubt=[spec.DtxXid(format=x.format, global_id=x.global_id,
                                                       branch_id=x.branch_id) for x in dtx.recover()])


_HANDLERS = {
    spec.DtxSelect.INDEX: _select, spec.DtxStart.INDEX: _start, spec.DtxEnd.INDEX: _end,
    spec.DtxCommit.INDEX: _commit, spec.DtxForget.INDEX: _forget, spec.DtxGetTimeout.INDEX: _get_timeout,
    spec.DtxPrepare.INDEX: _prepare, spec.DtxRecover.INDEX: _recover, spec.DtxRollback.INDEX: _rollback,
    spec.DtxSetTimeout.INDEX: _set_timeout,
}


def handle(channel, command):
    """Execute one dtx command of the session whose ``SessionChannel`` is ``channel``."""
    handler = _HANDLERS.get(command.INDEX)
    if handler is None:
        raise ExecutionError(E.NOT_IMPLEMENTED, f"{command.NAME} is not implemented")
    return handler(channel, command, manager(channel.session.broker))
