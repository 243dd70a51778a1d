"""The broker's log: text or JSON lines, on stderr or in a file reopened on SIGHUP.

Rotation is left to the platform, as RabbitMQ and most daemons do: logrotate (or an operator)
renames the file and sends SIGHUP; ``reopen`` then opens a new file under the configured
name, so nothing is lost and nothing is written to the renamed file after the signal.

``--log-format json`` writes one JSON object per line with ``time`` (ISO 8601, local time with
its offset), ``level``, ``logger`` and ``message``, plus the structured fields a call passes in
``extra=`` (the connection close line gives ``peer``, ``user``, ``vhost``, ``client``,
``lived_s`` and ``reason``) and ``exception`` with the traceback where there is one.

Log lines carry what clients sent (user names, vhosts, queue and exchange names, client
properties, the reasons of refusals), and a client chooses how long those are: a refused login
with a 60 KB user name wrote all of it twice. ``clip`` is the one helper that bounds them: a
string longer than ``LOG_STRING_MAX`` characters is cut there, its full length noted. The
handler applies it to every record of the process (``ClipFilter``), whatever layer logged it:
each argument of the message, each ``extra=`` field, each line of a traceback, and the whole
message at ``LOG_LINE_MAX`` (a string put into the message itself rather than passed as an
argument). The bound holds for text and JSON alike.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from pathlib import Path

__all__ = ["setup_logging", "reopen", "JsonFormatter", "TextFormatter", "ClipFilter", "clip", "TEXT_FORMAT",
           "LOG_STRING_MAX", "LOG_LINE_MAX"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# the longest client string a log line shows whole: a shortstr name (255 octets) fits, with room
LOG_STRING_MAX = 512
# the longest message, whatever it holds (a line is this plus its time, level and logger)
LOG_LINE_MAX = 4096

# attributes every LogRecord has: anything else on a record came from ``extra=``
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


def clip(text, limit: int = LOG_STRING_MAX) -> str:
    """``text`` (a str, or anything as str) as a log line shows it: whole up to ``limit``
    characters, else its first ``limit`` and its full length."""
    if not isinstance(text, str):
        text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text)} chars in all]"


class _Clipped:
    """A log argument shown clipped, whether the message formats it with %s or %r."""

    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value

    def __str__(self) -> str:
        return clip(str(self.value))

    def __repr__(self) -> str:
        return clip(repr(self.value))


def _clipped(arg):
    # numbers stay numbers (%d, %.1f need them); anything else may hold a client's string
    if arg is None or isinstance(arg, (int, float)):
        return arg
    if isinstance(arg, str) and len(arg) <= LOG_STRING_MAX // 2:
        return arg  # short enough either way (repr at most doubles it)
    return _Clipped(arg)


class ClipFilter(logging.Filter):
    """Bounds every record (module doc): its arguments, ``extra=`` fields and message."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if args:
            if isinstance(args, dict):
                record.args = {key: _clipped(value) for key, value in args.items()}
            else:
                record.args = tuple(_clipped(a) for a in args)
        message = record.getMessage()  # formatted once here; the formatter finds no args left
        record.msg, record.args = (clip(message, LOG_LINE_MAX) if len(message) > LOG_LINE_MAX else message), None
        for key, value in vars(record).items():
            if key not in _STANDARD and isinstance(value, str) and len(value) > LOG_STRING_MAX:
                setattr(record, key, clip(value))
        return True


def _clip_lines(text: str) -> str:
    """A traceback with each line bounded (an exception's message may quote a client's string)."""
    if len(text) <= LOG_STRING_MAX:
        return text
    return "\n".join(clip(line, LOG_LINE_MAX // 4) for line in text.split("\n"))


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT`` lines; a traceback's lines clipped."""

    def formatException(self, ei) -> str:
        return _clip_lines(super().formatException(ei))


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def formatException(self, ei) -> str:
        return _clip_lines(super().formatException(ei))

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        return json.dumps(out, ensure_ascii=False, default=str)


class ReopeningFileHandler(logging.FileHandler):
    """Appends to a file; ``reopen`` closes it and opens the same name again (after a rename)."""

    def reopen(self) -> None:
        with self.lock:
            if self.stream is not None:
                self.stream.flush()
                self.stream.close()
                self.stream = None  # if the open fails, the next record tries again
            self.stream = self._open()


_handler: logging.Handler | None = None


def setup_logging(level: str = "info", fmt: str = "text", file: Path | None = None) -> None:
    """Send every log record of the process to stderr or ``file`` (appended), as text or JSON.
    Raises OSError if the file cannot be opened."""
    global _handler
    handler: logging.Handler
    if file is not None:
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        handler = ReopeningFileHandler(file, mode="a", encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter(TEXT_FORMAT))
    handler.addFilter(ClipFilter())
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
        _handler.close()
    for h in list(root.handlers):  # a handler set up earlier (logging.basicConfig, tests)
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
    _handler = handler


def reopen() -> None:
    """Reopen the log file (SIGHUP); nothing to do when logging to stderr."""
    if isinstance(_handler, ReopeningFileHandler):
        try:
            _handler.reopen()
        except OSError as e:
            # keep running: the record goes to stderr, and the next SIGHUP tries again
            print(f"warren: cannot reopen log file {_handler.baseFilename}: {e}", file=sys.stderr)
            return
        logging.getLogger("warren.server").info("log file reopened (SIGHUP)")
