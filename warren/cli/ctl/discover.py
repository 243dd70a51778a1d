"""Which broker `warren ctl` talks to when it is not told (no ``--url``, no ``WARREN_CTL_URL``).

RabbitMQ's management port, 15672, is the default of every tool, so beside RabbitMQ a ctl that
assumed it would report on RabbitMQ. Before falling back to it, ctl looks for a local Warren:

1. a running `warren serve`'s ``listeners.json`` in its data folder (written once it listens,
   removed at a clean stop: warren/server/server.py ``LISTENERS_FILE``), in the data folder the
   settings name (``WARREN_DATA_DIR``, else the config file's ``data-dir``, else ``./data``,
   `warren serve`'s default); a file whose process is gone (kill -9) is passed over;
2. the settings file (``WARREN_CONFIG_FILE``, else ``./warren.toml``, else
   ``/etc/warren/warren.toml``, the service's): its ``http-port``, ``http-host`` or ``host`` and
   ``http-tls``, when that port answers.

``find_local_warren`` returns the URL and a phrase saying where it came from; ctl prints it on
stderr (unless -q), so a person always sees which broker answered when the command line did not
say.
"""

from __future__ import annotations

import json
import os
import socket
import tomllib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Found", "find_local_warren", "CONFIG_CANDIDATES"]

CONFIG_CANDIDATES = (Path("warren.toml"), Path("/etc/warren/warren.toml"))  # after $WARREN_CONFIG_FILE
LISTENERS_FILE = "listeners.json"  # the same name as warren/server/server.py's (ctl does not import the server)
PROBE_TIMEOUT_S = 0.5


@dataclass(frozen=True)
class Found:
    url: str
    where: str  # for the stderr line: "data/listeners.json, pid 4242"


def _settings_file(env: dict) -> Path | None:
    named = env.get("WARREN_CONFIG_FILE")
    if named:
        return Path(named)
    return next((p for p in CONFIG_CANDIDATES if p.is_file()), None)


def _read_settings(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return {}  # `warren serve` says what is wrong with it; ctl only looks for a port
    return {key.replace("_", "-"): value for key, value in data.items()}


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process (the service's): it exists
    return True


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def _url(host: str | None, port: int, tls: bool) -> str:
    shown = "127.0.0.1" if host in (None, "", "0.0.0.0") else ("::1" if host == "::" else host)
    if ":" in shown:
        shown = f"[{shown}]"
    return f"{'https' if tls else 'http'}://{shown}:{port}"


def _from_listeners(data_dir: Path) -> Found | None:
    for path in (data_dir / LISTENERS_FILE, data_dir / "workers" / "0" / LISTENERS_FILE):
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(info, dict) or not isinstance(info.get("http_port"), int) or not _alive(info.get("pid")):
            continue
        return Found(_url(info.get("http_host"), info["http_port"], bool(info.get("http_tls"))),
                     f"{path}, pid {info['pid']}")
    return None


def find_local_warren(env: dict | None = None) -> Found | None:
    """A local Warren's HTTP API, or None (then ctl uses RabbitMQ's default, 15672)."""
    env = os.environ if env is None else env
    config_path = _settings_file(env)
    settings = _read_settings(config_path)
    data_dir = Path(env.get("WARREN_DATA_DIR") or settings.get("data-dir") or "data")
    found = _from_listeners(data_dir)
    if found is not None:
        return found
    port = settings.get("http-port")
    if config_path is not None and isinstance(port, int) and port > 0:
        host = settings.get("http-host") or settings.get("host")
        url = _url(host, port, bool(settings.get("http-tls")))
        if _answers(url.split("//", 1)[1].rsplit(":", 1)[0].strip("[]"), port):
            return Found(url, f"http-port in {config_path}")
    return None
