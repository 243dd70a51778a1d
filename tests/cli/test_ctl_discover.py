"""`warren ctl` without --url (warren/cli/ctl/discover.py): it finds a local Warren by the
listeners file in its data folder or by the settings file, before RabbitMQ's default port, and
says on stderr which broker it uses. Brokers run as subprocesses on ephemeral ports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXTERNAL_URL, launch_broker

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="starts private Warren brokers")

SETTINGS_VARIABLES = ("WARREN_CTL_URL", "WARREN_CTL_USER", "WARREN_CTL_PASS", "WARREN_CONFIG_FILE", "WARREN_DATA_DIR")


def ctl(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARIABLES}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "warren", "ctl", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env=environment, stdin=subprocess.DEVNULL)


def found_listeners(b) -> tuple[str, int, int]:
    """The listeners file ctl finds for broker ``b`` (relative to its parent folder), the pid it
    names and the HTTP port it points at: the data folder's own, or under --workers worker 0's
    (each worker keeps one in its folder; ctl looks there after the data folder's)."""
    if b.workers:
        first = b.workers[0]
        return "data/workers/0/listeners.json", first["pid"], first["http_port"]
    return "data/listeners.json", b.proc.pid, b.http_port


@pytest.fixture
def local_warren(tmp_path):
    """A Warren whose data folder is ./data of tmp_path (`warren serve`'s default, relative)."""
    b = launch_broker(tmp_path, data_dir=tmp_path / "data")
    yield b
    b.stop()


def test_ctl_finds_the_warren_whose_data_folder_is_here(local_warren, tmp_path):
    r = ctl(tmp_path, "status")
    assert r.returncode == 0, r.stderr
    where, pid, http_port = found_listeners(local_warren)
    url = f"http://127.0.0.1:{http_port}"
    assert (f"Using {url}, the Warren found in {where}, pid {pid} "
            f"(--url to choose another)") in r.stderr.splitlines()
    assert r.stdout.startswith(f"Status of Warren node ") and f" at {url} ..." in r.stdout.splitlines()[0]


def test_ctl_finds_it_through_warren_data_dir_from_anywhere(local_warren, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = ctl(elsewhere, "list_queues", env={"WARREN_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 0, r.stderr
    _, _, http_port = found_listeners(local_warren)
    assert f"Using http://127.0.0.1:{http_port}, the Warren found in {tmp_path / 'data'}" in r.stderr


def test_a_url_given_is_used_and_nothing_is_said_about_it(local_warren, tmp_path):
    r = ctl(tmp_path, "--url", local_warren.http_url, "ping")
    assert r.returncode == 0, r.stderr
    assert "Using " not in r.stderr


def test_the_listeners_file_goes_with_a_clean_stop_and_ctl_says_it_falls_back(tmp_path):
    b = launch_broker(tmp_path, data_dir=tmp_path / "data")
    try:
        where, _, http_port = found_listeners(b)
        assert json.loads((tmp_path / where).read_text())["http_port"] == http_port
    finally:  # stopped even when the check fails (CI once left this broker running)
        b.stop()
    assert not (tmp_path / where).exists()
    r = ctl(tmp_path, "ping", "--timeout", "5")
    assert ("Using http://127.0.0.1:15672, RabbitMQ's default management port: no --url, WARREN_CTL_URL or "
            "running Warren found here") in r.stderr.splitlines()


def test_a_listeners_file_left_by_a_killed_broker_is_passed_over(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          timeout=30)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "listeners.json").write_text(json.dumps({"pid": int(gone.stdout), "http_port": 1}))
    r = ctl(tmp_path, "ping", "--timeout", "5")
    assert "RabbitMQ's default management port" in r.stderr and "listeners.json" not in r.stderr


def test_ctl_finds_the_http_port_of_the_settings_file(local_warren, tmp_path):
    elsewhere = tmp_path / "service"
    elsewhere.mkdir()
    (elsewhere / "warren.toml").write_text(f'http-port = {local_warren.http_port}\nhost = "127.0.0.1"\n'
                                           f'data-dir = "{elsewhere / "no-data-here"}"\n')
    r = ctl(elsewhere, "ping")
    assert r.returncode == 0, r.stderr
    assert (f"Using http://127.0.0.1:{local_warren.http_port}, the Warren found in http-port in warren.toml "
            f"(--url to choose another)") in r.stderr.splitlines()
