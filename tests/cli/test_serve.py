"""`warren serve` (warren/cli/serve.py): settings from file, environment and command line,
start-up that fails with one line, the log file and its formats. Brokers run as subprocesses."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pika
import pytest

from tests.conftest import EXTERNAL_URL

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="starts private Warren brokers")


def serve(*args: str, env: dict | None = None, timeout: float = 30, cwd: Path | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("WARREN_") or k == "WARREN_TEST_BROKER_URL"}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "warren", "serve", *args], capture_output=True, text=True,
                          timeout=timeout, env=environ, stdin=subprocess.DEVNULL, cwd=cwd)


def one_line_error(r: subprocess.CompletedProcess) -> str:
    """The failed run's single stderr line (and no traceback)."""
    assert r.returncode != 0, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


def printed(r: subprocess.CompletedProcess) -> dict[str, str]:
    """--print-config's lines: key -> the line."""
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        key = line.lstrip("# ").split(" ")[0]
        out[key] = line
    return out


# --- sources and precedence -----------------------------------------------------------------

def test_print_config_shows_values_and_where_they_came_from(tmp_path):
    f = tmp_path / "warren.toml"
    f.write_text('heartbeat = 11\nport = 6001\nchannel-max = 99\nvhost = ["/", "from-file"]\nfsync = false\n')
    r = serve("--config", str(f), "--print-config", "--port", "6003",
              env={"WARREN_PORT": "6002", "WARREN_CHANNEL_MAX": "77", "WARREN_DEFAULT_USER": "ops",
                   "WARREN_DEFAULT_PASS": "s3cret"})
    p = printed(r)
    assert p["port"] == "port = 6003  # command line"
    assert p["channel_max"] == "channel_max = 77  # environment (WARREN_CHANNEL_MAX)"
    assert p["heartbeat"] == f"heartbeat = 11  # file ({f})"
    assert p["vhosts"] == f'vhosts = ["/", "from-file"]  # file ({f})'
    assert p["fsync"].startswith("fsync = false")
    assert p["frame_max"] == "frame_max = 131072  # default"
    assert p["default_user"] == 'default_user = "ops"  # environment (WARREN_DEFAULT_USER)'
    assert "s3cret" not in r.stdout  # the password is not printed
    assert p["ready_file"].startswith("# ready_file is not set")


def test_the_config_file_can_come_from_the_environment(tmp_path):
    f = tmp_path / "w.toml"
    f.write_text("heartbeat = 7\n")
    p = printed(serve("--print-config", env={"WARREN_CONFIG_FILE": str(f)}))
    assert p["heartbeat"] == f"heartbeat = 7  # file ({f})"


def test_printed_config_is_a_config_file(tmp_path):
    first = serve("--print-config", "--heartbeat", "9", "--vhost", "a", "--vhost", "b")
    f = tmp_path / "printed.toml"
    f.write_text(first.stdout)
    again = printed(serve("--config", str(f), "--print-config"))
    assert again["heartbeat"].startswith("heartbeat = 9  # file")
    assert again["vhosts"].startswith('vhosts = ["a", "b"]  # file')


@pytest.mark.parametrize("content,expected", [
    ("heartbeats = 3\n", "unknown key 'heartbeats' in configuration file {f}"),
    ('heartbeat = "3"\n', "key 'heartbeat' in configuration file {f} must be an integer"),
    ("fsync = 1\n", "key 'fsync' in configuration file {f} must be a boolean"),
    ('vhosts = "/"\n', "key 'vhosts' in configuration file {f} must be an array of strings"),
    ("[listeners]\nport = 1\n", "unknown key 'listeners' in configuration file {f}"),
    ("port = \n", "configuration file {f} is not valid TOML"),
])
def test_file_errors_name_the_key_and_the_file(tmp_path, content, expected):
    f = tmp_path / "warren.toml"
    f.write_text(content)
    assert expected.format(f=f) in one_line_error(serve("--config", str(f)))


def test_a_missing_config_file_is_an_error(tmp_path):
    assert "not found" in one_line_error(serve("--config", str(tmp_path / "nope.toml")))


@pytest.mark.parametrize("env,expected", [
    ({"WARREN_PORT": "x"}, "environment variable WARREN_PORT must be an integer, not 'x'"),
    ({"WARREN_FSYNC": "maybe"}, "environment variable WARREN_FSYNC must be a boolean"),
])
def test_environment_errors_name_the_variable(env, expected):
    assert expected in one_line_error(serve(env=env))


