"""warren/config_sources.py: every Config field is a file key and an environment variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from warren.config import Config
from warren.config_sources import SettingsError, option_fields, read_environment, read_file, resolve, to_toml

SAMPLE = {str: "x", int: "7", float: "0.5", bool: "true", Path: "/tmp/x", tuple: "a,b"}


def test_every_field_is_an_environment_variable():
    fields = option_fields()
    env = {f"WARREN_{name.upper()}": SAMPLE[f.base] for name, f in fields.items()}
    got = read_environment(env)
    assert set(got) == set(fields)
    assert got["heartbeat"] == (7, "WARREN_HEARTBEAT")
    assert got["vhosts"] == (("a", "b"), "WARREN_VHOSTS")
    assert got["fsync"] == (True, "WARREN_FSYNC")
    assert got["memory_high_watermark"] == (0.5, "WARREN_MEMORY_HIGH_WATERMARK")


def test_internal_fields_are_not_settings():
    assert "handoff_socket" not in option_fields() and "policy_file" not in option_fields()


def test_every_field_round_trips_through_the_file(tmp_path):
    config = Config(heartbeat=5, vhosts=("/", "x"), fsync=False, http_host="0.0.0.0", log_file=Path("/tmp/l"),
                    default_user="ops", default_pass="pw").validate()
    f = tmp_path / "w.toml"
    f.write_text(to_toml(config, hide=()))
    again, sources = resolve({}, config_file=f, environ={})
    assert again == config
    assert all(s.kind == "file" for name, s in sources.items() if getattr(config, name) is not None)


def test_precedence():
    env = {"WARREN_HEARTBEAT": "2", "WARREN_PORT": "2"}
    config, sources = resolve({"port": 3}, environ=env)
    assert (config.port, config.heartbeat) == (3, 2)
    assert (sources["port"].kind, sources["heartbeat"].kind, sources["host"].kind) == \
        ("command line", "environment", "default")


def test_both_spellings_of_one_key_is_an_error(tmp_path):
    f = tmp_path / "w.toml"
    f.write_text("data_dir = 'a'\ndata-dir = 'b'\n")
    with pytest.raises(SettingsError, match="given twice"):
        read_file(f)


def test_unknown_warren_variables_are_ignored():
    assert read_environment({"WARREN_TEST_BROKER_URL": "amqp://x", "WARREN_NO_EXTENSIONS": "1"}) == {}


@pytest.mark.parametrize("value, expected", [(None, None), ("1", True), ("0", False), ("true", True), ("off", False)])
def test_publish_runs_keeps_its_environment_variable(value, expected):
    """WARREN_PUBLISH_RUNS, read at import by the adapter until session 7, is Config.publish_runs
    now: 1 and 0 keep their meaning, unset is the default (runs under confirms)."""
    config, sources = resolve({}, environ={} if value is None else {"WARREN_PUBLISH_RUNS": value})
    assert config.publish_runs is expected
    assert sources["publish_runs"].kind == ("default" if value is None else "environment")


def test_publish_runs_from_the_file_and_the_command_line(tmp_path):
    f = tmp_path / "w.toml"
    f.write_text("publish-runs = true\n")
    assert resolve({}, config_file=f, environ={})[0].publish_runs is True
    assert resolve({"publish_runs": False}, config_file=f, environ={})[0].publish_runs is False
    f.write_text("publish_runs = 1\n")
    with pytest.raises(SettingsError, match="publish_runs.*boolean"):
        resolve({}, config_file=f, environ={})
