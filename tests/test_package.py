"""The package as a user gets it: `python -m build` makes an sdist and a wheel named
warren-broker (PyPI's `warren` is another project) with the C accelerators compiled, and the
wheel, installed into a fresh virtualenv, runs a broker that a real client uses.

The build runs once for this file (about 20 s: an isolated build environment gets setuptools
from the package index, as a release build does) from a copy of the working tree, so that
nothing is written into the tree. Those two are marked ``package``; ``-m "not package"`` leaves
them out. The files of ``packaging/`` (systemd unit, logrotate, the example warren.toml) are checked here too, with
``systemd-analyze verify`` and a real logrotate run where those are installed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
import venv
import zipfile
from pathlib import Path

import pika
import pytest

import warren


ROOT = Path(__file__).resolve().parent.parent
# what a release build leaves out of the copy it builds from: local state, caches, the other builds
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "data", "build", "dist", "node_modules", "__pycache__", "*.so",
                                    "*.egg-info", ".pytest_cache", ".hypothesis", "site")
BUILD_TIMEOUT_S = 300
INSTALL_TIMEOUT_S = 300
START_TIMEOUT_S = 30
ACCELERATORS = ("warren/codec/_speedups", "warren/store/_records", "warren/broker/_messages", "warren/store/_fsync")


def _environment() -> dict:
    # no WARREN_* setting of the test run may reach the installed broker
    return {k: v for k, v in os.environ.items() if not k.startswith("WARREN_") and k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel, built as a release builds them (a compile failure fails it)."""
    work = tmp_path_factory.mktemp("package")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    out = work / "dist"
    env = _environment() | {"WARREN_REQUIRE_EXTENSIONS": "1"}
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(source)], capture_output=True,
                       text=True, timeout=BUILD_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


