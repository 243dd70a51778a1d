"""RabbitMQ's runtime parameters, kept for the HTTP API and definitions: per vhost
``(component, vhost, name) -> value`` (shovels, federation upstreams: stored and listed; the
components that act on them come later) and global ``name -> value``.

They live in the data folder as ``parameters.json``, rewritten whole on each change (a
temporary file, fsync, rename, fsync of the folder) before the change is answered, so an
answered change survives kill -9. Without a data folder they are kept in memory.
Vhost limits are not stored here: they are the access model's (``warren.access``), and the
API shows them as the ``vhost-limits`` component, as RabbitMQ does.

Components that act on their parameters (shovels and federation, ``warren/federation``) plug
in here: ``validators[component](vhost, name, value)`` raises ValueError to refuse a value
before it is stored (the API answers 400 with the reason), and every object in ``listeners``
hears of each change once it is durable: ``parameter_changed(component, vhost, name, value)``
(value None when cleared) and ``global_parameter_changed(name, value)``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

__all__ = ["ParameterStore", "FILE_NAME"]

log = logging.getLogger("warren.management")

FILE_NAME = "parameters.json"


class ParameterStore:
    def __init__(self, path: Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self.parameters: dict[tuple[str, str, str], object] = {}
        self.global_parameters: dict[str, object] = {}
        self.validators: dict = {}  # component -> callable(vhost, name, value), raises ValueError
        self.listeners: list = []  # see the module docstring
        if self.path is not None and self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                for p in data.get("parameters", ()):
                    self.parameters[(p["component"], p["vhost"], p["name"])] = p["value"]
                for g in data.get("global_parameters", ()):
                    self.global_parameters[g["name"]] = g["value"]
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                log.error("%s cannot be read, runtime parameters start empty: %s", self.path, e)

    @classmethod
    def in_data_dir(cls, data_dir: Path | None) -> "ParameterStore":
        return cls(Path(data_dir) / FILE_NAME if data_dir is not None else None)

    # --- reading ---------------------------------------------------------------------------------

    def list(self, component: str | None = None, vhost: str | None = None) -> list[dict]:
        return [{"value": v, "vhost": k[1], "component": k[0], "name": k[2]}
                for k, v in sorted(self.parameters.items())
                if (component is None or k[0] == component) and (vhost is None or k[1] == vhost)]

    def get(self, component: str, vhost: str, name: str):
        return self.parameters.get((component, vhost, name), _MISSING)

    def list_global(self) -> list[dict]:
        return [{"name": k, "value": v} for k, v in sorted(self.global_parameters.items())]

    # --- changes (durable before they return) ----------------------------------------------------

    def put(self, component: str, vhost: str, name: str, value) -> bool:
        """Set a parameter; True if it is new."""
        check = self.validators.get(component)
        if check is not None:
            check(vhost, name, value)  # ValueError: refused, nothing stored
        key = (component, vhost, name)
        new = key not in self.parameters
        self.parameters[key] = value
        self._save()
        self._notify(component, vhost, name, value)
        return new

    def delete(self, component: str, vhost: str, name: str) -> bool:
        if self.parameters.pop((component, vhost, name), _MISSING) is _MISSING:
            return False
        self._save()
        self._notify(component, vhost, name, None)
        return True

    def delete_vhost(self, vhost: str) -> None:
        keys = [k for k in self.parameters if k[1] == vhost]
        for k in keys:
            del self.parameters[k]
        if keys:
            self._save()
        for k in keys:
            self._notify(*k, None)

    def put_global(self, name: str, value) -> bool:
        new = name not in self.global_parameters
        self.global_parameters[name] = value
        self._save()
        self._notify_global(name, value)
        return new

    def delete_global(self, name: str) -> bool:
        if self.global_parameters.pop(name, _MISSING) is _MISSING:
            return False
        self._save()
        self._notify_global(name, None)
        return True

    def _notify(self, component: str, vhost: str, name: str, value) -> None:
        for listener in list(self.listeners):
            try:
                listener.parameter_changed(component, vhost, name, value)
            except Exception:  # a listener's bug must not undo a change that is already durable
                log.exception("runtime parameter listener failed on %s/%s/%s", component, vhost, name)

    def _notify_global(self, name: str, value) -> None:
        for listener in list(self.listeners):
            try:
                listener.global_parameter_changed(name, value)
            except Exception:
                log.exception("runtime parameter listener failed on global parameter %s", name)

    def _save(self) -> None:
        if self.path is None:
            return
        data = {"parameters": self.list(), "global_parameters": self.list_global()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=1) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


_MISSING = object()
ParameterStore.MISSING = _MISSING