@pytest.mark.parametrize("args,expected", [
    (("--port", "70000"), "port 70000 out of range"),
    (("--port", "abc"), "'abc' is not a valid integer"),
    (("--log-format", "xml"), "--log-format"),
    (("--no-such-option",), "No such option"),
    (("--default-user", "ops"), "default-user and default-pass go together"),
])
def test_a_bad_option_is_one_line(args, expected):
    assert expected in one_line_error(serve(*args))


# --- start-up failures ------------------------------------------------------------------------

def listening_socket() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


@pytest.mark.parametrize("which", ["--port", "--http-port"])
def test_a_port_in_use_is_one_line(tmp_path, which):
    with listening_socket() as s:
        port = s.getsockname()[1]
        args = {"--port": "0", "--http-port": "0", which: str(port)}
        r = serve("--data-dir", str(tmp_path / "data"), *[x for kv in args.items() for x in kv])
    what = "AMQP" if which == "--port" else "HTTP API and web UI"
    assert f"cannot listen: {what} on 127.0.0.1:{port} ({which}): port already in use" in one_line_error(r)


def test_every_busy_port_is_named_in_one_error_with_the_flag_that_moves_it(tmp_path):
    # RabbitMQ's 5672, 15672 and 15692 taken at once (a newcomer's usual machine), here on ephemeral ports
    with listening_socket() as amqp, listening_socket() as http, listening_socket() as metrics:
        ports = {flag: s.getsockname()[1] for flag, s in
                 (("--port", amqp), ("--http-port", http), ("--prometheus-port", metrics))}
        r = serve("--data-dir", str(tmp_path / "data"), *[x for kv in ports.items() for x in (kv[0], str(kv[1]))])
    line = one_line_error(r)
    assert f"AMQP on 127.0.0.1:{ports['--port']} (--port): port already in use" in line
    assert f"HTTP API and web UI on 127.0.0.1:{ports['--http-port']} (--http-port): port already in use" in line
    assert f"Prometheus metrics on 127.0.0.1:{ports['--prometheus-port']} (--prometheus-port): port already in use" in line
    # a command that moves all three, each to a port above the busy one, no two the same
    suggested = line.split("try warren serve ", 1)[1].split(" (or 0", 1)[0].split()
    moved = dict(zip(suggested[::2], map(int, suggested[1::2])))
    assert set(moved) == set(ports) and len(set(moved.values())) == 3
    assert all(moved[flag] > ports[flag] for flag in ports)
    # nothing started before the check: no store was recovered, no listener line logged
    assert not (tmp_path / "data" / "access.json").exists()


def test_two_listeners_on_one_port_are_refused_before_either_starts(tmp_path):
    with listening_socket() as s:
        port = s.getsockname()[1]  # a port free once this socket closes
    r = serve("--data-dir", str(tmp_path / "data"), "--port", str(port), "--http-port", str(port))
    assert f"HTTP API and web UI on 127.0.0.1:{port} (--http-port): the same port as --port" in one_line_error(r)


def test_a_second_broker_on_the_same_data_folder_is_refused(start_broker, tmp_path):
    b = start_broker("--workers", "1")  # one process, as the second one (a workers' folder is refused by it)
    r = serve("--data-dir", str(b.data_dir), "--port", "0", "--http-port", "-1")
    line = one_line_error(r)
    assert f"data folder {b.data_dir} is in use by another warren serve (pid {b.proc.pid})" in line
    b.stop()  # the lock goes with the process
    r = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--data-dir", str(b.data_dir), "--port", "0",
                          "--http-port", "-1", "--ready-file", str(tmp_path / "ready.json")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "ready.json").exists():
            assert r.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        r.send_signal(signal.SIGTERM)
        r.wait(timeout=15)


def test_the_workers_supervisor_locks_the_data_folder(start_broker):
    b = start_broker("--workers", "2", "--vhost", "/", "--vhost", "other")
    line = one_line_error(serve("--data-dir", str(b.data_dir), "--port", "0", "--http-port", "-1"))
    assert "is in use by another warren serve" in line


def test_an_unusable_data_folder_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    line = one_line_error(serve("--data-dir", str(blocker / "data"), "--port", "0", "--http-port", "-1"))
    assert f"data folder {blocker / 'data'} is not usable" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders anyway")