def _one(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    assert len(found) == 1, (pattern, sorted(p.name for p in dist.iterdir()))
    return found[0]


@pytest.mark.package
@pytest.mark.timeout(600)
def test_the_build_makes_an_sdist_and_a_wheel_named_warren_broker_with_the_accelerators(dist):
    version = warren.__version__
    sdist = _one(dist, f"warren_broker-{version}.tar.gz")
    wheel = _one(dist, f"warren_broker-{version}-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read(f"warren_broker-{version}.dist-info/METADATA").decode()
        entry_points = z.read(f"warren_broker-{version}.dist-info/entry_points.txt").decode()
    for module in ACCELERATORS:  # compiled, not left out quietly (WARREN_REQUIRE_EXTENSIONS)
        assert any(n.startswith(module) and n.endswith(".so") for n in names), (module, names)
    assert "warren/management/ui/static/app.js" in names  # the built web UI ships in the wheel
    assert "Name: warren-broker\n" in metadata and f"Version: {version}\n" in metadata
    assert "warren = warren.cli:main" in entry_points
    with tarfile.open(sdist) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
    assert {"warren/codec/_speedups.c", "warren/codec/_cshared.h", "warren/store/_records.c", "warren/broker/_messages.c",
            "warren/store/_fsync.c", "setup.py", "pyproject.toml", "README.md"} <= members


@pytest.mark.package
@pytest.mark.timeout(600)
def test_the_wheel_installed_in_a_fresh_venv_runs_a_broker_a_client_uses(dist, tmp_path):
    wheel = _one(dist, f"warren_broker-{warren.__version__}-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python, command = env_dir / "bin" / "python", env_dir / "bin" / "warren"
    # its dependencies from the package index, as `pip install warren-broker` gets them
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True,
                       timeout=INSTALL_TIMEOUT_S, env=_environment(), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    # run from a folder without the source tree, so that only the installed package can be imported
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = subprocess.run([str(command), "--version"], capture_output=True, text=True, timeout=60, cwd=elsewhere,
                       env=_environment())
    assert r.returncode == 0, r.stderr
    installed = env_dir / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages" / "warren"
    assert r.stdout.splitlines()[0].startswith(f"warren {warren.__version__} (distribution warren-broker")
    assert f"C accelerators compiled, package at {installed}" in r.stdout

    ready = tmp_path / "ready.json"
    log = tmp_path / "broker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(command), "serve", "--port", "0", "--http-port", "0", "--data-dir", "data",
                                 "--ready-file", str(ready)], cwd=elsewhere, env=_environment(),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready.exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", info["port"]))
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("from-the-wheel", durable=True)
            ch.basic_publish("", "from-the-wheel", b"hello", pika.BasicProperties(delivery_mode=2))
            method, _, body = ch.basic_get("from-the-wheel", auto_ack=True)
            assert method is not None and body == b"hello"
        finally:
            conn.close()
        request = urllib.request.Request(f"http://127.0.0.1:{info['http_port']}/api/overview",
                                         headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="})  # guest:guest
        with urllib.request.urlopen(request, timeout=10) as answer:
            overview = json.loads(answer.read())
        assert (overview["product_name"], overview["product_version"]) == ("Warren", warren.__version__)
        text = log.read_text()
        assert f"Warren {warren.__version__} (warren-broker) starting" in text
        assert f"data in {(elsewhere / 'data').resolve()}" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0, log.read_text()


# --- packaging/: the systemd unit, logrotate, the example settings (docs/service.md) ----------

PACKAGING = ROOT / "packaging"


def test_the_systemd_unit_verifies(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here (no systemd)")
    unit = (PACKAGING / "warren.service").read_text()
    assert "ExecStart=/opt/warren/bin/warren serve\n" in unit
    assert "Environment=WARREN_CONFIG_FILE=/etc/warren/warren.toml\n" in unit
    # verify checks that ExecStart's program exists: this test's own `warren`, where docs/service.md puts /opt/warren
    command = Path(sys.executable).with_name("warren")
    if not command.exists():
        pytest.skip(f"no `warren` script beside {sys.executable} (not installed with pip)")
    (tmp_path / "warren.service").write_text(unit.replace("/opt/warren/bin/warren", str(command)))
    r = subprocess.run([analyze, "verify", str(tmp_path / "warren.service")], capture_output=True, text=True,
                       timeout=120)
    # an unknown key or section is only a warning to verify (exit 0): any line about the unit is a failure
    complaints = [line for line in (r.stdout + r.stderr).splitlines() if "warren.service" in line]
    assert r.returncode == 0 and not complaints, r.stdout + r.stderr


def test_the_example_settings_are_a_valid_config_file():
    r = subprocess.run([sys.executable, "-m", "warren", "serve", "--config", str(PACKAGING / "warren.toml"),
                        "--print-config"], capture_output=True, text=True, timeout=60, env=_environment())
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for key, value in (("data_dir", '"/var/lib/warren"'), ("log_file", '"/var/log/warren/warren.log"'),
                       ("http_port", "15672"), ("prometheus_port", "15692")):
        assert f"{key} = {value}  # file ({PACKAGING / 'warren.toml'})" in lines, r.stdout


def test_logrotate_rotates_a_running_brokers_log_with_the_packaged_file(tmp_path):
    logrotate = shutil.which("logrotate") or ("/usr/sbin/logrotate" if Path("/usr/sbin/logrotate").exists() else None)
    if logrotate is None:
        pytest.skip("logrotate is not installed here")
    from tests.conftest import launch_broker

    log = tmp_path / "logs" / "warren.log"
    b = launch_broker(tmp_path, "--log-file", str(log))
    try:
        packaged = (PACKAGING / "warren.logrotate").read_text()
        assert "/var/log/warren/warren.log {" in packaged and "--signal=HUP warren.service" in packaged
        # the packaged stanza, for this broker: its log path, and the signal sent to its pid, not to a unit
        config = packaged.replace("/var/log/warren/warren.log", str(log))
        config = "\n".join(f"        kill -HUP {b.proc.pid}" if "systemctl kill" in line else line
                            for line in config.splitlines()) + "\n"
        (tmp_path / "logrotate.conf").write_text(config)
        r = subprocess.run([logrotate, "--force", "--state", str(tmp_path / "state"), str(tmp_path / "logrotate.conf")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        rotated = log.with_name("warren.log.1")  # delaycompress: the newest rotation stays plain
        assert rotated.exists() and "Warren listening for AMQP" in rotated.read_text()
        deadline = time.monotonic() + 10
        conn = pika.BlockingConnection(pika.ConnectionParameters(b.host, b.port,
                                                                 client_properties={"connection_name": "after-rotate"}))
        conn.close()
        while '"after-rotate"' not in (log.read_text() if log.exists() else ""):  # reopened on SIGHUP
            assert time.monotonic() < deadline, (log.exists(), rotated.read_text()[-2000:])
            time.sleep(0.05)
        assert '"after-rotate"' not in rotated.read_text()
        assert b.proc.poll() is None  # SIGHUP never stops the broker
    finally:
        b.stop()
