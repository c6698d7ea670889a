"""``subroute config validate``: the file's checks for pull-request CI, with no broker at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from subroute.cli.main import main

VALID = """
apps:
  billing:
    inputs: [orders]
    properties: {CustomerId: int}
    filter: 'CustomerId >= 0'
    groups:
      vip: {subscriptions: [{expression: 'CustomerId == 0', priority: 10}]}
      everyone: {}
"""


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    # A closed port: validating must not need Kafka (a connection attempt would end in exit 3).
    monkeypatch.setenv("SUBROUTE_BOOTSTRAP_SERVERS", "127.0.0.1:1")


def _validate(tmp_path: Path, text: str, *extra: str) -> int:
    path = tmp_path / "subscriptions.yaml"
    path.write_text(text)
    return main(["config", "validate", "-f", str(path), *extra])


def test_a_valid_file_is_accepted_without_kafka(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _validate(tmp_path, VALID) == 0
    assert "valid (1 app(s), 2 group(s), 2 expression(s))" in capsys.readouterr().out


def test_a_bad_expression_is_refused_with_a_caret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _validate(tmp_path, VALID.replace("CustomerId == 0", "CustomerId == 'zero'")) == 2
    err = capsys.readouterr().err
    assert "CustomerId == 'zero'" in err and "^" in err and "1 error(s)" in err


def test_inputs_are_checked_against_the_prefix_they_will_be_applied_under(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reads_its_own_groups = VALID.replace("inputs: [orders]", "inputs: ['^prod\\..*']")
    assert _validate(tmp_path, reads_its_own_groups, "--topic-prefix", "staging") == 0
    assert _validate(tmp_path, reads_its_own_groups, "--topic-prefix", "prod") == 2
    assert "prod" in capsys.readouterr().err


def test_a_yaml_error_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _validate(tmp_path, "apps: [unclosed") == 2
    assert "YAML" in capsys.readouterr().err


SHOP = """
apps:
  shop:
    inputs: orders
    groups:
      all: {}
"""


def test_a_directory_is_one_configuration_of_all_its_yaml_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "billing.yaml").write_text(VALID)
    (tmp_path / "shop.yml").write_text(SHOP)
    (tmp_path / "notes.txt").write_text("not YAML: ignored")
    (tmp_path / ".hidden.yaml").write_text("apps: {broken: [")
    assert main(["config", "validate", "-f", str(tmp_path)]) == 0
    assert "valid (2 app(s), 3 group(s), 2 expression(s))" in capsys.readouterr().out


def test_an_app_in_two_files_of_a_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(SHOP)
    (tmp_path / "b.yaml").write_text(SHOP)
    assert main(["config", "validate", "-f", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"app/shop: defined in both {tmp_path / 'a.yaml'} and {tmp_path / 'b.yaml'}" in err


def test_an_empty_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "validate", "-f", str(tmp_path)]) == 2
    assert "no .yaml or .yml file in this directory" in capsys.readouterr().err


def test_dash_reads_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(VALID))
    assert main(["config", "validate", "-f", "-"]) == 0
    assert "<stdin>: valid (1 app(s), 2 group(s)" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO("apps:\n  shop:\n    inputs: [o]\n    group: {}\n"))
    assert main(["config", "validate", "-f", "-"]) == 2
    assert "unknown key 'group' (did you mean 'groups'?)" in capsys.readouterr().err
