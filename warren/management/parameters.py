"""RabbitMQ's runtime parameters, kept for the HTTP API and definitions: per vhost
``(component, vhost, name) -> value`` (shovels, federation upstreams: stored and listed; the
components that act on them come later) and global ``name -> value``.

They live in the data folder as ``parameters.json``, rewritten whole on each change (a
temporary file, fsync, rename, fsync of the folder) before the change is answered, so an
answered change survives kill -9. Without a data folder they are kept in memory.
Vhost limits are not stored here: they are the access model's (``warren.access``), and the
API shows them as the ``vhost-limits`` component, as RabbitMQ does.

With ``--workers N`` the global parameters (``cluster_name``, which a federation link reads in
connection.start to cut loops) belong to the node, not to a worker: every worker and the
supervisor share one ``global_parameters.json`` in the supervisor's data folder (passed as
``--global-parameters-file``). A change is a read-modify-write of it under an exclusive
``flock`` (as policies.json, ``policy_store.py``); the other processes see it at their next
look (``refresh_global``, from the server's tick every ``GLOBAL_CHECK`` seconds, or at once when
a worker's HTTP API changed it: ``Spread.files_changed``), and their listeners hear of it
then. Per-vhost parameters stay with the worker that owns the vhost, except under
``--worker-mode queues``, where every worker serves every vhost: there they are the node's too,
kept in the same shared file the same way (``node_wide``).

Components that act on their parameters (shovels and federation, ``warren/federation``) plug
in here: ``validators[component](vhost, name, value)`` raises ValueError to refuse a value
before it is stored (the API answers 400 with the reason), and every object in ``listeners``
hears of each change once it is durable: ``parameter_changed(component, vhost, name, value)``
(value None when cleared) and ``global_parameter_changed(name, value)``.
"""

from __future__ import annotations

import json
import logging
import threading
from contextlib import contextmanager
from pathlib import Path

from warren.store.node_file import file_stamp, locked, on_loop, replace_durably

__all__ = ["ParameterStore", "FILE_NAME", "GLOBAL_FILE_NAME", "GLOBAL_CHECK"]

log = logging.getLogger("warren.management")

FILE_NAME = "parameters.json"
GLOBAL_FILE_NAME = "global_parameters.json"  # with --workers: the node's, shared (module doc)
GLOBAL_CHECK = 0.5  # seconds between two looks at a shared global_parameters.json


