"""Global flags: the Kafka and logging flags go before or after the subcommand, -b / --bootstrap-server as
Kafka's own tools spell them, --kafka-config-file (a properties file, as kcat -F), and librdkafka's own log kept
quiet unless -v (tested against a closed port)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from subroute.cli.main import build_parser, parse
from subroute.ops.settings import Settings, SettingsError

CLOSED = "127.0.0.1:1"  # nothing listens on port 1: every connection is refused at once


def parsed(argv: list[str]) -> argparse.Namespace:
    return parse(build_parser(), argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["-b", "h:1", "--topic-prefix", "p", "dlq", "list", "A"],
        ["dlq", "list", "A", "-b", "h:1", "--topic-prefix", "p"],
        ["--bootstrap-server", "h:1", "dlq", "list", "--topic-prefix", "p", "A"],
        ["--bootstrap-servers", "h:1", "--topic-prefix", "p", "dlq", "list", "A"],
        ["-b", "h:1", "expr", "check", "a = 1", "--topic-prefix", "p"],  # accepted even where unused
    ],
)
def test_global_flags_go_before_or_after_the_subcommand(argv: list[str]) -> None:
    args = parsed(argv)
    assert (args.bootstrap_servers, args.topic_prefix) == ("h:1", "p")
    assert not [name for name in vars(args) if name.startswith("global_")]


def test_the_flag_after_the_subcommand_wins_and_kafka_config_adds_up() -> None:
    args = parsed(
        ["-b", "first:1", "--kafka-config", "a=1", "config", "get", "-b", "second:2", "--kafka-config", "b=2"]
    )
    assert args.bootstrap_servers == "second:2"
    assert args.kafka_config == ["a=1", "b=2"]
    settings = Settings.from_args(args, environ={})
    assert settings.client_config()["a"] == "1" and settings.client_config()["b"] == "2"


def test_logging_flags_are_global(capsys: pytest.CaptureFixture[str]) -> None:
    assert parsed(["-vv", "config", "get"]).verbose == 2
    assert parsed(["config", "get", "-v"]).verbose == 1
    assert parsed(["--log-level", "debug", "dlq", "list", "A"]).log_level == "DEBUG"
    with pytest.raises(SystemExit) as exited:
        parsed(["config", "get", "--log-level", "loud"])
    assert exited.value.code == 2
    assert "argument --log-level: 'loud'" in capsys.readouterr().err


def test_kafka_config_file_is_a_properties_file_below_the_explicit_flag(tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text(
        "# librdkafka settings\n"
        "! also a comment\n"
        "\n"
        "security.protocol=SASL_SSL\n"
        "  sasl.mechanism : SCRAM-SHA-512\n"
        "client.id = from-file\n"
        "ssl.ca.location=/etc/ca=1.crt\n"
    )
    args = parsed(
        ["--kafka-config-file", str(properties), "config", "get", "--kafka-config", "client.id=from-flag"]
    )
    environ = {"SUBROUTE_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT", "SUBROUTE_KAFKA_SOCKET_TIMEOUT_MS": "5000"}
    config = Settings.from_args(args, environ=environ).client_config()
    assert config["security.protocol"] == "SASL_SSL"  # the file wins over the environment
    assert config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert config["ssl.ca.location"] == "/etc/ca=1.crt"
    assert config["client.id"] == "from-flag"  # the explicit flag wins over the file
    assert config["socket.timeout.ms"] == "5000"  # the environment fills in the rest


def test_a_bad_kafka_config_file_is_refused_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text("acks=all\njust-a-word\n")
    with pytest.raises(SettingsError, match=r"bad.properties:2: wants KEY=VALUE"):
        Settings.from_args(parsed(["--kafka-config-file", str(bad), "config", "get"]), environ={})
    with pytest.raises(SettingsError, match="No such file"):
        Settings.from_args(
            parsed(["config", "get", "--kafka-config-file", str(tmp_path / "none")]), environ={}
        )


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "subroute.cli", *argv], capture_output=True, text=True, timeout=120
    )


def test_a_missing_kafka_config_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run_cli("dlq", "list", "A", "--kafka-config-file", str(tmp_path / "none"))
    assert result.returncode == 2
    assert result.stderr.startswith("subroute: --kafka-config-file ") and result.stderr.count("\n") == 1


EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "subscriptions.yaml")


@pytest.mark.parametrize(
    "command",
    [["dlq", "list", "X"], ["config", "apply", "-f", EXAMPLE]],  # a consumer first; an admin client first
    ids=["dlq-list", "config-apply"],
)
def test_an_unreachable_broker_is_one_line_not_librdkafkas_log(command: list[str]) -> None:
    result = run_cli(*command, "-b", CLOSED)
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr[:2000]
    assert result.stderr.startswith(f"subroute: Kafka at {CLOSED}: ")
    assert "%3|" not in result.stderr and result.stdout == ""


def test_verbose_shows_librdkafkas_log_through_python_logging() -> None:
    result = run_cli("-v", "dlq", "list", "X", "-b", CLOSED)
    assert result.returncode == 3
    lines = result.stderr.splitlines()
    assert len(lines) > 1 and all(line.startswith("subroute: ") for line in lines), lines[:5]
    assert any("subroute.librdkafka" in line and "Connection refused" in line for line in lines)