def test_a_read_only_data_folder_is_one_line(tmp_path):
    data = tmp_path / "ro"
    data.mkdir()
    data.chmod(0o500)
    try:
        line = one_line_error(serve("--data-dir", str(data), "--port", "0", "--http-port", "-1"))
    finally:
        data.chmod(0o700)
    assert str(data) in line


def test_an_unserved_vhost_in_the_data_folder_is_named(start_broker):
    b = start_broker("--vhost", "/", "--vhost", "kept-h3")
    conn = pika.BlockingConnection(pika.ConnectionParameters(b.host, b.port, virtual_host="kept-h3"))
    conn.channel().queue_declare("durable-q", durable=True)
    conn.close()
    b.stop()
    b2 = start_broker(data_dir=b.data_dir)
    try:
        still_served = True
        conn = pika.BlockingConnection(pika.ConnectionParameters(b2.host, b2.port, virtual_host="kept-h3"))
        conn.close()
    except pika.exceptions.AMQPConnectionError:
        still_served = False
    warned = "vhost 'kept-h3' has 1 durable queues" in b2.log()
    # vhosts kept by the access store are served again; otherwise the start-up names them
    assert warned != still_served, b2.log()


# --- a real broker from a file ------------------------------------------------------------------

def test_a_broker_takes_its_settings_from_the_file(start_broker, tmp_path):
    f = tmp_path / "warren.toml"
    f.write_text('vhosts = ["/", "file-vhost-h3"]\nheartbeat = 13\n')
    b = start_broker("--config", str(f))
    conn = pika.BlockingConnection(pika.ConnectionParameters(b.host, b.port, virtual_host="file-vhost-h3"))
    try:
        assert conn._impl.params.heartbeat == 13  # pika takes the server's proposal
    finally:
        conn.close()


# --- the log file ---------------------------------------------------------------------------------

def wait_for(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def connect_and_close(b, name: str) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters(b.host, b.port,
                                                             client_properties={"connection_name": name}))
    conn.close()


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_the_log_file_is_reopened_on_sighup(start_broker, tmp_path):
    log = tmp_path / "logs" / "warren.log"
    b = start_broker("--log-file", str(log))
    assert "Warren listening" in read(log)
    assert "Warren listening" not in b.log()  # not on stderr any more
    connect_and_close(b, "before-rotate")
    wait_for(lambda: "before-rotate" in read(log))
    rotated = log.with_suffix(".log.1")
    log.rename(rotated)
    b.signal(signal.SIGHUP)
    wait_for(lambda: "log file reopened" in read(log))
    connect_and_close(b, "after-rotate")
    wait_for(lambda: "after-rotate" in read(log))
    assert "after-rotate" not in read(rotated)
    assert b.proc.poll() is None  # SIGHUP does not stop the broker


def test_json_log_lines(start_broker, tmp_path):
    log = tmp_path / "warren.jsonl"
    b = start_broker("--log-file", str(log), "--log-format", "json")
    connect_and_close(b, "json-client")
    wait_for(lambda: '"event": "connection.closed"' in read(log))  # the opened line comes first
    records = [json.loads(line) for line in read(log).splitlines()]
    for r in records:
        assert {"time", "level", "logger", "message"} <= set(r)
    (closed,) = [r for r in records if r.get("event") == "connection.closed"]
    assert closed["client"] == "json-client" and closed["user"] == "guest" and closed["vhost"] == "/"
    assert closed["level"] == "INFO" and closed["logger"] == "warren.connection"
    assert closed["peer"].startswith("127.0.0.1:") and closed["lived_s"] >= 0
    assert closed["reason"].startswith("client closed the connection")


def test_a_start_up_failure_is_in_the_log_file_too(tmp_path):
    log = tmp_path / "warren.log"
    with listening_socket() as s:
        r = serve("--data-dir", str(tmp_path / "d"), "--port", str(s.getsockname()[1]), "--http-port", "-1",
                  "--log-file", str(log))
    assert "port already in use" in one_line_error(r)
    assert "cannot start: cannot listen: AMQP on 127.0.0.1:" in read(log)


def test_the_default_user_comes_from_the_environment(tmp_path):
    from tests.conftest import launch_broker

    os.environ["WARREN_DEFAULT_USER"], os.environ["WARREN_DEFAULT_PASS"] = "ops-h3", "pw-h3"
    try:
        b = launch_broker(tmp_path)
    finally:
        del os.environ["WARREN_DEFAULT_USER"], os.environ["WARREN_DEFAULT_PASS"]
    try:
        creds = pika.PlainCredentials("ops-h3", "pw-h3")
        pika.BlockingConnection(pika.ConnectionParameters(b.host, b.port, credentials=creds)).close()
        with pytest.raises(pika.exceptions.ProbableAuthenticationError):
            pika.BlockingConnection(pika.ConnectionParameters(b.host, b.port))  # no guest in a new folder
    finally:
        b.stop()


