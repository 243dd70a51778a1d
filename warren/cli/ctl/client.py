"""The HTTP side of `warren ctl`: one synchronous client for the management API, and the exit codes.

The client speaks RabbitMQ's management HTTP API (paths, JSON bodies, status codes), so the
same commands work against Warren and RabbitMQ. It is the standard library's `urllib`, not
aiohttp: a ctl command makes a handful of requests one after another and exits, so an event
loop and a client session would only add start-up time (aiohttp's import alone costs more
than most commands take). Proxy variables from the environment are ignored, as rabbitmqadmin
does: the management port is reached directly.

Exit codes follow rabbitmqctl's, which are the BSD `sysexits.h` codes (see docs/ctl.md for
which failure gives which).
"""

from __future__ import annotations

import base64
import html
import json
import socket
import urllib.error
import urllib.request
from contextlib import contextmanager
from typing import Any, Callable, Iterator
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import click

__all__ = ["Api", "ApiError", "CtlError", "exit_code_for_status", "not_found_as",
           "EX_OK", "EX_USAGE", "EX_DATAERR", "EX_NOINPUT", "EX_NOUSER", "EX_UNAVAILABLE",
           "EX_SOFTWARE", "EX_CANTCREAT", "EX_TEMPFAIL", "EX_NOPERM"]

EX_OK = 0
EX_USAGE = 64        # bad command line: unknown command, option or column, missing argument
EX_DATAERR = 65      # bad input: invalid JSON, refused definition (HTTP 400), unknown vhost
EX_NOINPUT = 66      # an input file (import_definitions) that does not exist or cannot be read
EX_NOUSER = 67       # the user named does not exist
EX_UNAVAILABLE = 69  # broker not reachable; or the queue/policy/connection named does not exist
EX_SOFTWARE = 70     # the broker answered in a way it should not (5xx, not JSON); add_user of an existing user
EX_CANTCREAT = 73    # export_definitions cannot write its file
EX_TEMPFAIL = 75     # timed out (no answer within --timeout, await_startup gave up)
EX_NOPERM = 77       # credentials refused (HTTP 401) or not allowed (HTTP 403)


class CtlError(click.ClickException):
    """A failure with its exit code; click prints ``Error: <message>`` on stderr and exits."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.exit_code = code


class ApiError(Exception):
    """A non-2xx answer of the management API: status, and RabbitMQ's ``error``/``reason``."""

    def __init__(self, method: str, path: str, status: int, error: str, reason: str) -> None:
        self.method, self.path, self.status, self.error, self.reason = method, path, status, error, reason
        super().__init__(self.describe())

    def describe(self) -> str:
        # RabbitMQ HTML-escapes its reasons and puts blank lines in them; show them as text
        reason = " ".join(html.unescape(self.reason or "").split())
        error = self.error or "error"
        text = f"{error}: {reason}" if reason and reason != error else error
        return f"{text} (HTTP {self.status} from {self.method} {self.path})"


@contextmanager
def not_found_as(error: Callable[[], Exception]) -> Iterator[None]:
    """Within the block, an API answer 404 raises ``error()`` instead: the command's own message
    and exit code for what is missing. ``error`` is called only then, so it may ask the API
    which of several objects is the missing one; other failures pass unchanged."""
    try:
        yield
    except ApiError as e:
        if e.status == 404:
            raise error() from None
        raise


def exit_code_for_status(status: int) -> int:
    """The exit code of an API answer no command gave its own meaning to."""
    if status in (400, 413, 415, 422):
        return EX_DATAERR
    if status in (401, 403):
        return EX_NOPERM
    if status == 404:
        return EX_UNAVAILABLE  # rabbitmqctl's code for an object that does not exist
    if status in (408, 503, 504):
        return EX_TEMPFAIL
    return EX_SOFTWARE


class Api:
    """Requests to one broker's management API, with HTTP basic auth."""

    def __init__(self, url: str, username: str, password: str, timeout: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CtlError(EX_USAGE, f"--url must be http(s)://host[:port][/prefix], not {url!r}")
        netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        if parts.port:
            netloc += f":{parts.port}"
        self.base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        self._auth = f"Basic {token}"
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    @staticmethod
    def path(*segments: str) -> str:
        """``/api/a/b``: every segment percent-encoded whole (the vhost ``/`` becomes ``%2F``)."""
        return "/api/" + "/".join(quote(s, safe="") for s in segments)

    def request(self, method: str, *segments: str, query: dict | None = None, body: Any = None,
                data: bytes | None = None, headers: dict | None = None, timeout: float | None = None,
                raw: bool = False) -> Any:
        """The decoded JSON answer (None when empty; the octets as they came with `raw`);
        ApiError on a non-2xx status, CtlError when the broker cannot be reached (69) or does
        not answer in time (75)."""
        path = self.path(*segments)
        url = self.base + path + (f"?{urlencode(query)}" if query else "")
        sent_headers = {"Authorization": self._auth}  # no Accept: RabbitMQ answers 406 to some DELETEs with one
        if body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            sent_headers["Content-Type"] = "application/json"
        sent_headers.update(headers or {})
        request = urllib.request.Request(url, data=data, method=method, headers=sent_headers)
        timeout = self.timeout if timeout is None else timeout
        try:
            with self._opener.open(request, timeout=timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as e:
            raise self._api_error(method, path, e) from None
        except (TimeoutError, socket.timeout):
            raise CtlError(EX_TEMPFAIL, f"no answer from {self.base} within {timeout:g} s ({method} {path})") from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, (TimeoutError, socket.timeout)):
                raise CtlError(EX_TEMPFAIL, f"no answer from {self.base} within {timeout:g} s") from None
            raise CtlError(EX_UNAVAILABLE, f"unable to reach the broker at {self.base}: {e.reason}") from None
        except (ConnectionError, OSError) as e:
            raise CtlError(EX_UNAVAILABLE, f"unable to reach the broker at {self.base}: {e}") from None
        if raw:
            return payload
        if not payload.strip():
            return None
        try:
            return json.loads(payload)
        except RecursionError:
            raise CtlError(EX_SOFTWARE, f"{method} {path} answered JSON nested too deeply to decode") from None
        except ValueError:
            raise CtlError(EX_SOFTWARE, f"{method} {path} answered something that is not JSON: "
                                        f"{payload[:200]!r}") from None

    def get(self, *segments: str, **kw) -> Any:
        return self.request("GET", *segments, **kw)

    def put(self, *segments: str, body: Any = None, **kw) -> Any:
        return self.request("PUT", *segments, body={} if body is None else body, **kw)

    def delete(self, *segments: str, **kw) -> Any:
        return self.request("DELETE", *segments, **kw)

    def post(self, *segments: str, **kw) -> Any:
        return self.request("POST", *segments, **kw)

    def exists(self, *segments: str) -> bool:
        """Whether GET answers 200 (False on 404; other failures raise)."""
        try:
            self.get(*segments)
        except ApiError as e:
            if e.status == 404:
                return False
            raise
        return True

    @staticmethod
    def _api_error(method: str, path: str, e: urllib.error.HTTPError) -> ApiError:
        try:
            raw = e.read()
        except OSError:
            raw = b""
        error, reason = "", ""
        try:
            parsed = json.loads(raw)
            if isinstance(parsed, dict):
                error, reason = str(parsed.get("error", "")), str(parsed.get("reason", ""))
        except ValueError:
            reason = raw.decode("utf-8", "replace").strip()[:200]
        return ApiError(method, path, e.code, error or (e.reason if isinstance(e.reason, str) else ""), reason)
