"""Flags and their SUBROUTE_* defaults: a bad value is a usage error naming the flag and the variable, and only
for the command that reads it."""

from __future__ import annotations

import pytest

from subroute.cli.main import build_parser, main


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        (
            "SUBROUTE_BATCH_SIZE",
            "abc",
            "argument --batch-size: 'abc' (flag or env SUBROUTE_BATCH_SIZE): expected int >= 1",
        ),
        ("SUBROUTE_BATCH_SIZE", "0", "expected int >= 1"),
        (
            "SUBROUTE_GUARANTEE",
            "bogus",
            "'bogus' (flag or env SUBROUTE_GUARANTEE): expected one of at-least-once, exactly-once",
        ),
        ("SUBROUTE_LOG_LEVEL", "foo", "(flag or env SUBROUTE_LOG_LEVEL): expected one of DEBUG, INFO"),
        ("SUBROUTE_METRICS_PORT", "http", "(flag or env SUBROUTE_METRICS_PORT): expected int"),
        (
            "SUBROUTE_PENDING_SWEEP_SECONDS",
            "0",
            "(flag or env SUBROUTE_PENDING_SWEEP_SECONDS): expected float >= 1",
        ),
    ],
)
def test_a_bad_environment_default_is_a_usage_error_of_the_worker_only(
    variable: str,
    value: str,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, value)
    assert expected in usage_error(["worker"], capsys)


def test_other_commands_are_not_stopped_by_a_worker_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SUBROUTE_BATCH_SIZE", "abc")
    with pytest.raises(SystemExit) as exited:
        main(["config", "--help"])
    assert exited.value.code == 0
    assert "apply" in capsys.readouterr().out


def test_log_level_is_case_insensitive_and_a_bad_flag_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert build_parser().parse_args(["worker", "--log-level", "debug"]).log_level == "DEBUG"
    assert build_parser().parse_args(["worker", "--batch-size", "500"]).batch_size == 500
    assert "argument --log-level: 'foo'" in usage_error(["worker", "--log-level", "foo"], capsys)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("subroute ") and out.split()[1][0].isdigit()
