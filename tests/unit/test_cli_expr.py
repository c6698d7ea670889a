"""`subroute expr check` and `subroute expr eval`: the engine from the command line."""

from __future__ import annotations

import json

import pytest

from subroute.cli import main


def test_check_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["expr", "check", 'CustomerId == 1000 && OrderType == "EXPRESS"', "--type", "CustomerId=int"])
        == 0
    )
    assert "CustomerId" in capsys.readouterr().out


def test_check_bad_expression_exits_2_with_a_caret(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["expr", "check", "CustomerId = 1000"]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "==" in err  # the message suggests ==
    text_line = next(i for i, line in enumerate(lines) if "CustomerId = 1000" in line)
    caret = lines[text_line + 1]
    assert caret.strip() == "^"
    assert lines[text_line][caret.index("^")] == "="


def test_check_typed_mismatch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["expr", "check", 'CustomerId == "x"', "--type", "CustomerId=int"]) == 2
    assert "^" in capsys.readouterr().err


def test_check_refuses_an_undeclared_property_used_as_a_number(capsys: pytest.CaptureFixture[str]) -> None:
    # `expr eval` reads an undeclared --prop as text, as the router reads an undeclared header: RocketMQ's
    # sample "a BETWEEN 0 AND 3" (seed 003) could never match, so check says so and names the fix.
    assert main(["expr", "check", "a BETWEEN 0 AND 3", "--dialect", "sql92"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert "'a' is not declared, so it is a string" in lines[0] and "--type a=int" in lines[0]
    assert lines[1:] == ["  a BETWEEN 0 AND 3", "  ^"]
    assert main(["expr", "eval", "a > 1", "--prop", "a=2"]) == 2
    assert "--type a=int" in capsys.readouterr().err
    assert (
        main(["expr", "eval", "a BETWEEN 0 AND 3", "--dialect", "sql92", "--type", "a=int", "--prop", "a=2"])
        == 0
    )
    assert json.loads(capsys.readouterr().out) == {"value": True, "error": None}


def test_check_sql92(capsys: pytest.CaptureFixture[str]) -> None:
    selector = "((targetUser = 'all') OR (targetUser = 'phil')) AND (sender NOT IN ('dan', 'harry'))"
    assert main(["expr", "check", selector, "--dialect", "sql92"]) == 0


@pytest.mark.parametrize(
    ("expression", "props", "expected"),
    [
        ("a*x+b>0", ["a=2", "x=3", "b=-5"], {"value": True, "error": None}),
        ("a*x+b>0", ["a=2", "x=3", "b=-7"], {"value": False, "error": None}),
        ("a/b > 0", ["a=1", "b=0"], {"value": False, "error": "arithmetic"}),
        ("a > 0", [], {"value": False, "error": "name"}),
    ],
)
def test_eval_prints_the_outcome_as_json(
    expression: str, props: list[str], expected: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["expr", "eval", expression, "--type", "a=int", "--type", "x=int", "--type", "b=int"]
    for prop in props:
        args += ["--prop", prop]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out) == expected


def test_eval_undecodable_prop_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["expr", "eval", "a > 0", "--type", "a=int", "--prop", "a=ten"]) == 2
    assert "--prop a" in capsys.readouterr().err