class ParameterStore:
    def __init__(self, path: Path | None, global_path: Path | None = None, node_wide: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        # the shared file of the global parameters (module doc), or None: they are in ``path``
        self.global_path = Path(global_path) if global_path is not None else None
        # --worker-mode queues: every worker serves every vhost, so the per-vhost parameters are
        # the node's too, in the same shared file (module doc)
        self.node_wide = node_wide and self.global_path is not None
        self._global_stamp = None  # the shared file's stamp when last read (node_file.file_stamp)
        self.parameters: dict[tuple[str, str, str], object] = {}
        self.global_parameters: dict[str, object] = {}
        self.validators: dict = {}  # component -> callable(vhost, name, value), raises ValueError
        # one change at a time: the HTTP API's writer thread (api/common.py ``off_loop``), or a
        # caller on the loop (a definitions import); readers on the loop see the old dict or
        # the new one, which replaces it once it is durable
        self._changing = threading.Lock()
        self.listeners: list = []  # see the module docstring
        if self.path is not None and self.path.exists() and not self.node_wide:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self.parameters = _parameters_of(data)
                if self.global_path is None:
                    self.global_parameters = _globals_of(data)
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                log.error("%s cannot be read, runtime parameters start empty: %s", self.path, e)
        if self.global_path is not None:
            shared = self._read_shared()
            if shared is not None:
                self.global_parameters = _globals_of(shared)
                if self.node_wide:
                    self.parameters = _parameters_of(shared)

    @classmethod
    def in_data_dir(cls, data_dir: Path | None, global_path: Path | None = None,
                    node_wide: bool = False) -> "ParameterStore":
        return cls(Path(data_dir) / FILE_NAME if data_dir is not None else None, global_path, node_wide)

    # --- the shared global parameters (--workers) --------------------------------------------------

    def _read_shared(self) -> dict | None:
        """The shared file's content ({} when there is none yet; None when it cannot be read),
        its stamp taken first (a change after it is seen next time)."""
        self._global_stamp = file_stamp(self.global_path)
        try:
            return json.loads(self.global_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.error("%s cannot be read, global parameters kept as they were: %s", self.global_path, e)
            return None

    def refresh_global(self) -> bool:
        """Take another process's changes to the shared file (a stat when nothing changed);
        the listeners hear of each. True if anything changed."""
        if self.global_path is None or file_stamp(self.global_path) == self._global_stamp:
            return False
        shared = self._read_shared()
        try:
            if shared is None:
                return False
            new_globals = _globals_of(shared)
            new_parameters = _parameters_of(shared) if self.node_wide else self.parameters
        except (KeyError, TypeError, AttributeError) as e:
            log.error("%s cannot be read, global parameters kept as they were: %s", self.global_path, e)
            return False
        old, self.global_parameters = self.global_parameters, new_globals
        changed = [n for n in old.keys() | new_globals.keys() if old.get(n, _MISSING) != new_globals.get(n, _MISSING)]
        for name in sorted(changed):
            self._notify_global(name, new_globals.get(name))
        old_parameters, self.parameters = self.parameters, new_parameters
        changed_parameters = [k for k in old_parameters.keys() | new_parameters.keys()
                              if old_parameters.get(k, _MISSING) != new_parameters.get(k, _MISSING)]
        for key in sorted(changed_parameters):
            self._notify(*key, new_parameters.get(key))
        return bool(changed or changed_parameters)

    @contextmanager
    def _globals_locked(self):
        """Read-modify-write of the shared file: under its lock, read again inside it."""
        with locked(self.global_path):
            self.refresh_global()
            yield

    @contextmanager
    def _change(self):
        """A change of per-vhost parameters: of the shared file when they are the node's."""
        with self._changing:
            if self.node_wide:
                with self._globals_locked():
                    yield
            else:
                yield

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

    # Each change writes a new dict durably, then puts it in place (readers never see a value
    # that is not durable yet, nor a dict being changed) and tells the listeners on the loop.
    # The HTTP API calls these on its writer thread, so that an fsync that stalls holds that
    # request only (warren/store/node_file.py ``on_loop``).

    def put(self, component: str, vhost: str, name: str, value) -> bool:
        """Set a parameter; True if it is new."""
        check = self.validators.get(component)
        if check is not None:
            check(vhost, name, value)  # ValueError: refused, nothing stored
        key = (component, vhost, name)
        with self._change():
            new = key not in self.parameters
            self._save(parameters={**self.parameters, key: value})
        self._notify(component, vhost, name, value)
        return new

    def delete(self, component: str, vhost: str, name: str) -> bool:
        with self._change():
            if (component, vhost, name) not in self.parameters:
                return False
            self._save(parameters={k: v for k, v in self.parameters.items() if k != (component, vhost, name)})
        self._notify(component, vhost, name, None)
        return True

    def delete_vhost(self, vhost: str) -> None:
        with self._change():
            keys = [k for k in self.parameters if k[1] == vhost]
            if keys:
                self._save(parameters={k: v for k, v in self.parameters.items() if k[1] != vhost})
        for k in keys:
            self._notify(*k, None)

    def put_global(self, name: str, value) -> bool:
        with self._changing, self._globals_locked():
            new = name not in self.global_parameters
            self._save_globals(globals_={**self.global_parameters, name: value})
        self._notify_global(name, value)
        return new

    def delete_global(self, name: str) -> bool:
        with self._changing, self._globals_locked():
            if name not in self.global_parameters:
                return False
            self._save_globals(globals_={k: v for k, v in self.global_parameters.items() if k != name})
        self._notify_global(name, None)
        return True

    def _save_globals(self, globals_: dict | None = None, parameters: dict | None = None) -> None:
        """Write the new global (and, node-wide, per-vhost) parameters durably, then put them
        in place; None: as they are."""
        if self.global_path is None:
            self._save(parameters, globals_)
            return
        globals_ = self.global_parameters if globals_ is None else globals_
        parameters = self.parameters if parameters is None else parameters
        shared = {"global_parameters": _global_list(globals_)}
        if self.node_wide:
            shared["parameters"] = _list(parameters)
        _write_json(self.global_path, shared)
        self._global_stamp = file_stamp(self.global_path)
        self.global_parameters, self.parameters = globals_, parameters

    def _notify(self, component: str, vhost: str, name: str, value) -> None:
        on_loop(self._notify_now, component, vhost, name, value)  # the listeners live on the loop

    def _notify_now(self, component: str, vhost: str, name: str, value) -> None:
        for listener in list(self.listeners):
            try:
                listener.parameter_changed(component, vhost, name, value)
            except Exception:  # a listener's bug must not undo a change that is already durable
                log.exception("runtime parameter listener failed on %s/%s/%s", component, vhost, name)

    def _notify_global(self, name: str, value) -> None:
        on_loop(self._notify_global_now, name, value)

    def _notify_global_now(self, name: str, value) -> None:
        for listener in list(self.listeners):
            try:
                listener.global_parameter_changed(name, value)
            except Exception:
                log.exception("runtime parameter listener failed on global parameter %s", name)

    def _save(self, parameters: dict | None = None, globals_: dict | None = None) -> None:
        """Write the new per-vhost (and global, when they share the file) parameters durably,
        then put them in place; None: as they are."""
        if self.node_wide:
            self._save_globals(globals_, parameters)
            return
        parameters = self.parameters if parameters is None else parameters
        globals_ = self.global_parameters if globals_ is None else globals_
        if self.path is not None:
            data = {"parameters": _list(parameters)}
            if self.global_path is None:
                data["global_parameters"] = _global_list(globals_)
            _write_json(self.path, data)
        self.parameters, self.global_parameters = parameters, globals_


def _list(parameters: dict) -> list[dict]:
    return [{"value": v, "vhost": k[1], "component": k[0], "name": k[2]} for k, v in sorted(parameters.items())]


def _global_list(globals_: dict) -> list[dict]:
    return [{"name": k, "value": v} for k, v in sorted(globals_.items())]


def _globals_of(data: dict) -> dict:
    return {g["name"]: g["value"] for g in data.get("global_parameters", ())}


def _parameters_of(data: dict) -> dict:
    return {(p["component"], p["vhost"], p["name"]): p["value"] for p in data.get("parameters", ())}


def _write_json(path: Path, data: dict) -> None:
    replace_durably(path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))


_MISSING = object()
ParameterStore.MISSING = _MISSING
