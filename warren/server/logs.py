"""The broker's log: text or JSON lines, on stderr or in a file reopened on SIGHUP.

Rotation is left to the platform, as RabbitMQ and most daemons do: logrotate (or an operator)
renames the file and sends SIGHUP; ``reopen`` then opens a new file under the configured
name, so nothing is lost and nothing is written to the renamed file after the signal.

``--log-format json`` writes one JSON object per line with ``time`` (ISO 8601, local time with
its offset), ``level``, ``logger`` and ``message``, plus the structured fields a call passes in
``extra=`` (the connection close line gives ``peer``, ``user``, ``vhost``, ``client``,
``lived_s`` and ``reason``) and ``exception`` with the traceback where there is one.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from pathlib import Path

__all__ = ["setup_logging", "reopen", "JsonFormatter", "TEXT_FORMAT"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# attributes every LogRecord has: anything else on a record came from ``extra=``
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

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
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
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