def test_the_start_up_log_names_the_version_the_absolute_data_path_and_the_web_ui(tmp_path):
    import urllib.request

    from warren import DISTRIBUTION, __version__

    ready = tmp_path / "ready.json"
    log = tmp_path / "warren.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARREN_")}
    # a relative --data-dir, as in the README's command: the log gives where it really is
    proc = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--port", "0", "--http-port", "0",
                             "--data-dir", "relative-data", "--ready-file", str(ready), "--log-file", str(log)],
                            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        info = wait_for(lambda: ready.exists() and json.loads(ready.read_text()), timeout=30)
        text = read(log)
        absolute = (tmp_path / "relative-data").resolve()
        assert f"Warren {__version__} ({DISTRIBUTION}) starting: Python " in text
        assert f"data in {absolute}" in text
        assert f"Warren listening for AMQP on 127.0.0.1:{info['port']} (data in {absolute})" in text
        url = f"http://127.0.0.1:{info['http_port']}/"
        assert f"web UI at {url} (the HTTP API under /api/)" in text
        with urllib.request.urlopen(url, timeout=10) as page:  # the address logged is the UI's
            assert page.status == 200 and "<title>" in page.read().decode().lower()
        request = urllib.request.Request(url + "api/overview", headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="})
        with urllib.request.urlopen(request, timeout=10) as answer:
            overview = json.loads(answer.read())
        assert overview["product_name"] == "Warren" and overview["product_version"] == __version__
        assert overview["rabbitmq_version"].startswith("3.")  # the API level tools gate on stays RabbitMQ's
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", info["port"]))
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        proc.stderr.close()


# --- help and completion -----------------------------------------------------------------------

def test_help_groups_every_option_by_topic_with_its_default():
    from warren.cli.serve import OPTION_GROUPS

    r = subprocess.run([sys.executable, "-m", "warren", "serve", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    headings = [line for line in r.stdout.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert headings == [title + ":" for title, _ in OPTION_GROUPS]  # in order, and no "Other options"
    sections: dict[str, str] = {}
    current = None
    for line in r.stdout.splitlines():
        if line in headings:
            current = line
        elif current is not None:
            sections[current] = sections.get(current, "") + line + "\n"
    listeners = sections[OPTION_GROUPS[0][0] + ":"]
    assert "--http-port" in listeners and "The web UI and the HTTP API" in listeners and "[default: 15672]" in listeners
    assert "--data-dir" in sections["Storage:"] and "[default: data]" in sections["Storage:"]
    assert "--tls-port" not in sections["Storage:"] and "--tls-cert" in sections["TLS (docs/security.md):"]
    assert "RabbitMQ's consumer_timeout" in sections["Limits, time-outs and flow control:"]


def test_click_shell_completion_completes_commands_and_options():
    # click's own completion, through the installed `warren` script (the env var is named after it)
    command = Path(sys.executable).with_name("warren")
    if not command.exists():
        pytest.skip(f"no `warren` script beside {sys.executable} (not installed with pip)")

    def complete(words: str, index: int) -> str:
        env = dict(os.environ, COMP_WORDS=words, COMP_CWORD=str(index), _WARREN_COMPLETE="bash_complete")
        return subprocess.run([str(command)], capture_output=True, text=True, timeout=60, env=env).stdout

    source = subprocess.run([str(command)], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, _WARREN_COMPLETE="bash_source")).stdout
    assert "complete -o nosort -F _warren_completion warren" in source
    assert complete("warren serve --http-p", 2).split() == ["plain,--http-port"]
    assert "plain,list_queues" in complete("warren ctl list_q", 2).split()


def test_a_locked_relative_data_folder_is_named_by_its_absolute_path(start_broker, tmp_path):
    b = start_broker()  # its data folder, given absolute; the second serve names it relatively
    r = serve("--data-dir", os.path.relpath(b.data_dir, tmp_path), "--port", "0", "--http-port", "0", cwd=tmp_path)
    assert f"data folder {b.data_dir.resolve()} is in use by another warren serve (pid {b.proc.pid})" in one_line_error(r)
