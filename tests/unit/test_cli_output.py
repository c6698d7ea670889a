"""``-o table|json|yaml``: one flag and one printer (router/cli/output.py) on every command that prints data."""

from __future__ import annotations

import argparse
import json

import pytest
import yaml

from subroute.cli import output
from subroute.cli.main import build_parser, parse
from subroute.spark.plan import Example, PlanResult, plan_document
from subroute.spark.report import GroupStats, Report, report_document

# every command that prints data, with what it needs besides the format
DATA_COMMANDS = [
    ["config", "get"],
    ["config", "topics", "-f", "x.yaml"],
    ["explain", "--app", "a"],
    ["plan", "-f", "x.yaml"],
    ["dlq", "list", "A"],
    ["dlq", "show", "A"],
    ["status"],
]


@pytest.mark.parametrize("command", DATA_COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("fmt", output.FORMATS)
def test_every_data_command_takes_o_table_json_yaml(command: list[str], fmt: str) -> None:
    assert parse(build_parser(), [*command, "-o", fmt]).output == fmt
    assert parse(build_parser(), [*command, "--output", fmt.upper()]).output == fmt


def test_spark_report_takes_the_format_as_o_or_format_since_output_is_its_parquet_root() -> None:
    args = parse(build_parser(), ["spark", "report", "--output", "/data", "-o", "json"])
    assert (args.output, args.format) == ("/data", "json")
    assert parse(build_parser(), ["spark", "report", "--output", "/d", "--format", "yaml"]).format == "yaml"


def test_text_is_still_accepted_for_table_and_a_bad_format_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse(build_parser(), ["dlq", "list", "A", "-o", "text"]).output == "table"
    with pytest.raises(SystemExit) as exited:
        parse(build_parser(), ["dlq", "list", "A", "-o", "xml"])
    assert exited.value.code == 2
    assert "'xml': expected one of table, json, yaml" in capsys.readouterr().err


def test_emit_prints_the_document_or_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    document = {"app": "a", "counts": (1, 2), "nothing": None}
    output.emit("json", document, lambda: "unused")
    assert json.loads(capsys.readouterr().out) == {"app": "a", "counts": [1, 2], "nothing": None}
    output.emit("yaml", document, lambda: "unused")
    assert yaml.safe_load(capsys.readouterr().out) == {"app": "a", "counts": [1, 2], "nothing": None}
    output.emit("table", document, lambda: "for people")
    assert capsys.readouterr().out == "for people\n"


def test_render_table_aligns_columns_numbers_to_the_right() -> None:
    text = output.render_table(("name", "count"), [("a", 5), ("longer", 1234), ("none", None)])
    assert text.splitlines() == ["name    count", "a           5", "longer   1234", "none        -"]


def test_plan_and_report_documents_hold_every_figure() -> None:
    result = PlanResult(
        current_version=7,
        proposed="new.yaml",
        topics={"orders": 30},
        missing_topics=("gone",),
        tables={"billing": {("small", "(pending)"): 4, ("all", "all"): 26}},
        unmatched=4,
        examples=[Example("orders", 0, 5, ("billing",), (("Amount", b"100"), ("Empty", None)))],
        config_topic="subroute.config",
    )
    document = json.loads(json.dumps(plan_document(result)))
    assert document["current_version"] == 7 and document["records"] == 30
    assert document["apps"]["billing"] == {
        "records": 30,
        "moved": 4,
        "transitions": [
            {"from": "small", "to": "(pending)", "records": 4},
            {"from": "all", "to": "all", "records": 26},
        ],
    }
    assert document["examples"][0]["headers"] == [["Amount", "100"], ["Empty", None]]
    assert document["missing_topics"] == ["gone"] and document["written"] is False

    report = Report([GroupStats("billing", "vip", 10, (1.0, 2.0, None))], {"billing": 3}, {"billing": 1})
    assert json.loads(json.dumps(report_document(report))) == {
        "groups": [
            {
                "app": "billing",
                "group": "vip",
                "messages": 10,
                "latency_ms": {"p50": 1.0, "p95": 2.0, "p99": None},
            }
        ],
        "apps": [{"app": "billing", "pending": 3, "dead_letters": 1}],
    }


def test_output_argument_defaults() -> None:
    parser = argparse.ArgumentParser()
    output.add_output_argument(parser, default=output.YAML)
    assert parser.parse_args([]).output == "yaml"
