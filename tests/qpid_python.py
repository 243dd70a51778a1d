"""Locate (and if need be install) Qpid's Python client, qpid-python, for the 0-10 interop tests.

qpid-python (PyPI, 1.36) runs on Python 2.7 only. ``qpid_python()`` finds a Python 2.7
(``$WARREN_PYTHON27``, ``python2.7`` on the PATH, or pyenv's ``~/.pyenv/versions/2.7*``), then
qpid-python importable by it: already installed for it, in ``$WARREN_QPID_PYTHON`` (a folder
holding the ``qpid`` package), or installed once with ``python2.7 -m pip install --target`` into
a cache folder (``$WARREN_QPID_CACHE``, default ``~/.cache/warren-tests/qpid-python-1.36``).
It returns a ``QpidPython`` (the interpreter and the ``PYTHONPATH`` to use) or None with the
reason in ``why_missing()``; ``require_qpid_python()`` skips the calling test with that reason.

    qp = require_qpid_python()
    out = qp.run("from qpid.messaging import Connection; ...", timeout=30)

The same installation carries ``qpid-python-test`` and ``qpid_tests.broker_0_10`` (Qpid's
conformance suite). Importing that suite also needs ``qmf.console`` (PyPI ``qpid-qmf``) and
``qpidtoollibs`` (PyPI ``qpid-tools``), pure-Python packages of the same Qpid release:
``qpid_suite()`` / ``require_qpid_suite()`` install them once beside it (``--no-deps``, into
``$WARREN_QPID_CACHE``'s sibling ``qpid-suite-deps``) and return a ``QpidPython`` whose
``PYTHONPATH`` holds both, with ``test_runner`` the path of ``qpid-python-test``
(tests/interop_0_10).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["QpidPython", "qpid_python", "require_qpid_python", "why_missing", "QPID_PYTHON_VERSION",
           "qpid_suite", "require_qpid_suite", "why_suite_missing"]

QPID_PYTHON_VERSION = "1.36.0.post1"
_CACHE = Path(os.environ.get("WARREN_QPID_CACHE", Path.home() / ".cache" / "warren-tests" / "qpid-python-1.36"))
_found: list = []  # [QpidPython | None, reason]
SUITE_PACKAGES = ("qpid-qmf==0.28", "qpid-tools==1.36.0.post1")  # what qpid_tests imports besides qpid
_SUITE_CACHE = _CACHE.parent / "qpid-suite-deps"
_suite_found: list = []  # [QpidPython | None, reason]


class QpidPython:
    def __init__(self, python: str, path: str | None) -> None:
        self.python = python  # the Python 2.7 interpreter
        self.path = path  # folders to put on PYTHONPATH (None: installed for that interpreter)
        self.test_runner: str | None = None  # qpid-python-test (qpid_suite only)

    @property
    def env(self) -> dict:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env.pop("PYTHONHOME", None)
        if self.path:
            env["PYTHONPATH"] = self.path
        return env

    def run(self, script: str, timeout: float = 60, args=()) -> subprocess.CompletedProcess:
        """Run a Python 2.7 script with qpid-python importable; output as text."""
        return subprocess.run([self.python, "-c", script, *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def __repr__(self) -> str:
        return f"QpidPython({self.python!r}, path={self.path!r})"


def _python27() -> str | None:
    pyenv = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates = [os.environ.get("WARREN_PYTHON27"),
                  *sorted(glob.glob(os.path.join(pyenv, "versions", "2.7*", "bin", "python2.7")), reverse=True),
                  shutil.which("python2.7")]  # last: a pyenv shim there may point at no 2.7
    for c in candidates:
        if not c or not os.access(c, os.X_OK):
            continue
        try:
            ok = subprocess.run([c, "-c", "import sys; sys.exit(sys.version_info[:2] != (2, 7))"],
                                capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return c
    return None


def _imports(python: str, path: str | None) -> bool:
    qp = QpidPython(python, path)
    try:
        return qp.run("import qpid.messaging, qpid.ops", timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _find():
    python = _python27()
    if python is None:
        return None, "no Python 2.7 here (qpid-python runs on 2.7 only; set WARREN_PYTHON27)"
    for path in (os.environ.get("WARREN_QPID_PYTHON"), None, str(_CACHE)):
        if (path is None or Path(path, "qpid").is_dir()) and _imports(python, path):
            return QpidPython(python, path), ""
    try:
        _CACHE.parent.mkdir(parents=True, exist_ok=True)
        result = subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir",
                                 "--target", str(_CACHE), f"qpid-python=={QPID_PYTHON_VERSION}"],
                                capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"cannot install qpid-python for {python}: {e}"
    if result.returncode != 0 or not _imports(python, str(_CACHE)):
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["?"]
        return None, f"cannot install qpid-python for {python}: {tail[0]}"
    return QpidPython(python, str(_CACHE)), ""


@contextlib.contextmanager
def _install_lock():
    """One finder or installer at a time across processes (pytest-xdist's workers share the cache:
    two concurrent ``pip install --target`` into one folder would leave it broken)."""
    try:
        _CACHE.parent.mkdir(parents=True, exist_ok=True)
        lock = open(_CACHE.parent / ".qpid-install.lock", "w")
    except OSError:  # no writable cache: _find says why when it tries to install
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def qpid_python() -> QpidPython | None:
    if not _found:
        with _install_lock():
            _found.extend(_find())
    return _found[0]


def why_missing() -> str:
    qpid_python()
    return _found[1]


def require_qpid_python() -> QpidPython:
    import pytest

    qp = qpid_python()
    if qp is None:
        pytest.skip(why_missing())
    return qp


def _runner(qp: QpidPython) -> str | None:
    """The ``qpid-python-test`` script of this installation."""
    folders = [p for p in (qp.path or "").split(os.pathsep) if p]
    folders.append(os.path.dirname(qp.python))  # installed for the interpreter: next to it
    for folder in folders:
        script = os.path.join(folder, "bin", "qpid-python-test") if folder != os.path.dirname(qp.python) \
            else os.path.join(folder, "qpid-python-test")
        if os.path.isfile(script):
            return script
    return None


def _find_suite():
    qp = qpid_python()
    if qp is None:
        return None, why_missing()
    check = "import qmf.console, qpidtoollibs, qpid_tests.broker_0_10, qpid.tests.messaging"
    suite = QpidPython(qp.python, os.pathsep.join(p for p in (qp.path, str(_SUITE_CACHE)) if p))
    ok = False
    try:
        ok = suite.run(check, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        pass
    if not ok:
        try:
            result = subprocess.run([qp.python, "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir",
                                     "--no-deps", "--upgrade", "--target", str(_SUITE_CACHE), *SUITE_PACKAGES],
                                    capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            return None, f"cannot install {' '.join(SUITE_PACKAGES)} for {qp.python}: {e}"
        last = suite.run(check, timeout=60)
        if result.returncode != 0 or last.returncode != 0:
            tail = (result.stderr or last.stderr or result.stdout).strip().splitlines()[-1:] or ["?"]
            return None, f"cannot install {' '.join(SUITE_PACKAGES)} for {qp.python}: {tail[0]}"
    suite.test_runner = _runner(suite)
    if suite.test_runner is None:
        return None, f"qpid-python-test not found beside {suite.path}"
    return suite, ""


def qpid_suite() -> QpidPython | None:
    """qpid-python with what its conformance suites import (qmf.console, qpidtoollibs); None if
    it cannot be had (``why_suite_missing``)."""
    if not _suite_found:
        qpid_python()  # outside the lock below: it takes the same one
        with _install_lock():
            _suite_found.extend(_find_suite())
    return _suite_found[0]


def why_suite_missing() -> str:
    qpid_suite()
    return _suite_found[1]


def require_qpid_suite() -> QpidPython:
    import pytest

    qp = qpid_suite()
    if qp is None:
        pytest.skip(why_suite_missing())
    return qp
